r"""First-order rounding bounds shared by the approximation checks.

Standard model (``theorems.numerics``): every operation is exact up to a factor
:math:`1 + \delta`, :math:`|\delta| \le u`; a sum of :math:`N` terms (in any order) each with
:math:`k` roundings of its own is accurate to :math:`\gamma_{N + k}` times the sum of the terms'
absolute values, and :math:`\gamma_a + \gamma_b \le \gamma_{a+b}`.

**Softmax averages.** Let :math:`o = \sum_j p_j v_j`, :math:`p = \mathrm{softmax}(s)` over
:math:`m` scores with :math:`|s_j| \le S`, and let the computed scores be off by at most
:math:`\Delta`. Then each computed weight is :math:`p_j(1 + \varepsilon_j)` with
:math:`|\varepsilon_j| \le \eta = 2\Delta + 2uS + \gamma_{m+2}`: a score perturbation of
:math:`\Delta` moves :math:`p_j \propto e^{s_j}` by a factor within :math:`e^{\pm 2\Delta}`; the
max-shift's subtraction is off by :math:`u|s_j - s_{\max}| \le 2uS` in the exponent; the
exponential, the :math:`m`-term normaliser and the division add :math:`\gamma_{m+2}`. Hence
:math:`|\hat o - o| \le \eta\max_j|v_j| + (\text{the rounding of }\sum_j \hat p_j v_j)`.
"""

from __future__ import annotations

import torch

from constructions.universality import SingleLayerTransformer
from theorems.numerics import gamma, unit_roundoff

U = unit_roundoff(torch.float64)


def softmax_weight_error(delta: torch.Tensor | float, score_max: torch.Tensor | float,
                         m: int) -> torch.Tensor | float:
    r""":math:`\eta = 2\Delta + 2uS + \gamma_{m+2}`: the relative error of each computed
    softmax weight (module docstring)."""
    return 2 * delta + 2 * U * score_max + gamma(m + 2)


def attention_rounding_bound(attention, e: torch.Tensor) -> torch.Tensor:
    r"""Per-coordinate bound ``(B, n, D_out)`` on the rounding error of
    :class:`constructions.layers.Attention` (softmax) at the exact input ``e``.

    Per head :math:`h` with queries/keys/values :math:`q = eW_Q`, :math:`k = eW_K`,
    :math:`v = eW_V` and score scale :math:`\tau`: the scores are accurate to
    :math:`\Delta_h = \gamma_{2D + d_k + 1}|\tau|\max_{ij}(|e_i||W_Q|)\cdot(|e_j||W_K|)` (two
    :math:`D`-term products, one :math:`d_k`-term dot product, the scale), with
    :math:`S_h` the same maximum without :math:`\gamma`; the values to
    :math:`\gamma_D|e||W_V|`; the output sums :math:`N = H n d_v` triple products, to
    :math:`\gamma_{N+2}`. With :math:`M_{h} = \max_j |e_j||W_V^h||W_O^h|` (per output
    coordinate) and :math:`\sum_j p_j = 1`:
    :math:`|\hat A - A| \le \sum_h (\eta_h + \gamma_{D + N + 2}) M_h`. A causal mask only
    removes keys (exactly), so the bound taken over all :math:`n` keys covers it.
    """
    D = e.shape[-1]
    n = e.shape[-2]
    heads, _, d_k = attention.W_Q.shape
    d_v = attention.W_V.shape[-1]
    a = e.abs()
    q = torch.einsum("bnd,hdk->bhnk", a, attention.W_Q.abs())          # (B, H, n, d_k)
    k = torch.einsum("bnd,hdk->bhnk", a, attention.W_K.abs())
    score_max = abs(attention.scale) * (q @ k.transpose(-1, -2)).amax(dim=(-1, -2))  # (B, H)
    delta = gamma(2 * D + d_k + 1) * score_max
    eta = softmax_weight_error(delta, score_max, n)                      # (B, H)
    reach = torch.einsum("bnd,hdv,hvo->bhno", a, attention.W_V.abs(), attention.W_O.abs())
    M = reach.amax(dim=2)                                                # (B, H, D_out)
    per_head = (eta[..., None] + gamma(D + heads * n * d_v + 2)) * M
    return per_head.sum(dim=1)[:, None, :].expand(-1, n, -1)             # (B, n, D_out)


def layer_rounding_bound(model: SingleLayerTransformer, x: torch.Tensor) -> torch.Tensor:
    r"""Per-coordinate bound ``(B, n, d)`` on :math:`|\hat T(X) - T(X)|` for
    :class:`constructions.universality.SingleLayerTransformer`.

    The embedding is exact (a concatenation, and :math:`s\cdot 1`). With :math:`E_A` from
    :func:`attention_rounding_bound`: :math:`E_Y = E_A + u(|E| + |A|)` (the residual add);
    the FFN's pre-activation :math:`h = YW_{in} + b` is off by
    :math:`E_Y|W_{in}| + \gamma_{D+1}(|Y||W_{in}| + |b_{in}|)`, ReLU is 1-Lipschitz, and its
    output by :math:`E_h|W_{out}| + \gamma_{d_{ff}+1}(|\mathrm{ReLU}(h)||W_{out}| + |b_{out}|)`;
    the final add contributes :math:`u(|Y| + |F|)`. Computed magnitudes stand in for exact ones
    (first order).
    """
    e, a, y, f = model.streams(x)
    ffn = model.ffn
    D = e.shape[-1]
    d_ff = ffn.W_in.shape[1]
    e_y = attention_rounding_bound(model.attention, e) + U * (e.abs() + a.abs())
    pre = y @ ffn.W_in + ffn.b_in
    e_h = e_y @ ffn.W_in.abs() + gamma(D + 1) * (y.abs() @ ffn.W_in.abs() + ffn.b_in.abs())
    e_f = e_h @ ffn.W_out.abs() + gamma(d_ff + 1) * (torch.relu(pre).abs() @ ffn.W_out.abs()
                                                     + ffn.b_out.abs())
    total = e_y + e_f + U * (y.abs() + f.abs())
    return total[..., :model.d]


def softmax_attention_bound(q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, scale: float
                            ) -> torch.Tensor:
    r"""Per-coordinate bound ``(B, n_q, d_v)`` on the rounding error of
    ``softmax(scale q K^T) V`` over :math:`m` keys: :math:`(\eta + \gamma_{m+1})M` with
    :math:`S = |\tau|\max_j|q|\cdot|k_j|`, :math:`\Delta = \gamma_{d+1}S` (a :math:`d`-term
    dot product and the scale), :math:`\eta` from :func:`softmax_weight_error`, the
    :math:`m`-term product with the values adding :math:`\gamma_{m+1}`, and
    :math:`M = \max_j|v_j|` per coordinate."""
    m, d = K.shape[-2], K.shape[-1]
    score_max = abs(scale) * (q.abs() @ K.abs().transpose(-1, -2)).amax(dim=-1, keepdim=True)
    eta = softmax_weight_error(gamma(d + 1) * score_max, score_max, m)   # (B, n_q, 1)
    return (eta + gamma(m + 1)) * V.abs().amax(dim=-2, keepdim=True)
