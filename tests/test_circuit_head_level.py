"""Mutants and bad input for the head-level ground truth (theorems.areas.circuits.head_level).

Each mutant rebuilds a check of the module around a wrong head-level circuit, a wrong edge
circuit or a broken model, and asserts with ``fails_at`` that the check fails, at the
assertion of the sentence it breaks, on a pinned example (``failed_assertion`` for the
exhaustive promotion check, which has no examples to replay).
"""

from __future__ import annotations

import pytest
import torch
from killed import failed_assertion, fails_at

from constructions.circuits import STRESS_CASES, Edge, all_cases
from constructions.induction_heads import two_layer_induction
from theorems.areas.circuits import head_level
from theorems.areas.circuits._cases import case_for_claim, claims_of


def _instance(name, S, n):
    return all_cases()[name].instance({"vocab_size": S, "max_len": n})


@pytest.mark.mutant("circuits.head-level-sufficient")
def test_a_head_circuit_missing_the_induction_head_is_not_sufficient():
    # H without L1H0: node-patching it with L0H0 carries the corrupted copy to the logits
    check = head_level.sufficiency_check(
        head_circuit=lambda name, circuit: head_level.heads_of(circuit) - {"a1.h0"},
        cases=("two-layer-induction",))
    fails_at(check, r"node-patching \['a0.h0', 'a1.h0'\] moved the metric by .* > the "
             r"edge-level bound 0.0", S=3, n=12, seed=1, pick=-1)


def _unembedding_reads_prev(name, S, n):
    """two-layer-induction whose W_U also reads the prev block: L0H0's output reaches the
    logits, so node-patching L0H0 (outside H) moves the metric."""
    model = two_layer_induction(S, n)
    prev = slice((S + 1) + (n + 1), 2 * (S + 1) + (n + 1))
    with torch.no_grad():
        model.W_U[prev] = torch.eye(S + 1, dtype=model.W_U.dtype)
    return model, _instance(name, S, n)[1]


@pytest.mark.mutant("circuits.head-level-sufficient")
def test_an_unembedding_reading_the_previous_token_head_breaks_sufficiency():
    check = head_level.sufficiency_check(build=_unembedding_reads_prev,
                                         cases=("two-layer-induction",))
    fails_at(check, r"node-patching \['a0.h0'\] moved the metric by", S=3, n=3, seed=0,
             pick=-1)


@pytest.mark.mutant("circuits.head-level-necessary")
def test_a_spurious_head_in_the_head_circuit_is_not_necessary():
    # the spurious L0 head writes only where nothing reads: patching it alone moves nothing
    check = head_level.necessity_check(
        head_circuit=lambda name, circuit: head_level.heads_of(circuit) | {"a0.h0"},
        cases=("two-layer-induction-spurious-heads",))
    fails_at(check, r"node-patching a0.h0 alone moved the metric by 0.0 < the edge-level",
             S=3, n=12, seed=1, pick=-1)


def _silenced_previous_token_head(name, S, n):
    """The case's rotated model with L0H0's output map zeroed: node-patching L0H0 moves
    nothing, while the running bounds are the intact variant's."""
    model, circuit = _instance(name, S, n)
    with torch.no_grad():
        model.layers[0].W_O.zero_()
    return model, circuit


@pytest.mark.mutant("circuits.head-level-necessary")
def test_a_silenced_previous_token_head_breaks_gauged_necessity():
    check = head_level.gauged_necessity_check(build=_silenced_previous_token_head,
                                              cases=("two-layer-induction-rotated",))
    fails_at(check, r"two-layer-induction-rotated S=3 n=12: node-patching a0.h0 alone moved "
             r"the metric by .* < the running bound", S=3, n=12, seed=3, pick=-1)


def _circuit_with(edge):
    def circuit_of(name, S, n):
        return _instance(name, S, n)[1].with_edge(edge)
    return circuit_of


NEXT_TOKEN = {"two-layer-induction": head_level.HEAD_CIRCUITS["two-layer-induction"]}


@pytest.mark.mutant("circuits.head-level-promotion")
def test_an_edge_circuit_through_the_previous_token_head_promotes_it():
    # K-composition added to the next-token circuit: L0H0 joins H, which is not the declared
    check = head_level.promotion_check(
        declared=NEXT_TOKEN, circuit_of=_circuit_with(Edge("a0.h0", "a1.h0", "k", "added")))
    report = failed_assertion(check)
    assert "the edge circuit touches the heads" in report, report
    assert "['a0.h0', 'a1.h0'], not ['a1.h0']" in report, report


@pytest.mark.mutant("circuits.head-level-promotion")
def test_an_extra_edge_into_the_induction_head_changes_the_finer_count():
    # input -> L1H0<q> added: H is unchanged but one fewer edge of H lies outside C
    check = head_level.promotion_check(
        declared=NEXT_TOKEN, circuit_of=_circuit_with(Edge("input", "a1.h0", "q", "added")))
    report = failed_assertion(check)
    assert "edges into or out of H are outside the edge circuit" in report, report
    assert "4 edges into or out of H" in report and "not 5" in report, report


def test_every_induction_case_has_a_head_level_circuit():
    # the stress cases' head level is enumerated by circuits.minimal-circuits instead
    stress = {case.name for case in STRESS_CASES}
    for name in stress:
        assert "circuits.minimal-circuits" in claims_of(all_cases()[name])
    induction = {name for name, case in all_cases().items()
                 if case.native is None and name not in stress}
    assert set(head_level.HEAD_CIRCUITS) == induction
    assert set(head_level.PATCHED_CASES) | set(head_level.GAUGED_CASES) == induction
    for name in induction:
        for claim in ("circuits.head-level-sufficient", "circuits.head-level-necessary",
                      "circuits.head-level-promotion"):
            assert claim in claims_of(all_cases()[name])
    assert case_for_claim("circuits.head-level-promotion").name == "two-layer-induction"


def test_heads_of_reads_only_heads():
    _, circuit = _instance("two-layer-induction-spurious-heads", 3, 4)
    assert head_level.heads_of(circuit) == frozenset({"a0.h1", "a1.h1"})
    assert head_level.finer_edges(circuit, frozenset()) == 0
