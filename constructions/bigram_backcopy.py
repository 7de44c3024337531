r"""Active-dormant heads on the Bigram-Backcopy task (Guo et al. 2024, arXiv:2410.13835).

Task (the oracle) [V: the authors' code, ``BBM/data.py``]. Tokens :math:`0..V-1`, a BOS
(id :math:`V`) at position 0, a bigram matrix ``cond`` (row :math:`x` is the law of the
token after :math:`x`) and a marginal :math:`\pi`. The triggers are the ``n_triggers`` most
probable tokens under :math:`\pi`. The first data token is drawn from :math:`\pi` without
the triggers, renormalised; then, with :math:`x` the current and :math:`x_p` the previous
token, the next token is :math:`x_p` if :math:`x` is a trigger (back-copy) and is drawn from
``cond[x]`` otherwise. The authors estimate ``cond`` from a corpus; here it is a synthetic
Dirichlet matrix and :math:`\pi` defaults to its stationary law (ours [D]: nothing is
downloaded). The Bayes oracle at position :math:`i \ge 1` is the delta at :math:`x_{i-1}` on
triggers and ``cond[x_i]`` elsewhere.

Construction [D] (:func:`active_dormant_model`): one attention head plus an MLP on the current
token, residual stream [token one-hot (V + 1) | position one-hot (max_len)].

* Scores: :math:`s_{ij} = \beta\,1[j = i-1] + 2\beta\,(1 - \mathrm{trig}(x_i))\,1[j = 0]`.
  A trigger query puts mass :math:`\ge 1/(1 + i e^{-\beta})` on :math:`i - 1`; a non-trigger
  query puts mass :math:`w_0 \ge 1/(1 + e^{-\beta} + (i-1)e^{-2\beta})` on the BOS
  (:math:`1/(1 + e^{-3\beta})` at :math:`i = 1`).
* Values: :math:`\gamma e_x` for a data token :math:`x`; the BOS value is ``bos_value``,
  **0** by default, so a non-trigger query's head output is within :math:`\gamma(1 - w_0)` of
  zero: the head is *dormant*. On triggers it is *active*: it writes :math:`\gamma e_{x_{i-1}}`.
  A BOS value :math:`v` is written with the same gain, :math:`\gamma v`.
* MLP: the logits :math:`\log \mathrm{cond}[x]` for a non-trigger :math:`x`, 0 for triggers
  and the BOS.

Hence at a non-trigger position the logits are :math:`\log\mathrm{cond}[x] + \delta`,
:math:`0 \le \delta_c \le \gamma(1 - w_0)`, and :math:`\mathrm{KL} \le \gamma(1 - w_0)`; at a
trigger, :math:`\mathrm{KL} \le \ln(1 + (V-1)e^{-\gamma(2w - 1)})`. A BOS value
:math:`v \ne 0` shifts every non-trigger logit vector by :math:`\gamma w_0 v`: the prediction
changes unless :math:`v \in \mathrm{span}(\mathbf 1)`, the *value-state drain* of the paper.

The caricature [D, ours, not the paper's]: at a dormant position, BOS logit :math:`a` against
:math:`n - 1` zeros, :math:`p = e^a/(e^a + n - 1)`, BOS value :math:`b`, other values with
:math:`E\|\bar v\|^2 = s^2/(n-1)`: :math:`\mathcal L(a, b) = p^2 b^2 + (1-p)^2 s^2/(n-1)`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from constructions import _validate as check
from constructions._kernels import hook_with_axes
from constructions.layers import HookPoint
from constructions.residual_layout import (
    AttentionBlock,
    Interface,
    MlpBlock,
    ResidualLayout,
    fixed_context_length,
)

# One-line TransformerLens exports for the docs pages (constructions.export.export_line).
TRANSFORMER_LENS_EXAMPLES = {
    "active_dormant_model": "to_transformer_lens(active_dormant_model("
                            "BigramBackcopy(torch.full((4, 4), 0.25).numpy(), 1), max_len=8))",
}


def _power_of_four(n: int) -> int:
    """The least 4^m >= n: a head width whose sqrt(d_head) is a power of two, so that the
    export's folding of TransformerLens's 1/sqrt(d_head) into W_Q and its division by
    sqrt(d_head) are both exact (multiplications by powers of two)."""
    width = 1
    while width < n:
        width *= 4
    return width


def _stochastic(name: str, value, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """``value`` as a float64 array of probability vectors along the last axis."""
    array = np.asarray(value, dtype=np.float64)
    if shape is not None and array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError(f"{name} must be finite and >= 0")
    if not np.allclose(array.sum(-1), 1.0, rtol=0, atol=1e-9):
        raise ValueError(f"{name} rows must sum to 1, got sums in "
                         f"[{array.sum(-1).min():.6g}, {array.sum(-1).max():.6g}]")
    return array


def stationary(cond: np.ndarray) -> np.ndarray:
    """The stationary law of the chain ``cond`` (left eigenvector of eigenvalue 1)."""
    if not isinstance(cond, (np.ndarray, torch.Tensor)):
        raise TypeError(f"cond must be a (V, V) array, got {type(cond).__name__}")
    if cond.ndim != 2 or cond.shape[0] != cond.shape[1] or cond.shape[0] < 1:
        raise ValueError(f"cond must be a square (V, V) matrix, got {tuple(cond.shape)}")
    _stochastic("cond", cond)
    values, vectors = np.linalg.eig(cond.T)
    vector = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    vector = np.abs(vector)
    return vector / vector.sum()


def dirichlet_bigrams(vocab_size: int, concentration: float, generator: np.random.Generator
                      ) -> np.ndarray:
    """A synthetic bigram matrix: rows i.i.d. Dirichlet(concentration)."""
    vocab_size = check.positive_int("vocab_size", vocab_size, minimum=2)
    concentration = check.positive_float("concentration", concentration)
    check.instance("generator", generator, np.random.Generator)
    rows = generator.dirichlet(np.full(vocab_size, concentration), size=vocab_size)
    return np.maximum(rows, 1e-300) / np.maximum(rows, 1e-300).sum(-1, keepdims=True)


@dataclass(frozen=True)
class BigramBackcopy:
    """The BB task: bigram rows ``cond`` (V, V), ``n_triggers`` k, marginal (None: stationary)."""

    cond: np.ndarray
    n_triggers: int
    marginal: np.ndarray | None = None

    def __post_init__(self) -> None:
        cond = np.asarray(self.cond, dtype=np.float64)
        if cond.ndim != 2 or cond.shape[0] != cond.shape[1] or cond.shape[0] < 3:
            raise ValueError(f"cond must be a square (V, V) matrix with V >= 3, got "
                             f"{cond.shape}")
        cond = _stochastic("cond", cond)
        if (cond <= 0).any():
            raise ValueError("cond must be > 0 (the construction reads log cond)")
        vocab = cond.shape[0]
        check.positive_int("n_triggers", self.n_triggers)
        if self.n_triggers > vocab - 2:
            raise ValueError(f"n_triggers must be <= V - 2 = {vocab - 2}, got {self.n_triggers}")
        marginal = stationary(cond) if self.marginal is None else _stochastic(
            "marginal", self.marginal, (vocab,))
        object.__setattr__(self, "cond", cond)
        object.__setattr__(self, "marginal", marginal)

    @property
    def vocab_size(self) -> int:
        return self.cond.shape[0]

    @property
    def bos(self) -> int:
        return self.vocab_size

    @property
    def triggers(self) -> np.ndarray:
        """The k most probable tokens under the marginal (ties: the smaller id first)."""
        order = np.lexsort((np.arange(self.vocab_size), -self.marginal))
        return np.sort(order[: self.n_triggers])

    @property
    def is_trigger(self) -> np.ndarray:
        flags = np.zeros(self.vocab_size + 1, dtype=bool)
        flags[self.triggers] = True
        return flags

    @property
    def first_token_law(self) -> np.ndarray:
        law = np.where(self.is_trigger[:-1], 0.0, self.marginal)
        return law / law.sum()

    def sample(self, batch: int, length: int, generator: np.random.Generator) -> torch.Tensor:
        """(batch, length) long tokens: the BOS, then ``length - 1`` data tokens."""
        batch = check.positive_int("batch", batch)
        length = check.positive_int("length", length, minimum=2)
        out = np.empty((batch, length), dtype=np.int64)
        out[:, 0] = self.bos
        out[:, 1] = generator.choice(self.vocab_size, size=batch, p=self.first_token_law)
        cumulative = self.cond.cumsum(-1)
        for i in range(1, length - 1):
            current = out[:, i]
            u = generator.random((batch, 1))
            drawn = np.minimum((cumulative[current] < u).sum(-1), self.vocab_size - 1)
            out[:, i + 1] = np.where(self.is_trigger[current], out[:, i - 1], drawn)
        return torch.from_numpy(out)

    def oracle(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, n, V) float64 law of the token after each position; row 0 the first-token law."""
        tokens = self.check_tokens(tokens)
        x = tokens.numpy()
        out = self.cond[np.minimum(x, self.vocab_size - 1)].copy()    # (B, n, V)
        out[:, 0] = self.first_token_law
        trig = self.is_trigger[x]
        trig[:, 0] = False
        previous = np.roll(x, 1, axis=1)
        out[trig] = np.eye(self.vocab_size)[previous[trig]]
        return torch.from_numpy(out)

    def check_tokens(self, tokens: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
        tokens = check.token_tensor("tokens", tokens, vocab_size=self.vocab_size + 1,
                                    max_len=max_len, ndim=2)
        if tokens.shape[1] < 1 or (tokens[:, 0] != self.bos).any():
            raise ValueError(f"tokens must start with the BOS token {self.bos}")
        if (tokens[:, 1:] == self.bos).any():
            raise ValueError("tokens must hold the BOS token only at position 0")
        return tokens


class ActiveDormantHead(nn.Module):
    """One attention head plus an MLP on the current token (module docstring).

    Hook points (TransformerLens names and layout, one head): ``hook_attn_scores`` (with the
    sink term, before the causal mask) and ``hook_pattern`` ``(B, 1, n, n)``; ``hook_v`` the
    values already in logit space (``W_OV`` folds the output map) ``(B, n, 1, V)``;
    ``hook_result`` the head's output ``(B, n, 1, V)``; ``hook_mlp_out`` the current-token MLP
    ``(B, n, V)``.
    """

    def __init__(self, task: BigramBackcopy, max_len: int, *, beta: float, gain: float,
                 bos_value: torch.Tensor | None, dtype, device) -> None:
        super().__init__()
        self.task, self.max_len = task, max_len
        self.beta, self.gain = beta, gain
        V = task.vocab_size
        trig = torch.from_numpy(task.is_trigger).to(torch.float64)           # (V + 1,)
        shift = torch.diag(torch.ones(max_len - 1, dtype=torch.float64), -1)  # [i, i - 1] = 1
        self.register_buffer("W_pos", (beta * shift).to(dtype=dtype, device=device))
        # query token feature (1 - trig(x)) times key BOS flag; BOS query included (trig 0)
        self.register_buffer("W_sink", (2 * beta * (1 - trig)).to(dtype=dtype, device=device))
        values = gain * torch.eye(V + 1, V, dtype=torch.float64)             # (V + 1, V)
        values[V] = 0.0 if bos_value is None else gain * bos_value   # W_OV reads it with gain
        self.register_buffer("W_OV", values.to(dtype=dtype, device=device))
        table = torch.from_numpy(np.log(task.cond))                          # (V, V)
        table[torch.from_numpy(task.triggers)] = 0.0
        table = torch.cat([table, torch.zeros(1, V, dtype=torch.float64)])   # BOS row: 0
        self.register_buffer("W_mlp", table.to(dtype=dtype, device=device))
        self.hook_attn_scores, self.hook_pattern, self.hook_v = (HookPoint(), HookPoint(),
                                                                 HookPoint())
        self.hook_result, self.hook_mlp_out = HookPoint(), HookPoint()

    def attention(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """``"pattern"`` (B, n, n), ``"head_out"`` (B, n, V), ``"logits"`` (B, n, V)."""
        tokens = self.task.check_tokens(tokens, max_len=self.max_len).to(self.W_OV.device)
        B, n = tokens.shape
        onehot = nn.functional.one_hot(tokens, self.task.vocab_size + 1).to(self.W_OV.dtype)
        scores = self.W_pos[:n, :n].expand(B, n, n).clone()                 # (B, n, n)
        scores[:, :, 0] += self.W_sink[tokens]                              # key 0 is the BOS
        causal = torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril()
        scores = hook_with_axes(self.hook_attn_scores, scores, 1)
        pattern = hook_with_axes(self.hook_pattern,
                             scores.masked_fill(~causal, -math.inf).softmax(-1), 1)  # (B, n, n)
        values = hook_with_axes(self.hook_v, onehot @ self.W_OV, 2)             # (B, n, V)
        head_out = hook_with_axes(self.hook_result, pattern @ values, 2)        # (B, n, V)
        mlp = self.hook_mlp_out(torch.relu(onehot) @ self.W_mlp)            # (B, n, V)
        return {"pattern": pattern, "head_out": head_out, "logits": head_out + mlp}

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.attention(tokens)["logits"]

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        r"""The TransformerLens layout (:mod:`constructions.residual_layout`): residual
        stream [token one-hot (V + 1) | position one-hot (max_len) | logits (V)], one head,
        one ReLU MLP; tokens are fed with their BOS (``bos=None``: nothing is prepended).

        The head's query is :math:`\beta e_{i-1}` on the position block plus
        :math:`2\beta(1 - \mathrm{trig}(x_i))` on a sink channel, its key :math:`e_j` plus
        :math:`1[j = 0]` there, so :math:`q_i \cdot k_j` is the construction's score with at most
        two non-zero products (the same floats, summed once). Its value reads ``W_OV`` off the
        token block and writes the logit block; the MLP is ``relu(one-hot) W_mlp``."""
        V, n = self.task.vocab_size, self.max_len
        fixed_context_length(name, n_ctx, n)
        tok, pos, out = slice(0, V + 1), slice(V + 1, V + 1 + n), slice(V + 1 + n, 2 * V + 1 + n)
        D, dtype, device = 2 * V + 1 + n, self.W_OV.dtype, self.W_OV.device
        zeros = functools.partial(torch.zeros, dtype=dtype, device=device)
        k, v = _power_of_four(n + 1), _power_of_four(V)
        W_Q, W_K, W_V, W_O = zeros(1, D, k), zeros(1, D, k), zeros(1, D, v), zeros(1, v, D)
        W_Q[0, pos, :n] = self.W_pos              # query at i: beta on key position i - 1
        W_Q[0, tok, n] = self.W_sink               # query token: 2 beta (1 - trig(x))
        W_K[0, pos, :n] = torch.eye(n, dtype=dtype, device=device)
        W_K[0, V + 1, n] = 1.0                     # key position 0 (the BOS): sink channel
        W_V[0, tok, :V] = self.W_OV
        W_O[0, :V, out] = torch.eye(V, dtype=dtype, device=device)
        attn = AttentionBlock(W_Q, W_K, W_V, W_O, scale=1.0, causal=True)
        W_in = zeros(D, V + 1)
        W_in[tok] = torch.eye(V + 1, dtype=dtype, device=device)
        W_out = zeros(V + 1, D)
        W_out[:, out] = self.W_mlp
        mlp = MlpBlock(W_in, zeros(V + 1), W_out, zeros(D), "relu")
        W_E, W_pos, W_U = zeros(V + 1, D), zeros(n, D), zeros(D, V)
        W_E[:, tok] = torch.eye(V + 1, dtype=dtype, device=device)
        W_pos[:, pos] = torch.eye(n, dtype=dtype, device=device)
        W_U[out] = torch.eye(V, dtype=dtype, device=device)
        return ResidualLayout(name, D, W_E, W_pos, W_U, ((attn, mlp),),
                              Interface("tokens", vocab_size=V + 1, max_len=n, bos=None,
                                        dtype=dtype))


def active_dormant_model(task: BigramBackcopy, max_len: int, *, beta: float = 60.0,
                         gain: float = 60.0, bos_value=None, dtype=torch.float64,
                         device=None) -> ActiveDormantHead:
    """Builder: the active-dormant construction; ``bos_value`` (V,) is the BOS value vector
    (default 0: the drained value)."""
    if not isinstance(task, BigramBackcopy):
        raise TypeError(f"task must be a BigramBackcopy, got {type(task).__name__}")
    max_len = check.positive_int("max_len", max_len, minimum=2)
    beta = check.positive_float("beta", beta)
    gain = check.positive_float("gain", gain)
    check.float_dtype("dtype", dtype)
    if bos_value is not None:
        bos_value = check.real_tensor("bos_value", bos_value, shape=(task.vocab_size,))
        bos_value = bos_value.to(torch.float64)
    return ActiveDormantHead(task, max_len, beta=beta, gain=gain, bos_value=bos_value,
                             dtype=dtype, device=device)


# --- the two-parameter caricature (ours) -------------------------------------------------------

def _caricature(lib, n, s2, **reals) -> None:
    """Check the caricature's arguments: real (or SymPy) ``reals``, ``n >= 2``, ``s2 > 0``."""
    check.math_library("lib", lib, ("exp", "log"))
    for name, value in reals.items():
        check.real_number(name, value)
    check.count("n", n, minimum=2)
    check.real_number("s2", s2)
    if isinstance(s2, (int, float)) and s2 <= 0:
        raise ValueError(f"s2 must be > 0, got {s2}")


def caricature_loss(a, b, n, s2, lib=math):
    r""":math:`\mathcal L(a, b) = p^2 b^2 + (1-p)^2 s^2/(n-1)`, :math:`p = e^a/(e^a + n - 1)`."""
    _caricature(lib, n, s2, a=a, b=b)
    p = lib.exp(a) / (lib.exp(a) + n - 1)
    return p ** 2 * b ** 2 + (1 - p) ** 2 * s2 / (n - 1)


def caricature_flow(a, b, n, s2, lib=math):
    r"""Gradient flow :math:`(\dot a, \dot b) = -\nabla\mathcal L`:
    :math:`\dot a = 2p(1-p)[(1-p)s^2/(n-1) - p b^2]`, :math:`\dot b = -2p^2 b`."""
    _caricature(lib, n, s2, a=a, b=b)
    p = lib.exp(a) / (lib.exp(a) + n - 1)
    return 2 * p * (1 - p) * ((1 - p) * s2 / (n - 1) - p * b ** 2), -2 * p ** 2 * b


def caricature_clock(a, n, s2, lib=math):
    r"""The time at which the drained flow (:math:`b = 0`) reaches :math:`a`, up to a constant:
    with :math:`u = e^a`, :math:`m = n - 1`, :math:`c = s^2/m`,
    :math:`t(u) = (u^2/2 + 3mu + 3m^2\ln u - m^3/u)/(2cm^2)`; hence
    :math:`e^{2a} = 4(n-1)s^2 t\,(1 + o(1))` and :math:`a = \tfrac12\ln t + O(1)`."""
    _caricature(lib, n, s2, a=a)
    u, m = lib.exp(a), n - 1
    c = s2 / m
    return (u ** 2 / 2 + 3 * m * u + 3 * m ** 2 * lib.log(u) - m ** 3 / u) / (2 * c * m ** 2)
