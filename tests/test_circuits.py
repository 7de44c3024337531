"""Mutants and bad input for the circuits area.

Each mutant rebuilds a check of a ``theorems.areas.circuits`` topic module around a wrong
circuit (an edge dropped, a spurious edge added), a broken construction or a broken variant,
and asserts with ``expect_failure`` that the check then fails.
"""

from __future__ import annotations

import functools
import json

import pytest
import torch
from killed import failed_assertion

from constructions.circuits import (
    SPURIOUS_HEADS,
    Circuit,
    Edge,
    all_prompts,
    attention_graph,
    edge_patched_logits,
    gauge_width,
    hadamard,
    icl_circuit,
    induction_circuit,
    induction_mechanism,
    logit_difference,
    lsa_patched_prediction,
    majority_circuit,
    majority_operands,
    majority_patched_output,
    null_space_variant,
    resample_earlier_occurrence,
    resample_next_token,
    resample_token,
    shift_label,
    spurious_head_variant,
    value_gauge_variant,
)
from constructions.icl_regression import one_step_gd, prompt
from constructions.induction_heads import (
    compact_induction,
    compact_parameters,
    two_layer_induction,
)
from constructions.layernorm import majority_head
from theorems.areas.circuits import compact, earlier_occurrence, icl, majority, next_token


def dropping(name):
    """induction_circuit with the edge ``name`` removed."""
    def circuit(*args):
        return induction_circuit(*args).without(name)
    return circuit


def adding(source, target, qkv=None):
    """induction_circuit with a spurious edge added."""
    def circuit(*args):
        return induction_circuit(*args).with_edge(Edge(source, target, qkv, "spurious"))
    return circuit


def unembedding_reads_prev(vocab_size, max_len, **kwargs):
    """two_layer_induction whose W_U also reads the prev block: L0H0 -> logits is no longer a
    zero map, so the circuit misses an edge that matters."""
    model = two_layer_induction(vocab_size, max_len, **kwargs)
    S, n = vocab_size, max_len
    prev = slice((S + 1) + (n + 1), 2 * (S + 1) + (n + 1))
    with torch.no_grad():
        model.W_U[prev] = torch.eye(S + 1, dtype=model.W_U.dtype)
    return model


@pytest.mark.mutant("circuits.induction-sufficient")
@pytest.mark.parametrize("name", ["input->a1.h0<v>", "a1.h0->logits"])
def test_a_circuit_missing_an_edge_is_not_sufficient(name):
    report = failed_assertion(next_token.sufficiency_check(circuit=dropping(name)))
    assert "final logits moved by" in report, report


@pytest.mark.mutant("circuits.induction-sufficient")
def test_a_construction_with_an_extra_path_breaks_sufficiency():
    report = failed_assertion(next_token.sufficiency_check(build=unembedding_reads_prev))
    assert "final logits moved by" in report, report


@pytest.mark.mutant("circuits.induction-necessary")
@pytest.mark.parametrize("edge", [("a0.h0", "a1.h0", "q"), ("input", "a1.h0", "k"),
                                  ("a0.h0", "a1.h0", "k")])
def test_a_spurious_edge_is_not_necessary(edge):
    report = failed_assertion(next_token.necessity_check(circuit=adding(*edge)))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.induction-necessary")
def test_without_recency_the_margin_bound_fails():
    # recency = 0: older matches tie with the induction key, so its weight drops below 1/(1+omega)
    report = failed_assertion(next_token.necessity_check(
        build=functools.partial(two_layer_induction, recency=0.0)))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.induction-minimal")
@pytest.mark.parametrize("edge", [("a0.h0", "a1.h0", "v"), ("input", "a0.h0", "v")])
def test_a_spurious_edge_can_be_dropped(edge):
    report = failed_assertion(next_token.necessity_check(circuit=adding(*edge), minimal=True))
    assert "and the complement moved the metric by" in report, report


# --- the compact construction under next-token resampling --------------------------------------

@pytest.mark.mutant("circuits.compact-sufficient")
@pytest.mark.parametrize("name", ["input->a1.h0<v>", "a1.h0->logits"])
def test_a_compact_circuit_missing_an_edge_is_not_sufficient(name):
    report = failed_assertion(compact.sufficiency_check(circuit=dropping(name)))
    assert "patching the complement moved the metric by" in report, report


