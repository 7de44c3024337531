"""Mutants, bad input and the TransformerLens export of the gauge variants
(:mod:`constructions.circuit_gauges`, checked in :mod:`theorems.areas.circuits.gauges`)."""

from __future__ import annotations

import pytest
import torch

from constructions.circuit_cases import all_cases
from constructions.circuit_gauges import (
    PERMUTATION,
    PERMUTED_HEADS,
    dyadic_gauge,
    gauge_size,
    head_renaming,
    permute_heads,
    permuted_variant,
    random_rotation,
    reparametrised_variant,
    rotation_variant,
)
from constructions.circuit_variants import SPURIOUS_HEADS, spurious_head_variant
from constructions.circuits import Edge, induction_circuit
from constructions.induction_heads import compact_induction, two_layer_induction
from theorems.areas.circuits import earlier_occurrence, gauges
from theorems.evidence import expect_failure

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


def rounding_free_rotation(model):
    """The rotation's weight bounds without rounding: no defect, no product rounding."""
    return gauges.rotation(model, u_scale=0.0, defect=0.0)


def rounding_free_reparametrisation(model):
    return gauges.reparametrised(model, u_scale=0.0)


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
    expect_failure(gauges.same_function_check(gauges=(broken,)))


@pytest.mark.mutant("circuits.variants-same-function")
@pytest.mark.parametrize("rounding_free", [rounding_free_rotation,
                                           rounding_free_reparametrisation])
def test_the_gauges_are_not_exact_in_floating_point(rounding_free):
    # the running bound with u = 0 and exact weights claims f_g = f bit for bit: false
    expect_failure(gauges.same_function_check(gauges=(rounding_free,), u=0.0))


@pytest.mark.mutant("circuits.variants-same-function")
def test_the_head_variants_are_not_bit_exact():
    # with u = 0 the running bound claims the permuted (and the spurious) variant equal f bit
    # for bit: false at S = 4, n = 8 on the all-zero prompt (an ulp, 2.4e-56)
    expect_failure(gauges.same_function_check(gauges=(), u=0.0))
    expect_failure(earlier_occurrence.same_function_check(u=0.0))


@pytest.mark.mutant("circuits.variants-same-function")
def test_a_permutation_that_mixes_heads_changes_the_function():
    expect_failure(gauges.same_function_check(gauges=(), permuted=mixed_up_permutation))


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
    expect_failure(gauges.circuit_check(gauges=(gauge,), circuit=adding(("input", "a1.h0",
                                                                           "v"))))


@pytest.mark.mutant("circuits.variants-circuit")
def test_a_gauged_circuit_missing_an_edge_is_not_sufficient():
    expect_failure(gauges.circuit_check(gauges=(gauges.rotation,),
                                        circuit=dropping("a0.h0->a1.h0<k>")))


@pytest.mark.mutant("circuits.variants-circuit")
def test_rounding_free_bounds_fail_the_gauged_circuit():
    # sufficiency with E = 0 claims the rotated one-hot variant's move is exactly 0
    expect_failure(gauges.circuit_check(gauges=(rounding_free_rotation,), u=0.0))


def renamed_before_the_permutation(model):
    """The permuted variant with the spurious variant's renaming: its circuit then names
    layer 1's spurious head (a1.h1), not the real one."""
    return permuted_variant(model), SPURIOUS_HEADS, 0


@pytest.mark.mutant("circuits.variants-circuit")
def test_a_permuted_circuit_must_follow_the_heads():
    expect_failure(earlier_occurrence.sufficiency_check(
        variants=(renamed_before_the_permutation,)))


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
    cases = all_cases()
    for name in GAUGE_CASES:
        model, circuit = cases[name].instance("smoke")
        assert circuit.d_model == model.d_model and len(circuit.edges) == 3
        assert cases[name].claims == ("circuits.variants-same-function",
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
    from constructions.transformer_lens import (
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
    "circuit_gauges.random_rotation": lambda: {"size": 4, "seed": 0},
    "circuit_gauges.rotation_variant": lambda: {"model": MODEL, "seed": 0},
    "circuit_gauges.dyadic_gauge": lambda: {"size": 4},
    "circuit_gauges.gauge_size": lambda: {"width": 5},
    "circuit_gauges.reparametrised_variant": lambda: {"model": MODEL},
    "circuit_gauges.permute_heads": lambda: {"model": spurious_head_variant(MODEL),
                                             "permutations": PERMUTATION},
    "circuit_gauges.head_renaming": lambda: {"permutations": PERMUTATION},
    "circuit_gauges.permuted_variant": lambda: {"model": MODEL},
}
