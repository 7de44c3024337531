r"""What one layer learns about multi-step regression (Huang, Wang, Lee; IR.6): without chain of
thought its best estimate of :math:`w^*` is one GD step, which does not recover :math:`w^*`;
trained by teacher-forced chain of thought, it learns the products of the :math:`k`-step
construction of :mod:`.multi_step`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from constructions.icl_regression import (
    multi_step_layer,
    optimal_loss,
    optimal_preconditioner,
    pair_features,
)
from theorems.areas.icl_regression._shared import DERIVED, HWL, SEED, gaussian, half_unit, z_score
from theorems.areas.icl_regression.multi_step import COT_D, COT_N
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma

IR_NO_COT = Claim(
    id="icl-regression.no-cot-optimum",
    title="Without CoT one layer's best estimate of w* has error d(d+1)/(n+d+1)",
    statement=(
        r"For noiseless tasks with $x \sim N(0, I_d)$, $w^* \sim N(0, I_d)$ and $n$ examples, "
        r"every one-layer LSA estimate $\hat w$ read from a thought column $(0,0,0,1)$ is "
        r"linear in $G = \tfrac1n\sum_i z_iz_i^\top$, and the best one is $\hat w = "
        r"\tfrac n{n+d+1}\tfrac1n\sum_iy_ix_i$ (one GD step), with $\mathbb E\lVert\hat w - w^*"
        r"\rVert^2 = d(d+1)/(n+d+1)$: $3.548$ at $n = 20$, $d = 10$, against "
        r"$\mathbb E\lVert w^*\rVert^2 = 10$, so $w^*$ is not recovered."),
    source=(Source(where="Abstract (without CoT only one GD step; w* not recovered)", tag="V",
                   **HWL),
            Source(where=f"the constant: {DERIVED}", tag="D", **HWL)),
    kind="lower-bound",
    construction="constructions.icl_regression:optimal_preconditioner",
    depends_on=("icl-regression.isotropic-optimum",),
)

IR_COT_TRAINED = Claim(
    id="icl-regression.cot-trained-products",
    title="Teacher-forced CoT training learns W_PV[w,x]W_KQ[x,w] = −ηI and W_PV[w,x]W_KQ[y,1] = ηI",
    statement=(
        r"In one seeded run (seed 0, $d = 4$, $n = 12$, $k = 5$, $\eta = 0.3$), training one layer "
        r"in the $(x, y, w, 1)$ layout (from a small random start) to map each thought "
        r"$(0,0,w_k,1)$ to $(0,0,w_{k+1},1)$, $w_{k+1} = w_k + \tfrac\eta nX^\top(y - Xw_k)$, "
        r"converges to the construction of icl-regression.multi-step-exact up to the gauge "
        r"$(W_{PV}, W_{KQ}) \to (cW_{PV}, W_{KQ}/c)$: its effective update map equals the "
        r"construction's, and the gauge-invariant products are $W_{PV}[w,x]W_{KQ}[x,w] = -\eta I$ "
        r"and $W_{PV}[w,x]W_{KQ}[y,1] = \eta I$."),
    source=(Source(where="Abstract (gradient-based training learns the CoT construction)",
                   tag="V", **HWL),
            Source(where="the products, at d=4, n=12, k=5 (the paper's setting is unread)",
                   tag="D", **HWL)),
    kind="dynamics",
    construction="constructions.icl_regression:multi_step_layer",
    depends_on=("icl-regression.effective-predictor", "icl-regression.multi-step-exact"),
    result_dependencies={
        "icl-regression.multi-step-exact":
            "the learned products are those of that claim's k-step GD construction; the check "
            "trains an LSA and compares its products with -eta I and eta I directly",
    },
)


# --- IR.6: one layer without chain of thought, and chain-of-thought training ---------------

NO_COT_PROMPTS = 40_000


def no_cot_check(preconditioner=optimal_preconditioner, loss=optimal_loss):
    """Lifted least squares of w* on every pair G_ab of a one-layer LSA's read-out."""
    def run():
        n, d = COT_N, COT_D
        generator = torch.Generator().manual_seed(SEED + 3)
        X, w_star = gaussian(generator, NO_COT_PROMPTS, n, d), gaussian(generator,
                                                                       NO_COT_PROMPTS, d)
        y = torch.einsum("bnd,bd->bn", X, w_star)
        context = torch.cat([X, y.unsqueeze(-1)], -1).transpose(-1, -2)   # (B, d+1, n)
        Phi = pair_features(context @ context.transpose(-1, -2) / n)      # (B, P)
        gram = Phi.T @ Phi
        Theta = torch.linalg.solve(gram, Phi.T @ w_star)                  # (P, d)
        bread = torch.linalg.inv(gram)
        residual = w_star - Phi @ Theta
        se = torch.stack([(bread @ ((Phi * residual[:, o:o + 1] ** 2).T @ Phi) @ bread)
                          .diagonal().sqrt() for o in range(d)], 1)
        eye = torch.eye(d, dtype=torch.float64)
        Gamma = preconditioner(n, 0.0, eye)
        rows, cols = torch.triu_indices(d + 1, d + 1)
        expected = torch.zeros_like(Theta)
        for b in range(d):                     # pair (b, y) carries s_b; the output o gets Γ[o, b]
            expected[int(((rows == b) & (cols == d)).nonzero())] = Gamma[:, b]
        scores = ((Theta - expected) / se).abs()
        z = z_score(Theta.numel())
        evidence.metric("max |z| of the least-squares read-out", float(scores.max()))
        evidence.margin(float((z - scores.max()) / z))
        assert float(scores.max()) <= z, (
            f"the best linear-in-G estimate differs from Γ* s (max |z| {float(scores.max()):.2f})")
        s = Phi[:, (cols == d) & (rows < d)]                                # (B, d): s_b
        errors = (s @ Gamma.T - w_star).pow(2).sum(-1)
        mean, se_mean = float(errors.mean()), float(errors.std() / math.sqrt(NO_COT_PROMPTS))
        L = loss(n, 0.0, eye)
        evidence.metric("E|w_hat - w*|^2 (closed form)", L)
        evidence.metric("E|w_hat - w*|^2 (Monte Carlo)", mean)
        assert abs(mean - L) <= z_score(1) * se_mean, f"Monte Carlo {mean:.4f} vs {L:.4f}"
        # L = tr(I) - tr(A) with A = eta I: H = cI from two scalar roundings and a sum, the
        # diagonal solve one division (gamma_6 per entry, as in isotropic_numbers_check), the
        # d-term trace gamma_{d-1}, the subtraction u; the formula d(d+1)/(n+d+1) one
        # division: gamma_{d+8} of d eta + 2 L
        assert abs(L - d * (d + 1) / (n + d + 1)) <= gamma(d + 8) * (
            d * n / (n + d + 1) + 2 * L)
        assert abs(L - 3.548) <= half_unit(3.548)
        evidence.cases(NO_COT_PROMPTS)
    return run


