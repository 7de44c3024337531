r"""A forward-error bound for the AR-MESA training loss computed two ways (ar-mesa.trained-optimum).

``statistics_loss`` (from the sufficient statistics) and ``direct_loss`` (from the forward pass)
of :mod:`constructions.ar_mesa` are equal in exact arithmetic; :func:`loss_identity_error_bound`
bounds how far their float evaluations can differ, so the trained-optimum check compares them
within a derived tolerance. (Kept apart from :mod:`constructions.ar_mesa`, whose code the
published ``ar-mesa`` result's fingerprint hashes.)
"""

from __future__ import annotations

import math

import torch

from constructions import _validate
from constructions.ar_mesa import ARLinearAttention, _complex_tensor
from constructions.numerics import gamma as _gamma

__all__ = ["loss_identity_error_bound"]


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
    x = _complex_tensor("x", x, ndim=3)
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
