r"""One layer of linear self-attention as one step of preconditioned gradient descent: the effective
predictor, the closed-form optimum (Mahankali et al., Ahn et al.), nonlinear responses, and the
trained model (IR.1, IR.2, IR.5).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from hypothesis import given
from hypothesis import strategies as st

from constructions.icl_regression import (
    gd_prediction,
    lifted_features,
    lsa,
    nonlinear_optimal_step,
    one_step_gd,
    optimal_loss,
    optimal_preconditioner,
    population_loss,
    prompt,
    second_moment,
    sine_response_moments,
)
from theorems.areas.icl_regression._shared import (
    AHN,
    AHN_CODE,
    D_FEATURES,
    DERIVED,
    FIT_PROMPTS,
    MAHANKALI,
    SEED,
    N,
    gaussian,
    half_unit,
    regression_batches,
    z_score,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.proof_statements import Scope
from theorems.proving import coq_proof
from theorems.strategies import spd_matrices

# --- claims --------------------------------------------------------------------------------

IR_EFFECTIVE = Claim(
    id="icl-regression.effective-predictor",
    title="A one-layer LSA predicts through its effective predictor −uᵀGV x̃_q only",
    statement=(
        r"Let $Z = \begin{pmatrix} x_1 & \cdots & x_n & x_q\\ y_1 & \cdots & y_n & 0"
        r"\end{pmatrix} \in \mathbb R^{(d+1)\times(n+1)}$ and $f(Z) = Z + \tfrac1n W_{PV} Z M "
        r"Z^\top W_{KQ} Z$ with $W_{PV}, W_{KQ} \in \mathbb R^{(d+1)\times(d+1)}$ and "
        r"$M = \mathrm{diag}(1,\dots,1,0)$ (query masked as a key) or $M = I$ (unmasked). The "
        r"prediction $\hat y = -f(Z)_{d+1,n+1}$ equals $-u^\top G V\tilde x_q = \sum_{a,b,c} "
        r"T_{abc}G_{ab}(x_q)_c$, where $u$ is the last row of $W_{PV}$, $V = W_{KQ}$, "
        r"$\tilde x_q = (x_q, 0)$, $G = \tfrac1n\sum_{i\le n} z_iz_i^\top$ ($+\,z_qz_q^\top/n$ "
        r"when unmasked, $z_i$ the columns of $Z$) and $T_{abc} = -\tfrac12(u_aV_{bc} + "
        r"u_bV_{ac})$; equivalently $\hat y = \phi(Z)^\top\theta$ in the lifted features "
        r"$\phi = (G_{ab}(x_q)_c)_{a\le b,\,c\le d}$ with $\theta_{(a,b),c} = T_{abc} + "
        r"T_{bac}$ ($a<b$), $T_{aac}$ ($a=b$)."),
    source=(AHN_CODE, Source(where="the effective-predictor identity", tag="D", **AHN)),
    kind="identity",
    construction="constructions.icl_regression:lsa",
)

IR_ONE_STEP = Claim(
    id="icl-regression.one-step-gd",
    title="An explicit LSA computes one step of preconditioned GD exactly",
    statement=(
        r"For $d \ge 1$, $\eta \in \mathbb R$ and $P \in \mathbb R^{d\times d}$, the LSA with "
        r"$W_{PV} = e_{d+1}e_{d+1}^\top$ and $W_{KQ} = \begin{pmatrix}-(\eta P)^\top & 0\\ 0 "
        r"& 0\end{pmatrix}$ predicts, on every prompt, $\hat y = x_q^\top w_1$ where "
        r"$w_1 = -\eta P\nabla L(0) = \eta P\,\tfrac1n\sum_{i=1}^n y_ix_i$ is one step of "
        r"preconditioned gradient descent from $w_0 = 0$ on "
        r"$L(w) = \tfrac1{2n}\sum_{i=1}^n(w^\top x_i - y_i)^2$. In float64 the two agree to a "
        r"relative error below $10^{-10}$ of the absolute-value evaluation "
        r"$|\eta|\,|x_q|^\top|P|\tfrac1n\sum_i|y_i||x_i|$."),
    source=(Source(where="Abstract (one step of GD)", tag="V", **MAHANKALI),
            AHN_CODE,
            Source(where="the explicit weights, in this module's sign convention", tag="D",
                   **AHN)),
    kind="construction",
    construction="constructions.icl_regression:one_step_gd",
    depends_on=("icl-regression.effective-predictor",),
)

IR_ISOTROPIC = Claim(
    id="icl-regression.isotropic-optimum",
    title="With isotropic data the optimal one-layer LSA is one GD step with η* = n/(n+d+1+σ²)",
    statement=(
        r"Let $x_1,\dots,x_n,x_q \sim N(0, I_d)$, $w \sim N(0, I_d)$, $y_i = w^\top x_i + "
        r"\varepsilon_i$, $y_q = w^\top x_q + \varepsilon_q$ with $\varepsilon \sim N(0,"
        r"\sigma^2)$, all independent. Over all one-layer LSAs $(W_{PV}, W_{KQ})$ with masked "
        r"query, the pre-training loss $\mathbb E(\hat y - y_q)^2$ is minimised by the "
        r"predictor $\hat y = \eta^*x_q^\top\tfrac1n\sum_i y_ix_i$ (one GD step from 0) with "
        r"$\eta^* = n/(n+d+1+\sigma^2)$, and the minimum is $L^* = \sigma^2 + d(d+1+\sigma^2)"
        r"/(n+d+1+\sigma^2)$. At $d=3$, $n=10$, $\sigma=0.5$: $L^* = 1.1447$, and the loss is "
        r"$1.1658$ at both $0.9\eta^*$ and $1.1\eta^*$ (it is quadratic in $\eta$, symmetric "
        r"about $\eta^*$); the claim catalogue's Monte Carlo values $1.165$ and $1.169$ (4M "
        r"prompts, standard error $0.0012$) agree with it. One seeded run (seed 0) of "
        r"full-batch Adam on the empirical risk of the $2\cdot10^5$ prompts of the least-squares "
        r"fit, from a small random start, lands on this optimum within their Monte Carlo "
        r"resolution."),
    source=(Source(where="Abstract (isotropic covariates: the minimiser is one GD step)",
                   tag="V", **MAHANKALI),
            Source(where=f"η*, L* and the three numbers: {DERIVED}; the paper may normalise "
                         "by n+1 (it keeps the noise: its abstract studies noisy linear "
                         "regression data)", tag="D", **MAHANKALI)),
    kind="construction",
    construction="constructions.icl_regression:optimal_preconditioner",
    depends_on=("icl-regression.effective-predictor", "icl-regression.one-step-gd",
                "icl-regression.population-loss"),
)

IR_PRECONDITIONED = Claim(
    id="icl-regression.preconditioned-optimum",
    title="With non-isotropic data the optimal one-layer LSA is one preconditioned GD step",
    statement=(
        r"With $x_i, x_q \sim N(0,\Sigma)$, $w \sim N(0,\Omega)$ ($\Sigma,\Omega$ symmetric "
        r"positive definite), noise $N(0,\sigma^2)$ and $n$ examples, the loss-minimising "
        r"one-layer LSA predicts $\hat y = x_q^\top A^*\tfrac1n\sum_iy_ix_i$ with "
        r"$A^* = \Omega\Sigma H^{-1}$, $H = \tfrac{n+1}n\Sigma\Omega\Sigma + "
        r"\tfrac{\mathrm{tr}(\Omega\Sigma)+\sigma^2}n\Sigma$, and $L^* = \sigma^2 + "
        r"\mathrm{tr}(\Sigma\Omega) - \mathrm{tr}(\Sigma A^*\Sigma\Omega)$. Moreover "
        r"$A^* = \big[\tfrac{n+1}n\Sigma + \tfrac{\mathrm{tr}(\Omega\Sigma)+\sigma^2}n"
        r"\Omega^{-1}\big]^{-1}$ is symmetric; $\Omega = \Sigma^{-1}$ gives "
        r"$\tfrac n{n+d+1+\sigma^2}\Sigma^{-1}$ and $\Omega = I$ gives "
        r"$\big[\tfrac{n+1}n\Sigma + \tfrac{\mathrm{tr}\Sigma + \sigma^2}n I\big]^{-1}$. One "
        r"seeded run (seed 0) of full-batch Adam on the empirical risk of the $2\cdot10^5$ "
        r"prompts of the least-squares fit, from a small random start, lands on this optimum "
        r"within their Monte Carlo resolution."),
    source=(Source(where="Abstract (non-isotropic covariates and weights: preconditioned GD)",
                   tag="V", **MAHANKALI),
            Source(where="Abstract (transformers learn preconditioned GD); their code draws "
                         "Ω = Σ⁻¹", tag="V", **AHN),
            Source(where=f"A*, L*, the symmetric form and the special cases: {DERIVED}",
                   tag="D", **MAHANKALI)),
    kind="construction",
    construction="constructions.icl_regression:optimal_preconditioner",
    depends_on=("icl-regression.isotropic-optimum",),
    notes=("The issue that asked for this area expected A* to be non-symmetric in general; "
           "it is symmetric for every SPD Σ, Ω (the property check tests the symmetric form), "
           "so a transposed preconditioner cannot be detected on A* itself. The orientation "
           "ŷ = x_qᵀ A* s is kept, and the transposition mutant is caught by the one-step-GD "
           "check with a non-symmetric P."),
)

IR_NONLINEAR = Claim(
    id="icl-regression.nonlinear-step",
    title="With nonlinear responses the optimal LSA is still one GD step, with a derived η*",
    statement=(
        r"Let $x_i, x_q \sim N(0, I_d)$ and $y = f(x)$ with $f(x) = \sin(w^\top x)$, "
        r"$w \sim N(0, \varsigma^2 I_d)$. The loss-minimising one-layer LSA predicts "
        r"$\hat y = \eta^*x_q^\top\tfrac1n\sum_iy_ix_i$ with $\eta^* = \mathbb E\lVert g"
        r"\rVert^2/\big((1-\tfrac1n)\mathbb E\lVert g\rVert^2 + \mathbb E[f(x)^2\lVert x"
        r"\rVert^2]/n\big)$, $g = \mathbb E_x[f(x)x]$; here $\mathbb E\lVert g\rVert^2 = "
        r"d\varsigma^2(1+2\varsigma^2)^{-d/2-1}$ and $\mathbb E[f^2\lVert x\rVert^2] = "
        r"\tfrac d2(1 - (1+4\varsigma^2)^{-d/2}) + 2d\varsigma^2(1+4\varsigma^2)^{-d/2-1}$, and "
        r"the minimum is $\mathbb E f^2 - \eta^*\mathbb E\lVert g\rVert^2$ with $\mathbb Ef^2 "
        r"= \tfrac12(1 - (1+4\varsigma^2)^{-d/2})$. At $d=3$, $n=10$, $\varsigma=1$: "
        r"$\eta^* = 0.6004$. One seeded run (seed 0) of full-batch Adam on the empirical "
        r"risk of the $2\cdot10^5$ prompts of the least-squares fit, from a small random start, "
        r"lands on this optimum within their Monte Carlo resolution."),
    source=(Source(where="Abstract (nonlinear responses: still one step of GD)", tag="V",
                   **MAHANKALI),
            Source(where=f"η* and the sine moments: {DERIVED}; the paper's assumptions on f "
                         "are unread", tag="D", **MAHANKALI)),
    kind="construction",
    construction="constructions.icl_regression:nonlinear_optimal_step",
    depends_on=("icl-regression.isotropic-optimum",),
    result_dependencies={
        "icl-regression.isotropic-optimum":
            "the derivation extends that claim's optimum; the checks compare "
            "nonlinear_optimal_step with lifted least squares and a trained LSA directly",
    },
)

# --- IR: the effective predictor -------------------------------------------------------------

def explicit_prediction(W_PV, W_KQ, Z, mask_query: bool) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The oracle :math:`-\tfrac1n\sum_{i\in\text{keys}}(u^\top z_i)(z_i^\top V\tilde x_q)`,
    summed key by key, and its absolute-value evaluation (for the rounding bound)."""
    n = Z.shape[-1] - 1
    keys = Z if not mask_query else Z[..., :n]
    u, query = W_PV[-1], Z[..., -1]
    values = torch.einsum("a,...ai->...i", u, keys)
    scores = torch.einsum("...bi,bc,...c->...i", keys, W_KQ, query)
    absolute = torch.einsum("a,...ai->...i", u.abs(), keys.abs()) * torch.einsum(
        "...bi,bc,...c->...i", keys.abs(), W_KQ.abs(), query.abs())
    return -(values * scores).sum(-1) / n, absolute.sum(-1) / n


