r"""Conditioned initialisation for attention (ICLR 2026 submission 25196, OpenReview
cKNOCYPo2W; anonymous).

The abstract was read [V]; the scheme (semi-orthogonal W_Q, W_K, identity W_V) is from a
secondary summary [S]. The Jacobian fact is ours (catalogue CI.2). The catalogue's measured
condition numbers (CI.3) do not reproduce here at the stated input scale; that measurement is
registered as stated and refuted, with the scale dependence as its correction. The summarised
20–30% speed-up is not seen on induction heads at CPU size (slow tier, refuted as stated).
"""

from __future__ import annotations

import statistics

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.conditioned_init import (
    attention_jacobian,
    attention_layer,
    attention_matrix,
    condition_number,
    conditioned_init,
    gaussian_init,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence, expect_failure
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.strategies import seeds

CI = {"openreview": "cKNOCYPo2W", "ref": "Conditioned Initialization for Attention, ICLR 2026 "
                                         "submission 25196 (anonymous)"}
LAYER = (r"Let $X\in\mathbb R^{n\times d}$, $W_Q, W_K\in\mathbb R^{d\times d_k}$, "
         r"$W_V\in\mathbb R^{d\times d_v}$, $A = \mathrm{softmax}(XW_QW_K^\top X^\top/"
         r"\sqrt{d_k})$ (row-wise) and $Y = AXW_V$; $J$ is the Jacobian of $\mathrm{vec}_r(Y)$ "
         r"(row-major) with respect to $\mathrm{vec}_r$ of the weights. ")

CI_VALUE = Claim(
    id="training-dynamics.conditioned-init-value-jacobian",
    title="The W_V block of the attention Jacobian is AX ⊗ I, whatever W_V is",
    statement=(LAYER + r"The $W_V$ block is $J_V = AX\otimes I_{d_v}$; hence its singular "
               r"values are those of $AX$, each repeated $d_v$ times, and do not depend on "
               r"$W_V$: the initialisation of $W_V$ acts on the condition number of $J$ only "
               r"through the $W_Q$ and $W_K$ blocks."),
    source=(Source(where="Abstract: conditioned initialisation can reduce the condition "
                         "number of the attention Jacobian", tag="V", **CI),
            Source(where="the Kronecker structure, derived here (catalogue CI.2)", tag="D",
                   **CI)),
    kind="identity",
    construction="constructions.conditioned_init:attention_jacobian",
)

CI_KAPPA = Claim(
    id="training-dynamics.conditioned-init-condition-number",
    title="The conditioned scheme lowers the median condition number of the attention Jacobian "
          "(false at unit input scale)",
    statement=(LAYER + r"With $n = 8$, $d = d_k = d_v = 12$, $X$ with i.i.d. "
               r"$\mathcal N(0, 1)$ entries and 20 seeded trials (trial $t$: $X$ and the weights "
               r"from seed $t$), the median of $\kappa(J) = \sigma_{max}/\sigma_{min}$ over the "
               r"$nd_v$ singular values of $J = [J_Q\,J_K\,J_V]$ is smaller for the conditioned "
               r"scheme ($W_Q, W_K$ semi-orthogonal, $W_V = I$) than for $\mathcal N(0, 1/d)$ "
               r"entries."),
    source=(Source(where="Abstract: conditioned initialisation improves the spectral "
                         "properties and can reduce the condition number of the attention "
                         "Jacobian", tag="V", **CI),
            Source(where="the scheme: W_V the rectangular identity, W_Q and W_K "
                         "semi-orthogonal (a secondary summary)", tag="S", **CI),
            Source(where="the sizes and the median comparison (catalogue CI.3, measured "
                         "there as 553 against 339)", tag="D", **CI)),
    kind="bound",
    construction="constructions.conditioned_init:conditioned_init",
    depends_on=("training-dynamics.conditioned-init-value-jacobian",),
    refutes="finite-test",
    correction=(r"At unit input scale the conditioned median is larger (about 864 against 704 "
                r"here); with $X$ scaled by $1/\sqrt d$ or by 2 it is smaller (about 2229 "
                r"against 4943, and 2249 against 6318). The direction depends on the input "
                r"scale, which the scheme as summarised does not fix; the catalogue's CI.3 "
                r"numbers were not reproduced."),
)

CI_SPEED = Claim(
    id="training-dynamics.conditioned-init-trains-faster",
    title="Conditioned initialisation speeds up training by 20–30% (not seen on induction heads "
          "at CPU size)",
    statement=(r"On the induction task of empirics.induction_heads (uniform sequences of "
               r"length 32 over 16 tokens; accuracy on the positions with an earlier "
               r"occurrence), a two-layer attention-only transformer ($d = 32$, one head per "
               r"layer, Adam at rate $10^{-2}$, batch 32, evaluation every 10 steps on 256 "
               r"held-out sequences) reaches 95% held-out accuracy in at least 20% fewer steps "
               r"on average over seeds 0–5 when every head's $W_Q, W_K$ start semi-orthogonal "
               r"and $W_V$ as a slice of the identity than when they start with "
               r"$\mathcal N(0, 1/d)$ entries, the rest of the initialisation and the data "
               r"stream being the same for the two arms (a matched seed budget)."),
    source=(Source(where="Abstract: conditioned initialisation gives faster convergence and "
                         "more stable optimisation", tag="V", **CI),
            Source(where="20–30% faster convergence (a secondary summary; the paper's tasks "
                         "are image classification, object detection, NLP)", tag="S", **CI),
            Source(where="the induction-heads transfer, sizes and seeds, chosen here", tag="D",
                   **CI)),
    kind="dynamics",
    construction="constructions.conditioned_init:conditioned_init",
    refutes="finite-test",
    correction=(r"At this size the conditioned arm saves a few steps on average (about 5 of "
                r"180, 3%, paired standard deviation about 13 over 6 seeds, effect size about "
                r"0.4): no speed-up of the summarised size is seen on induction heads at "
                r"$d = 32$. The paper's own tasks were not run."),
)


# --- CI.2 ----------------------------------------------------------------------------------------

@st.composite
def layer_cases(draw):
    n, d = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    generator = torch.Generator().manual_seed(draw(seeds()))
    scale = draw(st.floats(0.1, 3.0))
    X = scale * torch.randn(n, d, generator=generator, dtype=torch.float64)
    W = [torch.randn(d, k, generator=generator, dtype=torch.float64) for k in (d_k, d_k, d_v,
                                                                               d_v)]
    return X, *W


def value_jacobian_check(layer=attention_layer):
    @budget(0.2)
    @given(case=layer_cases())
    @example(case=(torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64),
                   *(torch.eye(2, dtype=torch.float64),) * 3,
                   2 * torch.eye(2, dtype=torch.float64)))
    def run(case):
        X, W_Q, W_K, W_V, W_V2 = case
        n, d_v = X.shape[0], W_V.shape[1]
        J = attention_jacobian(X, W_Q, W_K, W_V, layer=layer)["W_V"]
        J2 = attention_jacobian(X, W_Q, W_K, W_V2, layer=layer)["W_V"]
        A = attention_matrix(X, W_Q, W_K)
        expected = torch.kron(A @ X, torch.eye(d_v, dtype=torch.float64))
        # Both J (autograd: the vector-Jacobian products of Y = (AX) W_V) and A @ X are n-term
        # dot products of the same factors A_ks X_si, so they agree within 2 gamma_n |A||X|.
        # The softmax A itself is the same computation in both (same ops, same order).
        allowed = 2 * gamma(n) * torch.kron(A.abs() @ X.abs(),
                                            torch.eye(d_v, dtype=torch.float64))
        error = (J - expected).abs()
        evidence.margin(-float((error - allowed).max()) / max(float(allowed.max()), 1e-300))
        assert bool((error <= allowed).all()), (
            f"J_V differs from AX ⊗ I by {float(error.max()):.3g}")
        moved = (J2 - expected).abs()
        assert bool((moved <= allowed).all()), (
            f"J_V at another W_V differs from AX ⊗ I by {float(moved.max()):.3g}")
        # the consequence: singular values of AX repeated d_v times (recorded; it follows from
        # the Kronecker structure by sigma(B ⊗ I) = sigma(B) with multiplicity)
        s_J = torch.linalg.svdvals(J)
        s_AX = torch.linalg.svdvals(A @ X).repeat_interleave(d_v)
        evidence.metric("max |sigma(J_V) - sigma(AX) repeated|",
                        float((s_J[: s_AX.numel()] - s_AX).abs().max()))
    return run


