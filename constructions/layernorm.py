r"""LayerNorm as geometry (Brody, Alon, Yahav 2023, arXiv:2305.02582).

Without affine parameters and with :math:`\epsilon = 0`,

.. math::

    \mathrm{LN}(x) = \sqrt d\,\frac{Px}{\lVert Px\rVert},\qquad
    P = I - \tfrac1d\mathbf 1\mathbf 1^\top,

so LayerNorm projects onto the hyperplane :math:`\mathbf 1^\perp` and then scales onto the
sphere of radius :math:`\sqrt d` in it. Two consequences the paper draws for attention:

* *Projection*: a query direction parallel to :math:`\mathbf 1` scores every normalised key
  zero, so attention is uniform and the head outputs the mean of its values, which is what
  "majority" needs (:func:`majority_head`).
* *Scaling*: normalised keys all have norm :math:`\sqrt d`, so none lies inside the convex
  hull of the others, and every key can be selected by some query
  (:func:`selectability_margin`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions.layers import Attention, LayerNorm, fixed, resolve
from constructions.residual_layout import (
    DEFAULT_N_CTX,
    Interface,
    ResidualLayout,
    UnsupportedConstructionError,
    attention_block,
    context_length,
    placed,
)

# One-line TransformerLens exports for the docs pages (constructions.export.export_line).
TRANSFORMER_LENS_EXAMPLES = {
    "majority_head": "to_transformer_lens(majority_head(vocab_size=3, d=8, normalize=False))",
}


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the last dim, no affine parameters, :math:`\\epsilon = 0`."""
    x = _validate.real_tensor("x", x)
    if x.ndim == 0 or x.shape[-1] < 2:
        raise ValueError(f"x must have a last dim of size >= 2, got shape {tuple(x.shape)}")
    return LayerNorm(eps=0.0)(x)


def projection_form(x: torch.Tensor) -> torch.Tensor:
    r"""The right-hand side :math:`\sqrt d\,Px/\lVert Px\rVert`, computed with the matrix P."""
    x = _validate.real_tensor("x", x)
    if x.ndim == 0 or x.shape[-1] < 2:
        raise ValueError(f"x must have a last dim of size >= 2, got shape {tuple(x.shape)}")
    d = x.shape[-1]
    P = torch.eye(d, dtype=x.dtype, device=x.device) - 1.0 / d
    px = x @ P  # P is symmetric, so row vectors can be multiplied on the right
    return math.sqrt(d) * px / px.norm(dim=-1, keepdim=True)