def effective_predictor_check(build=lsa):
    @given(batch=regression_batches(), mask=st.booleans(), weight_scale=st.sampled_from(
        [0.1, 1.0, 10.0]))
    def run(batch, mask, weight_scale):
        X, y, x_query, generator = batch
        Z = prompt(X, y, x_query)
        D, n = Z.shape[-2], Z.shape[-1] - 1
        W_PV, W_KQ = (gaussian(generator, D, D, scale=weight_scale) for _ in range(2))
        model = build(W_PV, W_KQ, mask_query=mask)
        oracle, absolute = explicit_prediction(W_PV, W_KQ, Z, mask)
        # Every path is a chain of sums over <= n + 1 keys, D rows, D columns and the P lifted
        # features, each term bounded by the absolute-value evaluation: gamma_K per path.
        K = n + 1 + 3 * D + D * D * (D - 1) + 8
        tolerance = 2 * gamma(K) * absolute
        paths = {"predict": model.predict(Z), "-f(Z)[d+1, n+1]": -model(Z)[..., -1, -1],
                 "lifted features": lifted_features(Z, mask_query=mask)
                 @ model.lifted_coefficients()}
        for name, value in paths.items():
            err = (value - oracle).abs()
            evidence.margin(float(((tolerance - err) / tolerance).min()))
            assert bool((err <= tolerance).all()), (
                f"{name} differs from -u^T G V x_q by {float(err.max()):.3g} "
                f"(bound {float(tolerance.max()):.3g}), mask_query={mask}")
    return run