test_the_value_jacobian_is_a_kronecker_product = check(CI_VALUE, "property")(
    value_jacobian_check())


# --- CI.3 ----------------------------------------------------------------------------------------

TRIALS, SIZE, TOKENS = 20, 12, 8


def _medians(x_scale: float, kappa=condition_number, schemes=(gaussian_init, conditioned_init)):
    medians = []
    for scheme in schemes:
        values = []
        for trial in range(TRIALS):
            X = x_scale * torch.randn(TOKENS, SIZE, dtype=torch.float64,
                                      generator=torch.Generator().manual_seed(trial))
            blocks = attention_jacobian(X, *scheme(SIZE, SIZE, SIZE, seed=trial))
            values.append(kappa(torch.cat(list(blocks.values()), 1)))
        medians.append(statistics.median(values))
    return medians


def kappa_as_stated_check(kappa=condition_number):
    def run():
        gaussian, conditioned = _medians(1.0, kappa)
        assert conditioned < gaussian, (
            f"median kappa(J): conditioned {conditioned:.4g} is not below Gaussian "
            f"{gaussian:.4g} (n={TOKENS}, d={SIZE}, X ~ N(0, 1), {TRIALS} trials)")
    return run


def kappa_refutation_check(kappa=condition_number):
    def run():
        report = expect_failure(kappa_as_stated_check(kappa))
        rows = []
        for scale in (SIZE ** -0.5, 1.0, 2.0):
            gaussian, conditioned = _medians(scale, kappa)
            rows.append([f"{scale:.4g}", f"{gaussian:.4g}", f"{conditioned:.4g}",
                         f"{conditioned / gaussian:.3f}"])
            evidence.metric(f"X scale {scale:.3g}: median kappa ratio conditioned/Gaussian",
                            conditioned / gaussian)
        evidence.counterexample(report)
        evidence.table("median condition number of J over 20 trials",
                       ["X scale", "Gaussian N(0,1/d)", "conditioned", "ratio"], rows)
    return run


