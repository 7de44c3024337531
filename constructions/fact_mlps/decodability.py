r"""Decodability of the values by a low-dimensional code: margins, the Johnson-Lindenstrauss
dimension and the smallest code that works (FM.4).
"""

from __future__ import annotations

import math

import torch

from constructions import _validate
from constructions.fact_mlps.encoder_decoder import value_margin

# --- decodability (FM.4) ----------------------------------------------------------------------

def jl_code_dim(num_values: int, gamma: float) -> int:
    r"""A code dimension at which a Gaussian projection decodes every value with probability
    at least ½ (our derivation; the paper's own decodability formula is unconfirmed).

    Let :math:`a = v_k/\lVert v_k\rVert`, :math:`b = (v_k - v_j)/\lVert v_k - v_j\rVert`.
    Decoding fails for the pair iff :math:`\langle Pa, Pb\rangle \le 0`, while
    :math:`\langle a, b\rangle \ge \gamma M^2/(M\cdot 2M) = \gamma/2` with
    :math:`M = \max\lVert v\rVert`. By polarisation,
    :math:`|\langle Pa, Pb\rangle - \langle a, b\rangle| \le \epsilon` whenever
    :math:`\lVert P(a\pm b)\rVert^2` are within :math:`1\pm\epsilon` of
    :math:`\lVert a\pm b\rVert^2`, which fails with probability at most
    :math:`2e^{-m(\epsilon^2 - \epsilon^3)/4}` each (Dasgupta & Gupta 2003). With
    :math:`\epsilon = \min(\gamma/2, 1/2)` and a union bound over fewer than :math:`|V|^2`
    ordered pairs, failure has probability at most
    :math:`4|V|^2 e^{-m(\epsilon^2-\epsilon^3)/4} \le 1/2` once
    :math:`m \ge 4\ln(8|V|^2)/(\epsilon^2 - \epsilon^3) = O(\log|V|/\gamma^2)`.
    """
    num_values = _validate.positive_int("num_values", num_values)
    gamma = _validate.positive_float("gamma", gamma)
    eps = min(gamma / 2, 0.5)
    return math.ceil(4 * math.log(8 * num_values**2) / (eps**2 - eps**3))


def decoding_success_rate(values: torch.Tensor, m: int, *, draws: int = 64,
                          seed: int = 0) -> float:
    r"""Fraction of ``draws`` Gaussian projections :math:`P \in \mathbb R^{m\times d_v}` under
    which every value decodes itself: :math:`\arg\max_j\langle Pv_j, Pv_k\rangle = k` for all
    :math:`k` (strictly). All draws are evaluated in one batched product."""
    values = _validate.nonempty("values", _validate.real_tensor("values", values, ndim=2))
    values = values.to(torch.float64)
    m = _validate.positive_int("m", m)
    draws = _validate.positive_int("draws", draws)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    P = torch.randn(draws, m, values.shape[1], generator=generator, dtype=torch.float64)
    projected = values @ P.transpose(1, 2)                      # (draws, |V|, m)
    gram = projected @ projected.transpose(1, 2)                # (draws, |V|, |V|)
    gaps = gram.diagonal(dim1=1, dim2=2)[:, :, None] - gram
    gaps.diagonal(dim1=1, dim2=2).fill_(math.inf)
    return float((gaps.flatten(1).amin(1) > 0).double().mean())


def decodability(values: torch.Tensor, *, draws: int = 64, seed: int = 0,
                 max_dim: int | None = None) -> int | None:
    r"""The proxy :math:`m^*(V)`: the smallest :math:`m` at which a Gaussian projection decodes
    every value with (estimated) probability at least ½, by doubling then bisection on
    :math:`m`.

    The success probability is monotone in :math:`m` only on average, so this is the
    bisection point of the estimated curve; ``None`` when even ``max_dim`` (default
    :func:`jl_code_dim`, or ``4 d_v`` when :math:`\gamma \le 0`) fails.
    """
    values = _validate.nonempty("values", _validate.real_tensor("values", values, ndim=2))
    values = values.to(torch.float64)
    seed = _validate.seed("seed", seed)
    draws = _validate.positive_int("draws", draws)
    gamma = value_margin(values)
    if max_dim is None:
        max_dim = jl_code_dim(values.shape[0], gamma) if gamma > 0 else 4 * values.shape[1]
    max_dim = _validate.positive_int("max_dim", max_dim)

    def decodes(m: int) -> bool:
        return decoding_success_rate(values, m, draws=draws, seed=seed) >= 0.5

    lo, hi = 0, 1  # success(lo) < 1/2 (m = 0 never decodes); hi is the next candidate
    while not decodes(hi):
        if hi == max_dim:
            return None
        lo, hi = hi, min(2 * hi, max_dim)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if decoding_success_rate(values, mid, draws=draws, seed=seed) >= 0.5:
            hi = mid
        else:
            lo = mid
    return hi


