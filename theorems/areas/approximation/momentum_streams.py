r"""Tied sublayers as exact gradient oracles, and momentum streams as filters (Gai, Huang, Wu
2026, "Momentum Streams for Optimizer-Inspired Transformers", arXiv:2605.24425).

Read in the paper [V]: the abstract (a pre-norm layer's residual update as a first-order
optimiser step on a surrogate token energy, attention and the MLP as gradient oracles), the
opening of the introduction (which credits that reading to Geshkovski et al. 2025 and Zimin et
al. 2026) and the table of contents (Appendix F, "Momentum as Second-Order Residual-Stream
Filtering"). Not read: the appendix itself, the code, and the pretraining results
(TMMFormer's gains and the flatter-minima claim, GPU scale). What is checked is ours [D]: the
two tied special cases in which the gradient-oracle reading is exact, and the identities of
the momentum stream (see :mod:`constructions.momentum_streams`). With pre-norm the gradient is
taken at the normalised state, which is why the paper's energy is only a surrogate; that is
not checked.

Tolerances (``attention_gradient_check``). The attention and the autograd gradient of
:math:`E_{att}` are compared through their distance to the exact :math:`A(x)`. The attention
is a softmax average of the keys: :func:`theorems.areas.approximation._bounds.
softmax_attention_bound` with scores :math:`\beta x\cdot k_i` (:math:`S = \beta\max_i|x|\cdot
|k_i|`, :math:`\Delta = \gamma_{d+1}S`). The gradient: ``torch.logsumexp`` computes
:math:`\ell = m + \log\sum_i e^{\hat s_i - m}` (:math:`m` the max), whose backward weights are
:math:`e^{\hat s_i - \hat\ell}`. Each shifted score is off by :math:`2uS`, each exponential by
1 ulp (:math:`2u`), the :math:`n`-term sum by :math:`\gamma_{n-1}`; the log adds 1 ulp of
:math:`\log\sum \le \log n` and the final add :math:`u(S + \log n)`: so
:math:`|\hat\ell - \ell(\hat s)| \le 3uS + 3u\log n + \gamma_{n+2}`, and
:math:`\hat s_i - \hat\ell` another :math:`u(2S + \log n)`. Each weight is then off by a
relative :math:`2\Delta + 5uS + 4u\log n + \gamma_{n+4}` (:math:`2\Delta` for the computed
scores), and the backward's three scalings (:math:`-1/\beta`, :math:`\beta`, the upstream
gradient) and the :math:`n`-term product with the keys add :math:`\gamma_{n+3}` of
:math:`\sum_i p_i|k_i| \le \max_i|k_i|`. First-order, per coordinate.

(``mlp_gradient_check``). Autograd's backward of :math:`-\frac12\mathrm{ReLU}(z)^2` is
:math:`-\mathrm{ReLU}(z)` exactly (scalings by :math:`\tfrac12` and 2, and a mask), so both
sides are an :math:`m`-term product of :math:`W^\top` with :math:`\mathrm{ReLU}(\hat z)`, where
each :math:`\hat z` is off by :math:`E_z = \gamma_{d+1}(|x||W|^\top + |b|)` and ReLU is
1-Lipschitz: each side is within :math:`E_z|W| + \gamma_m\,\mathrm{ReLU}(|\hat z|)|W|` of the
exact value.

The momentum checks need no tolerance: with integer states and biases in :math:`[-8, 8]`,
:math:`\mu \in \{0, \tfrac14, \tfrac12, \tfrac34\}` and layer matrices with entries in
:math:`\tfrac14\{-2, \dots, 2\}` (:math:`d \le 3`), every intermediate value of
:math:`L \le 6` steps is a dyadic rational with at most :math:`2L \le 12` fractional bits and
magnitude below :math:`8\cdot 5^6 < 2^{17}` (a step multiplies the sup norm by at most
:math:`1 + 2\mu + d/2 \le 4` and adds at most 8), so float64 represents every one of them
exactly and the two forms agree bit for bit.
"""

from __future__ import annotations

import math

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.momentum_streams import (
    filter_weights,
    hopfield_energy,
    mlp_energy,
    momentum_stream,
    second_order_stream,
    tied_attention,
    tied_mlp,
)
from theorems.areas.approximation._bounds import U, softmax_attention_bound
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.strategies import seeds

MOMENTUM = {"arxiv": "2605.24425", "ref": "Gai, Huang, Wu (2026), Momentum Streams"}