class MajorityHead(nn.Module):
    r"""Embedding, LayerNorm, then one attention head whose query direction is :math:`\mathbf 1`.

    Keys are :math:`\mathrm{LN}(e_{t_j}) \perp \mathbf 1` and every query is
    :math:`(c^\top x_i)\,\mathbf 1`, so every score is 0 and attention is exactly uniform over
    the (non-causal) sequence. Values map :math:`\mathrm{LN}(e_t) \mapsto \mathbf e_t`, so the
    output at every position is the token-frequency vector, whose argmax is the majority token.
    """

    def __init__(self, embeddings: torch.Tensor, attention: Attention, normalize: bool = True):
        super().__init__()
        self.embeddings = fixed(embeddings)
        self.attention = attention
        self.normalize = normalize

    @property
    def vocab_size(self) -> int:
        return self.embeddings.shape[0]

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        """The TransformerLens layout without the LayerNorm: the head reads the embedding
        block and writes token frequencies into a fresh block that the unembedding reads
        (the model has no residual around the head)."""
        if self.normalize:
            raise UnsupportedConstructionError(name, [
                "LayerNorm on the embeddings alone, with no residual stream and no final "
                "LayerNorm (TransformerLens normalises the whole residual stream before every "
                "sublayer and before the unembedding)"],
                hint="majority_head(..., normalize=False) exports")
        E = self.embeddings.detach()
        V, d = E.shape
        D = d + V
        blocks = ((attention_block(name, self.attention, D, slice(0, d), slice(d, D)), None),)
        W_U = placed(torch.eye(V, dtype=E.dtype, device=E.device), (D, V), slice(d, D))
        return ResidualLayout(name, D, placed(E, (V, D), slice(None), slice(0, d)),
                              E.new_zeros(context_length(name, n_ctx, DEFAULT_N_CTX), D), W_U,
                              blocks, Interface("tokens", vocab_size=V))

    def keys(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embeddings[tokens]
        return LayerNorm()(x) if self.normalize else x

    def forward(self, tokens: torch.Tensor, *, return_pattern: bool = False):
        tokens = _validate.token_tensor("tokens", tokens, vocab_size=self.vocab_size, ndim=2)
        return self.attention(self.keys(tokens), return_pattern=return_pattern)

    def attention_pattern(self, tokens: torch.Tensor) -> torch.Tensor:
        """Attention weights, shape ``(B, n, n)`` (one head)."""
        return self.forward(tokens, return_pattern=True)[1][:, 0]


def majority_head(vocab_size: int, d: int, *, seed: int = 0, normalize: bool = True,
                  dtype: torch.dtype = torch.float64, device=None) -> MajorityHead:
    """A LayerNorm-then-attention head that outputs token frequencies (Brody et al., Sec. 4).

    Token embeddings are Gaussian (seeded). ``normalize=False`` drops the LayerNorm, which is
    the ablation the paper compares against: the keys are no longer orthogonal to the query.
    """
    vocab_size = _validate.positive_int("vocab_size", vocab_size, minimum=2)
    d = _validate.positive_int("d", d, minimum=2)
    if vocab_size > d - 1:
        raise ValueError(f"vocab_size must be <= d - 1 = {d - 1} so that the normalised "
                         f"embeddings are linearly independent, got {vocab_size}")
    normalize = _validate.boolean("normalize", normalize)
    kw = resolve(dtype, device)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    embeddings = torch.randn(vocab_size, d, generator=generator, dtype=torch.float64)
    c = torch.randn(d, generator=generator, dtype=torch.float64)
    keys = LayerNorm()(embeddings)
    # W_V solves LN(E) W_V = I exactly (LN(E) has full row rank): values are one-hot tokens.
    W_V = torch.linalg.pinv(keys)
    W_Q = torch.outer(c, torch.ones(d, dtype=torch.float64))  # x W_Q = (x . c) 1^T
    W_K = torch.eye(d, dtype=torch.float64)
    W_O = torch.eye(vocab_size, dtype=torch.float64)
    attention = Attention(*(w.to(**kw) for w in (W_Q, W_K, W_V, W_O)))
    return MajorityHead(embeddings.to(**kw), attention, normalize=normalize)


def selectability_margin(keys: torch.Tensor, index: int) -> float:
    r"""The largest :math:`t` with :math:`q^\top(k_i - k_j) \ge t` for all :math:`j \ne i`,
    over queries :math:`q \in [-1,1]^d`.

    Key :math:`k_i` is *selectable* (some query scores it strictly above every other key)
    iff this margin is positive, i.e. iff :math:`k_i` is an exposed vertex of the convex hull
    of the keys. Solved as a linear program with SciPy's HiGHS (imported lazily).
    """
    from scipy.optimize import linprog

    keys = _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=2))
    keys = keys.to(torch.float64)
    m, d = keys.shape
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < m:
        raise ValueError(f"index must be an int in [0, {m}), got {index!r}")
    if m == 1:
        return math.inf
    diffs = (keys[index] - torch.cat([keys[:index], keys[index + 1:]])).numpy()
    # variables (q_1..q_d, t); maximise t  <=>  minimise -t;  t - q.(k_i - k_j) <= 0
    cost = [0.0] * d + [-1.0]
    A_ub = [[*(-row), 1.0] for row in diffs]
    bounds = [(-1.0, 1.0)] * d + [(None, None)]
    result = linprog(cost, A_ub=A_ub, b_ub=[0.0] * len(A_ub), bounds=bounds, method="highs")
    if result.status != 0:
        raise RuntimeError(f"linprog failed: {result.message}")
    return float(-result.fun)
