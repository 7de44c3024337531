r"""An infinitely long prefix through a finite summary ("Toward Infinite-Long Prefix in
Transformer", arXiv:2406.14036, NTK-Attention).

The title and arXiv id are from the official code's README, and NTK-Attention's form from its
``ntk_attn_demo.py`` [V code]; the authors are recalled [R] and the paper's NTK analysis
(over-parameterisation, arbitrarily small loss) was not read. What is checked is the exact
algebra behind the method (ours [D], see :mod:`constructions.prefix_attention`): the
decomposition of attention over ``[prefix; input]``, its exactness through a finite feature
map, and the limit as the prefix grows. The code's ELU+1 map does not factor the exponential
kernel, so with it the summary is learned; its error against the prefix length (their
``ntk_attn_error.py`` sweep, which trains the summary) is not reproduced here.

Tolerances. The decomposition: both sides are softmax averages with first-order bounds from
:func:`theorems.areas.approximation._bounds.softmax_attention_bound`; :math:`\lambda` is
computed from two sums of :math:`e^{\hat s - c}` with one shift :math:`c` (which cancels), each
term off by a relative :math:`\rho = 2\Delta + 2uS + u + \gamma_{m+n+1}`, so
:math:`|\hat\lambda - \lambda| \le 2\lambda(1-\lambda)\rho + 2u + (m+n)\,\mathrm{tiny} \le
\rho/2 + 2u + (m+n)\,\mathrm{tiny}` (the last term covers terms that underflow; the sums are
:math:`\ge 1`), which moves the mixture by at most that times :math:`M_P + M_X`; the mixture's
four operations add :math:`4u\max(M_P, M_X)`. The polynomial kernel: every term of either form
is a product whose absolute value is at most :math:`(c + \tau|q|\cdot|k|)^2|v|`
(:math:`\sum_r|\varphi_r(q)||\psi_r(k)| = (c + \tau|q|\cdot|k|)^2`), with at most
:math:`K = (1 + d + d^2) + m + n + 2d + 12` roundings in its chain, so numerators and
denominators are accurate to :math:`\gamma_K A_N` and :math:`\gamma_K A_D` (the sums of those
absolute values), and each quotient to :math:`\gamma_K(A_N + MA_D)/(\hat D - \gamma_K A_D) +
uM`; the two forms differ by at most twice that.
"""

from __future__ import annotations

import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from constructions.prefix_attention import (
    kernel_attention,
    ntk_attention,
    prefix_decomposition,
    softmax_attention,
)
from theorems.areas.approximation._bounds import U, softmax_attention_bound
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.proof_statements import Scope
from theorems.proving import coq_proof
from theorems.strategies import seeds

PREFIX = {"arxiv": "2406.14036", "ref": "Toward Infinite-Long Prefix in Transformer (2024)"}
ATTN = (r"For a query $q \in \mathbb R^d$, keys $k_j$ and values $v_j$, scores "
        r"$s_j = \tau\,q\cdot k_j$ and $\mathrm{Attn}(q; J) = \sum_{j\in J}e^{s_j}v_j/"
        r"\sum_{j\in J}e^{s_j}$; a prefix $P$ ($m$ tokens) precedes the input $X$ ($n$ "
        r"tokens), $Z_J = \sum_{j\in J}e^{s_j}$. ")
TINY = torch.finfo(torch.float64).tiny

PX_DECOMP = Claim(
    id="approximation.prefix-decomposition",
    title="Attention over [prefix; input] is a λ-mixture of prefix and input attention",
    statement=ATTN + (
        r"For all $m, n \ge 1$: $\mathrm{Attn}(q; [P; X]) = \lambda\,\mathrm{Attn}(q; P) + "
        r"(1 - \lambda)\,\mathrm{Attn}(q; X)$ with $\lambda = Z_P/(Z_P + Z_X)$; so the prefix "
        r"enters only through $q \mapsto \sum_{p}e^{s_p}v_p$ and $q \mapsto \sum_p e^{s_p}$."),
    source=(Source(where="Abstract (NTK-Attention is equivalent to attention with an "
                         "arbitrary prefix length)", tag="V", **PREFIX),
            Source(where="the exact decomposition behind it, derived here", tag="D", **PREFIX)),
    kind="identity", construction="constructions.prefix_attention:prefix_decomposition")

