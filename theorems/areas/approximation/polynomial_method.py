r"""The low-rank Taylor truncation of exp(QKᵀ) behind almost-linear-time gradients (Liang, Sha,
Shi, Song, Zhou 2024, "Multi-Layer Transformers Gradient Can be Approximated in Almost Linear
Time", arXiv:2408.13233).

Read [V]: the abstract (gradients of a whole multi-layer transformer in time
:math:`n^{1+o(1)}` with :math:`1/\mathrm{poly}(n)` error, for residuals, causal masks and
multi-head attention) and the opening of the introduction. The paper's end-to-end gradient
claim is not checkable here. Its core, the polynomial method of Alman and Song (2023), is
recalled [R]; what is checked is this project's statement of it [D]: the degree-:math:`g`
Taylor truncation of :math:`\exp(QK^\top)` factors through :math:`\binom{d+g}{g}` features,
and its entrywise error is at most :math:`B^{g+1}e^B/(g+1)!`.

Exactness (``factorisation_check``). Integer :math:`Q, K` with entries in :math:`[-3, 3]`,
:math:`d \le 3`, :math:`g \le 5`: every score has :math:`|s| \le 27`, every entry of
:math:`g!P_g` and of the product :math:`UV^\top` is an integer below
:math:`\binom{8}{5}\cdot 5!\cdot 27^5 < 2^{38}`, so int64 arithmetic is exact and the two are
compared with ``torch.equal``. The rank is computed exactly too (fraction-free Gaussian
elimination over the integers).

Tolerance (``truncation_error_check``). The float64 truncation is :math:`UV^\top` with
:math:`U_{i\alpha} = q^\alpha/\alpha!`: each monomial is a product of at most :math:`g` factors
and one division (:math:`\gamma_{g+1}`), the :math:`D`-term product adds :math:`\gamma_D`, so
the computed entry is within :math:`\gamma_{D+g+1}\sum_\alpha|q^\alpha||k^\alpha|/\alpha! \le
\gamma_{D+g+1}e^{|q|\cdot|k|}` of :math:`(P_g)_{ij}` (:math:`|q|\cdot|k|` the dot product of
absolute values), and ``torch.exp`` is within 1 ulp, :math:`2ue^{s}`.
"""

from __future__ import annotations

import math

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.polynomial_method import (
    integer_taylor_factors,
    integer_taylor_matrix,
    taylor_error_bound,
    taylor_factors,
)
from theorems.areas.approximation._bounds import U as UNIT
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.strategies import seeds

GRADIENTS = {"arxiv": "2408.13233",
             "ref": "Liang, Sha, Shi, Song, Zhou (2024), Multi-Layer Transformers Gradient Can be "
                    "Approximated in Almost Linear Time"}

PM_TAYLOR = Claim(
    id="approximation.taylor-attention-low-rank",
    title="The degree-g Taylor truncation of exp(QKᵀ) has rank at most C(d+g, g) and error "
          "at most B^{g+1}e^B/(g+1)!",
    statement=(
        r"For $Q, K \in \mathbb R^{n\times d}$ with rows $q_i, k_j$ and a degree $g \ge 0$, "
        r"let $P_g = \sum_{r=0}^{g}(QK^\top)^{\circ r}/r!$ (entrywise powers). Then "
        r"$P_g = UV^\top$ with $U_{i\alpha} = q_i^\alpha/\alpha!$ and $V_{j\alpha} = "
        r"k_j^\alpha$ over the $\binom{d+g}{g}$ multi-indices $\alpha \in \mathbb N^d$ with "
        r"$|\alpha| \le g$, so $\mathrm{rank}\,P_g \le \binom{d+g}{g}$ for every $n$. "
        r"With $B = \max_{i,j}|q_i\cdot k_j|$, every entry satisfies $|e^{q_i\cdot k_j} - "
        r"(P_g)_{ij}| \le B^{g+1}e^B/(g+1)!$."),
    source=(Source(where="Abstract (gradients in almost linear time n^{1+o(1)} with "
                         "1/poly(n) error)", tag="V", **GRADIENTS),
            Source(where="the polynomial method of Alman and Song (2023) that the proof builds "
                         "on (not read here)", tag="R", **GRADIENTS),
            Source(where="the factorisation and the error bound as stated, derived here",
                   tag="D", **GRADIENTS)),
    kind="bound", construction="constructions.polynomial_method:taylor_factors",
    notes="Alman and Song's statement, as recalled, gives rank at most C(2(g + d), 2g) for "
          "their construction; the multinomial factorisation here is smaller. Choosing g so "
          "that the error is 1/poly(n) needs B = o(log n), the bounded-entry regime in which "
          "the paper's almost-linear time holds; the multi-layer gradient itself is not "
          "checked.")


# --- the factorisation, exactly ------------------------------------------------------------------

@st.composite
def integer_points(draw) -> dict:
    d, n = draw(st.integers(1, 3)), draw(st.integers(1, 40))
    generator = torch.Generator().manual_seed(draw(seeds()))
    return {"Q": torch.randint(-3, 4, (n, d), generator=generator),
            "K": torch.randint(-3, 4, (n, d), generator=generator),
            "degree": draw(st.integers(0, 5))}


