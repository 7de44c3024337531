"""Mutants and bad input for out-of-context reasoning (Huang et al. 2025)."""

from __future__ import annotations

import pytest
import torch
from killed import failed_assertion
from torch import nn

from constructions.ocr import (
    fact_implication_task,
    margins,
    min_norm_solution,
    nuclear_margin,
)
from empirics.ocr import FactorizedMap, train_map
from theorems.areas.ocr.min_norm import nuclear_check, refutation_check
from theorems.areas.ocr.training import gd_check, implicit_explicit_check
from theorems.evidence import expect_failure
from theorems.numerics import gamma


class FrozenOutputFactor(FactorizedMap):
    """A dropped factor: W_O frozen at [I | 0], so W = W_O W_V is W_V's top rows, a combined
    map in disguise (its gradient descent has the Frobenius bias)."""

    def __init__(self, task, init, generator, hidden=None):
        super().__init__(task, init, generator, hidden)
        eye = torch.eye(task.answers, self.W_O.shape[1], dtype=torch.float64)
        self.W_O = nn.Parameter(eye, requires_grad=False)


SHORT = {"steps": 500, "eval_every": 500}


@pytest.mark.mutant("ocr.frobenius-generalizes")
def test_the_nuclear_norm_in_place_of_frobenius_breaks_the_refutation():
    # W_* answers the test pairs, but with margin 1 inside the Frobenius margin bound of a W
    # that is not W_F; the refutation is about W_F, and refuses a W it cannot certify as W_F
    report = failed_assertion(refutation_check(norm="nuclear"))
    assert "not certified as the Frobenius minimiser" in report, report


@pytest.mark.mutant("ocr.nuclear-margin")
def test_a_margin_of_one_over_k_is_outside_the_certified_interval():
    # 1/k in place of 1/sqrt(k): 0.5 at k = 2, against the certified [0.7064, 0.7087]
    report = expect_failure(nuclear_check(cases=((1, 2),),
                                          margin=lambda task: 1 / task.test_names_per_city))
    assert "expected" in report


def test_the_frobenius_solution_leaves_the_nuclear_certificate_uncertified():
    # its nuclear norm is above the optimum, so the primal bound is loose and the interval wide:
    # a failing precondition, an error and not a verdict
    with pytest.raises(RuntimeError, match="wider than"):
        nuclear_check(norm="fro", cases=((1, 2),))()


def test_the_norm_bounds_are_upper_bounds_and_tight():
    import numpy as np

    from theorems.areas.ocr.min_norm import _norm_bounds

    M = np.diag([3.0, 4.0, 0.0])[:, :2] @ np.array([[0.6, 0.8], [-0.8, 0.6]])
    spectral, nuclear = _norm_bounds(M, np.zeros(1))
    # exact norms 4 and 7 (a rotation of diag(3, 4)): the bounds hold, and are not vacuous.
    # Their slack is their own gamma terms (1 + gamma_18, the orthogonality residuals
    # gamma_4 (3 + sqrt 3) and gamma_3 (2 + sqrt 2), gamma_5 of |U||M||V|): about 40u here
    # (measured 40u and 38u); 200u leaves room for LAPACK's O(u) loss of orthogonality (a
    # tightness test of our own bound: it fails only if the bound is looser than that)
    assert 4.0 <= spectral <= 4.0 * (1 + gamma(200)) and 7.0 <= nuclear <= 7.0 * (1 + gamma(200))
    widened = _norm_bounds(M, np.full(M.shape, 1e-3))[0]
    assert widened >= 4.0 + 1e-3  # an entrywise error of 1e-3 can add up to it in norm


@pytest.mark.training
@pytest.mark.mutant("ocr.gd-factorization")
def test_a_frozen_output_factor_does_not_learn_the_implications():
    report = expect_failure(gd_check({"factorized": FrozenOutputFactor}, SHORT))
    assert "factorized/wd=0" in report


