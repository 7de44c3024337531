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
        r"\Lambda}n I\big]^{-1}$, where $u_y^2 = \lVert A^*\rVert_F$."),
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
        off = result.metrics["off_block_max"]
        assert off <= gamma(P_coefficients) * math.sqrt(result.metrics["S_final"]), (
            f"odd blocks grew to {off:.3g}")
        Gamma = gamma_from_lifted(theta, D_FEATURES)
        u_y2, Q_end = result.metrics["u_y_final"] ** 2, result.metrics["Q_final"]
        evidence.metric("u_y^2 (final)", u_y2)
        evidence.metric("|A*|_F", float(A.norm()))
        gap = abs(u_y2 - float(Gamma.norm()))
        bound = abs(Q_end) / 2 + gamma(P_coefficients) * result.metrics["S_final"] * 4
        assert gap <= bound, f"u_y^2 = {u_y2:.5f} but |Gamma|_F = {float(Gamma.norm()):.5f}"
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