test_lsa_predicts_through_its_effective_predictor = check(IR_EFFECTIVE, "property")(
    effective_predictor_check())


# --- IR: one step of preconditioned GD ------------------------------------------------------

@st.composite
def gd_cases(draw):
    X, y, x_query, generator = draw(regression_batches(max_d=5, max_n=20))
    d = X.shape[-1]
    eta = draw(st.floats(-2.0, 2.0, allow_nan=False).filter(lambda v: abs(v) > 1e-3))
    P = gaussian(generator, d, d) if draw(st.booleans()) else None
    return X, y, x_query, eta, P


def one_step_check(build=one_step_gd):
    @given(case=gd_cases())
    def run(case):
        X, y, x_query, eta, P = case
        n, d = X.shape[-2:]
        model = build(d, eta, preconditioner=P)
        lsa_value = model.predict(prompt(X, y, x_query))
        gd_value = gd_prediction(X, y, x_query, eta, P)
        P_abs = torch.eye(d, dtype=X.dtype) if P is None else P.abs()
        absolute = abs(eta) * torch.einsum(
            "bd,de,be->b", x_query.abs(), P_abs, torch.einsum("bn,bnd->bd", y.abs(), X.abs()) / n)
        # LSA: G (n terms, /n), then rows of W_PV, W_KQ and the query (D terms each), and
        # -(eta P)^T (one rounding); GD: s (n terms, /n), P s and x_q . (d terms), eta.
        tolerance = 2 * gamma(n + 2 * (d + 1) + 4) * absolute
        err = (lsa_value - gd_value).abs()
        relative = err / absolute.clamp_min(torch.finfo(X.dtype).tiny)
        evidence.metric("relative error (to the absolute-value evaluation)",
                        float(relative.max()))
        evidence.margin(float(((tolerance - err) / tolerance).min()))
        # the float64 sentence, as stated: relative error below 1e-10 of the absolute-value
        # evaluation (implied by the bound below, 2 gamma_K <= 1e-14 here; asserted on its own)
        assert float(relative.max()) < 1e-10, (
            f"relative error {float(relative.max()):.3g} of the absolute-value evaluation is "
            "not below 1e-10")
        # the exact identity, through its float64 evaluation: within the derived rounding bound
        assert bool((err <= tolerance).all()), (
            f"LSA and one GD step differ by {float(err.max()):.3g} > {float(tolerance.max()):.3g}")
    return run


