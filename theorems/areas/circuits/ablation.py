r"""The induction circuit per ablation type: zero and mean ablation of ``two_layer_induction``.

A circuit is relative to the reference values an ablated edge carries. Resampling from a
corrupted prompt (:mod:`.next_token`, :mod:`.earlier_occurrence`) keeps every causal variable
the corruption does not change; the mean over a prompt distribution keeps what all its prompts
share; zero keeps nothing. On prompts whose final token occurs exactly once before, with the
metric :math:`\ell_{i,\tau} - \ell_{i,\bot}`, the circuit of
:func:`~constructions.circuits.ablation_circuit` is 7 edges under zero ablation and 5 under mean
ablation over every prompt of the clean length; the edges between the two are the ones that
read only positions. Every bound is derived from the margin conditions of the construction
(:func:`~constructions.induction_heads.two_layer_conditions`) and a closed form of the ablated
run, and compared with the computed metrics through the running forward-error bound of
:mod:`._tracked`. Sources: see the area's introduction; these statements are ours [D].
"""

from __future__ import annotations

import functools
import math

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.circuits import (
    ablation_circuit,
    all_prompts,
    attention_graph,
    edge_ablated_logits,
    induction_circuit,
    mean_outputs,
    target_margin,
)
from constructions.induction_heads import (
    two_layer_conditions,
    two_layer_induction,
    two_layer_parameters,
)
from constructions.numerics import gamma
from theorems.areas.circuits._shared import CONSTRUCTIONS, GRAPH, SHT, cached
from theorems.areas.circuits._tracked import Tracked, metric_error, tracked_logits
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget

ABLATING = (r"Ablating a set $P$ of edges under a reference $r$ means running the clean prompt "
            r"with each $u \to v\langle x\rangle \in P$ carrying $r_u$ instead of $u$'s output "
            r"in $v$'s $x$-input (or in the final residual stream for $v$ = logits), every "
            r"node recomputed from its inputs; $m(P) = \ell^P_{i,\tau} - \ell^P_{i,\bot}$ is "
            r"the metric on the final-position logits. ")

PROMPTS = (r"Let $f = \texttt{two\_layer\_induction}(S, n)$ (default temperatures), $\sigma$ a "
           r"prompt of length $m \le n$ whose final token $a = \sigma_i$ ($i = m$) occurs "
           r"exactly once before $i$, at $j^\star$ with $j^\star + 1 < i$, and "
           r"$\tau = \sigma_{j^\star+1}$ its target ($\bot$ is class $S$). Let "
           r"$\omega = (A)+(B)+(C)$ and $\omega_D = (D)$ be the left sides of the margin "
           r"conditions of $\texttt{two\_layer\_conditions}(n)$, so that the clean induction "
           r"head puts $w \ge 1/(1+\omega)$ on the key after $j^\star$ and "
           r"$m(\emptyset) \in [2/(1+\omega) - 1, 1]$; let $c_\tau$ be the number of "
           r"positions $1 \le j \le i$ holding $\tau$. For each run, $E(P)$ is the running "
           r"forward-error bound on the distance of the computed $m(P)$ to its exact value "
           r"($\texttt{tracked\_logits}$, $\texttt{metric\_error}$), and $E_P = E(\emptyset) "
           r"+ E(P)$. ")

ZERO = (r"Zero ablation: $r_u = 0$. The circuit $C_0$ is the 7 edges input $\to a_0\langle "
        r"q,k,v\rangle$, input $\to a_1\langle q,v\rangle$, $a_0 \to a_1\langle k\rangle$, "
        r"$a_1 \to$ logits. ")

MEAN = (r"Mean ablation: $r_u$ is the mean of $u$'s output, position by position, over the set "
        r"$D$ of all $S^m$ prompts of length $m$ (the uniform distribution, averaged exactly "
        r"over its support; computed as $\texttt{torch.mean}$). The circuit $C_\mu$ is the 5 "
        r"edges input $\to a_0\langle v\rangle$, input $\to a_1\langle q, v\rangle$, "
        r"$a_0 \to a_1\langle k\rangle$, $a_1 \to$ logits. ")

