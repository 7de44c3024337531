r"""The per-digit addition algorithm of a one-layer transformer (Quirke & Barez 2024,
arXiv:2310.13121; code PhilipQuirke/transformer-maths).

For :math:`n_d`-digit addends with digits :math:`D_p, D'_p` (:math:`p = 0` least
significant) the column sum is :math:`s_p = D_p + D'_p`, and the sub-tasks are
MakeCarry1 :math:`\mathrm{MC1}_p = [s_p \ge 10]` and MakeSum9 :math:`\mathrm{MS9}_p = [s_p = 9]`.
The model's answer digit :math:`p \in \{0, \dots, n_d\}` is

.. math::

    A_p = \big(s_p + \mathrm{MC1}_{p-1} + [\lnot\mathrm{MC1}_{p-1} \wedge \mathrm{MS9}_{p-1}
          \wedge \mathrm{MC1}_{p-2}]\big) \bmod 10,

with :math:`s_{n_d} = 0` and out-of-range terms 0. It looks back at most two columns, so it
propagates a carry through at most one column that sums to 9. Everything depends only on
the column sums, which is what makes exhaustive checks cheap: the :math:`10^{2n_d}` pairs
fall into :math:`19^{n_d}` column-sum classes, class :math:`s` having
:math:`\prod_p \min(s_p + 1, 19 - s_p)` members.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from constructions import _validate

# Column sums of two digits lie in [0, 18].
SUM_RANGE = {"low": 0, "high": 18, "min_ndim": 1}


def _digits(name: str, value, n_digits: int) -> np.ndarray:
    value = _validate.int_array(name, value)
    if (value < 0).any() or (value >= 10**n_digits).any():
        raise ValueError(f"{name} must lie in [0, 10**{n_digits})")
    return (value[..., None] // 10 ** np.arange(n_digits)) % 10


def column_sums(a, b, n_digits: int) -> np.ndarray:
    """Column sums ``s[..., p] = D_p + D'_p``, least significant column first."""
    n_digits = _validate.positive_int("n_digits", n_digits)
    a, b = _digits("a", a, n_digits), _digits("b", b, n_digits)
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"b of shape {b.shape[:-1]} does not broadcast against a of shape "
                         f"{a.shape[:-1]}") from None
    return a + b


def algorithm_digits(sums: np.ndarray) -> np.ndarray:
    """The algorithm's ``n_d + 1`` answer digits from column sums ``(..., n_d)``."""
    sums = _validate.int_array("sums", sums, **SUM_RANGE)
    padded = np.concatenate([sums, np.zeros((*sums.shape[:-1], 1), dtype=sums.dtype)], -1)
    carry1, sum9 = padded >= 10, padded == 9
    none = np.zeros(sums.shape[:-1], dtype=bool)
    digits = np.empty(padded.shape, dtype=np.int64)
    for p in range(padded.shape[-1]):
        mc1_prev = carry1[..., p - 1] if p >= 1 else none
        ms9_prev = sum9[..., p - 1] if p >= 1 else none
        mc1_prev2 = carry1[..., p - 2] if p >= 2 else none
        use_sum9 = ~mc1_prev & ms9_prev & mc1_prev2
        digits[..., p] = (padded[..., p] + mc1_prev + use_sum9) % 10
    return digits


def true_digits(sums: np.ndarray) -> np.ndarray:
    """The ``n_d + 1`` digits of the true sum, by full carry propagation."""
    sums = _validate.int_array("sums", sums, **SUM_RANGE)
    digits = np.empty((*sums.shape[:-1], sums.shape[-1] + 1), dtype=np.int64)
    carry = np.zeros(sums.shape[:-1], dtype=np.int64)
    for p in range(sums.shape[-1]):
        total = sums[..., p] + carry
        digits[..., p], carry = total % 10, total // 10
    digits[..., -1] = carry
    return digits


def _digits_to_int(digits: np.ndarray) -> np.ndarray:
    return (np.asarray(digits) * 10 ** np.arange(digits.shape[-1])).sum(-1)


def per_digit_addition(a, b, n_digits: int) -> np.ndarray:
    """What the per-digit algorithm answers for ``a + b`` (vectorised over arrays)."""
    return _digits_to_int(algorithm_digits(column_sums(a, b, n_digits)))


def has_cascade(sums: np.ndarray) -> np.ndarray:
    """True where a column summing to >= 10 is followed by two more columns summing to 9."""
    sums = _validate.int_array("sums", sums, **SUM_RANGE)
    found = np.zeros(sums.shape[:-1], dtype=bool)
    for p in range(sums.shape[-1] - 2):
        found |= (sums[..., p] >= 10) & (sums[..., p + 1] == 9) & (sums[..., p + 2] == 9)
    return found


def class_weights(sums: np.ndarray) -> np.ndarray:
    """How many digit pairs ``(a, b)`` have these column sums: ``prod_p min(s_p + 1, 19 - s_p)``."""
    sums = _validate.int_array("sums", sums, **SUM_RANGE)
    return np.minimum(sums + 1, 19 - sums).prod(axis=-1)


def failure_probability(n_digits: int) -> Fraction:
    r"""Exact :math:`P(\text{algorithm} \ne a + b)` for uniform :math:`n_d`-digit addends.

    A left-to-right automaton over columns tracks the run that a cascade needs:
    state 0 (nothing pending), 1 (last column carried), 2 (carry then one 9), and
    "failed" (absorbing). Per column, :math:`P(s\ge 10) = 45/100`, :math:`P(s = 9) = 10/100`.
    """
    n_digits = _validate.positive_int("n_digits", n_digits)
    carry, nine = Fraction(45, 100), Fraction(10, 100)
    other = 1 - carry - nine
    state = {0: Fraction(1), 1: Fraction(0), 2: Fraction(0)}
    failed = Fraction(0)
    for _ in range(n_digits):
        failed += state[2] * nine
        state = {0: (state[0] + state[1] + state[2]) * other + state[0] * nine,
                 1: (state[0] + state[1] + state[2]) * carry,
                 2: state[1] * nine}
    return failed


def expected_wrong_digits(n_digits: int) -> Fraction:
    r"""Exact expected number of wrong answer digits (of the :math:`n_d + 1`) for uniform
    :math:`n_d`-digit addends.

    The algorithm's carry into column :math:`p` is the true one except when column
    :math:`p-1` and :math:`p-2` both sum to 9 and a carry enters column :math:`p-2` (the
    algorithm looks back one 9-sum column only); it is never too large. So digit :math:`p`
    is wrong with probability :math:`(1/10)^2\,q_{p-2}`, where :math:`q_j` is the probability
    of a true carry into column :math:`j`: :math:`q_0 = 0`, :math:`q_{j+1} = 45/100 +
    (10/100)\,q_j`. A failing question can have several wrong digits: a long run of 9-sum
    columns after a carry breaks every digit from the third on.
    """
    n_digits = _validate.positive_int("n_digits", n_digits)
    carry, nine = Fraction(45, 100), Fraction(10, 100)
    q, total = Fraction(0), Fraction(0)
    for _ in range(2, n_digits + 1):  # answer digits p = 2..n_d; q is q_{p-2}
        total += nine * nine * q
        q = carry + nine * q
    return total


def per_digit_accuracy(n_digits: int) -> Fraction:
    """Exact fraction of the n_d + 1 answer digits that the algorithm gets right."""
    n_digits = _validate.positive_int("n_digits", n_digits)
    return 1 - expected_wrong_digits(n_digits) / (n_digits + 1)
