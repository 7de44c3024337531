"""Mutants and bad input of the circuits area's ablation claims (zero and mean ablation of the
two-layer induction construction): each rebuilds a check of
``theorems.areas.circuits.ablation`` around a wrong circuit, a wrong bound or a broken
construction, and asserts the message of the assertion it fails at.
"""

from __future__ import annotations

import functools

import pytest
import torch
from killed import failed_assertion

# W_U also reads the prev block: a0.h0 -> logits is no longer a zero map, and zero-ablating
# it moves the logit of the token before the final one
from test_circuits import unembedding_reads_prev

from constructions.circuits import (
    Edge,
    ablation_circuit,
    all_prompts,
    edge_ablated_logits,
    induction_circuit,
    mean_outputs,
    target_margin,
)
from constructions.induction_heads import two_layer_induction
from theorems.areas.circuits import ablation

KEY_INPUT = "input->a1.h0<k>"


def dropping(name):
    def circuit(*args):
        return ablation_circuit(*args).without(name)
    return circuit


def adding(name):
    source, rest = name.split("->")
    target, qkv = rest.rstrip(">").split("<")

    def circuit(*args):
        return ablation_circuit(*args).with_edge(Edge(source, target, qkv, "spurious"))
    return circuit


def query_reads_tokens(vocab_size, max_len, **kwargs):
    """two_layer_induction whose previous-token query also reads the token: token 0 scores the
    BOS key 4 higher, so input -> a0.h0<q> depends on the token and its mean over D is no
    longer the clean value."""
    model = two_layer_induction(vocab_size, max_len, **kwargs)
    with torch.no_grad():
        model.layers[0].W_Q[0][0, 0] = 4.0
    return model


# --- zero ablation ------------------------------------------------------------------------------

@pytest.mark.mutant("circuits.induction-zero-ablation")
@pytest.mark.parametrize("name", ["input->a1.h0<q>", "input->a0.h0<k>"])
def test_a_zero_circuit_missing_an_edge_is_not_sufficient(name):
    report = failed_assertion(ablation.zero_check(circuit=dropping(name)))
    assert "zero-ablating the complement moved the metric by" in report, report


@pytest.mark.mutant("circuits.induction-zero-ablation")
def test_an_unembedding_that_reads_prev_breaks_zero_sufficiency():
    report = failed_assertion(ablation.zero_check(build=unembedding_reads_prev))
    assert "zero-ablating the complement moved the metric by" in report, report


@pytest.mark.mutant("circuits.induction-zero-ablation")
def test_the_recency_and_sink_edge_is_not_necessary():
    # the edge the zero circuit leaves out, put back with the output edges' bound
    def bound(case, ablated):
        if ablated == frozenset({KEY_INPUT}):
            return ablation.zero_bound(case, frozenset({"a1.h0->logits"}))
        return ablation.zero_bound(case, ablated)
    report = failed_assertion(ablation.zero_check(circuit=adding(KEY_INPUT), bound=bound))
    assert f"zero-ablating {KEY_INPUT} moved the metric by" in report, report


@pytest.mark.mutant("circuits.induction-zero-ablation")
def test_without_the_sink_zeroed_keys_do_not_give_bot():
    # sink = 0: with the prev part of the keys zeroed the head follows the recency bias to
    # the final key (token a), not BOS, so the metric drops to about 0, not below 1 - 2 w_0
    report = failed_assertion(ablation.zero_check(
        build=functools.partial(two_layer_induction, sink=0.0), parts=("necessary",)))
    assert "moved the metric by" in report and "and the complement" not in report, report


@pytest.mark.mutant("circuits.induction-zero-ablation")
def test_a_minimality_bound_that_forgets_the_zeroed_key_input_fails():
    # with input -> a1.h0<k> also zeroed the keys are entirely zero (uniform weights), not the
    # sink's: the necessity bound mu overstates the move
    def bound(case, ablated):
        return ablation.zero_bound(case, ablated - {KEY_INPUT})
    report = failed_assertion(ablation.zero_check(bound=bound, parts=("minimal",)))
    assert "and the complement moved the metric by" in report, report


# --- mean ablation ------------------------------------------------------------------------------

@pytest.mark.mutant("circuits.induction-mean-ablation")
@pytest.mark.parametrize("name", ["input->a1.h0<q>", "a0.h0->a1.h0<k>"])
def test_a_mean_circuit_missing_an_edge_is_not_sufficient(name):
    report = failed_assertion(ablation.mean_check(circuit=dropping(name)))
    assert "mean-ablating the complement moved the final logits by" in report, report