ZERO_ABLATION = Claim(
    id="circuits.induction-zero-ablation",
    title="Under zero ablation the induction circuit is 7 edges: every non-zero edge but the "
          "recency and sink edge",
    statement=(GRAPH + ABLATING + PROMPTS + ZERO +
               r"(Sufficiency) zero-ablating the 5 edges outside $C_0$ (the 4 zero maps and "
               r"input $\to a_1\langle k\rangle$, the recency bias and the BOS sink, which the "
               r"single match does not need) moves the metric by at most "
               r"$(s_0 + E_{\bar C_0})(1+\gamma_4)$, $s_0 = 2\omega/(1+\omega)$. "
               r"(Necessity) For each $e \in C_0$, $|m(\emptyset) - m(\{e\})| \ge "
               r"(\nu_e - E_{\{e\}})(1-\gamma_4)$, "
               r"with $\nu_e = 2/(1+\omega) - 1$ for input $\to a_1\langle v\rangle$ and "
               r"$a_1 \to$ logits (the output is zeroed), $2/(1+\omega) + 2/(1+\omega_D) - 2$ "
               r"for input $\to a_0\langle v\rangle$ and $a_0 \to a_1\langle k\rangle$ (no key "
               r"matches and the sink wins), $2/(1+\omega) - 1 - (c_\tau - 1)/(i+1)$ for "
               r"input $\to a_1\langle q\rangle$ (uniform induction weights), and "
               r"$2/(1+\omega) - 1 - R$ for input $\to a_0\langle q\rangle$ and "
               r"$\langle k\rangle$ (a uniform previous-token head), where "
               r"$R = \sum_{j \ge 1: \sigma_j = \tau} e^{s_j - \max_k s_k}$ over the exact "
               r"ablated scores $s_j = \beta_2 |\{t \le j: \sigma_t = a\}|/(j+1) + \lambda j + "
               r"\theta[j = 0]$. "
               r"(Minimality) For each $e \in C_0$ and $P = \bar C_0 \cup \{e\}$, "
               r"$|m(\emptyset) - m(P)| \ge (\nu'_e - E_P)(1-\gamma_4) > "
               r"(s_0 + E_{\bar C_0})(1+\gamma_4)$, with $\nu'_e = \nu_e$ except "
               r"$2/(1+\omega) - 1 - (c_\tau - 1)/(i+1)$ for input $\to a_0\langle v\rangle$ and "
               r"$a_0 \to a_1\langle k\rangle$ (the keys are then entirely zero) and $R$ "
               r"computed without the terms $\lambda j + \theta[j=0]$ for input "
               r"$\to a_0\langle q, k\rangle$."),
    source=Source(where="circuit of the two-layer construction under zero ablation "
                  "(this project)", tag="D", **SHT),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:ablation_circuit",
    depends_on=("induction-heads.two-layer-margins", "induction-heads.two-layer-exact",
                "circuits.induction-mechanism"),
    notes=(r"In float64 zero-ablating input $\to a_1\langle k\rangle$ moves the metric by "
           r"exactly 0 on every prompt tried (both induction weights round to 1), but in exact "
           r"arithmetic it moves it by a positive amount $\le s_0$: the claim states only the "
           r"bound."),
)

MEAN_ABLATION = Claim(
    id="circuits.induction-mean-ablation",
    title="Under mean ablation the induction circuit is 5 edges: the token-carrying ones",
    statement=(GRAPH + ABLATING + PROMPTS + MEAN +
               r"(Sufficiency) Mean-ablating the 7 edges outside $C_\mu$ leaves every "
               r"final-position logit bit for bit unchanged in float64. "
               r"(Necessity) For each $e \in C_\mu$, $|m(\emptyset) - m(\{e\})| \ge "
               r"(2/(1+\omega) - 1 - 1/S - E_{\{e\}})(1-\gamma_4) > 0$: the ablated metric "
               r"is at most $1/S$ (the "
               r"copied token becomes the uniform mixture, or no key matches and the weight on "
               r"keys $1..i-1$ is at most $e^{\beta_2(1-\alpha)/S}e^{-\lambda}/(1 - "
               r"e^{-\lambda}) \le 1/S$). "
               r"(Minimality) For each $e \in C_\mu$, the final-position logits of "
               r"$\bar C_\mu \cup \{e\}$ equal those of $\{e\}$ bit for bit, so $C_\mu "
               r"\setminus \{e\}$ is not sufficient, by the same bound. "
               r"(Why it differs) $C_\mu = C_0 \setminus \{$input $\to a_0\langle q\rangle$, "
               r"input $\to a_0\langle k\rangle\}$, the edges of $C_0$ whose map from the input "
               r"$(W_E[a] + W_{pos}[t])W_x$ does not depend on the token $a$: the mean over $D$ "
               r"keeps the positional block exactly; and both resample circuits of "
               r"$\texttt{induction\_circuit}$ are subsets of $C_\mu$."),
    source=Source(where="circuit of the two-layer construction under mean ablation "
                  "(this project)", tag="D", **SHT),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:ablation_circuit",
    depends_on=("induction-heads.two-layer-margins", "induction-heads.two-layer-exact",
                "circuits.induction-mechanism", "circuits.induction-zero-ablation",
                "circuits.induction-sufficient", "circuits.earlier-occurrence-sufficient"),
    result_dependencies={"circuits.induction-zero-ablation": "the statement compares C_mu with "
                         "C_0, whose circuit the zero-ablation claim checks"},
)


