r"""Conditioned initialisation for attention (ICLR 2026 submission 25196, OpenReview
cKNOCYPo2W; anonymous).

The abstract was read [V]; the scheme (semi-orthogonal W_Q, W_K, identity W_V) is from a
secondary summary [S]. The Jacobian fact is ours (catalogue CI.2). The catalogue's median
comparison (CI.3) is decided by a bootstrap interval over 400 trials whose inputs and weights
come from independent streams (theorems.intervals). The summarised
20–30% speed-up is not seen on induction heads at CPU size (slow tier, refuted as stated by a
sign-test interval over six seeds).
"""

from __future__ import annotations

import functools

import numpy as np
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
from theorems.claims import SCALING_STUDY_OF, Claim, Source
from theorems.evidence import check, decide, evidence, expect_failure
from theorems.intervals import bootstrap, median_interval, streams, torch_seed
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.proof_statements import Scope
from theorems.proving import coq_proof
from theorems.strategies import seeds
from theorems.trends import trend_check

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
          "(n = 8, d = 12, unit-scale inputs)",
    statement=(LAYER + r"With $n = 8$, $d = d_k = d_v = 12$ and $X$ with i.i.d. "
               r"$\mathcal N(0, 1)$ entries, independent of the weights, the median of "
               r"$\kappa(J) = \sigma_{max}/\sigma_{min}$ over the $nd_v$ singular values of "
               r"$J = [J_Q\,J_K\,J_V]$ is smaller for the conditioned scheme ($W_Q, W_K$ "
               r"semi-orthogonal, $W_V = I$) than for $\mathcal N(0, 1/d)$ entries. Checked "
               r"by sampling: 400 trials, each drawing $X$, the Gaussian weights and the "
               r"conditioned weights from three independent streams ($X$ shared by the two "
               r"schemes), and the 95% percentile-bootstrap interval of the ratio of the two "
               r"medians lies below 1."),
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
    notes=("An earlier version drew X and the weights from one seed per trial (so the "
           "Gaussian W_Q's first rows were X/sqrt(12)) and compared two 20-trial medians "
           "without an interval; its refutation (conditioned above Gaussian) was a "
           "small-sample artefact of that design. Only unit-scale inputs are claimed."),
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
               r"when every head's $W_Q, W_K$ start semi-orthogonal and $W_V$ as a slice of "
               r"the identity than when they start with $\mathcal N(0, 1/d)$ entries, the rest "
               r"of the initialisation and the data stream being the same for the two arms (a "
               r"matched seed budget): the median over training seeds of the per-seed saving "
               r"$1 - s_{cond}/s_{Gauss}$ is at least 0.2. Seeds 0–5 are run, the model, data "
               r"and conditioned weights of a seed from independent streams, and the 95% "
               r"sign-test interval of that median decides."),
    source=(Source(where="Abstract: conditioned initialisation gives faster convergence and "
                         "more stable optimisation", tag="V", **CI),
            Source(where="20–30% faster convergence (a secondary summary; the paper's tasks "
                         "are image classification, object detection, NLP)", tag="S", **CI),
            Source(where="the induction-heads transfer, sizes and seeds, chosen here", tag="D",
                   **CI)),
    kind="dynamics",
    construction="constructions.conditioned_init:conditioned_init",
    refutes="finite-test",
    correction=(r"At this size the median per-seed saving is below 20%: its sign-test "
                r"interval over seeds 0–5 (the smallest and the largest of the six savings, "
                r"coverage $1 - 2^{-5} \approx 97\%$) is about $[-0.11, 0.14]$, median about "
                r"$-0.03$, below 0.2. No speed-up of the "
                r"summarised size is seen on induction heads at $d = 32$. The paper's own "
                r"tasks were not run."),
    notes=("Non-reproduction of the speed-up. Tried: this smoke config (d = 32, 600 steps, "
           "seeds 0-5), the published cpu config (d = 32, 1200 steps, eight training seeds a "
           "seed, seeds 0-2: 185-189 steps to the target for the Gaussian arm against 184-186 "
           "for the conditioned one), and a scaling study over the width (conditioned-init-"
           "scaling: d = 16, 24, 32 at the cpu config, one training seed for each of seeds "
           "0-7). The steps saved are 32.5, -5 and -1.25 (seed means; standard deviations 88, "
           "19, 16), and the per-seed slopes on log2 d have mean -36 steps per doubling, 95% "
           "Student-t interval about [-122, 50], which holds 0: no direction is decided, so no "
           "width at which a 20% saving would appear can be extrapolated. The full config "
           "(d = 64, length 64, two heads) and the paper's own tasks were not run. See "
           "training-dynamics.conditioned-init-scaling."),
)