PX_FINITE = Claim(
    id="approximation.prefix-finite-summary",
    title="With a finite feature map, NTK-Attention's summary reproduces any prefix exactly",
    statement=(
        r"Replace $e^{s}$ by the kernel $\kappa(q, k) = (c + \tau\,q\cdot k)^2 = "
        r"\varphi(q)^\top\psi(k)$, $c > 0$, $\tau \ge 0$ the score scale, with "
        r"$\varphi(q) = (c, \sqrt{2c\tau}q, "
        r"\tau\,\mathrm{vec}(qq^\top))$, $\psi(k) = (c, \sqrt{2c\tau}k, \tau\,"
        r"\mathrm{vec}(kk^\top))$ ($1 + d + d^2$ features). For every prefix $P$ and input "
        r"$X$, NTK-Attention $\big(\sum_{j\in X}\kappa(q,k_j)v_j + \varphi(q)^\top Z\big)/"
        r"\big(\sum_{j\in X}\kappa(q,k_j) + \varphi(q)^\top\kappa_P\big)$ with "
        r"$Z = \sum_{p\in P}\psi(k_p)v_p^\top$, $\kappa_P = \sum_{p\in P}\psi(k_p)$ equals "
        r"kernel attention $\sum_{j\in P\cup X}\kappa(q,k_j)v_j/\sum_{j\in P\cup X}"
        r"\kappa(q,k_j)$."),
    source=(Source(where="NTK-Attention's output form and its Z (sum_phi_kv), k (sum_phi_k) "
                         "in ntk_attn_demo.py", tag="V", **PREFIX),
            Source(where="exactness for a finite feature map, derived here", tag="D", **PREFIX)),
    kind="identity", construction="constructions.prefix_attention:ntk_attention",
    depends_on=("approximation.prefix-decomposition",),
    notes="The code's summary has d^2 + d parameters per head (Z in R^{dxd}, k in R^d), as the "
          "abstract says; its ELU+1 map does not factor e^{q.k/sqrt d}, so there the summary "
          "is trained, not exact. The exact polynomial summary has (1 + d + d^2)(d_v + 1).",
    result_dependencies={
        "approximation.prefix-decomposition":
            "the summary's exactness is derived from that claim's lambda-mixture; the check "
            "compares NTK-Attention with kernel attention over the whole prefix directly",
    },
)

PX_LIMIT = Claim(
    id="approximation.prefix-limit",
    title="As a repeated prefix grows, attention tends to the prefix's attention at rate "
          "Z_X/(t Z_B)",
    statement=ATTN + (
        r"Let the prefix be $t$ copies of a block $B$. Then $\mathrm{Attn}(q; [B^t; X]) - "
        r"\mathrm{Attn}(q; B) = (1 - \lambda_t)\big(\mathrm{Attn}(q; X) - \mathrm{Attn}(q; B)"
        r"\big)$ with $\lambda_t = tZ_B/(tZ_B + Z_X)$, so $\lVert\mathrm{Attn}(q; [B^t; X]) - "
        r"\mathrm{Attn}(q; B)\rVert_\infty \le \frac{Z_X}{tZ_B}\,\lVert\mathrm{Attn}(q; X) - "
        r"\mathrm{Attn}(q; B)\rVert_\infty \to 0$ as $t \to \infty$."),
    source=(Source(where="Abstract (an infinitely long prefix)", tag="V", **PREFIX),
            Source(where="the limit and its rate, derived here", tag="D", **PREFIX)),
    kind="identity", construction="constructions.prefix_attention:prefix_decomposition",
    depends_on=("approximation.prefix-decomposition",))


# --- data ----------------------------------------------------------------------------------

@st.composite
def prefix_cases(draw, max_prefix: int = 24) -> dict:
    return {"d": draw(st.integers(1, 4)), "d_v": draw(st.integers(1, 3)),
            "m": draw(st.integers(1, max_prefix)), "n": draw(st.integers(1, 12)),
            "scale": draw(st.sampled_from([0.5, 1.0, 4.0])),
            "spread": draw(st.sampled_from([1.0, 3.0])), "seed": draw(seeds())}


def _draw(case: dict, queries: int = 3):
    generator = torch.Generator().manual_seed(case["seed"])

    def gauss(*shape):
        return case["spread"] * torch.randn(*shape, generator=generator, dtype=torch.float64)

    d, d_v, m, n = case["d"], case["d_v"], case["m"], case["n"]
    return (gauss(2, queries, d), gauss(2, m, d), gauss(2, m, d_v), gauss(2, n, d),
            gauss(2, n, d_v))


