r"""Attention over a prefix of any length through a finite summary ("Toward Infinite-Long
Prefix in Transformer", arXiv:2406.14036; NTK-Attention as in the authors' code,
ChristianYang37/chiwun ``src/NTK-Attention/ntk_attn_demo.py``).

Conventions. Queries ``q`` ``(B, n_q, d)``, keys ``K`` ``(B, m, d)``, values ``V``
``(B, m, d_v)``; scores :math:`s_j = \tau\,q\cdot k_j` with the scale :math:`\tau`
(:math:`1/\sqrt d` in the code); no mask.

**The decomposition** (ours [D]). With partition sums :math:`Z_P = \sum_{p\in P}e^{s_p}`,
:math:`Z_X = \sum_{j\in X}e^{s_j}`, softmax attention over the concatenation
:math:`[P; X]` is

.. math::

    \mathrm{Attn}(q; [P; X]) = \lambda\,\mathrm{Attn}(q; P) + (1 - \lambda)\,\mathrm{Attn}(q; X),
    \qquad \lambda = \frac{Z_P}{Z_P + Z_X},

so a prefix of any length enters only through :math:`q \mapsto \sum_p e^{s_p}v_p` and
:math:`q \mapsto \sum_p e^{s_p}`. A prefix of :math:`t` copies of a block :math:`B` has
:math:`\mathrm{Attn}(q; B^t) = \mathrm{Attn}(q; B)` and :math:`Z_{B^t} = tZ_B`, so as
:math:`t \to \infty` the output tends to :math:`\mathrm{Attn}(q; B)`, with error exactly
:math:`(1 - \lambda_t)\lvert\mathrm{Attn}(q; X) - \mathrm{Attn}(q; B)\rvert`.

**Finite feature maps.** If the kernel :math:`\kappa(q, k)` replacing :math:`e^{s}` is
:math:`\varphi(q)^\top\psi(k)`, the two prefix functions are exactly :math:`\varphi(q)^\top Z`
and :math:`\varphi(q)^\top\kappa` with :math:`Z = \sum_p \psi(k_p)v_p^\top`,
:math:`\kappa = \sum_p \psi(k_p)`: NTK-Attention's form. The polynomial kernel
:math:`(c + \tau q\cdot k)^2` has :math:`\varphi(q) = (c, \sqrt{2c\tau}\,q, \tau\,
\mathrm{vec}(qq^\top))` and :math:`\psi(k) = (c, \sqrt{2c\tau}\,k, \tau\,\mathrm{vec}(kk^\top))`
(dimension :math:`1 + d + d^2`), so there the summary is exact. The code's
:math:`\varphi(x) = \mathrm{ELU}(x/d^{1/4}) + 1` with :math:`d^2 + d` trainable parameters
(``sum_phi_kv``, ``sum_phi_k``, the latter used as :math:`|k|`) does not factor :math:`e^{s}`;
there the summary is learned, not exact.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_with_axes
from constructions.layers import HookPoint, fixed

KERNELS = ("exp", "poly2")


def _qkv(q, K, V, names: tuple[str, str] = ("K", "V")
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q = _validate.nonempty("q", _validate.real_tensor("q", q, ndim=3))
    B, _, d = q.shape
    K = _validate.real_tensor(names[0], K, shape=(B, None, d))
    if K.shape[1] == 0:
        raise ValueError(f"{names[0]} must hold at least one key")
    V = _validate.nonempty(names[1], _validate.real_tensor(names[1], V,
                                                          shape=(B, K.shape[1], None)))
    return q, K.to(q.dtype), V.to(q.dtype)


def softmax_attention(q, K, V, scale: float) -> torch.Tensor:
    r""":math:`\mathrm{Attn}(q; K, V) = \mathrm{softmax}(\tau qK^\top)V`: ``(B, n_q, d_v)``."""
    q, K, V = _qkv(q, K, V)
    scale = _validate.finite_float("scale", scale)
    return (scale * q @ K.transpose(-1, -2)).softmax(dim=-1) @ V


def prefix_decomposition(q, K_P, V_P, K_X, V_X, scale: float, *, multiplicity: float = 1.0
                         ) -> dict[str, torch.Tensor]:
    r"""The right-hand side of the decomposition, for a prefix of ``multiplicity`` copies of
    ``(K_P, V_P)``: ``{"output", "lam", "prefix", "input"}`` with
    :math:`\lambda = tZ_P/(tZ_P + Z_X)` computed with one max-shift for both sums."""
    q, K_P, V_P = _qkv(q, K_P, V_P, ("K_P", "V_P"))
    _, K_X, V_X = _qkv(q, K_X, V_X, ("K_X", "V_X"))
    if V_X.shape[-1] != V_P.shape[-1]:
        raise ValueError(f"V_X must have the width {V_P.shape[-1]} of V_P, got {V_X.shape[-1]}")
    scale = _validate.finite_float("scale", scale)
    multiplicity = _validate.positive_float("multiplicity", multiplicity)
    s_P = scale * q @ K_P.transpose(-1, -2)                  # (B, n_q, m)
    s_X = scale * q @ K_X.transpose(-1, -2)                  # (B, n_q, n)
    shift = torch.maximum(s_P.amax(dim=-1, keepdim=True), s_X.amax(dim=-1, keepdim=True))
    Z_P = multiplicity * (s_P - shift).exp().sum(dim=-1, keepdim=True)
    Z_X = (s_X - shift).exp().sum(dim=-1, keepdim=True)
    lam = Z_P / (Z_P + Z_X)                                  # (B, n_q, 1)
    prefix = s_P.softmax(dim=-1) @ V_P
    inputs = s_X.softmax(dim=-1) @ V_X
    return {"output": lam * prefix + (1 - lam) * inputs, "lam": lam, "prefix": prefix,
            "input": inputs}


def _poly_features(y: torch.Tensor, c: float, scale: float) -> torch.Tensor:
    r""":math:`(c, \sqrt{2c\tau}\,y, \tau\,\mathrm{vec}(yy^\top))`: ``(..., d)`` to
    ``(..., 1 + d + d^2)``, so that :math:`\varphi(q)^\top\varphi(k) = (c + \tau q\cdot k)^2`."""
    outer = (y[..., :, None] * y[..., None, :]).flatten(-2)
    return torch.cat([torch.full_like(y[..., :1], c), math.sqrt(2 * c * scale) * y,
                      scale * outer], dim=-1)


def _kernel_weights(kernel: str, q: torch.Tensor, K: torch.Tensor, scale: float, c: float
                   ) -> torch.Tensor:
    r"""Unnormalised weights ``(B, n_q, m)``: :math:`e^{s - \max s}` (``"exp"``, shifted per
    query) or :math:`(c + \tau q\cdot k)^2` (``"poly2"``)."""
    return _weights_of(kernel, scale * q @ K.transpose(-1, -2), c)


def _weights_of(kernel: str, scores: torch.Tensor, c: float) -> torch.Tensor:
    """The unnormalised weights of :func:`_kernel_weights` from the scores ``(B, n_q, m)``."""
    if kernel == "exp":
        return (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return (c + scores) ** 2


def kernel_attention(q, K, V, *, kernel: str = "poly2", scale: float = 1.0, c: float = 1.0
                     ) -> torch.Tensor:
    r""":math:`\sum_j\kappa(q, k_j)v_j/\sum_j\kappa(q, k_j)` over the given keys (the prefix
    included): the reference that NTK-Attention's summary must reproduce."""
    q, K, V = _qkv(q, K, V)
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    weights = _kernel_weights(kernel, q, K, _validate.finite_float("scale", scale),
                             _validate.positive_float("c", c))
    return (weights @ V) / weights.sum(dim=-1, keepdim=True)