# --- prompts, margins and closed forms ----------------------------------------------------------

@st.composite
def ablation_cases(draw, max_vocab: int = 8, max_len: int = 12, max_length: int = 12):
    """(vocab_size, max_len, prompt): the final token occurs exactly once before, at j* with
    j* + 1 < i; prompt length at most ``max_length``."""
    S = draw(st.integers(3, max_vocab))
    n = draw(st.integers(3, max_len))
    m = draw(st.integers(3, min(n, max_length)))
    a = draw(st.integers(0, S - 1))
    others = draw(st.lists(st.integers(0, S - 2), min_size=m, max_size=m))
    sequence = [b + (b >= a) for b in others]
    j = draw(st.integers(0, m - 3))
    sequence[j] = sequence[-1] = a
    return S, n, sequence


def margins(max_len: int) -> tuple[float, float]:
    """(omega, omega_D), evaluated in float64 and inflated by their relative error gamma_16."""
    conditions = two_layer_conditions(max_len, two_layer_parameters(max_len))
    inflate = 1 + gamma(16)
    return sum(conditions[k][0] for k in "ABC") * inflate, conditions["D"][0] * inflate


def tau_count(sequence: list[int]) -> tuple[int, int]:
    """(tau, c_tau): the target and how many of positions 1..i hold it."""
    tau = sequence[sequence.index(sequence[-1]) + 1]
    return tau, sequence.count(tau)


def uniform_prev_mass(sequence: list[int], vocab_size: int, max_len: int,
                      positional: bool = True) -> float:
    r"""An upper bound on :math:`R = \sum_{j \ge 1: \sigma_j = \tau} e^{s_j - \max_k s_k}`
    for the scores of an induction head whose previous-token head is uniform (its query or
    keys zero-ablated): :math:`\mathrm{prev}_j[a] = |\{t \le j: \sigma_t = a\}|/(j+1)`, score
    :math:`\beta_2\mathrm{prev}_j[a] + \lambda j + \theta[j = 0]` (without the last two terms
    when ``positional`` is False). Each weight is at most :math:`e^{s_j - \max s}`, and
    :math:`\ell_\tau` is their sum over the keys holding :math:`\tau`.

    *Rounding.* Each score takes at most 5 float operations on numbers
    :math:`\le M = \beta_2 + \lambda n + \theta`, so it errs by :math:`\le \gamma_5 M`, a
    difference of two by :math:`\le 2\gamma_5 M + u\cdot 2M`; ``math.exp`` is within 1 ulp,
    the sum of :math:`\le n` terms within :math:`\gamma_n`: the computed sum times
    :math:`e^{3\gamma_5 M}(1 + \gamma_{n+2})` bounds :math:`R`.
    """
    p = two_layer_parameters(max_len)
    a = sequence[-1]
    tau, _ = tau_count(sequence)
    tokens = [vocab_size, *sequence]                     # BOS at model position 0
    scores, count = [], 0
    for j, token in enumerate(tokens):
        count += token == a
        scores.append(p.beta2 * count / (j + 1)
                      + ((p.recency * j + (p.sink if j == 0 else 0.0)) if positional else 0.0))
    top = max(scores)
    mass = sum(math.exp(s - top) for j, s in enumerate(scores) if j >= 1 and tokens[j] == tau)
    M = p.beta2 + p.recency * max_len + p.sink
    return mass * math.exp(3 * gamma(5) * M) * (1 + gamma(max_len + 2))