test_without_cot_one_layer_cannot_recover_w = check(IR_NO_COT, "numeric")(no_cot_check())


@lru_cache(maxsize=1)
def trained_cot():
    from empirics.icl_regression import COT_EXPERIMENT

    return COT_EXPERIMENT("smoke", device="cpu")


def cot_products_check(build=multi_step_layer):
    def run():
        from empirics.icl_regression import cot_coefficients

        result = trained_cot()
        d, eta = result.config["d"], result.config["eta"]
        theta = torch.tensor([row[1] for row in result.tables["lifted coefficients"]["rows"]],
                             dtype=torch.float64)
        reference = cot_coefficients(build(d, eta), d)
        loss, lam_min = result.metrics["eval_loss"], result.metrics["gram_min_eigenvalue"]
        # Realisable and noiseless: the held-out loss is exactly sum_o dθ_oᵀ C dθ_o with C the
        # features' Gram matrix, so |θ - θ*|_F <= sqrt(loss / λ_min(C)); plus the rounding of
        # the coefficients themselves (sums of two products).
        radius = math.sqrt(max(loss, 0.0) / lam_min) + gamma(4) * float(
            theta.abs().sum() + reference.abs().sum())
        distance = float((theta - reference).norm())
        evidence.metric("|θ_trained - θ_construction|_F", distance)
        evidence.metric("bound from the held-out loss", radius)
        evidence.ratio(distance / radius)
        assert radius <= 0.05 * float(reference.norm()), (
            f"training did not resolve the map: radius {radius:.3g}")
        assert distance <= radius, (f"the trained update map is {distance:.3g} from the "
                                    f"construction's (bound {radius:.3g})")
        products = {row[0]: torch.tensor(row[1], dtype=torch.float64).reshape(d, d)
                    for row in result.tables["products"]["rows"]}
        eye = torch.eye(d, dtype=torch.float64)
        first = float((products["PV[w,x] KQ[x,w]"] + eta * eye).norm())
        second = float((products["PV[w,x] KQ[y,1]"] - eta * eye).norm())
        evidence.metric("|W_PV[w,x] W_KQ[x,w] + eta I|_F", first)
        evidence.metric("|W_PV[w,x] W_KQ[y,1] - eta I|_F", second)
        # the first product is the contraction sum_a θ_(a,a) of the x-x block (Cauchy-Schwarz);
        # the s coefficient is the second product plus W_PV[w,y] W_KQ[x,1]^T.
        assert first <= math.sqrt(d) * radius, f"W_PV[w,x] W_KQ[x,w] is {first:.3g} from -eta I"
        assert second <= radius + float(products["PV[w,y] KQ[x,1]^T"].norm()), (
            f"W_PV[w,x] W_KQ[y,1] is {second:.3g} from eta I")
        evidence.table("gauge-invariant products (trained)", ["product", "diagonal", "target"],
                       [["W_PV[w,x] W_KQ[x,w]", products["PV[w,x] KQ[x,w]"].diagonal().tolist(),
                         -eta], ["W_PV[w,x] W_KQ[y,1]",
                                 products["PV[w,x] KQ[y,1]"].diagonal().tolist(), eta]])
    return run


test_cot_training_learns_the_products = check(IR_COT_TRAINED, "empirical")(cot_products_check())
