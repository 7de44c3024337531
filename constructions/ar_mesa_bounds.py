r"""Forward-error bounds for the AR-MESA construction's float evaluations.

The rounding counts of one layer prediction, of a sampled AR sequence and of a sampled error
(:func:`layer_roundings`, :func:`sequence_roundings`, :func:`residual_roundings`) and the
per-entry bound between the layer and the one-GD-step oracle (:func:`one_step_tolerance`) give
the tolerances of ``theorems/areas/ar_mesa/``. ``statistics_loss`` (from the sufficient
statistics) and ``direct_loss`` (from the forward pass) of :mod:`empirics.ar_mesa` are equal in
exact arithmetic; :func:`loss_identity_error_bound` bounds how far their float evaluations can
differ, so the trained-optimum check compares them within a derived tolerance. (Kept apart
from :mod:`constructions.ar_mesa`, whose code the published ``ar-mesa`` result's fingerprint
hashes.)
"""

from __future__ import annotations

import math

import torch

from constructions import _validate
from constructions.ar_mesa import ARLinearAttention, ar_mesa_layer
from constructions.numerics import gamma as _gamma

__all__ = ["layer_roundings", "loss_identity_error_bound", "one_step_tolerance",
           "residual_roundings", "sequence_roundings"]


def layer_roundings(T: int, d: int) -> int:
    r""":math:`k_1 = 4(T + 4d + 4)`: roundings of one layer prediction relative to the same
    computation on absolute values (:func:`one_step_tolerance`). The products are :math:`2d`-wide
    (the tokens), the context sum has at most :math:`T` terms, and a complex multiply-add
    counts as up to four real roundings (Higham Lemma 3.5: :math:`\sqrt2\gamma_2` per complex
    product); the division by :math:`\rho_t` and the few scalar products fit in the slack."""
    T, d = _validate.positive_int("T", T), _validate.positive_int("d", d)
    return 4 * (T + 4 * d + 4)


def sequence_roundings(T: int) -> int:
    r""":math:`k_x = 7T`: ``ar_sequences`` computes :math:`x_t = \mathrm{polar}(1,
    \mathrm{fl}(\theta(t-1)))\,x_1`: the angle's rounding moves the phase by
    :math:`\le 2\pi(T-1)u`, cos, sin (< 1 ulp) and the product add :math:`6u`, so a sampled
    sequence is autoregressive only within :math:`\gamma_{7T}|x_1|` entrywise."""
    return 7 * _validate.positive_int("T", T)


def residual_roundings(T: int, d: int) -> int:
    r"""Roundings of a sampled error or coefficient (degree <= 6 in :math:`x`) relative to its
    evaluation on absolute values: the prediction errs by :math:`k_1` and, being cubic in the
    sequence, by :math:`3k_x` more; a squared norm doubles that (:math:`2(k_1 + 3k_x)`), the
    target adds :math:`2k_x`; the :math:`d`-term complex sums :math:`4d + 8`, the closed-form
    conditional means (powers of :math:`|x_1|^2` up to the third, :math:`d`-term sums, one
    division) :math:`2d + 16`, the step size's :math:`\sqrt{ab}` twice :math:`4`."""
    k1, kx = layer_roundings(T, d), sequence_roundings(T)
    return 2 * (k1 + 3 * kx) + 2 * kx + 6 * d + 28


def one_step_tolerance(x: torch.Tensor, a: float, b: float) -> torch.Tensor:
    r"""Per-entry rounding bound between the layer ``ar_mesa_layer(d, a, b)`` on ``x``
    ``(..., T, d)`` and the one-GD-step oracle (or the closed form of its step).

    Each evaluates :math:`\frac{ab}{\rho_t}\sum_{i\le t} x_i (x_{i-1}^{\mathsf H}x_t)`, sums of
    at most :math:`T` terms of :math:`d`-term complex inner products (plus :math:`2d`-wide
    matrix products in the layer). The standard model bounds each by :math:`\gamma_k` times
    the same computation on absolute values, which the construction itself evaluates on
    :math:`|x|` with :math:`|a|, |b|`; :math:`k = 4(T + 4d + 4)` counts each complex
    multiply-add as up to four roundings. Each side may err by that much: twice the bound.
    The oracle (autograd of the OLS loss at :math:`W = 0`: a :math:`T`-term sum of outer
    products, the factor :math:`-\mathrm{fl}(ab)`, a :math:`d`-term product with :math:`x_t`)
    and the closed form (a :math:`T`-term cumulative sum of outer products, the division by
    :math:`\rho_t`, the factor :math:`\mathrm{fl}(ab)`, a :math:`d`-term product with
    :math:`x_t`) have fewer roundings on the same absolute-value computation. That
    computation is itself evaluated in floating point, low by at most :math:`\gamma_{k}`
    relative: second order, inside the count's slack (the layer needs about
    :math:`T + 6d + 9` of the :math:`4T + 16d + 16`).
    """
    x = _validate.nonempty("x", _validate.complex_tensor("x", x, ndim=(2, 3)))
    a, b = _validate.finite_float("a", a), _validate.finite_float("b", b)
    T, d = x.shape[-2], x.shape[-1]
    absolute = ar_mesa_layer(d, abs(a), abs(b))(x.abs()).abs()
    return 2 * _gamma(layer_roundings(T, d)) * absolute


