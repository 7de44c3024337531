r"""One message-passing round with a virtual node computes one linear-attention layer
(Cai, Hy, Yu & Wang, ICML 2023, arXiv:2301.11956; the exact identity is ours [D]).

Conventions. A graph on ``n`` nodes has node features ``x`` of shape ``(B, n, d)`` (rows are
nodes) and an adjacency ``(B, n, n)`` of 0/1 entries. A *feature map*
:math:`\varphi(y) = \mathrm{map}(y W_\varphi)` sends :math:`\mathbb R^{d_k} \to \mathbb R^r`
(``"exp"``: :math:`e^{yW_\varphi}`, Performer-like positive random features; ``"elu1"``:
:math:`\mathrm{ELU}(yW_\varphi) + 1`, as in linear transformers; ``"identity"``:
:math:`yW_\varphi`, which can be negative).

**Linear attention** with queries :math:`q_i = x_iW_Q`, keys :math:`k_j = x_jW_K`, values
:math:`v_j = x_jW_V`:

.. math::

    \mathrm{LA}(x)_i = \frac{\sum_j \varphi(q_i)^\top\varphi(k_j)\, v_j}
                            {\sum_j \varphi(q_i)^\top\varphi(k_j)} .

**The virtual-node round.** Every node :math:`j` sends the virtual node the message
:math:`(\varphi(k_j)v_j^\top, \varphi(k_j))`; the virtual node sums them,
:math:`S = \sum_j \varphi(k_j)v_j^\top \in \mathbb R^{r\times d_v}`,
:math:`z = \sum_j \varphi(k_j) \in \mathbb R^r`, and broadcasts :math:`(S, z)` back; node
:math:`i` updates to :math:`\varphi(q_i)^\top S/\varphi(q_i)^\top z`. By linearity of the sums
this is :math:`\mathrm{LA}(x)_i` exactly, for every graph: the round is depth 1, its virtual
node has width :math:`r d_v + r`, and the local (edge) messages enter with weight
``local_weight`` (0 in the construction). With a positive feature map the denominator is
positive; with ``"identity"`` it can vanish.
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_with_axes
from constructions.layers import HookPoint, fixed, resolve

FEATURE_MAPS = ("exp", "elu1", "identity")


def apply_feature_map(kind: str, y: torch.Tensor, W_phi: torch.Tensor) -> torch.Tensor:
    r""":math:`\varphi(y) = \mathrm{map}(yW_\varphi)`: ``(..., d_k)`` to ``(..., r)``."""
    if not isinstance(kind, str) or kind not in FEATURE_MAPS:
        raise ValueError(f"kind: the feature_map must be one of {FEATURE_MAPS}, got {kind!r}")
    y = _validate.real_tensor("y", y)
    if y.ndim < 1 or y.shape[-1] == 0:
        raise ValueError(f"y must have shape (..., d_k) with d_k >= 1, got {tuple(y.shape)}")
    W_phi = _validate.nonempty("W_phi", _validate.real_tensor("W_phi", W_phi,
                                                              shape=(y.shape[-1], None)))
    projected = y @ W_phi
    if kind == "exp":
        return projected.exp()
    if kind == "elu1":
        return nn.functional.elu(projected) + 1
    return projected


def _features(phi_q, phi_k, v) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Check features ``phi_q``, ``phi_k`` ``(B, n, r)`` and values ``v`` ``(B, n, d_v)``."""
    phi_q = _validate.nonempty("phi_q", _validate.real_tensor("phi_q", phi_q, ndim=3))
    B, n, r = phi_q.shape
    phi_k = _validate.real_tensor("phi_k", phi_k, shape=(B, n, r))
    v = _validate.nonempty("v", _validate.real_tensor("v", v, shape=(B, n, None)))
    return phi_q, phi_k, v


