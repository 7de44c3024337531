r"""Mesa-optimization in an autoregressively trained linear attention layer.

Source: Zheng, Huang, Wang, Wu, Zhu, Li (2024), "On Mesa-Optimization in Autoregressively
Trained Transformers: Emergence and Capability", NeurIPS 2024, arXiv:2405.16845. Only the
abstract could be read; the model, the data and the initialisation below follow the authors'
code (ML-GSAI/MesaOpt-AR-Transformer: ``models/lsa.py``, ``data/generate_data.py``,
``main_train_ar.py``), and every closed form was derived here and is checked in
``theorems/areas/ar_mesa/``.

The task (:func:`ar_sequences`)
-------------------------------
A complex AR(1) process :math:`x_{t+1} = W x_t` with :math:`W = \mathrm{diag}(e^{i\theta_1},
\dots, e^{i\theta_d})`, :math:`\theta_j \sim U[0, 2\pi)` i.i.d., and a start :math:`x_1` drawn
from one of the code's distributions (:data:`X1_KINDS`): ``gaussian``
(:math:`x_1 \sim N(0, s^2 I_d)`, real), ``one-hot`` (:math:`\pm s\,e_j`, uniform sign and
index) or ``ones`` (:math:`s\mathbf 1`). Sequences are stored as rows, ``x`` of shape
``(T, d)`` or ``(B, T, d)``; the papers' tokens are columns, transposed at this boundary.

The model (:class:`ARLinearAttention`)
--------------------------------------
The token is :math:`e_t = (x_t; x_{t-1}) \in \mathbb C^{2d}` with :math:`x_0 = 0`, and one
causal linear-attention layer predicts :math:`x_{t+1}` from :math:`e_1, \dots, e_t` by

.. math::

    \hat y_t = \frac1{\rho_t} \sum_{i=1}^t W_{PV}\, e_i\, (e_i^{\mathsf H} W_{KQ}\, e_t)
             = W_{PV}\, G_t\, W_{KQ}\, e_t,\qquad
    G_t = \frac1{\rho_t}\sum_{i\le t} e_i e_i^{\mathsf H},\quad \rho_t = t - 1,

with :math:`W_{KQ} \in \mathbb C^{2d\times 2d}` and :math:`W_{PV} \in \mathbb C^{d\times 2d}`
(the code's ``rho_t = t - 1``; :math:`\hat y_1 = 0` since :math:`x_0 = 0`, and we set
:math:`\rho_1 = 1`). Training uses :math:`t = 2, \dots, T-1`, the loss
:math:`\tfrac12\sum_t \lVert \hat y_t - x_{t+1}\rVert^2` averaged over sequences.

The construction (:func:`ar_mesa_layer`)
----------------------------------------
The code's initialisation :math:`W_{KQ}[d{:}, {:}d] = aI`, :math:`W_{PV}[:, {:}d] = bI`, zero
elsewhere, gives :math:`e_i^{\mathsf H} W_{KQ} e_t = a\,x_{i-1}^{\mathsf H} x_t` and
:math:`W_{PV} e_i = b\,x_i`, so

.. math::

    \hat y_t = \widehat W_t\, x_t,\qquad
    \widehat W_t = \frac{ab}{t-1}\sum_{i=2}^t x_i x_{i-1}^{\mathsf H}
    = -ab\,\nabla_W L_t(0),\quad
    L_t(W) = \frac1{2(t-1)}\sum_{i=2}^t \lVert x_i - W x_{i-1}\rVert^2 :

one gradient step with learning rate :math:`ab` from :math:`W = 0` on the in-context OLS
problem, then a prediction with the learned :math:`\widehat W_t` (the oracle is
:func:`one_step_gd_predictions`, computed by autograd).

The optimal step (derived here)
-------------------------------
With :math:`c = ab` and the phases independent and uniform, the powers
:math:`(\lambda_k/\lambda_j)^m`, :math:`k \ne j`, :math:`1 \le m < t`, are orthonormal, and
the prediction error at step :math:`t` is (:func:`population_error`)

.. math::

    \varepsilon_t(c) = \mathbb E\lVert \hat y_t - x_{t+1}\rVert^2
      = \mu_2 - 2c\,\mu_4 + c^2\Big(\mu_6 + \frac{\kappa}{t-1}\Big),\qquad
    \mu_p = \mathbb E\sum_j |x_{1j}|^p,\quad
    \kappa = \mathbb E\sum_{j\ne k} |x_{1j}|^2 |x_{1k}|^4 .

Summed over :math:`t = 2, \dots, T-1` it is minimal at (:func:`optimal_ab`)

.. math::

    ab^*_T = \frac{\mu_4}{\mu_6 + h_T\,\kappa},\qquad h_T = \frac{H_{T-2}}{T-2}
    \;\xrightarrow{T\to\infty}\; \frac{\mu_4}{\mu_6}\quad(H_n = \textstyle\sum_{k\le n} 1/k).

One-hot :math:`x_1` has :math:`\kappa = 0`, so :math:`ab^* = 1/s^2` for every :math:`T`, with
zero error. Gaussian :math:`x_1` has :math:`\mu_4 = 3ds^4`, :math:`\mu_6 = 15ds^6`,
:math:`\kappa = 3d(d-1)s^6`, so :math:`ab^*_T = 1/(s^2(5 + (d-1)h_T)) \to 1/(5s^2)`. At the
limit :math:`\varepsilon_\infty = \mu_2 - \mu_4^2/\mu_6 \ge 0` (Cauchy–Schwarz), with equality
iff :math:`|x_{1j}|^2 \in \{0, c\}` almost surely for one constant :math:`c` (then
:math:`ab^* = 1/c`): the recovery criterion (:func:`limiting_error`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_with_axes
from constructions.layers import HookPoint, resolve
from constructions.residual_layout import LINEAR_ATTENTION

X1_KINDS = ("gaussian", "one-hot", "ones")
COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}


# --- the task ------------------------------------------------------------------------------

def sample_x1(kind: str, batch: int, d: int, *, scale: float = 1.0,
              generator: torch.Generator | None = None,
              dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``batch`` starting points :math:`x_1 \\in \\mathbb C^d` of the given kind (real-valued)."""
    if kind not in X1_KINDS:
        raise ValueError(f"kind must be one of {X1_KINDS}, got {kind!r}")
    batch = _validate.positive_int("batch", batch)
    d = _validate.positive_int("d", d)
    scale = _validate.positive_float("scale", scale)
    dtype = _validate.float_dtype("dtype", dtype)
    if kind == "gaussian":
        x1 = scale * torch.randn(batch, d, generator=generator, dtype=dtype)
    elif kind == "one-hot":
        index = torch.randint(d, (batch,), generator=generator)
        sign = 2.0 * torch.randint(2, (batch,), generator=generator).to(dtype) - 1.0
        x1 = torch.zeros(batch, d, dtype=dtype)
        x1[torch.arange(batch), index] = scale * sign
    else:
        x1 = torch.full((batch, d), scale, dtype=dtype)
    return x1.to(COMPLEX[dtype] if dtype in COMPLEX else torch.complex128)


