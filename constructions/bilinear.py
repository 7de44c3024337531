r"""Bilinear layers as third-order tensors (Sharkey 2023, arXiv:2305.03452).

A bilinear layer with an output projection computes

.. math::

    f(x) = W_O\big((W_1 x) \odot (W_2 x)\big),\qquad
    f(x)_o = \sum_{j,k} B_{ojk}\,x_j x_k,\qquad
    B_{ojk} = \sum_h (W_O)_{oh}(W_1)_{hj}(W_2)_{hk}.

Only the symmetric part :math:`B^s_{ojk} = (B_{ojk} + B_{okj})/2` affects outputs, so
:math:`f` is a quadratic form per output: :math:`f(\alpha x) = \alpha^2 f(x)` and
:math:`f(x+y) - f(x) - f(y) = 2B^s(x, y)`.
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions.layers import HookPoint, fixed


class BilinearLayer(nn.Module):
    """``f(x) = W_O((W_1 x) * (W_2 x))`` on the last dim of ``x``; ``W_O = I`` when omitted.

    Hook points, named as in TransformerLens's gated MLP (``W_1`` the gate with the identity
    activation, ``W_2`` the linear branch), shapes ``(..., width)``: ``hook_mlp_in`` (``x``),
    ``hook_pre`` (:math:`W_1x`), ``hook_pre_linear`` (:math:`W_2x`), ``hook_post`` (their
    product) and ``hook_mlp_out`` (:math:`f(x)`).
    """

    def __init__(self, W1: torch.Tensor, W2: torch.Tensor, W_O: torch.Tensor | None = None):
        super().__init__()
        W1 = _validate.real_tensor("W1", W1, ndim=2)
        W2 = _validate.real_tensor("W2", W2, shape=tuple(W1.shape))
        if W_O is None:
            W_O = torch.eye(W1.shape[0], dtype=W1.dtype, device=W1.device)
        W_O = _validate.real_tensor("W_O", W_O, shape=(None, W1.shape[0]))
        self.W1, self.W2, self.W_O = fixed(W1), fixed(W2), fixed(W_O)
        self.hook_mlp_in, self.hook_pre, self.hook_pre_linear = (HookPoint(), HookPoint(),
                                                                 HookPoint())
        self.hook_post, self.hook_mlp_out = HookPoint(), HookPoint()

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return ["a bilinear MLP (the product of two linear maps, no activation)"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.W1.shape[1]:
            raise ValueError(f"x must have width {self.W1.shape[1]}, got shape {tuple(x.shape)}")
        x = self.hook_mlp_in(x)
        post = self.hook_post(self.hook_pre(x @ self.W1.T) * self.hook_pre_linear(x @ self.W2.T))
        return self.hook_mlp_out(post @ self.W_O.T)

    def tensor(self) -> torch.Tensor:
        """The interaction tensor ``B[o, j, k]``."""
        return torch.einsum("oh,hj,hk->ojk", self.W_O, self.W1, self.W2)


def bilinear_layer(d_in: int, d_hidden: int, d_out: int | None = None, *, seed: int = 0,
                   dtype: torch.dtype = torch.float64, device=None) -> BilinearLayer:
    """A bilinear layer with seeded Gaussian weights scaled by ``1/sqrt(d_in)``."""
    d_in = _validate.positive_int("d_in", d_in)
    d_hidden = _validate.positive_int("d_hidden", d_hidden)
    d_out = d_hidden if d_out is None else _validate.positive_int("d_out", d_out)
    _validate.float_dtype("dtype", dtype)
    g = torch.Generator().manual_seed(_validate.seed("seed", seed))
    W1, W2 = (torch.randn(d_hidden, d_in, generator=g, dtype=torch.float64) / d_in**0.5
              for _ in range(2))
    W_O = torch.randn(d_out, d_hidden, generator=g, dtype=torch.float64) / d_hidden**0.5
    return BilinearLayer(*(w.to(dtype=dtype, device=device) for w in (W1, W2, W_O)))


def symmetrize(B: torch.Tensor) -> torch.Tensor:
    """The symmetric part ``(B[o,j,k] + B[o,k,j]) / 2``."""
    B = _validate.nonempty("B", _validate.real_tensor("B", B, ndim=3))
    if B.shape[1] != B.shape[2]:
        raise ValueError(f"B must have shape (o, d, d), got {tuple(B.shape)}")
    return (B + B.transpose(1, 2)) / 2


def bilinear_form(B: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``B(x, y)[o] = sum_jk B[o,j,k] x_j y_k``, batched over leading dims of ``x`` and ``y``."""
    B = _validate.nonempty("B", _validate.real_tensor("B", B, ndim=3))
    x = _validate.matching("x", _validate.real_tensor("x", x), B.shape[1], to="B's dim 1")
    y = _validate.matching("y", _validate.real_tensor("y", y), B.shape[2], to="B's dim 2")
    try:
        torch.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    except RuntimeError:
        raise ValueError(f"y's batch shape {tuple(y.shape[:-1])} does not broadcast against "
                         f"x's {tuple(x.shape[:-1])}") from None
    return torch.einsum("ojk,...j,...k->...o", B, x, y)
