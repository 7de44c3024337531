"""Mutants and bad input for the addition claims (theorems/areas/addition.py)."""

from fractions import Fraction

import numpy as np
import pytest

from constructions.addition import column_sums, failure_probability, per_digit_addition
from theorems.areas.addition import (
    failure_set_exhaustive_check,
    failure_set_property_check,
    linear_formula_check,
    linear_probability_refutation,
    per_digit_exhaustive_check,
    per_digit_value_check,
    probability_exhaustive_check,
)
from theorems.evidence import expect_failure


def carry_only(sums):
    """The algorithm without UseSum9: it never propagates a carry through a 9-sum column."""
    sums = np.asarray(sums)
    padded = np.concatenate([sums, np.zeros((*sums.shape[:-1], 1), dtype=sums.dtype)], -1)
    carries = np.concatenate([np.zeros((*sums.shape[:-1], 1), dtype=bool),
                              padded[..., :-1] >= 10], -1)
    return (padded + carries) % 10


@pytest.mark.mutant("addition.failure-set")
def test_dropping_use_sum9_breaks_the_failure_set():
    failing_digits = expect_failure(failure_set_exhaustive_check(carry_only), 2)
    assert "2 digits" in failing_digits
    expect_failure(failure_set_property_check(carry_only))


@pytest.mark.mutant("addition.failure-probability")
def test_a_perturbed_probability_is_caught_by_enumeration():
    expect_failure(probability_exhaustive_check(lambda n: failure_probability(n)
                                                + Fraction(1, 10**9)), 3)


@pytest.mark.mutant("addition.failure-probability")
def test_a_probability_off_the_linear_formula_is_caught():
    """Off by 1e-9 at every n_d: the symbolic check fails at n_d = 2, on the formula."""
    report = expect_failure(linear_formula_check(lambda n: failure_probability(n)
                                                 + Fraction(1, 10**9)))
    assert "is not (n_d - 2) 0.0045" in report, report


def one_wrong_digit_per_failure(n_digits):
    """The note's old assumption: a failing question has exactly one wrong digit."""
    return failure_probability(n_digits)


@pytest.mark.mutant("addition.per-digit-accuracy")
def test_one_wrong_digit_per_failure_is_caught():
    # n_d = 4, the check's first failing n_d (it runs 1 to 5): the first with room for a
    # failing question with two wrong digits, column sums (10, 9, 9, 9); W(4) = 0.00945 against
    # P(4) = 0.009 (19^4 classes; n_d = 5 fails too, at 19 times the cost)
    expect_failure(per_digit_exhaustive_check(one_wrong_digit_per_failure), 4)
    expect_failure(per_digit_value_check(lambda n: 1 - failure_probability(n) / (n + 1)))


@pytest.mark.mutant("addition.failure-probability-linear")
def test_refutation_fails_if_the_probability_really_were_linear():
    expect_failure(linear_probability_refutation(
        lambda n: Fraction(45, 10_000) * max(n - 2, 0)))


def test_the_algorithm_fails_on_the_pinned_cascade():
    assert per_digit_addition(np.array(1805), np.array(1195), 4) != 3000


@pytest.mark.parametrize("call, error, name", [
    (lambda: column_sums(np.array([-1]), np.array([0]), 2), ValueError, "a"),
    (lambda: column_sums(np.array([0]), np.array([100]), 2), ValueError, "b"),
    (lambda: column_sums(np.array([0.5]), np.array([1]), 2), TypeError, "a"),
    (lambda: column_sums(np.array([1]), np.array([1]), 0), ValueError, "n_digits"),
    (lambda: failure_probability(2.0), TypeError, "n_digits"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()