@pytest.mark.mutant("circuits.compact-sufficient")
def test_a_blurred_previous_token_head_breaks_compact_sufficiency():
    # beta1 = 1: prev mixes many tokens, so the non-circuit edges move the induction head's
    # pattern far beyond the default construction's derived wrong mass
    report = failed_assertion(compact.sufficiency_check(build=functools.partial(compact_induction,
                                                                                beta1=1.0)))
    assert "patching the complement moved the metric by" in report, report


@pytest.mark.mutant("circuits.compact-sufficient")
def test_the_circle_codes_are_not_exactly_sufficient():
    # the one-hot construction's claim (only rounding may move the metric) is false here:
    # input -> a0.h0<v> and a0.h0 -> a1.h0<k> move it through <u_a, u_tau' - u_tau> != 0
    report = failed_assertion(compact.sufficiency_check(
                   bound=lambda S, n, d, corruption: compact.rounding_allowance(S, n)))
    assert "patching the complement moved the metric by" in report, report


@pytest.mark.mutant("circuits.compact-necessary")
@pytest.mark.parametrize("edge", [("a0.h0", "a1.h0", "k"), ("input", "a0.h0", "v"),
                                  ("input", "a1.h0", "q")])
def test_a_spurious_edge_is_not_necessary_in_the_compact_circuit(edge):
    report = failed_assertion(compact.necessity_check(circuit=adding(*edge)))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.compact-necessary")
def test_without_recency_the_compact_bound_fails():
    # recency = 0: older matches tie with the induction key, so its weight drops below
    # 1 - eps and the move below the derived minimum
    report = failed_assertion(compact.necessity_check(build=functools.partial(compact_induction,
                                                                              recency=0.0)))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.compact-minimal")
@pytest.mark.parametrize("edge", [("a0.h0", "a1.h0", "k"), ("input", "a0.h0", "v")])
def test_a_spurious_edge_can_be_dropped_from_the_compact_circuit(edge):
    report = failed_assertion(compact.necessity_check(circuit=adding(*edge), minimal=True))
    assert "and the complement moved the metric by" in report, report


EARLIER = "resample_earlier_occurrence"


def dropping_for(name, corruption):
    def circuit(kind, S, n, _corruption):
        return induction_circuit(kind, S, n, corruption).without(name)
    return circuit


def adding_for(edge, corruption):
    def circuit(kind, S, n, _corruption):
        return induction_circuit(kind, S, n, corruption).with_edge(Edge(*edge, "spurious"))
    return circuit


@pytest.mark.mutant("circuits.compact-earlier-occurrence-sufficient")
@pytest.mark.parametrize("name", ["input->a0.h0<v>", "a0.h0->a1.h0<k>", "a1.h0->logits"])
def test_a_compact_occurrence_circuit_missing_an_edge_is_not_sufficient(name):
    report = failed_assertion(compact.sufficiency_check(circuit=dropping_for(name, EARLIER),
                                                        corruption=EARLIER))
    assert "patching the complement moved the metric by" in report, report


@pytest.mark.mutant("circuits.compact-earlier-occurrence-necessary")
@pytest.mark.parametrize("edge", [("input", "a1.h0", "v"), ("input", "a1.h0", "q")])
def test_a_spurious_edge_is_not_necessary_in_the_compact_occurrence_circuit(edge):
    report = failed_assertion(compact.necessity_check(circuit=adding_for(edge, EARLIER),
                                                      corruption=EARLIER))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.compact-earlier-occurrence-necessary")
def test_without_the_sink_the_compact_occurrence_bound_fails():
    # sink = 0: with no match the head no longer falls back on BOS (bot)
    report = failed_assertion(compact.necessity_check(build=functools.partial(compact_induction,
                                                                              sink=0.0),
                                                      corruption=EARLIER))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.compact-earlier-occurrence-minimal")
@pytest.mark.parametrize("edge", [("input", "a1.h0", "v"), ("a0.h0", "a1.h0", "q")])
def test_a_spurious_edge_can_be_dropped_from_the_compact_occurrence_circuit(edge):
    report = failed_assertion(compact.necessity_check(circuit=adding_for(edge, EARLIER),
                                                      minimal=True, corruption=EARLIER))
    assert "and the complement moved the metric by" in report, report


