"""Mutants and bad input for the enumerated minimal circuits and don't-care edges
(theorems.areas.circuits.minimal_circuits, constructions.circuits.stress_cases).

Each mutant rebuilds the check around a case with a broken model or a wrong declaration and
asserts with ``fails_at`` that it fails, on the pinned example, at the assertion of the
sentence it breaks.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from killed import fails_at

from constructions.circuits import (
    CircuitCase,
    all_cases,
    final_logit_sum,
    sample_marked_pairs,
    sample_unmarked_occurrence_pairs,
)
from constructions.circuits.stress_cases import COMPENSATING, distractor_circuit
from theorems.areas.circuits import minimal_circuits
from theorems.areas.circuits.stress import live_edges


def _replaced(name: str, **changes) -> dict[str, CircuitCase]:
    return {**all_cases(), name: dataclasses.replace(all_cases()[name], **changes)}


def _without_backup(vocab_size, max_len):
    """backup_induction whose backup previous-token head writes nothing."""
    model = all_cases()["backup-heads"].build(vocab_size, max_len)
    with torch.no_grad():
        model.layers[0].W_O[1].zero_()
    return model


@pytest.mark.mutant("circuits.minimal-circuits")
def test_without_the_backup_head_there_is_one_minimal_circuit():
    check = minimal_circuits.minimal_circuits_check(
        cases=_replaced("backup-heads", build=_without_backup), names=("backup-heads",))
    fails_at(check, r"backup-heads S=4 n=8 prompt 0: the minimal circuits are "
             r"\[\['a0.h0->a1.h0<k>', 'a1.h0->logits', 'input->a0.h0<v>'\]\], not",
             S=4, n=8, seed=0, pick=-1)


@pytest.mark.mutant("circuits.minimal-circuits")
def test_a_ground_truth_of_one_backup_path_is_not_the_union():
    # scored against the primary path alone, a method that found the backup would be "wrong"
    check = minimal_circuits.minimal_circuits_check(
        cases=_replaced("backup-heads", circuit=distractor_circuit), names=("backup-heads",))
    fails_at(check, r"backup-heads: the case's circuit .* is not the union of its minimal "
             r"circuits", S=4, n=8, seed=0, pick=-1)


@pytest.mark.mutant("circuits.minimal-circuits")
def test_the_compensating_query_and_key_are_not_dont_care():
    flag = all_cases()["superposed-features-flag"]
    check = minimal_circuits.minimal_circuits_check(
        cases=_replaced("superposed-features-flag",
                        dont_care=(*flag.dont_care, *COMPENSATING)),
        names=("superposed-features-flag",))
    fails_at(check, r"superposed-features-flag S=4 n=8 prompt 0: the don't-care edges are .*",
             S=4, n=8, seed=0, pick=-1)


@pytest.mark.mutant("circuits.minimal-circuits")
def test_an_edge_left_out_of_the_live_set_breaks_the_lemma():
    check = minimal_circuits.minimal_circuits_check(
        names=("two-layer-induction",),
        live_of=lambda model: live_edges(model) - {"a1.h0->logits"})
    fails_at(check, r"two-layer-induction: patching the edges outside the live set moved the "
             r"metric", S=4, n=8, seed=0, pick=-1)


def test_the_declarations_are_validated():
    case = all_cases()["backup-heads"]
    with pytest.raises(ValueError, match="declared together"):
        dataclasses.replace(case, dont_care=())
    with pytest.raises(ValueError, match="disjoint from dont_care"):
        dataclasses.replace(case, dont_care=(*case.dont_care, "a1.h0->logits"))


def test_the_stress_samplers_and_metric_reject_bad_input():
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="vocab_size"):
        sample_unmarked_occurrence_pairs(generator, 2, vocab_size=3, max_len=8)
    with pytest.raises(ValueError, match="vocab_size"):
        sample_marked_pairs(generator, 2, vocab_size=3, max_len=8)
    clean, corrupted = sample_marked_pairs(generator, 2, vocab_size=4, max_len=8)
    assert not bool((clean == 3).any()) and bool((corrupted == 3).any())
    with pytest.raises(ValueError, match="logits"):
        final_logit_sum(torch.zeros(2, 8), clean, corrupted)
    with pytest.raises(ValueError, match="clean"):
        final_logit_sum(torch.zeros(2, 7, 5), clean, corrupted)


def test_the_flag_metric_reads_the_flag():
    case = all_cases()["superposed-features-flag"]
    model, _ = case.instance("smoke")
    clean, corrupted = case.prompts(torch.Generator().manual_seed(0), 3, "smoke")
    # 1 + (S + 1) b: b = +1 on the clean prompt, -1 on the marked one (S = 4)
    assert case.metric(model(clean), clean, corrupted).tolist() == [6.0] * 3
    assert case.metric(model(corrupted), clean, corrupted).tolist() == [-4.0] * 3


_TOKENS = torch.tensor([[0, 1, 2, 0], [1, 0, 2, 1]])
PUBLIC_API_EXAMPLES = {
    "circuits.final_logit_sum": lambda: {"logits": torch.zeros(2, 4, 5), "clean": _TOKENS,
                                         "corrupted": _TOKENS},
    "circuits.sample_marked_pairs": lambda: {
        "generator": torch.Generator().manual_seed(0), "batch": 2, "vocab_size": 4,
        "max_len": 4},
    "circuits.sample_unmarked_occurrence_pairs": lambda: {
        "generator": torch.Generator().manual_seed(0), "batch": 2, "vocab_size": 4,
        "max_len": 4},
}
PUBLIC_API_ACCEPTED = {
    # one more class is another valid output: the sum runs over however many there are
    ("circuits.final_logit_sum", "logits"): ("mismatched",),
}


@pytest.mark.mutant("circuits.minimal-circuits")
def test_a_head_level_truth_of_the_output_heads_alone_misses_the_previous_token_heads():
    # promoting each minimal circuit to the heads that write to the logits: {a1.h0}, which
    # node-patching the previous-token heads shows is not enough
    check = minimal_circuits.minimal_circuits_check(
        names=("backup-heads",),
        promote=lambda k, graph: frozenset(
            e.source for e in graph if e.name in k and e.target == "logits"))
    fails_at(check, r"backup-heads S=4 n=8 prompt 0: the minimal head sets are "
             r"\[\['a0.h0', 'a1.h0'\], \['a0.h1', 'a1.h0'\]\], not \[\['a1.h0'\]\]",
             S=4, n=8, seed=0, pick=-1)
