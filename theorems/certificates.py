r"""A-posteriori certificates for quantities that checks get from iterative solvers.

An eigensolver's or a least-squares solver's nominal accuracy carries an unspecified constant
(Higham's :math:`c` in :math:`\tilde\gamma_n = cnu`). A check instead certifies what it needs
from the returned numbers themselves, with the standard rounding model of
:mod:`theorems.numerics`:

- :func:`lambda_min_lower_bound`: a rigorous lower bound on the smallest eigenvalue of a
  symmetric matrix known to within an entrywise error bound, from a Cholesky factorization of a
  shifted copy (Rump's test of positive definiteness, with the backward error of Cholesky,
  Higham, *Accuracy and Stability*, 2nd ed., Thm 10.3 and §10.1.1: if the factorization of a
  floating-point symmetric :math:`H` of order :math:`p` runs to completion, the computed
  factor satisfies :math:`\hat R^\top\hat R = H + \Delta H` with
  :math:`|\Delta H| \le \gamma_{p+1}|\hat R^\top||\hat R|`, whatever the order of its inner
  products).
- :func:`sigma_min_lower_bound`: the same for the smallest singular value of a tall matrix,
  through its Gram matrix.
- :func:`least_squares_distance`: how far a returned least-squares solution is from the exact
  one, from its normal-equations residual and the certified :math:`\sigma_{\min}`.

Assumed (as everywhere in the suite): IEEE arithmetic without underflow, and LAPACK's Cholesky
computing each entry as an inner product in some order (blocked or not), which is what Thm 10.3
covers.
"""

from __future__ import annotations

import torch

from theorems.numerics import gamma


def frobenius_upper(x: torch.Tensor) -> float:
    r"""An upper bound on :math:`\lVert x\rVert_F`: the computed norm, a sum of :math:`N`
    rounded squares and a square root, is within :math:`\gamma_{N+2}` relative of it."""
    return float(x.norm()) * (1 + gamma(x.numel() + 2, x.dtype))


def lambda_min_lower_bound(M: torch.Tensor, error: torch.Tensor | float = 0.0,
                           shift: float | None = None) -> float:
    r"""A rigorous lower bound on :math:`\lambda_{\min}(S)` for every symmetric :math:`S` with
    :math:`|S - M| \le` ``error`` entrywise (``M`` the computed symmetric matrix).

    With :math:`\tau` = ``shift`` (by default :math:`0.9\,\hat\lambda_{\min}` from ``eigvalsh``,
    only a guess: the bound is rigorous for every :math:`\tau`), :math:`H = \mathrm{fl}(M - \tau
    I)` errs by :math:`\gamma_1|H_{ii}|` on the diagonal; if its Cholesky factor
    :math:`\hat R` exists,
    :math:`H + \Delta H \succeq 0` with :math:`\lVert\Delta H\rVert_2 \le \gamma_{p+1}\lVert
    \hat R\rVert_F^2`, so by Weyl

    .. math:: \lambda_{\min}(S) \ge \tau - \gamma_{p+1}\lVert\hat R\rVert_F^2
              - \gamma_1\max_i|H_{ii}| - \lVert E\rVert_F,

    with :math:`E` the ``error`` matrix (symmetrized: both factorizations read the lower
    triangle of ``M``). Returns ``-inf`` when the factorization fails (no
    certificate at that shift)."""
    p = M.shape[-1]
    # eigvalsh and cholesky read the lower triangle only: the matrix certified is the symmetric
    # one it defines, which is within max(E, E^T) of S where M itself is within E
    if isinstance(error, torch.Tensor):
        error = torch.maximum(error, error.transpose(-1, -2))
    if shift is None:
        shift = 0.9 * float(torch.linalg.eigvalsh(M)[0])
    H = M - shift * torch.eye(p, dtype=M.dtype, device=M.device)
    R, info = torch.linalg.cholesky_ex(H)
    if int(info) != 0:
        return float("-inf")
    E = frobenius_upper(error) if isinstance(error, torch.Tensor) else float(error) * p
    chol = gamma(p + 1, M.dtype) * frobenius_upper(R) ** 2
    return shift - chol - gamma(1, M.dtype) * float(H.diagonal().abs().max()) - E


def sigma_min_lower_bound(A: torch.Tensor) -> float:
    r"""A rigorous lower bound on the smallest singular value of a tall ``(m, p)`` matrix
    :math:`A` (the floating-point matrix itself, taken as exact), or 0.

    :math:`\sigma_{\min}(A)^2 = \lambda_{\min}(A^\top A)`, and the computed Gram matrix, an
    :math:`m`-term dot product per entry, errs by :math:`\gamma_m|A|^\top|A|` entrywise
    (:func:`lambda_min_lower_bound`)."""
    m = A.shape[0]
    gram_error = gamma(m, A.dtype) * (A.abs().T @ A.abs()) * (1 + gamma(m, A.dtype))
    bound = lambda_min_lower_bound(A.T @ A, gram_error)
    return max(bound, 0.0) ** 0.5


def least_squares_distance(A: torch.Tensor, b: torch.Tensor, x: torch.Tensor,
                           sigma_min: float) -> float:
    r"""A rigorous bound on :math:`\lVert x - x_{LS}\rVert_2`, :math:`x_{LS} = A^+b` the exact
    least-squares solution of the full-column-rank ``(m, p)`` system, for a returned ``x``.

    :math:`A^\top A(x - x_{LS}) = A^\top r`, :math:`r = Ax - b`, so
    :math:`\lVert x - x_{LS}\rVert \le \lVert A^+ r\rVert`. The computed :math:`\hat r`
    (a :math:`(p+1)`-term sum) errs by :math:`\delta = \gamma_{p+1}(|A||x| + |b|)`, and
    :math:`\mathrm{fl}(A^\top\hat r)` by :math:`\gamma_m|A|^\top|\hat r|`; with
    :math:`\lVert A^+\rVert = 1/\sigma_{\min}` and :math:`\lVert(A^\top A)^{-1}\rVert =
    1/\sigma_{\min}^2`,

    .. math:: \lVert x - x_{LS}\rVert \le \frac{\lVert\mathrm{fl}(A^\top\hat r)\rVert
              + \gamma_m\lVert|A|^\top|\hat r|\rVert}{\sigma_{\min}^2}
              + \frac{\lVert\delta\rVert}{\sigma_{\min}}.

    ``b`` and ``x`` may carry several right-hand sides as columns (then the Frobenius norm)."""
    if sigma_min <= 0:
        return float("inf")
    m, p = A.shape
    r = A @ x - b
    delta = gamma(p + 1, A.dtype) * (A.abs() @ x.abs() + b.abs())
    normal = frobenius_upper(A.T @ r) + gamma(m, A.dtype) * frobenius_upper(A.abs().T @ r.abs())
    return normal / sigma_min**2 + frobenius_upper(delta) / sigma_min