def decomposition_tolerance(q, K_P, V_P, K_X, V_X, scale, parts, t: int = 1) -> torch.Tensor:
    """The module docstring's bound on |LHS - RHS| for a prefix of ``t`` copies of ``K_P``."""
    keys = torch.cat([K_P.repeat(1, t, 1), K_X], dim=1)
    values = torch.cat([V_P.repeat(1, t, 1), V_X], dim=1)
    lhs = softmax_attention_bound(q, keys, values, scale)
    b_P = softmax_attention_bound(q, K_P, V_P, scale)
    b_X = softmax_attention_bound(q, K_X, V_X, scale)
    lam = parts["lam"]
    total = keys.shape[1]
    score_max = abs(scale) * (q.abs() @ keys.abs().transpose(-1, -2)).amax(dim=-1, keepdim=True)
    rho = (2 * gamma(q.shape[-1] + 1) * score_max + 2 * U * score_max + U
           + gamma(K_P.shape[1] + K_X.shape[1] + 1))
    e_lam = rho / 2 + 2 * U + total * TINY
    M_P = V_P.abs().amax(dim=-2, keepdim=True)
    M_X = V_X.abs().amax(dim=-2, keepdim=True)
    return (lhs + lam * b_P + (1 - lam) * b_X + e_lam * (M_P + M_X)
            + 4 * U * torch.maximum(M_P, M_X))


# --- PX.3 (i): the decomposition -------------------------------------------------------------

def decomposition_check(decompose=prefix_decomposition):
    @budget(0.6)
    @given(case=prefix_cases())
    @example(case={"d": 2, "d_v": 1, "m": 1, "n": 1, "scale": 4.0, "spread": 3.0, "seed": 0})
    def run(case):
        q, K_P, V_P, K_X, V_X = _draw(case)
        scale = case["scale"]
        lhs = softmax_attention(q, torch.cat([K_P, K_X], 1), torch.cat([V_P, V_X], 1), scale)
        parts = decompose(q, K_P, V_P, K_X, V_X, scale)
        err = (lhs - parts["output"]).abs()
        tol = decomposition_tolerance(q, K_P, V_P, K_X, V_X, scale, parts)
        evidence.ratio(float((err / tol).max()))
        assert bool((err <= tol).all()), (
            f"Attn([P;X]) and the lambda-mixture differ by {float(err.max()):.3g}")
    return run


test_prefix_attention_decomposes = check(PX_DECOMP, "property")(decomposition_check())


def symbolic_decomposition(lam=None):
    """SymPy: the identity for |P| = |X| = 2 with symbolic positive weights and values."""
    def run():
        import sympy as sp

        a1, a2, b1, b2 = sp.symbols("a1 a2 b1 b2", positive=True)   # e^{s} of P and X
        u1, u2, w1, w2 = sp.symbols("u1 u2 w1 w2", real=True)       # their values
        Z_P, Z_X = a1 + a2, b1 + b2
        mix = (lam or (lambda zp, zx: zp / (zp + zx)))(Z_P, Z_X)
        lhs = (a1 * u1 + a2 * u2 + b1 * w1 + b2 * w2) / (Z_P + Z_X)
        rhs = mix * (a1 * u1 + a2 * u2) / Z_P + (1 - mix) * (b1 * w1 + b2 * w2) / Z_X
        residual = sp.cancel(sp.together(lhs - rhs))  # canonical for rational functions
        evidence.cases(1)
        assert residual == 0, f"LHS - RHS = {residual}, not 0"
    return run


test_decomposition_is_an_identity_of_rational_functions = check(PX_DECOMP, "symbolic")(
    symbolic_decomposition())


# --- PX.3 (ii): exact through a finite feature map -------------------------------------------

