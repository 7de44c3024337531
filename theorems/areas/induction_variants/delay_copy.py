r"""Delay copy (Nevermann & Gros 2026, arXiv:2609.11913): the task, the constant source–target
offset, and the induction-copier baseline.

The paper was read in full [V] (task, models, findings); it has no code link. The segment layout
of the generator is our formalisation of its Section 2 [R]; the offset identity, the
fixed-offset copier and the induction-copier accuracy are ours [D]. The catalogue's
approximation :math:`(1-1/N)^n + (1 - (1-1/N)^n)/N` is refined here to an exact formula, which
exhaustive enumeration confirms.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.delay_copy import (
    DelayCopyTask,
    approximate_induction_accuracy,
    fixed_offset_copier,
    induction_accuracy,
    induction_copier,
    oracle_copier,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget
from theorems.proof_statements import Scope
from theorems.proving import coq_proof

NG = {"arxiv": "2609.11913", "ref": "Nevermann & Gros (2026)"}
CONSTRUCTION = "constructions.delay_copy"
TASK_TEXT = (
    r"In the delay-copy task (data tokens $0..N-1$, control tokens R, C, S, copy length $m$), a "
    r"C pair at positions $c_1 < c_2 = c_1 + d_C$ follows $m$ source tokens "
    r"$s_k$ at $c_1 - m + k - 1$, has only R-task tokens (R, then $g = d_C - 2$ random data "
    r"tokens) between its C's, and is followed by the paste $s_1..s_m$; S pairs paste only "
    r"the even $s_k$. ")

DG_TASK = Claim(
    id="induction-variants.dg-task",
    title="The delay-copy generator's targets are what a content-based copier pastes",
    statement=(TASK_TEXT +
        r"For every sequence of the generator, the targets (the next token at the masked "
        r"positions $i \ge$ skip) are exactly the predictions of the oracle copier, which pairs "
        r"control tokens of one kind in order and pastes after the second the $m$ tokens "
        r"before the first (S: the even ones), wherever those fall at or after the skip."),
    source=(Source(where="Section 2 (tasks R, C, S; masks)", tag="V", **NG),
            Source(where="the segment layout of the generator (our formalisation)", tag="R",
                   **NG)),
    kind="identity",
    construction=f"{CONSTRUCTION}:oracle_copier",
)

DG_OFFSET = Claim(
    id="induction-variants.dg-offset",
    title="The source–target offset is d_C + m at every paste step, so a relative-position "
          "copier works at one distance only",
    statement=(TASK_TEXT +
        r"For every C pair, paste step $k \in \{1..m\}$ predicts at $c_2 + k - 1$ the token "
        r"at $c_1 - m + k - 1$: the offset is $d_C + m$ for every $k$. Hence the copier "
        r"$f_d(i) = x_{i - d - m}$ is right at every step of every pair with $d_C = d$; with "
        r"$d_C = d + 1$ it is wrong at step $m$ (it reads the C token); with $d_C = d - 1$ it "
        r"is right at every step iff $x_{c_1 - m - 1} = s_1 = \dots = s_m$."),
    source=(Source(where="Section 5: the model must resolve the distance to the preceding C "
                   "or S token", tag="V", **NG),
            Source(where="the offset identity and the fixed-offset copier (this project)",
                   tag="D", **NG)),
    kind="identity",
    construction=f"{CONSTRUCTION}:fixed_offset_copier",
    depends_on=("induction-variants.dg-task",),
    result_dependencies={
        "induction-variants.dg-task":
            "the targets scored are the generator's, which that claim shows are what a content-"
            "based copier pastes; the checks score against DelayCopyTask (an oracle), not "
            "oracle_copier",
    },
)

DG_INDUCTION = Claim(
    id="induction-variants.dg-induction-baseline",
    title="An induction-head copier's accuracy decays geometrically with the gap, exactly",
    statement=(TASK_TEXT +
        r"With i.i.d. uniform data tokens, $p = 1/N$, $q = 1 - p$ and $n = m - 1 + g$, the "
        r"copier that at paste step $k \ge 2$ (teacher forced) outputs the successor of the "
        r"most recent earlier occurrence of its current token is right with probability "
        r"$\mathrm{acc}_k = q^n + p(1 - q^n) - p^2\sum_{r \in B_k} q^r$, "
        r"$B_k = \{k - 2 + g,\ n - 1\} \cup \{k - 2 : g \ge 1\}$; the mean over "
        r"$k = 2..m$ is within $3p^2$ of the catalogue's $q^n + (1 - q^n)/N$."),
    source=(Source(where="Section 2 (the task); the copier is not in the paper", tag="V", **NG),
            Source(where="the exact accuracy formula (this project; the catalogue's leading "
                   "order refined)", tag="D", **NG)),
    kind="identity",
    construction=f"{CONSTRUCTION}:induction_accuracy",
    depends_on=("induction-variants.dg-task",),
    result_dependencies={
        "induction-variants.dg-task":
            "the targets scored are the generator's, which that claim shows are what a content-"
            "based copier pastes; the checks score against DelayCopyTask (an oracle), not "
            "oracle_copier",
    },
)


DG_GD = Claim(
    id="induction-variants.dg-gd-small-models",
    title="In small models, explicit positional encodings learn delay copy in distribution "
          "better than NoPE",
    statement=(TASK_TEXT +
        r"In the one run with seed 0 (the training and held-out sequences and the three "
        r"models' initialisation drawn from seed 0; a statement about that run, not about the "
        r"law over seeds), small decoders trained on the C task (smoke size: $N = 16$, "
        r"$m = 4$, $T = 64$, $d_C \in [6, 10]$, 2 layers, width 32, 4 heads, 300 AdamW steps) "
        r"reach a higher in-distribution accuracy at paste steps $k \ge 2$ (the mean over "
        r"$d_C \in \{6, 8, 10\}$ of the accuracy on 32 held-out sequences per distance) with "
        r"RoPE and "
        r"with ALiBi than without positional encoding (NoPE)."),
    source=(Source(where="Appendix, Fig. 7: NoPE may fail to learn the C task even in "
                   "distribution in small models, while ALiBi and RoPE stay stable", tag="V",
                   **NG),
            Source(where="the smoke configuration (this project)", tag="D", **NG)),
    kind="construction",
    construction=f"{CONSTRUCTION}:DelayCopyTask",
    depends_on=("induction-variants.dg-induction-baseline", "induction-variants.dg-task"),
    notes=("Measured (seed 0, smoke): in distribution RoPE 0.76, ALiBi 0.54, NoPE 0.37; out "
           "of distribution (d_C in 2..30 outside 6..10) RoPE 0.08, ALiBi 0.19, NoPE 0.11, "
           "all below the induction copier's exact accuracy. The paper's main finding, NoPE "
           ">= ALiBi >= RoPE out of distribution at 8 layers x 512, is not tested at this size "
           "(the full config is for a GPU). One seed only; the check is marked slow "
           "(about 45 CPU-seconds when it trains; it reads the published seed 0 while that is "
           "current, well under a second).\n\n"
           "Scaling study (issue 36; induction-variants.dg-nope-ood-scaling). This run, "
           "published as the delay-copy cpu config with seeds 0-2 (the check reads seed 0), "
           "gives out-of-distribution accuracies of RoPE 0.08, 0.07, 0.08, ALiBi 0.18, 0.24, "
           "0.18 and NoPE 0.11, 0.13, 0.14, so the paper's order NoPE >= ALiBi >= RoPE out of "
           "distribution is not reproduced at this size (ALiBi leads). NoPE trained alone for "
           "300, 600, 1200 and 2400 steps reaches 0.113, 0.118, 0.154, 0.167 (seed 0), 0.128, "
           "0.119, 0.152, 0.169 (seed 1) and 0.142, 0.124, 0.144, 0.178 (seed 2) out of "
           "distribution: the mean least-squares slope on log2 steps is 0.016 per doubling, "
           "95% Student-t interval [0.008, 0.024] over the three seeds, so it rises; in "
           "distribution it rises faster (0.10 per doubling, [0.03, 0.17]; 0.57-0.64 at 2400 "
           "steps). It stays below the induction copier's exact accuracy over the same "
           "distances (0.38), and no crossing size is extrapolated (the paper gives no level). "
           "RoPE and ALiBi were not trained longer, and the paper's 8 layers x 512 were not "
           "tried on this CPU."),
    result_dependencies={
        "induction-variants.dg-induction-baseline":
            "the induction copier's exact accuracy is drawn beside the trained models' (a "
            "reported curve, not asserted); the check reads the published run where it stands "
            "for the CPU run, and then does not evaluate the formula itself",
        "induction-variants.dg-task":
            "the targets scored are the generator's, which that claim shows are what a content-"
            "based copier pastes; the checks score against DelayCopyTask (an oracle), not "
            "oracle_copier",
    },
)


# --- tasks -------------------------------------------------------------------------------

@st.composite
def dg_tasks(draw):
    """A small task: N in [2, 40], m in [1, 8], d_C range within [1, 30], T in [16, 128]."""
    lo = draw(st.integers(1, 20))
    return DelayCopyTask(n_data=draw(st.integers(2, 40)), copy_len=draw(st.integers(1, 8)),
                         distances=(lo, lo + draw(st.integers(0, 10))),
                         length=draw(st.integers(16, 128)),
                         kinds=draw(st.sampled_from([("C",), ("S",), ("C", "S")])),
                         skip=draw(st.integers(0, 18)))


PINNED_TASKS = (DelayCopyTask(), DelayCopyTask(n_data=2, copy_len=1, distances=(1, 1), length=16,
                                               skip=0),
                DelayCopyTask(n_data=16, copy_len=4, distances=(6, 10), length=64,
                              kinds=("C", "S")))


def task_check(copier=oracle_copier):
    @budget(0.3)
    @given(task=dg_tasks(), seed=st.integers(0, 2 ** 16))
    @example(task=PINNED_TASKS[0], seed=0)
    @example(task=PINNED_TASKS[1], seed=1)
    @example(task=PINNED_TASKS[2], seed=2)
    def run(task, seed):
        batch = task.sample(3, np.random.default_rng(seed))
        predicted = copier(batch.tokens, task)
        predicted[:, : task.skip] = -1  # the first positions are never scored
        evidence.metric("targets", int(batch.mask.sum()), worse="lower")
        assert torch.equal(predicted, batch.targets), "the copier and the targets disagree"
    return run


test_targets_are_the_oracle_copy = check(DG_TASK, "property")(task_check())


def _sample_at(task, batch, generator, distance):
    return task.sample(batch, generator, distance=distance)


def offset_check(copier=fixed_offset_copier, sample=_sample_at):
    """The generator's offset, then the fixed-offset copier at d_C = d, d + 1 and d - 1."""
    @budget(0.3)
    @given(task=dg_tasks(), seed=st.integers(0, 2 ** 16), shift=st.sampled_from([-1, 0, 1]))
    @example(task=PINNED_TASKS[0], seed=0, shift=0)
    @example(task=PINNED_TASKS[0], seed=0, shift=1)
    @example(task=PINNED_TASKS[0], seed=0, shift=-1)
    @example(task=PINNED_TASKS[1], seed=3, shift=-1)  # N = 2, m = 1: constant blocks occur
    def run(task, seed, shift):
        tuned = task.distances[0] + 1  # >= 2, so d_C = tuned - 1 >= 1 exists
        distance = tuned + shift
        batch = sample(task, 2, np.random.default_rng(seed), distance)
        tokens = batch.tokens
        predicted = copier(tokens, task, tuned)
        m, T = task.copy_len, task.length
        checked = 0
        for b, pairs in enumerate(batch.pairs):
            for pair in pairs:
                if pair.kind != "C" or pair.second + m > T - 1 or pair.first - m - 1 < 0:
                    continue  # a pair cut by the window, or without a token before its source
                steps = range(1, m + 1)
                assert all(int(tokens[b, pair.second + k]) == int(tokens[
                    b, pair.second + k - 1 - (pair.distance + m)]) for k in steps), (
                    "the offset is not d_C + m at every step")
                right = [int(predicted[b, pair.second + k - 1]) == int(tokens[b, pair.second + k])
                         for k in steps]
                where = f"d_C = {distance}, copier tuned to {tuned}"
                if shift == 0:
                    assert all(right), f"{where}: a step is wrong at d_C = d"
                elif shift == 1:
                    assert not right[-1] and int(predicted[b, pair.second + m - 1]) == task.C, (
                        f"{where}: step m does not read the C token at d_C = d + 1")
                else:
                    block = tokens[b, pair.first - m - 1: pair.first].tolist()
                    assert all(right) == (len(set(block)) == 1), (
                        f"{where}: exact = {all(right)} at d_C = d - 1, but the block "
                        f"x_(c1-m-1), s_1..s_m is {'' if len(set(block)) == 1 else 'not '}"
                        "constant")
                checked += 1
        evidence.cases(checked)
    return run


