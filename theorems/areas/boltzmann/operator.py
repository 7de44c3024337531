r"""The Boltzmann operator: its six facts (entropy identity, max bounds, derivative, symmetry,
monotonicity, rank-one heads), BZ.1.
"""

from __future__ import annotations

import math

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.boltzmann import (
    boltzmann,
    rank_one_head,
)
from theorems.areas.boltzmann._shared import (
    BOLTZ_DEF,
    DERIVED,
    KS,
    SATURATED,
    SPREAD,
    TWO_POINT,
    U,
    boltz_error,
    boltz_inputs,
    relative_margin,
    weight_error,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence, expect_failure
from theorems.numerics import gamma
from theorems.proof_statements import Scope
from theorems.proving import coq_proof
from theorems.strategies import seeds

# --- BZ.1: six facts about the Boltzmann operator ---------------------------------------------

BZ_ENTROPY = Claim(
    id="boltzmann.entropy-decomposition",
    title="The Boltzmann operator is log-sum-exp minus entropy over temperature",
    statement=BOLTZ_DEF + (
        r"With $\mathrm{LSE}_\beta(a) = \beta^{-1}\ln\sum_i e^{\beta a_i}$ and the entropy "
        r"$H(p) = -\sum_i p_i\ln p_i$: $\mathrm{boltz}_\beta(a) = \mathrm{LSE}_\beta(a) - "
        r"H(p_\beta)/\beta$."),
    source=DERIVED, kind="identity", construction="constructions.boltzmann:boltzmann")

BZ_MAX_BOUNDS = Claim(
    id="boltzmann.max-bounds",
    title="max a − ln(n)/β ≤ boltz_β(a) ≤ max a",
    statement=BOLTZ_DEF + (
        r"For every $a \in \mathbb R^n$ and $\beta > 0$: "
        r"$\max_i a_i - (\ln n)/\beta \le \mathrm{boltz}_\beta(a) \le \max_i a_i$."),
    source=DERIVED, kind="bound", construction="constructions.boltzmann:boltzmann",
    depends_on=("boltzmann.entropy-decomposition",))

BZ_DERIVATIVE = Claim(
    id="boltzmann.temperature-derivative",
    title="d boltz_β / dβ is the variance under p_β, so boltz_β rises from the mean to the max",
    statement=BOLTZ_DEF + (
        r"$\partial_\beta\,\mathrm{boltz}_\beta(a) = \mathrm{Var}_{p_\beta}(a) = \sum_i "
        r"p_{\beta,i}(a_i - \mathrm{boltz}_\beta(a))^2 \ge 0$; hence $\beta\mapsto"
        r"\mathrm{boltz}_\beta(a)$ is non-decreasing, with $\lim_{\beta\to0^+} = \bar a$ (the "
        r"mean) and $\lim_{\beta\to\infty} = \max_i a_i$."),
    source=DERIVED, kind="identity", construction="constructions.boltzmann:boltzmann",
    depends_on=("boltzmann.max-bounds",))

BZ_SYMMETRY = Claim(
    id="boltzmann.shift-permutation",
    title="boltz is shift-equivariant and permutation-invariant",
    statement=BOLTZ_DEF + (
        r"For every $c \in \mathbb R$ and permutation $\pi$ of $[n]$: "
        r"$\mathrm{boltz}_\beta(a + c\mathbf 1) = \mathrm{boltz}_\beta(a) + c$ and "
        r"$\mathrm{boltz}_\beta(a_{\pi(1)}, \dots, a_{\pi(n)}) = \mathrm{boltz}_\beta(a)$."),
    source=DERIVED, kind="identity", construction="constructions.boltzmann:boltzmann")

BZ_MONOTONE = Claim(
    id="boltzmann.coordinatewise-monotone",
    title="boltz is non-decreasing in each coordinate (false)",
    statement=BOLTZ_DEF + (
        r"For all $a, b \in \mathbb R^n$ with $a_i \le b_i$ for every $i$: "
        r"$\mathrm{boltz}(a) \le \mathrm{boltz}(b)$."),
    source=DERIVED, kind="identity", construction="constructions.boltzmann:boltzmann",
    correction=(
        r"$\partial\,\mathrm{boltz}(a)/\partial a_i = p_i\,(1 + a_i - \mathrm{boltz}(a))$, which "
        r"is negative when $a_i < \mathrm{boltz}(a) - 1$. For $n = 2$, $x \mapsto "
        r"\mathrm{boltz}(0, x) = x e^x/(1 + e^x)$ decreases on $(-\infty, x^*]$ and increases "
        r"after, with $x^* = -1 - W(1/e) \approx -1.2785$ and minimum $-W(1/e) \approx -0.2785$ "
        r"($W$ the Lambert function). boltz is non-decreasing in $a_i$ wherever "
        r"$a_i \ge \mathrm{boltz}(a) - 1$, for example on any box of side $\le 1$."),
    refutes="as-written",
    notes="This is why Lemma 1 needs score gaps above 2 ln n + 3: far from the maximum the "
          "Boltzmann operator is not monotone, and different contexts could collide.")

BZ_RANK_ONE = Claim(
    id="boltzmann.rank-one-head",
    title="A rank-1 softmax head computes the Boltzmann operator",
    statement=(
        r"Let $w, u \in \mathbb R^d$, $\rho, c \in \mathbb R$, and the head $W_Q = \rho w$, "
        r"$W_K = W_V = w$ ($d\times 1$), $W_O = c\,u^\top$, acting on tokens $x_1, \dots, x_n "
        r"\in \mathbb R^d$ (rows) as $\mathrm{Attn}(x)_q = \sum_k \sigma_S[(x_q W_Q)(x W_K)^\top]"
        r"_k\, x_k W_V W_O$. With $s_q = w^\top x_q$ and $p = (w^\top x_k)_k$: "
        r"$\mathrm{Attn}(x)_q = c\,u^\top\,\mathrm{boltz}_{\rho s_q}(p) = c\,u^\top\,"
        r"\mathrm{boltz}(\rho s_q p)/(\rho s_q)$ (for $\rho s_q = 0$, the mean of $p$)."),
    source=(Source(where="the rank-1 weights of Theorem 2's construction", tag="R", **KS),
            DERIVED),
    kind="identity", construction="constructions.boltzmann:rank_one_head")

# --- BZ.1 ------------------------------------------------------------------------------------

def entropy_check(op=boltzmann):
    @given(case=boltz_inputs())
    @example(case=TWO_POINT)
    @example(case=SPREAD)
    @example(case=SATURATED)
    def run(case):
        a, beta = case
        n = a.numel()
        b = float(op(a, beta))
        z = beta * a
        lse = float(torch.logsumexp(z, 0)) / beta
        log_p = z.log_softmax(0)
        H = float(-(log_p.exp() * log_p).sum())
        # Every term is a sum of n softmax-weighted quantities, each with relative error K:
        # boltz (|.| <= 2A), LSE/beta (|m|/beta <= A plus log S <= ln n, over beta) and H/beta
        # (sum p|ln p| = H). Both sides err, so the bound is doubled.
        K, A = weight_error(a, beta), float(a.abs().max())
        tol = 2 * K * (3 * A + abs(lse) + (math.log(n) + 1 + 2 * H) / beta)
        err = abs(b - (lse - H / beta))
        evidence.margin(relative_margin(tol, err))
        assert err <= tol, f"boltz = {b!r} but LSE - H/beta = {lse - H / beta!r} (tol {tol:.3g})"
    return run


test_boltzmann_is_lse_minus_entropy = check(BZ_ENTROPY, "property")(entropy_check())


def entropy_decomposition_symbolically():
    import sympy as sp

    for n in (2, 3, 4):
        a = sp.symbols(f"a0:{n}", real=True)
        beta = sp.Symbol("beta", positive=True)
        Z = sum(sp.exp(beta * x) for x in a)
        p = [sp.exp(beta * x) / Z for x in a]
        boltz = sum(x * q for x, q in zip(a, p, strict=True))
        # ln p_i = beta a_i - ln Z (expand_log is valid here: both factors are positive)
        H = -sum(q * sp.expand_log(sp.log(q), force=True) for q in p)
        assert sp.cancel(sp.together(sp.expand(sp.log(Z) / beta - H / beta - boltz))) == 0
        evidence.cases(1)


test_entropy_decomposition_symbolically = check(BZ_ENTROPY, "symbolic")(
    entropy_decomposition_symbolically)


def max_bounds_check(op=boltzmann, slack: float = 1.0):
    """``slack < 1`` tightens the lower bound to ``max a - slack * ln(n)/beta`` (a mutant)."""
    @given(case=boltz_inputs())
    @example(case=TWO_POINT)
    @example(case=SATURATED)
    def run(case):
        a, beta = case
        n = a.numel()
        b, top = float(op(a, beta)), float(a.max())
        width = math.log(n) / beta
        tol = boltz_error(a, beta) + 2 * U * (abs(top) + width)
        upper, lower = top + tol - b, b - (top - slack * width) + tol
        assert math.isfinite(b), f"boltz overflowed: {b}"
        if n > 1:
            evidence.ratio((top - b) / width)  # how much of the ln(n)/beta allowance is used
        evidence.margin(min(upper, lower) / (width + tol) if width + tol > 0 else 1.0)
        assert upper >= 0, f"boltz = {b!r} > max a = {top!r}"
        assert lower >= 0, f"boltz = {b!r} < max a - {slack:g} ln(n)/beta = {top - slack * width!r}"
    return run


test_boltzmann_between_max_minus_log_n_and_max = check(BZ_MAX_BOUNDS, "property")(
    max_bounds_check())


def derivative_check(op=boltzmann):
    @given(case=boltz_inputs())
    @example(case=TWO_POINT)
    @example(case=SPREAD)
    def run(case):
        a, beta = case
        bt = torch.tensor(beta, dtype=torch.float64, requires_grad=True)
        value = op(a, bt)
        (slope,) = torch.autograd.grad(value, bt)
        b = float(value.detach())
        p = (beta * a).softmax(0)
        variance = float((p * (a - b) ** 2).sum())
        # Backpropagation and the variance are n-term sums of products of entries |a_i| <= A
        # with weighted deviations (sum <= S + A): relative error K on magnitudes 2A(S + A).
        K, A = weight_error(a, beta), float(a.abs().max())
        S = float(((a - a[(beta * a).argmax()]).abs() * p).sum())
        tol = 4 * K * 2 * A * (S + A) + 4 * U * variance
        err = abs(float(slope) - variance)
        evidence.margin(relative_margin(tol, err))
        assert err <= tol, f"d boltz/d beta = {float(slope)!r}, Var = {variance!r} (tol {tol:.3g})"
        # Monotone in beta, and the mean as beta -> 0: |boltz_b0 - mean| <= b0 max Var <= b0 A^2.
        later = float(op(a, 1.5 * beta))
        assert later >= b - boltz_error(a, beta) - boltz_error(a, 1.5 * beta), "not monotone"
        beta0 = 1e-9 / (1 + A)
        near_zero = float(op(a, beta0))
        assert abs(near_zero - float(a.mean())) <= beta0 * A**2 + 4 * gamma(a.numel()) * A
    return run


test_temperature_derivative_is_variance = check(BZ_DERIVATIVE, "property")(derivative_check())


def temperature_derivative_symbolically():
    import sympy as sp

    for n in (2, 3):
        a = sp.symbols(f"a0:{n}", real=True)
        beta = sp.Symbol("beta", positive=True)
        Z = sum(sp.exp(beta * x) for x in a)
        boltz = sum(x * sp.exp(beta * x) for x in a) / Z
        variance = sum(x**2 * sp.exp(beta * x) for x in a) / Z - boltz**2
        assert sp.simplify(sp.diff(boltz, beta) - variance) == 0
        evidence.cases(1)
    x, y = sp.symbols("x y", real=True)
    two = (x * sp.exp(beta * x) + y * sp.exp(beta * y)) / (sp.exp(beta * x) + sp.exp(beta * y))
    assert sp.simplify(sp.limit(two, beta, 0) - (x + y) / 2) == 0
    assert sp.limit(two.subs({x: 2, y: -1}), beta, sp.oo) == 2
    evidence.cases(2)


test_temperature_derivative_symbolically = check(BZ_DERIVATIVE, "symbolic")(
    temperature_derivative_symbolically)


def symmetry_check(op=boltzmann):
    @given(case=boltz_inputs(), shift=st.floats(-50, 50), seed=seeds())
    @example(case=SATURATED, shift=-49.5, seed=0)
    def run(case, shift, seed):
        a, beta = case
        perm = torch.randperm(a.numel(), generator=torch.Generator().manual_seed(seed))
        b = float(op(a, beta))
        shifted = a + shift
        b_shift, b_perm = float(op(shifted, beta)), float(op(a[perm], beta))
        # a + shift is rounded entrywise (error <= u max|a + c|), and boltz moves by at most
        # (1 + beta sum_i p_i|a_i - b|) <= (1 + 2 beta A) times a sup-norm perturbation.
        A = float(shifted.abs().max())
        lipschitz = 1 + 2 * beta * float(((a - b).abs() * (beta * a).softmax(0)).sum())
        tol_shift = (boltz_error(a, beta) + boltz_error(shifted, beta)
                     + U * (abs(b) + abs(shift)) + lipschitz * U * A)
        tol_perm = 2 * boltz_error(a, beta)
        err_shift, err_perm = abs(b_shift - (b + shift)), abs(b_perm - b)
        evidence.margin(min(relative_margin(tol_shift, err_shift),
                            relative_margin(tol_perm, err_perm)))
        assert err_shift <= tol_shift, f"boltz(a + c) - boltz(a) - c = {b_shift - b - shift:.3g}"
        assert err_perm <= tol_perm, f"boltz(pi a) - boltz(a) = {b_perm - b:.3g}"
    return run


test_shift_equivariance_and_permutation_invariance = check(BZ_SYMMETRY, "property")(
    symmetry_check())


def monotonicity_claim(op=boltzmann):
    """The claim as stated: boltz(a) <= boltz(a + increment) for every increment >= 0."""
    @given(a=st.lists(st.floats(-5, 5), min_size=1, max_size=5),
           data=st.data())
    @example(a=[0.0, -3.0], data=None)
    def run(a, data):
        a = torch.tensor(a, dtype=torch.float64)
        if data is None:  # the pinned example: raise the second entry to the minimiser
            increment = torch.tensor([0.0, 3.0 - 1.2785], dtype=torch.float64)
        else:
            increment = torch.tensor(data.draw(st.lists(st.floats(0, 5), min_size=len(a),
                                                        max_size=len(a))), dtype=torch.float64)
        b = a + increment
        low, high = float(op(a, 1.0)), float(op(b, 1.0))
        tol = boltz_error(a, 1.0) + boltz_error(b, 1.0) + 2 * U * float(b.abs().max())
        assert low <= high + tol, (
            f"boltz({a.tolist()}) = {low:.6g} > boltz({b.tolist()}) = {high:.6g}")
    return run


def monotonicity_refutation(op=boltzmann):
    def run():
        import sympy as sp

        report = expect_failure(monotonicity_claim(op))
        # The exact minimiser of x -> boltz(0, x) = x e^x/(1 + e^x): the numerator of the
        # derivative is e^x (1 + x + e^x), zero at x* = -1 - W(1/e).
        x = sp.Symbol("x", real=True)
        f = x * sp.exp(x) / (1 + sp.exp(x))
        critical = sp.solve(sp.numer(sp.together(sp.diff(f, x))), x)
        assert critical == [-1 - sp.LambertW(sp.exp(-1))], critical
        x_star = float(critical[0])
        minimum = float(f.subs(x, critical[0]))
        assert abs(x_star + 1.2785) < 1e-4 and abs(minimum + float(sp.LambertW(sp.exp(-1)))) < 1e-12
        pair = torch.tensor([[0.0, -3.0], [0.0, x_star]], dtype=torch.float64)
        values = op(pair, 1.0)
        gap = float(values[0] - values[1])
        tol = boltz_error(pair[0], 1.0) + boltz_error(pair[1], 1.0)
        assert gap > tol, f"boltz(0, -3) - boltz(0, x*) = {gap:.3g} is not positive"
        return report, x_star, minimum, gap
    return run


def boltzmann_is_not_coordinatewise_monotone():
    report, x_star, minimum, gap = monotonicity_refutation()()
    evidence.counterexample(f"(0, -3) <= (0, x*) with x* = -1 - W(1/e) = {x_star:.6f}, but "
                            f"boltz(0, -3) - boltz(0, x*) = {gap:.4f} > 0. Hypothesis: {report}")
    evidence.metric("argmin of boltz(0, x)", x_star)
    evidence.metric("min of boltz(0, x)", minimum)


test_boltzmann_is_not_coordinatewise_monotone = check(BZ_MONOTONE, "refutation")(
    boltzmann_is_not_coordinatewise_monotone)


def rank_one_output_error(x: torch.Tensor, w: torch.Tensor, rho: float,
                          out_scale: float) -> torch.Tensor:
    r"""Rounding bound ``(B, n, 1)`` of a rank-1 head's output (unit ``u``), per token.

    As in :func:`constructions.boltzmann.context_id_error_bound`: score error
    :math:`\Delta\le\gamma_{2d+4}|\rho|R^2` (:math:`R = \max_k|x_k|^\top|w|`; the
    rounding of :math:`\rho w`, two d-term dots, their product, and the softmax's max-shift
    subtraction, :math:`\le 2u|\rho|R^2`), value error
    :math:`2\Delta R + \gamma_{n+d+4}R`, times :math:`|c|` and one more rounding for
    :math:`W_O`."""
    n, d = x.shape[1], x.shape[2]
    R = (x.abs() @ w.abs()).amax(dim=-1, keepdim=True)[..., None]
    value_error = 2 * gamma(2 * d + 4) * abs(rho) * R**3 + gamma(n + d + 4) * R
    return abs(out_scale) * (value_error + gamma(2) * R)


def rank_one_check(head=rank_one_head):
    @given(d=st.integers(1, 6), n=st.integers(1, 8), seed=seeds(), rho=st.floats(-10, 10),
           out_scale=st.floats(0.1, 3))
    @example(d=2, n=3, seed=0, rho=0.0, out_scale=1.0)  # rho = 0: uniform attention, the mean
    @example(d=3, n=4, seed=1, rho=2.0, out_scale=1.0)
    def run(d, n, seed, rho, out_scale):
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(4, n, d, generator=generator, dtype=torch.float64)
        w = torch.randn(d, generator=generator, dtype=torch.float64)
        w = w / w.norm()
        u = torch.randn(d, generator=generator, dtype=torch.float64)
        u = u / u.norm()
        out = head(w, rho, u=u, out_scale=out_scale)(x)
        p = x @ w
        values = boltzmann(p[:, None, :].expand(-1, n, -1), rho * p, dim=-1)
        expected = out_scale * values[..., None] * u
        tol = rank_one_output_error(x, w, rho, out_scale) + abs(out_scale) * max(
            boltz_error(p[b], rho * float(p[b, q])) for b in range(4) for q in range(n))
        err = (out - expected).abs()
        evidence.margin(float(((tol - err) / tol).min()))
        assert bool((err <= tol).all()), f"head output differs from c u boltz by {err.max():.3g}"
    return run


test_rank_one_head_computes_boltzmann = check(BZ_RANK_ONE, "property")(rank_one_check())


# --- proved: machine-checked proofs (theorems/proving.py) ---------------------------------------

# max a - ln(n)/beta <= boltz_beta(a) <= max a for every n >= 1 and beta > 0: Coq
# standard-library reals (so the classical-reals axioms are trusted), by x ln(nx) >= x - 1/n.
test_max_bounds_proved = check(BZ_MAX_BOUNDS, "proved")(
    coq_proof("proofs/coq/boltzmann_max_bounds.v", theorem="max_bounds",
              scope=Scope("statement", "max_i a_i - ln(n)/beta <= boltz_beta(a) <= max_i a_i "
                          "for every n >= 1, a in R^n and beta > 0, with boltz_beta written out "
                          "from the softmax weights; Coq standard-library reals")))