def zero_bound(case, ablated: frozenset[str]) -> float:
    r"""The exact-arithmetic least move :math:`\nu` of the metric when ``ablated`` (one edge of
    :math:`C_0`, possibly with the complement) is zero-ablated (see the claim)."""
    S, n, sequence = case
    omega, omega_d = margins(n)
    base = 2 / (1 + omega) - 1                          # the clean metric's least value
    i = len(sequence)
    uniform = (tau_count(sequence)[1] - 1) / (i + 1)    # the metric of uniform weights
    key_input = "input->a1.h0<k>" in ablated
    if ablated & {"input->a1.h0<v>", "a1.h0->logits"}:
        return base                                     # the output is exactly zero
    if "input->a1.h0<q>" in ablated:
        return base - uniform
    if ablated & {"input->a0.h0<v>", "a0.h0->a1.h0<k>"}:
        return base - uniform if key_input else base + 2 / (1 + omega_d) - 1
    if ablated & {"input->a0.h0<q>", "input->a0.h0<k>"}:
        return base - uniform_prev_mass(sequence, S, n, positional=not key_input)
    raise ValueError(f"ablated must hold an edge of the zero-ablation circuit, got {ablated}")


def mean_bound(vocab_size: int, max_len: int) -> float:
    r"""The least move :math:`2/(1+\omega) - 1 - 1/S` of the metric when an edge of
    :math:`C_\mu` is mean-ablated, after asserting that the no-match weight
    :math:`\kappa = e^{\beta_2(1-\alpha)/S}e^{-\lambda}/(1-e^{-\lambda})` is at most
    :math:`1/S` (so that :math:`1/S` bounds every ablated metric; :math:`\kappa` is inflated
    by :math:`\gamma_{10}` for its own evaluation)."""
    p = two_layer_parameters(max_len)
    alpha = math.exp(p.beta1) / (math.exp(p.beta1) + max_len)
    kappa = (math.exp(p.beta2 * (1 - alpha) / vocab_size - p.recency)
             / (1 - math.exp(-p.recency))) * (1 + gamma(10))
    assert kappa <= 1 / vocab_size, f"the no-match weight {kappa} exceeds 1/S"
    omega, _ = margins(max_len)
    return 2 / (1 + omega) - 1 - 1 / vocab_size


# --- the runs and their running bounds ----------------------------------------------------------

def tracked_means(model, prompts: torch.Tensor) -> tuple[dict, dict[str, Tracked]]:
    r"""The model's mean source outputs over ``prompts`` (:func:`~constructions.circuits.
    mean_outputs`, the values the ablated run uses) with bounds on their distance to the exact
    means of the exact outputs: each computed output is within the running bound ``e`` of its
    exact value (:func:`tracked_logits`, valid for every computation of this structure), and
    ``torch.mean`` of :math:`N` numbers errs by :math:`\le \gamma_{N+1}` times their mean
    magnitude (a sum in any order, then a division)."""
    N = prompts.shape[0]
    means = mean_outputs(model, prompts)
    _, outputs = tracked_logits(model, prompts, per_head=True)
    out = {}
    for name, node in outputs.items():
        e = node.e.mean(0, keepdim=True) * (1 + gamma(N + 1)) \
            + gamma(N + 1) * node.n.mean(0, keepdim=True)
        out[name] = Tracked.computed(means[name], e, node.ops + N + 8)
    return means, out