test_offset_is_constant_and_fixed_copier_is_local = check(DG_OFFSET, "property")(offset_check())


# --- the induction copier ----------------------------------------------------------------

EXHAUSTIVE_SIZES = ((2, 2, 0), (2, 3, 1), (3, 3, 2), (2, 4, 3), (3, 2, 1), (2, 5, 0), (4, 3, 1))


def enumerated_steps(copier, n_data: int, copy_len: int, gap: int) -> dict[int, Fraction]:
    """The copier's accuracy at each step k = 2..m over every (source, gap) in [N]^{m+g}."""
    import itertools

    task = DelayCopyTask(n_data=n_data, copy_len=copy_len, distances=(gap + 2, gap + 2),
                         length=64, skip=0)
    rows = [[task.R, *v[:copy_len], task.C, task.R, *v[copy_len:], task.C, *v[:copy_len]]
            for v in itertools.product(range(n_data), repeat=copy_len + gap)]
    tokens = torch.tensor(rows)
    predicted = copier(tokens, task)
    second = copy_len + gap + 3
    return {k: Fraction(int((predicted[:, second + k - 1] == tokens[:, second + k]).sum()),
                        len(rows)) for k in range(2, copy_len + 1)}


def step_accuracy(n_data: int, copy_len: int, gap: int, k: int) -> Fraction:
    """The statement's acc_k, written here: q^n + p(1 - q^n) - p^2 sum_{r in B_k} q^r."""
    p = Fraction(1, n_data)
    q, n = 1 - p, copy_len - 1 + gap
    bad = {k - 2 + gap, n - 1} | ({k - 2} if gap >= 1 else set())
    return q ** n + p * (1 - q ** n) - p * p * sum(q ** r for r in bad)


