r"""IR.7 (b): the construction's expected error, conditionally on :math:`x_1` and over the start,
is a quadratic in :math:`c = ab` whose coefficients are moments of :math:`x_1`."""

from __future__ import annotations

import torch

from constructions.ar_mesa import ar_mesa_layer, moments, population_error
from constructions.ar_mesa_bounds import residual_roundings
from theorems.areas.ar_mesa._shared import (
    MODEL_SOURCE,
    SYMBOLS,
    Z_LIMIT,
    ZHENG,
    conditional_coefficients,
    sampled_coefficients,
    z_scores,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma

AR_POPULATION = Claim(
    id="ar-mesa.population-error",
    title="The construction's expected error is a quadratic in ab with moment coefficients",
    statement=(
        SYMBOLS
        + r"Then for every $t \ge 2$, conditionally on $x_1$, "
          r"$\mathbb E_\theta\,\mathrm{Re}\langle \hat y_t, x_{t+1}\rangle = c\sum_j|x_{1j}|^4$ "
          r"and $\mathbb E_\theta\lVert\hat y_t\rVert^2 = c^2\big(\sum_j|x_{1j}|^6 + "
          r"\frac1{t-1}\sum_{j\ne k}|x_{1j}|^2|x_{1k}|^4\big)$; hence "
          r"$\varepsilon_t(c) = \mathbb E\lVert\hat y_t - x_{t+1}\rVert^2 = \mu_2 - 2c\mu_4 + "
          r"c^2\big(\mu_6 + \kappa/(t-1)\big)$."),
    source=(MODEL_SOURCE,
            Source(where="derived here: the powers $(\\lambda_k/\\lambda_j)^m$, $k\\ne j$, "
                         "$1\\le m<t$, are orthonormal under uniform phases", tag="D", **ZHENG)),
    kind="identity",
    construction="constructions.ar_mesa:population_error",
    depends_on=("ar-mesa.one-gd-step",),
)


# --- IR.7 (b): the population error ----------------------------------------------------------

def population_check(build=ar_mesa_layer, error_formula=population_error):
    def run():
        d, T, batch = 3, 24, 3000
        t = torch.arange(2, T, dtype=torch.float64)
        # a, b, c = ab and c^2 are exact short dyadics; c or c^2 times a formula adds one
        # rounding, inside residual_roundings' 4 for sqrt(ab) (no square root taken here)
        cases = (("gaussian", 1, 0.5, -1.5), ("one-hot", 1.5, 2.0, 0.25), ("ones", 0.8, -0.75, -1))
        for seed, (kind, scale, a, b) in enumerate(cases):
            lin, quad, x1, (lin_abs, quad_abs) = sampled_coefficients(kind, d, T, batch, seed,
                                                                      build, scale, a, b)
            c, (linear, quadratic) = a * b, conditional_coefficients(x1, t)
            # the unconditional error at c against the moments (x1 is random here too)
            norm = x1.abs().pow(2).sum(-1)[:, None]
            error = norm - 2 * lin + quad
            closed = torch.tensor([float(error_formula(moments(kind, d, scale), int(step), c))
                                   for step in t])
            # rounding: gamma_K times each side evaluated on absolute values (the conditional
            # means' absolute forms: the cross term's two parts added, not subtracted)
            v = x1.abs().pow(2)
            m4, m6 = v.pow(2).sum(-1)[:, None], v.pow(3).sum(-1)[:, None]
            q_abs = m6 + (v.sum(-1)[:, None] * m4 + m6) / (t - 1)
            g = gamma(residual_roundings(T, d))
            z = {"E Re<y_t, x_(t+1)> = c sum |x_1j|^4": z_scores(lin - c * linear,
                                                                  g * (lin_abs + abs(c) * m4)),
                 "E |y_t|^2 = c^2 (...)": z_scores(quad - c**2 * quadratic,
                                                   g * (quad_abs + c**2 * q_abs)),
                 "eps_t(c) = mu_2 - 2c mu_4 + c^2 (...)": z_scores(error - closed, g * (
                     norm + 2 * lin_abs + quad_abs + closed.abs()))}
            for name, value in z.items():  # one assertion per sentence, in its order
                worst = float(value.max())
                evidence.metric(f"{kind}: max |z| of {name}", worst)
                evidence.margin((Z_LIMIT - worst) / Z_LIMIT)
                assert worst <= Z_LIMIT, f"{kind}: {name} is {worst:.2f} SE from its formula"
        evidence.cases(3 * batch)
    return run


test_the_error_is_the_moment_quadratic = check(AR_POPULATION, "numeric")(population_check())
