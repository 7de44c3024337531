r"""Active-dormant heads on Bigram-Backcopy (Guo et al. 2024, arXiv:2410.13835).

The task is read from the authors' code [V] (``BBM/data.py``: generator, triggers); the
theorem statements of the paper were not reachable, so the construction, its bounds, the
value-drain statement and the two-parameter caricature are this project's [D]; the caricature
is ours, not the paper's model, and whether the paper's rates match it is unknown [R].
The caricature and gradient descent are :mod:`.bigram_backcopy_dynamics`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.bigram_backcopy import (
    BigramBackcopy,
    active_dormant_model,
    dirichlet_bigrams,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence, expect_failure
from theorems.numerics import gamma, unit_roundoff
from theorems.profiles import budget

GUO = {"arxiv": "2410.13835", "ref": "Guo, Pai, Bai, Jiao, Jordan, Mei (2024)"}
CONSTRUCTION = "constructions.bigram_backcopy"
TASK_TEXT = (
    r"Bigram-Backcopy over tokens $\{0..V-1\}$ with bigram rows $\mathrm{cond} > 0$, marginal "
    r"$\pi$ and the $k \le V-2$ most probable tokens as triggers: after the BOS, $x_1 \sim \pi$ "
    r"without triggers; then $x_{i+1} = x_{i-1}$ if $x_i$ is a trigger, else "
    r"$x_{i+1} \sim \mathrm{cond}[x_i]$. ")

BB_TASK = Claim(
    id="induction-variants.bb-task",
    title="The Bigram-Backcopy sampler follows its oracle",
    statement=(TASK_TEXT +
        r"The oracle $O_i$ (the law of $x_{i+1}$ given $x_{\le i}$) is the delta at $x_{i-1}$ "
        r"when $x_i$ is a trigger ($i \ge 1$), $\mathrm{cond}[x_i]$ otherwise, and $\pi$ "
        r"without triggers at $i = 0$. Every sampled sequence has $O_i(x_{i+1}) > 0$ at every "
        r"$i$, and $x_{i+1} = x_{i-1}$ at every trigger."),
    source=Source(where="authors' code, BBM/data.py (class bbm, gen_seq)", tag="V", **GUO),
    kind="identity",
    construction=f"{CONSTRUCTION}:BigramBackcopy",
)

BB_ACTIVE_DORMANT = Claim(
    id="induction-variants.bb-active-dormant",
    title="One head plus an MLP solves Bigram-Backcopy: active on triggers, dormant on a BOS "
          "sink with value 0",
    statement=(TASK_TEXT +
        r"For the construction with temperature $\beta$ and gain $\gamma$ (scores "
        r"$\beta 1[j = i-1] + 2\beta(1 - \mathrm{trig}(x_i))1[j = 0]$, values $\gamma e_x$, BOS "
        r"value 0, MLP logits $\log\mathrm{cond}[x]$ off triggers), at every position "
        r"$i \ge 1$: at a non-trigger the BOS mass is $w_0 \ge 1/(1 + e^{-\beta} + "
        r"(i-1)e^{-2\beta})$, the head output has entries in $[0, \gamma(1 - w_0)]$ (dormant) "
        r"and $\mathrm{KL}(O_i \| f_i) \le \gamma(1 - w_0)$; at a trigger the mass on $i - 1$ "
        r"is $w \ge 1/(1 + i e^{-\beta})$ and $\mathrm{KL} \le \ln(1 + (V-1)e^{-\gamma(2w-1)})$ "
        r"(plus float64 rounding)."),
    source=(Source(where="Abstract: an active-dormant mechanism solves BB; dormant heads "
                   "attend to the BOS", tag="V", **GUO),
            Source(where="these weights and bounds (this project)", tag="D", **GUO)),
    kind="construction",
    construction=f"{CONSTRUCTION}:active_dormant_model",
    depends_on=("induction-variants.bb-task",),
)

BB_VALUE_DRAIN = Claim(
    id="induction-variants.bb-value-drain",
    title="Exact dormancy forces the BOS value to vanish (this project's stronger reading of "
          "value-state drains; false)",
    statement=(TASK_TEXT +
        r"(This project's reading, not the paper's words: the catalogue's ET.2 derivation read "
        r"the abstract's value-state drains as forced by exact dormancy.) For the construction "
        r"of induction-variants.bb-active-dormant with a BOS value "
        r"$v \in \mathbb{R}^V \setminus \{0\}$ instead of 0 (written with gain $\gamma$), the "
        r"predictions are no longer exact: $\max_{i \text{ non-trigger}} \mathrm{KL}(O_i \| f_i)$ "
        r"exceeds the exactness bound of that claim."),
    source=Source(where="the catalogue's ET.2 derivation (this project), a stronger reading of "
                        "the abstract's observation that sink tokens have much smaller value "
                        "states", tag="D", **GUO),
    kind="construction",
    construction=f"{CONSTRUCTION}:active_dormant_model",
    depends_on=("induction-variants.bb-active-dormant",),
    refutes="finite-test",
    correction=(
        r"Softmax is shift-invariant, so a BOS value $v = c\mathbf 1$ shifts every non-trigger "
        r"logit vector by the constant $\gamma w_0 c$ and changes no prediction. What holds: "
        r"the head's *output* is dormant (zero) only for $v = 0$, the *predictions* are "
        r"exact for $v \in \mathrm{span}(\mathbf 1)$, and for $v = e_0$ the non-trigger KL is "
        r"$\mathrm{KL}(\mathrm{cond}[x] \| \mathrm{softmax}(\log\mathrm{cond}[x] + \gamma v))$ "
        r"up to $2\gamma(1 - w_0)(1 + \|v\|_\infty)$, which is positive. So exactness of this "
        r"one-head construction does not force a value drain."),
    notes="The paper does not state this; its abstract reports value-state drains as an "
          "observed extreme-token phenomenon and attributes them to a mutual-reinforcement "
          "training dynamics, which this refutation does not touch (the project's caricature "
          "of that dynamics is induction-variants.bb-caricature).",
)


# --- tasks --------------------------------------------------------------------------------

@st.composite
def bb_cases(draw):
    """(vocab_size, n_triggers, concentration, length, seed)."""
    vocab = draw(st.integers(4, 32))
    triggers = draw(st.integers(1, min(5, vocab - 2)))
    concentration = draw(st.sampled_from([0.1, 0.3, 0.5, 1.0, 2.0]))
    length = draw(st.integers(2, 64))
    return vocab, triggers, concentration, length, draw(st.integers(0, 2 ** 16))


PINNED = ((4, 2, 0.1, 64, 0), (32, 5, 0.3, 64, 1), (4, 1, 2.0, 2, 2), (5, 3, 0.5, 64, 3))
BATCH = 3


@functools.lru_cache(maxsize=64)
def make_task(vocab, triggers, concentration, seed):
    generator = np.random.default_rng(seed)
    return BigramBackcopy(dirichlet_bigrams(vocab, concentration, generator), triggers)


def draw_tokens(case, sampler=BigramBackcopy.sample):
    vocab, triggers, concentration, length, seed = case
    task = make_task(vocab, triggers, concentration, seed)
    return task, sampler(task, BATCH, length, np.random.default_rng(seed + 1))


def task_check(oracle=BigramBackcopy.oracle, sampler=BigramBackcopy.sample):
    """The oracle against the law the statement writes (row 0: the marginal with the triggers
    removed and renormalised, within 2 gamma_{V+1} relative, one V-term sum and a division on
    each side; bigram rows and trigger deltas exactly: they are copied table rows), then the
    sampled sequences against the oracle."""
    @budget(0.3)
    @given(case=bb_cases())
    @example(case=PINNED[0])
    @example(case=PINNED[2])
    def run(case):
        task, tokens = draw_tokens(case, sampler)
        law = oracle(task, tokens)                                    # (B, n, V)
        x = tokens.numpy()
        first = np.where(task.is_trigger[:-1], 0.0, task.marginal)
        first = torch.from_numpy(first / first.sum())
        expected = torch.from_numpy(task.cond[np.minimum(x, task.vocab_size - 1)])
        trig_at = torch.from_numpy(task.is_trigger)[tokens[:, 1:]]    # positions i >= 1
        delta = torch.eye(task.vocab_size, dtype=torch.float64)[tokens[:, :-1].clamp(
            max=task.vocab_size - 1)]
        expected[:, 1:][trig_at] = delta[trig_at]
        assert ((law[:, 0] - first).abs() <= 2 * gamma(task.vocab_size + 1) * first).all() \
            and torch.equal(law[:, 1:], expected[:, 1:]), (
            "the oracle is not the delta at x_{i-1} at a trigger, cond[x_i] elsewhere and pi "
            "without triggers at i = 0")
        following = tokens[:, 1:]
        chance = law[:, :-1].gather(-1, following.unsqueeze(-1))[..., 0]
        trig = torch.from_numpy(task.is_trigger)[tokens[:, 1:-1]]
        copies = following[:, 1:][trig] == tokens[:, :-2][trig]
        evidence.metric("triggers seen", int(trig.sum()), worse="lower")
        assert (chance > 0).all(), "a sampled token has oracle probability 0"
        assert copies.all(), "a trigger was not followed by the token before it"
    return run


test_sampler_follows_the_oracle = check(BB_TASK, "property")(task_check())


# --- the construction --------------------------------------------------------------------

def kl_rows(law: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(law || softmax(logits)) per row, with 0 log 0 = 0."""
    log_q = logits.log_softmax(-1)
    return torch.where(law > 0, law * (law.clamp_min(1e-300).log() - log_q), 0.0).sum(-1)


