r"""In-context linear regression by one layer of linear self-attention (LSA).

Sources: Mahankali, Hashimoto, Ma (2023, arXiv:2307.03576); Ahn, Cheng, Daneshmand, Sra (2023,
arXiv:2306.00297); Zhang, Frei, Bartlett (2024, arXiv:2306.09927); von Oswald et al. (2023,
arXiv:2212.07677); Huang, Wang, Lee (2025, arXiv:2502.21212). Only the papers' openings were
read; every constant below was derived here (and is checked in ``theorems/areas/icl_regression.py``)
or read from the authors' code, as each docstring says.

The shared parameterisation
---------------------------
Tokens are **columns**, as in the papers (``constructions.layers`` stores tokens as rows; this
area transposes at its boundary). A prompt of ``n`` examples :math:`(x_i, y_i)` and a query
:math:`x_q` is

.. math::

    Z = \begin{pmatrix} x_1 & \cdots & x_n & x_q \\ y_1 & \cdots & y_n & 0 \end{pmatrix}
      \in \mathbb R^{(d+1)\times(n+1)},

and one LSA layer with value-projection :math:`W_{PV}` and key-query product :math:`W_{KQ}`
(both :math:`D\times D`, :math:`D = d+1`) computes

.. math::

    f(Z) = Z + \tfrac1n W_{PV}\, Z M Z^\top\, W_{KQ}\, Z,
    \qquad M = \mathrm{diag}(1, \dots, 1, 0),

where ``M`` masks the query as a key (as in Ahn et al.'s code, ``A[N, N] = 0``, and von Oswald
et al.'s ``include_query=False``). **Sign convention**: the prediction is
:math:`\hat y = -f(Z)_{d+1,\,n+1}`, the negated bottom-right entry, as both codes read it out
(Ahn: ``loss = (output[:, N, d] + y)**2``; von Oswald: ``h[:, -1, -1] * (-1.0)``). Zhang, Frei
and Bartlett read :math:`+f(Z)_{d+1,n+1}`; their model is ours with :math:`W_{KQ}` negated.

Writing :math:`u` for the last row of :math:`W_{PV}`, :math:`V = W_{KQ}`,
:math:`G = \tfrac1n\sum_{i\le n} z_i z_i^\top` (plus :math:`z_q z_q^\top/n` when the query is
not masked) and :math:`\tilde x_q = (x_q, 0)`,

.. math::

    \hat y = -u^\top G\, V \tilde x_q = \sum_{a,b,c} T_{abc}\, G_{ab}\, (x_q)_c,\qquad
    T_{abc} = -\tfrac12(u_a V_{bc} + u_b V_{ac}),

so only ``u`` and ``V`` matter, and only through the *effective predictor* ``T`` (symmetrised in
``a, b`` because ``G`` is symmetric). ``T`` is invariant under the gauge
:math:`(u, V) \to (cu, V/c)`, so trained and constructed models are compared through it,
never through raw weights. Its :math:`(y, x)` slice is the GD preconditioner: with
:math:`s = \tfrac1n\sum_i y_i x_i`,

.. math::

    \hat y = x_q^\top \Gamma\, s + (\text{terms in } G_{xx} \text{ and } G_{yy}),\qquad
    \Gamma_{cb} = 2\,T_{y b c}.

**The symmetric-slice trap.** A least-squares fit over all :math:`(a, b)` pairs of features
:math:`G_{ab}(x_q)_c` is rank-deficient (:math:`G_{ab} = G_{ba}`); its minimum-norm solution
puts half of :math:`\Gamma` on each slice :math:`T_{y,x,:}` and :math:`T_{x,y,:}`. The lifted
coordinates here (:func:`pair_features`, :func:`pair_coefficients`) use each unordered pair
once, so the :math:`(b, y)` coefficient *is* the sum of the two slices, :math:`\Gamma^\top`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from constructions import _validate
from constructions._validate import spd_matrix  # re-exported: empirics use it

# IR.7's autoregressive layer lives in its own module; it is part of this area's API.
from constructions.ar_mesa import ar_mesa_layer as ar_mesa_layer
from constructions.layers import fixed, resolve
from constructions.residual_layout import LINEAR_ATTENTION, LOOPED

ResponseKind = Literal["linear", "sine"]
RESPONSES = ("linear", "sine")
MultiStepMode = Literal["loop", "cot"]
MULTI_STEP_MODES = ("loop", "cot")


# --- the task: prompts, the data distribution, and gradient descent (the oracle) ------------

def prompt(X: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
    r"""The token matrix :math:`Z` of the shared parameterisation.

    ``X`` is ``(..., n, d)`` (rows are examples), ``y`` is ``(..., n)`` and ``x_query`` is
    ``(..., d)``; the result is ``(..., d+1, n+1)`` with the query's label slot set to 0.
    """
    X = _validate.real_tensor("X", X, ndim=(2, 3))
    n, d = X.shape[-2:]
    if n < 1:
        raise ValueError(f"X must hold n >= 1 context examples, got shape {tuple(X.shape)}")
    if d < 1:
        raise ValueError(f"X must have d >= 1 features, got shape {tuple(X.shape)}")
    y = _validate.real_tensor("y", y, shape=(*X.shape[:-1],))
    x_query = _validate.real_tensor("x_query", x_query, shape=(*X.shape[:-2], d))
    dtype = torch.promote_types(torch.promote_types(X.dtype, y.dtype), x_query.dtype)
    return _assemble(X.to(dtype), y.to(dtype), x_query.to(dtype))


def _assemble(X: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
    """:func:`prompt` without argument checks (for prompts this module sampled itself)."""
    top = torch.cat([X, x_query.unsqueeze(-2)], dim=-2).transpose(-1, -2)
    bottom = torch.cat([y, torch.zeros_like(y[..., :1])], dim=-1).unsqueeze(-2)
    return torch.cat([top, bottom], dim=-2)


@dataclass(frozen=True)
class RegressionPrompts:
    """A batch of sampled tasks: ``X`` ``(B, n, d)``, ``y`` ``(B, n)``, ``x_query`` ``(B, d)``,
    the query's true label ``y_query`` ``(B,)`` and the task vector ``w`` ``(B, d)``."""

    X: torch.Tensor
    y: torch.Tensor
    x_query: torch.Tensor
    y_query: torch.Tensor
    w: torch.Tensor

    @property
    def Z(self) -> torch.Tensor:
        """The token matrices, ``(B, d+1, n+1)``."""
        return _assemble(self.X, self.y, self.x_query)