def ar_sequences(x1: torch.Tensor, T: int, *, theta: torch.Tensor | None = None,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    r"""The sequences :math:`x_t = W^{t-1}x_1`, :math:`t = 1..T`, shape ``(B, T, d)``.

    ``x1`` is ``(B, d)`` (complex or real); ``theta`` ``(B, d)`` are the phases of
    :math:`W = \mathrm{diag}(e^{i\theta})`, drawn uniform on :math:`[0, 2\pi)` when omitted.
    """
    x1 = _validate.nonempty("x1", _validate.complex_tensor("x1", x1, ndim=2))
    T = _validate.positive_int("T", T)
    generator = _validate.generator("generator", generator)
    real = x1.real.dtype
    if theta is None:
        theta = 2 * math.pi * torch.rand(x1.shape, generator=generator, dtype=real)
    theta = _validate.real_tensor("theta", theta, shape=tuple(x1.shape)).to(real)
    steps = torch.arange(T, dtype=real)
    # exponentiate the phase, not the complex number, so long sequences stay on the circle
    angles = theta[:, None, :] * steps[None, :, None]
    powers = torch.polar(torch.ones_like(angles), angles)
    return powers * x1[:, None, :]


def tokens(x: torch.Tensor) -> torch.Tensor:
    r"""The tokens :math:`e_t = (x_t; x_{t-1})` with :math:`x_0 = 0`: ``(..., T, 2d)``."""
    x = _validate.numeric_tensor("x", x, min_ndim=2)
    previous = torch.cat([torch.zeros_like(x[..., :1, :]), x[..., :-1, :]], dim=-2)
    return torch.cat([x, previous], dim=-1)


def context_gram(x: torch.Tensor) -> torch.Tensor:
    r""":math:`G_t = \rho_t^{-1}\sum_{i\le t} e_i e_i^{\mathsf H}` for ``x`` of shape
    ``(..., T, d)``: ``(..., T, 2d, 2d)``. It depends on the data only."""
    e = tokens(x)
    return _gram(e, e)


def _gram(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    r""":math:`\rho_t^{-1}\sum_{i\le t} v_i k_i^{\mathsf H}` for keys and values
    ``(..., T, 2d)``."""
    rho = _step_normalizers(keys.shape[-2], keys.real.dtype, keys.device)
    outer = values.unsqueeze(-1) * keys.conj().unsqueeze(-2)
    return outer.cumsum(dim=-3) / rho[:, None, None]


def _step_normalizers(T: int, dtype: torch.dtype = torch.float64,
                     device: torch.device | None = None) -> torch.Tensor:
    r""":math:`\rho_t = \max(t - 1, 1)` for :math:`t = 1..T`."""
    return torch.arange(T, dtype=dtype, device=device).clamp_min(1)


def one_step_gd_predictions(x: torch.Tensor, lr: float) -> torch.Tensor:
    r"""The oracle: :math:`\widehat W_t x_t` with :math:`\widehat W_t = -\mathrm{lr}\,
    \nabla_W L_t(0)`, for every :math:`t` (``(..., T, d)``; zero at :math:`t = 1`).

    :math:`L_t(W) = \frac1{2\rho_t}\sum_{2\le i\le t}\lVert x_i - W x_{i-1}\rVert^2` is the
    in-context OLS loss. The gradient is taken by autograd (PyTorch's complex gradient is
    :math:`\partial_{\mathrm{Re}\,W} + i\,\partial_{\mathrm{Im}\,W}`, the steepest-descent
    direction), one independent :math:`W_t` per step, so this shares no code with the layer.
    """
    x = _validate.nonempty("x", _validate.complex_tensor("x", x, ndim=(2, 3)))
    lr = _validate.finite_float("lr", lr)
    batched = x.ndim == 3
    x = x if batched else x.unsqueeze(0)
    B, T, d = x.shape
    with torch.enable_grad():
        W = torch.zeros(B, T, d, d, dtype=x.dtype, requires_grad=True)
        # residual of pair (i, i-1) under W_t: r[b, t, i] = x_i - W_t x_{i-1}, for 2 <= i <= t
        previous = x[:, :-1]                                     # x_{i-1}, i = 2..T
        fitted = torch.einsum("btde,bie->btid", W, previous)
        residual = x[:, None, 1:] - fitted                      # (B, T, T-1, d)
        i = torch.arange(2, T + 1)
        t = torch.arange(1, T + 1)
        keep = (i[None, :] <= t[:, None]).to(x.real.dtype)      # pairs with i <= t
        rho = _step_normalizers(T, x.real.dtype)
        squared = (residual.real**2 + residual.imag**2).sum(-1)  # smooth at 0, unlike abs
        loss = (squared * keep).sum(-1) / (2 * rho)
        (gradient,) = torch.autograd.grad(loss.sum(), W)
    W_hat = -lr * gradient
    out = torch.einsum("btde,bte->btd", W_hat, x)
    return out if batched else out[0]


# --- moments and the optimal step ----------------------------------------------------------

@dataclass(frozen=True)
class Moments:
    r"""The moments of :math:`x_1` that decide the population loss (see the module docstring).

    ``m2``, ``m4``, ``m6`` are :math:`\mu_p = \mathbb E\sum_j |x_{1j}|^p`, and ``cross`` is
    :math:`\kappa = \mathbb E\sum_{j\ne k}|x_{1j}|^2|x_{1k}|^4`. The fields may be floats,
    ``fractions.Fraction`` or SymPy expressions: the formulas below only add and divide.
    """

    m2: object
    m4: object
    m6: object
    cross: object


def moments(kind: str, d: int, scale: float = 1.0) -> Moments:
    """Exact moments of :func:`sample_x1`'s distributions."""
    if kind not in X1_KINDS:
        raise ValueError(f"kind must be one of {X1_KINDS}, got {kind!r}")
    d = _validate.positive_int("d", d)
    s2 = _validate.positive_float("scale", scale) ** 2
    if kind == "gaussian":  # E x^2, x^4, x^6 = s^2, 3 s^4, 15 s^6 (real Gaussian)
        return Moments(d * s2, 3 * d * s2**2, 15 * d * s2**3, 3 * d * (d - 1) * s2**3)
    if kind == "one-hot":   # one coordinate equals +-s, the others 0
        return Moments(s2, s2**2, s2**3, 0.0)
    return Moments(d * s2, d * s2**2, d * s2**3, d * (d - 1) * s2**3)


def harmonic_weight(T: int) -> Fraction:
    r""":math:`h_T = H_{T-2}/(T-2)`, the mean of :math:`1/(t-1)` over :math:`t = 2..T-1`
    (exact, so that it combines with float, ``Fraction`` and SymPy moments alike)."""
    T = _validate.positive_int("T", T, minimum=3)
    return sum((Fraction(1, k) for k in range(1, T - 1)), Fraction(0)) / (T - 2)


def _population_coefficients(m: Moments, t: int):
    r""":math:`(\mu_2, \mu_4, \mu_6 + \kappa/(t-1))`: the error is
    :math:`\varepsilon_t(c) = \mu_2 - 2c\mu_4 + c^2(\mu_6 + \kappa/(t-1))`, for :math:`t\ge 2`."""
    _validate.instance("m", m, Moments)
    t = _validate.positive_int("t", t, minimum=2)
    return m.m2, m.m4, m.m6 + m.cross / (t - 1)


def population_error(m: Moments, t: int, ab):
    r""":math:`\varepsilon_t(ab) = \mathbb E\lVert\hat y_t - x_{t+1}\rVert^2` in closed form."""
    a, b, c = _population_coefficients(m, t)
    ab = _validate.real_number("ab", ab)
    return a - 2 * ab * b + ab**2 * c


def optimal_ab(m: Moments, T: int):
    r""":math:`ab^*_T = \mu_4/(\mu_6 + h_T\kappa)`, the minimiser of
    :math:`\sum_{t=2}^{T-1}\varepsilon_t(ab)`."""
    _validate.instance("m", m, Moments)
    return m.m4 / (m.m6 + harmonic_weight(T) * m.cross)


def limiting_ab(m: Moments):
    r""":math:`\lim_{T\to\infty} ab^*_T = \mu_4/\mu_6`."""
    _validate.instance("m", m, Moments)
    return m.m4 / m.m6


def limiting_error(m: Moments):
    r""":math:`\varepsilon_\infty = \lim_t \varepsilon_t(\mu_4/\mu_6) = \mu_2 - \mu_4^2/\mu_6`."""
    _validate.instance("m", m, Moments)
    return m.m2 - m.m4**2 / m.m6


# --- the model -----------------------------------------------------------------------------

class ARLinearAttention(nn.Module):
    r"""One causal complex linear-attention layer, :math:`\hat y_t = W_{PV} G_t W_{KQ} e_t`.

    The complex weights are stored as real ``(..., 2)`` parameters (real and imaginary parts),
    so that ``module.to(dtype=float32/float64)`` and every real optimiser treat them as the
    :math:`\mathbb R^2` they are; :attr:`W_KQ` and :attr:`W_PV` are complex views.

    Hook points (TransformerLens names and layout, one head): ``hook_q`` the query
    :math:`W_{KQ}e_t`, ``hook_k`` and ``hook_v`` the tokens :math:`e_i` as keys and as values,
    all ``(..., T, 1, 2d)``; ``hook_z`` :math:`G_tW_{KQ}e_t = \rho_t^{-1}\sum_{i\le t}
    e_i(e_i^{\mathsf H}W_{KQ}e_t)`, ``(..., T, 1, 2d)``; ``hook_result`` the head's output
    :math:`\hat y_t`, ``(..., T, 1, d)``. The forward contracts the keys and values into
    :math:`G_t` first and never forms the scores, so there is no ``hook_attn_scores`` or
    ``hook_pattern`` (:meth:`attention_scores` computes them separately).
    """

    def __init__(self, W_KQ: torch.Tensor, W_PV: torch.Tensor) -> None:
        super().__init__()
        W_KQ = _validate.complex_tensor("W_KQ", W_KQ, ndim=2)
        W_PV = _validate.complex_tensor("W_PV", W_PV, ndim=2)
        D = W_KQ.shape[0]
        if W_KQ.shape != (D, D) or D % 2:
            raise ValueError(f"W_KQ must be square with an even side 2d, got {tuple(W_KQ.shape)}")
        if W_PV.shape != (D // 2, D):
            raise ValueError(f"W_PV must have shape (d, 2d) = {(D // 2, D)}, "
                             f"got {tuple(W_PV.shape)}")
        self.d = D // 2
        self.W_KQ_parts = nn.Parameter(torch.view_as_real(W_KQ).clone(), requires_grad=False)
        self.W_PV_parts = nn.Parameter(torch.view_as_real(W_PV).clone(), requires_grad=False)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_z, self.hook_result = HookPoint(), HookPoint()

    @property
    def W_KQ(self) -> torch.Tensor:
        return torch.view_as_complex(self.W_KQ_parts)

    @property
    def W_PV(self) -> torch.Tensor:
        return torch.view_as_complex(self.W_PV_parts)

    def _inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, bool]:
        x = _validate.complex_tensor("x", x, ndim=(2, 3))
        if x.shape[-1] != self.d:
            raise ValueError(f"x must have width d = {self.d}, got shape {tuple(x.shape)}")
        return x.to(self.W_KQ.dtype), x.ndim == 3

    def context_gram(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`G_t = \rho_t^{-1}\sum_{i\le t} e_i e_i^{\mathsf H}`, ``(..., T, 2d, 2d)``."""
        return context_gram(self._inputs(x)[0])

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return ["complex numbers", LINEAR_ATTENTION]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Predictions :math:`\\hat y_t` of :math:`x_{t+1}`, shape ``(..., T, d)``."""
        x, _ = self._inputs(x)
        e = tokens(x)                                                   # (..., T, 2d)
        # the hooks see TransformerLens's (..., T, head = 1, width) views of each tensor
        query = hook_with_axes(self.hook_q, e @ self.W_KQ.T, -2)            # W_KQ e_t
        gram = _gram(hook_with_axes(self.hook_k, e, -2), hook_with_axes(self.hook_v, e, -2))
        context = hook_with_axes(self.hook_z, torch.einsum("...tab,...tb->...ta", gram, query), -2)
        return hook_with_axes(self.hook_result, context @ self.W_PV.T, -2)  # (..., T, d)

    def attention_scores(self, x: torch.Tensor) -> torch.Tensor:
        r"""Causal scores :math:`s_{ti} = e_i^{\mathsf H} W_{KQ} e_t/\rho_t` (0 for
        :math:`i > t`), ``(..., T, T)``: the prediction is :math:`\sum_i s_{ti} W_{PV} e_i`."""
        x, _ = self._inputs(x)
        e = tokens(x)
        T = x.shape[-2]
        scores = (e @ self.W_KQ.T) @ e.conj().transpose(-1, -2)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        rho = _step_normalizers(T, x.real.dtype, x.device)
        return scores.masked_fill(~mask, 0) / rho[:, None]

    def mesa_weights(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\widehat W_t = W_{PV} G_t W_{KQ}[:, {:}d]`, ``(..., T, d, d)``: the in-context
        learned map, with :math:`\hat y_t = \widehat W_t x_t` when
        :math:`W_{KQ}[:, d{:}] = 0` (as in the construction)."""
        return self.W_PV @ self.context_gram(x) @ self.W_KQ[:, : self.d]

    @property
    def ab(self) -> float:
        r"""The code's read-out :math:`\frac1d\sum_j \mathrm{Re}(W_{KQ}[d+j, j]\,W_{PV}[j, j])`:
        invariant under the gauge :math:`(W_{KQ}, W_{PV}) \to (\alpha W_{KQ}, W_{PV}/\alpha)`."""
        d = self.d
        product = self.W_KQ[d:, :d].diagonal() * self.W_PV[:, :d].diagonal()
        return float(product.real.mean())

    def off_structure_mass(self) -> tuple[float, float]:
        r"""Relative Frobenius mass outside the diagonals of :math:`W_{KQ}[d{:}, {:}d]` and
        :math:`W_{PV}[:, {:}d]`, one number per matrix (0 for the construction)."""
        d, masses = self.d, []
        for W, block in ((self.W_KQ, (slice(d, None), slice(None, d))),
                         (self.W_PV, (slice(None), slice(None, d)))):
            diagonal = W[block].diagonal()
            total = W.abs().pow(2).sum()
            kept = diagonal.abs().pow(2).sum()
            masses.append(float(((total - kept).clamp_min(0) / kept).sqrt()))
        return masses[0], masses[1]


def ar_mesa_layer(d: int, a: float, b: float, *, dtype: torch.dtype = torch.float64,
                  device: torch.device | str | None = None) -> ARLinearAttention:
    r"""The construction: :math:`W_{KQ}[d{:}, {:}d] = aI_d`, :math:`W_{PV}[:, {:}d] = bI_d`.

    Its prediction is one GD step with learning rate :math:`ab` on the in-context OLS problem
    (module docstring). ``dtype`` is the real dtype of the weights' parts (float64 gives
    complex128 arithmetic).
    """
    d = _validate.positive_int("d", d)
    a = _validate.finite_float("a", a)
    b = _validate.finite_float("b", b)
    kw = resolve(dtype, device)
    if kw["dtype"] not in COMPLEX:
        raise ValueError(f"dtype must be float32 or float64, got {kw['dtype']}")
    complex_kw = {"dtype": COMPLEX[kw["dtype"]], "device": kw["device"]}
    W_KQ = torch.zeros(2 * d, 2 * d, **complex_kw)
    W_KQ[d:, :d] = a * torch.eye(d, **complex_kw)
    W_PV = torch.zeros(d, 2 * d, **complex_kw)
    W_PV[:, :d] = b * torch.eye(d, **complex_kw)
    return ARLinearAttention(W_KQ, W_PV)
