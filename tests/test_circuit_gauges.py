"""Mutants, bad input and the TransformerLens export of the gauge variants
(:mod:`constructions.circuits.gauges`, checked in :mod:`theorems.areas.circuits.gauges`)."""

from __future__ import annotations

import pytest
import torch
from killed import failed_assertion

from constructions.circuits import (
    PERMUTATION,
    PERMUTED_HEADS,
    SPURIOUS_HEADS,
    Edge,
    all_cases,
    dyadic_gauge,
    gauge_size,
    head_renaming,
    induction_circuit,
    permute_heads,
    permuted_variant,
    random_rotation,
    reparametrised_variant,
    rotation_variant,
    spurious_head_variant,
)
from constructions.induction_heads import compact_induction, two_layer_induction
from theorems.areas.circuits import earlier_occurrence, gauges

GAUGE_CASES = ("two-layer-induction-rotated", "compact-induction-rotated",
               "two-layer-induction-reparametrised", "compact-induction-reparametrised",
               "two-layer-induction-permuted-heads")


def _pad(W, m):
    return torch.cat([W, W.new_zeros(*W.shape[:2], m - W.shape[2])], 2)


def non_orthogonal_rotation(model):
    """The rotation built from (1 + 2^-20) R, which is not orthogonal, against the bound the
    claim gives the orthogonal R: every weight scaled by 1 + 2^-20 is that variant."""
    variant, errors = gauges.rotation(model)
    with torch.no_grad():
        for tensor in (variant.W_E, variant.W_pos, variant.W_U):
            tensor.mul_(1 + 2.0**-20)
        for layer in variant.layers:
            for tensor in (layer.W_Q, layer.W_K, layer.W_V, layer.W_O):
                tensor.mul_(1 + 2.0**-20)
    return variant, errors


def key_gauge_not_inverted(model):
    """The reparametrisation with W_K -> [W_K, 0] A instead of A^{-T}."""
    variant, errors = gauges.reparametrised(model)
    with torch.no_grad():
        for layer, original in zip(variant.layers, model.layers, strict=True):
            A, _ = dyadic_gauge(gauge_size(original.W_K.shape[2]))
            layer.W_K.copy_(_pad(original.W_K, A.shape[0]) @ A)
    return variant, errors


def value_gauge_transposed(model):
    """The reparametrisation with W_O -> B^T [W_O; 0] instead of B^{-1}: B is not orthogonal."""
    variant, errors = gauges.reparametrised(model)
    with torch.no_grad():
        for layer, original in zip(variant.layers, model.layers, strict=True):
            B, _ = dyadic_gauge(gauge_size(original.W_V.shape[2]))
            W_O = original.W_O
            padded = torch.cat([W_O, W_O.new_zeros(W_O.shape[0], B.shape[0] - W_O.shape[1],
                                                   W_O.shape[2])], 1)
            layer.W_O.copy_(B.T @ padded)
    return variant, errors


def off_by_2_to_the_minus_24(gauge):
    """``gauge`` with every stored weight of its variant scaled by 1 + 2^-24 (float32's unit
    roundoff), its derived float64 bounds kept: the logits move by a first-order change of
    relative size 2^-24, not by a rounding. For the reparametrisation that is, measured, 238
    to 3e5 times the derived logit bound on the check's explicit examples. (For the rotation,
    whose bound carries the allowed defect 2^-40 of R, 2^-24 is only 0.6 to 65 times it:
    :func:`non_orthogonal_rotation`'s 2^-20 is 10 to 1000 times.)"""
    def broken(model):
        variant, errors = gauge(model)
        with torch.no_grad():
            for tensor in (variant.W_E, variant.W_pos, variant.W_U):
                tensor.mul_(1 + 2.0**-24)
            for layer in variant.layers:
                for tensor in (layer.W_Q, layer.W_K, layer.W_V, layer.W_O):
                    tensor.mul_(1 + 2.0**-24)
        return variant, errors
    broken.__name__ = f"{gauge.__name__}_off_by_2^-24"
    return broken


def leaky_spurious_heads(model):
    """The spurious-head variant with layer 1's spurious head (head 0) also writing into the
    original coordinates, which the unembedding reads (its W_O was dense on the junk ones
    only)."""
    variant = spurious_head_variant(model)
    with torch.no_grad():
        variant.layers[1].W_O[0][:, : model.d_model] += 0.25
    return variant


def mixed_up_permutation(model):
    """The heads permuted, but the spurious head of layer 1 given the real one's W_O: it then
    writes into the out block the unembedding reads."""
    variant = permuted_variant(model)
    with torch.no_grad():
        variant.layers[1].W_O[1][:, : model.d_model] += 0.25
    return variant


@pytest.mark.mutant("circuits.variants-same-function")
@pytest.mark.parametrize("broken", [non_orthogonal_rotation, key_gauge_not_inverted,
                                    value_gauge_transposed])
def test_a_broken_gauge_changes_the_function(broken):
    report = failed_assertion(gauges.same_function_check(gauges=(broken,)))
    assert "a logit moved by" in report, report


