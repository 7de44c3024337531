r"""Rounding bounds and certificates of the storage checks (:mod:`.storage` and
:mod:`.storage_readout`): the encoder system's entrywise rounding, its rank certificate, and the
gated MLP's output error."""

from __future__ import annotations

import torch

from constructions.fact_mlps import encoder_system
from theorems.certificates import frobenius_upper
from theorems.numerics import gamma


def system_error(keys: torch.Tensor, gate: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    r"""Entrywise bound on :math:`|\hat M - M|`: the computed :func:`encoder_system` against the
    exact matrix of the same (float64) keys, gate and down weights.

    :math:`s = Gk_i` errs by :math:`\gamma_d(|G||k_i|)_h`; the logistic is
    :math:`\tfrac14`-Lipschitz and evaluated to relative :math:`\gamma_4` (a faithful exp, a
    sum, a quotient), so :math:`|\hat\sigma - \sigma| \le \tfrac14\gamma_d|G||k| +
    \gamma_4\hat\sigma(1 + \gamma_4)`; the product :math:`D_{oh}\sigma_h k_{ij}` adds two
    roundings: :math:`|\Delta M| \le \gamma_2|\hat M| + (1 + \gamma_2)|D||k|
    (\tfrac14\gamma_d|G||k| + \gamma_5\hat\sigma)`, the absolute-value products evaluated
    in float64 with three roundings (:math:`1 + \gamma_6` covers them)."""
    F, d = keys.shape
    m, h = down.shape
    sigma = torch.sigmoid(keys @ gate.T)
    spread = gamma(d) * (keys.abs() @ gate.abs().T) / 4 + gamma(5) * sigma           # (F, h)
    factors = torch.einsum("oh,ih,ij->iohj", down.abs(), spread, keys.abs()).reshape(F * m, h * d)
    M = encoder_system(keys, gate, down)
    return (gamma(2) * M.abs() + (1 + gamma(2)) * factors) * (1 + gamma(6))


def rank_certificate(M: torch.Tensor, error: torch.Tensor | None = None) -> tuple[float, float]:
    r"""``(sigma_min, tolerance)``: the exact matrix has full row rank if
    ``sigma_min > tolerance``.

    The computed :math:`M` differs from the exact one by ``error`` entrywise
    (:func:`system_error`; by default :math:`\gamma_3|M|`, three rounded exact factors), and
    LAPACK's SVD returns the singular values of a matrix within :math:`\gamma_{r+c}\lVert
    M\rVert_F` of it (assumed: an SVD backward error of that order, not proved here); by
    Weyl's inequality the exact :math:`r`-th singular value is within the sum of both of the
    computed one."""
    rows, cols = M.shape
    if rows > cols:
        return 0.0, 0.0
    sigma = torch.linalg.svdvals(M)
    data = gamma(3) * float(M.norm()) if error is None else frobenius_upper(error)
    tolerance = gamma(rows + cols) * frobenius_upper(M) + data
    return float(sigma[rows - 1]), tolerance


def score_tolerance(model, keys: torch.Tensor, values: torch.Tensor) -> float:
    r"""Rounding bound on a difference of two computed scores :math:`\langle g(k), v_j\rangle`.

    :func:`gated_output_error` bounds the computed :math:`g(k)` entrywise by :math:`E`
    (composed per layer, including the gate's rounding: the logistic's input errs by
    :math:`\gamma_d|G||k|`, which the old bound, taking the computed gates as exact
    multipliers, left out). The score is a :math:`d_v`-term dot product with :math:`v_j`:
    :math:`|\hat c_j - c_j| \le E^\top|v_j| + \gamma_{d_v}(|g| + E)^\top|v_j|`, with
    :math:`|g| \le |P|^\top|D||A||k|` (:math:`0 < \sigma \le 1`). Twice that bounds a
    difference; the magnitudes, computed in float64 with at most
    :math:`d + h + m + d_v` roundings per term, carry :math:`1 + \gamma_{d+h+m+d_v}`."""
    sizes = model.sizes
    k = keys.to(model.gate.dtype).abs()
    E = gated_output_error(model, keys)                                       # (F, d_v)
    g_abs = ((k @ model.up.abs().T) @ model.down.abs().T) @ model.decoder.abs()
    d_v = values.shape[1]
    per_score = (E + gamma(d_v) * (g_abs + E)) @ values.abs().T               # (F, |V|)
    n = sizes["d"] + sizes["hidden"] + sizes["code_dim"] + d_v
    return 2 * float(per_score.max()) * (1 + gamma(n))


def gated_output_error(mlp, k: torch.Tensor) -> torch.Tensor:
    r"""Rounding bound ``(B, d_v)`` of one evaluation of
    :math:`g(k) = P^\top D(\sigma(Gk)\odot Ak)` at the given (exact) input ``k``.

    Composed per layer (standard model, first order folded into the gammas):
    :math:`s = Gk` and :math:`a = Ak` err by :math:`\gamma_d |G||k|`, :math:`\gamma_d|A||k|`;
    the logistic is :math:`\tfrac14`-Lipschitz and evaluated as :math:`1/(1+e^{-s})` with a
    faithfully rounded exp (relative :math:`2u`), i.e. to relative :math:`\gamma_4`;
    :math:`0<\sigma\le 1`, so the product :math:`h=\sigma\odot a` errs by
    :math:`E_h = \gamma_d|A||k| + |a|(\tfrac14\gamma_d|G||k| + \gamma_5)` (one more u for
    the product); :math:`z = Dh` errs by :math:`\gamma_h|D|(|a|+E_h) + |D|E_h`, and
    :math:`g = P^\top z` by :math:`\gamma_m|P|^\top(|z|+E_z) + |P|^\top E_z`, where
    :math:`|a| \le |A||k|` and :math:`|z| \le |D||A||k|` (as :math:`\sigma \le 1`)."""
    k = k.to(mlp.gate.dtype).abs()
    d, h, m = k.shape[-1], mlp.gate.shape[0], mlp.down.shape[0]
    a = k @ mlp.up.abs().T
    s = k @ mlp.gate.abs().T
    e_h = gamma(d) * a + a * (gamma(d) * s / 4 + gamma(5))
    z = a @ mlp.down.abs().T
    e_z = gamma(h) * (a + e_h) @ mlp.down.abs().T + e_h @ mlp.down.abs().T
    return gamma(m) * (z + e_z) @ mlp.decoder.abs() + e_z @ mlp.decoder.abs()
