"""Mutants and bad input of the circuits area's stress claims (backup heads, a distractor): each
rebuilds a check of ``theorems.areas.circuits.stress`` around a broken construction or a wrong
circuit and asserts the message of the assertion it fails at."""

from __future__ import annotations

import pytest
import torch
from killed import failed_assertion

from constructions.circuits import (
    BACKUP_PATHS,
    OUTPUT_EDGE,
    backup_induction,
    distractor_induction,
    edge_patched_logits,
    resample_earlier_occurrence,
)
from theorems.areas.circuits import stress

PRIMARY, BACKUP = BACKUP_PATHS["primary"], BACKUP_PATHS["backup"]


def weak_backup(vocab_size, max_len):
    """backup_induction whose backup head writes half as much: alone it no longer beats the
    BOS sink, so it cannot take over."""
    model = backup_induction(vocab_size, max_len)
    with torch.no_grad():
        model.layers[0].W_O[1].mul_(0.5)
    return model


def without_sink(build):
    """``build`` with the induction head's BOS sink removed: with no match the recency bias
    picks the final key (token a), not BOS."""
    def broken(vocab_size, max_len):
        model = build(vocab_size, max_len)
        pos = vocab_size + 1                                   # the pos block's first row
        with torch.no_grad():
            model.layers[1].W_K[0][pos, vocab_size + 1] = 0.0
        return model
    return broken


def query_reads_prev(vocab_size, max_len):
    """backup_induction whose induction query also reads the prev block: a0 -> a1.h0<q> is
    no longer inert."""
    model = backup_induction(vocab_size, max_len)
    S, n = vocab_size, max_len
    prev = slice((S + 1) + (n + 1), 2 * (S + 1) + (n + 1))
    with torch.no_grad():
        model.layers[1].W_Q[0][prev, :S] = torch.eye(S + 1, S, dtype=torch.float64)
    return model


def distractor_on_bot(vocab_size, max_len):
    """distractor_induction whose distractor shifts only the bot logit: it then moves the
    metric."""
    model = distractor_induction(vocab_size, max_len)
    where = slice(model.d_model - (max_len + 1), model.d_model)
    with torch.no_grad():
        model.W_U[where, :vocab_size] = 0.0
    return model


# --- backup heads -------------------------------------------------------------------------------

@pytest.mark.mutant("circuits.backup-heads")
def test_a_weak_backup_head_cannot_take_over():
    report = failed_assertion(stress.backup_check(build=weak_backup))
    assert "patching the complement of the backup path moved" in report, report


@pytest.mark.mutant("circuits.backup-heads")
def test_a_path_holding_the_output_edge_is_necessary_alone():
    paths = {"primary": (*PRIMARY, OUTPUT_EDGE), "backup": BACKUP}
    report = failed_assertion(stress.backup_check(paths=paths))
    assert "of the primary path alone moved the final logits" in report, report


@pytest.mark.mutant("circuits.backup-heads")
def test_without_the_sink_the_pair_does_not_give_bot():
    report = failed_assertion(stress.backup_check(build=without_sink(backup_induction)))
    assert "not 1 to -1" in report, report


@pytest.mark.mutant("circuits.backup-heads")
def test_a_query_that_reads_prev_is_not_inert():
    report = failed_assertion(stress.enumeration_check(build=query_reads_prev))
    assert "the edges that are not inert are" in report, report


@pytest.mark.mutant("circuits.backup-heads")
def test_one_minimal_circuit_is_not_the_whole_answer():
    report = failed_assertion(stress.enumeration_check(paths={"primary": PRIMARY,
                                                              "backup": PRIMARY}))
    assert "the minimal circuits are" in report, report


# --- the distractor -----------------------------------------------------------------------------

@pytest.mark.mutant("circuits.distractor")
def test_a_distractor_at_another_scale_is_not_as_stated():
    report = failed_assertion(stress.distractor_check(scale=4.0))
    assert "the distractor is not active as stated" in report, report


@pytest.mark.mutant("circuits.distractor")
def test_a_distractor_on_one_class_is_used():
    report = failed_assertion(stress.distractor_check(build=distractor_on_bot))
    assert "patching the distractor edges" in report, report


@pytest.mark.mutant("circuits.distractor")
@pytest.mark.parametrize("dropped", stress.CIRCUIT)
def test_a_distractor_circuit_missing_an_edge_fails(dropped):
    circuit = tuple(e for e in stress.CIRCUIT if e != dropped)
    report = failed_assertion(stress.distractor_check(circuit=circuit))
    assert "the edges outside C and X that are not inert" in report \
        or "patching the complement of C moved" in report, report


@pytest.mark.mutant("circuits.distractor")
def test_without_the_sink_the_circuit_edges_do_not_give_bot():
    report = failed_assertion(stress.distractor_check(build=without_sink(distractor_induction)))
    assert "not -1" in report, report


# --- the constructions --------------------------------------------------------------------------

def test_the_saturated_models_are_exactly_one_hot():
    clean = torch.tensor([[3, 1, 2, 0, 1, 2, 3]])
    corrupted = resample_earlier_occurrence(clean, 0, 4)
    model = backup_induction(4, 10)
    assert model(clean)[0, -1].tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert model(corrupted)[0, -1].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]
    distractor = distractor_induction(4, 10)
    assert distractor(clean)[0, -1].tolist() == [0.125, 1.125, 0.125, 0.125, 0.125]
    assert torch.equal(edge_patched_logits(model, clean, corrupted, ()), model(clean))
    for build in (backup_induction, distractor_induction):
        assert build(3, 5, dtype=torch.float32).W_E.dtype == torch.float32


@pytest.mark.parametrize("call, error, name", [
    (lambda: backup_induction(0, 5), ValueError, "vocab_size"),
    (lambda: distractor_induction(3, 2000), ValueError, "max_len"),
    (lambda: backup_induction(3, 5, dtype=torch.int64), ValueError, "dtype"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()