def sample_prompts(batch: int, n: int, d: int, *, sigma2: float = 0.0,
                   Sigma: torch.Tensor | None = None, Omega: torch.Tensor | None = None,
                   response: ResponseKind = "linear", antithetic: bool = False,
                   generator: torch.Generator | None = None,
                   dtype: torch.dtype = torch.float64, device=None) -> RegressionPrompts:
    r"""Sample tasks: :math:`x_i, x_q \sim N(0, \Sigma)`, :math:`w \sim N(0, \Omega)`,
    :math:`y = f_w(x) + \varepsilon`, :math:`\varepsilon \sim N(0, \sigma^2)`.

    ``response="linear"`` is :math:`f_w(x) = w^\top x`; ``"sine"`` is
    :math:`f_w(x) = \sin(w^\top x)`, the nonlinear response of IR.5 (odd in ``w`` and
    rotation-equivariant, so the optimum stays in the GD slice). ``Sigma``/``Omega`` default
    to the identity. ``antithetic=True`` pairs every task with its mirror, the same inputs
    with :math:`(w, \varepsilon) \to (-w, -\varepsilon)` (``batch`` must be even): the parts
    of the loss odd and even in the labels then separate exactly within a batch. Sampling is
    done in float64 on the CPU from ``generator`` and cast afterwards, so the stream is the
    same on every device.
    """
    batch = _validate.positive_int("batch", batch)
    n = _validate.positive_int("n", n)
    d = _validate.positive_int("d", d)
    sigma2 = _validate.positive_float("sigma2", sigma2, allow_zero=True)
    if response not in RESPONSES:
        raise ValueError(f"response must be one of {RESPONSES}, got {response!r}")
    antithetic = _validate.boolean("antithetic", antithetic)
    generator = _validate.generator("generator", generator)
    if antithetic and batch % 2:
        raise ValueError(f"batch must be even when antithetic=True, got {batch}")
    eye = torch.eye(d, dtype=torch.float64)
    L_x = torch.linalg.cholesky(eye if Sigma is None else spd_matrix("Sigma", Sigma, d))
    L_w = torch.linalg.cholesky(eye if Omega is None else spd_matrix("Omega", Omega, d))
    return _draw_prompts(batch, n, L_x, L_w, sigma2, response, antithetic, generator,
                         **resolve(dtype, device))