test_one_step_gd_is_exact = check(IR_ONE_STEP, "property")(one_step_check())


# --- IR.1, IR.2, IR.5: closed form, convex optimum, trained model -----------------------------

def linear_closed_form(case, preconditioner=optimal_preconditioner, loss=optimal_loss):
    """(Γ*, L*) of a linear-response case."""
    return (preconditioner(case.n, case.sigma2, case.Sigma, case.Omega),
            loss(case.n, case.sigma2, case.Sigma, case.Omega))


def sine_closed_form(case, step=nonlinear_optimal_step):
    """(η* I, E f² − η* E|g|²) of the sine-response case (noiseless)."""
    moments = sine_response_moments(case.d, float(case.Omega[0, 0]))
    eta = step(case.n, moments["g2"], moments["f2x2"])
    return eta * torch.eye(case.d, dtype=torch.float64), moments["f2"] - eta * moments["g2"]


def closed_form_coefficients(Gamma: torch.Tensor) -> torch.Tensor:
    """Lifted coefficients of the closed form: those of one_step_gd with preconditioner Γ."""
    return one_step_gd(Gamma.shape[0], 1.0, preconditioner=Gamma).lifted_coefficients()


def fit(case_name: str):
    from empirics.icl_regression import lifted_statistics

    return lifted_statistics(case_name, N, D_FEATURES, FIT_PROMPTS, SEED)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def convex_optimum_check(case_name: str, closed_form=linear_closed_form):
    """(a) against (b): the closed form against lifted least squares on Monte Carlo prompts."""
    def run():
        from empirics.icl_regression import gamma_from_lifted, regression_case

        case = regression_case(case_name, N, D_FEATURES)
        stats = fit(case_name)
        Gamma, L = closed_form(case)
        theta = closed_form_coefficients(Gamma)
        z = z_score(theta.numel())
        scores = ((stats.theta - theta) / stats.standard_errors).abs()
        evidence.cases(stats.prompts)
        evidence.metric("max |z| of the least-squares coefficients", float(scores.max()))
        evidence.metric("relative error of Γ (least squares vs closed form)",
                        relative(gamma_from_lifted(stats.theta, case.d), Gamma))
        evidence.margin(float((z - scores.max()) / z))
        assert float(scores.max()) <= z, (
            f"least-squares coefficient {int(scores.argmax())} is {float(scores.max()):.2f} "
            f"standard errors from the closed form (bound {z:.2f})")
        excess, resolution = stats.excess(stats.theta, theta), stats.resolution(z_score(1))
        evidence.ratio(excess / resolution)
        assert excess <= resolution, (
            f"lifted-metric distance {excess:.3g} exceeds the Monte Carlo resolution "
            f"{resolution:.3g}")
        loss_hat = float(stats.risk(theta))
        loss_tolerance = z_score(1) * math.sqrt(stats.loss_variance / stats.prompts)
        evidence.metric("|MC loss - closed-form loss| / tolerance",
                        abs(loss_hat - L) / loss_tolerance)
        assert abs(loss_hat - L) <= loss_tolerance, (
            f"Monte Carlo loss of the closed form {loss_hat:.5f} vs L* = {L:.5f} "
            f"(tolerance {loss_tolerance:.2g})")
    return run