CI_SCALING = Claim(
    id="training-dynamics.conditioned-init-scaling",
    title="The speed-up of conditioned initialisation on induction heads grows with the width",
    statement=(r"On the induction task of empirics.induction_heads (uniform sequences of "
               r"length 32 over 16 tokens; accuracy on the positions with an earlier "
               r"occurrence), let a two-layer attention-only transformer (width $d$, one head "
               r"per layer, Adam at rate $10^{-2}$, batch 32, at most 1200 steps, evaluation "
               r"every 10 steps on 256 held-out sequences) be trained from two "
               r"initialisations that differ only in every head's $W_Q, W_K, W_V$: "
               r"semi-orthogonal $W_Q, W_K$ and $W_V$ a slice of the identity, against "
               r"$\mathcal N(0, 1/d)$ entries; let $\Delta$ be the Gaussian arm's steps to 95% "
               r"held-out accuracy minus the conditioned arm's. Run at $d \in \{16, 24, 32\}$ "
               r"(the largest is the cpu config of empirics.conditioned_init) with training "
               r"seeds $s = 0, \dots, 7$ (the model, data and conditioned weights of seed $s$ "
               r"from independent children of SeedSequence($s$)), $\Delta$ rises with $d$: "
               r"with $b_s$ the least-squares slope of $\Delta$ against $\log_2 d$ in seed "
               r"$s$, the 95% Student-$t$ interval $\bar b \pm t_{7, 0.975}\,s_b/\sqrt8$ over "
               r"the eight seeds lies above 0. The claim is verified when that interval lies "
               r"above 0, refuted when it lies below 0, and inconclusive when it holds 0."),
    source=(Source(where="Abstract: conditioned initialisation improves the spectral "
                         "properties of attention, can reduce the condition number of its "
                         "Jacobian, and gives faster convergence", tag="V", **CI),
            Source(where="that the speed-up grows with the width, as a Gaussian matrix's "
                         "condition number does (a reading of the abstract's mechanism)",
                   tag="R", **CI),
            Source(where="the scaling study (empirics.conditioned_init_scaling: widths, "
                         "seeds, slope and interval), this project", tag="D", **CI)),
    kind="scaling",
    depends_on=("training-dynamics.conditioned-init-trains-faster",),
    result_dependencies={"training-dynamics.conditioned-init-trains-faster": SCALING_STUDY_OF},
    notes=("Published (conditioned-init-scaling, cpu, seeds 0-7): Δ is 32.5, -5 and -1.25 "
           "steps (seed means) at d = 16, 24, 32, with standard deviations 88, 19 and 16 over "
           "the seeds (one seed saves 230 steps at d = 16); the per-seed slopes have mean -36 "
           "steps per doubling of d, 95% interval about [-122, 50]: it holds 0, so the claim "
           "is inconclusive at these widths. At d = 8 a run did not reach the target within "
           "1200 steps, so that width is not in the study."),
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

# 400 trials: a pilot of 1000 trials from another root seed (20260) put the ratio of medians
# at 0.57 (95% interval 0.51-0.65), so at 400 trials the interval's half-width is about 0.11
# and one reaching 1 would take an estimate about 3 standard errors from the pilot's: the check
# decides with high probability if the pilot is right. 200 trials did not decide from this
# root ([0.62, 1.07]): a median ratio of heavy-tailed condition numbers is noisy.
TRIALS, SIZE, TOKENS = 400, 12, 8
ROOT_SEED = 25196  # the submission's number: the root of every stream below
LEVEL = 0.95


def trial_streams(trials: int = TRIALS) -> tuple[list[tuple], np.random.SeedSequence]:
    """Per trial the streams of (X, the Gaussian weights, the conditioned weights), and the
    bootstrap's stream: children of one SeedSequence, so no two share a generator (drawing
    X and the weights from one seed made the Gaussian W_Q's first rows equal X/sqrt(d))."""
    *trials_, resampling = streams(ROOT_SEED, trials + 1)
    return [tuple(t.spawn(3)) for t in trials_], resampling


def trial_inputs(stream: np.random.SeedSequence) -> torch.Tensor:
    """X (n, d) with i.i.d. N(0, 1) entries, from its own stream."""
    return torch.randn(TOKENS, SIZE, dtype=torch.float64,
                       generator=torch.Generator().manual_seed(torch_seed(stream)))


@functools.lru_cache(maxsize=8)
def _arm_kappas(kappa, scheme, arm: int, trials: int = TRIALS) -> np.ndarray:
    """kappa(J) per trial for one arm: ``scheme``'s weights drawn from the arm's stream
    (``arm`` 0 or 1 of each trial's weight streams), X from the trial's data stream.

    Cached for the run (read-only): a mutant that replaces one arm's scheme rebuilds the check
    around the other arm's values, which are the check's own whenever the check ran first in
    the process, not a second computation of them (each is 400 Jacobians and their SVDs)."""
    per_trial, _ = trial_streams(trials)
    values = []
    for data, *weights in per_trial:
        X = trial_inputs(data)
        blocks = attention_jacobian(X, *scheme(SIZE, SIZE, SIZE,
                                               seed=torch_seed(weights[arm])))
        values.append(kappa(torch.cat(list(blocks.values()), 1)))
    values = np.array(values)
    values.flags.writeable = False
    return values


def _kappas(kappa, schemes, trials: int = TRIALS) -> tuple[list[np.ndarray], object]:
    """kappa(J) per trial for each scheme (paired by X), and the bootstrap's generator."""
    _, resampling = trial_streams(trials)
    return ([_arm_kappas(kappa, scheme, arm, trials) for arm, scheme in enumerate(schemes)],
            np.random.default_rng(resampling))


def _median_ratio(conditioned: np.ndarray, gaussian: np.ndarray) -> np.ndarray:
    return np.median(conditioned, -1) / np.median(gaussian, -1)


def kappa_check(kappa=condition_number, schemes=(gaussian_init, conditioned_init)):
    def run():
        (gaussian, conditioned), rng = _kappas(kappa, schemes)
        evidence.cases(TRIALS)
        evidence.metric("median kappa(J), Gaussian", float(np.median(gaussian)))
        evidence.metric("median kappa(J), conditioned", float(np.median(conditioned)))
        # the medians of the two laws of kappa(J), compared through their ratio: a percentile
        # bootstrap over the trials (resampled in pairs, X being shared), which a point
        # estimate from 20 trials was not; an interval containing 1 ends the check inconclusive
        interval = bootstrap(_median_ratio, conditioned, gaussian, rng=rng, level=LEVEL)
        side = decide("median kappa(J) ratio conditioned/Gaussian", interval, threshold=1.0)
        assert side == "below", (
            f"the median kappa(J) of the conditioned scheme is above the Gaussian one: ratio "
            f"{interval.estimate:.3g}, {LEVEL:.0%} interval [{interval.low:.3g}, "
            f"{interval.high:.3g}] (n={TOKENS}, d={SIZE}, X ~ N(0, 1), {TRIALS} trials)")
    return run


test_the_conditioned_scheme_lowers_the_median_condition_number = check(CI_KAPPA, "numeric")(
    kappa_check())


# --- training speed ------------------------------------------------------------------------------

SPEED_UP = 0.20   # the secondary summary's lower end


def _speed_result():
    from empirics.conditioned_init import EXPERIMENT, run

    return run(dict(EXPERIMENT.configs["smoke"]), torch.device("cpu"), 0)


def _savings(result) -> np.ndarray:
    """Per seed: 1 - (conditioned steps) / (Gaussian steps) to the target accuracy."""
    from empirics.experiment import metric_key

    seeds = int(result.metric("seeds"))
    steps = {arm: np.array([result.metrics[metric_key(arm, "steps", ("seed", k))]
                            for k in range(seeds)]) for arm in ("gaussian", "conditioned")}
    return 1 - steps["conditioned"] / steps["gaussian"]


def _saving_interval(result):
    # the median of the per-seed savings, by the sign test: distribution-free, and with six
    # seeds its 95% interval is [min, max] (coverage 1 - 2/64); a mean over six seeds with a
    # guessed spread would decide nothing more honestly
    return median_interval(_savings(result), LEVEL)


def speed_as_stated_check(result_of=_speed_result):
    def run():
        result = result_of()
        interval = _saving_interval(result)
        side = decide("median per-seed step saving", interval, threshold=SPEED_UP)
        assert side == "above", (
            f"the median per-seed saving of steps to the target is below "
            f"{100 * SPEED_UP:.0f}%: estimate {100 * interval.estimate:.1f}%, {LEVEL:.0%} "
            f"sign-test interval [{100 * interval.low:.1f}%, {100 * interval.high:.1f}%] "
            f"over {interval.trials} seeds")
    return run


def speed_refutation_check(result_of=_speed_result):
    def run():
        from empirics.experiment import metric_key

        result = result_of()
        reached = result.metric("gaussian", "reached"), result.metric("conditioned", "reached")
        assert reached == (1.0, 1.0), (
            "an arm did not reach the target: the comparison of steps is not matched")
        # recorded here: expect_failure below runs the statement without a recorder
        decide("median per-seed step saving", _saving_interval(result), threshold=SPEED_UP)
        report = expect_failure(speed_as_stated_check(lambda: result))
        for parts in (("gaussian", "steps_mean"), ("conditioned", "steps_mean"),
                      ("steps_saved_mean",), ("steps_saved_std",), ("effect_size",)):
            evidence.metric(metric_key(*parts), result.metric(*parts))
        evidence.cases(int(result.metric("seeds")))
        evidence.counterexample(report)
        table = result.tables["steps to the target accuracy"]
        evidence.table("steps to the target accuracy", table["header"], table["rows"])
        if "accuracy" in result.figures:
            evidence.figure(result.figures["accuracy"], "accuracy")
    return run


# about 26 CPU-seconds (12 training runs): beyond this area's share of the default run
test_conditioned_init_is_not_20_percent_faster_on_induction = pytest.mark.slow(
    check(CI_SPEED, "refutation")(speed_refutation_check()))


# --- the speed-up against the width ------------------------------------------------------------

SAVING_STUDY, SAVING = "conditioned-init-scaling", "steps_saved_mean"

# the published study's slope of the steps saved on log2 d, decided against 0
test_the_speed_up_grows_with_the_width = check(CI_SCALING, "empirical")(
    trend_check(SAVING_STUDY, SAVING, "up"))


# --- proved ---
# Coq, MathComp: the Kronecker form of the W_V block in exact arithmetic.
test_value_jacobian_proved = check(CI_VALUE, "proved")(
    coq_proof("proofs/coq/training_dynamics_value_jacobian.v", theorem="value_jacobian",
              scope=Scope("part", "vec_r(A X (W_V + H)) = vec_r(A X W_V) + (A X (x) I_{d_v}) "
                          "vec_r(H) for every H, so J_V = AX (x) I_{d_v} (row-major vec_r and "
                          "Kronecker indices), independent of W_V, for every n, d, d_v, X, W_V "
                          "and every A (the softmax is one), over any commutative ring; the "
                          "singular values and the closing clause follow from it and are not "
                          "formalised")))