def _draw_prompts(batch: int, n: int, L_x: torch.Tensor, L_w: torch.Tensor, sigma2: float,
                  response: ResponseKind, antithetic: bool, generator: torch.Generator | None,
                  dtype: torch.dtype = torch.float64, device=None) -> RegressionPrompts:
    """:func:`sample_prompts` without argument checks, from Cholesky factors of Sigma and
    Omega: the inner loop of training and Monte Carlo, which validate once up front."""
    d = L_x.shape[0]
    draws = batch // 2 if antithetic else batch
    X = torch.randn(draws, n + 1, d, generator=generator, dtype=torch.float64) @ L_x.T
    w = torch.randn(draws, d, generator=generator, dtype=torch.float64) @ L_w.T
    noise = math.sqrt(sigma2) * torch.randn(draws, n + 1, generator=generator,
                                            dtype=torch.float64)
    if antithetic:  # the mirror task shares the inputs and flips w and the noise
        X, w, noise = torch.cat([X, X]), torch.cat([w, -w]), torch.cat([noise, -noise])
    signal = (X @ w.unsqueeze(-1)).squeeze(-1)
    labels = (signal if response == "linear" else torch.sin(signal)) + noise
    kw = {"dtype": dtype, "device": device}
    return RegressionPrompts(X=X[:, :n].to(**kw), y=labels[:, :n].to(**kw),
                             x_query=X[:, n].to(**kw), y_query=labels[:, n].to(**kw),
                             w=w.to(**kw))


