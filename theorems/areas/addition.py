r"""The rare failure of the per-digit addition algorithm (Quirke & Barez 2024, arXiv:2310.13121).

The algorithm (:mod:`constructions.addition`) propagates a carry through at most one column
that sums to 9. Everything depends only on the column sums, so "exhaustive over all digit
pairs" is done over the :math:`19^{n_d}` column-sum classes, each weighted by how many digit
pairs it holds; for :math:`n_d \le 3` all :math:`10^{2n_d}` pairs are also enumerated directly.
All arithmetic in these checks is exact (integers and rationals): no tolerance is needed.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.addition import (
    algorithm_digits,
    class_weights,
    column_sums,
    expected_wrong_digits,
    failure_probability,
    has_cascade,
    per_digit_accuracy,
    per_digit_addition,
    true_digits,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence, expect_failure
from theorems.proof_statements import Scope
from theorems.proving import coq_proof

QUIRKE = {"arxiv": "2310.13121", "ref": "Quirke & Barez (2024), ICLR"}
ALGORITHM_SOURCE = Source(where="Section 5 and the authors' code (PhilipQuirke/transformer-maths)",
                          tag="V", **QUIRKE)

AD_FAILURE_SET = Claim(
    id="addition.failure-set",
    title="The per-digit algorithm is wrong exactly when a carry meets two 9-sum columns",
    statement=(
        r"For $n_d$-digit addends $a, b$ with column sums $s_p = D_p + D'_p$ "
        r"($p = 0$ least significant), let the algorithm answer digits "
        r"$A_p = (s_p + \mathrm{MC1}_{p-1} + [\lnot\mathrm{MC1}_{p-1}\wedge\mathrm{MS9}_{p-1}"
        r"\wedge\mathrm{MC1}_{p-2}]) \bmod 10$ for $p = 0, \dots, n_d$, with "
        r"$\mathrm{MC1}_p = [s_p \ge 10]$, $\mathrm{MS9}_p = [s_p = 9]$, $s_{n_d} = 0$ and "
        r"out-of-range terms 0. Then $\sum_p A_p 10^p \ne a + b$ iff there is a $p$ with "
        r"$s_p \ge 10$ and $s_{p+1} = s_{p+2} = 9$."),
    source=(ALGORITHM_SOURCE,
            Source(where="the exact failure set, derived here", tag="D", **QUIRKE)),
    kind="identity",
    construction="constructions.addition:per_digit_addition",
)

AD_FAILURE_PROBABILITY = Claim(
    id="addition.failure-probability",
    title="Exact probability that the per-digit algorithm errs",
    statement=(
        r"For $a, b$ uniform on $\{0, \dots, 10^{n_d} - 1\}$ the column sums are independent "
        r"with $P(s_p \ge 10) = 45/100$ and $P(s_p = 9) = 10/100$. Read the columns from "
        r"$p = 0$ upward with an automaton whose state is 0 (idle), 1 (the last column had "
        r"$s \ge 10$) or 2 (a carry followed by exactly one 9-sum): $s \ge 10$ moves to 1; "
        r"$s = 9$ keeps 0, moves 1 to 2, and moves 2 to an absorbing *fail*; any other sum "
        r"moves to 0. Then $P(\text{algorithm} \ne a + b) = P(\text{fail after } n_d"
        r"\text{ columns})$. For $2 \le n_d \le 5$ this equals "
        r"$(n_d - 2)\cdot\tfrac{45}{100}\cdot\big(\tfrac1{10}\big)^2$: 0.0045 at 3 digits, "
        r"0.009 at 4, 0.0135 at 5."),
    source=Source(where="derived here from the failure set", tag="D", **QUIRKE),
    kind="identity",
    construction="constructions.addition:failure_probability",
    depends_on=("addition.failure-set",),
    notes=("The blog's '>99.5% accuracy' matches the per-digit accuracy (99.759% at 5 digits, "
           "checked in addition.per-digit-accuracy), not the per-question accuracy (98.65%)."),
    result_dependencies={
        "addition.failure-set":
            "the enumeration runs the per-digit algorithm on column sums (algorithm_digits, the "
            "core of per_digit_addition) weighted by class_weights, not on the integer pairs "
            "per_digit_addition takes",
    },
)

AD_PER_DIGIT = Claim(
    id="addition.per-digit-accuracy",
    title="Per-digit accuracy of the algorithm: 99.759% of answer digits right at 5 digits",
    statement=(
        r"For $a, b$ uniform $n_d$-digit addends, the expected number of wrong digits among "
        r"the $n_d + 1$ answer digits is $W(n_d) = \sum_{p=2}^{n_d}10^{-2}q_{p-2}$ with "
        r"$q_0 = 0$, $q_{j+1} = \tfrac{45}{100} + \tfrac{10}{100}q_j$ ($q_j$ the probability "
        r"of a true carry into column $j$). The per-digit accuracy "
        r"$1 - W(n_d)/(n_d+1)$ is $1 - 0.014445/6 = 99.75925\%$ at $n_d = 5$, not the "
        r"$1 - P_{\text{fail}}/(n_d+1) = 99.775\%$ of one wrong digit per failing question: "
        r"column sums $(10, 9, 9, 9, 0)$ give two wrong digits."),
    source=(Source(where="the blog's '>99.5% accuracy' (via the claim catalogue)", tag="S",
                   **QUIRKE),
            Source(where="the per-digit count and its recursion (derived here)", tag="D",
                   **QUIRKE)),
    kind="identity",
    construction="constructions.addition:per_digit_accuracy",
    depends_on=("addition.failure-set",),
    notes=(r"Why: digit $p$ is wrong iff columns $p-1$ and $p-2$ sum to 9 and a carry enters "
           r"column $p-2$ (the derivation of $W$; the checks assert $W$ and the accuracy, "
           r"not this rule digit by digit)."),
    result_dependencies={
        "addition.failure-set":
            "the enumeration runs the per-digit algorithm on column sums (algorithm_digits, the "
            "core of per_digit_addition) weighted by class_weights, not on the integer pairs "
            "per_digit_addition takes",
    },
)

AD_LINEAR_PROBABILITY = Claim(
    id="addition.failure-probability-linear",
    title="The failure probability is (n_d − 2) × 0.0045 for every n_d (false from 6 digits)",
    statement=(
        r"For every $n_d \ge 2$ and $a, b$ uniform $n_d$-digit addends, "
        r"$P(\text{algorithm} \ne a + b) = (n_d - 2)\cdot 0.0045$."),
    source=Source(where="the claim catalogue's extrapolation from 3, 4 and 5 digits", tag="D",
                  **QUIRKE),
    kind="identity",
    construction="constructions.addition:failure_probability",
    depends_on=("addition.failure-probability",),
    correction=(
        r"The events 'cascade starting at column $p$' are disjoint only while no two fit in "
        r"$n_d$ columns. From $n_d = 6$ two cascades can co-occur (columns 0–2 and 3–5), so "
        r"by inclusion–exclusion $P(6) = 4\cdot 0.0045 - 0.45^2\cdot 0.1^4 = 0.01797975 < 0.018$. "
        r"The exact value for every $n_d$ is the automaton formula of "
        r"addition.failure-probability; $(n_d - 2)\cdot 0.0045$ is exact for $n_d \le 5$ and a "
        r"first-order upper bound after that."),
    refutes="as-written",
)


@functools.cache
def all_column_sums(n_digits: int) -> np.ndarray:
    """Every column-sum vector in {0..18}^n_d, one per row (read-only: shared by the checks).

    Built once per ``n_d`` for the whole run, as ``int8`` in column-major order (the
    transpose of ``np.indices``): sums up to 18 fit, the constructions widen what they add to
    them (``true_digits`` adds an ``int64`` carry, ``class_weights``' product is taken in
    ``int64``), and they read one column at a time, which is contiguous here. The values are
    those of the ``int64`` array, so every count and verdict is too; only time is saved.
    """
    sums = np.indices((19,) * n_digits, dtype=np.int8).reshape(n_digits, -1).T
    sums.flags.writeable = False
    return sums


BLOCK_DIGITS = 4  # blocks of 19^4 classes: a few MB of temporaries, not a few hundred


def column_sum_blocks(n_digits: int) -> Iterator[np.ndarray]:
    """Every column-sum vector in {0..18}^n_d exactly once, in blocks of at most 19^4 rows:
    the low ``BLOCK_DIGITS`` columns take every value (``all_column_sums``) while the higher
    ones are fixed per block. An exhaustive check sums its integer counts over the blocks,
    which is exact; the enumeration of 19^5 classes in one piece spent most of its time
    allocating and faulting in its ~100 MB temporaries."""
    low = min(n_digits, BLOCK_DIGITS)
    for high in itertools.product(range(19), repeat=n_digits - low):
        block = np.empty((19**low, n_digits), dtype=np.int8, order="F")
        block[:, :low] = all_column_sums(low)
        block[:, low:] = high
        yield block


def failure_set_exhaustive_check(algorithm=algorithm_digits):
    def run(n_digits: int) -> None:
        mismatched = cases = 0
        for sums in column_sum_blocks(n_digits):
            wrong = (algorithm(sums) != true_digits(sums)).any(-1)
            mismatched += int((wrong != has_cascade(sums)).sum())
            cases += int(class_weights(sums).sum())
        evidence.cases(cases)
        assert mismatched == 0, f"{mismatched} classes break the iff at {n_digits} digits"
    return run


def failure_set_over_every_column_sum_class():
    check_digits = failure_set_exhaustive_check()
    for n_digits in range(1, 6):
        check_digits(n_digits)


test_failure_set_over_every_column_sum_class = check(AD_FAILURE_SET, "exhaustive")(
    failure_set_over_every_column_sum_class)


def failure_set_over_every_pair_up_to_three_digits():
    for n_digits in range(1, 4):
        mismatched = cases = 0
        # a hundred values of a at a time against every b (at most 10^5 pairs): the same
        # pairs as one 10^6-pair grid, in temporaries that stay small
        for first_a in range(0, 10**n_digits, 100):
            a, b = np.meshgrid(np.arange(first_a, min(first_a + 100, 10**n_digits)),
                               np.arange(10**n_digits), indexing="ij")
            a, b = a.ravel(), b.ravel()
            wrong = per_digit_addition(a, b, n_digits) != a + b
            pattern = has_cascade(column_sums(a, b, n_digits))
            mismatched += int((wrong != pattern).sum())
            cases += a.size
        evidence.cases(cases)
        assert mismatched == 0, f"iff fails at {n_digits} digits"


test_failure_set_over_every_pair_up_to_three_digits = check(AD_FAILURE_SET, "exhaustive")(
    failure_set_over_every_pair_up_to_three_digits)


# The strategy of b's digit given a's digit da: 9 - da (a 9-sum column) or any digit. Built
# once per da rather than once per digit drawn: a strategy object is the same whichever copy
# draws, so the examples are unchanged, but Hypothesis pays a set-up for every new one.
_B_DIGIT = tuple(st.one_of(st.just(9 - da), st.integers(0, 9)) for da in range(10))


@st.composite
def cascade_prone_addends(draw):
    """Addends whose columns favour sums of 9 and >= 10, where the algorithm is fragile."""
    n_digits = draw(st.integers(1, 30))
    a_digits = draw(st.lists(st.integers(0, 9), min_size=n_digits, max_size=n_digits))
    b_digits = [draw(_B_DIGIT[da]) for da in a_digits]
    a = sum(d * 10**p for p, d in enumerate(a_digits))
    b = sum(d * 10**p for p, d in enumerate(b_digits))
    return n_digits, a, b


def failure_set_property_check(algorithm=algorithm_digits):
    @given(case=cascade_prone_addends())
    @example(case=(4, 1805, 1195))  # column sums (10, 9, 9, 2): the shortest failing cascade
    # column sums (10, 9, 2): one 9 after a carry, which UseSum9 handles, so no failure; an
    # algorithm without it fails here on every run, not only when the search draws such a sum
    @example(case=(3, 145, 155))
    def run(case):
        n_digits, a, b = case
        digits = [(a // 10**p) % 10 + (b // 10**p) % 10 for p in range(n_digits)]
        sums = np.array(digits, dtype=np.int64)
        answer = sum(int(d) * 10**p for p, d in enumerate(algorithm(sums)))
        assert (answer != a + b) == bool(has_cascade(sums)), (
            f"{a} + {b}: algorithm says {answer}, cascade={bool(has_cascade(sums))}")
    return run


test_failure_set_on_long_addends = check(AD_FAILURE_SET, "property")(
    failure_set_property_check())


def probability_exhaustive_check(probability=failure_probability):
    def run(n_digits: int) -> None:
        failing = cases = 0
        for sums in column_sum_blocks(n_digits):
            weights = class_weights(sums)
            wrong = (algorithm_digits(sums) != true_digits(sums)).any(-1)
            failing += int(weights[wrong].sum())
            cases += int(weights.sum())
        exact = Fraction(failing, 100**n_digits)
        evidence.cases(cases)
        assert probability(n_digits) == exact, f"{probability(n_digits)} != {exact}"
    return run


def failure_probability_by_enumeration():
    check_digits = probability_exhaustive_check()
    for n_digits in range(1, 6):
        check_digits(n_digits)


test_failure_probability_by_enumeration = check(AD_FAILURE_PROBABILITY, "exhaustive")(
    failure_probability_by_enumeration)


def linear_formula_check(probability=failure_probability):
    """The automaton's probability is (n_d - 2) 45/100 (1/10)^2 for 2 <= n_d <= 5, and the
    statement's decimals are that formula's values (exact rationals)."""
    def run() -> None:
        import sympy as sp

        n = sp.Symbol("n_d", integer=True, positive=True)
        linear = (n - 2) * sp.Rational(45, 100) * sp.Rational(1, 10) ** 2
        for n_digits in range(2, 6):
            exact = sp.Rational(probability(n_digits).numerator,
                                probability(n_digits).denominator)
            assert sp.simplify(linear.subs(n, n_digits) - exact) == 0, (
                f"n_d={n_digits}: {exact} is not (n_d - 2) 0.0045")
            evidence.cases(1)
        assert [linear.subs(n, k) for k in (3, 4, 5)] == [
            sp.Rational("0.0045"), sp.Rational("0.009"), sp.Rational("0.0135")]
    return run


test_failure_probability_matches_linear_formula_up_to_five_digits = check(
    AD_FAILURE_PROBABILITY, "symbolic")(linear_formula_check())


def linear_probability_refutation(probability=failure_probability):
    def run():
        import sympy as sp

        def linear_claim(n_digits: int) -> None:
            claimed = Fraction(45, 10_000) * (n_digits - 2)
            assert probability(n_digits) == claimed, (
                f"n_d={n_digits}: exact {probability(n_digits)} != claimed {claimed}")

        for n_digits in range(2, 6):
            linear_claim(n_digits)  # the claim holds here, so the refutation is not vacuous
        report = expect_failure(linear_claim, 6)
        # Inclusion-exclusion by hand, in SymPy: the two co-occurring cascades at 6 digits.
        carry, nine = sp.Rational(45, 100), sp.Rational(10, 100)
        by_hand = 4 * carry * nine**2 - carry**2 * nine**4
        exact = probability(6)
        assert sp.Rational(exact.numerator, exact.denominator) == by_hand
        evidence.counterexample(f"n_d = 6: {report}")
        evidence.metric("P(6) exact", float(exact))
        evidence.metric("P(6) claimed", 0.018)
        evidence.table("exact failure probability", ["digits", "exact", "(n_d - 2) * 0.0045"],
                       [[n, str(probability(n)), f"{(n - 2) * 0.0045:.6g}"]
                        for n in range(2, 11)])
    return run


test_linear_failure_probability_breaks_at_six_digits = check(
    AD_LINEAR_PROBABILITY, "refutation")(linear_probability_refutation())


def per_digit_exhaustive_check(wrong_digits=expected_wrong_digits):
    """Enumerate every column-sum class, count the algorithm's wrong digits in each, weight by
    the class size, and compare with the recursion (all exact: integers and rationals)."""
    def run(n_digits: int) -> None:
        wrong_total = cases = 0
        for sums in column_sum_blocks(n_digits):
            weights = class_weights(sums)
            wrong = (algorithm_digits(sums) != true_digits(sums)).sum(-1)
            wrong_total += int((weights * wrong).sum())
            cases += int(weights.sum())
        exact = Fraction(wrong_total, 100**n_digits)
        evidence.cases(cases)
        assert wrong_digits(n_digits) == exact, (
            f"n_d={n_digits}: recursion {wrong_digits(n_digits)} != enumeration {exact}")
    return run


def per_digit_errors_by_enumeration():
    check_digits = per_digit_exhaustive_check()
    for n_digits in range(1, 6):
        check_digits(n_digits)
    sums = np.array([10, 9, 9, 9, 0])  # the run that breaks two digits
    assert int((algorithm_digits(sums) != true_digits(sums)).sum()) == 2


test_per_digit_errors_by_enumeration = check(AD_PER_DIGIT, "exhaustive")(
    per_digit_errors_by_enumeration)


def per_digit_value_check(accuracy=per_digit_accuracy):
    """The printed number: 99.759% (to the digits shown) at 5 digits."""
    def run() -> None:
        value = accuracy(5)
        evidence.metric("per-digit accuracy at 5 digits", float(value), worse="lower")
        assert abs(value - Fraction(99759, 100_000)) <= Fraction(5, 10**6), (
            f"per-digit accuracy at 5 digits is {float(value):.6%}, not 99.759%")
        assert value == 1 - Fraction(14445, 10**6) / 6  # exactly
    return run


test_per_digit_accuracy_at_five_digits = check(AD_PER_DIGIT, "exhaustive")(
    per_digit_value_check())


# --- proved (appended: machine-checked proofs, see theorems/proving.py) ----------------------


# The iff for every number of digits, by induction over the digit lists (Coq, nat and lists;
# no axioms): the algorithm's carry-in equals the true carry at every column unless a carry
# meets two 9-sum columns, and base-10 digit strings are unique.
test_failure_set_proved = check(AD_FAILURE_SET, "proved")(
    coq_proof("proofs/coq/addition_failure_set.v", theorem="failure_set",
              scope=Scope("statement", "the iff, for every n_d and all addends of n_d digits "
                          "(each below 10), with s_{n_d} = 0 and out-of-range terms 0")))
