r"""What several topics of the area use: the sources, the notation every claim after the first
states, and the Monte Carlo helpers (the exact conditional coefficients given :math:`x_1`, which
serve as control variates, the sampled ones, and the z-score after a rounding allowance)."""

from __future__ import annotations

import math

import torch

from constructions.ar_mesa import ar_mesa_layer, ar_sequences, sample_x1
from theorems.claims import Source

ZHENG = {"arxiv": "2405.16845", "ref": "Zheng, Huang, Wang, Wu, Zhu, Li (2024), NeurIPS; "
                                       "code ML-GSAI/MesaOpt-AR-Transformer"}
MODEL_SOURCE = Source(where="Abstract (one GD step on an in-context OLS problem); model, data "
                            "and initialisation from the authors' code (models/lsa.py, "
                            "data/generate_data.py)", tag="V", **ZHENG)
# z-score limit for Monte Carlo comparisons: with a few dozen comparisons per check, a
# two-sided 4.5-sigma band has a false-alarm rate below 1e-4 under normality.
Z_LIMIT = 4.5

SYMBOLS = (r"Let $x_{t+1} = Wx_t$ with $W = \mathrm{diag}(e^{i\theta_1},\dots,e^{i\theta_d})$, "
           r"$\theta_j \sim U[0,2\pi)$ i.i.d. and independent of $x_1 \in \mathbb C^d$; tokens "
           r"$e_t = (x_t; x_{t-1}) \in \mathbb C^{2d}$, $x_0 = 0$; and let the construction "
           r"have $W_{KQ}[d{:},{:}d] = aI_d$, $W_{PV}[:,{:}d] = bI_d$ and zeros elsewhere, "
           r"predicting $\hat y_t = \rho_t^{-1}\sum_{i\le t} W_{PV}e_i\,e_i^{\mathsf H}W_{KQ}e_t$ "
           r"with $\rho_t = t-1$. Write $c = ab$, $\mu_p = \mathbb E\sum_j |x_{1j}|^p$ and "
           r"$\kappa = \mathbb E\sum_{j\ne k}|x_{1j}|^2|x_{1k}|^4$. ")


# --- Monte Carlo ------------------------------------------------------------------------------

def conditional_coefficients(x1: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    r"""Exact :math:`E_\theta` of :math:`\mathrm{Re}\langle\hat y_t,x_{t+1}\rangle` and
    :math:`\lVert\hat y_t\rVert^2` given :math:`x_1`, at :math:`ab = 1`: ``(B, len(t))`` each."""
    v = x1.abs().pow(2)
    m4, m6 = v.pow(2).sum(-1), v.pow(3).sum(-1)
    cross = v.sum(-1) * m4 - m6
    linear = m4[:, None].expand(-1, len(t))
    quadratic = m6[:, None] + cross[:, None] / (t - 1)
    return linear, quadratic


def sampled_coefficients(kind: str, d: int, T: int, batch: int, seed: int, build, scale=1.0,
                         a=1.0, b=1.0):
    """Per-sequence ``(b, c)`` at :math:`t = 2..T-1` from the layer with weights ``a, b``, x1,
    and ``(b, c)`` evaluated on absolute values (the scale of their rounding)."""
    generator = torch.Generator().manual_seed(seed)
    x1 = sample_x1(kind, batch, d, scale=scale, generator=generator)
    x = ar_sequences(x1, T, generator=generator)
    y = build(d, a, b)(x)[:, 1:T - 1]
    target = x[:, 2:]
    y_abs = ar_mesa_layer(d, abs(a), abs(b))(x.abs()).abs()[:, 1:T - 1]
    absolute = ((y_abs * target.abs()).sum(-1), y_abs.pow(2).sum(-1))
    return (y.conj() * target).real.sum(-1), y.abs().pow(2).sum(-1), x1, absolute


def z_scores(residual: torch.Tensor, rounding: torch.Tensor) -> torch.Tensor:
    r"""Mean over the batch in standard errors after the rounding allowance: ``rounding``
    bounds each sample's rounding error, so the computed mean is within :math:`\bar R` (its
    mean) of an exact sample mean, whose mean is 0 when the formula holds: z =
    :math:`(|\text{mean}| - \bar R)_+/\text{SE}` (a deterministic residual, SE 0, must lie
    within :math:`\bar R`; a positive excess over SE 0 is inf)."""
    mean, spread = residual.mean(0), residual.std(0) / math.sqrt(residual.shape[0])
    excess = (mean.abs() - rounding.mean(0)).clamp_min(0)
    return torch.where(excess > 0, excess / spread, torch.zeros_like(excess))