def catalogue_accuracy(n_data: int, copy_len: int, gap: int) -> Fraction:
    """The catalogue's q^n + (1 - q^n)/N, exactly."""
    q = 1 - Fraction(1, n_data)
    n = copy_len - 1 + gap
    return q ** n + (1 - q ** n) / n_data


# The 3p^2 sentence on a grid up to the paper's N = 128, m = 10 (the enumerated sizes alone have
# N <= 4, where 3p^2 >= 0.19 is loose): exact rationals, so no rounding enters.
APPROXIMATION_GRID = [(N, m, g) for N in (2, 3, 4, 8, 16, 128) for m in (2, 3, 5, 10)
                      for g in (0, 1, 2, 5, 20, 80)]


def exhaustive_check(copier=induction_copier, formula=induction_accuracy,
                     sizes=EXHAUSTIVE_SIZES, step=step_accuracy, approximation=catalogue_accuracy):
    """Every source and gap in [N]^(m+g): the copier's accuracy at each step k against acc_k,
    and its mean against ``formula`` (the construction's); then the mean against the catalogue's
    approximation, within 3p^2, on the enumerated sizes and APPROXIMATION_GRID."""
    def run():
        for n_data, copy_len, gap in sizes:
            steps = enumerated_steps(copier, n_data, copy_len, gap)
            evidence.cases(n_data ** (copy_len + gap))
            for k, enumerated in steps.items():
                assert enumerated == step(n_data, copy_len, gap, k), (
                    f"N={n_data}, m={copy_len}, g={gap}, k={k}: enumeration {enumerated} != "
                    f"acc_k {step(n_data, copy_len, gap, k)}")
            mean, exact = sum(steps.values()) / len(steps), formula(n_data, copy_len, gap)
            assert mean == exact, (f"N={n_data}, m={copy_len}, g={gap}: enumeration {mean} != "
                                   f"formula {exact}")
        for n_data, copy_len, gap in [*sizes, *APPROXIMATION_GRID]:
            error = abs(induction_accuracy(n_data, copy_len, gap)
                        - approximation(n_data, copy_len, gap))
            evidence.ratio(float(error * n_data ** 2 / 3))
            assert error <= Fraction(3, n_data ** 2), (
                f"N={n_data}, m={copy_len}, g={gap}: approximation error {float(error):.3g} "
                f"> 3p^2")
    return run