def test_the_compact_bounds_separate():
    # rho > 2 omega, so at |tau - tau'| = 1 (the hardest pair) the least necessity move
    # exceeds the sufficiency bound, at every size the checks draw, under both corruptions
    for corruption in ("resample_next_token", EARLIER):
        for S in range(3, 9):
            for n in range(3, 17):
                _, omega = compact.wrong_mass(S, n, corruption)
                assert compact_parameters(S, n).readout > 2 * omega
                top = compact.sufficiency_bound(S, n, compact.code_distance(0, 1, S)[1],
                                                corruption)
                assert compact.least_necessity_move(S, n, corruption) > top


@pytest.mark.mutant("circuits.induction-mechanism")
def test_a_wrong_mechanism_fails():
    def dropped(*args):
        return induction_mechanism(*args).without("a0.h0->a1.h0<k>")

    def spurious(*args):
        return induction_mechanism(*args).with_edge(Edge("a0.h0", "logits"))
    for wrong in (dropped, spurious):
        report = failed_assertion(next_token.mechanism_check(mechanism=wrong))
        assert "!= mechanism" in report, report


def test_mib_json_lists_the_whole_graph():
    circuit = induction_circuit("two_layer", 4, 6)
    data = json.loads(json.dumps(circuit.to_mib_json()))
    assert set(data["edges"]) == {e.name for e in attention_graph(2, 1)}
    assert {k for k, v in data["edges"].items() if v["in_graph"]} == {
        "input->a1.h0<v>", "a1.h0->logits"}
    assert {k for k, v in data["nodes"].items() if v["in_graph"]} == {"input", "a1.h0",
                                                                      "logits"}
    assert circuit.hook_names()["a1.h0->logits"] == ("blocks.1.attn.hook_result[:, :, 0]",
                                                     "blocks.1.hook_resid_post")


def test_patching_nothing_is_the_plain_forward():
    model = two_layer_induction(4, 6)
    clean = torch.tensor([[0, 1, 2, 3, 0]])
    corrupted = resample_next_token(clean, 2, 4)
    # same operations in the same order: with one head, the per-head result path sums one term
    assert torch.equal(edge_patched_logits(model, clean, corrupted, ()), model(clean))
    assert not any(layer.use_attn_result for layer in model.layers)  # restored


MODEL = two_layer_induction(4, 6)
CLEAN = torch.tensor([[0, 1, 2, 3, 0]])