@lru_cache(maxsize=4)
def trained_lsa(case_name: str):
    from empirics.icl_regression import LSA_EXPERIMENT

    return LSA_EXPERIMENT("smoke", device="cpu", case=case_name)


def trained_optimum_check(case_name: str, closed_form=linear_closed_form):
    """(c) against (a) and (b): the trained LSA's effective predictor, and the table."""
    def run():
        from empirics.icl_regression import (
            gamma_from_lifted,
            regression_case,
            trained_coefficients,
        )

        case = regression_case(case_name, N, D_FEATURES)
        stats, result = fit(case_name), trained_lsa(case_name)
        Gamma, L = closed_form(case)
        theta = closed_form_coefficients(Gamma)
        trained = trained_coefficients(result)
        resolution = stats.resolution(z_score(1))
        rows = []
        for method, coefficients in (("(a) closed form", theta),
                                     (f"(b) lifted least squares, {stats.prompts} prompts",
                                      stats.theta),
                                     ("(c) trained LSA (full-batch Adam, same prompts)",
                                      trained)):
            rows.append([method,
                         round(relative(gamma_from_lifted(coefficients, case.d), Gamma), 6),
                         float(f"{stats.excess(coefficients, theta):.4g}"),
                         float(f"{resolution:.4g}"),
                         round(float(stats.risk(coefficients)), 5), round(L, 5)])
        evidence.table("three-way agreement",
                       ["method", "‖Γ − Γ*‖/‖Γ*‖", "excess over (a), lifted metric",
                        "Monte Carlo resolution", "loss on the prompts", "closed-form L*"], rows)
        evidence.figure(result.figures["distance"], f"training-{case_name}")
        excess = stats.excess(trained, theta)
        evidence.metric("relative error of Γ (trained vs closed form)", rows[2][1])
        evidence.ratio(excess / resolution)
        assert excess <= resolution, (
            f"the trained LSA is {excess:.3g} from the closed form in the lifted metric, "
            f"beyond the Monte Carlo resolution {resolution:.3g}")
    return run