MS_GRADIENTS = Claim(
    id="approximation.tied-sublayers-are-gradients",
    title="Attention with values equal to keys, and the tied ReLU MLP, are exact negative "
          "energy gradients",
    statement=(
        r"For keys $k_1, \dots, k_n \in \mathbb R^d$ (the rows of $K$) and $\beta > 0$, "
        r"attention whose values are its keys, $A(x) = \sum_i \mathrm{softmax}(\beta Kx)_i\,"
        r"k_i$, equals $-\nabla_x E_{att}(x)$ with $E_{att}(x) = -\beta^{-1}\log\sum_i "
        r"e^{\beta k_i\cdot x}$ (the Hopfield energy) at every $x \in \mathbb R^d$. "
        r"For $W \in \mathbb R^{m\times d}$ with rows $w_j$ and $b \in \mathbb R^m$, the tied "
        r"MLP $M(x) = W^\top\mathrm{ReLU}(Wx + b)$ equals $-\nabla_x E_{mlp}(x)$ with "
        r"$E_{mlp}(x) = -\tfrac12\sum_j\mathrm{ReLU}(w_j\cdot x + b_j)^2$ at every $x$."),
    source=(Source(where="Abstract (attention and the MLP as gradient oracles of a surrogate "
                         "token energy)", tag="V", **MOMENTUM),
            Source(where="the two exact tied special cases, derived here", tag="D",
                   **MOMENTUM)),
    kind="identity", construction="constructions.momentum_streams:tied_attention",
    notes="The MLP half is checked for ReLU; any activation sigma with antiderivative Phi "
          "gives the same identity with E_mlp = -sum_j Phi(w_j.x + b_j). An untied MLP "
          "(W_out != W^T) is a gradient field only when its Jacobian W_out^T diag(sigma') W "
          "is symmetric.")

MS_FILTER = Claim(
    id="approximation.momentum-stream-filter",
    title="A momentum stream is a second-order recursion, and for fixed forces a causal filter",
    statement=(
        r"For layers $F_0, \dots, F_{L-1}$ (maps of the state) and $\mu \in \mathbb R$, the "
        r"momentum stream $v_0 = 0$, $v_{l+1} = \mu v_l + F_l(x_l)$, $x_{l+1} = x_l + "
        r"v_{l+1}$ has the same states as the second-order recursion $x_{l+1} = x_l + "
        r"\mu(x_l - x_{l-1}) + F_l(x_l)$ with $x_{-1} = x_0$. "
        r"For forces that do not depend on the state, $x_L = x_0 + \sum_{l=0}^{L-1} c_l F_l$ "
        r"with $c_l = \sum_{k=0}^{L-1-l}\mu^k$, which is $(1 - \mu^{L-l})/(1 - \mu)$ for "
        r"$\mu \ne 1$."),
    source=(Source(where="Appendix F title, Momentum as Second-Order Residual-Stream "
                         "Filtering (table of contents only)", tag="V", **MOMENTUM),
            Source(where="the identities, derived here", tag="D", **MOMENTUM)),
    kind="identity", construction="constructions.momentum_streams:momentum_stream",
    notes="With F_l = A (attention whose values are its keys), the two claims together make "
          "the stream heavy-ball descent on the Hopfield energy with unit step: x_{l+1} = x_l "
          "+ mu (x_l - x_{l-1}) - grad E_att(x_l). That corollary has no check of its own.")


# --- MS.1: the gradient oracles ----------------------------------------------------------------

@st.composite
def attention_cases(draw) -> dict:
    return {"d": draw(st.integers(1, 4)), "n": draw(st.integers(1, 8)),
            "beta": draw(st.sampled_from([0.1, 1.0, 4.0, 20.0])),
            "scale": draw(st.sampled_from([0.5, 1.0, 3.0])), "seed": draw(seeds())}


def _gaussian(case: dict, salt: int, *shape: int) -> torch.Tensor:
    """A seeded Gaussian array; ``salt`` keeps the arrays of one example independent."""
    generator = torch.Generator().manual_seed(case["seed"] * 4 + salt)
    return case["scale"] * torch.randn(*shape, generator=generator, dtype=torch.float64)


def autograd_gradient(energy, x: torch.Tensor, *args) -> torch.Tensor:
    """:math:`\\nabla_x` of ``energy(x, *args).sum()`` by autograd (rows of ``x`` independent)."""
    x = x.detach().clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(energy(x, *args).sum(), x)
    return gradient