@pytest.mark.mutant("circuits.variants-same-function")
def test_reparametrised_weights_off_by_float32_rounding_change_the_function():
    # The bound sees the reparametrised weights off by float32's rounding (a first-order
    # change, whatever the kernels); the rotation's like mutant is non_orthogonal_rotation.
    # These replace mutants that dropped the bound's rounding terms (u = 0) and were killed
    # only by rounding differences, which a machine's kernels need not make.
    report = failed_assertion(gauges.same_function_check(
                   gauges=(off_by_2_to_the_minus_24(gauges.reparametrised),)))
    assert "a logit moved by" in report, report


@pytest.mark.mutant("circuits.variants-same-function")
def test_a_spurious_head_writing_where_the_model_reads_changes_the_function():
    # The sentence "the spurious heads write where nothing reads": broken by 0.25 times the
    # spurious head's output on the coordinates W_U reads, far beyond the running bound (this
    # replaces a mutant that dropped the rounding terms, u = 0, and was killed by a one-ulp
    # difference on one prompt that another machine's kernels do not make).
    # (measured: 0.26 against a bound of 6.7e-11; the value gauge's part is unchanged)
    report = failed_assertion(earlier_occurrence.same_function_check(
        spurious_variant=leaky_spurious_heads))
    assert "the spurious-head variant moved the logits by" in report, report


@pytest.mark.mutant("circuits.variants-same-function")
def test_a_permutation_that_mixes_heads_changes_the_function():
    report = failed_assertion(gauges.same_function_check(gauges=(), permuted=mixed_up_permutation))
    assert "the permuted heads moved a logit by" in report, report


def adding(edge):
    def circuit(kind, S, n, corruption):
        return induction_circuit(kind, S, n, corruption).with_edge(Edge(*edge, "spurious"))
    return circuit


def dropping(name):
    def circuit(kind, S, n, corruption):
        return induction_circuit(kind, S, n, corruption).without(name)
    return circuit


@pytest.mark.mutant("circuits.variants-circuit")
@pytest.mark.parametrize("gauge", [gauges.rotation, gauges.reparametrised])
def test_a_spurious_edge_is_not_necessary_on_the_gauged_variants(gauge):
    # input -> a1.h0<v> moves the metric by 0 (one-hot) or <= 2 eps d (compact)
    report = failed_assertion(gauges.circuit_check(gauges=(gauge,),
                                                   circuit=adding(("input", "a1.h0", "v"))))
    assert "input->a1.h0<v> moved the metric by" in report, report


@pytest.mark.mutant("circuits.variants-circuit")
def test_a_gauged_circuit_missing_an_edge_is_not_sufficient():
    # (sufficiency's mutant: the dropped edge moves the metric by the necessity margin. An
    # earlier mutant set E = 0, u = 0 and was killed only by rounding differences, which a
    # machine's kernels need not make; it is gone.)
    report = failed_assertion(gauges.circuit_check(gauges=(gauges.rotation,),
                                                   circuit=dropping("a0.h0->a1.h0<k>")))
    assert "patching the complement moved the metric by" in report, report


def renamed_before_the_permutation(model):
    """The permuted variant with the spurious variant's renaming: its circuit then names
    layer 1's spurious head (a1.h1), not the real one."""
    return permuted_variant(model), SPURIOUS_HEADS, 0


@pytest.mark.mutant("circuits.variants-circuit")
def test_a_permuted_circuit_must_follow_the_heads():
    report = failed_assertion(earlier_occurrence.sufficiency_check(
                   variants=(renamed_before_the_permutation,)))
    assert "when the edges outside the circuit were patched" in report, report


# --- the variants themselves ------------------------------------------------------------------

def test_the_variants_are_dense_and_not_axis_aligned():
    for build in (two_layer_induction, compact_induction):
        model = build(5, 7)
        rotated = rotation_variant(model)
        # every residual-stream row or column of a map that is not identically zero is dense
        # (a zero column of W_Q stays zero: R^T 0 = 0)
        assert bool((rotated.W_E != 0).all()) and bool((rotated.W_U != 0).all())
        for layer, original in zip(rotated.layers, model.layers, strict=True):
            for new, old in ((layer.W_Q, original.W_Q), (layer.W_K, original.W_K),
                             (layer.W_V, original.W_V)):
                used = (old[0] != 0).any(0)
                assert bool((new[0][:, used] != 0).all())
            assert bool((layer.W_O[0] != 0).all())
        G, G_inv = dyadic_gauge(16)
        assert torch.equal(G @ G_inv, torch.eye(16, dtype=torch.float64))   # exact: dyadic
        assert not torch.equal(G.T @ G, torch.eye(16, dtype=torch.float64))  # not orthogonal
        reparametrised = reparametrised_variant(model)
        for layer, original in zip(reparametrised.layers, model.layers, strict=True):
            for new, old in ((layer.W_Q, original.W_Q), (layer.W_V, original.W_V)):
                rows = (old[0] != 0).any(-1)
                assert bool((new[0][rows] != 0).all())  # every row that reads is dense
    R = random_rotation(41)
    assert gauges.orthogonality_defect(R) <= gauges.ROTATION_DEFECT
    assert gauges.orthogonality_defect(R * (1 + 2.0**-20)) > gauges.ROTATION_DEFECT