@pytest.mark.training
@pytest.mark.mutant("ocr.implicit-vs-explicit")
def test_a_frozen_output_factor_loses_the_implicit_bias():
    report = expect_failure(implicit_explicit_check({"factorized": FrozenOutputFactor}, SHORT))
    assert "factorized/wd=0" in report


# --- the task and the reduced model ------------------------------------------------------------

def test_the_task_layout_follows_the_authors_code():
    task = fact_implication_task(cities=3, train_names_per_city=2, test_names_per_city=1)
    assert (task.names, task.inputs, task.answers) == (9, 11, 6)
    assert list(task.train_names) == list(range(6)) and list(task.test_names) == [6, 7, 8]
    assert [task.city(n) for n in range(9)] == [0, 1, 2] * 3
    X, answers = task.training_pairs
    # exact: sums of 0/1 entries (and below, stored 0/1 values and integer answers)
    assert X.shape == (9 + 6, 11) and torch.equal(X.sum(-1), torch.full((15,), 2.0,
                                                                        dtype=torch.float64))
    assert torch.equal(answers[9:], torch.tensor([3, 4, 5, 3, 4, 5]))  # animals of train names
    Xt, at = task.test_pairs
    assert torch.equal(Xt[:, 1], torch.ones(3, dtype=torch.float64))  # the implication token
    assert torch.equal(at, torch.tensor([3, 4, 5]))


def test_margins_of_a_hand_built_map():
    task = fact_implication_task(2, 1, 1)
    W = torch.zeros(task.answers, task.inputs, dtype=torch.float64)
    for name in range(task.names):  # each name column votes for its city and its animal
        W[task.city(name), task.name_token(name)] = 1.0
        W[task.animal(name), task.name_token(name)] = 1.0
    W[: task.cities, 0] = 2.0            # r_1 favours cities, r_2 favours animals
    W[task.cities:, 1] = 2.0
    # exact: small integer weights times 0/1 inputs, sums and differences of integers < 2^53
    assert torch.equal(margins(W, *task.training_pairs), torch.ones(6, dtype=torch.float64))
    assert torch.equal(margins(W, *task.test_pairs), torch.ones(2, dtype=torch.float64))
    # among the animals only, the cities' logits (1 for the name's own city) drop out
    animals = margins(W, *task.test_pairs, among=slice(task.cities, task.answers))
    assert torch.equal(animals, torch.full((2,), 1.0, dtype=torch.float64))
    W[task.cities:, 1] = 0.0  # r_2 no longer favours animals: the own city wins by 0
    assert torch.equal(margins(W, *task.test_pairs), torch.zeros(2, dtype=torch.float64))
    assert torch.equal(margins(W, *task.test_pairs, among=slice(task.cities, task.answers)),
                       animals)
    assert nuclear_margin(task) == 1.0 and nuclear_margin(fact_implication_task(2, 1, 4)) == 0.5


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, match", [
    (lambda: fact_implication_task(1), ValueError, "cities"),
    (lambda: fact_implication_task(4, 0), ValueError, "train_names_per_city"),
    (lambda: fact_implication_task(4, 1, 1.5), TypeError, "test_names_per_city"),
    (lambda: min_norm_solution(fact_implication_task(), "l1"), ValueError, "norm"),
    (lambda: min_norm_solution("task"), TypeError, "task"),
    (lambda: min_norm_solution(fact_implication_task(), eps=0.0), ValueError, "eps"),
    (lambda: train_map({}, "bilinear", 0.0, torch.device("cpu"), 0), ValueError, "kind"),
])
def test_bad_input_is_rejected_with_the_parameter_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.training
@pytest.mark.mutant("ocr.gd-factorization", "ocr.implicit-vs-explicit")
def test_a_factorized_map_in_place_of_the_combined_one_answers_the_implications():
    report = failed_assertion(gd_check({"combined": FactorizedMap}))
    assert "combined/wd=0: a test implication is answered" in report, report
    report = failed_assertion(implicit_explicit_check({"combined": FactorizedMap}))
    assert "a test implication is answered" in report, report

