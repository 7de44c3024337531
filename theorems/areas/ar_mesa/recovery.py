r"""IR.7 (e): the recovery criterion. At the limiting step the error tends to
:math:`\mu_2 - \mu_4^2/\mu_6`, which vanishes exactly when every :math:`|x_{1j}|^2` takes one
nonzero level (or 0) almost surely."""

from __future__ import annotations

import math
from fractions import Fraction

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.ar_mesa import (
    Moments,
    ar_mesa_layer,
    ar_sequences,
    limiting_ab,
    limiting_error,
    moments,
    population_error,
    sample_x1,
)
from constructions.ar_mesa_bounds import residual_roundings
from theorems.areas.ar_mesa._shared import SYMBOLS, Z_LIMIT, ZHENG, z_scores
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma

AR_RECOVERY = Claim(
    id="ar-mesa.recovery-criterion",
    title="The limiting mesa-optimizer predicts exactly iff |x₁ⱼ|² ∈ {0, c} almost surely",
    statement=(
        SYMBOLS
        + r"Assume $0 < \mu_6 < \infty$. At the limiting step $ab = \mu_4/\mu_6$, "
          r"$\varepsilon_t \to \varepsilon_\infty = \mu_2 - \mu_4^2/\mu_6$ as $t\to\infty$, and "
          r"$\varepsilon_\infty = 0$ iff there is a constant $c > 0$ with "
          r"$|x_{1j}|^2 \in \{0, c\}$ almost surely for every $j$ (then $ab = 1/c$ and "
          r"$\varepsilon_t = \kappa/(c^2(t-1)) \to 0$). Otherwise the error stays bounded away "
          r"from 0, e.g. for Gaussian starts $\varepsilon_\infty = 2ds^2/5$."),
    source=(Source(where="Abstract: a stronger moment condition is necessary and sufficient "
                         "for recovering the distribution", tag="V", **ZHENG),
            Source(where="this exact criterion (equality in Cauchy-Schwarz), derived here",
                   tag="D", **ZHENG)),
    kind="identity",
    construction="constructions.ar_mesa:limiting_error",
    depends_on=("ar-mesa.population-error",),
)


# --- IR.7 (e): the recovery criterion ----------------------------------------------------------

@st.composite
def discrete_starts(draw):
    """A joint law of :math:`(|x_{11}|^2, \\dots, |x_{1d}|^2)` on a few rational points."""
    d = draw(st.integers(1, 4))
    values = st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(1), Fraction(3, 2),
                              Fraction(2), Fraction(7, 3)])
    points = draw(st.lists(st.lists(values, min_size=d, max_size=d), min_size=1, max_size=4))
    if draw(st.booleans()):  # the criterion's extreme case: one shared nonzero level c
        c = draw(values.filter(bool))
        points = [[c if v else v for v in p] for p in points]
    weights = draw(st.lists(st.integers(1, 5), min_size=len(points), max_size=len(points)))
    return points, [Fraction(w, sum(weights)) for w in weights]


def discrete_moments(points, probabilities) -> Moments:
    def E(f):
        return sum((p * f(v) for v, p in zip(points, probabilities, strict=True)), Fraction(0))

    return Moments(E(lambda v: sum(v)), E(lambda v: sum(u**2 for u in v)),
                   E(lambda v: sum(u**3 for u in v)),
                   E(lambda v: sum(u * w**2 for i, u in enumerate(v)
                                   for k, w in enumerate(v) if i != k)))


def recovery_exact_check(error=limiting_error, step=limiting_ab,
                         criterion=lambda points: len({v for p in points for v in p if v}) == 1):
    @given(law=discrete_starts())
    @example(law=([[Fraction(1), Fraction(0)], [Fraction(0), Fraction(1)]],
                  [Fraction(1, 2)] * 2))                               # one-hot
    @example(law=([[Fraction(1), Fraction(2)]], [Fraction(1)]))        # two levels
    @example(law=([[Fraction(2), Fraction(2), Fraction(0)]], [Fraction(1)]))
    def run(law):
        points, probabilities = law
        m = discrete_moments(points, probabilities)
        if m.m6 == 0:  # x1 = 0 almost surely: nothing to predict, outside the claim
            return
        levels = {v for p in points for v in p if v}
        limit = error(m)
        evidence.cases(1)
        # exact (Fractions): at ab = mu4/mu6, eps_t = eps_inf + ab^2 kappa/(t-1) -> eps_inf
        ab = m.m4 / m.m6
        assert all(population_error(m, t, ab) - limit == ab**2 * m.cross / (t - 1)
                   for t in (2, 9)), f"eps_t does not tend to eps_inf = {limit}"
        assert limit >= 0, f"negative limiting error {limit}"
        assert (limit == 0) == criterion(points), (
            f"levels {sorted(levels)}: limiting error {limit}")
        if len(levels) == 1:
            (c,) = levels
            assert step(m) == 1 / c and population_error(m, 5, step(m)) == m.cross / (
                c**2 * 4), f"one level c = {c}: not ab = 1/c, eps_t = kappa/(c^2 (t-1))"
    return run


test_recovery_iff_two_levels_exactly = check(AR_RECOVERY, "property")(recovery_exact_check())


