r"""Dense variants of the LayerNorm majority head whose circuit carries over.

:func:`~constructions.layernorm.majority_head` has axis-aligned :math:`W_K = I` and a
rank-one :math:`W_Q = c\mathbf 1^\top`; its circuit (:mod:`constructions.circuits.majority`)
rests on one fact, that every key is orthogonal to :math:`\mathbf 1`, the one direction every
query points along, so every score is 0. Two gauges keep that fact and make the weights
dense, and both stay :class:`~constructions.layernorm.MajorityHead` s (so the
circuit's patching and bounds apply unchanged):

* :func:`qk_gauge_variant`: :math:`W_Q \to W_QM`, :math:`W_K \to W_KM^{-\top}` with a dense
  invertible :math:`M` that fixes the row vector :math:`\mathbf 1^\top`
  (:math:`\mathbf 1^\top M = \mathbf 1^\top`). Scores :math:`x_iW_QMM^{-1}W_K^\top x_j^\top`
  are unchanged; the queries stay :math:`(c^\top x_i)\mathbf 1^\top M = (c^\top
  x_i)\mathbf 1^\top` and the keys :math:`x_jM^{-\top}` stay orthogonal to :math:`\mathbf 1`
  (:math:`M^{-\top}\mathbf 1 = \mathbf 1`). A general invertible :math:`M` keeps the scores
  too, in exact arithmetic, but not the keys' orthogonality, so the rounding-sized bound of
  the circuit claims would not hold for it.
* :func:`ln_rotation_variant`: the residual stream rotated by a dense orthogonal :math:`R`
  with :math:`R\mathbf 1 = \mathbf 1`: :math:`E \to ER` and every reading map :math:`W \to
  R^\top W`. LayerNorm reads every coordinate, so a generic rotation would not commute with
  it; this one does: the row mean of :math:`eR` is :math:`eR\mathbf 1/d = e\mathbf 1/d`, so
  centring commutes (:math:`\mathbf 1^\top R = \mathbf 1^\top`), and :math:`R` preserves the
  centred norm, so :math:`\mathrm{LN}(eR) = \mathrm{LN}(e)R` and every query, key and value is
  the original's in exact arithmetic.

In float64 the stored weights are rounded, so the variants compute the original's function
within a derived bound (:mod:`theorems.areas.circuits.majority_variants`), not bit for bit.
Sources: the gauge freedom :math:`W_QW_K^\top` (Elhage et al. 2021) and LayerNorm's geometry
(Brody, Alon, Yahav 2023: :math:`\mathrm{LN}` projects onto :math:`\mathbf 1^\perp`); these
variants are ours.
"""

from __future__ import annotations

import torch

from constructions import _validate
from constructions.layernorm import MajorityHead
from constructions.layers import Attention


def _check_model(model: object) -> MajorityHead:
    _validate.instance("model", model, MajorityHead)
    a = model.attention
    if a.causal or a.kind != "softmax" or a.n_heads != 1 or not model.normalize:
        raise ValueError("model must be a majority_head (LayerNorm, one non-causal softmax "
                         "head)")
    return model


def _rebuilt(model: MajorityHead, embeddings: torch.Tensor, W_Q: torch.Tensor,
             W_K: torch.Tensor, W_V: torch.Tensor) -> MajorityHead:
    a = model.attention
    attention = Attention(W_Q.unsqueeze(0), W_K.unsqueeze(0), W_V.unsqueeze(0),
                          a.W_O.detach().clone(), scale=a.scale)
    return MajorityHead(embeddings, attention, normalize=model.normalize)


def fixing_ones(d: int, *, seed: int = 0, strength: float = 0.5,
                dtype: torch.dtype = torch.float64) -> torch.Tensor:
    r"""A dense invertible ``(d, d)`` :math:`M = I + sPG/\lVert PG\rVert_2` with
    :math:`\mathbf 1^\top M = \mathbf 1^\top`: :math:`P = I - \mathbf 1\mathbf 1^\top/d`,
    :math:`G` Gaussian (seeded), :math:`s` = ``strength`` :math:`< 1` (then
    :math:`\lVert M - I\rVert_2 = s`, so :math:`M` is invertible with condition number
    :math:`\le (1+s)/(1-s)`)."""
    d = _validate.positive_int("d", d, minimum=2)
    dtype = _validate.float_dtype("dtype", dtype)
    strength = _validate.positive_float("strength", strength)
    if strength >= 1:
        raise ValueError(f"strength must be < 1 so that M is invertible, got {strength}")
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    G = torch.randn(d, d, generator=generator, dtype=torch.float64)
    P = torch.eye(d, dtype=torch.float64) - torch.full((d, d), 1.0 / d, dtype=torch.float64)
    E = P @ G
    return (torch.eye(d, dtype=torch.float64) + strength * E / torch.linalg.matrix_norm(E, 2)
            ).to(dtype)


def ones_rotation(d: int, *, seed: int = 0, dtype: torch.dtype = torch.float64
                  ) -> torch.Tensor:
    r"""A dense orthogonal ``(d, d)`` :math:`R = Q_1Q_2^\top` with :math:`R\mathbf 1 =
    \mathbf 1`: :math:`Q_1, Q_2` are the orthogonal factors of two seeded Gaussian matrices
    whose first column is :math:`\mathbf 1`, signed so that their first column is
    :math:`\mathbf 1/\sqrt d`; then :math:`Q_2^\top\mathbf 1 = \sqrt d e_1` and
    :math:`Q_1\sqrt d e_1 = \mathbf 1`."""
    d = _validate.positive_int("d", d, minimum=2)
    dtype = _validate.float_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    factors = []
    for _ in range(2):
        A = torch.randn(d, d, generator=generator, dtype=torch.float64)
        A[:, 0] = 1.0
        Q, R = torch.linalg.qr(A)
        factors.append(Q * torch.sign(torch.diagonal(R)))   # R's diagonal > 0: Q e_1 = 1/sqrt d
    return (factors[0] @ factors[1].T).to(dtype)


def qk_gauge_variant(model: MajorityHead, *, seed: int = 0, strength: float = 0.5
                     ) -> MajorityHead:
    r"""``model`` with :math:`W_Q \to W_QM`, :math:`W_K \to W_KM^{-\top}`, :math:`M` =
    :func:`fixing_ones` (module docstring): dense keys, the same scores and circuit."""
    model = _check_model(model)
    a = model.attention
    W_Q, W_K, W_V = (w[0].detach() for w in (a.W_Q, a.W_K, a.W_V))
    M = fixing_ones(W_Q.shape[1], seed=seed, strength=strength).to(W_Q)
    if W_K.shape[1] != W_Q.shape[1]:
        raise ValueError("model must have square query and key maps (a majority_head)")
    return _rebuilt(model, model.embeddings.detach().clone(), W_Q @ M,
                    W_K @ torch.linalg.inv(M).T, W_V.clone())


def ln_rotation_variant(model: MajorityHead, *, seed: int = 0) -> MajorityHead:
    r"""``model`` with its residual stream rotated by :math:`R` = :func:`ones_rotation`:
    :math:`E \to ER`, :math:`W_{Q,K,V} \to R^\top W_{Q,K,V}` (module docstring)."""
    model = _check_model(model)
    a = model.attention
    E = model.embeddings.detach()
    R = ones_rotation(E.shape[1], seed=seed).to(E)
    W_Q, W_K, W_V = (R.T @ w[0].detach() for w in (a.W_Q, a.W_K, a.W_V))
    return _rebuilt(model, E @ R, W_Q, W_K, W_V)
