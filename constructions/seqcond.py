r"""One coordinate of SeqCond Attention (SCA), the sequence operator of Nautile-370M (Chenebaux
2026, "Nautile-370M: Spectral Memory Meets Attention in a Small Reasoning Model",
arXiv:2604.24809), as defined in the author's code, kerighan/seqcond
(``seqcond/torch/seqcond.py``, ``SeqCondAttention.forward``, and ``seqcond/jax/
seqcond_fast.py``, commit 360d9d6) [V code].

Per head and coordinate, token :math:`j` carries a key :math:`k_j \in \mathbb R` and a weight
:math:`p_j > 0` (the code's ``p_w``: a softplus of a score times a decay, clamped to
:math:`[10^{-4}, 5000]`); its phase is :math:`u_j = \sigma(ck_j)`, :math:`\sigma(z) =
z/(1 + |z|)` (softsign, :math:`c` the head's ``phase_scale``). At each of :math:`M` spectral
points :math:`\theta_m \in (0.001, 3.0]` (``num_thetas``; 2 in the ~370M ``large`` config) the
prefix summary is

.. math::

    S_t(\theta) = \frac{\sum_{j\le t} p_jk_je^{i\theta u_j}}{\sum_{j\le t}p_j},

a weighted derivative of the empirical characteristic function of the phases, and the readout is
:math:`\sum_m c_mS_t(\theta_m)` with :math:`c_m = w_m\bar q_m/\sqrt H` (learned positive
:math:`w_m` summing to one, a complex query :math:`q_m` from the current token), before a
gated RMSNorm and a SwiGLU. Everything after the readout, the convolution before it and the
decays inside :math:`p_j` are left out: they do not change what one coordinate's summary holds.
"""

from __future__ import annotations

import torch

from constructions import _validate

THETA_RANGE = (0.001, 3.0)  # theta = 0.001 + 2.999 sigmoid(.) in the code
NAUTILE_NUM_THETAS = 2      # ModelConfig.large (~370M): num_thetas=2


def sca_phases(keys: torch.Tensor, phase_scale: float = 1.0) -> torch.Tensor:
    r"""The phases :math:`u_j = \sigma(ck_j) \in (-1, 1)`, :math:`\sigma(z) = z/(1 + |z|)`."""
    keys = _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=1))
    scaled = _validate.positive_float("phase_scale", phase_scale) * keys
    return scaled / (1 + scaled.abs())


def _thetas(thetas: object) -> torch.Tensor:
    thetas = _validate.nonempty("thetas", _validate.real_tensor("thetas", thetas, ndim=1))
    low, high = THETA_RANGE
    if bool((thetas < low).any()) or bool((thetas > high).any()):
        raise ValueError(f"thetas must lie in the code's range [{low}, {high}], "
                         f"got {thetas.tolist()}")
    return thetas.to(torch.float64)


def spectral_matrix(phases: torch.Tensor, thetas: torch.Tensor) -> torch.Tensor:
    r""":math:`V_{mj} = e^{i\theta_mu_j}`, shape ``(M, t)``, complex128."""
    phases = _validate.nonempty("phases", _validate.real_tensor("phases", phases, ndim=1))
    angles = _thetas(thetas)[:, None] * phases.to(torch.float64)[None, :]
    return torch.polar(torch.ones_like(angles), angles)


def sca_state(keys: torch.Tensor, weights: torch.Tensor, thetas: torch.Tensor,
              phase_scale: float = 1.0) -> torch.Tensor:
    r"""The prefix summaries :math:`S_\tau(\theta_m)` for every prefix length
    :math:`\tau = 1, \dots, t`, shape ``(t, M)``, complex128 (cumulative sums, as the code's
    parallel scan)."""
    keys = _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=1))
    weights = _validate.matching("weights", _validate.real_tensor("weights", weights, ndim=1),
                                 keys.shape[0], to="the keys")
    if bool((weights <= 0).any()):
        raise ValueError("weights must be positive (the code clamps them to >= 1e-4)")
    phases = sca_phases(keys, phase_scale)
    V = spectral_matrix(phases, thetas)                                   # (M, t)
    terms = (weights * keys).to(torch.float64)[:, None] * V.T             # (t, M)
    return terms.cumsum(dim=0) / weights.to(torch.float64).cumsum(dim=0)[:, None]


def sca_readout(state: torch.Tensor, coefficients: torch.Tensor) -> torch.Tensor:
    r"""The readout :math:`\sum_m c_mS(\theta_m)` of summaries ``state`` ``(..., M)``."""
    if not isinstance(state, torch.Tensor) or not state.is_complex():
        raise TypeError("state must be a complex torch.Tensor (from sca_state)")
    if state.ndim < 1 or not bool(torch.isfinite(state).all()):
        raise ValueError(f"state must be finite with a last dim of M points, "
                         f"got shape {tuple(state.shape)}")
    if not isinstance(coefficients, torch.Tensor):
        raise TypeError(f"coefficients must be a torch.Tensor, "
                        f"got {type(coefficients).__name__}")
    if not bool(torch.isfinite(coefficients).all()):
        raise ValueError("coefficients must be finite")
    _validate.matching("coefficients", coefficients, state.shape[-1], to="the state's points")
    if coefficients.ndim != 1:
        raise ValueError(f"coefficients must be one vector of M values, "
                         f"got shape {tuple(coefficients.shape)}")
    return state @ coefficients.to(state.dtype)