test_isotropic_optimum_matches_lifted_least_squares = check(IR_ISOTROPIC, "numeric")(
    convex_optimum_check("isotropic"))
test_isotropic_optimum_matches_the_trained_lsa = check(IR_ISOTROPIC, "empirical")(
    trained_optimum_check("isotropic"))
test_preconditioned_optimum_matches_lifted_least_squares = check(
    IR_PRECONDITIONED, "numeric")(convex_optimum_check("preconditioned"))
test_preconditioned_optimum_matches_the_trained_lsa = check(IR_PRECONDITIONED, "empirical")(
    trained_optimum_check("preconditioned"))
test_nonlinear_step_matches_lifted_least_squares = check(IR_NONLINEAR, "numeric")(
    convex_optimum_check("sine", sine_closed_form))
test_nonlinear_step_matches_the_trained_lsa = check(IR_NONLINEAR, "empirical")(
    trained_optimum_check("sine", sine_closed_form))


CATALOGUE_MC_SE = 0.0012  # the claim catalogue's Monte Carlo standard error (4M prompts)


def isotropic_numbers_check(preconditioner=optimal_preconditioner, loss=optimal_loss,
                            catalogue: tuple[float, float] = (1.165, 1.169)):
    """The closed forms against the stated formulas and the catalogue's printed numbers
    (``catalogue``: its Monte Carlo losses at 0.9 eta* and 1.1 eta*)."""
    def run():
        eye = torch.eye(3, dtype=torch.float64)
        Gamma, L = preconditioner(10, 0.25, eye), loss(10, 0.25, eye)
        eta = 10 / (10 + 3 + 1 + 0.25)
        # Sigma = Omega = I: every matrix product is exact (one nonzero term per entry), H = cI
        # with c = fl(1.1) + fl(3.25/10) (three roundings), solve on a diagonal H is one
        # division: Gamma = eta (1 + theta_5), eta = fl(10/14.25) (14.25 exact): gamma_6
        assert float((Gamma - eta * eye).abs().max()) <= gamma(6) * eta, "A* is not eta* I"
        # L = 3.25 - tr(A) (3 terms, each gamma_5 above, a 3-term sum and a subtraction:
        # gamma_8 of 3 eta + L) against 0.25 + 12.75/14.25 (two roundings of L)
        assert abs(L - (0.25 + 3 * (3 + 1 + 0.25) / (10 + 3 + 1 + 0.25))) <= gamma(8) * (
            3 * eta + 2 * L)
        assert abs(L - 1.1447) <= half_unit(1.1447), f"L* = {L:.5f}, printed 1.1447"
        below = population_loss(0.9 * Gamma, 10, 0.25, eye)
        above = population_loss(1.1 * Gamma, 10, 0.25, eye)
        # L(g I) = 3.25 - 6g + 3 g^2 c is exactly symmetric about eta* = 1/c; computed, each of
        # its three traces has <= 5 roundings (0.9 or 1.1 times Gamma, products with exact
        # identities, a 3-term trace) and the sum two more: gamma_8 of 3.25 + 6.6 eta + 3.63 eta
        # per side; fl(0.9), fl(1.1) move g by <= 1.1 u eta where |L'| = 0.6: u
        scale = 3.25 + (6 * 1.1 + 3 * 1.21) * eta
        assert abs(below - above) <= 2 * gamma(8) * scale + gamma(1), (
            "the loss is not symmetric about eta*")
        assert abs(below - 1.1658) <= half_unit(1.1658), f"L(0.9 eta*) = {below:.5f}"
        # The catalogue's 1.165 and 1.169 are Monte Carlo estimates: compare at their SE.
        for name, value, shown in (("0.9 eta*", below, catalogue[0]),
                                   ("1.1 eta*", above, catalogue[1])):
            slack = z_score(2) * CATALOGUE_MC_SE + half_unit(shown)
            evidence.metric(f"loss at {name}: |closed form - catalogue MC| / slack",
                            abs(value - shown) / slack)
            assert abs(value - shown) <= slack, f"loss at {name} = {value:.5f}, printed {shown}"
        evidence.cases(4)
    return run


