r"""Spatial induction heads (Kazemian et al. 2026, arXiv:2610.09124): the gather, the Bayesian
match, exactness on deterministic rules, and the temperatures' margin conditions.

Only the abstract was readable [V]: it states that two-layer gather-and-match circuits exist,
that the gather's positional dimension depends only on the neighbourhood and the spatial
dimension, and that the match layer implements Bayesian counting. The task formalisation is
ours [R] and every construction detail, bound and temperature is ours [D]
(:mod:`constructions.spatial_induction`). The catalogue derived the :math:`4D + 5` count for
:math:`D = 2` without running it; the property checks below run it, and it holds.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.spatial_induction import (
    REQUIRED_LOSS_SLACK,
    TIME_PERIOD,
    CellularAutomaton,
    gather_temperatures,
    neighbourhood,
    positional_dim,
    spatial_induction_circuit,
    temperatures_for,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, decide, evidence
from theorems.intervals import Interval
from theorems.numerics import gamma, unit_roundoff
from theorems.profiles import budget

SIH = {"arxiv": "2610.09124", "ref": "Kazemian, Xu, Thickstun et al. (2026)"}
CONSTRUCTION = "constructions.spatial_induction"
ABSTRACT = Source(where="Abstract (the only part readable)", tag="V", **SIH)
TASK_TEXT = (
    r"A cellular automaton on the torus $(\mathbb{Z}/L)^D$, $D \in \{1,2\}$, $V = L^D$, states "
    r"$\{0..k-1\}$, neighbourhood $\nu$ (offsets distinct mod $L$), horizon $T$, is read "
    r"row-major after a BOS: position $p = tV + \mathrm{index}(i)$, $P = TV$. ")

SIH_MARGINS = Claim(
    id="induction-variants.sih-margins",
    title="The gather temperatures make every wrong key lose at least ln P + 29",
    statement=(
        r"For $V \ge 1$, $L \ge 3$, $P \ge 1$, let $M_0 = \ln P + 29$, $M = M_0 + 1$, "
        r"$\lambda = M/(3V)$, $\beta_t = (2\lambda V + M)/(1 - \cos(2\pi/3))$ and "
        r"$\beta_s = (2\lambda V + M)/(1 - \cos(2\pi/L))$. Then (i) $3V\lambda \ge M_0$ (same "
        r"cell three slabs back), (ii) $\beta_t(1 - \cos(2\pi/3)) - \lambda(2V - 1) \ge M_0$ "
        r"(wrong time phase), (iii) $\beta_s(1 - \cos(2\pi/L)) - \lambda(V - 1) \ge M_0$ "
        r"(wrong coordinate), each with slack at least 1, and the builder's float64 "
        r"temperatures, read as exact reals, satisfy (i)–(iii) for $D \in \{1,2\}$, "
        r"$3 \le L \le 64$, every $P \le 256$ and 61 log-spaced $P \le 10^6$."),
    source=Source(where="temperatures and margin conditions derived here", tag="D", **SIH),
    kind="bound",
    construction=f"{CONSTRUCTION}:gather_temperatures",
)

SIH_GATHER = Claim(
    id="induction-variants.sih-gather",
    title="A (4D + 5)-feature positional gather routes every query to each true neighbour",
    statement=(TASK_TEXT +
        r"The gather layer of $\texttt{spatial\_induction\_circuit}$ uses $4D + 5$ positional "
        r"features plus a constant (own and next cell: a circle per axis and a period-3 time "
        r"circle each; the scalar $p$), for every $L$ and $T$. For every cell $n$ in slab "
        r"$t \ge 1$ and every $\delta \in \nu$, the next-cell head for $\delta$ at the query "
        r"predicting $n$, and the own-cell head for $\delta$ at the query holding $n$, put "
        r"softmax mass at least $1/(1 + e^{-29})$ on the neighbour $(t-1, i_n + \delta)$."),
    source=(Source(where="Abstract: layer 1 reconstructs the neighbourhood; two explicit "
                   "gathers whose positional dimension depends only on the neighbourhood and "
                   "D", tag="V", **SIH),
            Source(where="these features, scores and the 4D + 5 count (this project)", tag="D",
                   **SIH)),
    kind="construction",
    construction=f"{CONSTRUCTION}:spatial_induction_circuit",
    depends_on=("induction-variants.sih-margins",),
)

SIH_BAYES = Claim(
    id="induction-variants.sih-bayes",
    title="The match layer is Bayesian counting: KL to the Dirichlet posterior predictive "
          "is at most the derived leak",
    statement=(TASK_TEXT +
        r"For a rule with Dirichlet($\alpha$) prior, $A = \sum_a \alpha_a$, let "
        r"$P^*(a) = (N_c(a) + \alpha_a)/(N_c + A)$ for a cell of slab $\ge 1$ with "
        r"configuration $c$, where $N_c(a)$ counts earlier cells of slab $\ge 1$ with "
        r"configuration $c$ and value $a$. With one-hot configurations the match layer's output "
        r"(keys: $\beta\langle\mathrm{next}, \mathrm{cur}\rangle - \beta 1[j < V]$, values "
        r"$e_{x_j}$; BOS: score $\beta|\nu| + \ln A$, value $\alpha/A$) equals $P^*$ up to "
        r"mismatching keys of total weight $\le n e^{-\beta}/(N_c + A)$ ($n$ keys). End to "
        r"end, $\mathrm{KL}(P^* \| f) \le 2\eta + \ln(1 + n e^{2\eta - \beta}/(N_c + A))$, "
        r"$\eta = 4\beta|\nu|\varepsilon$, $\varepsilon = 1 - 1/(1 + e^{-29})$ (plus float64 "
        r"rounding)."),
    source=(Source(where="Abstract: the matching layer implements Bayesian counting; the "
                   "circuit approximates the posterior arbitrarily closely", tag="V", **SIH),
            Source(where="the task formalisation: the torus, the Dirichlet prior and the "
                         "row-major flattening (reconstructed; the paper's body was not read)",
                   tag="R", **SIH),
            Source(where="the match weights, BOS prior sink and leak bound (this project)",
                   tag="D", **SIH)),
    kind="construction",
    construction=f"{CONSTRUCTION}:spatial_induction_circuit",
    depends_on=("induction-variants.sih-gather",),
)

SIH_DETERMINISTIC = Claim(
    id="induction-variants.sih-deterministic",
    title="On deterministic rules the circuit is exact at every cell whose configuration was "
          "seen",
    statement=(TASK_TEXT +
        r"For a deterministic rule $\rho$ and the circuit with $\alpha_a = 0.1$, at every cell "
        r"of slab $\ge 1$ whose configuration occurred at an earlier cell of slab $\ge 1$, "
        r"$\arg\max_a f_a$ is the true next state $\rho(c)$."),
    source=(Source(where="Abstract: predicts exactly for deterministic rules", tag="V", **SIH),
            Source(where="the argmax margin under the leak bound (this project)", tag="D",
                   **SIH)),
    kind="construction",
    construction=f"{CONSTRUCTION}:spatial_induction_circuit",
    depends_on=("induction-variants.sih-bayes",),
)


NOTES_GD = (
    "Measured (seed 0, this CPU): KL to Bayes 0.160 (two layers) vs 0.197 (one layer) vs "
    "0.625 (prior only); paired gain 0.038, SE 0.010 (3.7 SE). Controls, same config: cells "
    "shuffled within each training sequence, gain 0.0005 (SE 0.006); layer-1 queries and keys "
    "frozen at zero, gain 0.001 (SE 0.012): both fail. NOT reproduced, recorded only: (a) the "
    "gather: layer-1 mass on a single true neighbour (best head per offset) stays at chance "
    "(0.06-0.08) in every run; (b) the match: the layer-2 mass on earlier same-configuration "
    "cells is 0.79 against 0.27 for uniform attention, but 0.79 also with layer 1 frozen, so "
    "it is not evidence of matching (at L = 4 with near-deterministic rules the slabs fall "
    "into short cycles, and attending a fixed distance back finds the same configuration); "
    "(c) the abstract's < 0.005 nats (0.16 here). Search that led here (seed 0, 2,500-3,750 "
    "steps each, KL vs prior-only): the old smoke model (L = 6, T = 5, 4 + 1 heads, d = 32) "
    "at alpha = 0.1: 0.27 vs 0.43, gather rising slowly 0.04 -> 0.22; lr 1e-2: 0.31; L = 5, "
    "T = 8: 0.29 vs 0.46; with LayerNorm: 0.29; alpha = 0.01: 0.27 vs 0.62 (one layer 0.375); "
    "the catalogue's config (L = 8, T = 8, alpha = 1, d = 64) costs 20 CPU-s per 250 steps "
    "and was at 0.108 vs 0.132 after 250. At alpha = 1 the in-context gain is small (prior-"
    "only KL 0.08-0.12), which is why 400 steps learned nothing visible. Only the abstract "
    "was readable, so the paper's model size, steps and rule prior are unknown. The check is "
    "slow when it trains (about 40 CPU-s), instant on the current published seed 0.\n\n"
    "Scaling study (issue 36; induction-variants.sih-gather-scaling). This configuration, "
    "published as the spatial-induction cpu config with seeds 0-2 (the run the check now "
    "reads; the seed-0 numbers above are from an earlier run), gives KL gains 0.051, 0.086 and "
    "0.058 and gather masses 0.110, 0.102 and 0.112. Trained for 1000, 2000 and 4000 steps, "
    "the gather mass is 0.110, 0.104, 0.090 (seed 0), 0.102, 0.096, 0.102 (seed 1) and 0.112, "
    "0.123, 0.107 (seed 2): the mean least-squares slope on log2 steps is -0.0043 per "
    "doubling, with 95% Student-t interval [-0.0167, 0.0082] over the three seeds, so the "
    "study is inconclusive and shows no rise of the gather within 4000 steps; no crossing "
    "size is extrapolated (the paper gives no level and the fit no direction). The KL gain's "
    "slope is 0.0086 [-0.0079, 0.0252] per doubling. 8000 steps were not run (CPU budget).")

SIH_GD = Claim(
    id="induction-variants.sih-gd-two-layers",
    title="A trained two-layer transformer predicts unseen rules in context better than a "
          "one-layer control",
    statement=(TASK_TEXT +
        r"In the one run with seed 0 (training sequences, held-out rules and both models' "
        r"initialisation drawn from seed 0; a statement about that pair of trained models, not "
        r"about the law over seeds), train, with Adam ($\mathrm{lr} = 3\cdot10^{-3}$, batch "
        r"32, 1000 steps, cross-entropy on slabs $\ge 1$), an attention-only transformer "
        r"with learned absolute "
        r"positions, $d = 64$, and 8 heads in layer 1 and 4 in layer 2, on $D = 1$, $k = 2$, "
        r"$\nu = \{-1, 0, 1\}$, $L = 4$, $T = 8$, each sequence with a fresh "
        r"Dirichlet$(0.01)$ rule; train a one-layer control (8 heads) the same way. On "
        r"$B = 64$ held-out rules, let $\Delta_b = \mathrm{KL}_b(P^*\|f_1) - "
        r"\mathrm{KL}_b(P^*\|f_2)$, the per-sequence mean over the cells of slabs $\ge 2$ of "
        r"the KL from the Dirichlet posterior predictive $P^*$ to the control $f_1$ minus that "
        r"to the two-layer model $f_2$. Then the expected gain $\mathbb E\Delta$ over "
        r"held-out rules is positive, decided by the normal-approximation interval "
        r"$\bar\Delta \pm 3\,s_\Delta/\sqrt{B}$ ($s_\Delta$ the sample standard "
        r"deviation; level about 99.7%) lying above 0: the two-layer model is closer to "
        r"Bayes."),
    source=(Source(where="Abstract: trained two-layer transformers generalise to unseen "
                   "rules in context", tag="V", **SIH),
            Source(where="the CPU configuration, the one-layer control and the paired "
                   "interval (this project)", tag="D", **SIH)),
    kind="construction",
    construction=f"{CONSTRUCTION}:CellularAutomaton",
    depends_on=("induction-variants.sih-bayes",),
    result_dependencies={
        "induction-variants.sih-bayes":
            "the models are measured by their KL to the Dirichlet posterior predictive, the "
            "Bayes level that claim's circuit attains; the check trains models of its own"},
    notes=NOTES_GD,
)


# --- tasks ----------------------------------------------------------------------------------

@st.composite
def ca_cases(draw, deterministic: bool | None = None):
    """(task, horizon, alpha, deterministic, seed): D in {1,2}, k in {2,3}, r = 1, Moore or von
    Neumann in 2-D, L in [4, 12] (1-D) or [3, 5] (2-D), T in [2, 6] (1-D) or [2, 4] (2-D)."""
    dim = draw(st.sampled_from([1, 2]))
    kind = draw(st.sampled_from(["moore", "von-neumann"])) if dim == 2 else "moore"
    side = draw(st.integers(4, 12) if dim == 1 else st.integers(3, 5))
    k = draw(st.integers(2, 3))
    horizon = draw(st.integers(2, 6) if dim == 1 else st.integers(2, 4))
    alpha = draw(st.floats(math.log(0.05), math.log(5.0)).map(lambda x: round(math.exp(x), 6)))
    det = draw(st.booleans()) if deterministic is None else deterministic
    seed = draw(st.integers(0, 2 ** 16))
    return CellularAutomaton(dim, side, k, neighbourhood(dim, kind)), horizon, alpha, det, seed


def case(dim, side, k, horizon, *, kind="moore", alpha=0.5, det=False, seed=0):
    return CellularAutomaton(dim, side, k, neighbourhood(dim, kind)), horizon, alpha, det, seed


# The smallest grids (L = 2r + 2 in 1-D, L = 3 in 2-D, where the Moore cube is the whole torus)
# and the longest 1-D rows: every row's last cell wraps to the next row's first.
PINNED = (case(1, 4, 2, 2), case(1, 4, 3, 6, det=True), case(2, 3, 2, 4, seed=1),
          case(2, 3, 3, 2, kind="von-neumann", det=True), case(1, 12, 2, 6, alpha=0.05),
          case(2, 5, 2, 4, alpha=5.0, seed=2))
BATCH = 2


def sample(task, horizon, alpha, det, seed):
    generator = np.random.default_rng(seed)
    rules = task.sample_rules(BATCH, generator, alpha=alpha, deterministic=det)
    return task.sample(rules, horizon, generator)


@functools.lru_cache(maxsize=32)
def _model(build, task, positions, alpha):
    return build(task, positions, alpha=alpha)


# --- rounding -------------------------------------------------------------------------------

def score_scale(model) -> float:
    r"""Bound on :math:`\sum|\text{terms}|` of a gather score: each rotation block contributes
    :math:`\le 4\beta`, the recency term :math:`\lambda(P + 1)`."""
    t, d = model.temperatures, model.task.dim
    return 4 * (d * t.space + t.time) + t.recency * (model.max_positions + 1)


def weight_rounding(model, n: int) -> float:
    r"""Bound :math:`\theta` on :math:`|\ln(\tilde w/w)|` for every computed gather weight.

    Features: the angle :math:`2\pi c/m` carries relative error :math:`\le\gamma_3`, so
    :math:`\cos`/:math:`\sin` carry absolute error :math:`e_f \le 2\pi\gamma_3 + 2u \le
    8\gamma_3`. A score sums :math:`\le F^2` products of weights with relative error
    :math:`\le\gamma_4` and features off by :math:`e_f`: :math:`\Delta s \le (\gamma_{2F+4}
    + 3e_f) S` with :math:`S` = :func:`score_scale`. Softmax: :math:`s - \max` adds
    :math:`2uS`, exp :math:`u`, the sum of :math:`n` terms :math:`\gamma_n`, the division
    :math:`u`; perturbing every score by :math:`\delta` moves a weight by :math:`e^{\pm2\delta}`.
    """
    width = positional_dim(model.task.dim) + 1
    scale = score_scale(model)
    delta = (gamma(2 * width + 4) + 3 * 8 * gamma(3)) * scale + 2 * unit_roundoff() * scale
    return 2 * delta + gamma(n + 3)


def slot_error(model, n: int) -> float:
    r""":math:`\varepsilon'`: a computed config slot has mass :math:`\ge 1 - \varepsilon'` on
    the true neighbour's state and :math:`\le \varepsilon'` elsewhere (exact off-target mass
    :math:`\varepsilon = 1 - 1/(1 + e^{-29})`, weights within :math:`e^{\pm\theta}`, the
    weighted sum of :math:`n` one-hots :math:`\gamma_n`)."""
    eps = 1 - model.temperatures.guaranteed_mass
    theta = weight_rounding(model, n)
    return 1 - (1 - eps) * math.exp(-theta) * (1 - gamma(n)) + eps * math.exp(theta) * gamma(n)


def kl_tolerance(model, n: int, total: np.ndarray, log_max: float) -> np.ndarray:
    r"""The claim's bound plus float64 rounding, per cell with :math:`N_c` = ``total``.

    Match scores: matching configs score :math:`\beta|\nu|` up to :math:`\eta`, mismatching
    ones :math:`\le \beta(|\nu| - 1) + \eta`, with :math:`\eta = 4\beta|\nu|(\varepsilon' +
    \theta + \gamma_n) + \gamma_{2|\nu|k + 8}S_2` (slot products within :math:`2\varepsilon'` of
    0 or 1, their weights' :math:`e^{\pm\theta}`, the score sum of absolute size
    :math:`S_2 = 2\beta|\nu| + 3\beta + |\ln A|`). Then :math:`q(a) \ge P^*(a)e^{-2\eta}/(1 +
    n e^{2\eta-\beta}/(N_c + A))`, so KL :math:`\le 2\eta + \ln(1 + \dots)`. The softmax and
    the output sum add :math:`\rho = 4uS_2 + \gamma_{2n + 4}` to the log-ratio, and computing
    KL in numpy adds :math:`\gamma_{k + 4}(2\ln_{\max} + 2)` (each log within
    :math:`u(1 + |\ln|)`, a sum of :math:`k` terms).
    """
    beta, nu, k = model.match_beta, len(model.task.offsets), model.task.n_states
    A = float(model.alpha.sum())
    eps = slot_error(model, n)
    theta = weight_rounding(model, n)
    s2 = 2 * beta * nu + 3 * beta + abs(math.log(A))
    eta = 4 * beta * nu * (eps + theta + gamma(n)) + gamma(2 * nu * k + 8) * s2
    leak = np.log1p(n * math.exp(2 * eta - beta) / (total + A))
    rounding = 4 * unit_roundoff() * s2 + gamma(2 * n + 4) + gamma(k + 4) * (2 * log_max + 2)
    return 2 * eta + leak + rounding


# --- SIH.1: the gather ------------------------------------------------------------------------

def gather_check(build=spatial_induction_circuit):
    """Every gather head's mass on its true neighbour, at every query of slab >= 1."""
    @budget(0.25)
    @given(case=ca_cases())
    @example(case=PINNED[0])
    @example(case=PINNED[2])
    @example(case=PINNED[3])
    @example(case=PINNED[4])
    def run(case):
        task, horizon, alpha, _, _ = case
        grid = sample(*case)
        positions = horizon * task.volume
        model = _model(build, task, positions, alpha)
        tokens = task.flatten(grid)[:, :positions]  # rows 0..P-1 predict cells 0..P-1
        gather = model.attention(tokens)["gather"].numpy()  # (B, 2nu, n, n)
        nu, n = len(task.offsets), tokens.shape[1]
        assert model.features.shape[1] == positional_dim(task.dim) + 1 == 4 * task.dim + 6, (
            f"{model.features.shape[1]} features, expected 4D + 5 + 1")
        cells = np.arange(task.volume, n)                       # cells of slab >= 1
        rows = np.arange(n)
        nxt = gather[:, :nu][:, :, cells, :]                    # query i predicts cell i
        want = task.neighbours(cells).T + 1                     # (nu, cells) token index
        mass_next = np.take_along_axis(nxt, want[None, :, :, None], -1)[..., 0]
        own_rows = cells[cells + 1 < n] + 1                     # query i holds cell i - 1
        own = gather[:, nu:][:, :, own_rows, :]
        want_own = task.neighbours(own_rows - 1).T + 1
        mass_own = np.take_along_axis(own, want_own[None, :, :, None], -1)[..., 0]
        worst = min(mass_next.min(), mass_own.min() if mass_own.size else 1.0)
        # the guarantee, less the computed weights' rounding e^{-theta} (weight_rounding)
        bound = model.temperatures.guaranteed_mass * math.exp(-weight_rounding(model, len(rows)))
        evidence.margin(worst - bound)
        evidence.metric("min mass on the true neighbour", worst, worse="lower")
        assert worst >= bound, (f"D={task.dim}, L={task.side}, T={horizon}: mass {worst!r} on "
                                f"a true neighbour < {bound!r}")
    return run


