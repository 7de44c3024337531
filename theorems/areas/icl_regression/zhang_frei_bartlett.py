r"""Zhang, Frei and Bartlett: the conserved quantity of gradient flow and the risk of the trained
LSA (IR.3).
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import pairwise

import torch

from constructions.icl_regression import (
    one_step_gd,
    optimal_preconditioner,
    population_loss,
)
from theorems.areas.icl_regression._shared import (
    D_FEATURES,
    DERIVED,
    FIT_PROMPTS,
    SEED,
    ZFB,
    N,
    z_score,
)
from theorems.areas.icl_regression.one_step import closed_form_coefficients
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma

IR_ZFB_CONSERVED = Claim(
    id="icl-regression.zfb-conserved-quantity",
    title="Gradient flow on the LSA conserves ‖W_PV‖² − ‖W_KQ‖², and a balanced start reaches "
          "u_y = ‖A*‖^{1/2}",
    statement=(
        r"Let $\ell(W_{PV}, W_{KQ})$ be any loss that depends on the weights only through "
        r"$\hat y$ (the pre-training loss, or the empirical risk of a fixed set of prompts). "
        r"Along gradient flow $\dot W = -\nabla_W\ell$ the quantity $Q = \lVert W_{PV}\rVert_F^2"
        r" - \lVert W_{KQ}\rVert_F^2$ is constant, because $\langle W_{PV},\nabla_{PV}\ell\rangle"
        r" = \langle W_{KQ},\nabla_{KQ}\ell\rangle$ ($\hat y$ is bilinear in $u$ and $V$); "
        r"a gradient-descent step of size $\lambda$ changes it by exactly $\lambda^2(\lVert"
        r"\nabla_{PV}\ell\rVert_F^2 - \lVert\nabla_{KQ}\ell\rVert_F^2)$. In Zhang–Frei–Bartlett's"
        r" setting ($x \sim N(0,\Lambda)$, $w \sim N(0, I)$, no noise) from the balanced start "
        r"$W_{PV}(0) = s\,e_{d+1}e_{d+1}^\top$, $W_{KQ}(0) = -s\begin{pmatrix}\Theta\Theta^\top&0"
        r"\\0&0\end{pmatrix}$, $\lVert\Theta\Theta^\top\rVert_F = 1$ ($Q = 0$), the flow reaches "
        r"the global minimum $\Gamma = A^* = \big[\tfrac{n+1}n\Lambda + \tfrac{\mathrm{tr}"
        r"\Lambda}n I\big]^{-1}$, where $u_y^2 = \lVert A^*\rVert_F$ (measured on one seeded "
        r"run: seed 0 draws $\Theta$ and the $2\cdot10^5$ prompts of the empirical risk, and 700 "
        r"gradient-descent steps of size $0.01$ stand for the flow)."),
    source=(Source(where="Abstract (gradient flow from a suitable initialisation finds a "
                         "global minimum)", tag="V", **ZFB),
            Source(where="the initialisation (recalled, sign converted to this convention)",
                   tag="R", **ZFB),
            Source(where=f"the conserved quantity and u_y = ‖A*‖^(1/2): {DERIVED}", tag="D",
                   **ZFB)),
    kind="dynamics",
    construction="constructions.icl_regression:zfb_init",
    depends_on=("icl-regression.preconditioned-optimum",),
)

IR_ZFB_RISK = Claim(
    id="icl-regression.zfb-prompt-length-risk",
    title="The trained LSA's test risk on prompts of length M follows a closed form",
    statement=(
        r"In Zhang–Frei–Bartlett's setting, the LSA with preconditioner $A$ (trained at prompt "
        r"length $n$, $A = A^*$) evaluated on prompts of $M$ examples (normaliser $1/M$) has "
        r"risk $R(M) = \mathrm{tr}\Lambda - 2\,\mathrm{tr}(\Lambda A\Lambda) + \mathrm{tr}\big("
        r"\Lambda A\big[\tfrac{M+1}M\Lambda^2 + \tfrac{\mathrm{tr}\Lambda}M\Lambda\big]"
        r"A^\top\big)$; it decreases towards $\mathrm{tr}\Lambda - 2\,\mathrm{tr}(\Lambda A"
        r"\Lambda) + \mathrm{tr}(\Lambda A\Lambda^2A^\top)$ as $M \to \infty$."),
    source=(Source(where="Abstract (prediction error on new prompts)", tag="V", **ZFB),
            Source(where=f"R(M): {DERIVED}", tag="D", **ZFB)),
    kind="scaling",
    construction="constructions.icl_regression:population_loss",
    depends_on=("icl-regression.zfb-conserved-quantity", "icl-regression.population-loss"),
    result_dependencies={
        "icl-regression.zfb-conserved-quantity":
            "the trained LSA it evaluates is that claim's balanced-start run, shared through a "
            "cache (trained_zfb): zfb_init is called by whichever of the two checks runs first",
    },
)

# --- IR.3: Zhang–Frei–Bartlett ----------------------------------------------------------------

@lru_cache(maxsize=1)
def trained_zfb():
    from empirics.icl_regression import ZFB_EXPERIMENT

    return ZFB_EXPERIMENT("smoke", device="cpu")


def zfb_fit():
    """The experiment's own prompts: antithetic, so the odd blocks stay exactly zero."""
    from empirics.icl_regression import lifted_statistics

    return lifted_statistics("zfb", N, D_FEATURES, FIT_PROMPTS, SEED, antithetic=True)