class NTKAttention(nn.Module):
    r"""NTK-Attention: attention over the input plus a prefix summary :math:`(Z, \kappa)`,

    .. math::

        \frac{\sum_j \kappa(q, k_j)v_j + \varphi(q)^\top Z}{\sum_j \kappa(q, k_j) +
        \varphi(q)^\top\kappa}

    With ``kernel="exp"`` this is the authors' form (:math:`|\kappa|` in place of
    :math:`\kappa`, scores max-shifted per query, the summary term divided by
    :math:`e^{\max s}` alike, :math:`\varphi(x) = \mathrm{ELU}(x/d^{1/4})
    + 1`); with ``"poly2"`` the kernel is :math:`(c + \tau q\cdot k)^2` and :math:`\varphi` is
    :func:`_poly_features`. ``forward(q, K, V)`` maps to ``(B, n_q, d_v)``.

    Hook points (TransformerLens names and layout, one head, no output map): ``hook_q``
    ``(B, n_q, 1, d)``, ``hook_k`` ``(B, n, 1, d)``, ``hook_v`` ``(B, n, 1, d_v)``,
    ``hook_attn_scores`` :math:`\tau qK^\top` ``(B, 1, n_q, n)`` (the kernel weights and, for
    ``"exp"``, the max-shift are computed from it) and ``hook_z`` the output
    ``(B, n_q, 1, d_v)``. There is no ``hook_pattern``: the weights are normalised only after
    the value contraction, together with the prefix's :math:`\varphi(q)^\top\kappa`, so the
    normalised pattern is never formed, and forming it would be another rounding.
    """

    def __init__(self, Z, kappa, *, kernel: str = "poly2", scale: float = 1.0, c: float = 1.0
                 ) -> None:
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        Z = _validate.real_tensor("Z", Z, ndim=2)
        kappa = _validate.real_tensor("kappa", kappa, shape=(Z.shape[0],))
        # the polynomial features take sqrt(2 c scale), so there the scale must be positive
        self.kernel = kernel
        self.scale = (_validate.positive_float("scale", scale) if kernel == "poly2"
                      else _validate.finite_float("scale", scale))
        self.c = _validate.positive_float("c", c)
        self.Z, self.kappa = fixed(Z), fixed(kappa)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_scores, self.hook_z = HookPoint(), HookPoint()

    def phi(self, q: torch.Tensor) -> torch.Tensor:
        if self.kernel == "poly2":
            return _poly_features(q, self.c, self.scale)
        return nn.functional.elu(q / q.shape[-1] ** 0.25) + 1

    def forward(self, q, K, V) -> torch.Tensor:
        q, K, V = _qkv(q, K, V)
        width = self.phi(q[..., :1, :]).shape[-1]
        if width != self.Z.shape[0]:
            raise ValueError(f"Z must have {width} rows for queries of width {q.shape[-1]}, "
                             f"got {self.Z.shape[0]}")
        if V.shape[-1] != self.Z.shape[1]:
            raise ValueError(f"V must have width {self.Z.shape[1]}, got {V.shape[-1]}")
        # hooks see (B, ., 1, width), TransformerLens's layout with its one head
        q, K, V = (hook_with_axes(self.hook_q, q, 2), hook_with_axes(self.hook_k, K, 2),
                   hook_with_axes(self.hook_v, V, 2))
        scores = hook_with_axes(self.hook_attn_scores, self.scale * q @ K.transpose(-1, -2), 1)
        weights = _weights_of(self.kernel, scores, self.c)                  # (B, n_q, n)
        phi_q = self.phi(q)                                                 # (B, n_q, r)
        prefix_num, prefix_den = phi_q @ self.Z, phi_q @ self.kappa[:, None]
        if self.kernel == "exp":  # the code's |kappa|, and the same max-shift as the weights
            prefix_den = phi_q @ self.kappa.abs()[:, None]
            unshift = (-scores.amax(dim=-1, keepdim=True)).exp()
            prefix_num, prefix_den = prefix_num * unshift, prefix_den * unshift
        numerator = weights @ V + prefix_num
        return hook_with_axes(self.hook_z,
                          numerator / (weights.sum(dim=-1, keepdim=True) + prefix_den), 2)


def prefix_summary(K_P, V_P, *, scale: float = 1.0, c: float = 1.0
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`Z = \sum_p\psi(k_p)v_p^\top`, :math:`\kappa = \sum_p\psi(k_p)` for the polynomial
    kernel, from one prefix ``K_P`` ``(m, d)``, ``V_P`` ``(m, d_v)``."""
    K_P = _validate.nonempty("K_P", _validate.real_tensor("K_P", K_P, ndim=2))
    V_P = _validate.nonempty("V_P", _validate.real_tensor("V_P", V_P, shape=(K_P.shape[0], None)))
    features = _poly_features(K_P, _validate.positive_float("c", c),
                             _validate.positive_float("scale", scale))
    return features.T @ V_P, features.sum(dim=0)


def ntk_attention(K_P, V_P, *, scale: float = 1.0, c: float = 1.0) -> NTKAttention:
    """NTK-Attention with the polynomial kernel and the exact summary of the prefix."""
    Z, kappa = prefix_summary(K_P, V_P, scale=scale, c=c)
    return NTKAttention(Z, kappa, kernel="poly2", scale=scale, c=c)