def finite_summary_check(build=ntk_attention, c: float = 1.0):
    @budget(0.6)
    @given(case=prefix_cases())
    @example(case={"d": 3, "d_v": 2, "m": 24, "n": 1, "scale": 0.5, "spread": 1.0, "seed": 0})
    def run(case):
        q, K_P, V_P, K_X, V_X = _draw(case)
        scale = case["scale"]
        for b in range(q.shape[0]):  # one summary per prefix
            model = build(K_P[b], V_P[b], scale=scale, c=c)
            out = model(q[b:b + 1], K_X[b:b + 1], V_X[b:b + 1])
            keys = torch.cat([K_P[b], K_X[b]])[None]
            values = torch.cat([V_P[b], V_X[b]])[None]
            reference = kernel_attention(q[b:b + 1], keys, values, kernel="poly2", scale=scale,
                                         c=c)
            d, m, n = case["d"], case["m"], case["n"]
            K = (1 + d + d * d) + m + n + 2 * d + 12
            weights_abs = (c + scale * q[b:b + 1].abs() @ keys.abs().transpose(-1, -2)) ** 2
            A_N = weights_abs @ values.abs()                                # (1, n_q, d_v)
            A_D = weights_abs.sum(dim=-1, keepdim=True)
            D = ((c + scale * q[b:b + 1] @ keys.transpose(-1, -2)) ** 2).sum(-1, keepdim=True)
            lower = D - gamma(K) * A_D
            assume(bool((lower > 0).all()))  # a vanishing kernel sum has no attention output
            M = values.abs().amax(dim=-2, keepdim=True)
            tol = 2 * (gamma(K) * (A_N + M * A_D) / lower + U * M)
            err = (out - reference).abs()
            evidence.ratio(float((err / tol).max()))
            assert bool((err <= tol).all()), (
                f"NTK-Attention differs from attention over [P; X] by {float(err.max()):.3g}")
    return run


test_a_finite_summary_reproduces_the_prefix = check(PX_FINITE, "property")(
    finite_summary_check())


# --- the limit -------------------------------------------------------------------------------

COPIES = tuple(2**k for k in range(0, 11, 2))   # t = 1, 4, ..., 1024 explicit copies


def limit_check(decompose=prefix_decomposition, copies=COPIES):
    r"""Explicit prefixes of ``t`` copies of a block against the decomposition with
    multiplicity ``t`` (same tolerance as the decomposition), and the rate bound
    :math:`Z_X/(tZ_B)\,\lVert A_X - A_B\rVert` with that tolerance as slack. Returns the
    per-``t`` rows of the last example, for the figure."""
    @budget(0.1)
    @given(case=prefix_cases(max_prefix=6))
    @example(case={"d": 2, "d_v": 2, "m": 4, "n": 8, "scale": 1.0, "spread": 1.0, "seed": 1})
    def run(case):
        q, K_B, V_B, K_X, V_X = _draw(case, queries=2)
        scale = case["scale"]
        rows.clear()
        predicted.clear()
        slacks.clear()
        run.examples += 1
        for t in copies:
            explicit = softmax_attention(q, torch.cat([K_B.repeat(1, t, 1), K_X], 1),
                                         torch.cat([V_B.repeat(1, t, 1), V_X], 1), scale)
            parts = decompose(q, K_B, V_B, K_X, V_X, scale, multiplicity=t)
            tol = decomposition_tolerance(q, K_B, V_B, K_X, V_X, scale, parts, t)
            err = (explicit - parts["output"]).abs()
            assert bool((err <= tol).all()), (
                f"t={t}: the explicit prefix and the summary differ by {float(err.max()):.3g}")
            distance = (explicit - parts["prefix"]).abs()
            gap = (parts["input"] - parts["prefix"]).abs().amax(dim=-1, keepdim=True)
            rate = (1 - parts["lam"]) / parts["lam"]                      # Z_X / (t Z_B)
            # slack: the explicit side and A_B (tol covers both with room when lambda ~ 1;
            # b_P, b_X cover A_B and the gap's A_X - A_B for any lambda)
            b_B = softmax_attention_bound(q, K_B, V_B, scale)
            b_X = softmax_attention_bound(q, K_X, V_X, scale)
            slack = tol + b_B + rate * (b_B + b_X).amax(dim=-1, keepdim=True)
            assert bool((distance <= rate * gap + slack).all()), (
                f"t={t}: distance to Attn(q; B) {float(distance.max()):.3g} above the rate "
                f"bound {float((rate * gap).max()):.3g}")
            rows.append([t, float(distance.max()), float((rate * gap).max())])
            # for the shrink test below: the exact distance is (1 - lam) |A_X - A_B|; this is
            # it from the computed parts, and slack bounds |distance - exact| entrywise
            predicted.append(float(((1 - parts["lam"]) * gap).max()))
            slacks.append(float(slack.max()))
        # no ratio when A_X = A_B at every t (the rate bound is 0, and distance <= slack held)
        if ratios := [r[1] / r[2] for r in rows if r[2] > 0]:
            evidence.ratio(max(ratios))
    rows: list[list[float]] = []
    predicted: list[float] = []
    slacks: list[float] = []
    run.rows, run.predicted, run.slacks, run.examples = rows, predicted, slacks, 0
    return run