def zfb_conservation_check(preconditioner=optimal_preconditioner, trajectory=trained_zfb):
    def run():
        from empirics.icl_regression import (
            gamma_from_lifted,
            regression_case,
            trained_coefficients,
        )

        result = trajectory()
        lr = result.config["lr"]
        rows = torch.tensor(result.tables["trajectory"]["rows"], dtype=torch.float64)
        Q, S, g_P, g_K, euler_P, euler_K, euler_scale = rows.T
        D = D_FEATURES + 1
        P_coefficients = D * (D + 1) // 2 * D_FEATURES
        # (1) the infinitesimal law dQ/dt = -2(<W_PV, g_PV> - <W_KQ, g_KQ>) = 0: both inner
        # products are sums over <= P + 2 D^2 terms bounded by the Euler scale.
        euler_tol = 2 * gamma(P_coefficients * 2 + 2 * D * D + 16) * euler_scale
        euler_err = (euler_P - euler_K).abs()
        evidence.cases(len(rows))
        evidence.metric("max |<W_PV,g> - <W_KQ,g>| / bound", float((euler_err / euler_tol).max()))
        assert bool((euler_err <= euler_tol).all()), (
            f"<W_PV, g_PV> != <W_KQ, g_KQ> at step {int((euler_err - euler_tol).argmax())}")
        # (2) the discrete law Q_{k+1} - Q_k = lr^2 (|g_PV|^2 - |g_KQ|^2) - 2 lr (euler gap);
        # rounding: the update W - lr g (u per entry) and the two squared norms (gamma_{D^2}).
        end = torch.tensor([[result.metrics["Q_final"], result.metrics["S_final"]]],
                           dtype=torch.float64)
        Q_next, S_next = torch.cat([Q[1:], end[:, 0]]), torch.cat([S[1:], end[:, 1]])
        predicted = lr**2 * (g_P - g_K) - 2 * lr * (euler_P - euler_K)
        step_tol = gamma(D * D + 4) * 2 * (S + S_next + lr**2 * (g_P + g_K)) + 2 * lr * euler_tol
        residual = (Q_next - Q - predicted).abs()
        evidence.metric("max |Q step - predicted| / bound", float((residual / step_tol).max()))
        assert bool((residual <= step_tol).all()), "the discrete conservation law fails"
        evidence.figure(result.figures["conservation"], "conservation")
        drift = float(Q_next[-1] - Q[0])
        evidence.metric("total drift of Q (vanishes as lr -> 0)", drift)
        evidence.metric("lr^2 sum(|g_PV|^2 - |g_KQ|^2)", float((lr**2 * (g_P - g_K)).sum()))
        # Exact zeros, bit for bit: the odd weights (W_PV[y, x], W_KQ[y, x]; W_PV's other rows
        # and W_KQ[:, y] never enter theta) start at 0.0, and the antithetic statistics have
        # exact zeros where the pairing cancels (gram between features of opposite mirror
        # parity, cross on the even ones: _mirror_symmetric). Then every theta_j of an even
        # feature is a sum of products with a 0.0 factor, so 0.0; dL/dtheta_j = 2(gram theta)_j
        # - 2 cross_j there is a sum of 0.0 * x and x * 0.0 terms, so 0.0 (x finite); and the
        # gradient of each odd weight sums products (dL/dtheta_j) * w over theta_j containing
        # it, where either theta_j is even (factor 0.0) or its partner w is odd (0.0). So the
        # SGD update subtracts lr * 0.0 and the odd weights stay +-0.0 at every step.
        off = result.metrics["off_block_max"]
        assert off == 0.0, f"odd blocks grew to {off:.3g} (they are exact zeros in float)"
        # (3) the endpoint: the global minimum, at the resolution of these prompts
        stats = zfb_fit()
        case = regression_case("zfb", N, D_FEATURES)
        A = preconditioner(case.n, case.sigma2, case.Sigma, case.Omega)
        theta = trained_coefficients(result)
        excess, resolution = (stats.excess(theta, closed_form_coefficients(A)),
                              stats.resolution(z_score(1)))
        evidence.ratio(excess / resolution)
        assert excess <= resolution, (
            f"gradient flow ended {excess:.3g} from A* (resolution {resolution:.3g})")
        # (4) u_y^2 = (Q + sqrt(Q^2 + 4|Gamma|^2))/2 when the odd blocks vanish, so a balanced
        # start (Q ~ 0) ends at u_y^2 = |Gamma|_F ~ |A*|_F.
        Gamma = gamma_from_lifted(theta, D_FEATURES)
        u_y, Q_end = result.metrics["u_y_final"], result.metrics["Q_final"]
        u_y2, g, S_end = u_y**2, float(Gamma.norm()), result.metrics["S_final"]
        evidence.metric("u_y^2 (final)", u_y2)
        evidence.metric("|A*|_F", float(A.norm()))
        evidence.metric("u_y^2 - |Gamma|_F (= Q/2 to first order)", u_y2 - g)
        predicted = (Q_end + math.sqrt(Q_end**2 + 4 * g**2)) / 2
        gap = abs(u_y2 - predicted)
        # Exactly, for the final weights (V = W_KQ's x block, o = off_block_max): Gamma_cb =
        # -(u_y V_bc + P_yb K_yc), so |Gamma|_F = |u_y||V|_F + e1, |e1| <= d o^2, and
        # |V|_F^2 = u_y^2 - Q + eps, |eps| <= N_o o^2 over the N_o = dD + d + 2D - 1 odd
        # entries; x = u_y^2 then solves x(x - Q + eps) = (|Gamma|_F - e1)^2 exactly, and
        # f(Q, g) = (Q + sqrt(Q^2 + 4g^2))/2 is 1-Lipschitz in Q and in g. The computed inputs:
        # Q_end = fl(sum P^2 - sum K^2) errs by gamma_{D^2+1} S; theta's entries (one product,
        # a sum of two, a halving) by gamma_3 |u_y||V| + d o^2 per entry and |Gamma|_F's
        # d^2-term norm by gamma_{d^2+2}; evaluating f (a square, a product, a sum, a sqrt, a
        # sum, a halving) by gamma_5 (|Q| + sqrt(Q^2 + 4g^2))/2, and u_y^2 by u u_y^2.
        d_x = D_FEATURES
        N_o = d_x * D + d_x + 2 * D - 1
        odd = (N_o + d_x) * off**2
        inputs = (gamma(D * D + 1) * S_end
                  + gamma(3) * (abs(u_y) * math.sqrt(S_end) + d_x * off**2)
                  + gamma(d_x * d_x + 2) * g)
        evaluation = gamma(5) * (abs(Q_end) + math.sqrt(Q_end**2 + 4 * g**2)) / 2 \
            + gamma(1) * u_y2
        bound = (odd + inputs + evaluation) * (1 + gamma(16))   # the bound's own arithmetic
        evidence.margin(1 - gap / bound)
        assert gap <= bound, (
            f"u_y^2 = {u_y2:.17g} but (Q + sqrt(Q^2 + 4|Gamma|^2))/2 = {predicted:.17g}")
    return run