test_induction_accuracy_by_enumeration = check(DG_INDUCTION, "exhaustive")(exhaustive_check())

MC_GAPS, MC_SEQUENCES, MC_SIGMAS = (5, 40, 80), 100, 5.0
SLOW_MC_GAPS, SLOW_MC_SEQUENCES = (0, 5, 10, 20, 40, 80), 800


def monte_carlo_check(copier=induction_copier, formula=induction_accuracy, gaps=MC_GAPS,
                      sequences=MC_SEQUENCES):
    """The generator at the paper's N = 128, m = 10, T = 256: the copier's accuracy at every
    C step k >= 2 against the formula, within 5 standard errors (the standard error of the mean
    over sequences, each sequence's steps averaged: sequences are independent)."""
    def run():
        rows = []
        for gap in gaps:
            task = DelayCopyTask(distances=(gap + 2, gap + 2))
            batch = task.sample(sequences, np.random.default_rng(gap))
            predicted, tokens = copier(batch.tokens, task).numpy(), batch.tokens.numpy()
            per_sequence = []
            steps = np.arange(2, task.copy_len + 1)
            for b, pairs in enumerate(batch.pairs):
                # complete pairs only: a pair cut by the window keeps its early, harder steps
                hits = [predicted[b, p.second + steps - 1] == tokens[b, p.second + steps]
                        for p in pairs if p.second + task.copy_len < task.length]
                if hits:
                    per_sequence.append(np.mean(hits))
            mean = float(np.mean(per_sequence))
            se = float(np.std(per_sequence, ddof=1) / math.sqrt(len(per_sequence)))
            exact = float(formula(task.n_data, task.copy_len, gap))
            evidence.cases(len(per_sequence))
            evidence.margin(MC_SIGMAS * se - abs(mean - exact))
            rows.append([gap, round(mean, 4), round(se, 4), round(exact, 4),
                         round(approximate_induction_accuracy(task.n_data, task.copy_len, gap),
                               4)])
            assert abs(mean - exact) <= MC_SIGMAS * se, (
                f"g={gap}: Monte Carlo {mean:.4f} ± {se:.4f} vs formula {exact:.4f}")
        evidence.table("induction copier accuracy (N = 128, m = 10)",
                       ["g", "Monte Carlo", "standard error", "exact formula", "leading order"],
                       rows)
        _plot(rows)
    return run


