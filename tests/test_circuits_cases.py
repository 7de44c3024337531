"""Mutants and bad input for the dense variants of the majority head and one-step GD.

Each mutant breaks a gauge (half applied, or with a matrix that does not fix the direction the
circuit rests on), gives the spurious head a path to the read-out, or adds a spurious edge to
the circuit, and asserts with ``expect_failure`` that the check then fails.
"""

from __future__ import annotations

import pytest
import torch
from killed import failed_assertion
from test_circuits import icl_adding, majority_adding  # the circuits area's mutant helpers

from constructions.circuits import (
    LSAEdgeView,
    MultiHeadLSA,
    fixing_ones,
    icl_circuit,
    ln_rotation_variant,
    lsa_patched_prediction,
    multi_head_magnitude,
    multi_head_patched_prediction,
    ones_rotation,
    qk_gauge_variant,
    shift_label,
)
from constructions.circuits.icl_variants import SPURIOUS_HEADS, spurious_head_variant
from constructions.circuits.majority_variants import _rebuilt
from constructions.icl_regression import one_step_gd, prompt
from constructions.layernorm import majority_head
from theorems.areas.circuits import icl, majority, majority_variants

# --- the majority head's variants -------------------------------------------------------------


def wrong_inverse_gauge(model):
    """W_K -> W_K M instead of W_K M^{-T}: the scores change, the keys leave 1's complement."""
    a = model.attention
    M = fixing_ones(a.W_Q.shape[1]).to(a.W_Q)
    return _rebuilt(model, model.embeddings.detach().clone(), a.W_Q[0] @ M, a.W_K[0] @ M,
                    a.W_V[0].clone())