def autograd_softmax_bound(x: torch.Tensor, keys: torch.Tensor, beta: float) -> torch.Tensor:
    """The module docstring's bound on |autograd's -grad E_att - A(x)|, per coordinate."""
    n, d = keys.shape
    S = beta * (x.abs() @ keys.abs().T).amax(dim=-1, keepdim=True)      # (B, 1)
    relative = (2 * gamma(d + 1) * S + 5 * U * S + 4 * U * math.log(n) + gamma(n + 4)
                + gamma(n + 3))
    return relative * keys.abs().amax(dim=0)                              # (B, d)


def attention_gradient_check(attention=tied_attention, energy=hopfield_energy):
    @budget(0.5)
    @given(case=attention_cases())
    @example(case={"d": 3, "n": 8, "beta": 20.0, "scale": 3.0, "seed": 0})  # saturated
    @example(case={"d": 1, "n": 1, "beta": 0.1, "scale": 0.5, "seed": 1})  # one key
    def run(case):
        keys = _gaussian(case, 0, case["n"], case["d"])
        x = _gaussian(case, 1, 4, case["d"])
        beta = case["beta"]
        out = attention(x, keys, beta)
        minus_gradient = -autograd_gradient(energy, x, keys, beta)
        tol = (softmax_attention_bound(x[:, None, :], keys, keys, beta)[:, 0, :]
               + autograd_softmax_bound(x, keys, beta))
        err = (out - minus_gradient).abs()
        evidence.ratio(float((err / tol).max()))
        assert bool((err <= tol).all()), (
            f"attention with values = keys differs from -grad E_att by {float(err.max()):.3g} "
            f"(tolerance {float(tol.max()):.3g})")
    return run


test_attention_with_tied_values_is_minus_the_energy_gradient = check(
    MS_GRADIENTS, "property")(attention_gradient_check())


def symbolic_attention_gradient(n: int = 3, d: int = 2, energy=None):
    """SymPy: :math:`-\\partial E_{att}/\\partial x_a - A(x)_a` simplifies to 0 for symbolic
    keys, state and beta (``energy`` replaces the energy's formula, for a mutant)."""
    def run():
        import sympy as sp

        beta = sp.symbols("beta", positive=True)
        x = sp.symbols(f"x0:{d}", real=True)
        K = sp.Matrix(n, d, lambda i, a: sp.Symbol(f"k{i}{a}", real=True))
        scores = [beta * sum(K[i, a] * x[a] for a in range(d)) for i in range(n)]
        E = (energy or (lambda s, b: -sp.log(sum(sp.exp(v) for v in s)) / b))(scores, beta)
        Z = sum(sp.exp(v) for v in scores)
        for a in range(d):
            attention = sum(sp.exp(scores[i]) * K[i, a] for i in range(n)) / Z
            residual = sp.cancel(sp.together(-sp.diff(E, x[a]) - attention))
            assert residual == 0, f"coordinate {a}: -dE/dx - A(x) = {residual}, not 0"
        evidence.cases(d)
    return run


test_the_attention_identity_holds_symbolically = check(MS_GRADIENTS, "symbolic")(
    symbolic_attention_gradient())


@st.composite
def mlp_cases(draw) -> dict:
    return {"d": draw(st.integers(1, 5)), "n": draw(st.integers(1, 16)),
            "scale": draw(st.sampled_from([0.5, 1.0, 3.0])), "seed": draw(seeds())}


def mlp_gradient_check(mlp=tied_mlp, energy=mlp_energy):
    @budget(0.5)
    @given(case=mlp_cases())
    @example(case={"d": 2, "n": 16, "scale": 3.0, "seed": 0})
    def run(case):
        W = _gaussian(case, 0, case["n"], case["d"])                     # (m, d)
        b = _gaussian(case, 2, case["n"])
        x = _gaussian(case, 1, 4, case["d"])
        out = mlp(x, W, b)
        minus_gradient = -autograd_gradient(energy, x, W, b)
        z = x @ W.T + b
        E_z = gamma(case["d"] + 1) * (x.abs() @ W.abs().T + b.abs())
        side = E_z @ W.abs() + gamma(case["n"]) * (torch.relu(z).abs() @ W.abs())
        tol = 2 * side
        err = (out - minus_gradient).abs()
        evidence.margin(float((tol - err).min()))
        assert bool((err <= tol).all()), (
            f"the tied MLP differs from -grad E_mlp by {float(err.max()):.3g}")
    return run