def exact_rank(M: torch.Tensor) -> int:
    """The rank of an integer matrix, by fraction-free (Bareiss) elimination in Python ints."""
    rows = [[int(v) for v in row] for row in M.tolist()]
    rank, previous = 0, 1
    columns = len(rows[0]) if rows else 0
    for column in range(columns):
        pivot = next((r for r in range(rank, len(rows)) if rows[r][column] != 0), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for r in range(rank + 1, len(rows)):
            rows[r] = [(rows[rank][column] * rows[r][c] - rows[r][column] * rows[rank][c])
                       // previous for c in range(columns)]
        previous = rows[rank][column]
        rank += 1
    return rank


def factorisation_check(factors=integer_taylor_factors):
    @budget(0.4)
    @given(case=integer_points())
    @example(case={"Q": torch.tensor([[1, 0, 2], [-3, 3, 1]] * 20),
                   "K": torch.tensor([[2, -1, 0], [1, 1, -3]] * 20), "degree": 5})
    def run(case):
        Q, K, g = case["Q"], case["K"], case["degree"]
        d = Q.shape[1]
        U, V = factors(Q, K, g)
        width = math.comb(d + g, g)
        assert U.shape[1] == V.shape[1] == width, (
            f"{U.shape[1]} features for d={d}, g={g}, not C(d+g, g) = {width}")
        assert torch.equal(U @ V.T, integer_taylor_matrix(Q, K, g)), (
            f"U V^T differs from g! P_g (d={d}, g={g}): the factorisation is wrong")
        rank = exact_rank(integer_taylor_matrix(Q, K, g))
        evidence.metric("rank of P_g / C(d+g, g)", rank / width)
        assert rank <= width, f"rank P_g = {rank} > C(d+g, g) = {width}"
    return run


test_the_taylor_truncation_factors_through_few_features = check(PM_TAYLOR, "property")(
    factorisation_check())


def symbolic_multinomial_check(d: int = 3, degree: int = 4, factors=None):
    """SymPy: sum_{r<=g} (q.k)^r/r! - sum_alpha q^alpha k^alpha/alpha! expands to 0 for
    symbolic q, k (d = 3, g = 4), and the count of alpha is C(d+g, g) for d, g <= 6."""
    def run():
        import sympy as sp

        from constructions.polynomial_method import multi_indices

        q, k = sp.symbols(f"q0:{d}"), sp.symbols(f"k0:{d}")
        s = sum(a * b for a, b in zip(q, k, strict=True))
        indices = (factors or multi_indices)(d, degree)
        features = sum(sp.prod([q[a] ** alpha[a] * k[a] ** alpha[a] / sp.factorial(alpha[a])
                                for a in range(d)]) for alpha in indices)
        residual = sp.expand(sum(s**r / sp.factorial(r) for r in range(degree + 1)) - features)
        assert residual == 0, f"the multinomial expansion leaves {residual}"
        for dd in range(1, 7):
            for g in range(7):
                count = len((factors or multi_indices)(dd, g))
                assert count == sp.binomial(dd + g, g), f"d={dd}, g={g}: {count} indices"
        evidence.cases(1 + 36)
    return run


test_the_features_expand_the_truncation_symbolically = check(PM_TAYLOR, "symbolic")(
    symbolic_multinomial_check())


# --- the error bound -----------------------------------------------------------------------------

@st.composite
def real_points(draw) -> dict:
    return {"d": draw(st.integers(1, 4)), "n": draw(st.integers(1, 32)),
            "degree": draw(st.integers(0, 8)),
            "scale": draw(st.sampled_from([0.2, 0.5, 1.0, 1.5])), "seed": draw(seeds())}


def truncation_error_check(bound=taylor_error_bound, factors=taylor_factors):
    @budget(0.4)
    @given(case=real_points())
    @example(case={"d": 3, "n": 32, "degree": 1, "scale": 1.5, "seed": 0})  # B large, g low
    @example(case={"d": 3, "n": 32, "degree": 8, "scale": 0.5, "seed": 1})
    def run(case):
        generator = torch.Generator().manual_seed(case["seed"])
        Q, K = (case["scale"] * torch.randn(2, case["n"], case["d"], generator=generator,
                                            dtype=torch.float64)).unbind(0)
        g = case["degree"]
        U, V = factors(Q, K, g)
        scores = Q @ K.T
        B = float(scores.abs().max())
        err = (torch.exp(scores) - U @ V.T).abs()
        D = U.shape[1]
        rounding = (gamma(D + g + 1) * torch.exp(Q.abs() @ K.abs().T)
                    + 2 * UNIT * torch.exp(scores))
        limit = bound(B, g)
        evidence.ratio(float(err.max()) / limit if limit > 0 else 0.0)
        assert bool((err <= limit + rounding).all()), (
            f"g={g}, B={B:.3g}: max |e^s - P_g| = {float(err.max()):.3g} exceeds "
            f"B^(g+1) e^B/(g+1)! = {limit:.3g}")
    return run


test_the_truncation_error_is_within_the_lagrange_bound = check(PM_TAYLOR, "property")(
    truncation_error_check())
