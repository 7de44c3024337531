r"""ROME rank-one editing (Meng et al. 2022): insertion, minimality, unaffected keys, rank one,
least squares and the key asymmetry (FM.7); ROME by gradient descent is :mod:`.rome_gd`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from constructions.fact_mlps import (
    rome_edit,
    rome_edit_as_coded,
)
from theorems.areas.fact_mlps._shared import ROME
from theorems.areas.fact_mlps._shared import update_parts as _update_parts
from theorems.certificates import frobenius_upper, lambda_min_lower_bound
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence, expect_failure
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.strategies import gaussian_matrices, seeds, spd_matrices

# ROME's update parts (_shared.update_parts) keep here the name the checks below have always
# called: a Hypothesis check's drawn examples derive from its source, which stays as it was.

# --- FM.7: ROME --------------------------------------------------------------------------------

ROME_INSERTION = Claim(
    id="fact-mlps.rome-insertion",
    title="ROME's rank-one update inserts the new fact: W'k* = v*",
    statement=(
        r"For $W \in \mathbb R^{d_v\times d_k}$, symmetric positive definite "
        r"$C \in \mathbb R^{d_k\times d_k}$, $k_* \ne 0$ and $v_*$, the update "
        r"$W' = W + \Lambda(C^{-1}k_*)^\top$ with "
        r"$\Lambda = (v_* - Wk_*)/((C^{-1}k_*)^\top k_*)$ satisfies $W'k_* = v_*$."),
    source=Source(where="Section 3.1, the closed-form rank-one update", tag="V", **ROME),
    kind="identity",
    construction="constructions.fact_mlps:rome_edit",
)
ROME_MINIMAL = Claim(
    id="fact-mlps.rome-minimal-disturbance",
    title="ROME's update is the edit that disturbs E‖ΔW k‖² least",
    statement=(
        r"With $\Delta = W' - W$ as in fact-mlps.rome-insertion and "
        r"$\mathrm{cost}(X) = \mathrm{tr}(XCX^\top)$ ($= \mathbb E\lVert Xk\rVert^2$ when $C$ "
        r"is the keys' uncentred second moment): for every $M$ with $Mk_* = 0$, "
        r"$\mathrm{cost}(\Delta + M) = \mathrm{cost}(\Delta) + \mathrm{cost}(M)$, so $\Delta$ "
        r"is the unique minimiser of $\mathrm{cost}$ subject to $Xk_* = v_* - Wk_*$."),
    source=(Source(where="Section 3.1 (the constrained least-squares view of the update)",
                   tag="V", **ROME),
            Source(where="the Pythagorean identity in the C inner product (this project)",
                   tag="D", **ROME)),
    kind="identity",
    construction="constructions.fact_mlps:rome_edit",
    depends_on=("fact-mlps.rome-insertion",),
)
ROME_UNAFFECTED = Claim(
    id="fact-mlps.rome-unaffected-keys",
    title="Keys C⁻¹-orthogonal to k* are left unchanged by ROME",
    statement=(
        r"With $W'$ as in fact-mlps.rome-insertion, every key $k$ with $k^\top C^{-1}k_* = 0$ "
        r"has $W'k = Wk$."),
    source=Source(where="consequence of the closed form (this project)", tag="D", **ROME),
    kind="identity",
    construction="constructions.fact_mlps:rome_edit",
    depends_on=("fact-mlps.rome-insertion",),
)
ROME_RANK_ONE = Claim(
    id="fact-mlps.rome-rank-one",
    title="ROME's update has rank one",
    statement=r"With $W'$ as in fact-mlps.rome-insertion, $\mathrm{rank}(W' - W) = 1$ when "
              r"$v_* \ne Wk_*$.",
    source=Source(where="Section 3.1 (rank-one model editing)", tag="V", **ROME),
    kind="identity",
    construction="constructions.fact_mlps:rome_edit",
)
ROME_LSQ = Claim(
    id="fact-mlps.rome-constrained-least-squares",
    title="ROME solves the constrained least-squares problem of the paper",
    statement=(
        r"Let $K \in \mathbb R^{n\times d_k}$ hold $n \ge d_k$ keys (full column rank), "
        r"$V \in \mathbb R^{n\times d_v}$ their values, $W$ solve the normal equations "
        r"$WK^\top K = V^\top K$ and $C = K^\top K$. Then $W'$ of fact-mlps.rome-insertion "
        r"solves $\min_{\hat W}\lVert\hat WK^\top - V^\top\rVert_F$ subject to "
        r"$\hat Wk_* = v_*$."),
    source=Source(where="Section 3.1 and Appendix A (derivation of the update)", tag="V",
                  **ROME),
    kind="identity",
    construction="constructions.fact_mlps:rome_edit",
    depends_on=("fact-mlps.rome-minimal-disturbance",),
)
ROME_ASYMMETRY = Claim(
    id="fact-mlps.rome-code-asymmetry",
    title="The released ROME code inserts v* at the prompt's key, not at the averaged key",
    statement=(
        r"The code builds $u = C^{-1}\bar k/\lVert C^{-1}\bar k\rVert$ from $\bar k$, the "
        r"subject's key averaged over random prefixes, but the right vector "
        r"$r = (v_* - Wk_p)/(u^\top k_p)$ from the raw prompt's key $k_p$, and sets "
        r"$W' = W + ru^\top$. Then $W'k_p = v_*$, while "
        r"$W'\bar k - v_* = (W\bar k - v_*) + (v_* - Wk_p)\,u^\top\bar k/u^\top k_p$, which "
        r"is non-zero in general: property (a) of fact-mlps.rome-insertion holds for $k_p$ only."),
    source=(Source(where="code: rome/compute_u.py (u from averaged prefixes) and "
                         "rome/compute_v.py (right vector from the prompt)", tag="V", **ROME),
            Source(where="traced to disabling edits by 'Rebuilding ROME'", tag="S",
                   arxiv="2403.07175", ref="Gupta et al. (2024)")),
    kind="identity",
    construction="constructions.fact_mlps:rome_edit_as_coded",
    depends_on=("fact-mlps.rome-insertion",),
)


@st.composite
def rome_cases(draw, max_condition: float = 1e6):
    d_k = draw(st.integers(2, 8))
    d_v = draw(st.integers(1, 6))
    C = draw(spd_matrices(d_k, max_condition=max_condition))
    W = draw(gaussian_matrices(d_v, d_k))
    k_star = draw(gaussian_matrices(1, d_k))[0]
    v_star = draw(gaussian_matrices(1, d_v))[0]
    return W, C, k_star, v_star


WELL_SEPARATED = (torch.tensor([[1.0, 2.0, 0.0]], dtype=torch.float64),
                  torch.diag(torch.tensor([1.0, 1e3, 1e6], dtype=torch.float64)),
                  torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64),
                  torch.tensor([-3.0], dtype=torch.float64))


MODERATE = (WELL_SEPARATED[0], torch.diag(torch.tensor([1.0, 10.0, 1e3], dtype=torch.float64)),
            *WELL_SEPARATED[2:])


def cholesky_solve_error(C: torch.Tensor, lam_low: float) -> float:
    r""":math:`\epsilon_u` with :math:`\lVert\hat u - C^{-1}k\rVert \le \epsilon_u
    \lVert\hat u\rVert` for any Cholesky solve :math:`\hat u` of :math:`Cu = k` in float64
    (``lam_low`` :math:`\le \lambda_{\min}(C)`): :math:`(C + \Delta C)\hat u = k` with
    :math:`|\Delta C| \le \gamma_{3d+1}|\hat R^\top||\hat R|` (Higham Thm 10.4), and
    :math:`\lVert|\hat R^\top||\hat R|\rVert_2 \le \lVert\hat R\rVert_F^2 \le
    \mathrm{tr}\,C/(1 - \gamma_{d+1})` (the diagonal of Thm 10.3), so
    :math:`\epsilon_u = \gamma_{3d+1}\mathrm{tr}\,C/((1 - \gamma_{d+1})\lambda_{\min})`
    (the trace, a :math:`d`-term sum, taken with its own :math:`1 + \gamma_d`)."""
    d = C.shape[0]
    return gamma(3 * d + 1) * float(torch.trace(C).abs()) * (1 + gamma(d)) / (
        (1 - gamma(d + 1)) * lam_low)


def insertion_check(edit=rome_edit):
    @given(case=rome_cases())
    @example(case=WELL_SEPARATED)
    def run(case):
        W, C, k_star, v_star = case
        W_new = edit(W, C, k_star, v_star)
        u, lam = _update_parts(W, C, k_star, v_star)
        # W'k* = Wk* + Lambda (u.k*)/(u.k*)-ish: a d_k-term product on |W'| and |k*|
        tol = 2 * gamma(2 * k_star.numel() + 4) * float(
            ((W.abs() + torch.outer(lam.abs(), u.abs())) @ k_star.abs() + v_star.abs()).max())
        err = float((W_new @ k_star - v_star).abs().max())
        evidence.margin(1 - err / tol)
        assert err <= tol, f"W'k* misses v* by {err:.3g} (tolerance {tol:.3g})"
    return run


test_rome_inserts_the_fact = check(ROME_INSERTION, "property")(insertion_check())


def cost(X: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """tr(X C X^T) for a batch of X, shape (..., d_v, d_k)."""
    return torch.einsum("...ij,jk,...ik->...", X, C, X)


def minimal_disturbance_check(edit=rome_edit):
    @given(case=rome_cases(), seed=seeds())
    @example(case=WELL_SEPARATED, seed=0)
    def run(case, seed):
        W, C, k_star, v_star = case
        delta = edit(W, C, k_star, v_star) - W
        generator = torch.Generator().manual_seed(seed)
        Z = torch.randn(100, *W.shape, generator=generator, dtype=torch.float64)
        M = Z - torch.einsum("bij,j,k->bik", Z, k_star, k_star) / float(k_star @ k_star)
        lhs, rhs = cost(delta + M, C), cost(delta, C) + cost(M, C)
        # each cost is a (d_v d_k^2)-term sum; the cross term 2tr(Delta C M^T) is exactly 0
        # for exact Delta and rounds to gamma times its absolute-value sum
        absolute = cost(delta.abs() + M.abs(), C.abs())
        rounding = 4 * gamma(W.numel() * W.shape[1] + 3 * k_star.numel() + 8) * absolute
        # ...but the computed Delta and M are not exactly orthogonal in C, so the cross term
        # 2tr(Delta C M^T) itself is not 0. Write Delta = lam u^T + E_D and C u = k* - dC u:
        # tr(Delta C M^T) = lam.(M k*) - lam.(M dC u) + tr(E_D C M^T), where
        #  - u solves (C + dC) u = k* by Cholesky, |dC| <= gamma_{3n+1}|R^T||R| (Higham 10.4);
        #  - M k* = E_M k*, |E_M| <= gamma_{2n+4}(|Z| + (|Z||k*|)|k*|^T / ||k*||^2) (M's own
        #    rounding: an n-term product, the division by a rounded n-term sum, subtraction);
        #  - Delta = fl(fl(W + fl(lam u^T)) - W): |E_D| <= gamma_3(2|Delta| + |W'|).
        n = k_star.numel()
        u_vec, lam_vec = _update_parts(W, C, k_star, v_star)
        lam_abs, u_abs = lam_vec.abs(), u_vec.abs()
        R = torch.linalg.cholesky(C).abs()
        dC = gamma(3 * n + 1) * (R @ R.T)
        k2 = float(k_star @ k_star)
        E_M = gamma(2 * n + 4) * (Z.abs() + torch.einsum(
            "bij,j,k->bik", Z.abs(), k_star.abs(), k_star.abs()) / k2)
        cross = (torch.einsum("i,bij,j->b", lam_abs, E_M, k_star.abs())
                 + torch.einsum("i,bij,j->b", lam_abs, M.abs(), dC @ u_abs)
                 + torch.einsum("ij,jk,bik->b", gamma(3) * (2 * delta.abs()
                                                           + (W + delta).abs()), C.abs(),
                                M.abs()))
        tol = (1 + gamma(4)) * (rounding + 2 * cross)  # the magnitudes are computed ones
        err = (lhs - rhs).abs()
        evidence.margin(float((1 - err / tol).min()))
        assert bool((err <= tol).all()), f"Pythagoras fails by {float(err.max()):.3g}"
    return run


test_rome_is_the_least_disturbing_edit = check(ROME_MINIMAL, "property")(
    budget(0.5)(minimal_disturbance_check()))


def closed_form_error(W, C, closed, k_star, lam_low: float, lam_high: float) -> float:
    r"""A bound on :math:`\lVert\hat\Delta - \Delta^*\rVert_F` for :func:`rome_edit`'s
    computed update :math:`\hat\Delta = \mathrm{fl}(W' - W)` against the exact minimiser
    :math:`\Delta^* = r\,\varphi(u^*)^\top`, :math:`\varphi(u) = u/u^\top k_*`,
    :math:`u^* = C^{-1}k_*` (same float64 :math:`W, C, k_*, v_*`; ``lam_low`` :math:`\le
    \lambda_{\min}(C)`, ``lam_high`` :math:`\ge \lambda_{\max}(C)`).

    - The edit's :math:`\hat u` is a Cholesky solve: :math:`\lVert\hat u - u^*\rVert \le
      \epsilon_u\lVert\hat u\rVert` (:func:`cholesky_solve_error`).
    - :math:`\varphi` then moves by :math:`\epsilon_u(1 + a)/(1 - \epsilon_u(1 + a))`
      relative, :math:`a = \lVert u^*\rVert\lVert k_*\rVert/u^{*\top}k_* \le
      \lambda_{\max}/\lambda_{\min}`; the computed denominator :math:`\hat u^\top k_*`
      ( :math:`d`-term) by :math:`\eta = \gamma_d a(1 + \epsilon_u)/(1 - \epsilon_u(1 + a))`
      relative and the quotient by :math:`u`: :math:`\eta/(1 - \eta) + u` on
      :math:`\hat\Lambda`.
    - Forming :math:`O = \hat\Lambda\hat u^\top`, :math:`W + O` and subtracting :math:`W`:
      :math:`|\hat\Delta - \hat\Lambda\hat u^\top| \le \gamma_3(|W| + 2|O|)`, with
      :math:`|O| \le (|\hat\Delta| + \gamma_2|W|)(1 + \gamma_8)`.
    ``r = v_* - Wk_*`` is bit-identical in the edit and here (the same expression)."""
    d = k_star.numel()
    eps_u = cholesky_solve_error(C, lam_low)
    a = lam_high / lam_low
    spread = eps_u * (1 + a)
    if not spread < 0.5:
        return float("inf")
    phi = spread / (1 - spread)
    eta = gamma(d) * a * (1 + eps_u) / (1 - spread)
    quotient = eta / (1 - eta) + gamma(1)
    O_abs = (closed.abs() + gamma(2) * W.abs()) * (1 + gamma(8))
    O_norm = frobenius_upper(O_abs)
    forming = gamma(3) * frobenius_upper(W.abs() + 2 * O_abs)
    return O_norm * ((1 + quotient) * (1 + phi) - 1) + forming


def cvxpy_min_cost_check(edit=rome_edit):
    @given(case=rome_cases(max_condition=1e3))
    @example(case=MODERATE)
    def run(case):
        import cvxpy as cp

        W, C, k_star, v_star = case
        C = (C + C.T) / 2           # bit for bit the matrix rome_edit factors
        closed = edit(W, C, k_star, v_star) - W
        r = v_star - W @ k_star     # bit for bit the edit's residual (the same expression)
        C_np, k_np = C.numpy(), k_star.numpy()
        L = np.linalg.cholesky(C_np)
        D = cp.Variable(W.shape)
        problem = cp.Problem(cp.Minimize(cp.sum_squares(D @ L)), [D @ k_np == r.numpy()])
        problem.solve(solver=cp.CLARABEL)
        assert problem.status == cp.OPTIMAL, problem.status
        # Certified from the returned D alone, whatever Clarabel's tolerances: project it onto
        # D k* = r; the projection's own rounding leaves rho = D k* - r (computed, within
        # gamma_{d+2}(|D||k*| + |r|)), and D_f = D - rho k*^T/|k*|^2 is exactly feasible.
        d_k = k_star.numel()
        found = torch.from_numpy(D.value)
        kk = float(k_star @ k_star) * (1 - gamma(d_k))                 # <= |k*|^2
        found = found + torch.outer(r - found @ k_star, k_star) / float(k_star @ k_star)
        rho = frobenius_upper(found @ k_star - r) + gamma(d_k + 2) * frobenius_upper(
            found.abs() @ k_star.abs() + r.abs())
        lam_low = lambda_min_lower_bound(C)     # the float64 C is the problem's exact data
        lam_high = frobenius_upper(C)
        assert lam_low > 0, "C is not certified positive definite"
        # cost(D_f) <= (|D|_C + |rho k*^T|_C / |k*|^2)^2 (triangle inequality in the C-norm);
        # tr(D C D^T) and k^T C k are sums of 2 d_k-term products on absolute values
        cost_up = float(cost(found, C)) + gamma(2 * d_k) * float(cost(found.abs(), C.abs()))
        kCk_up = float(k_star @ C @ k_star) + gamma(2 * d_k) * float(
            k_star.abs() @ C.abs() @ k_star.abs())
        feasible_cost = (math.sqrt(max(cost_up, 0.0)) + rho * math.sqrt(kCk_up) / kk) ** 2
        # weak duality: for every mu, cost* >= mu^T r - (k*^T C^-1 k*) |mu|^2 / 4. With our own
        # solve u (any vector) and s = Cu - k*: k^T C^-1 k = u^T C u - 2u^T s + s^T C^-1 s <=
        # q_up. mu = 2r/q_hat gives cost* >= |r|^2 (2 q_hat - q_up) / q_hat^2.
        u = torch.linalg.solve(C, k_star)
        s = frobenius_upper(C @ u - k_star) + gamma(d_k + 1) * frobenius_upper(
            C.abs() @ u.abs() + k_star.abs())
        q_up = (float(u @ C @ u) + gamma(2 * d_k) * float(u.abs() @ C.abs() @ u.abs())
                + 2 * frobenius_upper(u) * s + s**2 / lam_low)
        q_hat = float(u @ k_star)
        r2_low = float(r @ r) * (1 - gamma(r.numel()))
        factor = (2 * q_hat - q_up) / q_hat**2 * (1 - gamma(6))
        dual = r2_low * factor if factor > 0 else 0.0      # cost* >= 0 in any case
        # cost(D_f) - cost* = cost(D_f - Delta*) >= lambda_min |D_f - Delta*|_F^2 (Pythagoras:
        # 2 Delta* C = mu* k*^T, so the cross term vanishes on D k* = 0)
        radius = math.sqrt(max(feasible_cost - dual, 0.0) / lam_low) + rho / math.sqrt(kk)
        tol = radius + closed_form_error(W, C, closed, k_star, lam_low, lam_high)
        err = frobenius_upper(found - closed)
        evidence.metric("certified radius of the solver's solution / |closed|",
                        radius / max(float(closed.norm()), 1e-300))
        evidence.margin(1 - err / tol)
        assert err <= tol, f"cvxpy and the closed form differ by {err:.3g} > {tol:.3g}"
    return run


test_rome_matches_cvxpy = check(ROME_MINIMAL, "numeric")(
    budget(0.05, minimum=4)(cvxpy_min_cost_check()))


def unaffected_keys_check(edit=rome_edit):
    @given(case=rome_cases(), seed=seeds())
    @example(case=WELL_SEPARATED, seed=1)
    def run(case, seed):
        W, C, k_star, v_star = case
        u, lam = _update_parts(W, C, k_star, v_star)
        generator = torch.Generator().manual_seed(seed)
        raw = torch.randn(32, k_star.numel(), generator=generator, dtype=torch.float64)
        alpha = (raw @ u) / float(u @ u)
        keys = raw - torch.outer(alpha, u)                           # k^T C^-1 k* = 0
        change = keys @ (edit(W, C, k_star, v_star) - W).T
        # The exact change is Lambda (u.k) = 0. The edit's own u = C^-1 k* and ours come from
        # two Cholesky solves, each within eps_u |u| of C^-1 k* (cholesky_solve_error, with a
        # certified lambda_min), so they differ by 2 eps_u |u|/(1 - eps_u); the projection
        # leaves u.k = gamma |u|.(|raw| + |alpha||u|); forming W' - W and the product with k
        # adds gamma (|W| + |Lambda u^T|) |k|.
        d_k = k_star.numel()
        lam_low = lambda_min_lower_bound((C + C.T) / 2)
        assert lam_low > 0, "C is not certified positive definite"
        eps_u = cholesky_solve_error((C + C.T) / 2, lam_low)
        assume(eps_u < 0.5)     # beyond it the first-order bound says nothing (kappa ~ 1/u)
        solve = 2 * eps_u / (1 - eps_u) * float(u.norm()) * keys.norm(dim=1)
        projection = gamma(2 * d_k + 4) * ((raw.abs() + alpha.abs()[:, None] * u.abs())
                                           @ u.abs())
        update = torch.outer(lam, u).abs()
        tol = lam.abs() * (solve + projection)[:, None] \
            + 4 * gamma(2 * d_k + 4) * (keys.abs() @ (W.abs() + update).T)
        err = change.abs()
        evidence.margin(float((1 - err / tol).min()))
        assert bool((err <= tol).all()), f"a C^-1-orthogonal key moved by {float(err.max()):.3g}"
    return run


test_rome_leaves_orthogonal_keys_unchanged = check(ROME_UNAFFECTED, "property")(
    unaffected_keys_check())


# WELL_SEPARATED's W is one row, whose update has one singular value: rank one says nothing
# there. A pinned 2 x 3 case, so an update of higher rank fails on every run.
TWO_ROWS = (torch.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0]], dtype=torch.float64),
            torch.diag(torch.tensor([1.0, 10.0, 100.0], dtype=torch.float64)),
            torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64),
            torch.tensor([-3.0, 2.0], dtype=torch.float64))


def rank_one_check(edit=rome_edit):
    @given(case=rome_cases())
    @example(case=WELL_SEPARATED)
    @example(case=TWO_ROWS)
    def run(case):
        W, C, k_star, v_star = case
        W_new = edit(W, C, k_star, v_star)
        sigma = torch.linalg.svdvals(W_new - W)
        if len(sigma) < 2:
            return
        # W' - W is an exact outer product up to forming W + outer and subtracting W again:
        # 2u(|W| + |outer|) per entry, plus the SVD's backward error
        u, lam = _update_parts(W, C, k_star, v_star)
        tol = 2 * gamma(sum(W.shape) + 2) * float(
            (W.abs() + torch.outer(lam, u).abs()).norm())
        # rank one says something only when the update stands above that rounding (v* = W k*
        # up to rounding leaves an update that is all rounding): no fixed floor
        assume(float(sigma[0]) > tol)
        evidence.margin(1 - float(sigma[1]) / tol)
        assert float(sigma[1]) <= tol, f"second singular value {float(sigma[1]):.3g}"
    return run


test_rome_update_has_rank_one = check(ROME_RANK_ONE, "property")(rank_one_check())


@st.composite
def least_squares_cases(draw):
    d_k = draw(st.integers(2, 6))
    d_v = draw(st.integers(1, 4))
    n = draw(st.integers(d_k, 4 * d_k))
    generator = torch.Generator().manual_seed(draw(seeds()))
    left, _ = torch.linalg.qr(torch.randn(n, d_k, generator=generator, dtype=torch.float64))
    right, _ = torch.linalg.qr(torch.randn(d_k, d_k, generator=generator, dtype=torch.float64))
    spectrum = torch.logspace(0, draw(st.floats(0.0, 3.0)), d_k, dtype=torch.float64)
    K = (left * spectrum) @ right.T                       # cond(K) <= 1e3, cond(C) <= 1e6
    V = torch.randn(n, d_v, generator=generator, dtype=torch.float64)
    k_star = torch.randn(d_k, generator=generator, dtype=torch.float64)
    v_star = torch.randn(d_v, generator=generator, dtype=torch.float64)
    return K, V, k_star, v_star


def least_squares_check(edit=rome_edit):
    @given(case=least_squares_cases())
    def run(case):
        K, V, k_star, v_star = case
        W = torch.linalg.lstsq(K, V, driver="gelsd").solution.T  # W K^T K = V^T K
        C = K.T @ K
        W_new = edit(W, C, k_star, v_star)
        # the constrained problem's KKT system, row by row: [[C, k*], [k*^T, 0]]
        d_k = k_star.numel()
        kkt = torch.zeros(d_k + 1, d_k + 1, dtype=torch.float64)
        kkt[:d_k, :d_k], kkt[:d_k, d_k], kkt[d_k, :d_k] = C, k_star, k_star
        rhs = torch.cat([K.T @ V, v_star[None]], dim=0)
        W_kkt = torch.linalg.solve(kkt, rhs)[:d_k].T
        # both sides solve systems of condition <= kappa(KKT): forward error <= kappa times a
        # backward error of gamma_{3n} (LU, Cholesky and QR alike; Higham Thms 9.4, 10.4, 19.4)
        kappa = float(torch.linalg.cond(kkt))
        tol = 4 * kappa * gamma(3 * (d_k + 1) + K.shape[0])
        err = float((W_new - W_kkt).norm() / W_kkt.norm())
        evidence.margin(1 - err / tol)
        assert err <= tol, f"ROME differs from the constrained optimum by {err:.3g} > {tol:.3g}"
    return run


test_rome_solves_constrained_least_squares = check(ROME_LSQ, "property")(
    budget(0.5)(least_squares_check()))


@st.composite
def asymmetry_cases(draw):
    W, C, k_bar, v_star = draw(rome_cases(max_condition=1e3))
    k_prompt = k_bar + draw(gaussian_matrices(1, k_bar.numel(), scale=0.5))[0]
    u = torch.linalg.solve(C, k_bar)
    assume(abs(float(u @ k_prompt)) > 1e-3 * float(u.norm() * k_prompt.norm()))
    return W, C, k_bar, k_prompt, v_star


ASYMMETRY_EXAMPLE = (torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64),
                     torch.eye(2, dtype=torch.float64), torch.tensor([1.0, 0.0],
                                                                     dtype=torch.float64),
                     torch.tensor([1.0, 1.0], dtype=torch.float64),
                     torch.tensor([0.0, 3.0], dtype=torch.float64))


def asymmetry_check(edit=rome_edit_as_coded):
    @given(case=asymmetry_cases())
    @example(case=ASYMMETRY_EXAMPLE)
    def run(case):
        W, C, k_bar, k_prompt, v_star = case
        W_new = edit(W, C, k_bar, k_prompt, v_star)
        # the same algorithm as the construction (Cholesky), so both u satisfy Higham Thm 10.4:
        # (C + dC) u = k_bar, ||dC||_2 <= eta ||C||_2 with eta = n gamma_{3n+1}
        u = torch.cholesky_solve(k_bar[:, None], torch.linalg.cholesky(C))[:, 0]
        u = u / u.norm()
        r = (v_star - W @ k_prompt) / float(u @ k_prompt)
        scale = (W.abs() + torch.outer(r, u).abs()) @ (k_prompt.abs() + k_bar.abs()) \
            + v_star.abs() + (W.abs() @ k_bar.abs())
        tol = 4 * gamma(2 * k_bar.numel() + 6) * float(scale.max()) \
            * max(1.0, float(u.abs() @ k_bar.abs()) / abs(float(u @ k_prompt)))
        # The formula's ratio (u.k_bar)/(u.k_p) depends on u's direction, and the check's u and
        # the construction's are two roundings of it: each unnormalised solve has relative
        # error eps = kappa eta/(1 - kappa eta); normalising doubles that and adds
        # gamma_{n+2}, so the two unit vectors differ by at most
        # delta = 2 (2 eps + gamma_{n+2}). Exactly,
        # |g(u') - g(u)| <= delta (|k_bar||u.k_p| + |k_p||u.k_bar|)
        #                   / ((|u.k_p| - delta |k_p|) |u.k_p|)
        # (2-norms), which multiplies |v* - W k_p| (computed as |v*| + |W||k_p|).
        n = k_bar.numel()
        eta = n * gamma(3 * n + 1)
        kappa = float(torch.linalg.cond(C))
        assume(kappa * eta < 0.5)
        eps = kappa * eta / (1 - kappa * eta)
        delta = 2 * (2 * eps + gamma(n + 2))
        up, ub = abs(float(u @ k_prompt)), abs(float(u @ k_bar))
        kp, kb = float(k_prompt.norm()), float(k_bar.norm())
        assume(up > 2 * delta * kp)
        ratio_err = delta * (kb * up + kp * ub) / ((up - delta * kp) * up)
        direction = ratio_err * float((v_star.abs() + W.abs() @ k_prompt.abs()).max())
        tol_mean = (1 + gamma(4)) * (tol + direction)
        at_prompt = float((W_new @ k_prompt - v_star).abs().max())
        predicted = (W @ k_bar - v_star) + (v_star - W @ k_prompt) * float(u @ k_bar) / float(
            u @ k_prompt)
        at_mean = float((W_new @ k_bar - v_star - predicted).abs().max())
        evidence.margin(min(1 - at_prompt / tol, 1 - at_mean / tol_mean))
        assert at_prompt <= tol, f"W'k_p misses v* by {at_prompt:.3g}"
        assert at_mean <= tol_mean, (
            f"W'k_bar deviates from the formula by {at_mean:.3g} (tol {tol_mean:.3g})")
    return run


test_rome_code_inserts_at_the_prompt_key = check(ROME_ASYMMETRY, "property")(
    budget(0.5)(asymmetry_check()))


def both_variants_check(coded=rome_edit_as_coded):
    """Both variants side by side on the pinned example: the code's update meets property (a)
    at k_p and misses it at k_bar; the paper's update (built from k_bar alone) the reverse."""
    def run() -> None:
        W, C, k_bar, k_prompt, v_star = ASYMMETRY_EXAMPLE

        def inserts_at(edited: torch.Tensor, key: torch.Tensor) -> None:
            # exact small integers: W' k is computed without rounding error here
            miss = float((edited @ key - v_star).norm())
            assert miss <= 4 * gamma(4) * float(v_star.norm()), f"misses v* by {miss:.3g}"

        as_coded = coded(W, C, k_bar, k_prompt, v_star)
        paper = rome_edit(W, C, k_bar, v_star)
        inserts_at(as_coded, k_prompt)
        inserts_at(paper, k_bar)
        evidence.counterexample("code at k_bar: " + expect_failure(inserts_at, as_coded, k_bar)
                                + "; paper at k_p: "
                                + expect_failure(inserts_at, paper, k_prompt))
        evidence.metric("|W'k_bar - v*| / |v*| for the code's update",
                        float((as_coded @ k_bar - v_star).norm() / v_star.norm()))
    return run


def rome_code_misses_the_averaged_key():
    both_variants_check()()


test_rome_code_misses_the_averaged_key = check(ROME_ASYMMETRY, "property")(
    rome_code_misses_the_averaged_key)