def unfixed_gauge(model):
    """W_Q -> W_Q M, W_K -> W_K M^{-T} with an M that does not fix 1^T: the scores are
    unchanged in exact arithmetic, but the keys are no longer orthogonal to the queries'
    direction, so their rounding is not certified."""
    a = model.attention
    d = a.W_Q.shape[1]
    G = torch.randn(d, d, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    M = (torch.eye(d, dtype=torch.float64) + 0.5 * G / torch.linalg.matrix_norm(G, 2)).to(a.W_Q)
    return _rebuilt(model, model.embeddings.detach().clone(), a.W_Q[0] @ M,
                    a.W_K[0] @ torch.linalg.inv(M).T, a.W_V[0].clone())


def half_rotation(model):
    """The LayerNorm rotation with W_V left unrotated: values no longer one-hot."""
    a = model.attention
    R = ones_rotation(model.embeddings.shape[1]).to(a.W_Q)
    return _rebuilt(model, model.embeddings.detach() @ R, R.T @ a.W_Q[0], R.T @ a.W_K[0],
                    a.W_V[0].clone())


def generic_rotation(model):
    """A dense orthogonal R with R 1 != 1: it does not commute with the LayerNorm."""
    a = model.attention
    d = model.embeddings.shape[1]
    A = torch.randn(d, d, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    R = torch.linalg.qr(A)[0].to(a.W_Q)
    return _rebuilt(model, model.embeddings.detach() @ R, R.T @ a.W_Q[0], R.T @ a.W_K[0],
                    R.T @ a.W_V[0])


def perturbed_output(model):
    """qk_gauge_variant with W_O moved by 1e-9 relatively: scores and values pass, the output
    comparison must catch it."""
    variant = qk_gauge_variant(model)
    with torch.no_grad():
        variant.attention.W_O.mul_(1 + 1e-9)
    return variant


@pytest.mark.mutant("circuits.majority-variants-same-function")
@pytest.mark.parametrize("broken, sentence", [
    (wrong_inverse_gauge, "is not rounding-sized"),   # the scores' sentence
    (unfixed_gauge, "is not rounding-sized"),
    (generic_rotation, "is not rounding-sized"),
    (half_rotation, "from one-hot"),                  # the values' sentence
    (perturbed_output, "moved the output by"),        # the outputs' sentence
])
def test_a_broken_majority_gauge_fails_the_same_function_check(broken, sentence):
    report = failed_assertion(majority_variants.same_function_check(variants=(broken,)))
    assert sentence in report, report


@pytest.mark.mutant("circuits.majority-variants-circuit")
@pytest.mark.parametrize("variant", [qk_gauge_variant, ln_rotation_variant])
@pytest.mark.parametrize("minimal", [False, True])
def test_a_spurious_edge_fails_on_the_majority_variants(variant, minimal):
    report = failed_assertion(majority.necessity_check(
        circuit=majority_adding("input", "a0.h0", "k"), minimal=minimal, variant=variant))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.majority-variants-circuit")
def test_an_uncertified_gauge_breaks_majority_sufficiency():
    report = failed_assertion(majority.sufficiency_check(variant=unfixed_gauge))
    assert "is not rounding-sized" in report, report


def test_the_majority_variants_are_dense():
    # (that M fixes 1^T and R fixes 1 up to rounding is what the claims' rounding-sized score
    # bound needs; the unfixed_gauge and generic_rotation mutants show that check fail without)
    model = majority_head(4, 9)
    assert bool((fixing_ones(9) != 0).all()) and bool((ones_rotation(9) != 0).all())
    for variant in (qk_gauge_variant(model), ln_rotation_variant(model)):
        assert bool((variant.attention.W_K[0] != 0).all())    # dense, not axis-aligned
        assert variant.attention.n_heads == 1 and variant.vocab_size == 4


@pytest.mark.parametrize("call, error, name", [
    (lambda: qk_gauge_variant("model"), TypeError, "model"),
    (lambda: qk_gauge_variant(majority_head(3, 5, normalize=False)), ValueError, "model"),
    (lambda: ln_rotation_variant(majority_head(3, 5), seed=-1), ValueError, "seed"),
    (lambda: fixing_ones(4, strength=1.0), ValueError, "strength"),
    (lambda: fixing_ones(1), ValueError, "d"),
    (lambda: ones_rotation(1), ValueError, "d"),
    (lambda: spurious_head_variant("model"), TypeError, "model"),
    (lambda: spurious_head_variant(one_step_gd(2, 0.5), scale=0.0), ValueError, "scale"),
    (lambda: MultiHeadLSA([]), TypeError, "heads"),
    (lambda: MultiHeadLSA([one_step_gd(2, 0.5), one_step_gd(3, 0.5)]), ValueError, "heads"),
    (lambda: LSAEdgeView(one_step_gd(2, 0.5, mask_query=False)), ValueError, "model"),
    (lambda: multi_head_patched_prediction(spurious_head_variant(one_step_gd(2, 0.5)), ICL_Z,
                                           ICL_Z, ("a0.h2->logits",)), ValueError, "patched"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()


# --- one-step GD's spurious head --------------------------------------------------------------

def leaky_spurious(model):
    """spurious_head_variant whose spurious head also writes into the label row."""
    variant = spurious_head_variant(model)
    with torch.no_grad():
        variant.heads[0].W_PV[-1] = 0.3
    return variant


@pytest.mark.mutant("circuits.icl-spurious-head")
def test_a_spurious_head_that_reaches_the_readout_changes_the_prediction():
    report = failed_assertion(icl.same_multi_head_prediction_check(variant=leaky_spurious))
    assert "the spurious-head variant changed the prediction" in report, report


@pytest.mark.mutant("circuits.icl-spurious-head")
def test_a_spurious_head_that_reaches_the_readout_breaks_sufficiency():
    report = failed_assertion(icl.sufficiency_check(**{**icl.SPURIOUS, "variant": leaky_spurious}))
    assert "when the edges outside the circuit were patched" in report, report


@pytest.mark.mutant("circuits.icl-spurious-head")
@pytest.mark.parametrize("minimal", [False, True])
def test_a_spurious_edge_fails_on_the_spurious_head_variant(minimal):
    report = failed_assertion(icl.necessity_check(circuit=icl_adding("input", "a0.h0", "k"),
                                                  minimal=minimal, magnitude=multi_head_magnitude,
                                                  **icl.SPURIOUS))
    assert "moved the prediction by" in report, report


MAJORITY_TOKENS = torch.tensor([[0, 2, 2, 1]])
MAJORITY_CORRUPTED = torch.tensor([[0, 1, 2, 1]])
ICL_MODEL = one_step_gd(2, 0.5)
ICL_Z = prompt(torch.tensor([[1.0, 0.5], [-0.3, 2.0]], dtype=torch.float64),
               torch.tensor([0.2, -1.0], dtype=torch.float64),
               torch.tensor([-0.3, 2.0], dtype=torch.float64))


def test_the_multi_head_patching_and_the_edge_view_repeat_the_single_head_bits():
    corrupted = shift_label(ICL_Z, 1, 1.5)
    for patched in [(), ("input->a0.h0<v>",), ("a0.h0->logits",), ("input->a0.h0<k>",
                                                                     "input->logits")]:
        assert torch.equal(multi_head_patched_prediction(ICL_MODEL, ICL_Z, corrupted, patched),
                           lsa_patched_prediction(ICL_MODEL, ICL_Z, corrupted, patched))
    variant = spurious_head_variant(ICL_MODEL)
    assert torch.equal(LSAEdgeView(variant)(ICL_Z), ICL_MODEL.predict(ICL_Z))
    assert set(LSAEdgeView(variant).hook_names()) == {
        e.name for e in icl_circuit(2).relabelled(SPURIOUS_HEADS, 2, 3).complement()
    } | {"input->a0.h1<v>", "a0.h1->logits"}
    assert bool((variant.heads[0].W_KQ != 0).all())          # dense spurious head


PUBLIC_API_EXAMPLES = {
    "circuits.fixing_ones": lambda: {"d": 5},
    "circuits.ones_rotation": lambda: {"d": 5},
    "circuits.qk_gauge_variant": lambda: {"model": majority_head(3, 5)},
    "circuits.ln_rotation_variant": lambda: {"model": majority_head(3, 5)},
    "circuits.lsa_spurious_head_variant": lambda: {"model": ICL_MODEL},
    "circuits.multi_head_patched_prediction": lambda: {
        "model": spurious_head_variant(ICL_MODEL), "clean": ICL_Z,
        "corrupted": shift_label(ICL_Z, 0, 1.0), "patched": ("input->a0.h1<v>",)},
    "circuits.multi_head_magnitude": lambda: {"model": ICL_MODEL, "Z_V": ICL_Z,
                                                  "Z_K": ICL_Z, "Z_Q": ICL_Z},
    "circuits.majority_hooks": lambda: {"model": majority_head(3, 5)},
    "circuits.lsa_hooks": lambda: {"model": ICL_MODEL},
    "circuits.sample_token_resamplings": lambda: {
        "generator": torch.Generator().manual_seed(0), "batch": 2, "vocab_size": 3, "d": 5,
        "length": 4},
    "circuits.token_metric": lambda: {"output": majority_head(3, 5)(MAJORITY_TOKENS),
                                          "clean": MAJORITY_TOKENS,
                                          "corrupted": MAJORITY_CORRUPTED},
    "circuits.sample_label_shifts": lambda: {
        "generator": torch.Generator().manual_seed(0), "batch": 2, "d": 2, "eta": 0.5, "n": 3},
    "circuits.prediction_metric": lambda: {"output": ICL_MODEL.predict(ICL_Z[None]),
                                               "clean": ICL_Z[None],
                                               "corrupted": shift_label(ICL_Z, 0, 1.0)[None]},
}
PUBLIC_API_ACCEPTED = {
    # the classes are read off the output (V tokens): one more class is a head over one more
    # token, and prompts over fewer tokens are valid prompts for it
    ("circuits.token_metric", "output"): ("mismatched",),
}
