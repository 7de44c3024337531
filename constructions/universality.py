r"""One softmax self-attention layer followed by a position-wise ReLU FFN (Gumaan 2025,
arXiv:2507.10581), with and without positional information.

Conventions. A sequence is ``x`` of shape ``(B, n, d)``. The layer embeds each token into a
residual stream of width :math:`D` by appending, optionally, a one-hot position
(:func:`constructions.equivariance.lift_positions`, :math:`x_k \mapsto x_k \oplus s\,e_k`) and
then ``scratch`` zero coordinates; it applies

.. math::

    Y = E + \mathrm{Attn}(E),\qquad T(X) = \big(Y + \mathrm{FFN}(Y)\big)_{[:, :d]},

with :class:`constructions.layers.Attention` (softmax) and :class:`constructions.layers.MLP`
(ReLU), and reads out the first :math:`d` coordinates. Without the lift and without a causal
mask every step is permutation-equivariant, so :math:`T(P_\sigma X) = P_\sigma T(X)`; either
one breaks that symmetry.

**The copy construction** (:func:`copy_first_token`, ours [D]). With the lift of scale
:math:`s` and :math:`d` scratch coordinates (:math:`D = 2d + n`): the query of every token is
the sum of its position coordinates, :math:`q_i = s`; the key is the first position coordinate,
:math:`k_j = s\,[j = 1]`; the score :math:`\beta q_i k_j = \beta s^2 [j = 1]`; the value copies
the token into the scratch block. So attention writes :math:`\sum_j p_j x_j` to the scratch
block, with :math:`p_1 = 1/(1 + (n-1)e^{-\beta s^2})`, and the FFN computes
:math:`z = \mathrm{scratch} - \mathrm{token}` as :math:`\mathrm{ReLU}(z) - \mathrm{ReLU}(-z)`
and adds it to the token block. Hence

.. math::

    T(X)_i = \sum_j p_j x_j,\qquad
    \lVert T(X)_i - x_1\rVert_\infty \le (1 - p_1)\max_j \lVert x_j - x_1\rVert_\infty
    \le (n-1)e^{-\beta s^2}\max_j \lVert x_j - x_1\rVert_\infty,

which is below any :math:`\varepsilon > 0` on a bounded domain for :math:`\beta` large enough.
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions.equivariance import lift_positions
from constructions.layers import MLP, Attention, resolve


def copy_first_target(x) -> torch.Tensor:
    r"""The target :math:`f(X)_i = x_1` for every position :math:`i`: ``(B, n, d)`` to the same."""
    x = _validate.nonempty("x", _validate.real_tensor("x", x, ndim=3))
    return x[:, :1, :].expand_as(x)


class SingleLayerTransformer(nn.Module):
    """Embed (optional position lift, scratch zeros), one attention layer with residual, one
    ReLU FFN with residual, read out the first ``d`` coordinates (see the module docstring).

    ``positions`` is the lift's scale :math:`s`, or ``None`` for no positional information, in
    which case the layer is permutation-equivariant. :meth:`embed` and :meth:`streams` expose
    the residual stream that the checks' rounding bounds read.
    """

    def __init__(self, attention: Attention, ffn: MLP, d: int, *, positions: float | None,
                 max_len: int | None, scratch: int) -> None:
        super().__init__()
        self.attention, self.ffn = attention, ffn
        self.d, self.positions, self.max_len, self.scratch = d, positions, max_len, scratch
        width = d + (max_len if positions is not None else 0) + scratch
        if attention.d_model != width or attention.W_O.shape[-1] != width:
            raise ValueError(f"attention must act on width {width}, got {attention.d_model}")
        if ffn.W_in.shape[0] != width or ffn.W_out.shape[1] != width:
            raise ValueError(f"ffn must act on width {width}")

    @property
    def d_model(self) -> int:
        return self.attention.d_model

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, n, d)`` to the residual stream ``(B, n, D)``."""
        x = _validate.real_tensor("x", x, ndim=3)
        if x.shape[-1] != self.d:
            raise ValueError(f"x must have width {self.d}, got shape {tuple(x.shape)}")
        if self.positions is not None and x.shape[1] != self.max_len:
            raise ValueError(f"x must have {self.max_len} tokens (the lift's length), "
                             f"got {x.shape[1]}")
        x = x.to(self.attention.W_Q.dtype)
        if self.positions is not None:
            x = lift_positions(x, self.positions)                 # (B, n, d + n)
        return torch.cat([x, x.new_zeros(*x.shape[:-1], self.scratch)], dim=-1)  # (B, n, D)

    def streams(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(E, A, Y, F)``: embedding, attention output, ``Y = E + A``, FFN output."""
        e = self.embed(x)                                         # (B, n, D)
        a = self.attention(e)                                     # (B, n, D)
        y = e + a
        return e, a, y, self.ffn(y)                               # FFN: (B, n, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, _, y, f = self.streams(x)
        return (y + f)[..., :self.d]                              # (B, n, d)

    def extra_repr(self) -> str:
        return (f"d={self.d}, d_model={self.d_model}, positions={self.positions}, "
                f"max_len={self.max_len}")


def _check_positions(positions: float | None, max_len: int | None) -> tuple:
    if positions is None:
        if max_len is not None:
            max_len = _validate.positive_int("max_len", max_len)
        return None, max_len
    positions = _validate.positive_float("positions", positions)
    if max_len is None:
        raise ValueError("max_len must be given when positions is set (the lift's length)")
    return positions, _validate.positive_int("max_len", max_len)


def random_single_layer(d: int, *, n_heads: int = 1, d_head: int = 4, d_ff: int = 16,
                        scratch: int = 0, positions: float | None = None,
                        max_len: int | None = None, causal: bool = False, seed: int = 0,
                        weight_std: float = 1.0, dtype: torch.dtype = torch.float64, device=None
                        ) -> SingleLayerTransformer:
    r"""A layer with i.i.d. :math:`\mathcal N(0, \sigma^2/D)` weights and biases
    (:math:`\sigma` = ``weight_std``), from a CPU generator seeded with ``seed``; ``causal``
    masks the keys :math:`j > i` (then the layer is not permutation-equivariant)."""
    d = _validate.positive_int("d", d)
    n_heads = _validate.positive_int("n_heads", n_heads)
    d_head = _validate.positive_int("d_head", d_head)
    d_ff = _validate.positive_int("d_ff", d_ff)
    scratch = _validate.positive_int("scratch", scratch, minimum=0)
    positions, max_len = _check_positions(positions, max_len)
    weight_std = _validate.positive_float("weight_std", weight_std)
    causal = _validate.boolean("causal", causal)
    kw = resolve(dtype, device)
    width = d + (max_len if positions is not None else 0) + scratch
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))

    def gaussian(*shape: int) -> torch.Tensor:
        draw = torch.randn(*shape, generator=generator, dtype=torch.float64)
        return (weight_std / width ** 0.5 * draw).to(**kw)

    attention = Attention(gaussian(n_heads, width, d_head), gaussian(n_heads, width, d_head),
                          gaussian(n_heads, width, d_head), gaussian(n_heads, d_head, width),
                          causal=causal)
    ffn = MLP(gaussian(width, d_ff), gaussian(d_ff), gaussian(d_ff, width), gaussian(width))
    return SingleLayerTransformer(attention, ffn, d, positions=positions, max_len=max_len,
                                  scratch=scratch)


def copy_first_token(d: int, max_len: int, *, beta: float = 20.0, scale: float = 2.0,
                     source: int = 0, dtype: torch.dtype = torch.float64, device=None
                     ) -> SingleLayerTransformer:
    r"""The explicit layer of the module docstring: with positions, it maps every token to
    :math:`\sum_j p_j x_j` with :math:`1 - p_{\mathrm{source}} \le (n-1)e^{-\beta s^2}`.

    ``source`` is the copied position (0, the first token, for the target
    :func:`copy_first_target`); ``scale`` is the lift's :math:`s`. The default
    :math:`\beta s^2 = 80` puts the leak at :math:`(n-1)e^{-80} \approx 10^{-35}(n-1)`.
    """
    d = _validate.positive_int("d", d)
    n = _validate.positive_int("max_len", max_len, minimum=2)
    beta = _validate.positive_float("beta", beta)
    scale = _validate.positive_float("scale", scale)
    source = _validate.positive_int("source", source, minimum=0)
    if source >= n:
        raise ValueError(f"source must be < max_len={n}, got {source}")
    kw = resolve(dtype, device)
    width = 2 * d + n                        # blocks: token [0, d), position [d, d+n), scratch
    token, position, scratch = slice(0, d), slice(d, d + n), slice(d + n, width)
    W_Q = torch.zeros(width, 1, dtype=torch.float64)
    W_Q[position] = 1.0                      # q_i = s: the sum of the position coordinates
    W_K = torch.zeros(width, 1, dtype=torch.float64)
    W_K[d + source] = 1.0                    # k_j = s [j = source]
    W_V = torch.zeros(width, d, dtype=torch.float64)
    W_V[token] = torch.eye(d, dtype=torch.float64)
    W_O = torch.zeros(d, width, dtype=torch.float64)
    W_O[:, scratch] = torch.eye(d, dtype=torch.float64)
    eye = torch.eye(d, dtype=torch.float64)
    W_in = torch.zeros(width, 2 * d, dtype=torch.float64)
    W_in[scratch] = torch.cat([eye, -eye], dim=1)   # z = scratch - token, and -z
    W_in[token] = torch.cat([-eye, eye], dim=1)
    W_out = torch.zeros(2 * d, width, dtype=torch.float64)
    W_out[:, token] = torch.cat([eye, -eye], dim=0)  # ReLU(z) - ReLU(-z) = z, into the tokens
    attention = Attention(*(w.to(**kw) for w in (W_Q, W_K, W_V, W_O)), scale=beta)
    ffn = MLP(W_in.to(**kw), torch.zeros(2 * d, **kw), W_out.to(**kw), torch.zeros(width, **kw))
    return SingleLayerTransformer(attention, ffn, d, positions=scale, max_len=n, scratch=d)


def copy_leak_bound(n: int, beta: float, scale: float) -> float:
    r""":math:`1 - p_1 = (n-1)e^{-\beta s^2}/(1 + (n-1)e^{-\beta s^2})`: the weight attention
    leaves off the copied token."""
    n = _validate.positive_int("n", n)
    beta = _validate.positive_float("beta", beta)
    scale = _validate.positive_float("scale", scale)
    leak = (n - 1) * torch.exp(torch.tensor(-beta * scale**2, dtype=torch.float64))
    return float(leak / (1 + leak))