test_gather_reaches_every_true_neighbour = check(SIH_GATHER, "property")(gather_check())


def dimension_check(build=spatial_induction_circuit):
    """The positional table's width is 4D + 6 (with the constant) for every L and T."""
    def run():
        widths = {}
        for dim, sides in ((1, (3, 7, 16, 40)), (2, (3, 5, 9))):
            for side in sides:
                for horizon in (1, 3, 7):
                    task = CellularAutomaton(dim, side, 2, neighbourhood(dim))
                    model = build(task, horizon * task.volume)
                    widths.setdefault(dim, set()).add(model.features.shape[1])
                    evidence.cases(1)
        for dim, seen in widths.items():
            assert seen == {4 * dim + 6}, f"D={dim}: widths {sorted(seen)} != {{4D + 6}}"
        _plot_patterns(build)
    return run


def _plot_patterns(build) -> None:
    """The construction's attention: a next-cell gather head on a 2-D trajectory (L = 4,
    T = 3, Moore), and the match layer on a 1-D one (L = 6, T = 6, r = 1: 8 configurations,
    so they repeat); the BOS column is the prior sink."""
    from empirics.plots import pyplot

    task, horizon = CellularAutomaton(2, 4, 2, neighbourhood(2)), 3
    grid = sample(task, horizon, 1.0, False, 0)
    model = build(task, horizon * task.volume, alpha=1.0)
    out = model.attention(task.flatten(grid)[:1, : horizon * task.volume])
    line = CellularAutomaton(1, 6, 2, neighbourhood(1))
    grid_1d = sample(line, 6, 1.0, False, 0)
    match = build(line, 36, alpha=1.0).attention(line.flatten(grid_1d)[:1, :36])["match"]
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    head = task.offsets.index((-1, 1))
    for ax, pattern, title in ((axes[0], out["gather"][0, head], f"gather: next-cell head, "
                                f"offset {task.offsets[head]}"),
                               (axes[1], match[0], "match (1-D, L = 6): Bayesian counting")):
        ax.imshow(pattern.numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("key (0 = BOS, then cells row-major)")
        ax.set_ylabel("query (predicts the cell of its row)")
    fig.suptitle("spatial induction circuit (explicit weights)")
    evidence.figure(fig, "attention")


test_gather_dimension_is_independent_of_size = check(SIH_GATHER, "exhaustive")(
    dimension_check())


# --- SIH.2: Bayesian counting ----------------------------------------------------------------

def bayes_check(build=spatial_induction_circuit, bound=kl_tolerance):
    """KL(P* || circuit) at every cell of slab >= 1, against the derived bound."""
    @budget(0.25)
    @given(case=ca_cases(deterministic=False))
    @example(case=PINNED[0])
    @example(case=PINNED[2])
    @example(case=PINNED[4])
    @example(case=PINNED[5])
    def run(case):
        task, horizon, alpha, _, _ = case
        grid = sample(*case)
        positions = horizon * task.volume
        model = _model(build, task, positions, alpha)
        tokens = task.flatten(grid)[:, :positions]
        probs = model(tokens).numpy()[:, task.volume:]             # cells of slab >= 1
        target = task.bayes(grid, model.alpha).reshape(BATCH, positions, -1)[:, task.volume:]
        ids = task.config_ids(grid).reshape(BATCH, -1)[:, task.volume:]
        total = np.stack([(ids[b, None, :] == ids[b, :, None]).cumsum(-1).diagonal() - 1
                          for b in range(BATCH)])                  # N_c: earlier same config
        kl = (target * (np.log(target) - np.log(probs))).sum(-1)
        tolerance = bound(model, positions, total, float(-np.log(target).max()))
        evidence.margin(float((tolerance - kl).min()))
        evidence.metric("max KL(P* || circuit)", float(kl.max()))
        assert (kl <= tolerance).all(), (f"D={task.dim}, L={task.side}, T={horizon}: KL "
                                         f"{kl.max()!r} > bound {tolerance.min()!r}")
    return run


test_match_layer_is_bayesian_counting = check(SIH_BAYES, "property")(bayes_check())


def _prior_value(alpha_a, total_alpha):
    return alpha_a / total_alpha


def counting_identity_check(bos_value=_prior_value):
    """SymPy: a sink of weight A e^{β|ν|} (score β|ν| + ln A) with value α/A (``bos_value``)
    plus N_c matching keys of weight e^{β|ν|} give exactly (N_c(a) + α_a)/(N_c + A);
    mismatching keys weigh ≤ e^{-β} each relative to a match, so their share is
    ≤ n e^{-β}/(N_c + A)."""
    def run():
        import sympy as sp

        beta, nu, count_a, count, alpha_a, total_alpha, n = sp.symbols(
            "beta nu N_a N alpha_a A n", positive=True)
        w = sp.exp(beta * nu)
        sink = sp.exp(beta * nu + sp.log(total_alpha))
        output = (count * w * (count_a / count) + sink * bos_value(alpha_a, total_alpha)) / (
            count * w + sink)
        assert sp.simplify(output - (count_a + alpha_a) / (count + total_alpha)) == 0, (
            "the match output is not (N_c(a) + alpha_a)/(N_c + A)")
        leak = n * sp.exp(beta * (nu - 1)) / (count * w + sink)
        assert sp.simplify(leak - n * sp.exp(-beta) / (count + total_alpha)) == 0, (
            "the mismatching keys' share is not n e^-beta/(N_c + A)")
        evidence.cases(2)
    return run


test_counting_identity = check(SIH_BAYES, "symbolic")(counting_identity_check())


# --- SIH.3: deterministic rules --------------------------------------------------------------

def deterministic_check(build=spatial_induction_circuit):
    @budget(0.25)
    @given(case=ca_cases(deterministic=True))
    @example(case=PINNED[1])
    @example(case=PINNED[3])
    @example(case=case(1, 12, 2, 6, det=True, seed=3))
    def run(case):
        task, horizon, _, _, _ = case
        grid = sample(*case)
        positions = horizon * task.volume
        model = _model(build, task, positions, 0.1)
        tokens = task.flatten(grid)[:, :positions]
        predicted = model(tokens).argmax(-1).numpy()
        seen = task.seen(grid).reshape(BATCH, -1)
        wrong = (predicted != grid.reshape(BATCH, -1)) & seen
        evidence.metric("seen cells", int(seen.sum()), worse="lower")
        evidence.margin(-int(wrong.sum()))
        assert not wrong.any(), (f"D={task.dim}, L={task.side}, T={horizon}: {int(wrong.sum())}"
                                 f" of {int(seen.sum())} seen cells mispredicted")
    return run


test_deterministic_rules_are_exact = check(SIH_DETERMINISTIC, "property")(deterministic_check())


# --- the margin conditions -------------------------------------------------------------------

def losses(volume, side, positions, temps, lib=math):
    """(required loss M_0, {condition: loss}) for temperatures ``temps``."""
    return temps.required_loss, {
        "three slabs back": 3 * volume * temps.recency,
        "wrong time phase": temps.time * (1 - lib.cos(2 * lib.pi / TIME_PERIOD))
                            - temps.recency * (2 * volume - 1),
        "wrong coordinate": temps.space * (1 - lib.cos(2 * lib.pi / side))
                            - temps.recency * (volume - 1)}


def margin_symbolic_check(temperatures=temperatures_for):
    """SymPy: each loss minus M_0 simplifies to an expression >= 1 for all V, L > 0, P >= 1;
    and the temperatures are the statement's M_0, lambda, beta_t, beta_s (written here)."""
    def run():
        import sympy as sp

        V, L = sp.symbols("V L", positive=True)
        P = sp.exp(sp.Symbol("ell", nonnegative=True))  # P >= 1
        temps = temperatures(V, L, P, lib=sp)
        required, named = losses(V, L, P, temps, lib=sp)
        for name, loss in named.items():
            slack = sp.simplify(loss - required - 1)
            evidence.cases(1)
            assert slack.is_nonnegative, f"({name}) slack minus 1 is {slack}, not >= 0"
        M0 = sp.log(P) + 29
        lam = (M0 + 1) / (3 * V)
        written = {"M_0": (temps.required_loss, M0), "lambda": (temps.recency, lam),
                   "beta_t": (temps.time, (2 * lam * V + M0 + 1) / (1 - sp.cos(2 * sp.pi / 3))),
                   "beta_s": (temps.space, (2 * lam * V + M0 + 1) / (1 - sp.cos(2 * sp.pi / L)))}
        for name, (value, formula) in written.items():
            assert sp.simplify(value - formula) == 0, f"{name} is not the statement's formula"
    return run


MARGIN_POSITIONS = sorted({*range(1, 257), *(round(10 ** (k / 10)) for k in range(61))})


def margin_certified_check(temperatures=gather_temperatures, sides=range(3, 65)):
    """python-flint arb: the builder's float64 temperatures, read as exact reals, satisfy
    (i)-(iii) for D in {1, 2}, 3 <= L <= 64 and every P <= 256 plus 61 log-spaced P up to
    10^6 (each slack's ball must lie in [0, inf))."""
    def run():
        import pytest

        flint = pytest.importorskip("flint", reason="python-flint certifies the margins")

        class Arb:  # the lib interface losses() needs, in ball arithmetic
            pi = flint.arb.pi()

            @staticmethod
            def cos(x):
                return flint.arb(x).cos()

        worst = math.inf
        for dim in (1, 2):
            for side in sides:
                for positions in MARGIN_POSITIONS:
                    t = temperatures(dim, side, positions)
                    exact = type(t)(*(flint.arb(v) for v in (t.recency, t.time, t.space)),
                                    required_loss=flint.arb(positions).log()
                                    + REQUIRED_LOSS_SLACK)
                    required, named = losses(flint.arb(side ** dim), side, positions, exact,
                                             lib=Arb)
                    for name, loss in named.items():
                        slack = loss - required
                        worst = min(worst, float(slack.lower()))
                        assert slack >= 0, (f"({name}) fails at D={dim}, L={side}, "
                                            f"P={positions}: slack {slack}")
                evidence.cases(len(MARGIN_POSITIONS))
        evidence.margin(worst)
    return run


test_margins_hold_symbolically = check(SIH_MARGINS, "symbolic")(margin_symbolic_check())
test_builder_margins_are_certified = check(SIH_MARGINS, "numeric")(margin_certified_check())


# --- gradient descent ------------------------------------------------------------------------

# One-sided z threshold for the paired per-sequence means: under a zero-mean null a mean of
# B = 64 i.i.d. differences exceeds 3 standard errors with probability about 0.13 % (normal
# approximation), so a pass is not a fluctuation of the held-out draw.
GD_Z = 3.0


def gd_check(seed: int = 0, z: float = GD_Z, sign: float = 1.0, **overrides):
    """Run the experiment at its ``cpu`` config (plus ``overrides``; the published seed stands
    for the run when it is current) and decide the paired gain (``sign=-1`` reads it the other
    way round: a mutant's swapped models)."""
    def run():
        from empirics.experiment.published import reuse_or_run
        from empirics.spatial_induction import SPATIAL_INDUCTION

        result = reuse_or_run(SPATIAL_INDUCTION, "cpu", seed=seed, **overrides)
        m = result.metrics
        for key in ("two-layer/kl", "one-layer/kl", "baseline_kl"):
            evidence.metric(key, m[key], worse="higher")
        # recorded, not asserted: see the notes (the gather does not form; the match mass is
        # confounded by short cycles)
        for key in ("two-layer/gather_mass", "two-layer/match_mass", "match_chance"):
            evidence.metric(key, m[key], worse="lower")
        evidence.table("held-out rules (slabs >= 2)",
                       **result.tables["held-out rules (slabs >= 2)"])
        for name, fig in result.figures.items():
            evidence.figure(fig, name)
        evidence.cases(result.config["eval_batch"])
        evidence.metric("match_excess / SE",
                        m["match_excess"] / result.metric("match_excess", "se"), worse="lower")
        mean, se = sign * m["kl_gain"], result.metric("kl_gain", "se")
        evidence.metric("kl_gain / SE", mean / se, worse="lower")
        evidence.margin(mean - z * se)
        # mean +- z SE over B i.i.d. held-out rules (given the trained pair): a normal
        # approximation of level 2 Phi(z) - 1; an interval containing 0 ends inconclusive
        level = math.erf(z / math.sqrt(2))
        interval = Interval(mean, mean - z * se, mean + z * se, level,
                            int(result.config["eval_batch"]),
                            f"normal approximation, mean +- {z:g} SE over held-out rules")
        side = decide("mean KL gain of two layers over one (held-out rules)", interval,
                      threshold=0.0)
        assert side == "above", (f"one-layer KL minus two-layer KL {mean:.4f}: its interval "
                                 f"[{interval.low:.4f}, {interval.high:.4f}] lies below 0")
    return run


test_gd_two_layers_beat_one_layer = pytest.mark.slow(
    check(SIH_GD, "empirical")(gd_check()))