test_isotropic_closed_form_matches_the_printed_numbers = check(IR_ISOTROPIC, "numeric")(
    isotropic_numbers_check())


def nonlinear_number_check(step=nonlinear_optimal_step):
    """The printed eta* = 0.6004 at d = 3, n = 10, varsigma = 1."""
    def run():
        moments = sine_response_moments(3, 1.0)
        eta = step(10, moments["g2"], moments["f2x2"])
        # g2 and f2x2 are sums of positive terms (one subtraction, 1.5 - 0.13: no cancellation)
        # of a few products and a pow within 1 ulp: gamma_8 relative each; the step's two
        # products, sum and division add gamma_8: gamma_24 eta in all, against 5e-5 printed
        evidence.metric("eta* at d = 3, n = 10, varsigma = 1", eta)
        assert abs(eta - 0.6004) <= half_unit(0.6004) + gamma(24) * eta, (
            f"eta* = {eta:.6f}, printed 0.6004")
        evidence.cases(1)
    return run


test_nonlinear_step_matches_the_printed_number = check(IR_NONLINEAR, "numeric")(
    nonlinear_number_check())


@st.composite
def spd_problems(draw):
    d = draw(st.integers(1, 5))
    return (draw(st.integers(1, 60)), draw(st.floats(0.0, 2.0)),
            draw(spd_matrices(d, max_condition=50.0)), draw(spd_matrices(d, max_condition=50.0)))