def _regression_data(X: object, y: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated examples ``X`` ``(..., n, d)`` (``n, d >= 1``) and labels ``y`` ``(..., n)``."""
    X = _validate.real_tensor("X", X)
    if X.ndim < 2 or X.shape[-2] < 1 or X.shape[-1] < 1:
        raise ValueError(f"X must have shape (..., n, d) with n, d >= 1, got {tuple(X.shape)}")
    return X, _validate.real_tensor("y", y, shape=tuple(X.shape[:-1]))


def gd_prediction(X: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, eta: float,
                  preconditioner: torch.Tensor | None = None) -> torch.Tensor:
    r"""One step of preconditioned GD from :math:`w_0 = 0`, evaluated at the query (the oracle).

    On :math:`L(w) = \tfrac1{2n}\sum_i (w^\top x_i - y_i)^2`,
    :math:`w_1 = -\eta P\,\nabla L(0) = \eta P\, s` with :math:`s = \tfrac1n\sum_i y_i x_i`,
    so :math:`\hat y = x_q^\top \eta P\, s`. ``P`` defaults to the identity.
    """
    X, y = _regression_data(X, y)
    x_query = _validate.real_tensor("x_query", x_query, shape=(*X.shape[:-2], X.shape[-1]))
    eta = _validate.real_number("eta", eta)
    if preconditioner is not None:
        preconditioner = _validate.square_matrix("preconditioner", preconditioner,
                                                 size=X.shape[-1])
    s = torch.einsum("...n,...nd->...d", y, X) / X.shape[-2]
    step = s if preconditioner is None else s @ preconditioner.T
    return eta * torch.einsum("...d,...d->...", x_query, step)


def gd_iterates(X: torch.Tensor, y: torch.Tensor, eta: float, steps: int,
                w0: torch.Tensor | None = None) -> torch.Tensor:
    r"""Plain GD on :math:`L(w) = \tfrac1{2n}\lVert Xw - y\rVert^2`:
    :math:`w_{k+1} = w_k + \tfrac\eta n X^\top(y - Xw_k)`. Returns ``(..., steps+1, d)``."""
    X, y = _regression_data(X, y)
    eta = _validate.real_number("eta", eta)
    steps = _validate.positive_int("steps", steps, minimum=0)
    if w0 is not None:
        w0 = _validate.real_tensor("w0", w0, shape=(*X.shape[:-2], X.shape[-1]))
    n = X.shape[-2]
    w = torch.zeros_like(X[..., 0, :]) if w0 is None else w0
    out = [w]
    for _ in range(steps):
        residual = y - torch.einsum("...nd,...d->...n", X, w)
        w = w + (eta / n) * torch.einsum("...nd,...n->...d", X, residual)
        out.append(w)
    return torch.stack(out, dim=-2)


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


# --- the effective predictor in lifted coordinates ---------------------------------------------

def pair_features(G: torch.Tensor) -> torch.Tensor:
    """The upper-triangular entries :math:`G_{ab}`, :math:`a \\le b`, of ``(..., D, D)``, in
    ``torch.triu_indices`` order: each unordered pair once (see the module docstring)."""
    G = _validate.real_tensor("G", G)
    if G.ndim < 2 or G.shape[-1] != G.shape[-2] or G.shape[-1] < 1:
        raise ValueError(f"G must have shape (..., D, D) with D >= 1, got {tuple(G.shape)}")
    return _pair_features(G)


def _pair_features(G: torch.Tensor) -> torch.Tensor:
    D = G.shape[-1]
    rows, cols = torch.triu_indices(D, D, device=G.device)
    return G[..., rows, cols]


def pair_coefficients(T: torch.Tensor) -> torch.Tensor:
    """Coefficients of :func:`pair_features` for a tensor ``(..., D, D, C)`` symmetric in its
    pair axes: :math:`T_{aac}` on the diagonal, :math:`T_{abc} + T_{bac}` off it."""
    T = _validate.real_tensor("T", T, finite=False)
    if T.ndim < 3 or T.shape[-2] != T.shape[-3] or T.numel() == 0:
        raise ValueError(f"T must have shape (..., D, D, C) with D, C >= 1, got {tuple(T.shape)}")
    return _pair_coefficients(T)


def _pair_coefficients(T: torch.Tensor) -> torch.Tensor:
    D = T.shape[-2]
    rows, cols = torch.triu_indices(D, D, device=T.device)
    return T[..., rows, cols, :] + torch.where(rows == cols, 0.0, 1.0).to(T).unsqueeze(-1) * \
        T[..., cols, rows, :]


def key_moment(Z: torch.Tensor, n_context: int | None = None,
               mask_query: bool = True) -> torch.Tensor:
    r""":math:`G = \tfrac1n Z M Z^\top`: the keys' second moment, ``(..., D, D)``. The first
    ``n`` columns are context; later columns are keys only when ``mask_query=False``."""
    Z = _prompt_tokens(Z)
    if n_context is not None:
        n_context = _validate.positive_int("n_context", n_context)
        if n_context > Z.shape[-1]:
            raise ValueError(f"n_context must be <= the {Z.shape[-1]} columns of Z, "
                             f"got {n_context}")
    return _key_moment(Z, n_context, _validate.boolean("mask_query", mask_query))


def _prompt_tokens(Z: object) -> torch.Tensor:
    """Validated prompt tokens ``Z`` ``(..., D, n + 1)`` with ``D >= 2`` and ``n >= 1``."""
    Z = _validate.real_tensor("Z", Z)
    if Z.ndim < 2 or Z.shape[-2] < 2 or Z.shape[-1] < 2:
        raise ValueError(f"Z must have shape (..., D, n + 1) with D, n + 1 >= 2, "
                         f"got {tuple(Z.shape)}")
    return Z


def _key_moment(Z: torch.Tensor, n_context: int | None, mask_query: bool) -> torch.Tensor:
    n = Z.shape[-1] - 1 if n_context is None else n_context
    keys = Z if not mask_query else Z[..., :n]
    return keys @ keys.transpose(-1, -2) / n


def lifted_features(Z: torch.Tensor, *, mask_query: bool = True) -> torch.Tensor:
    r"""Features :math:`G_{ab}(x_q)_c` (:math:`a \le b`) of regression prompts, ``(..., P)``
    with :math:`P = \tfrac{D(D+1)}2 d`: every one-layer LSA predicts
    :math:`\hat y = \phi(Z)^\top\theta` with ``θ`` its
    :meth:`LinearSelfAttention.lifted_coefficients`. Least squares in these features is the
    convex relaxation of training an LSA (IR.1/IR.2's "lifted least squares")."""
    Z = _prompt_tokens(Z)
    G = _key_moment(Z, None, _validate.boolean("mask_query", mask_query))
    x_query = Z[..., :-1, -1]
    return (_pair_features(G).unsqueeze(-1) * x_query.unsqueeze(-2)).flatten(-2)


def effective_tensor(W_PV: torch.Tensor, W_KQ: torch.Tensor) -> torch.Tensor:
    """:meth:`LinearSelfAttention.effective_tensor` of raw weights (differentiable; like a
    layer it lets non-finite weights through, so that a diverging run reports its loss)."""
    W_PV, W_KQ = _raw_weights(W_PV, W_KQ)
    return _effective_tensor(W_PV, W_KQ)


def _raw_weights(W_PV: object, W_KQ: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Square ``(D, D)`` weights of one size, ``D >= 2`` (non-finite entries allowed)."""
    W_PV = _validate.square_matrix("W_PV", W_PV, finite=False)
    W_KQ = _validate.square_matrix("W_KQ", W_KQ, size=W_PV.shape[0], finite=False)
    if W_PV.shape[0] < 2:
        raise ValueError(f"W_PV must be D x D with D >= 2, got {tuple(W_PV.shape)}")
    return W_PV, W_KQ


def _effective_tensor(W_PV: torch.Tensor, W_KQ: torch.Tensor) -> torch.Tensor:
    E = torch.einsum("oa,bc->oabc", W_PV, W_KQ)
    return (E + E.transpose(1, 2)) / 2


def lifted_coefficients(W_PV: torch.Tensor, W_KQ: torch.Tensor) -> torch.Tensor:
    """:meth:`LinearSelfAttention.lifted_coefficients` of raw weights (differentiable): only
    the last row of ``W_PV`` enters, so this costs :math:`O(D^3)`."""
    W_PV, W_KQ = _raw_weights(W_PV, W_KQ)
    return _lifted_coefficients(W_PV, W_KQ)


def _lifted_coefficients(W_PV: torch.Tensor, W_KQ: torch.Tensor) -> torch.Tensor:
    T = -torch.einsum("a,bc->abc", W_PV[-1], W_KQ[:, :-1])
    return _pair_coefficients((T + T.transpose(0, 1)) / 2).flatten()


# --- the model -------------------------------------------------------------------------------

class LinearSelfAttention(nn.Module):
    r"""One residual linear self-attention layer on column tokens:
    :math:`f(Z) = Z + \tfrac1n W_{PV} Z M Z^\top W_{KQ} Z` (module docstring).

    The first ``n`` columns of ``Z`` are context (keys and values); the others are queries (a
    regression query, chain-of-thought tokens). ``mask_query=False`` lets them be keys too;
    the normaliser stays ``n``. Weights are fixed parameters; ``.requires_grad_()`` trains.

    What checks inspect: :meth:`predict` (the read-out), :meth:`effective_tensor`,
    :meth:`preconditioner` and :meth:`lifted_coefficients` (the gauge-invariant map).
    """

    def __init__(self, W_PV: torch.Tensor, W_KQ: torch.Tensor, *, mask_query: bool = True):
        super().__init__()
        if not isinstance(mask_query, bool):
            raise TypeError(f"mask_query must be a bool, got {type(mask_query).__name__}")
        W_PV = _validate.real_tensor("W_PV", W_PV, ndim=2)
        D = W_PV.shape[0]
        if W_PV.shape != (D, D) or D < 2:
            raise ValueError(f"W_PV must be a square D x D matrix with D >= 2, "
                             f"got shape {tuple(W_PV.shape)}")
        W_KQ = _validate.real_tensor("W_KQ", W_KQ, shape=(D, D))
        self.mask_query = mask_query
        self.W_PV, self.W_KQ = fixed(W_PV), fixed(W_KQ.to(W_PV))

    @property
    def width(self) -> int:
        """Token width ``D`` (``d + 1`` for regression prompts)."""
        return self.W_PV.shape[0]

    def _check(self, Z: torch.Tensor, n_context: int | None) -> tuple[torch.Tensor, int]:
        Z = _validate.real_tensor("Z", Z, ndim=(2, 3))
        if Z.shape[-2] != self.width:
            raise ValueError(f"Z must have {self.width} rows (the token width), "
                             f"got shape {tuple(Z.shape)}")
        n = Z.shape[-1] - 1 if n_context is None else n_context
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n < Z.shape[-1]:
            raise ValueError(f"n_context must be an int in [1, {Z.shape[-1] - 1}] (at least one "
                             f"context column and one query column), got {n!r}")
        return Z.to(self.W_PV.dtype), n

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return [LINEAR_ATTENTION]

    def forward(self, Z: torch.Tensor, n_context: int | None = None) -> torch.Tensor:
        """:math:`f(Z)`, same shape as ``Z``; ``n_context`` defaults to all columns but the last."""
        Z, n = self._check(Z, n_context)
        G = _key_moment(Z, n, self.mask_query)
        return Z + self.W_PV @ G @ self.W_KQ @ Z

    def predict(self, Z: torch.Tensor) -> torch.Tensor:
        r""":math:`\hat y = -f(Z)_{D, n+1}` for regression prompts ``(..., d+1, n+1)``: the
        negated label slot of the query column (sign convention of Ahn's and von Oswald's
        code). Only that column is computed."""
        Z, n = self._check(Z, None)
        G = _key_moment(Z, n, self.mask_query)
        query = Z[..., -1:]
        return -(query[..., -1:, :] + self.W_PV[-1:] @ G @ self.W_KQ @ query)[..., 0, 0]

    def effective_tensor(self) -> torch.Tensor:
        r"""``E[o, a, b, c]`` :math:`= \tfrac12(W_{PV,oa}W_{KQ,bc} + W_{PV,ob}W_{KQ,ac})`: the
        update of row ``o`` at column ``j`` is :math:`\sum_{abc} E_{oabc}G_{ab}Z_{cj}`.
        Gauge-invariant; ``(D, D, D, D)``."""
        return _effective_tensor(self.W_PV, self.W_KQ)

    def lifted_coefficients(self) -> torch.Tensor:
        r"""``θ`` with :math:`\hat y = \phi(Z)^\top\theta` for :func:`lifted_features` ``φ``:
        the pair coefficients of :math:`T = -E_{y,:,:,x}`, flattened to ``(P,)``."""
        return _lifted_coefficients(self.W_PV, self.W_KQ)

    def preconditioner(self) -> torch.Tensor:
        r""":math:`\Gamma` with :math:`\hat y = x_q^\top\Gamma s + \dots` (module docstring):
        :math:`\Gamma_{cb} = 2T_{ybc}`, ``(d, d)``, in the orientation of
        :func:`optimal_preconditioner`."""
        T = -self.effective_tensor()[-1, :, :, :-1]
        return 2 * T[-1, :-1, :].T


def lsa(W_PV: torch.Tensor, W_KQ: torch.Tensor, *, mask_query: bool = True,
        dtype: torch.dtype = torch.float64, device=None) -> LinearSelfAttention:
    """A one-layer LSA with the given ``D x D`` weights (see :class:`LinearSelfAttention`)."""
    kw = resolve(dtype, device)
    W_PV = _validate.real_tensor("W_PV", W_PV, ndim=2)
    W_KQ = _validate.real_tensor("W_KQ", W_KQ, ndim=2)
    return LinearSelfAttention(W_PV.to(**kw), W_KQ.to(**kw), mask_query=mask_query)


def one_step_gd(d: int, eta: float, *, preconditioner: torch.Tensor | None = None,
                mask_query: bool = True, dtype: torch.dtype = torch.float64,
                device=None) -> LinearSelfAttention:
    r"""The LSA whose prediction is one step of preconditioned GD from :math:`w = 0`.

    With :math:`\Gamma = \eta P` (``P`` = ``preconditioner``, default ``I``):
    :math:`W_{PV} = e_{d+1}e_{d+1}^\top` and :math:`W_{KQ} = \begin{pmatrix} -\Gamma^\top & 0
    \\ 0 & 0\end{pmatrix}`. Then :math:`u = e_{d+1}` and
    :math:`\hat y = -s^\top(-\Gamma^\top)x_q = x_q^\top\Gamma s`, exactly
    :func:`gd_prediction` (the :math:`G_{yy}` term vanishes because :math:`W_{KQ}` has no
    ``y`` row, and masking is irrelevant because ``u`` has no ``x`` part). This is Ahn et
    al.'s code layout (``P_full[d, d] = 1``, ``Q = -Γ``) with :math:`W_{KQ} = Q^\top`.
    """
    d = _validate.positive_int("d", d)
    eta = _validate.finite_float("eta", eta)
    P = torch.eye(d, dtype=torch.float64) if preconditioner is None else \
        _validate.real_tensor("preconditioner", preconditioner, shape=(d, d)).to(torch.float64)
    W_PV = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_PV[d, d] = 1.0
    W_KQ = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_KQ[:d, :d] = -(eta * P).T
    return lsa(W_PV, W_KQ, mask_query=mask_query, dtype=dtype, device=device)


def zfb_init(d: int, scale: float = 0.1, *, Theta: torch.Tensor | None = None,
             dtype: torch.dtype = torch.float64, device=None) -> LinearSelfAttention:
    r"""Zhang–Frei–Bartlett's initialisation in this module's sign convention [R]:
    :math:`W_{PV}(0) = \sigma\begin{pmatrix}0&0\\0&1\end{pmatrix}`,
    :math:`W_{KQ}(0) = -\sigma\begin{pmatrix}\Theta\Theta^\top&0\\0&0\end{pmatrix}` with
    :math:`\lVert\Theta\Theta^\top\rVert_F = 1` (default :math:`\Theta = d^{-1/4}I`).

    The minus sign converts their read-out :math:`+f(Z)_{d+1,n+1}` to ours. The start is
    *balanced*: :math:`\lVert W_{PV}\rVert_F^2 - \lVert W_{KQ}\rVert_F^2 = 0`.
    """
    d = _validate.positive_int("d", d)
    scale = _validate.positive_float("scale", scale)
    if Theta is None:
        Theta = torch.eye(d, dtype=torch.float64) * d ** -0.25
    Theta = _validate.real_tensor("Theta", Theta, shape=(d, None)).to(torch.float64)
    block = Theta @ Theta.T
    if block.norm() == 0:
        raise ValueError("Theta must be nonzero")
    W_PV = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_PV[d, d] = scale
    W_KQ = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_KQ[:d, :d] = -scale * block / block.norm()
    return lsa(W_PV, W_KQ, dtype=dtype, device=device)


# --- von Oswald et al. (IR.4) -----------------------------------------------------------------

def von_oswald(d: int, eta: float, W0: torch.Tensor | None = None, *, mask_query: bool = True,
               dtype: torch.dtype = torch.float64, device=None) -> LinearSelfAttention:
    r"""von Oswald et al.'s one-step-GD layer [C], scalar outputs (:math:`o = 1`).

    Their weights :math:`W_K = W_Q = \begin{pmatrix}I_d&0\\0&0\end{pmatrix}`,
    :math:`W_V = \begin{pmatrix}0&0\\W_0&-1\end{pmatrix}`, :math:`P = \mathrm{diag}(0, \eta/n)`
    act as :math:`e_j \leftarrow e_j + PW_V\sum_i e_i e_i^\top W_K^\top W_Q e_j`; in the shared
    form that is :math:`W_{PV} = nPW_V = \begin{pmatrix}0&0\\\eta W_0&-\eta\end{pmatrix}` and
    :math:`W_{KQ} = W_K^\top W_Q`. Every token's label moves to :math:`y_j - \Delta W x_j`
    with :math:`\Delta W = -\tfrac\eta n\sum_{i\le n}(W_0x_i - y_i)x_i^\top`, one GD step on
    :math:`\tfrac1{2n}\sum_i(Wx_i - y_i)^2` from :math:`W_0` (:func:`gd_transformed_labels`).
    That holds when the query is masked, or when :math:`W_0 = 0`: otherwise the query's own
    value :math:`\eta(W_0x_q - 0)` leaks into the sum [D].
    """
    d = _validate.positive_int("d", d)
    eta = _validate.finite_float("eta", eta)
    W0 = torch.zeros(1, d, dtype=torch.float64) if W0 is None else \
        _validate.real_tensor("W0", W0, shape=(1, d)).to(torch.float64)
    W_PV = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_PV[d, :d] = eta * W0[0]
    W_PV[d, d] = -eta
    W_KQ = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_KQ[:d, :d] = torch.eye(d, dtype=torch.float64)
    return lsa(W_PV, W_KQ, mask_query=mask_query, dtype=dtype, device=device)


def gd_transformed_labels(Z: torch.Tensor, eta: float, W0: torch.Tensor) -> torch.Tensor:
    r"""The oracle of IR.4: ``Z`` with every label replaced by :math:`y_j - \Delta W x_j`,
    :math:`\Delta W = -\tfrac\eta n\sum_{i\le n}(W_0 x_i - y_i)x_i^\top` (context ``i <= n``)."""
    Z = _prompt_tokens(Z)
    eta = _validate.real_number("eta", eta)
    W0 = _validate.real_tensor("W0", W0, shape=(1, Z.shape[-2] - 1))
    n = Z.shape[-1] - 1
    X, y = Z[..., :-1, :], Z[..., -1, :]
    residual = W0[0] @ X[..., :n] - y[..., :n]                    # (..., n)
    delta_W = -(eta / n) * torch.einsum("...n,...dn->...d", residual, X[..., :n])
    out = Z.clone()
    out[..., -1, :] = y - torch.einsum("...d,...dj->...j", delta_W, X)
    return out


# --- multi-step GD by looping or chain of thought (IR.6) ---------------------------------------

def cot_prompt(X: torch.Tensor, y: torch.Tensor,
               iterates: torch.Tensor | None = None) -> torch.Tensor:
    r"""Tokens in the :math:`(x, y, w, 1)` layout, :math:`D = 2d + 2`: context columns
    :math:`(x_j, y_j, 0, 0)`, then one CoT column :math:`(0, 0, w_k, 1)` per row of
    ``iterates`` ``(..., k, d)`` (default: the single start :math:`w_0 = 0`)."""
    X = _validate.real_tensor("X", X, ndim=(2, 3))
    n, d = X.shape[-2:]
    if n < 1 or d < 1:
        raise ValueError(f"X must be (..., n, d) with n, d >= 1, got shape {tuple(X.shape)}")
    y = _validate.real_tensor("y", y, shape=(*X.shape[:-1],)).to(X.dtype)
    if iterates is None:
        iterates = torch.zeros(*X.shape[:-2], 1, d, dtype=X.dtype, device=X.device)
    iterates = _validate.real_tensor("iterates", iterates, ndim=X.ndim).to(X.dtype)
    if iterates.shape[:-2] != X.shape[:-2] or iterates.shape[-1] != d or iterates.shape[-2] < 1:
        raise ValueError(f"iterates must have shape (..., k, {d}) with k >= 1 and X's batch "
                         f"shape, got {tuple(iterates.shape)}")
    zeros = X.new_zeros
    data = torch.cat([X, y.unsqueeze(-1), zeros(*X.shape[:-1], d + 1)], dim=-1)
    thoughts = torch.cat([zeros(*iterates.shape[:-1], d + 1), iterates,
                          X.new_ones(*iterates.shape[:-1], 1)], dim=-1)
    return torch.cat([data, thoughts], dim=-2).transpose(-1, -2)


def multi_step_layer(d: int, eta: float, *, dtype: torch.dtype = torch.float64,
                     device=None) -> LinearSelfAttention:
    r"""The layer that maps a CoT column :math:`(0, 0, w, 1)` to :math:`(0, 0, w', 1)`,
    :math:`w' = w + \tfrac\eta n X^\top(y - Xw)` [D]: :math:`W_{PV}[w, x] = \eta I`,
    :math:`W_{KQ}[x, w] = -I`, :math:`W_{KQ}[y, 1] = 1`, zero elsewhere.

    For a CoT column, :math:`W_{KQ}z = (-w, 1, 0, 0)`, so the scores with context column ``i``
    are :math:`y_i - x_i^\top w`, and :math:`W_{PV}` writes :math:`\eta x_i` into the ``w``
    block. Context columns have :math:`W_{KQ}z_j = 0` and stay unchanged; earlier CoT
    columns as keys would add nothing (their ``x`` block, all :math:`W_{PV}` reads, is 0).
    """
    d = _validate.positive_int("d", d)
    eta = _validate.finite_float("eta", eta)
    D = 2 * d + 2
    x, w = slice(0, d), slice(d + 1, 2 * d + 1)
    W_PV = torch.zeros(D, D, dtype=torch.float64)
    W_KQ = torch.zeros(D, D, dtype=torch.float64)
    W_PV[w, x] = eta * torch.eye(d, dtype=torch.float64)
    W_KQ[x, w] = -torch.eye(d, dtype=torch.float64)
    W_KQ[d, D - 1] = 1.0
    return lsa(W_PV, W_KQ, dtype=dtype, device=device)


class MultiStepGD(nn.Module):
    r"""``steps`` GD steps by one weight-shared layer (:func:`multi_step_layer`).

    ``mode="loop"`` applies the layer ``steps`` times to :func:`cot_prompt` ``(X, y)`` and
    reads :math:`w_k` from its last column. ``mode="cot"`` is chain of thought: each
    application appends the last output column as a new token, so the sequence grows to
    ``n + 1 + steps`` columns and its CoT columns are :math:`w_0, \dots, w_k`.
    """

    def __init__(self, layer: LinearSelfAttention, d: int, steps: int, mode: MultiStepMode):
        super().__init__()
        if mode not in MULTI_STEP_MODES:
            raise ValueError(f"mode must be one of {MULTI_STEP_MODES}, got {mode!r}")
        self.layer, self.d, self.mode = layer, d, mode
        self.steps = _validate.positive_int("steps", steps)

    def _n(self, Z: torch.Tensor) -> int:
        if Z.shape[-2] != 2 * self.d + 2:
            raise ValueError(f"Z must have {2 * self.d + 2} rows (the (x, y, w, 1) layout), "
                             f"got shape {tuple(Z.shape)}")
        return Z.shape[-1] - 1

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return [LINEAR_ATTENTION] + ([LOOPED] if self.mode == "loop" else []) + (
            ["chain-of-thought steps that append output tokens"] if self.mode == "cot" else [])

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        """The final token matrix (``loop``: same shape; ``cot``: ``steps`` columns longer)."""
        n = self._n(Z)
        for _ in range(self.steps):
            out = self.layer(Z, n_context=n)
            Z = out if self.mode == "loop" else torch.cat([Z, out[..., -1:]], dim=-1)
        return Z

    def iterates(self, Z: torch.Tensor) -> torch.Tensor:
        r""":math:`w_0, \dots, w_k` as ``(..., steps + 1, d)``."""
        n = self._n(Z)
        w = slice(self.d + 1, 2 * self.d + 1)
        states = [Z[..., w, -1]]
        for _ in range(self.steps):
            out = self.layer(Z, n_context=n)
            Z = out if self.mode == "loop" else torch.cat([Z, out[..., -1:]], dim=-1)
            states.append(Z[..., w, -1])
        return torch.stack(states, dim=-2)

    def estimate(self, Z: torch.Tensor) -> torch.Tensor:
        """:math:`w_k`, ``(..., d)``."""
        return self.forward(Z)[..., self.d + 1:2 * self.d + 1, -1]


def multi_step_gd(d: int, eta: float, steps: int, *, mode: MultiStepMode = "loop",
                  dtype: torch.dtype = torch.float64, device=None) -> MultiStepGD:
    r"""IR.6: ``steps`` exact GD steps :math:`w_{k+1} = w_k + \tfrac\eta n X^\top(y - Xw_k)`
    from :math:`w_0 = 0`, by looping one layer or by chain of thought (:class:`MultiStepGD`).

    In noiseless tasks :math:`y = Xw^*`, :math:`w_k - w^* = -(I - \eta S)^k w^*` with
    :math:`S = X^\top X/n`, so the error is :math:`\lVert(I - \eta S)^k w^*\rVert^2`: it
    decreases in ``k`` on every prompt iff :math:`\eta \le 2/\lambda_{\max}(S)`.
    """
    d = _validate.positive_int("d", d)
    steps = _validate.positive_int("steps", steps)
    if mode not in MULTI_STEP_MODES:
        raise ValueError(f"mode must be one of {MULTI_STEP_MODES}, got {mode!r}")
    return MultiStepGD(multi_step_layer(d, eta, dtype=dtype, device=device), d, steps, mode)