def rounding(model, logits: torch.Tensor, n: int) -> float:
    r"""Float64 rounding of the computed KL, beyond the exact-arithmetic bound.

    Scores are sums of at most two multiples of :math:`\beta` (error :math:`\le 3\beta u`);
    softmax moves each weight by :math:`e^{\pm\theta}`, :math:`\theta = 2(2\cdot3\beta u +
    3\beta u) + \gamma_{n+3}`; the head output :math:`\gamma\sum_j w_j e_{x_j}` then errs by
    :math:`\le \gamma(\theta + \gamma_n)` per entry; adding the MLP logit adds
    :math:`u\,L_{\max}`. KL is 2-Lipschitz in the logits' sup norm, and its own evaluation
    (log-softmax over :math:`V`, a :math:`V`-term sum) adds :math:`\gamma_{V+4}(2L_{\max}+2)`.
    """
    u, beta, gain = unit_roundoff(), model.beta, model.gain
    theta = 2 * (9 * beta * u) + gamma(n + 3)
    l_max = float(logits.abs().max()) + math.log(model.task.vocab_size) + 1
    logit_error = gain * (theta + gamma(n)) + u * l_max
    return 2 * logit_error + gamma(model.task.vocab_size + 4) * (2 * l_max + 2)


def exact_bounds(model, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per position i >= 1: the guaranteed masses and KL bound of the claim."""
    n, beta, gain = tokens.shape[1], model.beta, model.gain
    i = torch.arange(1, n, dtype=torch.float64)
    trig = torch.from_numpy(model.task.is_trigger)[tokens[:, 1:]]
    sink = 1 / (1 + math.exp(-beta) + (i - 1) * math.exp(-2 * beta))
    sink = torch.where(i == 1, 1 / (1 + math.exp(-3 * beta)), sink).expand_as(trig)
    previous = (1 / (1 + i * math.exp(-beta))).expand_as(trig)
    kl = torch.where(trig, torch.log1p((model.task.vocab_size - 1)
                                       * torch.exp(-gain * (2 * previous - 1))),
                     gain * (1 - sink))
    return {"trigger": trig, "sink": sink, "previous": previous, "kl": kl}


def construction_check(build=active_dormant_model):
    @budget(0.3)
    @given(case=bb_cases())
    @example(case=PINNED[0])
    @example(case=PINNED[1])
    @example(case=PINNED[3])
    def run(case):
        task, tokens = draw_tokens(case)
        n = tokens.shape[1]
        model = build(task, 64)
        out = model.attention(tokens)
        kl = kl_rows(task.oracle(tokens), out["logits"])[:, 1:]
        bounds = exact_bounds(model, tokens)
        slack = rounding(model, out["logits"], n)
        trig = bounds["trigger"]
        pattern = out["pattern"][:, 1:]
        rows = torch.arange(n - 1)
        sink_mass, prev_mass = pattern[:, :, 0], pattern[:, rows, rows]
        # masses: the weights' relative rounding e^{-theta}, theta as in rounding()
        theta = 18 * model.beta * unit_roundoff() + gamma(n + 3)
        dormant_gap = (bounds["sink"] * math.exp(-theta) - sink_mass)[~trig]
        active_gap = (bounds["previous"] * math.exp(-theta) - prev_mass)[trig]
        head_limit = model.gain * (1 - bounds["sink"] * math.exp(-theta)) + slack
        head = out["head_out"][:, 1:].abs().amax(-1)
        evidence.margin(float((bounds["kl"] + slack - kl).min()))
        evidence.metric("max KL(oracle || construction)", float(kl.max()))
        evidence.metric("min BOS mass at dormant positions",
                        float(sink_mass[~trig].min()), worse="lower")
        # one assertion per sentence, masses first (a wrong mass breaks the KL bounds too)
        assert (dormant_gap <= 0).all(), "a non-trigger query misses the BOS sink"
        # entries >= 0 exactly: nonnegative weights times nonnegative values, summed
        assert (head[~trig] <= head_limit[~trig]).all() and (
            out["head_out"][:, 1:][~trig] >= 0).all(), "the head is not dormant"
        within = kl <= bounds["kl"] + slack
        assert within[~trig].all(), (
            f"non-trigger KL {float(kl[~trig].max())!r} above gamma (1 - w_0)")
        assert (active_gap <= 0).all(), "a trigger query misses the previous token"
        assert within[trig].all(), (
            f"trigger KL {float(kl[trig].max())!r} above ln(1 + (V-1) e^(-gamma(2w-1)))")
    return run


test_active_dormant_construction = check(BB_ACTIVE_DORMANT, "property")(construction_check())


# --- the value drain, as stated, and its correction --------------------------------------

def drain_as_stated(build, case, v) -> None:
    """One example of the statement as the catalogue gave it: BOS value v != 0 breaks
    exactness at some non-trigger position."""
    task, tokens = draw_tokens(case)
    bos_value = torch.tensor(v[: task.vocab_size], dtype=torch.float64)
    model = build(task, 64, bos_value=bos_value)
    logits = model(tokens)
    kl = kl_rows(task.oracle(tokens), logits)[:, 1:]
    bounds = exact_bounds(model, tokens)
    exact = kl <= bounds["kl"] + rounding(model, logits, tokens.shape[1])
    assert not exact[~bounds["trigger"]].all(), (
        f"BOS value {bos_value.tolist()} leaves every non-trigger prediction exact")


COUNTEREXAMPLE = [1.0] * 32  # v in span(1): a constant shift of the logits


def drain_as_stated_check(build=active_dormant_model):
    """The as-stated check, with the counterexample pinned."""
    @budget(0.2)
    @given(case=bb_cases(), v=st.lists(st.floats(-1, 1), min_size=32, max_size=32).filter(
        lambda v: max(map(abs, v)) > 0.1))
    @example(case=PINNED[0], v=COUNTEREXAMPLE)
    def run(case, v):
        drain_as_stated(build, case, v)
    return run


def drain_refutation(build=active_dormant_model, counterexample=COUNTEREXAMPLE):
    """The statement fails at v = 1: every non-trigger prediction stays exact, while the head's
    output there is not dormant (so v is a real, nonzero BOS value: above the dormancy limit
    gamma (1 - w_0) of induction-variants.bb-active-dormant, with the same rounding slack).
    Then the correction: logits with v and v + c 1 give the same predictions, and the KL with
    v = e_0 matches KL(cond || softmax(log cond + gamma v)) within 2 gamma (1 - w_0)(1 + |v|)
    + rounding (KL is 2-Lipschitz in sup norm)."""
    def run():
        report = expect_failure(drain_as_stated, build, PINNED[0], counterexample)
        task, tokens = draw_tokens(PINNED[0])
        model = build(task, 64, bos_value=torch.tensor(counterexample[:task.vocab_size],
                                                       dtype=torch.float64))
        out = model.attention(tokens)
        bounds = exact_bounds(model, tokens)
        theta = 18 * model.beta * unit_roundoff() + gamma(tokens.shape[1] + 3)  # as above
        limit = (model.gain * (1 - bounds["sink"] * math.exp(-theta))
                 + rounding(model, out["logits"], tokens.shape[1]))
        head = out["head_out"][:, 1:].abs().amax(-1)
        dormant = ~bounds["trigger"]
        assert (head[dormant] > limit[dormant]).all(), (
            "the counterexample's head output is dormant at a non-trigger position: v is no "
            "nonzero BOS value")
        evidence.counterexample(f"v = {counterexample[:4]}... (all {len(counterexample)}): "
                                f"{report}")
        task, tokens = draw_tokens(PINNED[1])
        e0 = torch.zeros(task.vocab_size, dtype=torch.float64)
        e0[0] = 1.0
        model = build(task, 64, bos_value=e0)
        logits = model(tokens)
        kl = kl_rows(task.oracle(tokens), logits)[:, 1:]
        bounds = exact_bounds(model, tokens)
        dormant = ~bounds["trigger"]
        x = tokens[:, 1:][dormant]
        law = torch.from_numpy(task.cond)[x]
        predicted = kl_rows(law, law.log() + model.gain * e0)
        slack = (2 * model.gain * (1 - bounds["sink"][dormant]) * 2
                 + rounding(model, logits, tokens.shape[1]))
        evidence.metric("non-trigger KL with v = e_0", float(kl[dormant].max()))
        assert ((kl[dormant] - predicted).abs() <= slack).all(), "KL is not the shifted KL"
        assert float(predicted.min()) > float(slack.max()), "e_0 should break the predictions"
        shifted = build(task, 64, bos_value=e0 + 5.0)(tokens)
        assert ((shifted.log_softmax(-1) - logits.log_softmax(-1)).abs()
                <= rounding(model, shifted, tokens.shape[1])).all(), "not shift-invariant"
    return run


test_value_drain_is_not_forced_by_the_softmax = check(BB_VALUE_DRAIN, "refutation")(
    drain_refutation())