def a_growing_prefix_converges_at_the_derived_rate():
    run = limit_check()
    run()
    evidence.cases(run.examples)
    rows = run.rows
    evidence.table("last example: max |Attn(q;[B^t;X]) - Attn(q;B)| and its bound",
                   ["copies t", "distance", "Z_X/(t Z_B) |A_X - A_B|"], rows)
    from empirics.plots import pyplot  # lazily: `python -m theorems list` stays light

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    ts = [r[0] for r in rows]
    ax.loglog(ts, [r[1] for r in rows], "o-", label="measured distance")
    ax.loglog(ts, [r[2] for r in rows], "k--", label=r"$Z_X/(tZ_B)\,|A_X - A_B|$")
    ax.set(xlabel="copies t of the prefix block", ylabel="distance to Attn(q; B)",
           title="an infinitely long prefix: the limit")
    ax.legend(fontsize=8)
    fig.tight_layout()
    evidence.figure(fig, "prefix-limit")
    # The measured distance D_t is within 2 s_t + gamma_3 p_t of the computed prediction p_t
    # (|D_t - exact| <= s_t by the slack above; |p_t - exact| <= (1 - lam)(b_B + b_X) <= s_t
    # for the gap's rounding, plus gamma_3 p_t for forming (1 - lam) * gap and its max). So D
    # must shrink from t = 1 to the largest t whenever the predicted drop exceeds both
    # allowances; when it does not (1 - lam_t rounds to one value for every t once
    # Z_X/(t Z_B) is far above 1/u), rounding may leave every row equal.
    first, last = run.predicted[0], run.predicted[-1]
    allowance = 2 * (run.slacks[0] + run.slacks[-1]) + gamma(3) * (first + last)
    assert rows[-1][1] < rows[0][1] or first - last <= allowance, (
        f"the distance to the prefix's attention does not shrink as the prefix grows "
        f"(predicted drop {first - last:.3g} > rounding allowance {allowance:.3g})")


test_a_growing_prefix_converges_at_the_derived_rate = check(PX_LIMIT, "property")(
    a_growing_prefix_converges_at_the_derived_rate)


# --- proved ---
# Coq, MathComp: the identities over any real field, for every positive weight function (e^s is
# one), every d, d_v, prefix and input; the float64 computations are the property checks'.
test_decomposition_proved = check(PX_DECOMP, "proved")(
    coq_proof("proofs/coq/approximation_prefix.v", theorem="prefix_decomposition",
              scope=Scope("statement", "Attn(q; [P; X]) = lambda Attn(q; P) + (1 - lambda) "
                          "Attn(q; X), lambda = Z_P/(Z_P + Z_X), for all m, n >= 1, every d, "
                          "d_v, tau, q, keys and values, with e^s replaced by any positive "
                          "function (e^s is one), over any real field (so over the reals); the "
                          "closing 'so the prefix enters only through ...' is read off the "
                          "mixture")))
test_limit_proved = check(PX_LIMIT, "proved")(
    coq_proof("proofs/coq/approximation_prefix.v", theorem="prefix_limit",
              scope=Scope("part", "the identity Attn([B^t; X]) - Attn(B) = (1 - lambda_t)"
                          "(Attn(X) - Attn(B)) and the coordinatewise bound |.|_c <= "
                          "Z_X/(t Z_B) |Attn(X) - Attn(B)|_c (so the infinity-norm bound) for "
                          "every t, b, n >= 1, with e^s replaced by any positive function, over "
                          "any real field; the limit t -> infinity of the bound is not "
                          "formalised, and the float64 computation is the property check's")))
test_finite_summary_proved = check(PX_FINITE, "proved")(
    coq_proof("proofs/coq/approximation_prefix_kernel.v", theorem="finite_summary",
              scope=Scope("statement", "phi(q)^T psi(k) = (c + tau q.k)^2 for every q, k, and "
                          "NTK-Attention with the summary (Z, kappa_P) equals kernel attention "
                          "over P u X, for every d, d_v, prefix and input, c > 0 and tau >= 0 "
                          "(sqrt(2 c tau) is real only then; the construction's scale is "
                          "positive), over any real closed field (so over the reals)")))