@pytest.mark.mutant("circuits.induction-mean-ablation")
def test_a_token_reading_previous_token_query_breaks_mean_sufficiency():
    report = failed_assertion(ablation.mean_check(build=query_reads_tokens))
    assert "mean-ablating the complement moved the final logits by" in report, report


@pytest.mark.mutant("circuits.induction-mean-ablation")
@pytest.mark.parametrize("name", ["input->a0.h0<q>", KEY_INPUT])
def test_a_positional_edge_is_not_necessary_under_mean_ablation(name):
    report = failed_assertion(ablation.mean_check(circuit=adding(name)))
    assert f"mean-ablating {name} moved the metric by" in report, report


@pytest.mark.mutant("circuits.induction-mean-ablation")
def test_a_complement_that_matters_breaks_mean_minimality():
    report = failed_assertion(ablation.mean_check(build=query_reads_tokens,
                                                  parts=("minimal",)))
    assert "and the complement gave other final logits" in report, report


@pytest.mark.mutant("circuits.induction-mean-ablation")
def test_a_mean_circuit_keeping_a_positional_edge_breaks_the_difference():
    def circuit(kind, S, n, ablation_type):
        kept = ablation_circuit(kind, S, n, ablation_type)
        return (kept.with_edge(Edge("input", "a0.h0", "q", "positional"))
                if ablation_type == "mean" else kept)
    report = failed_assertion(ablation.difference_check(circuit=circuit))
    assert "the token-independent edges of C_0 are" in report, report


@pytest.mark.mutant("circuits.induction-mean-ablation")
def test_a_resample_circuit_outside_the_mean_circuit_breaks_the_difference():
    def resampled(*args):
        return induction_circuit(*args).with_edge(Edge("input", "a1.h0", "k", "spurious"))
    report = failed_assertion(ablation.difference_check(resampled=resampled))
    assert "outside C_mu" in report, report


# --- the construction side ----------------------------------------------------------------------

MODEL = two_layer_induction(3, 6)
CLEAN = torch.tensor([[0, 1, 2, 0]])


def test_ablating_nothing_is_the_plain_forward():
    means = mean_outputs(MODEL, all_prompts(3, 4))
    for kind, extra in (("zero", None), ("mean", means)):
        assert torch.equal(edge_ablated_logits(MODEL, CLEAN, (), kind, extra), MODEL(CLEAN))


def test_zero_ablating_the_output_zeroes_the_logits():
    logits = edge_ablated_logits(MODEL, CLEAN, ["a1.h0->logits"])
    assert torch.equal(logits[:, -1], torch.zeros_like(logits[:, -1]))
    assert float(target_margin(MODEL(CLEAN), CLEAN)) > 0.9


def test_the_mean_input_keeps_the_positions_exactly():
    means = mean_outputs(MODEL, all_prompts(3, 4))
    S, n = 3, 6
    pos = slice(S + 1, S + 1 + n + 1)
    assert torch.equal(means["input"][0, :, pos], MODEL.W_pos[:5, pos])
    assert means["input"].shape == (1, 5, MODEL.d_model)
    assert all_prompts(3, 4).shape == (81, 4)


@pytest.mark.parametrize("call, error, name", [
    (lambda: all_prompts(3, 20), ValueError, "length"),
    (lambda: edge_ablated_logits(MODEL, CLEAN, ["a1.h0->logits"], "mean"), TypeError, "means"),
    (lambda: edge_ablated_logits(MODEL, CLEAN, ["a1.h0->logits"], "mean",
                                 mean_outputs(MODEL, all_prompts(3, 3))), ValueError, "means"),
    (lambda: edge_ablated_logits(MODEL, CLEAN, ["a1.h0->logits"], "zero", {}), ValueError,
     "means"),
    (lambda: edge_ablated_logits(MODEL, CLEAN, ["a2.h0->logits"]), ValueError, "ablated"),
    (lambda: edge_ablated_logits(MODEL, CLEAN, "a1.h0->logits"), TypeError, "ablated"),
    (lambda: edge_ablated_logits(MODEL, CLEAN, (), "resample"), ValueError, "ablation"),
    (lambda: target_margin(MODEL(torch.tensor([[0, 1, 2]])), torch.tensor([[0, 1, 2]])),
     ValueError, "tokens"),
    (lambda: ablation_circuit("compact", 3, 6), ValueError, "kind"),
    (lambda: mean_outputs(MODEL, torch.zeros(0, 3, dtype=torch.long)), ValueError, "prompts"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()