test_zfb_gradient_flow_conserves_the_balance = check(IR_ZFB_CONSERVED, "empirical")(
    zfb_conservation_check())


RISK_LENGTHS = (1, 2, 5, 10, 30)
RISK_PROMPTS = 20_000


def prompt_length_risk_check(risk=population_loss, trained: bool = False):
    """Monte Carlo test risk of the LSA at prompt lengths M against R(M)."""
    def run():
        from empirics.icl_regression import gamma_from_lifted, regression_case, trained_coefficients

        case = regression_case("zfb", N, D_FEATURES)
        Gamma = (gamma_from_lifted(trained_coefficients(trained_zfb()), D_FEATURES) if trained
                 else optimal_preconditioner(case.n, 0.0, case.Sigma, case.Omega))
        model = one_step_gd(D_FEATURES, 1.0, preconditioner=Gamma)
        z = z_score(len(RISK_LENGTHS))
        rows, measured = [], []
        for M in RISK_LENGTHS:
            prompts = case.sample(RISK_PROMPTS, torch.Generator().manual_seed(SEED + M), n=M)
            losses = (model.predict(prompts.Z) - prompts.y_query).pow(2)
            mean, se = float(losses.mean()), float(losses.std() / math.sqrt(RISK_PROMPTS))
            expected = risk(Gamma, M, 0.0, case.Sigma, case.Omega)
            measured.append((mean, se, expected))
            rows.append([M, round(mean, 4), round(se, 4), round(expected, 4),
                         round(abs(mean - expected) / se, 2)])
            evidence.margin((z * se - abs(mean - expected)) / (z * se))
        evidence.cases(RISK_PROMPTS * len(RISK_LENGTHS))
        evidence.table("test risk against prompt length",
                       ["M", "Monte Carlo risk", "standard error", "R(M)", "|z|"], rows)
        evidence.figure(risk_figure(Gamma, case, measured, risk), "risk-vs-M")
        for (mean, se, expected), M in zip(measured, RISK_LENGTHS, strict=True):
            assert abs(mean - expected) <= z * se, (
                f"M={M}: Monte Carlo risk {mean:.4f} ± {se:.4f} vs R(M) = {expected:.4f}")
        Lam = case.Sigma
        limit = float(torch.trace(Lam) - 2 * torch.trace(Lam @ Gamma @ Lam)
                      + torch.trace(Lam @ Gamma @ Lam @ Lam @ Gamma.T))
        curve = [expected for _, _, expected in measured] + [limit]
        evidence.metric("R(infinity)", limit)
        assert all(a > b for a, b in pairwise(curve)), f"R(M) is not decreasing: {curve}"
    return run


def risk_figure(Gamma, case, measured, risk):
    from empirics.plots import new_axes

    lengths = torch.logspace(0, math.log10(100), 60).tolist()
    fig, ax = new_axes()
    ax.plot(lengths, [risk(Gamma, max(1, round(M)), 0.0, case.Sigma, case.Omega)
                      for M in lengths], lw=1, label="R(M)")
    ax.errorbar(RISK_LENGTHS, [m for m, _, _ in measured], yerr=[2 * s for _, s, _ in measured],
                fmt="o", ms=3, label="Monte Carlo ± 2 SE")
    ax.set_xscale("log")
    ax.set_xlabel("prompt length M")
    ax.set_ylabel("test risk")
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


test_prompt_length_risk_of_the_optimum = check(IR_ZFB_RISK, "numeric")(
    prompt_length_risk_check())
test_prompt_length_risk_of_the_trained_lsa = check(IR_ZFB_RISK, "empirical")(
    prompt_length_risk_check(trained=True))