def linear_attention(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r"""The reference :math:`\mathrm{LA}`: the ``(B, n, n)`` kernel
    :math:`\varphi(q_i)^\top\varphi(k_j)`, row-normalised, times the values."""
    phi_q, phi_k, v = _features(phi_q, phi_k, v)
    kernel = phi_q @ phi_k.transpose(-1, -2)                   # (B, n, n)
    return (kernel @ v) / kernel.sum(dim=-1, keepdim=True)     # (B, n, d_v)


def virtual_node_aggregate(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor
                           ) -> torch.Tensor:
    r"""The virtual node's sums :math:`S, z` and the nodes' readout
    :math:`\varphi(q_i)^\top S/\varphi(q_i)^\top z`."""
    phi_q, phi_k, v = _features(phi_q, phi_k, v)
    S = phi_k.transpose(-1, -2) @ v                            # (B, r, d_v)
    z = phi_k.sum(dim=-2)                                      # (B, r)
    numerator = phi_q @ S                                      # (B, n, d_v)
    denominator = phi_q @ z[..., None]                         # (B, n, 1)
    return numerator / denominator


class _FeatureAttention(nn.Module):
    """Shared weights and :meth:`features` of :class:`LinearAttention` and
    :class:`VirtualNodeRound`.

    Hook points (TransformerLens names and layout, one head): ``hook_q`` :math:`xW_Q`,
    ``hook_k`` :math:`xW_K` (before the feature map) ``(B, n, 1, d_k)``, ``hook_v``
    :math:`xW_V` ``(B, n, 1, d_v)``, and ``hook_z`` the attention read-out (there is no
    :math:`W_O`) ``(B, n, 1, d_v)``; the kernel is never formed by the virtual node, so
    neither class has ``hook_pattern``.
    """

    def __init__(self, W_Q, W_K, W_V, W_phi, feature_map: str) -> None:
        super().__init__()
        if feature_map not in FEATURE_MAPS:
            raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {feature_map!r}")
        W_Q = _validate.real_tensor("W_Q", W_Q, ndim=2)
        d, d_k = W_Q.shape
        W_K = _validate.real_tensor("W_K", W_K, shape=(d, d_k))
        W_V = _validate.real_tensor("W_V", W_V, shape=(d, None))
        W_phi = _validate.real_tensor("W_phi", W_phi, shape=(d_k, None))
        self.feature_map = feature_map
        self.W_Q, self.W_K, self.W_V, self.W_phi = map(fixed, (W_Q, W_K, W_V, W_phi))
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_z = HookPoint()

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[0]

    def _input(self, x) -> torch.Tensor:
        x = _validate.real_tensor("x", x, ndim=3)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must have width {self.d_model}, got shape {tuple(x.shape)}")
        return x.to(self.W_Q.dtype)

    def features(self, x) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r"""``(phi(q), phi(k), v)``, shapes ``(B, n, r), (B, n, r), (B, n, d_v)``."""
        x = self._input(x)
        q = hook_with_axes(self.hook_q, x @ self.W_Q, 2)                   # hooks see (B, n, 1, w)
        k = hook_with_axes(self.hook_k, x @ self.W_K, 2)
        return (apply_feature_map(self.feature_map, q, self.W_phi),
                apply_feature_map(self.feature_map, k, self.W_phi),
                hook_with_axes(self.hook_v, x @ self.W_V, 2))


class LinearAttention(_FeatureAttention):
    """One linear-attention layer (module docstring): ``(B, n, d)`` to ``(B, n, d_v)``."""

    def forward(self, x) -> torch.Tensor:
        return hook_with_axes(self.hook_z, linear_attention(*self.features(x)), 2)


class VirtualNodeRound(_FeatureAttention):
    r"""One MPNN + virtual-node round (module docstring). ``forward(x, adjacency)`` maps
    ``(B, n, d)`` and ``(B, n, n)`` to ``(B, n, d_v)``: the virtual-node readout plus
    ``local_weight`` times the sum of the neighbours' values."""

    def __init__(self, W_Q, W_K, W_V, W_phi, feature_map: str, *, local_weight: float = 0.0
                 ) -> None:
        super().__init__(W_Q, W_K, W_V, W_phi, feature_map)
        self.local_weight = _validate.finite_float("local_weight", local_weight)

    def aggregate(self, phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor
                  ) -> torch.Tensor:
        """The virtual node's part of the round, from the features."""
        return virtual_node_aggregate(phi_q, phi_k, v)

    def forward(self, x, adjacency) -> torch.Tensor:
        x = self._input(x)
        B, n, _ = x.shape
        adjacency = _validate.real_tensor("adjacency", adjacency, shape=(B, n, n)).to(x)
        phi_q, phi_k, v = self.features(x)
        local = adjacency @ v                                  # (B, n, d_v): edge messages
        # x + 0 * y is x exactly for finite y, so with local_weight = 0 the edges change nothing
        return hook_with_axes(self.hook_z, self.aggregate(phi_q, phi_k, v), 2) + \
            self.local_weight * local


def _random_weights(d: int, d_v: int, r: int, seed: int, kw: dict) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    return [(torch.randn(*shape, generator=generator, dtype=torch.float64) / d ** 0.5).to(**kw)
            for shape in ((d, d), (d, d), (d, d_v), (d, r))]


def virtual_node_round(d: int, d_v: int, r: int, *, feature_map: str = "exp", seed: int = 0,
                       local_weight: float = 0.0, dtype: torch.dtype = torch.float64,
                       device=None) -> VirtualNodeRound:
    r"""A virtual-node round with :math:`\mathcal N(0, 1/d)` weights seeded by ``seed``;
    :func:`matching_linear_attention` with the same arguments builds the layer it equals."""
    d, d_v, r = (_validate.positive_int(name, value)
                 for name, value in (("d", d), ("d_v", d_v), ("r", r)))
    return VirtualNodeRound(*_random_weights(d, d_v, r, seed, resolve(dtype, device)),
                            feature_map, local_weight=local_weight)


def matching_linear_attention(d: int, d_v: int, r: int, *, feature_map: str = "exp",
                              seed: int = 0, dtype: torch.dtype = torch.float64, device=None
                              ) -> LinearAttention:
    """The linear-attention layer with the weights of :func:`virtual_node_round`."""
    d, d_v, r = (_validate.positive_int(name, value)
                 for name, value in (("d", d), ("d_v", d_v), ("r", r)))
    return LinearAttention(*_random_weights(d, d_v, r, seed, resolve(dtype, device)),
                           feature_map)