@pytest.mark.parametrize("call, error, name", [
    (lambda: resample_next_token(torch.tensor([[0, 1, 2]]), 3, 4), ValueError, "tokens"),
    (lambda: resample_next_token(torch.tensor([[1, 0, 0]]), 2, 4), ValueError, "tokens"),
    (lambda: resample_next_token(CLEAN, 1, 4), ValueError, "replacement"),
    (lambda: resample_next_token(CLEAN, 0, 4), ValueError, "replacement"),
    (lambda: resample_next_token(CLEAN, 7, 4), ValueError, "replacement"),
    (lambda: resample_next_token(CLEAN, torch.tensor([2, 3]), 4), ValueError, "replacement"),
    (lambda: resample_next_token(CLEAN.float(), 2, 4), TypeError, "tokens"),
    (lambda: induction_circuit("compact", 4, 6, "resample_everything"), ValueError,
     "corruption"),
    (lambda: induction_circuit("three_layer", 4, 6), ValueError, "kind"),
    (lambda: induction_mechanism("two_layer", 0, 6), ValueError, "vocab_size"),
    (lambda: Circuit("c", 2, 1, 8, (Edge("a1.h0", "a0.h0", "q"),)), ValueError, "edges"),
    (lambda: induction_circuit("two_layer", 4, 6).without("input->logits"), ValueError, "name"),
    (lambda: edge_patched_logits(MODEL, CLEAN, CLEAN, ["a2.h0->logits"]), ValueError, "patched"),
    (lambda: edge_patched_logits(MODEL, CLEAN, CLEAN[:, :4], ()), ValueError, "corrupted"),
    (lambda: edge_patched_logits("model", CLEAN, CLEAN, ()), TypeError, "model"),
    (lambda: logit_difference(MODEL(CLEAN), torch.tensor([[0, 1, 2]]), CLEAN), ValueError,
     "clean"),
    (lambda: attention_graph(0, 1), ValueError, "n_layers"),
    (lambda: resample_earlier_occurrence(torch.tensor([[0, 1, 0, 2, 0]]), 3, 4), ValueError,
     "tokens"),                                               # two earlier occurrences
    (lambda: resample_earlier_occurrence(torch.tensor([[1, 0, 0]]), 2, 4), ValueError,
     "tokens"),                                               # j* + 1 = i
    (lambda: resample_earlier_occurrence(CLEAN, 1, 4), ValueError, "replacement"),  # tau
    (lambda: resample_earlier_occurrence(CLEAN, 0, 4), ValueError, "replacement"),  # a
    (lambda: induction_circuit("two_layer", 4, 6, "resample_everything"), ValueError,
     "corruption"),
    (lambda: induction_circuit("two_layer", 4, 6).relabelled([], 2, 8), TypeError, "heads"),
    (lambda: hadamard(8), ValueError, "size"),
    (lambda: spurious_head_variant(spurious_head_variant(MODEL)), ValueError, "model"),
    (lambda: spurious_head_variant(MODEL, junk=0), ValueError, "junk"),
    (lambda: value_gauge_variant("model"), TypeError, "model"),
    (lambda: shift_label(ICL_Z, 2, 1.0), ValueError, "index"),
    (lambda: shift_label(ICL_Z, 0, float("nan")), ValueError, "shift"),
    (lambda: lsa_patched_prediction(ICL_MODEL, ICL_Z, ICL_Z[:, :2], ()), ValueError,
     "corrupted"),
    (lambda: lsa_patched_prediction(ICL_MODEL, ICL_Z[:2], ICL_Z, ()), ValueError, "clean"),
    (lambda: lsa_patched_prediction(ICL_MODEL, ICL_Z, ICL_Z, ["input->a1.h0<v>"]),
     ValueError, "patched"),
    (lambda: lsa_patched_prediction(one_step_gd(2, 0.5, mask_query=False), ICL_Z, ICL_Z, ()),
     ValueError, "model"),
    (lambda: icl_circuit(0), ValueError, "d"),
    (lambda: null_space_variant(ICL_MODEL, scale=0.0), ValueError, "scale"),
    (lambda: resample_token(MAJORITY_TOKENS, 4, 0, 3), ValueError, "position"),
    (lambda: resample_token(MAJORITY_TOKENS, 1, 2, 3), ValueError, "replacement"),
    (lambda: resample_token(MAJORITY_TOKENS, 1, 3, 3), ValueError, "replacement"),
    (lambda: majority_patched_output(MAJORITY, MAJORITY_TOKENS, MAJORITY_TOKENS[:, :2], ()),
     ValueError, "corrupted"),
    (lambda: majority_patched_output(MAJORITY, MAJORITY_TOKENS, MAJORITY_TOKENS, ["x"]),
     ValueError, "patched"),
    (lambda: majority_operands(MODEL, CLEAN), TypeError, "model"),
    (lambda: Edge("input", "logits").hooks(0), ValueError, "n_layers"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()


# --- the earlier-occurrence corruption -------------------------------------------------------

EARLIER_EDGES = ["input->a0.h0<v>", "a0.h0->a1.h0<k>", "a1.h0->logits"]


def query_reads_prev(vocab_size, max_len, **kwargs):
    """two_layer_induction whose induction query also reads the prev block: a0.h0 -> a1.h0<q>
    is no longer a zero map, and the corruption moves row i's prev (the weak weight on j*)."""
    model = two_layer_induction(vocab_size, max_len, **kwargs)
    S, n = vocab_size, max_len
    prev = slice((S + 1) + (n + 1), 2 * (S + 1) + (n + 1))
    with torch.no_grad():
        model.layers[1].W_Q[0][prev, :S] = torch.eye(S + 1, S, dtype=torch.float64) * 50.0
    return model


def leaky_spurious(model):
    """A spurious-head variant whose layer-1 spurious head also writes into the out block,
    which the unembedding reads: a head outside the circuit that matters."""
    variant = spurious_head_variant(model)
    S = model.vocab_size
    out = slice(model.d_model - 1 - (S + 1), model.d_model - 1)   # out sits before const
    with torch.no_grad():
        variant.layers[1].W_O[0][:, out] = 0.5
    return variant, SPURIOUS_HEADS, 0


def non_orthogonal_gauge(model):
    """value_gauge_variant with W_O scaled by 1 + 2^-20: B B^T != I."""
    variant = value_gauge_variant(model)
    with torch.no_grad():
        for layer in variant.layers:
            layer.W_O.mul_(1 + 2.0**-20)
    return variant


@pytest.mark.mutant("circuits.earlier-occurrence-sufficient")
@pytest.mark.parametrize("name", EARLIER_EDGES)
def test_an_earlier_occurrence_circuit_missing_an_edge_is_not_sufficient(name):
    report = failed_assertion(earlier_occurrence.sufficiency_check(circuit=dropping(name)))
    assert "when the edges outside the circuit were patched" in report, report


@pytest.mark.mutant("circuits.earlier-occurrence-sufficient")
def test_a_query_that_reads_prev_breaks_sufficiency():
    report = failed_assertion(earlier_occurrence.sufficiency_check(build=query_reads_prev))
    assert "when the edges outside the circuit were patched" in report, report


@pytest.mark.mutant("circuits.earlier-occurrence-necessary")
@pytest.mark.parametrize("edge", [("input", "a1.h0", "v"), ("input", "a1.h0", "q"),
                                  ("a0.h0", "a1.h0", "q"), ("input", "a0.h0", "k")])
def test_a_spurious_edge_is_not_necessary_under_the_earlier_occurrence(edge):
    report = failed_assertion(earlier_occurrence.necessity_check(circuit=adding(*edge)))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.earlier-occurrence-necessary")
def test_without_the_sink_the_occurrence_bound_fails():
    # sink = 0: with the match gone, the head follows the recency bias to the final key (token
    # a), not BOS, so the corrupted metric is about 0, not <= 1 - 2 w_0
    report = failed_assertion(earlier_occurrence.necessity_check(
                   build=functools.partial(two_layer_induction, sink=0.0)))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.earlier-occurrence-minimal")
@pytest.mark.parametrize("edge", [("input", "a1.h0", "v"), ("a0.h0", "a1.h0", "v")])
def test_a_spurious_edge_can_be_dropped_under_the_earlier_occurrence(edge):
    report = failed_assertion(earlier_occurrence.necessity_check(circuit=adding(*edge),
                                                                 minimal=True))
    assert "and the complement moved the metric by" in report, report


@pytest.mark.mutant("circuits.variants-same-function")
def test_a_spurious_head_that_writes_into_the_readout_changes_the_function():
    report = failed_assertion(earlier_occurrence.same_function_check(
                   spurious_variant=lambda model: leaky_spurious(model)[0]))
    assert "the spurious-head variant moved the logits by" in report, report


@pytest.mark.mutant("circuits.variants-same-function")
def test_a_non_orthogonal_gauge_changes_the_function():
    report = failed_assertion(earlier_occurrence.same_function_check(
        gauge_variant=non_orthogonal_gauge))
    assert "the value gauge moved the logits by" in report, report


@pytest.mark.mutant("circuits.variants-circuit")
def test_a_spurious_head_that_matters_breaks_the_variant_circuit():
    report = failed_assertion(earlier_occurrence.sufficiency_check(variants=(leaky_spurious,)))
    assert "when the edges outside the circuit were patched" in report, report


@pytest.mark.mutant("circuits.variants-circuit")
@pytest.mark.parametrize("minimal", [False, True])
def test_a_spurious_edge_fails_on_the_variants(minimal):
    variants = (earlier_occurrence.spurious, earlier_occurrence.gauge)
    report = failed_assertion(earlier_occurrence.necessity_check(
                   circuit=adding("input", "a1.h0", "v"), minimal=minimal, variants=variants))
    assert "moved the metric by" in report, report


def test_the_variants_keep_the_original_weights_exact():
    model = two_layer_induction(5, 7)
    B = hadamard(16)
    assert torch.equal(B @ B.T, torch.eye(16, dtype=torch.float64))  # exact: entries +-1/4
    gauge = value_gauge_variant(model)
    assert gauge_width(model) == 16 and gauge.layers[1].W_V.shape == (1, model.d_model, 16)
    assert torch.equal(gauge.layers[1].W_V[0] @ gauge.layers[1].W_O[0],
                       model.layers[1].W_V[0] @ model.layers[1].W_O[0])
    spurious = spurious_head_variant(model, junk=3)
    assert spurious.d_model == model.d_model + 3 and spurious.layers[0].n_heads == 2
    assert bool((spurious.layers[1].W_Q[0] != 0).all())  # dense, not axis-aligned
    circuit = induction_circuit("two_layer", 5, 7, "resample_earlier_occurrence")
    renamed = circuit.relabelled(SPURIOUS_HEADS, 2, spurious.d_model)
    assert renamed.edge_names == {"input->a0.h1<v>", "a0.h1->a1.h1<k>", "a1.h1->logits"}
    assert len(renamed.complement()) == 26


def test_the_earlier_occurrence_corruption_removes_the_match():
    clean = torch.tensor([[3, 1, 2, 4, 0, 2, 1, 3]])
    corrupted = resample_earlier_occurrence(clean, 4, 5)
    assert corrupted.tolist() == [[4, 1, 2, 4, 0, 2, 1, 3]]
    model = two_layer_induction(5, 8)
    assert model.predict(clean)[0, -1] == 1 and model.predict(corrupted)[0, -1] == -1
    metric = logit_difference(model(clean), clean, corrupted)   # l_tau - l_bot, bot = class 5
    assert float(metric) > 0.9


# --- the one-step-GD case --------------------------------------------------------------------

def half_step(d, eta):
    """one_step_gd with half the step: it moves the prediction by half the derived amount."""
    return one_step_gd(d, eta / 2)


def label_key(d, eta):
    """one_step_gd whose W_KQ has a y row: the key edge then carries the label shift."""
    model = one_step_gd(d, eta)
    with torch.no_grad():
        model.W_KQ[d, :d] = 1.0
    return model


def icl_dropping(name):
    def circuit(d):
        return icl_circuit(d).without(name)
    return circuit


def icl_adding(source, target, qkv=None):
    def circuit(d):
        return icl_circuit(d).with_edge(Edge(source, target, qkv, "spurious"))
    return circuit


@pytest.mark.mutant("circuits.icl-sufficient")
@pytest.mark.parametrize("name", ["input->a0.h0<v>", "a0.h0->logits"])
def test_an_icl_circuit_missing_an_edge_is_not_sufficient(name):
    report = failed_assertion(icl.sufficiency_check(circuit=icl_dropping(name)))
    assert "when the edges outside the circuit were patched" in report, report


@pytest.mark.mutant("circuits.icl-sufficient")
def test_a_key_that_reads_the_label_breaks_icl_sufficiency():
    report = failed_assertion(icl.sufficiency_check(build=label_key))
    assert "when the edges outside the circuit were patched" in report, report


@pytest.mark.mutant("circuits.icl-necessary")
@pytest.mark.parametrize("edge", [("input", "a0.h0", "k"), ("input", "a0.h0", "q"),
                                  ("input", "logits")])
def test_a_spurious_icl_edge_is_not_necessary(edge):
    report = failed_assertion(icl.necessity_check(circuit=icl_adding(*edge)))
    assert "moved the prediction by" in report, report


@pytest.mark.mutant("circuits.icl-necessary")
def test_half_the_step_misses_the_derived_move():
    report = failed_assertion(icl.necessity_check(build=half_step))
    assert "moved the prediction by" in report, report


@pytest.mark.mutant("circuits.icl-minimal")
@pytest.mark.parametrize("edge", [("input", "a0.h0", "k"), ("input", "logits")])
def test_a_spurious_icl_edge_can_be_dropped(edge):
    report = failed_assertion(icl.necessity_check(circuit=icl_adding(*edge), minimal=True))
    assert "and the complement moved the prediction by" in report, report


def keys_read_labels(model):
    """null_space_variant that also fills W_KQ's y row: no longer in the null space."""
    variant = null_space_variant(model)
    with torch.no_grad():
        variant.W_KQ[-1, :-1] = 0.7
    return variant


def value_reads_x(model):
    """null_space_variant that also fills W_PV's last row: the read-out sees it."""
    variant = null_space_variant(model)
    with torch.no_grad():
        variant.W_PV[-1, :-1] = 0.7
    return variant


@pytest.mark.mutant("circuits.icl-variant")
def test_a_variant_outside_the_null_space_changes_the_prediction():
    report = failed_assertion(icl.same_prediction_check(variant=value_reads_x))
    assert "the null-space variant changed the prediction" in report, report


@pytest.mark.mutant("circuits.icl-variant")
def test_a_variant_whose_keys_read_labels_breaks_sufficiency():
    report = failed_assertion(icl.sufficiency_check(variant=keys_read_labels))
    assert "when the edges outside the circuit were patched" in report, report


@pytest.mark.mutant("circuits.icl-variant")
@pytest.mark.parametrize("minimal", [False, True])
def test_a_spurious_edge_fails_on_the_icl_variant(minimal):
    report = failed_assertion(icl.necessity_check(circuit=icl_adding("input", "a0.h0", "k"),
                                                  minimal=minimal, variant=null_space_variant))
    assert "moved the prediction by" in report, report


def test_patching_nothing_is_the_lsa_prediction():
    X = torch.tensor([[1.0, 0.5], [-0.3, 2.0], [0.7, -1.1]], dtype=torch.float64)
    Z = prompt(X, torch.tensor([0.2, -1.0, 0.4], dtype=torch.float64), X[1])
    model = one_step_gd(2, 0.5)
    # the same operations in the same order as LinearSelfAttention.predict
    assert torch.equal(lsa_patched_prediction(model, Z, shift_label(Z, 1, 1.0), ()),
                       model.predict(Z))


ICL_MODEL = one_step_gd(2, 0.5)
ICL_Z = prompt(torch.tensor([[1.0, 0.5], [-0.3, 2.0]], dtype=torch.float64),
               torch.tensor([0.2, -1.0], dtype=torch.float64),
               torch.tensor([-0.3, 2.0], dtype=torch.float64))


# --- the majority head ------------------------------------------------------------------------

def majority_dropping(name):
    def circuit(d):
        return majority_circuit(d).without(name)
    return circuit


def majority_adding(source, target, qkv=None):
    def circuit(d):
        return majority_circuit(d).with_edge(Edge(source, target, qkv, "spurious"))
    return circuit


@pytest.mark.mutant("circuits.majority-sufficient")
@pytest.mark.parametrize("name", ["input->a0.h0<v>", "a0.h0->logits"])
def test_a_majority_circuit_missing_an_edge_is_not_sufficient(name):
    report = failed_assertion(majority.sufficiency_check(circuit=majority_dropping(name)))
    assert "when the edges outside the circuit were patched" in report, report


@pytest.mark.mutant("circuits.majority-sufficient")
def test_without_layernorm_the_keys_matter():
    # normalize=False: keys are no longer orthogonal to the query, so scores depend on them
    report = failed_assertion(majority.sufficiency_check(
                   build=functools.partial(majority_head, normalize=False)))
    assert "is not rounding-sized" in report, report


@pytest.mark.mutant("circuits.majority-necessary")
@pytest.mark.parametrize("edge", [("input", "a0.h0", "k"), ("input", "a0.h0", "q"),
                                  ("input", "logits")])
def test_a_spurious_majority_edge_is_not_necessary(edge):
    report = failed_assertion(majority.necessity_check(circuit=majority_adding(*edge)))
    assert "moved the metric by" in report, report


@pytest.mark.mutant("circuits.majority-minimal")
@pytest.mark.parametrize("edge", [("input", "a0.h0", "k"), ("input", "logits")])
def test_a_spurious_majority_edge_can_be_dropped(edge):
    report = failed_assertion(majority.necessity_check(circuit=majority_adding(*edge),
                                                       minimal=True))
    assert "and the complement moved the metric by" in report, report


def test_patching_nothing_is_the_majority_head():
    model, tokens = majority_head(3, 5), torch.tensor([[0, 2, 2, 1]])
    # the same operations in the same order as Attention.forward
    assert torch.equal(majority_patched_output(model, tokens, resample_token(tokens, 1, 0, 3),
                                               ()), model(tokens))


MAJORITY = majority_head(3, 5)
MAJORITY_TOKENS = torch.tensor([[0, 2, 2, 1]])


# --- the public-API fuzz's valid examples (tests/test_public_api.py) --------------------------

def _patching() -> dict:
    return {"model": two_layer_induction(4, 6), "clean": CLEAN,
            "corrupted": resample_next_token(CLEAN, 2, 4), "patched": ("a1.h0->logits",)}


PUBLIC_API_EXAMPLES = {
    "circuits.attention_graph": lambda: {"n_layers": 2, "n_heads": 1},
    "circuits.per_head_results": lambda: {"model": two_layer_induction(4, max_len=6)},
    "circuits.induction_circuit": lambda: {"kind": "two_layer", "vocab_size": 4, "max_len": 6},
    "circuits.induction_mechanism": lambda: {"kind": "two_layer", "vocab_size": 4,
                                             "max_len": 6},
    "circuits.resample_next_token": lambda: {"tokens": CLEAN, "replacement": 2,
                                             "vocab_size": 4},
    "circuits.logit_difference": lambda: {"logits": MODEL(CLEAN), "clean": CLEAN,
                                          "corrupted": resample_next_token(CLEAN, 2, 4)},
    "circuits.edge_patched_logits": _patching,
    "circuits.resample_earlier_occurrence": lambda: {"tokens": CLEAN, "replacement": 3,
                                                     "vocab_size": 4},
    "circuits.hadamard": lambda: {"size": 16},
    "circuits.icl_circuit": lambda: {"d": 2},
    "circuits.null_space_variant": lambda: {"model": ICL_MODEL},
    "circuits.majority_circuit": lambda: {"d": 5},
    "circuits.resample_token": lambda: {"tokens": MAJORITY_TOKENS, "position": 1,
                                                "replacement": 0, "vocab_size": 3},
    "circuits.majority_patched_output": lambda: {
        "model": MAJORITY, "clean": MAJORITY_TOKENS,
        "corrupted": resample_token(MAJORITY_TOKENS, 1, 0, 3), "patched": ("a0.h0->logits",)},
    "circuits.majority_operands": lambda: {"model": MAJORITY,
                                                   "tokens": MAJORITY_TOKENS},
    "circuits.shift_label": lambda: {"Z": ICL_Z, "index": 0, "shift": 1.0},
    "circuits.lsa_patched_prediction": lambda: {
        "model": ICL_MODEL, "clean": ICL_Z, "corrupted": shift_label(ICL_Z, 0, 1.0),
        "patched": ("input->a0.h0<v>",)},
    "circuits.lsa_magnitude": lambda: {"model": ICL_MODEL, "Z_V": ICL_Z, "Z_K": ICL_Z,
                                          "Z_Q": ICL_Z},
    "circuits.spurious_head_variant": lambda: {"model": MODEL},
    "circuits.gauge_width": lambda: {"model": MODEL},
    "circuits.value_gauge_variant": lambda: {"model": MODEL},
    "circuits.all_prompts": lambda: {"vocab_size": 3, "length": 4},
    "circuits.mean_outputs": lambda: {"model": MODEL, "prompts": all_prompts(4, 2)},
    "circuits.edge_ablated_logits": lambda: {"model": MODEL, "clean": CLEAN,
                                             "ablated": ("a1.h0->logits",)},
    "circuits.target_margin": lambda: {"logits": MODEL(CLEAN), "tokens": CLEAN},
    "circuits.ablation_circuit": lambda: {"kind": "two_layer", "vocab_size": 4, "max_len": 6},
    "circuits.backup_induction": lambda: {"vocab_size": 3, "max_len": 5},
    "circuits.distractor_induction": lambda: {"vocab_size": 3, "max_len": 5},
}
PUBLIC_API_ACCEPTED = {
    # one more class is a model over one more token (as for logit_difference)
    ("circuits.target_margin", "logits"): ("mismatched",),
    # a longer prompt (or set of prompts) is another valid prompt
    ("circuits.edge_ablated_logits", "clean"): ("mismatched",),
    ("circuits.mean_outputs", "prompts"): ("mismatched",),
    # the classes are read off logits (C = S + 1, the last one bot): one more class is a model
    # over one more token, and prompts over fewer tokens are valid prompts for it
    ("circuits.logit_difference", "logits"): ("mismatched",),
    # one more column is one more context example; index 0 is the first context label
    ("circuits.shift_label", "Z"): ("mismatched",),
    ("circuits.shift_label", "index"): ("zero",),
    # token 0 and position 0 are valid; a longer prompt is another prompt
    ("circuits.resample_token", "replacement"): ("zero",),
    ("circuits.resample_token", "position"): ("zero",),
    ("circuits.resample_token", "tokens"): ("mismatched",),
    ("circuits.majority_operands", "tokens"): ("mismatched",),
}