def loss_identity_error_bound(model: ARLinearAttention, x: torch.Tensor, chunk: int) -> float:
    r"""A bound on :math:`|\hat S - \hat D|/\overline{|y|^2}`, the relative gap of two float
    evaluations of the same training loss (``statistics_loss`` from the sufficient statistics,
    ``direct_loss`` from the forward pass; equal in exact arithmetic), for the trained
    ``model`` on its training set ``x``.

    Rounding model: a complex addition errs by :math:`u|s|`, a complex product by
    :math:`\sqrt2\gamma_2|a||b|` (Higham, Lemma 3.5), a real scaling by :math:`u`; so a sum of
    products computed in any order, with :math:`p` complex products and :math:`s` additions or
    scalings on each term's path, is within :math:`\theta(p, s) = (1+\sqrt2\gamma_2)^p(1 +
    \gamma_s) - 1` of the sum of the terms' magnitudes. Both losses expand into the same
    monomials in the weights and the data; with
    :math:`P_{tv} = \sum_{a,b,c,i\le t}|W_{PV}^{va}||e_i^a||e_i^b||W_{KQ}^{bc}||e_t^c|/\rho_t`
    (the forward pass on magnitudes: the abs model on :math:`|x|`) and :math:`Y_{tv} =
    |y_t^v|`, over the :math:`N` training tokens:

    * the prediction (query :math:`2d`, Gram cumsum :math:`\le T`, contraction :math:`2d`,
      read-out :math:`2d`; 4 products) is within :math:`\delta_{tv} = \theta(4, T+6d+1)P_{tv}`,
      the residual's subtraction adds :math:`u` of it, and
      :math:`\lvert|r|^2 - |\hat r|^2\rvert \le 2R\delta' + \delta'^2` with :math:`R` an upper
      bound on :math:`|\hat r|`; :math:`|\cdot|^2`, the chunked sums and the scalings round
      :math:`\gamma_{Nd+c+8}` relative (:math:`c` chunks);
    * the linear term :math:`\sum Z\circ K` (5 products; the cumsum, :math:`N`, the chunks,
      :math:`8d^4` and 4 scalings) is within :math:`\theta_L\,\overline{YP}`, the quadratic form
      (9 products; two cumsums, :math:`N`, the chunks, :math:`d(2d)^6`, 6 scalings) within
      :math:`\theta_Q\,\overline{P^2}` (the magnitudes of the monomials of
      :math:`Z_{vi}M_{ij}\bar Z_{vj}` sum to :math:`\overline{P^2}`), the mean
      :math:`|y|^2` within :math:`\gamma_{Nd+c+6}`, and the final combination rounds
      :math:`\gamma_2` of its parts' magnitudes.

    The magnitudes are computed here (the abs model's own rounding: :math:`1 + 2\theta_f`)."""
    _validate.instance("model", model, ARLinearAttention)
    x = _validate.complex_tensor("x", x, ndim=3)
    if x.shape[-1] != model.d or x.shape[-2] < 3 or x.shape[0] < 1:
        raise ValueError(f"x must have shape (m >= 1, T >= 3, d = {model.d}), "
                         f"got {tuple(x.shape)}")
    chunk = _validate.positive_int("chunk", chunk)
    x = x.to(model.W_KQ.dtype)
    real = model.W_KQ.real.dtype

    def gamma(n: int) -> float:
        return _gamma(n, real)

    T, d = x.shape[-2], x.shape[-1]
    N = x.shape[0] * (T - 2)
    chunks = -(-x.shape[0] // chunk)  # token_statistics and direct_loss both use it
    u, c2 = gamma(1), math.sqrt(2) * gamma(2)

    def theta(p: int, s: int) -> float:
        return (1 + c2) ** p * (1 + gamma(s)) - 1

    with torch.no_grad():
        W_KQ, W_PV = model.W_KQ, model.W_PV
        magnitude = ARLinearAttention(W_KQ.abs().to(W_KQ.dtype), W_PV.abs().to(W_PV.dtype))
        theta_f = theta(4, T + 6 * d + 1)
        P, r = [], []
        for part in x.split(chunk):
            P.append(magnitude(part.abs().to(part.dtype))[:, 1:T - 1].real * (1 + 2 * theta_f))
            r.append((model(part)[:, 1:T - 1] - part[:, 2:]).abs())
        P, r, Y = torch.cat(P), torch.cat(r), x[:, 2:].abs()
    delta = theta_f * P * (1 + u) + u * r          # |residual - computed residual|
    R = r + 2 * delta                               # covers a recomputation's own rounding
    K = N * d + chunks + 8
    direct = float((2 * R * delta + delta ** 2 + gamma(K) * R ** 2).sum()) / (2 * N)
    YP, P2, y2 = float((Y * P).sum()) / N, float((P ** 2).sum()) / N, float((Y ** 2).sum()) / N
    theta_L = theta(5, T + N + chunks + 8 * d ** 4 + 4)
    theta_Q = theta(9, 2 * T + N + chunks + d * (2 * d) ** 6 + 6)
    statistics = 0.5 * (gamma(K) * y2 + 2 * theta_L * YP + theta_Q * P2
                        + gamma(2) * (y2 + 2 * YP + P2) * (1 + theta_Q))
    # the sums just above (positive terms, at most N d each, and a few operations); relative
    # to the experiment's mean |y|^2 (within gamma_{Nd+c+6} of y2), as its metric is, with
    # that metric's own subtraction and division (gamma_2)
    bound = (direct + statistics) * (1 + gamma(N * d + 8))
    return bound * (1 + gamma(2)) / (y2 * (1 - 2 * gamma(N * d + chunks + 6)))