def test_the_one_hot_reparametrisation_stores_exact_maps():
    # every entry of a one-hot map times the dyadic gauge has one non-zero term: exact
    errors = gauges.reparametrised_errors(two_layer_induction(5, 7))
    assert all(float(e.abs().max()) == 0 for layer in errors["layers"] for e in layer.values())
    compact = gauges.reparametrised_errors(compact_induction(5, 7))
    assert float(compact["layers"][0]["W_Q"].max()) > 0   # the rotation's two terms round


def test_the_permuted_variant_renames_the_circuit():
    assert PERMUTED_HEADS == {"a0.h0": "a0.h1", "a1.h0": "a1.h0"}
    assert head_renaming(PERMUTATION) == {"a0.h0": "a0.h0", "a0.h1": "a0.h1",
                                          "a1.h1": "a1.h0", "a1.h0": "a1.h1"}
    circuit = all_cases()["two-layer-induction-permuted-heads"].instance("smoke")[1]
    assert circuit.edge_names == {"input->a0.h1<v>", "a0.h1->a1.h0<k>", "a1.h0->logits"}
    model = two_layer_induction(4, 6)
    spurious = spurious_head_variant(model)
    swapped = permute_heads(spurious, PERMUTATION)
    assert torch.equal(swapped.layers[1].W_Q[0], spurious.layers[1].W_Q[1])


def test_the_gauge_cases_are_registered():
    from theorems.areas.circuits._cases import claims_of

    cases = all_cases()
    for name in GAUGE_CASES:
        model, circuit = cases[name].instance("smoke")
        assert circuit.d_model == model.d_model and len(circuit.edges) == 3
        assert claims_of(cases[name])[:2] == ("circuits.variants-same-function",
                                              "circuits.variants-circuit")


MODEL = two_layer_induction(4, 6)


@pytest.mark.parametrize("call, error, name", [
    (lambda: random_rotation(0), ValueError, "size"),
    (lambda: random_rotation(4, -1), ValueError, "seed"),
    (lambda: rotation_variant("model"), TypeError, "model"),
    (lambda: rotation_variant(MODEL, seed=1.5), TypeError, "seed"),
    (lambda: dyadic_gauge(8), ValueError, "size"),
    (lambda: gauge_size(0), ValueError, "width"),
    (lambda: reparametrised_variant(None), TypeError, "model"),
    (lambda: permute_heads(MODEL, [[0]]), ValueError, "permutations"),
    (lambda: permute_heads(spurious_head_variant(MODEL), [[0, 0], [0, 1]]), ValueError,
     "permutations"),
    (lambda: permute_heads(spurious_head_variant(MODEL), [[True, False], [0, 1]]),
     ValueError, "permutations"),
    (lambda: head_renaming([]), ValueError, "permutations"),
    (lambda: head_renaming([[1, 1]]), ValueError, "permutations"),
    (lambda: permuted_variant(3), TypeError, "model"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()


# --- TransformerLens export with the circuit hooks --------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("name", GAUGE_CASES)
def test_the_gauge_variants_export_with_circuit_hooks(transformer_lens, name):
    from constructions.export import (
        to_transformer_lens,
        transformer_lens_inputs,
        transformer_lens_outputs,
    )

    case = all_cases()[name]
    model, circuit = case.instance("smoke")
    tl_model = to_transformer_lens(model, circuit_hooks=True)
    clean, _ = case.prompts(torch.Generator().manual_seed(0), 3)
    with torch.no_grad():
        logits, cache = tl_model.run_with_cache(**transformer_lens_inputs(model, clean))
        ours = model(clean)
    # the two evaluations of the same formula on the same (gauged) weights, each within the
    # export's derived forward-error bound of exact arithmetic (tests/test_export.py), so
    # within twice it of each other
    from test_export import assert_within, export_error_bound

    bound = export_error_bound(model, cache, from_tokens=True)["logits"][0]
    assert_within(transformer_lens_outputs(model, logits), ours,
                  2 * transformer_lens_outputs(model, bound), f"{name}: the export's logits")
    for source, target in circuit.hook_names().values():
        for hook in (source, target):
            assert hook.split("[")[0] in cache, hook


# --- the public-API fuzz's valid examples (tests/test_public_api.py) --------------------------

PUBLIC_API_EXAMPLES = {
    "circuits.random_rotation": lambda: {"size": 4, "seed": 0},
    "circuits.rotation_variant": lambda: {"model": MODEL, "seed": 0},
    "circuits.dyadic_gauge": lambda: {"size": 4},
    "circuits.gauge_size": lambda: {"width": 5},
    "circuits.reparametrised_variant": lambda: {"model": MODEL},
    "circuits.permute_heads": lambda: {"model": spurious_head_variant(MODEL),
                                             "permutations": PERMUTATION},
    "circuits.head_renaming": lambda: {"permutations": PERMUTATION},
    "circuits.permuted_variant": lambda: {"model": MODEL},
}