def _plot(rows):
    from empirics.plots import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.4))
    gaps = np.arange(0, 101)
    ax.plot(gaps, [float(induction_accuracy(128, 10, int(g), exact=False)) for g in gaps],
            label="exact formula")
    ax.plot(gaps, [approximate_induction_accuracy(128, 10, int(g)) for g in gaps], ":",
            label="leading order")
    ax.errorbar([r[0] for r in rows], [r[1] for r in rows], yerr=[2 * r[2] for r in rows],
                fmt="o", label="generator + copier (±2 s.e.)")
    ax.set_xlabel("gap g = d_C - 2")
    ax.set_ylabel("accuracy at steps k ≥ 2")
    ax.legend(fontsize=8)
    evidence.figure(fig, "induction-baseline")


test_induction_accuracy_by_monte_carlo = check(DG_INDUCTION, "numeric")(monte_carlo_check())
test_induction_accuracy_by_large_monte_carlo = pytest.mark.slow(check(DG_INDUCTION, "numeric")(
    monte_carlo_check(gaps=SLOW_MC_GAPS, sequences=SLOW_MC_SEQUENCES)))


# --- gradient descent ------------------------------------------------------------------------


def gd_check(seed: int = 0, *, fresh: bool = False, **overrides):
    """Train (or, unless ``fresh``, read the current published seed of) the experiment's
    ``cpu`` config with ``overrides``; RoPE and ALiBi must beat NoPE in distribution. A mutant
    that patches the experiment's code at run time passes ``fresh=True``: the published seed
    stands only for the code as written."""
    def run():
        from empirics.delay_copy import DELAY_COPY
        from empirics.experiment import metric_key
        from empirics.experiment.published import reuse_or_run

        result = (DELAY_COPY("cpu", device="cpu", seed=seed, **overrides) if fresh
                  else reuse_or_run(DELAY_COPY, "cpu", seed=seed, **overrides))
        metrics = result.metrics
        for scheme in result.config["schemes"]:
            for key in ("in_distribution", "out_of_distribution", "P"):
                evidence.metric(f"{scheme} {key}", metrics[metric_key(scheme, key)], worse="lower")
        evidence.table("accuracy at steps k >= 2", **result.tables["accuracy at steps k >= 2"])
        for name, fig in result.figures.items():
            evidence.figure(fig, name)
        nope = result.metric("none", "in_distribution")
        for scheme in ("rope", "alibi"):
            gap = result.metric(scheme, "in_distribution") - nope
            evidence.margin(gap)
            assert gap > 0, f"{scheme} in distribution {gap + nope:.3f} <= NoPE's {nope:.3f}"
    return run


test_gd_explicit_encodings_beat_nope_in_distribution = pytest.mark.slow(
    check(DG_GD, "empirical")(gd_check()))


# --- proved ---
# Coq (natural-number positions, lia): the offset and the three copier clauses, for every m,
# c_1, d_C and sequence with a token before the source.
test_offset_proved = check(DG_OFFSET, "proved")(
    coq_proof("proofs/coq/induction_variants_dg_offset.v", theorem="dg_offset",
              scope=Scope("statement", "for every sequence, m >= 1, c_1 >= m + 1 and d_C, with "
                          "the paste x_{c_2 + k} = s_k = x_{c_1 - m + k - 1} and s_m a data token "
                          "(not the C token): the offset d_C + m at every step k; f_d right at "
                          "every step when d_C = d; wrong at step m, reading the C token, when "
                          "d_C = d + 1; and right at every step iff x_{c_1 - m - 1} = s_1 = ... = "
                          "s_m when d_C = d - 1. The task's generator (R-task tokens between the "
                          "C's, S pairs) enters only through these positions")))
