r"""Single-layer universality (Gumaan 2025, arXiv:2507.10581): refuted in one reading, corrected.

The listing abstract states, unqualified, that one self-attention layer followed by a
position-wise ReLU FFN approximates any continuous sequence-to-sequence map on a compact
domain; the HTML v1 abstract adds "under suitable conditions". Both were read [V]; the proof
was not, so whether the paper's hypotheses include positional encodings or a mask is
unverified. The claim is registered in the reading with neither (the layer acts on the tokens
as given, every token attending to every token). Such a layer is permutation-equivariant, and
no equivariant map approximates the target that copies token 1 to every position
(``approximation.equivariance-lower-bound``). The refutation derives this for *every* layer of
the class: the lemma's identity :math:`T(X')_2 = T(X)_1` is checked symbolically on the generic
layer, whose weight-dependent maps are undefined functions, and then no real value lies within
:math:`\varepsilon` of both targets of the pinned pair :math:`X = (1, -1)`,
:math:`X' = (-1, 1)`. Random layers appear only as an illustration, each asserted equivariant.
Corrected: with a positional lift one explicit layer copies token 1 to any precision
(``approximation.positional-copy``). The rigorous equivariant version with an FFN before the
attention and :math:`L^p` error is ``boltzmann.universal-approximation``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.universality import (
    copy_first_target,
    copy_first_token,
    copy_leak_bound,
    random_single_layer,
)
from theorems.areas.approximation._bounds import U, layer_rounding_bound
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget
from theorems.strategies import seeds

GUMAAN = {"arxiv": "2507.10581", "ref": "Gumaan (2025)"}
LAYER = (r"A single-layer Transformer is $T(X) = Y + \mathrm{FFN}(Y)$, $Y = X + "
         r"\mathrm{Attn}(X)$, for $X = (x_1, \dots, x_n) \in \mathbb R^{n\times d}$ (rows are "
         r"tokens), with $\mathrm{Attn}$ multi-head softmax self-attention and "
         r"$\mathrm{FFN}(y) = \mathrm{ReLU}(yW_1 + b_1)W_2 + b_2$ applied to each token (any "
         r"widths; tokens may be embedded by zero-padding and read out by a coordinate "
         r"projection). The target $f(X)_i = x_1$ for all $i$ copies token 1. ")
SETTING = (r"The layer sees the tokens as given: no positional encoding and no attention mask "
           r"(every token attends to every token). ")

UA_STATED = Claim(
    id="approximation.single-layer-universal",
    title="Without positions or a mask, one attention layer plus a ReLU FFN approximates every "
          "continuous sequence-to-sequence map (false in this reading)",
    statement=LAYER + SETTING + (
        r"For every compact $K \subset \mathbb R^{n\times d}$, every continuous "
        r"$g: K \to \mathbb R^{n\times d}$ and every $\varepsilon > 0$ there is such a "
        r"single-layer Transformer $T$ with "
        r"$\sup_{X\in K}\lVert T(X) - g(X)\rVert_\infty < \varepsilon$."),
    source=(Source(where="Abstract (arXiv listing; the HTML v1 abstract adds 'under suitable "
                         "conditions')", tag="V", **GUMAAN),
            Source(where="the reading with no positional encoding and no mask (the abstract "
                         "names neither)", tag="D", **GUMAAN)),
    kind="construction", construction="constructions.universality:random_single_layer",
    depends_on=("approximation.equivariance-lower-bound",),
    refutes="reading",
    correction=(
        r"False for $g = f$ (copy token 1) on $K = [-1, 1]^{2\times 1}$, $\varepsilon = 1/4$: "
        r"every such $T$ has $T(X')_2 = T(X)_1$ for $X = (1, -1)$, $X' = (-1, 1)$ "
        r"(approximation.equivariance-lower-bound), so it errs by $\ge 1$ on one of them. It "
        r"holds (i) with positional encodings added to the input, e.g. "
        r"$x_k \mapsto x_k \oplus s\,e_k$, for this target (approximation.positional-copy), or "
        r"(ii) for permutation-equivariant targets with an FFN before the attention and $L^p$ "
        r"error (boltzmann.universal-approximation). With a causal mask the lemma, and with it "
        r"this counterexample, fails; that reading is not checked here."),
    notes="The abstract does not say whether the layer has positional encodings or a mask; "
          "this is the reading with neither, and the paper (whose proof was not reachable) may "
          "mean another.")

UA_LOWER = Claim(
    id="approximation.equivariance-lower-bound",
    title="Without positions or a mask a single layer is permutation-equivariant, so it errs by "
          "‖x₁ − x₂‖∞/2 on copy-token-1",
    statement=LAYER + SETTING + (
        r"Then (a) $T(P_\sigma X) = P_\sigma T(X)$ for every "
        r"permutation matrix $P_\sigma$; (b) with $X'$ the input with tokens 1 and 2 swapped, "
        r"$\max(\lVert T(X) - f(X)\rVert_\infty, \lVert T(X') - f(X')\rVert_\infty) \ge "
        r"\lVert x_1 - x_2\rVert_\infty / 2$, because $T(X')_2 = T(X)_1$ while $f(X)_1 = x_1$, "
        r"$f(X')_2 = x_2$ (triangle inequality)."),
    source=Source(where="permutation-equivariance argument, derived here", tag="D", **GUMAAN),
    kind="lower-bound", construction="constructions.universality:random_single_layer")

UA_COPY = Claim(
    id="approximation.positional-copy",
    title="With a positional lift one explicit layer copies token 1 to any precision",
    statement=LAYER + (
        r"Embed $x_k \mapsto x_k \oplus s\,e_k \oplus 0_d$ (width $2d + n$). The layer of "
        r"constructions.universality.copy_first_token (query $= $ sum of the position "
        r"coordinates, key $=$ the first, score scale $\beta$, value copying the token into "
        r"the scratch block, FFN $z \mapsto \mathrm{ReLU}(z) - \mathrm{ReLU}(-z)$ moving it "
        r"into the token block) satisfies, for every $X$ and $i$, "
        r"$\lVert T(X)_i - x_1\rVert_\infty \le \lambda\max_j\lVert x_j - x_1\rVert_\infty$ "
        r"with $\lambda = (n-1)e^{-\beta s^2}/(1 + (n-1)e^{-\beta s^2})$: below any "
        r"$\varepsilon$ on a bounded domain for $\beta$ large."),
    source=Source(where="corrected statement (i): positional encodings; construction ours",
                  tag="D", **GUMAAN),
    kind="construction", construction="constructions.universality:copy_first_token")


UA_PROBE = Claim(
    id="approximation.trained-positional-probe",
    title="Trained with learned positions, one layer beats the position-free bound on "
          "copy-token-1 (a probe)",
    statement=(
        r"The one run with seed 0 (a statement about that seeded run, not about training in "
        r"general) of a single layer with a linear token embedding, learned positional "
        r"vectors $p_k \in "
        r"\mathbb R^{16}$, one softmax head with residual, a ReLU FFN of width 32 with "
        r"residual and a linear readout, trained by Adam (200 steps, cosine schedule from "
        r"$10^{-2}$, batches of 128 uniform $X \in [-1,1]^{2\times 1}$, float64) on "
        r"the squared error to $f(X)_i = x_1$, has sup error below $1/2$ on the 21-point grid "
        r"of $[-1, 1]^{2\times 1}$."),
    source=Source(where="weak empirical probe of corrected statement (i); design ours",
                  tag="D", **GUMAAN),
    kind="dynamics", construction="empirics.universality:ProbeLayer",
    depends_on=("approximation.equivariance-lower-bound",),
    notes="On that grid every position-free layer errs by at least 1 "
          "(approximation.equivariance-lower-bound at X = (1, -1)), which the probe's 1/2 "
          "beats. The probe measures one training run; it proves nothing about approximation "
          "rates. The full config sweeps FFN widths 16 to 1024, both with and without "
          "positions, and adds the equivariant target x_k mean(x).",
    result_dependencies={
        "approximation.equivariance-lower-bound":
            "the bound it beats is that claim's ||x1 - x2||_inf / 2; the check compares the "
            "trained probe's error with that formula, not with random_single_layer",
    },
)


# --- strategies --------------------------------------------------------------------------

@st.composite
def random_cases(draw) -> dict:
    """A random layer (heads, widths, weight scale) and a seeded batch of 8 inputs."""
    return {"n": draw(st.integers(2, 6)), "d": draw(st.integers(1, 4)),
            "n_heads": draw(st.integers(1, 2)), "d_ff": draw(st.sampled_from([4, 16])),
            "scratch": draw(st.integers(0, 2)), "weight_std": draw(st.sampled_from([0.5, 1, 4])),
            "seed": draw(seeds()), "data_seed": draw(seeds())}


def _inputs(case: dict, bound: float = 2.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(case["data_seed"])
    return bound * (2 * torch.rand(8, case["n"], case["d"], generator=generator,
                                   dtype=torch.float64) - 1)


def _layer(build, case: dict):
    return build(case["d"], n_heads=case["n_heads"], d_ff=case["d_ff"],
                 scratch=case["scratch"], weight_std=case["weight_std"], seed=case["seed"],
                 max_len=case["n"])


def _swap12(x: torch.Tensor) -> torch.Tensor:
    order = list(range(x.shape[1]))
    order[0], order[1] = 1, 0
    return x[:, order]


# --- UA.2: equivariance and the lower bound --------------------------------------------------

def lower_bound_check(build=random_single_layer):
    """(a) equivariance under a random permutation, to the layer's rounding bound on both sides;
    (b) the lower bound for copy-token-1 on (X, X'), less the same rounding bounds."""
    @budget(0.5)
    @given(case=random_cases(), perm_seed=seeds())
    @example(case={"n": 2, "d": 1, "n_heads": 1, "d_ff": 4, "scratch": 0, "weight_std": 1,
                   "seed": 0, "data_seed": 0}, perm_seed=0)
    # perm_seed 0 permutes 2 tokens by the identity, which tests no equivariance: this pinned
    # 3-cycle (randperm(3) under seed 1 is [1, 2, 0]) fails a layer that sees positions or a
    # mask on every run, not only when the search draws a moving permutation
    @example(case={"n": 3, "d": 1, "n_heads": 1, "d_ff": 4, "scratch": 0, "weight_std": 1,
                   "seed": 0, "data_seed": 0}, perm_seed=1)
    def run(case, perm_seed):
        model = _layer(build, case)
        x = _inputs(case)
        perm = torch.randperm(case["n"], generator=torch.Generator().manual_seed(perm_seed))
        out, out_perm = model(x), model(x[:, perm])
        bound = layer_rounding_bound(model, x)
        tol = bound[:, perm] + layer_rounding_bound(model, x[:, perm])
        defect = (out_perm - out[:, perm]).abs()
        evidence.ratio(float((defect / tol).max()))
        assert bool((defect <= tol).all()), (
            f"T(PX) != P T(X): defect {float(defect.max()):.3g} above the rounding bound "
            f"{float(tol[defect > tol].min()):.3g}")
        # (b): errors of the computed layer on X and on X' (tokens 1, 2 swapped)
        swapped = _swap12(x)
        err = (model(x) - copy_first_target(x)).abs().amax(dim=(1, 2))
        err_swapped = (model(swapped) - copy_first_target(swapped)).abs().amax(dim=(1, 2))
        slack = layer_rounding_bound(model, x)[:, 0] + layer_rounding_bound(model, swapped)[:, 1]
        gap = ((x[:, 0] - x[:, 1]).abs() - slack).amax(dim=-1)           # (B,)
        lower = (1 - 2 * U) * gap / 2
        worst = torch.maximum(err, err_swapped)
        evidence.margin(float((worst - lower).min()))
        assert bool((worst >= lower).all()), (
            f"max error {float(worst.min()):.4g} below the lower bound {float(lower.max()):.4g}")
    return run


test_equivariance_forces_the_lower_bound = check(UA_LOWER, "property")(lower_bound_check())


# --- the generic layer, symbolically ---------------------------------------------------------

@dataclass(frozen=True)
class LayerClass:
    """The single layers a statement quantifies over. The claims' class has no positional
    encoding (``positions=False``) and no causal mask (``causal=False``); mutants add one."""
    positions: bool = False
    causal: bool = False


POSITION_FREE = LayerClass()
#: Head counts the symbolic checks run: each head's average is of the same form with its own
#: undefined functions, and the token-wise map reads every head, so an identity for H heads is
#: the conjunction of the per-head ones; 1 and 3 show it with and without several heads.
HEADS = (1, 3)


def generic_layer(tokens, layer_class: LayerClass = POSITION_FREE, heads: int = 1) -> list:
    r"""SymPy expressions :math:`T(X)_1, \dots, T(X)_n` of the generic layer of ``layer_class``
    on ``tokens`` (SymPy expressions standing for the tokens :math:`x_1, \dots, x_n`).

    Every map that depends on widths or weights is an undefined function, so an identity
    between these expressions holds for every layer of the class, each being an instance:

    - the embedding (zero padding, scratch, and the lift if ``positions``):
      :math:`e_i = \iota(x_i)`, or :math:`\iota(x_i, i)`;
    - head :math:`h`: score :math:`\varsigma_h(e_i, e_j) = \tau(e_iW_Q^h)\cdot(e_jW_K^h)`,
      value :math:`\nu_h(e_j) = e_jW_V^h`, and
      :math:`a^h_i = \sum_{j\in K(i)} e^{\varsigma_h(e_i, e_j)}\nu_h(e_j) /
      \sum_{j\in K(i)} e^{\varsigma_h(e_i, e_j)}` with :math:`K(i) = \{1..n\}`, or
      :math:`\{1..i\}` if ``causal``;
    - :math:`T(X)_i = \varphi(e_i, a^1_i, \dots, a^H_i)`: the output projections, both
      residuals, the FFN and the readout act on token :math:`i` alone.
    """
    import sympy

    iota, phi = sympy.Function("iota"), sympy.Function("phi")
    embedded = [iota(x, i + 1) if layer_class.positions else iota(x)
                for i, x in enumerate(tokens)]
    outputs = []
    for i, e in enumerate(embedded):
        keys = embedded[:i + 1] if layer_class.causal else embedded
        averages = []
        for h in range(heads):
            score, value = sympy.Function(f"varsigma{h}"), sympy.Function(f"nu{h}")
            weights = [sympy.exp(score(e, k)) for k in keys]
            averages.append(sympy.Add(*(w * value(k) for w, k in zip(weights, keys, strict=True)))
                            / sympy.Add(*weights))
        outputs.append(phi(e, *averages))
    return outputs


def permutation_defects(n: int, layer_class: LayerClass = POSITION_FREE, heads: int = 1):
    r"""Yield ``(sigma, i, defect)``: :math:`T(P_\sigma X)_i - T(X)_{\sigma(i)}` of the generic
    layer, simplified, for every permutation :math:`\sigma` of :math:`n` tokens (with
    :math:`(P_\sigma X)_i = x_{\sigma(i)}`) and every position :math:`i`."""
    import sympy

    x = sympy.symbols(f"x1:{n + 1}")
    out = generic_layer(x, layer_class, heads)
    for sigma in itertools.permutations(range(n)):
        permuted = generic_layer([x[j] for j in sigma], layer_class, heads)
        for i in range(n):
            yield sigma, i, sympy.simplify(permuted[i] - out[sigma[i]])


def equivariance_symbolic_check(layer_class: LayerClass = POSITION_FREE, max_n: int = 3):
    """(a) for every layer of the class: the generic layer's identity
    :math:`T(P_\\sigma X) = P_\\sigma T(X)`, for every permutation of 2 to ``max_n`` tokens."""
    def run():
        for n in range(2, max_n + 1):
            for heads in HEADS:
                for sigma, i, defect in permutation_defects(n, layer_class, heads):
                    assert defect == 0, (
                        f"T(P X)_{i + 1} != T(X)_{sigma[i] + 1} for sigma = {sigma} "
                        f"({layer_class}, {heads} heads): the generic layer's difference is "
                        f"{defect}")
            evidence.cases(len(HEADS))
    return run


test_every_position_free_layer_is_equivariant = check(UA_LOWER, "symbolic")(
    equivariance_symbolic_check())


# --- UA.1: the statement in this reading, and its refutation ---------------------------------

PINNED = torch.tensor([[[1.0], [-1.0]]], dtype=torch.float64)   # X = (1, -1); X' = (-1, 1)
EPSILON = 0.25
#: Seeds of the random layers that illustrate the lemma (the refutation does not rest on them).
ILLUSTRATION_SEEDS = (0, 1, 2)


def refutation(layer_class: LayerClass = POSITION_FREE, target=copy_first_target):
    r"""The statement fails at :math:`K = [-1, 1]^{2\times 1}`, :math:`\varepsilon = 1/4` and
    ``target`` (copy token 1), for every layer of ``layer_class``:

    1. the lemma (approximation.equivariance-lower-bound (a), :math:`\sigma` the swap): the
       generic layer has :math:`T(X')_2 = T(X)_1` identically, so any layer of the class gives
       both the same value :math:`t`;
    2. exactly (SymPy, over the reals): no :math:`t` lies within :math:`\varepsilon` of both
       :math:`g(X)_1` and :math:`g(X')_2`; the best :math:`t`, their midpoint, errs by half
       their gap (1 here), the margin over :math:`\varepsilon` recorded.

    Random layers of the class then illustrate step 1, each asserted to satisfy it up to its
    rounding bound (``theorems.areas.approximation._bounds``). Returns the counterexample text.
    """
    def run() -> str:
        import sympy

        for heads in HEADS:
            defects = list(permutation_defects(2, layer_class, heads))
            swap = next(d for sigma, i, d in defects if sigma == (1, 0) and i == 1)
            assert swap == 0, (
                f"T(X')_2 = T(X)_1 does not follow for every layer of {layer_class} "
                f"({heads} heads): the generic layer's difference is {swap}")
        swapped = _swap12(PINNED)
        # the targets are floats exactly representable (+-1), so Rational() reads them exactly
        first = sympy.Rational(float(target(PINNED)[0, 0, 0]))
        second = sympy.Rational(float(target(swapped)[0, 1, 0]))
        t, eps = sympy.Symbol("t", real=True), sympy.Rational(EPSILON)
        feasible = sympy.Intersection(
            sympy.solveset(sympy.Abs(t - first) < eps, t, sympy.Reals),
            sympy.solveset(sympy.Abs(t - second) < eps, t, sympy.Reals))
        assert feasible is sympy.S.EmptySet, (
            f"a common value t = T(X)_1 = T(X')_2 in {feasible} is within eps = {EPSILON} of "
            f"both targets g(X)_1 = {first} and g(X')_2 = {second}")
        best_error = sympy.Abs(first - second) / 2
        evidence.margin(float(best_error - eps))
        for seed in ILLUSTRATION_SEEDS:
            model = random_single_layer(1, max_len=2, seed=seed, causal=layer_class.causal,
                                        positions=2.0 if layer_class.positions else None)
            out, out_swapped = model(PINNED), model(swapped)
            slack = float(layer_rounding_bound(model, PINNED)[0, 0, 0]
                          + layer_rounding_bound(model, swapped)[0, 1, 0])
            defect = float((out_swapped[0, 1, 0] - out[0, 0, 0]).abs())
            assert defect <= slack, (
                f"illustration: the random layer of seed {seed} has |T(X')_2 - T(X)_1| = "
                f"{defect:.3g} above its rounding bound {slack:.3g}")
            evidence.metric("illustration_error", float(max(
                (out - target(PINNED)).abs().max(), (out_swapped - target(swapped)).abs().max())),
                worse="lower")
        return (f"g(X)_i = x_1 (copy token 1) on K = [-1,1]^(2x1), eps = {EPSILON}: X = (1, -1), "
                f"X' = (-1, 1). Every layer without positions or a mask has T(X')_2 = T(X)_1 "
                f"(generic layer, SymPy, {HEADS} heads), and no t is within eps of both "
                f"g(X)_1 = {first} and g(X')_2 = {second}: every such layer errs by >= "
                f"{best_error} on one of them.")
    return run


def no_single_layer_without_positions_copies_token_one():
    evidence.counterexample(refutation()())


test_no_single_layer_without_positions_copies_token_one = check(UA_STATED, "refutation")(
    no_single_layer_without_positions_copies_token_one)


# --- the corrected statement (i): positions ------------------------------------------------

@st.composite
def copy_cases(draw) -> dict:
    return {"n": draw(st.integers(2, 6)), "d": draw(st.integers(1, 4)),
            "beta": draw(st.sampled_from([0.25, 1.0, 4.0, 20.0])),
            "scale": draw(st.sampled_from([0.5, 1.0, 2.0])), "bound": draw(st.sampled_from(
                [1.0, 10.0])), "data_seed": draw(seeds())}


def copy_check(build=copy_first_token):
    r"""The leak bound :math:`\lambda\max_j\lVert x_j - x_1\rVert_\infty`, plus the layer's
    rounding bound and the subtraction's :math:`u`, on 8 seeded inputs per example. The
    computed :math:`\lambda` (an exp, a product, a sum, a division) and the spread's
    subtraction carry relative error :math:`\le 6u`, covered by the factor :math:`1 + 8u`."""
    @budget(0.5)
    @given(case=copy_cases())
    @example(case={"n": 2, "d": 1, "beta": 20.0, "scale": 2.0, "bound": 1.0, "data_seed": 0})
    @example(case={"n": 6, "d": 2, "beta": 0.25, "scale": 0.5, "bound": 10.0, "data_seed": 1})
    def run(case):
        model = build(case["d"], case["n"], beta=case["beta"], scale=case["scale"])
        x = _inputs(case, case["bound"])
        leak = copy_leak_bound(case["n"], case["beta"], case["scale"])
        spread = (x - x[:, :1]).abs().amax(dim=(1, 2))[:, None, None]     # (B, 1, 1)
        err = (model(x) - copy_first_target(x)).abs()
        tol = (1 + 8 * U) * leak * spread + layer_rounding_bound(model, x) + U * err
        evidence.ratio(float((err / tol).max()))
        assert bool((err <= tol).all()), (
            f"error {float(err.max()):.4g} above the leak bound {leak * float(spread.max()):.4g}")
    return run


test_positions_let_one_layer_copy_token_one = check(UA_COPY, "property")(copy_check())


# --- UA.3: a trained probe -----------------------------------------------------------------


PROBE_CEILING = 0.5


def probe_check(**overrides):
    """Run the ``single-layer-probe`` smoke config (``overrides`` for mutants)."""
    def run():
        from empirics.universality import EXPERIMENT

        result = EXPERIMENT("smoke", device="cpu", **overrides)
        for name, table in result.tables.items():
            evidence.table(name, table["header"], table["rows"])
        for name, fig in result.figures.items():
            evidence.figure(fig, name)
        evidence.cases(1)
        errors = {k: v for k, v in result.metrics.items() if k.endswith("sup_error")}
        for key, err in errors.items():
            evidence.metric(key, err)
            evidence.margin(PROBE_CEILING - err)
            assert err < PROBE_CEILING, (
                f"{key}: sup error {err:.3g} on the grid is not below {PROBE_CEILING}")
    return run


test_learned_positions_beat_the_equivariance_bound = check(UA_PROBE, "empirical")(
    probe_check())