class Runs:
    """Metrics of one prompt's ablated runs, each with its running bound E."""

    def __init__(self, model, clean: torch.Tensor, ablation: str,
                 means: dict | None = None, references: dict | None = None):
        self.model, self.clean, self.ablation, self.means = model, clean, ablation, means
        if references is None:   # zero: exact zeros, no error
            width = (1, clean.shape[1] + 1, model.d_model)
            zero = torch.zeros(width, dtype=model.W_E.dtype)
            references = {name: Tracked(zero, zero, zero, 0)
                          for name in ("input", "a0.h0", "a1.h0")}
        self.references = references
        S = model.vocab_size
        self.targets = (torch.tensor([tau_count(clean[0].tolist())[0]]), torch.tensor([S]))
        self.computed: dict[tuple, torch.Tensor] = {}
        self.errors: dict[tuple, float] = {}

    def logits(self, ablated: tuple) -> torch.Tensor:
        """The model's final logits with ``ablated`` ablated (computed once)."""
        if ablated not in self.computed:
            self.computed[ablated] = edge_ablated_logits(self.model, self.clean, ablated,
                                                         self.ablation, self.means)
        return self.computed[ablated]

    def metric(self, ablated: tuple) -> float:
        return float(target_margin(self.logits(ablated), self.clean)[0])

    def error(self, ablated: tuple) -> float:
        """E(ablated): the running bound on the computed metric's distance to the exact one."""
        if ablated not in self.errors:
            tracked, _ = tracked_logits(self.model, self.clean, per_head=True, patched=ablated,
                                        corrupt_out=self.references)
            self.errors[ablated] = float(metric_error(tracked, *self.targets)[0])
        return self.errors[ablated]

    def move(self, ablated: tuple) -> float:
        return abs(self.metric(ablated) - self.metric(()))

    def slack(self, ablated: tuple) -> float:
        return self.error(()) + self.error(ablated)


# The longest prompt at the smallest vocabulary with tau repeated most often (the least
# uniform-weights bound), and the shortest prompt.
REPEATED_TAU = (3, 12, [1, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0])
SHORT = (3, 3, [0, 1, 0])


# --- zero ablation ------------------------------------------------------------------------------

PARTS = ("sufficient", "necessary", "minimal")


def zero_check(build=two_layer_induction, circuit=ablation_circuit, bound=zero_bound,
               parts=PARTS):
    """Sufficiency, necessity and minimality, asserted in that order (``parts`` selects some:
    a mutant of a later sentence may skip the earlier ones)."""
    build = cached(build)

    @given(case=ablation_cases())
    @example(case=REPEATED_TAU)
    @example(case=SHORT)
    @budget(0.03, minimum=3)  # 16 ablated runs and their running bounds per example
    def test_zero_ablation(case):
        S, n, sequence = case
        runs = Runs(build(S, n), torch.tensor([sequence]), "zero")
        kept = circuit("two_layer", S, n, "zero")
        complement = tuple(e.name for e in kept.complement())
        omega, _ = margins(n)
        # s_0 and the two runs' distances to the exact metrics; the 1 + gamma_4 covers the
        # evaluation of this sum and of the computed move (as in gauges.circuit_check)
        allowed = (2 * omega / (1 + omega) + runs.slack(complement)) * (1 + gamma(4))
        if "sufficient" in parts:
            assert runs.move(complement) <= allowed, (
                f"zero-ablating the complement moved the metric by {runs.move(complement)} > "
                f"{allowed}")
            evidence.margin(allowed - runs.move(complement))
        for part in ("necessary", "minimal"):
            for edge in kept.edges if part in parts else ():
                ablated = (edge.name, *complement) if part == "minimal" else (edge.name,)
                least = (bound(case, frozenset(ablated)) - runs.slack(ablated)) * (1 - gamma(4))
                label = " and the complement" if part == "minimal" else ""
                assert runs.move(ablated) >= least, (
                    f"zero-ablating {edge.name}{label} moved the metric by "
                    f"{runs.move(ablated)} < {least}")
                if part == "minimal":
                    assert least > allowed, (f"the derived move {least} of {edge.name} and the "
                                             f"complement does not exceed {allowed}")
                evidence.margin(runs.move(ablated) - least)
        evidence.cases(1)
    return test_zero_ablation


test_zero_ablation = check(ZERO_ABLATION, "property")(zero_check())


# --- mean ablation ------------------------------------------------------------------------------

@functools.lru_cache(maxsize=16)
def _mean_setup(build, S: int, n: int, m: int):
    model = build(S, n)
    return (model, *tracked_means(model, all_prompts(S, m)))


