r"""Helpers shared by the topic modules of this area."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from theorems.claims import Source
from theorems.numerics import gamma, unit_roundoff

KS = {"arxiv": "2307.14023", "ref": "Kajitsuka & Sato (2024), ICLR"}
DERIVED = Source(where="the Boltzmann operator behind Lemma 1; fact derived and proven here",
                 tag="D", **KS)
BOLTZ_DEF = (r"For $a \in \mathbb R^n$ and an inverse temperature $\beta > 0$ let "
             r"$p_\beta = \sigma_S[\beta a]$ (softmax, $p_{\beta,i} = e^{\beta a_i}/\sum_j "
             r"e^{\beta a_j}$) and $\mathrm{boltz}_\beta(a) = \sum_i a_i p_{\beta,i}$, "
             r"$\mathrm{boltz} = \mathrm{boltz}_1$. ")

# --- shared helpers ---------------------------------------------------------------------------

U = unit_roundoff()
EXACT = "donot_use_mm_for_euclid_dist"  # cdist from differences, not |x|^2 + |y|^2 - 2xy


def exponent_error(a: torch.Tensor, beta: float) -> float:
    r"""The relative error that rounded exponents give each softmax weight.

    ``softmax`` of ``z = beta * a`` takes :math:`d_i = \hat z_i - \hat z_m` (``m`` the
    argmax). The product rounds :math:`z_i` by :math:`u|\beta a_i|` (the anchor's rounding is
    a shift common to every :math:`d_i`, which the normalisation cancels), and the subtraction
    by :math:`u|d_i| \le 2u|\beta|A`: each exponent moves by :math:`\eta_i \le 3u|\beta|A`,
    :math:`A = \max|a_i|`. :math:`\ln p_i = d_i - \ln\sum_j e^{d_j}` then moves by
    :math:`\le 2\max\eta`, so each weight by a relative :math:`e^{6u|\beta|A} - 1`.
    (Earlier bounds took :math:`2u|\beta|A`, one rounding: they left out the subtraction's
    rounding and the normaliser's share.)
    """
    return math.expm1(6 * U * abs(beta) * float(a.abs().max()))


def boltz_error(a: torch.Tensor, beta: float) -> float:
    r"""Rounding bound of one :func:`boltzmann` evaluation of ``a`` (1-D).

    Each softmax weight carries a relative error :math:`K = \gamma_{n+6} + e(1 + \gamma_{n+6})`
    with :math:`e` = :func:`exponent_error` (exp within 1 ulp, the n-term sum and the division
    give :math:`\gamma_{n+6}` with room). The result :math:`a_m + \sum_i (a_i - a_m)p_i`
    then errs by at most :math:`K S + \gamma_2(|a_m| + S)` with :math:`S = \sum_i|a_i - a_m|p_i`
    (the differences, the products and the final addition; the n-term sum is in K's
    :math:`\gamma_{n+6}`), S computed from computed weights, within the same K.
    """
    z = beta * a
    p = z.softmax(-1)
    anchor = a[z.argmax()]
    S = float(((a - anchor).abs() * p).sum())
    K = gamma(a.numel() + 6) + exponent_error(a, beta) * (1 + gamma(a.numel() + 6))
    return K * S * (1 + K) + gamma(2) * (abs(float(anchor)) + S * (1 + K))


def relative_margin(tol: float, err: float) -> float:
    """``(tol - err) / tol``: 1 when exact, 0 at the bound, negative beyond it."""
    if tol > 0:
        return (tol - err) / tol
    return 1.0 if err == 0 else -math.inf


def weight_error(a: torch.Tensor, beta: float) -> float:
    """The relative error ``K`` of each softmax weight (see :func:`boltz_error`), with two
    more roundings of room for the checks' own sums."""
    return gamma(a.numel() + 8) + exponent_error(a, beta) * (1 + gamma(a.numel() + 8))


@st.composite
def boltz_inputs(draw, max_n: int = 50, bound: float = 50.0):
    """A vector with entries in ``[-bound, bound]`` (often with near-ties at the top, where
    large ``beta`` is delicate) and ``beta`` in ``[1e-3, 1e3]`` (log-uniform)."""
    n = draw(st.integers(1, max_n))
    values = draw(st.lists(st.floats(-bound, bound, allow_nan=False), min_size=n, max_size=n))
    a = torch.tensor(values, dtype=torch.float64)
    if n >= 2 and draw(st.booleans()):
        a[1] = a[0] - draw(st.floats(0, 1e-2))  # a near-tie with another entry
    beta = 10 ** draw(st.floats(-3, 3))
    return a, beta


TWO_POINT = (torch.tensor([0.0, -1.2785], dtype=torch.float64), 1.0)
SPREAD = (torch.linspace(-50, 50, 50, dtype=torch.float64), 1e-3)
SATURATED = (torch.tensor([50.0, -50.0, 49.999, 0.0], dtype=torch.float64), 200.0)  # |βa| = 1e4


