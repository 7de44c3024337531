r"""Grokking as lazy to rich (Kumar, Bordelon, Gershman, Pehlevan 2024, arXiv:2310.06110).

The Figure-1 setup of the authors' notebook (``grokking-feature-timescales-anon-final.ipynb``,
read in the copy kept by giovana-morais/amlds_final_project): inputs
:math:`x \sim \mathcal N(0, I_D/D)`, a target :math:`y = (\beta^\top x)^2/2` with
:math:`\beta \sim \mathcal N(0, I_D)`, and a network without trained readouts

.. math:: f(x) = \alpha \cdot \frac1N \sum_{i=1}^N \phi(w_i^\top x), \qquad
          \phi(z) = z + \tfrac{\varepsilon}{2} z^2,

trained on the centred loss :math:`\mathrm{mean}_x (f(x) - f_0(x) - y)^2` (``f_0`` the network
at initialisation) by full-batch gradient descent with rate :math:`\eta = N/\alpha^2`.

Two exact quantities are derived here (catalogue GK.1, ours):

* **the test loss in closed form.** With :math:`m = \mathrm{mean}_i w_i`,
  :math:`C = \mathrm{mean}_i w_i w_i^\top` (:math:`m_0, C_0` at initialisation),
  :math:`g = \alpha(m - m_0)` and :math:`\Delta = \frac{\alpha\varepsilon}{2}(C - C_0) -
  \frac12\beta\beta^\top`, the centred residual is :math:`g^\top x + x^\top \Delta x`, and
  Isserlis' theorem for :math:`x \sim \mathcal N(0, I/D)` gives
  :math:`\mathbb E_x(f - f_0 - y)^2 = \lVert g\rVert^2/D + (\operatorname{tr}\Delta)^2/D^2
  + 2\lVert\Delta\rVert_F^2/D^2` (the cross term is an odd moment and vanishes).
* **the NTK-regression level.** The linearised network changes by
  :math:`h(x) = \langle \nabla_W f_0(x), \delta W\rangle` with
  :math:`\partial f_0/\partial w_i = \frac\alpha N (1 + \varepsilon w_i^{0\top} x) x`; the
  minimum-norm interpolant (what gradient descent on the linearised model from
  :math:`\delta W = 0` converges to, and the notebook's kernel regression
  :math:`K(\cdot, X)K^{-1}y`) is :math:`\delta W = \sum_p a_p \nabla_W f_0(x_p)`,
  :math:`a = K^{-1}y`. Its :math:`h` is again linear plus quadratic in :math:`x`:
  :math:`g = \alpha\,\mathrm{mean}_i\,\delta w_i` and quadratic part
  :math:`S = \frac{\alpha\varepsilon}{N}\sum_i \mathrm{sym}(w^0_i\,\delta w_i^\top)`, so its
  population test loss is the same closed form with :math:`\Delta = S - \frac12\beta\beta^\top`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from constructions._validate import device as check_device
from constructions._validate import float_dtype, positive_float, positive_int, real_tensor
from constructions.layers import HookPoint


def quadratic_test_loss(g: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathbb E_x (g^\top x + x^\top\Delta x)^2` for :math:`x\sim\mathcal N(0, I_D/D)`.

    ``g`` is ``(..., D)`` and ``delta`` ``(..., D, D)`` (symmetrised here, since only its
    symmetric part acts on :math:`x`). Returns
    :math:`\lVert g\rVert^2/D + (\operatorname{tr}\Delta)^2/D^2 + 2\lVert\Delta\rVert_F^2/D^2`.
    """
    g = real_tensor("g", g, ndim=(1, 2, 3))
    delta = real_tensor("delta", delta, ndim=(2, 3, 4))
    if delta.shape[-1] != delta.shape[-2] or delta.shape[:-1] != g.shape:
        raise ValueError(f"delta must have shape g.shape + (D,) = {(*g.shape, g.shape[-1])}, "
                         f"got {tuple(delta.shape)}")
    d = g.shape[-1]
    sym = (delta + delta.transpose(-1, -2)) / 2
    trace = sym.diagonal(dim1=-2, dim2=-1).sum(-1)
    return (g * g).sum(-1) / d + trace ** 2 / d ** 2 + 2 * (sym * sym).sum((-1, -2)) / d ** 2


@dataclass(frozen=True)
class TeacherTask:
    """The Figure-1 data: ``beta`` ``(D,)``, training inputs ``X`` ``(P, D)`` and targets
    ``y = (X beta)^2 / 2``."""

    beta: torch.Tensor
    X: torch.Tensor
    y: torch.Tensor

    @property
    def dim(self) -> int:
        return self.beta.shape[0]