def norm(M: torch.Tensor) -> float:
    """The spectral norm."""
    return float(torch.linalg.matrix_norm(M, ord=2))


def closed_form_property_check(preconditioner=optimal_preconditioner):
    """A* is the stationary point of the exact loss, is symmetric, and has the special cases."""
    @budget(0.5)
    @given(problem=spd_problems())
    def run(problem):
        n, sigma2, Sigma, Omega = problem
        d = Sigma.shape[0]
        A = preconditioner(n, sigma2, Sigma, Omega)
        H = second_moment(n, sigma2, Sigma, Omega)
        # A backward-stable solve with H has relative forward error <= cond(H) * gamma (Higham
        # 7.2); forming H, Sigma Omega and the other side adds a few gamma_d, amplified by the
        # condition numbers of the matrices inverted there.
        kappa = float(torch.linalg.cond(H) + torch.linalg.cond(A) * torch.linalg.cond(Omega))
        tol = gamma(16 * d + 16) * kappa * norm(A)
        # The gradient 2 Sigma A H - 2 Sigma Omega Sigma, at a perturbation of A of size tol.
        grad = 2 * Sigma @ A @ H - 2 * Sigma @ Omega @ Sigma
        grad_tol = 2 * norm(Sigma) * norm(H) * tol + 2 * gamma(4 * d) * (
            norm(Sigma) * norm(A) * norm(H) + norm(Sigma @ Omega @ Sigma))
        grad_err = float(torch.linalg.matrix_norm(grad, ord=2))
        evidence.margin((grad_tol - grad_err) / grad_tol)
        assert grad_err <= grad_tol, f"the loss gradient at A* has norm {grad_err:.3g}, not 0"
        c = (torch.trace(Omega @ Sigma) + sigma2) / n
        symmetric = torch.linalg.inv((n + 1) / n * Sigma + c * torch.linalg.inv(Omega))
        assert norm(A - symmetric) <= 2 * tol, "A* differs from its symmetric form"
        cases = {"Omega = Sigma^-1": (torch.linalg.inv(Sigma),
                                      n / (n + d + 1 + sigma2) * torch.linalg.inv(Sigma)),
                 "Omega = I": (torch.eye(d, dtype=torch.float64), torch.linalg.inv(
                     (n + 1) / n * Sigma + (torch.trace(Sigma) + sigma2) / n
                     * torch.eye(d, dtype=torch.float64)))}
        for name, (special_Omega, expected) in cases.items():
            got = preconditioner(n, sigma2, Sigma, special_Omega)
            special_tol = gamma(16 * d + 16) * 4 * float(torch.linalg.cond(Sigma))**2 * norm(
                expected)
            assert norm(got - expected) <= special_tol, f"special case {name} fails"
    return run


test_preconditioner_is_the_stationary_point_and_symmetric = check(
    IR_PRECONDITIONED, "property")(closed_form_property_check())


# --- proved: machine-checked proofs (theorems/proving.py) ---------------------------------------

# The exact-arithmetic identity (masked and unmasked query) as a block-matrix identity for
# every d, n, eta and P, over any field: MathComp matrices. The float64 part is the property
# check's.
test_one_step_gd_proved = check(IR_ONE_STEP, "proved")(
    coq_proof("proofs/coq/icl_regression_one_step_gd.v", theorem="one_step_gd",
              scope=Scope("part", "the exact identity of the first sentence: "
                          "w_1 = -eta P grad L(0) = eta P (1/n) sum_i y_i x_i and the LSA's "
                          "prediction is x_q^T w_1, masked and unmasked, for every d, n, eta, P "
                          "and prompt, over any field; not the float64 sentence (relative error "
                          "below 1e-10), which the property check asserts")))