test_the_condition_number_claim_fails_at_unit_scale = check(CI_KAPPA, "refutation")(
    kappa_refutation_check())


# --- training speed ------------------------------------------------------------------------------

SPEED_UP = 0.20   # the secondary summary's lower end


def _speed_result():
    from empirics.conditioned_init import EXPERIMENT, run

    return run(dict(EXPERIMENT.configs["smoke"]), torch.device("cpu"), 0)


def speed_as_stated_check(result_of=_speed_result):
    def run():
        result = result_of()
        m = result.metrics
        gaussian = result.metric("gaussian", "steps_mean")
        conditioned = result.metric("conditioned", "steps_mean")
        saving = 1 - conditioned / gaussian
        assert saving >= SPEED_UP, (
            f"conditioned init reaches the target in {conditioned:.1f} steps against "
            f"{gaussian:.1f} for Gaussian: {100 * saving:.1f}% fewer, not >= "
            f"{100 * SPEED_UP:.0f}% (paired saving {m['steps_saved_mean']:.1f} ± "
            f"{m['steps_saved_std']:.1f} steps, effect size {m['effect_size']:.2f})")
    return run


def speed_refutation_check(result_of=_speed_result):
    def run():
        from empirics.experiment import metric_key

        result = result_of()
        report = expect_failure(speed_as_stated_check(lambda: result))
        for parts in (("gaussian", "steps_mean"), ("conditioned", "steps_mean"),
                      ("steps_saved_mean",), ("steps_saved_std",), ("effect_size",)):
            evidence.metric(metric_key(*parts), result.metric(*parts))
        reached = result.metric("gaussian", "reached"), result.metric("conditioned", "reached")
        assert reached == (1.0, 1.0), (
            "an arm did not reach the target: the comparison of steps is not matched")
        evidence.counterexample(report)
        table = result.tables["steps to the target accuracy"]
        evidence.table("steps to the target accuracy", table["header"], table["rows"])
        if "accuracy" in result.figures:
            evidence.figure(result.figures["accuracy"], "accuracy")
    return run


# about 26 CPU-seconds (12 training runs): beyond this area's share of the default run
test_conditioned_init_is_not_20_percent_faster_on_induction = pytest.mark.slow(
    check(CI_SPEED, "refutation")(speed_refutation_check()))