def teacher_task(dim: int = 100, train_size: int = 550, *, seed: int = 0,
                 dtype: torch.dtype = torch.float64,
                 device: torch.device | str = "cpu") -> TeacherTask:
    """Draw :math:`\\beta \\sim \\mathcal N(0, I_D)` and ``train_size`` inputs
    :math:`x\\sim\\mathcal N(0, I_D/D)`, as the notebook does (``D = 100``, ``P = 550``)."""
    dim, train_size = positive_int("dim", dim), positive_int("train_size", train_size)
    dtype = float_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(positive_int("seed", seed, minimum=0))
    beta = torch.randn(dim, generator=generator, dtype=torch.float64)
    X = torch.randn(train_size, dim, generator=generator, dtype=torch.float64) / math.sqrt(dim)
    y = (X @ beta) ** 2 / 2
    device = check_device("device", device)
    return TeacherTask(*(t.to(dtype=dtype, device=device) for t in (beta, X, y)))


class QuadraticNet(torch.nn.Module):
    r""":math:`f(x) = \alpha\,\mathrm{mean}_i\,\phi(w_i^\top x)`, :math:`\phi(z) = z +
    \frac\varepsilon2 z^2`, first-layer weights ``W`` ``(N, D)`` trainable, the initial
    weights ``W0`` kept as a buffer for the centred loss and the statistics.

    Hook points (TransformerLens's MLP names): ``hook_pre`` :math:`w_i^\top x` and
    ``hook_post`` :math:`\phi(w_i^\top x)`, ``(B, N)``, for either weights (``W`` or
    ``W0``) that :meth:`features` is given."""

    def __init__(self, W0: torch.Tensor, alpha: float, eps: float) -> None:
        super().__init__()
        W0 = real_tensor("W0", W0, ndim=2)
        self.alpha = positive_float("alpha", alpha)
        self.eps = positive_float("eps", eps, allow_zero=True)
        self.register_buffer("W0", W0.clone())
        self.W = torch.nn.Parameter(W0.clone())
        self.hook_pre, self.hook_post = HookPoint(), HookPoint()

    def features(self, x: torch.Tensor, W: torch.Tensor | None = None) -> torch.Tensor:
        W = self.W if W is None else W
        z = self.hook_pre(x @ W.T)                            # (B, N)
        return self.hook_post(z + self.eps / 2 * z ** 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = real_tensor("x", x, shape=(None, self.W.shape[1]))
        return self.alpha * self.features(x).mean(-1)         # (B,)

    def centred(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`f(x) - f_0(x)`, the quantity the centred loss compares with ``y``."""
        x = real_tensor("x", x, shape=(None, self.W.shape[1]))
        return self.alpha * (self.features(x) - self.features(x, self.W0)).mean(-1)

    def statistics(self, beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""(:math:`g`, :math:`\Delta`) of the closed form: the test loss depends on the weights
        only through these (catalogue GK.1)."""
        return network_statistics(self.W.detach(), self.W0, self.alpha, self.eps, beta)

    def test_loss(self, beta: torch.Tensor) -> torch.Tensor:
        """The exact population test loss of the centred network (GK.1)."""
        return quadratic_test_loss(*self.statistics(beta))


def quadratic_net(dim: int = 100, width: int = 500, *, alpha: float = 1.0, eps: float = 0.02,
                  seed: int = 0, dtype: torch.dtype = torch.float64,
                  device: torch.device | str = "cpu") -> QuadraticNet:
    """The notebook's network at initialisation: ``W`` with :math:`\\mathcal N(0,1)` entries."""
    dim, width = positive_int("dim", dim), positive_int("width", width)
    dtype = float_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(positive_int("seed", seed, minimum=0))
    W0 = torch.randn(width, dim, generator=generator, dtype=torch.float64)
    return QuadraticNet(W0.to(dtype=dtype, device=check_device("device", device)), alpha, eps)


def network_statistics(W: torch.Tensor, W0: torch.Tensor, alpha: float, eps: float,
                       beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`g = \alpha(m - m_0)` and :math:`\Delta = \frac{\alpha\varepsilon}2(C - C_0) -
    \frac12\beta\beta^\top`; ``W``, ``W0`` are ``(..., N, D)`` (a leading batch is kept)."""
    W = real_tensor("W", W, ndim=(2, 3))
    W0 = real_tensor("W0", W0, ndim=(2, 3))
    beta = real_tensor("beta", beta, ndim=(1, 2))
    if W0.shape[-2:] != W.shape[-2:] or beta.shape[-1] != W.shape[-1]:
        raise ValueError(f"W0 must match W {tuple(W.shape)} and beta must have D = "
                         f"{W.shape[-1]} entries, got {tuple(W0.shape)} and {tuple(beta.shape)}")
    alpha = positive_float("alpha", alpha)
    eps = positive_float("eps", eps, allow_zero=True)
    n = W.shape[-2]
    g = alpha * (W - W0).mean(-2)
    dC = (W.transpose(-1, -2) @ W - W0.transpose(-1, -2) @ W0) / n
    delta = alpha * eps / 2 * dC - beta[..., :, None] * beta[..., None, :] / 2
    return g, delta


def _net(name: str, net: object) -> QuadraticNet:
    if not isinstance(net, QuadraticNet):
        raise TypeError(f"{name} must be a QuadraticNet, got {type(net).__name__}")
    return net


def ntk_gram(net: QuadraticNet, X: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
    r"""The empirical NTK at initialisation,
    :math:`K(x, x') = \frac{\alpha^2}{N^2}\sum_i (1+\varepsilon w_i^{0\top}x)
    (1+\varepsilon w_i^{0\top}x')\,x^\top x'`: ``(P, P2)``."""
    _net("net", net)
    X = real_tensor("X", X, shape=(None, net.W0.shape[1]))
    X2 = X if X2 is None else real_tensor("X2", X2, shape=(None, net.W0.shape[1]))
    n = net.W0.shape[0]
    a, b = 1 + net.eps * X @ net.W0.T, 1 + net.eps * X2 @ net.W0.T  # (P, N), (P2, N)
    return (net.alpha / n) ** 2 * (a @ b.T) * (X @ X2.T)


def ntk_regression(net: QuadraticNet, task: TeacherTask) -> torch.Tensor:
    r"""The minimum-norm weight change :math:`\delta W` ``(N, D)`` of the linearised network
    that interpolates the centred targets: :math:`\delta w_i = \frac\alpha N \sum_p a_p
    (1 + \varepsilon w_i^{0\top}x_p)x_p` with :math:`a = K^{-1}y` (``K`` must be
    invertible: ``P <= N D``, generic inputs)."""
    if not isinstance(net, QuadraticNet):
        raise TypeError(f"net must be a QuadraticNet, got {type(net).__name__}")
    if not isinstance(task, TeacherTask):
        raise TypeError(f"task must be a TeacherTask, got {type(task).__name__}")
    if task.dim != net.W0.shape[1]:
        raise ValueError(f"task has D = {task.dim} but net has D = {net.W0.shape[1]}")
    X, y = task.X.to(net.W0), task.y.to(net.W0)
    a = torch.linalg.solve(ntk_gram(net, X), y)                  # (P,)
    n = net.W0.shape[0]
    grad_scale = 1 + net.eps * X @ net.W0.T                      # (P, N)
    return net.alpha / n * (grad_scale * a[:, None]).T @ X       # (N, D)


def linearised_statistics(net: QuadraticNet, delta_W: torch.Tensor,
                          beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""(:math:`g`, :math:`\Delta`) of the linearised network moved by ``delta_W``:
    :math:`g = \alpha\,\mathrm{mean}_i\delta w_i`, :math:`\Delta = \frac{\alpha\varepsilon}N
    \sum_i\mathrm{sym}(w_i^0\delta w_i^\top) - \frac12\beta\beta^\top`."""
    _net("net", net)
    delta_W = real_tensor("delta_W", delta_W, shape=tuple(net.W0.shape))
    beta = real_tensor("beta", beta, shape=(net.W0.shape[1],))
    n = net.W0.shape[0]
    g = net.alpha * delta_W.mean(0)
    cross = net.W0.T @ delta_W                                   # (D, D) = sum_i w0_i dw_i^T
    quad = net.alpha * net.eps / n * (cross + cross.T) / 2
    return g, quad - beta[:, None] * beta[None, :] / 2


def ntk_level(net: QuadraticNet, task: TeacherTask) -> float:
    """The exact population test loss of NTK regression from ``net``'s initialisation: the
    lazy oracle that a network whose features do not move ends at."""
    g, delta = linearised_statistics(net, ntk_regression(net, task), task.beta.to(net.W0))
    return float(quadratic_test_loss(g, delta))


def rank_one_alignment(net: QuadraticNet, beta: torch.Tensor) -> float:
    r"""Cosine between :math:`C - C_0` and :math:`\beta\beta^\top` (Frobenius inner product):
    1 at the zero-test-loss point :math:`C - C_0 = \beta\beta^\top/(\alpha\varepsilon)`."""
    _net("net", net)
    beta = real_tensor("beta", beta, shape=(net.W0.shape[1],))
    W, W0 = net.W.detach(), net.W0
    dC = (W.T @ W - W0.T @ W0) / W.shape[0]
    bb = beta[:, None] * beta[None, :]
    denominator = torch.linalg.norm(dC) * torch.linalg.norm(bb)
    return float((dC * bb).sum() / denominator) if float(denominator) > 0 else 0.0