test_the_tied_relu_mlp_is_minus_the_energy_gradient = check(MS_GRADIENTS, "property")(
    mlp_gradient_check())


# --- MS.1: the momentum stream -------------------------------------------------------------------

@st.composite
def dyadic_streams(draw) -> dict:
    """Integer states and biases in [-8, 8], mu in {0, 1/4, 1/2, 3/4}, layer matrices with
    entries in {-2, ..., 2}/4 (the exactness argument of the module docstring)."""
    d, L = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    generator = torch.Generator().manual_seed(draw(seeds()))

    def integers(low, high, *shape):
        return torch.randint(low, high + 1, shape, generator=generator).double()

    return {"x0": integers(-8, 8, 2, d), "mu": draw(st.sampled_from([0.0, 0.25, 0.5, 0.75])),
            "A": integers(-2, 2, L, d, d) / 4, "b": integers(-8, 8, L, d)}


def affine_layers(case: dict) -> list:
    return [lambda x, A=A, b=b: x @ A.T + b for A, b in zip(case["A"], case["b"], strict=True)]


def two_forms_check(stream=momentum_stream):
    @budget(0.5)
    @given(case=dyadic_streams())
    def run(case):
        first = stream(case["x0"], affine_layers(case), case["mu"])
        second = second_order_stream(case["x0"], affine_layers(case), case["mu"])
        evidence.cases(len(first))
        assert len(first) == len(second), f"{len(first)} and {len(second)} states"
        for step, (a, b) in enumerate(zip(first, second, strict=True)):
            assert torch.equal(a, b), (
                f"step {step}: the momentum stream and the second-order recursion differ by "
                f"{float((a - b).abs().max()):.3g} (both are exact here)")
    return run


test_the_momentum_stream_is_a_second_order_recursion = check(MS_FILTER, "property")(
    two_forms_check())


def filter_check(weights=filter_weights):
    @budget(0.5)
    @given(case=dyadic_streams())
    def run(case):
        forces = case["b"]                                               # (L, d): fixed
        layers = [lambda x, f=f: x * 0 + f for f in forces]
        states = momentum_stream(case["x0"], layers, case["mu"])
        c = weights(len(forces), case["mu"])
        assert len(c) == len(forces), f"{len(c)} weights for {len(forces)} forces"
        filtered = case["x0"] + sum(c_l * f for c_l, f in zip(c, forces, strict=True))
        assert torch.equal(states[-1], filtered), (
            f"x_L differs from x_0 + sum_l c_l F_l by "
            f"{float((states[-1] - filtered).abs().max()):.3g}")
    return run


test_fixed_forces_are_filtered = check(MS_FILTER, "property")(filter_check())


def symbolic_stream_check(stream=momentum_stream, weights=filter_weights, n_layers: int = 4):
    """SymPy: for undefined layer functions the two forms agree for L = 1..n_layers; for
    symbolic constant forces x_L = x_0 + sum c_l F_l, and c_l (1 - mu) = 1 - mu^{L-l}."""
    def run():
        import sympy as sp

        x0, mu = sp.symbols("x0 mu", real=True)
        for L in range(1, n_layers + 1):
            layers = [sp.Function(f"F{l}") for l in range(L)]
            first = stream(x0, layers, mu)
            second = second_order_stream(x0, layers, mu)
            assert len(first) == len(second) == L + 1, f"L={L}: {len(first)}, {len(second)}"
            for step, (a, b) in enumerate(zip(first, second, strict=True)):
                assert sp.expand(a - b) == 0, (
                    f"L={L}, step {step}: the two forms differ by {sp.expand(a - b)}")
            forces = sp.symbols(f"f0:{L}", real=True)
            fixed = stream(x0, [lambda x, f=f: f for f in forces], mu)[-1]
            c = weights(L, mu)
            assert len(c) == L, f"L={L}: {len(c)} weights"
            residual = sp.expand(fixed - x0 - sum(c_l * f for c_l, f in zip(c, forces,
                                                                             strict=True)))
            assert residual == 0, f"L={L}: x_L - x_0 - sum c_l F_l = {residual}"
            for l, c_l in enumerate(c):
                closed = sp.expand(c_l * (1 - mu) - (1 - mu ** (L - l)))
                assert closed == 0, f"L={L}, l={l}: c_l (1 - mu) - (1 - mu^(L-l)) = {closed}"
        evidence.cases(n_layers)
    return run


test_the_stream_identities_hold_symbolically = check(MS_FILTER, "symbolic")(
    symbolic_stream_check())
