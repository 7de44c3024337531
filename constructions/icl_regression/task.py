r"""The in-context regression task: prompts, the data distribution, and gradient descent on the
prompt (the oracle).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from constructions import _validate
from constructions._validate import spd_matrix

# IR.7's autoregressive layer lives in its own module; it is part of this area's API.
from constructions.ar_mesa import ar_mesa_layer as ar_mesa_layer
from constructions.icl_regression._shared import RESPONSES, ResponseKind
from constructions.layers import resolve

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
    return draw_prompts_unchecked(batch, n, L_x, L_w, sigma2, response, antithetic, generator,
                         **resolve(dtype, device))


def draw_prompts_unchecked(batch: int, n: int, L_x: torch.Tensor, L_w: torch.Tensor, sigma2: float,
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