def recovery_numeric_check(build=ar_mesa_layer, error=limiting_error):
    def run():
        d, T, batch = 3, 64, 1500
        probes = (4, 16, T - 1)
        rows = []
        for seed, kind in enumerate(("ones", "one-hot", "gaussian")):
            m = moments(kind, d)
            ab = float(limiting_ab(m))
            generator = torch.Generator().manual_seed(200 + seed)
            x1 = sample_x1(kind, batch, d, generator=generator)
            x = ar_sequences(x1, T + 1, generator=generator)
            y = build(d, math.sqrt(ab), math.sqrt(ab))(x[:, :T])
            errors = (y - x[:, 1:]).abs().pow(2).sum(-1)                     # (B, T)
            y_abs = ar_mesa_layer(d, math.sqrt(ab), math.sqrt(ab))(x[:, :T].abs()).abs()
            errors_abs = (y_abs + x[:, 1:].abs()).pow(2).sum(-1)            # its abs form
            # control variate: the exact conditional mean given x1 (population-error claim)
            v = x1.abs().pow(2)
            lead = (v * (1 - ab * v) ** 2).sum(-1)
            lead_abs = (v * (1 + ab * v) ** 2).sum(-1)
            cross = v.sum(-1) * v.pow(2).sum(-1) - v.pow(3).sum(-1)
            cross_abs = v.sum(-1) * v.pow(2).sum(-1) + v.pow(3).sum(-1)
            g = gamma(residual_roundings(T + 1, d))
            measured, spreads, allowances = [], [], []
            for t in probes:
                conditional = lead + ab**2 * cross / (t - 1)
                residual = errors[:, t - 1] - conditional
                rounding = g * (errors_abs[:, t - 1] + lead_abs + ab**2 * cross_abs / (t - 1))
                z = float(z_scores(residual[:, None], rounding[:, None])[0])
                estimate = float(residual.mean()) + float(population_error(m, t, ab))
                measured.append(estimate)
                spreads.append(float(residual.std()) / math.sqrt(batch))
                allowances.append(float(rounding.mean()))
                assert z <= Z_LIMIT, f"{kind}: error at t={t} is {z:.1f} SE off its formula"
            limit = float(error(m))
            rows.append([kind, round(ab, 4), *(f"{e:.4g}" for e in measured), f"{limit:.4g}"])
            evidence.metric(f"{kind}: error at t={T - 1}", measured[-1])
            if kind == "gaussian":
                # bounded away from 0: limit > 0, and the last probe's error at the low end of
                # its allowance (Z_LIMIT SE and rounding) keeps half of the first probe's at the
                # high end (exactly (1.2 + 0.72/62)/(1.2 + 0.72/3) = 0.84 here)
                low = measured[-1] - Z_LIMIT * spreads[-1] - allowances[-1]
                high = measured[0] + Z_LIMIT * spreads[0] + allowances[0]
                evidence.margin(low / high - 0.5)
                assert low >= 0.5 * high and limit > 0, (
                    "Gaussian starts: the error should plateau at a positive level")
                # m2 - m4^2/m6 from the float moments (gamma_6 relative each, see the symbolic
                # check) and three more roundings: gamma_16 of m2 + m4^2/m6; s = 0.5, 1, 2
                for dd, s in ((1, 0.5), (3, 1.0), (4, 2.0)):
                    law = moments("gaussian", dd, s)
                    assert abs(error(law) - 2 * dd * s**2 / 5) <= gamma(16) * (
                        law.m2 + law.m4**2 / law.m6), f"Gaussian limit is not 2d s^2/5 at d={dd}"
            else:
                assert limit == 0, f"{kind}: limiting error {limit} should vanish"
                # exact decay kappa ab^2/(t-1): the ratio of the last to the first probe is
                # (t_0 - 1)/(t_2 - 1); each estimate is allowed Z_LIMIT standard errors and its
                # rounding allowance (the numerator up, the denominator down)
                exact = [float(population_error(m, t, ab)) for t in probes]
                high = exact[-1] + Z_LIMIT * spreads[-1] + allowances[-1]
                low = exact[0] - Z_LIMIT * spreads[0] - allowances[0]
                bound = high / low if low > 0 else math.inf
                ratio = measured[-1] / measured[0] if measured[0] > 0 else 0.0
                if kind == "one-hot":
                    # deterministic given x1 (spread 0): the error is rounding only; its mean
                    # is within the rounding allowance, plus population_error's own rounding
                    # (|1 - ab s^2| <= 3u and three more roundings of the float moments)
                    pop = [gamma(8) * (m.m2 + 2 * ab * m.m4 + ab**2 * m.m6) for _ in probes]
                    assert all(abs(e) <= a + p for e, a, p in zip(measured, allowances, pop,
                                                                  strict=True)), (
                        "one-hot error should be 0")
                else:
                    evidence.margin((bound - ratio) / bound)
                    assert ratio <= bound, f"{kind}: error decays like {ratio:.3g} not 1/t"
        evidence.cases(3 * batch)
        evidence.table("error at the limiting ab", ["start", "ab", *(f"t={t}" for t in probes),
                                                    "limit"], rows)
    return run


test_recovery_by_monte_carlo = check(AR_RECOVERY, "numeric")(recovery_numeric_check())
