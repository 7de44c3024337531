"""Mutants and bad input of the circuits area's stress claims (backup heads, a distractor,
superposed features): each
rebuilds a check of ``theorems.areas.circuits.stress`` around a broken construction or a wrong
circuit and asserts the message of the assertion it fails at."""

from __future__ import annotations

import pytest
import torch
from killed import failed_assertion

from constructions.circuits import (
    BACKUP_PATHS,
    OUTPUT_EDGE,
    SUPERPOSED_CIRCUITS,
    backup_induction,
    distractor_induction,
    edge_patched_logits,
    mark_final_token,
    resample_earlier_occurrence,
    superposed_induction,
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


def reading_prev_in_query(build):
    """``build`` whose induction query also reads the prev block (a shift of 1 in a score row
    whose gaps are 2048: the attention is unchanged): a0.h0 -> a1.h0<q> is no longer inert."""
    def broken(vocab_size, max_len):
        model = build(vocab_size, max_len)
        S, n = vocab_size, max_len
        prev = slice((S + 1) + (n + 1), 2 * (S + 1) + (n + 1))
        with torch.no_grad():
            model.layers[1].W_Q[0][prev, :S] = torch.eye(S + 1, S, dtype=torch.float64)
        return model
    return broken


query_reads_prev = reading_prev_in_query(backup_induction)


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


# --- superposed features -----------------------------------------------------------------------

def _prev_row(vocab_size, max_len, c):
    """The residual row of the prev block's coordinate c (blocks tok, pos, prev, ...)."""
    return (vocab_size + 1) + (max_len + 1) + c


def orthogonal_flag(vocab_size, max_len):
    """superposed_induction whose flag is written into the const coordinate (the last one), a
    direction orthogonal to every token's: no superposition, and m_B no longer sees it."""
    model = superposed_induction(vocab_size, max_len)
    with torch.no_grad():
        flag = model.layers[1].W_O[0][vocab_size + 1]
        flag.zero_()
        flag[-1] = 1.0
    return model


def flag_at_bos(vocab_size, max_len):
    """superposed_induction whose flag is +1 on BOS's record too: attending to BOS then leaves
    the flag as it was, so under c_A the logits are e_bot + 1, and breaking the match is a
    second way to restore m_B under c_B."""
    model = superposed_induction(vocab_size, max_len)
    with torch.no_grad():
        model.layers[1].W_V[0][_prev_row(vocab_size, max_len, vocab_size), vocab_size + 1] = 1.0
    return model


def key_reads_token(vocab_size, max_len):
    """superposed_induction whose induction key also reads the token block (token c as c) into
    the column S, which every query holds as 0: the scores are unchanged, but
    input -> a1.h0<k> now carries a difference under both corruptions."""
    model = superposed_induction(vocab_size, max_len)
    with torch.no_grad():
        model.layers[1].W_K[0][: vocab_size + 1, vocab_size] = torch.arange(
            vocab_size + 1, dtype=torch.float64)
    return model


@pytest.mark.mutant("circuits.superposed-features")
def test_an_orthogonal_flag_is_not_superposed():
    report = failed_assertion(stress.superposed_check(build=orthogonal_flag))
    assert "the token and flag directions are not as stated" in report, report


@pytest.mark.mutant("circuits.superposed-features")
def test_a_flag_on_bos_is_not_read_exactly_as_stated():
    report = failed_assertion(stress.superposed_check(build=flag_at_bos))
    assert "the readouts are not exact: the final logits under c_A" in report, report


@pytest.mark.mutant("circuits.superposed-features")
def test_a_key_reading_the_token_carries_a_difference():
    report = failed_assertion(stress.superposed_check(build=key_reads_token))
    assert "the edges that carry a difference under c_A are" in report, report


@pytest.mark.mutant("circuits.superposed-features")
def test_a_superposed_query_that_reads_prev_is_not_inert():
    report = failed_assertion(stress.superposed_enumeration_check(
        build=reading_prev_in_query(superposed_induction)))
    assert "the edges that are not inert are" in report, report


@pytest.mark.mutant("circuits.superposed-features")
def test_a_flag_on_bos_gives_other_minimal_circuits():
    report = failed_assertion(stress.superposed_enumeration_check(build=flag_at_bos))
    assert "the minimal circuits of (c_A, m_B) are" in report, report


@pytest.mark.mutant("circuits.superposed-features")
def test_swapped_superposed_circuits_are_not_the_minimal_ones():
    circuits = {"match": SUPERPOSED_CIRCUITS["flag"], "flag": SUPERPOSED_CIRCUITS["match"]}
    report = failed_assertion(stress.superposed_enumeration_check(circuits=circuits))
    assert "the minimal circuits of (c_A, m_A) are" in report, report


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
    superposed = superposed_induction(5, 10)
    assert superposed(clean)[0, -1].tolist() == [1.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    assert mark_final_token(clean[0], 5).tolist() == [4, 1, 2, 0, 1, 2, 4]
    for build in (backup_induction, distractor_induction, superposed_induction):
        assert build(3, 5, dtype=torch.float32).W_E.dtype == torch.float32


@pytest.mark.parametrize("call, error, name", [
    (lambda: backup_induction(0, 5), ValueError, "vocab_size"),
    (lambda: distractor_induction(3, 2000), ValueError, "max_len"),
    (lambda: backup_induction(3, 5, dtype=torch.int64), ValueError, "dtype"),
    (lambda: superposed_induction(3, 0), ValueError, "max_len"),
    (lambda: mark_final_token(torch.tensor([0, 3, 0]), 4), ValueError, "tokens"),
    (lambda: mark_final_token(torch.tensor([0, 1, 0]), 1), ValueError, "tokens"),
    (lambda: mark_final_token([0, 1, 0], 4), TypeError, "tokens"),
    (lambda: mark_final_token(torch.tensor([0, 1, 0]), 2.5), TypeError, "vocab_size"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()


PUBLIC_API_EXAMPLES = {
    "circuits.superposed_induction": lambda: {"vocab_size": 4, "max_len": 5},
    "circuits.mark_final_token": lambda: {"tokens": torch.tensor([[0, 1, 2, 0]]),
                                          "vocab_size": 4},
}
PUBLIC_API_ACCEPTED = {
    # a longer prompt is another prompt
    ("circuits.mark_final_token", "tokens"): ("mismatched",),
}
