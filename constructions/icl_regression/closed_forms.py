r"""Closed forms of the optimal one-layer LSA: second moments, population losses, optimal
preconditioners, nonlinear responses (IR.1, IR.2, IR.3, IR.5).
"""

from __future__ import annotations

import torch

from constructions import _validate
from constructions._validate import spd_matrix

# IR.7's autoregressive layer lives in its own module; it is part of this area's API.
from constructions.ar_mesa import ar_mesa_layer as ar_mesa_layer

# --- closed forms (IR.1, IR.2, IR.3, IR.5) ----------------------------------------------------

def _moments(n: int, sigma2: float, Sigma, Omega) -> tuple[torch.Tensor, torch.Tensor,
                                                           torch.Tensor, float]:
    n = _validate.positive_int("n", n)
    sigma2 = _validate.positive_float("sigma2", sigma2, allow_zero=True)
    Sigma = spd_matrix("Sigma", Sigma)
    d = Sigma.shape[0]
    Omega = torch.eye(d, dtype=torch.float64) if Omega is None else spd_matrix("Omega", Omega, d)
    return Sigma, Omega, _second_moment(n, sigma2, Sigma, Omega), sigma2


def second_moment(n: int, sigma2: float, Sigma: torch.Tensor,
                  Omega: torch.Tensor) -> torch.Tensor:
    r""":math:`H = \mathbb E[ss^\top] = \tfrac{n+1}n\Sigma\Omega\Sigma
    + \tfrac{\mathrm{tr}(\Omega\Sigma) + \sigma^2}n\Sigma` for :math:`s = \tfrac1n\sum_i y_ix_i`.

    Derivation: :math:`\mathbb E[y_iy_jx_ix_j^\top] = \Sigma\Omega\Sigma` for :math:`i\ne j`
    and, by Isserlis, :math:`\mathbb E[y^2xx^\top] = (\mathrm{tr}(\Sigma\Omega) + \sigma^2)\Sigma
    + 2\Sigma\Omega\Sigma`; the :math:`n(n-1)` and :math:`n` terms over :math:`n^2` give H.
    """
    _validate.positive_int("n", n)
    _validate.positive_float("sigma2", sigma2, allow_zero=True)
    d = spd_matrix("Sigma", Sigma).shape[0]
    spd_matrix("Omega", Omega, d)
    return _second_moment(n, sigma2, Sigma, Omega)  # the given matrices, not symmetrised copies


def _second_moment(n: int, sigma2: float, Sigma: torch.Tensor,
                   Omega: torch.Tensor) -> torch.Tensor:
    return ((n + 1) / n) * Sigma @ Omega @ Sigma + ((torch.trace(Omega @ Sigma) + sigma2) / n
                                                     ) * Sigma


def population_loss(Gamma: torch.Tensor, n: int, sigma2: float, Sigma: torch.Tensor,
                    Omega: torch.Tensor | None = None) -> float:
    r"""Exact pre-training loss of :math:`\hat y = x_q^\top\Gamma s` on linear tasks:

    .. math::

        L(\Gamma) = \sigma^2 + \mathrm{tr}(\Sigma\Omega) - 2\,\mathrm{tr}(\Sigma\Gamma\Sigma\Omega)
        + \mathrm{tr}(\Gamma^\top\Sigma\Gamma H).

    (Expand :math:`\mathbb E(x_q^\top(\Gamma s - w) - \varepsilon_q)^2` with
    :math:`\mathbb E[s\mid w] = \Sigma w` and :math:`\mathbb E[ss^\top] = H`.) With
    :math:`\Omega = I,\ \sigma = 0,\ \Sigma = \Lambda` and ``n = M`` this is Zhang, Frei and
    Bartlett's test risk for prompts of length M [D].
    """
    Sigma, Omega, H, sigma2 = _moments(n, sigma2, Sigma, Omega)
    Gamma = _validate.real_tensor("Gamma", Gamma, shape=Sigma.shape).to(torch.float64)
    cross = torch.trace(Sigma @ Gamma @ Sigma @ Omega)
    return float(sigma2 + torch.trace(Sigma @ Omega) - 2 * cross
                 + torch.trace(Gamma.T @ Sigma @ Gamma @ H))


