r"""One step of a modern Hopfield network, i.e. one softmax attention read-out
(Sargolzaei 2026, arXiv:2604.03190).

Stored patterns are the columns of :math:`X \in \mathbb R^{d\times N}` and a state is
:math:`\xi \in \mathbb R^d`:

.. math::

    T(\xi) = X\,\mathrm{softmax}(\beta X^\top \xi).

(a) :math:`T(\xi) \in \mathrm{conv}(X) \subseteq \mathrm{col}(X)`; (b) with
:math:`\xi = \xi_\parallel + \xi_\perp` split along :math:`\mathrm{col}(X)`,
:math:`T(\xi) = T(\xi_\parallel)` since :math:`X^\top\xi_\perp = 0`: one step erases the
orthogonal part; (c) every fixed point lies in :math:`\mathrm{conv}(X)`. With a residual
stream, :math:`\xi + T(\xi)`, nothing is erased.

Twicing (the paper's boosted attention): :math:`(2A - A^2)V = AV + A(V - AV)`.
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions.layers import HookPoint, fixed


class HopfieldUpdate(nn.Module):
    r"""``T(xi) = X softmax(beta X^T xi)`` for states ``xi`` of shape ``(..., d)``.

    Hook points (TransformerLens names; a state is one query against the ``N`` stored
    patterns, which are keys and values at once, so there is no position or head axis: the
    shapes are the state's leading dims then the last): ``hook_attn_scores``
    :math:`\beta X^\top\xi` and ``hook_pattern`` its softmax, ``(..., N)``; ``hook_z`` the
    update :math:`T(\xi)`, ``(..., d)``; with ``residual=True`` also ``hook_resid_pre``
    (:math:`\xi`) and ``hook_resid_post`` (:math:`\xi + T(\xi)`).
    """

    def __init__(self, patterns: torch.Tensor, beta: float, *, residual: bool = False):
        super().__init__()
        self.patterns = fixed(_validate.nonempty(
            "patterns", _validate.real_tensor("patterns", patterns, ndim=2)))
        self.beta = _validate.positive_float("beta", beta)
        self.residual = _validate.boolean("residual", residual)
        self.hook_attn_scores, self.hook_pattern, self.hook_z = (HookPoint(), HookPoint(),
                                                                 HookPoint())
        if self.residual:
            self.hook_resid_pre, self.hook_resid_post = HookPoint(), HookPoint()

    def weights(self, xi: torch.Tensor) -> torch.Tensor:
        """Attention weights ``softmax(beta X^T xi)``, shape ``(..., N)``."""
        if xi.shape[-1] != self.patterns.shape[0]:
            raise ValueError(f"xi must have width {self.patterns.shape[0]}, "
                             f"got shape {tuple(xi.shape)}")
        scores = self.hook_attn_scores(self.beta * xi.to(self.patterns.dtype) @ self.patterns)
        return self.hook_pattern(scores.softmax(dim=-1))

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return ["attention over a fixed set of stored patterns rather than over the sequence"]

    def forward(self, xi: torch.Tensor) -> torch.Tensor:
        if self.residual:
            xi = self.hook_resid_pre(xi)
        update = self.hook_z(self.weights(xi) @ self.patterns.T)        # (..., d)
        return self.hook_resid_post(xi + update) if self.residual else update


def hopfield_update(patterns: torch.Tensor, beta: float, *, residual: bool = False
                    ) -> HopfieldUpdate:
    """Build the one-step Hopfield update for ``patterns`` (columns) at inverse temperature beta."""
    return HopfieldUpdate(patterns, beta, residual=residual)


def twicing(A: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Boosted attention ``(2A - A^2) V``: one attention step plus one step on its residual."""
    A = _validate.real_tensor("A", A, ndim=(2, 3))
    V = _validate.nonempty("V", _validate.real_tensor("V", V, ndim=(2, 3)))
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must be square (queries = keys), got shape {tuple(A.shape)}")
    if A.shape[-1] != V.shape[-2]:
        raise ValueError(f"A has {A.shape[-1]} keys but V has {V.shape[-2]} rows")
    return (2 * A - A @ A) @ V