def mean_check(build=two_layer_induction, circuit=ablation_circuit, bound=mean_bound,
               parts=PARTS):
    """Sufficiency, necessity and minimality, asserted in that order (``parts`` selects some:
    a mutant of a later sentence may skip the earlier ones)."""

    # S^m <= 4^5 prompts (drawn: 4^4): the mean is exact over its support and cheap (one
    # batched pass, and its running bound, per (S, n, m), cached)
    @given(case=ablation_cases(max_vocab=4, max_len=16, max_length=4))
    @example(case=(4, 16, [0, 1, 2, 3, 0]))
    @example(case=SHORT)
    @budget(0.03, minimum=3)  # 12 ablated runs and their running bounds per example
    def test_mean_ablation(case):
        S, n, sequence = case
        clean = torch.tensor([sequence])
        model, means, references = _mean_setup(build, S, n, len(sequence))
        runs = Runs(model, clean, "mean", means, references)
        kept = circuit("two_layer", S, n, "mean")
        complement = tuple(e.name for e in kept.complement())
        if "sufficient" in parts:
            # Bit-identity, not a tolerance: the 7 edges read the input's positional block
            # only, whose mean over D is exactly the clean one (a sum of N copies of 1.0 or 0.0
            # divided by N), or they are zero maps: each patched term is a sum of products with
            # an exact zero factor, fl(y + 0) = y (as in next_token's sufficiency check).
            reference, ablated = runs.logits(()), runs.logits(complement)
            assert torch.equal(ablated[:, -1], reference[:, -1]), (
                f"mean-ablating the complement moved the final logits by "
                f"{float((ablated[:, -1] - reference[:, -1]).abs().max())}")
        for edge in kept.edges:
            ablated = (edge.name,)
            least = (bound(S, n) - runs.slack(ablated)) * (1 - gamma(4))
            if "necessary" in parts:
                assert least > 0, f"the derived move {least} is not positive"
                assert runs.move(ablated) >= least, (
                    f"mean-ablating {edge.name} moved the metric by {runs.move(ablated)} "
                    f"< {least}")
                evidence.margin(runs.move(ablated) - least)
            if "minimal" in parts:
                # bit for bit, for the reason the sufficiency sentence gives: the complement's
                # patched terms are exact zeros, with or without e ablated
                alone, both = runs.logits(ablated), runs.logits((edge.name, *complement))
                assert torch.equal(both[:, -1], alone[:, -1]), (
                    f"mean-ablating {edge.name} and the complement gave other final logits "
                    f"than {edge.name} alone, by {float((both - alone)[:, -1].abs().max())}")
        evidence.cases(1)
    return test_mean_ablation


test_mean_ablation = check(MEAN_ABLATION, "property")(mean_check())


# --- why the circuits differ --------------------------------------------------------------------

def token_independent_edges(model) -> set[str]:
    """The input edges with a non-zero map that does not depend on the token:
    (W_E[a] - W_E[b]) W_x = 0 for all tokens a, b, and (W_E + W_pos) W_x != 0."""
    reads = {"a0.h0": model.layers[0], "a1.h0": model.layers[1]}
    found = set()
    for edge in attention_graph(2, 1):
        if edge.source != "input":
            continue
        read = model.W_U if edge.target == "logits" else {
            "q": reads[edge.target].W_Q, "k": reads[edge.target].W_K,
            "v": reads[edge.target].W_V}[edge.input][0]
        tokens = model.W_E[: model.vocab_size] @ read
        inputs = (model.W_E.unsqueeze(1) + model.W_pos.unsqueeze(0)).flatten(0, 1) @ read
        if bool((tokens == tokens[:1]).all()) and bool((inputs != 0).any()):
            found.add(edge.name)
    return found


def difference_check(circuit=ablation_circuit, resampled=induction_circuit,
                     sizes=((3, 3), (4, 6), (5, 12), (8, 16))):
    def test_ablation_difference():
        for S, n in sizes:
            zero, mean = (circuit("two_layer", S, n, a).edge_names for a in ("zero", "mean"))
            positional = token_independent_edges(two_layer_induction(S, n)) & zero
            assert zero - mean == positional and mean <= zero, (
                f"S={S} n={n}: C_0 minus C_mu is {sorted(zero - mean)}, the token-independent "
                f"edges of C_0 are {sorted(positional)}")
            for corruption in ("resample_next_token", "resample_earlier_occurrence"):
                extra = resampled("two_layer", S, n, corruption).edge_names - mean
                assert not extra, f"S={S} n={n}: {corruption}'s circuit has {sorted(extra)} " \
                                  f"outside C_mu"
            evidence.cases(1)
    return test_ablation_difference


test_ablation_difference = check(MEAN_ABLATION, "exhaustive")(difference_check())