def optimal_preconditioner(n: int, sigma2: float, Sigma: torch.Tensor,
                           Omega: torch.Tensor | None = None) -> torch.Tensor:
    r"""The minimiser :math:`A^*` of :func:`population_loss` (IR.1, IR.2) [D]:

    .. math::

        A^* = \Omega\Sigma\Big[\tfrac{n+1}n\Sigma\Omega\Sigma
              + \tfrac{\mathrm{tr}(\Omega\Sigma) + \sigma^2}n\Sigma\Big]^{-1},

    in the orientation :math:`\hat y = x_q^\top A^* \tfrac1n\sum_i y_i x_i`. Setting the
    gradient :math:`2\Sigma\Gamma H - 2\Sigma\Omega\Sigma` to zero gives
    :math:`A^* = \Omega\Sigma H^{-1}`. Although the product :math:`\Omega\Sigma` is not
    symmetric, :math:`A^*` is: :math:`A^* = \big[\tfrac{n+1}n\Sigma
    + \tfrac{\mathrm{tr}(\Omega\Sigma)+\sigma^2}n\Omega^{-1}\big]^{-1}` (pull :math:`\Sigma`
    out of :math:`H` on the left and :math:`\Omega` out on the right). Special cases:
    :math:`\Omega = \Sigma^{-1}` gives :math:`\tfrac n{n+d+1+\sigma^2}\Sigma^{-1}`
    (Mahankali's non-isotropic case, and Ahn's data), :math:`\Sigma = \Omega = I` gives
    :math:`\eta^* I` with :math:`\eta^* = n/(n+d+1+\sigma^2)`.
    """
    Sigma, Omega, H, _ = _moments(n, sigma2, Sigma, Omega)
    # A* = Omega Sigma H^{-1}  <=>  A* H = Omega Sigma  <=>  H A*^T = Sigma Omega (H symmetric)
    return torch.linalg.solve(H, Sigma @ Omega).T


def optimal_loss(n: int, sigma2: float, Sigma: torch.Tensor,
                 Omega: torch.Tensor | None = None) -> float:
    r""":math:`L^* = \sigma^2 + \mathrm{tr}(\Sigma\Omega) - \mathrm{tr}(\Sigma A^*\Sigma\Omega)`
    [D]; isotropic: :math:`\sigma^2 + d(d+1+\sigma^2)/(n+d+1+\sigma^2)`."""
    Sigma, Omega, _, sigma2 = _moments(n, sigma2, Sigma, Omega)
    A = optimal_preconditioner(n, sigma2, Sigma, Omega)
    return float(sigma2 + torch.trace(Sigma @ Omega) - torch.trace(Sigma @ A @ Sigma @ Omega))


def sine_response_moments(d: int, scale2: float) -> dict[str, float]:
    r"""Closed-form moments of :math:`f(x) = \sin(w^\top x)`, :math:`x \sim N(0, I_d)`,
    :math:`w \sim N(0, \varsigma^2 I_d)` [D].

    With :math:`g = \mathbb E_x[f(x)x] = w e^{-\lVert w\rVert^2/2}` (Stein) and
    :math:`\mathbb E_x[\cos(a^\top x)\lVert x\rVert^2] = (d - \lVert a\rVert^2)
    e^{-\lVert a\rVert^2/2}`, and
    :math:`\mathbb E_w[\lVert w\rVert^{2k}e^{-\alpha\lVert w\rVert^2}]` from
    :math:`\mathbb E e^{-\alpha\lVert w\rVert^2} = (1 + 2\alpha\varsigma^2)^{-d/2}`:

    * ``g2`` :math:`= \mathbb E\lVert g\rVert^2 = d\varsigma^2(1+2\varsigma^2)^{-d/2-1}`;
    * ``f2x2`` :math:`= \mathbb E[f^2\lVert x\rVert^2]
      = \tfrac d2 - \tfrac d2(1+4\varsigma^2)^{-d/2} + 2d\varsigma^2(1+4\varsigma^2)^{-d/2-1}`;
    * ``f2`` :math:`= \mathbb E f^2 = \tfrac12(1 - (1+4\varsigma^2)^{-d/2})`.
    """
    d = _validate.positive_int("d", d)
    s2 = _validate.positive_float("scale2", scale2)
    return {
        "g2": d * s2 * (1 + 2 * s2) ** (-d / 2 - 1),
        "f2x2": (d / 2 - d / 2 * (1 + 4 * s2) ** (-d / 2)
                 + 2 * d * s2 * (1 + 4 * s2) ** (-d / 2 - 1)),
        "f2": 0.5 * (1 - (1 + 4 * s2) ** (-d / 2)),
    }


def nonlinear_optimal_step(n: int, g2: float, f2x2: float) -> float:
    r"""IR.5 [D]: for responses :math:`y = f(x)` with a rotation-invariant law of odd ``f`` and
    :math:`x \sim N(0, I)`, the optimal LSA is one GD step with

    .. math:: \eta^* = \frac{\mathbb E\lVert g\rVert^2}{(1 - \tfrac1n)\mathbb E\lVert g\rVert^2
              + \mathbb E[f(x)^2\lVert x\rVert^2]/n},\qquad g = \mathbb E_x[f(x)x].

    (:math:`\mathbb E[s\mid f] = g`, :math:`\mathbb E\lVert s\rVert^2 = (1-\tfrac1n)\mathbb E\lVert
    g\rVert^2 + \mathbb E[f^2\lVert x\rVert^2]/n`, and the loss is quadratic in :math:`\eta`.)
    """
    n = _validate.positive_int("n", n)
    g2 = _validate.positive_float("g2", g2)
    f2x2 = _validate.positive_float("f2x2", f2x2)
    return g2 / ((1 - 1 / n) * g2 + f2x2 / n)


