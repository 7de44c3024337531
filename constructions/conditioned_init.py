r"""Conditioned initialisation for attention (ICLR 2026 submission 25196, OpenReview
cKNOCYPo2W; anonymous).

One softmax self-attention layer :math:`Y = \mathrm{softmax}(XW_QW_K^\top X^\top/\sqrt{d_k})
XW_V` and its Jacobian with respect to :math:`(W_Q, W_K, W_V)`. The conditioned scheme, from a
secondary summary [S]: :math:`W_V` the rectangular identity and :math:`W_Q, W_K`
semi-orthogonal (condition number 1); the baseline has :math:`\mathcal N(0, 1/d)` entries.

An exact fact (catalogue CI.2, ours): :math:`Y` is linear in :math:`W_V`, with
:math:`\mathrm{vec}_r(Y) = (AX \otimes I_{d_v})\,\mathrm{vec}_r(W_V)` for row-major
vectorisation, :math:`A` the attention matrix. So the :math:`W_V` block of the Jacobian is
:math:`AX\otimes I_{d_v}`: its singular values are those of :math:`AX`, each repeated
:math:`d_v` times, and do not depend on :math:`W_V`.
"""

from __future__ import annotations

import math

import torch

from constructions._validate import float_dtype, nonempty, positive_int, real_tensor


def _check(X, W_Q, W_K, W_V=None) -> tuple:
    """Check ``X`` ``(n, d)``, ``W_Q``, ``W_K`` ``(d, d_k)`` and ``W_V`` ``(d, d_v)``."""
    X = nonempty("X", real_tensor("X", X, ndim=2))
    d = X.shape[1]
    W_Q = nonempty("W_Q", real_tensor("W_Q", W_Q, shape=(d, None)))
    W_K = real_tensor("W_K", W_K, shape=(d, W_Q.shape[1]))
    if W_V is not None:
        W_V = nonempty("W_V", real_tensor("W_V", W_V, shape=(d, None)))
    return X, W_Q, W_K, W_V


def attention_layer(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor,
                    W_V: torch.Tensor) -> torch.Tensor:
    """``softmax(X W_Q W_K^T X^T / sqrt(d_k)) X W_V``: ``(n, d_v)`` for ``X`` ``(n, d)``."""
    X, W_Q, W_K, W_V = _check(X, W_Q, W_K, W_V)
    return attention_matrix(X, W_Q, W_K) @ X @ W_V           # (n, n) (n, d) (d, d_v)


def attention_matrix(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor) -> torch.Tensor:
    """The row-stochastic ``A = softmax(X W_Q (X W_K)^T / sqrt(d_k))``: ``(n, n)``."""
    X, W_Q, W_K, _ = _check(X, W_Q, W_K)
    scores = (X @ W_Q) @ (X @ W_K).T / math.sqrt(W_Q.shape[1])   # (n, n)
    return torch.softmax(scores, dim=-1)


def attention_jacobian(X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor,
                       W_V: torch.Tensor, *, layer=attention_layer) -> dict[str, torch.Tensor]:
    """The Jacobian blocks ``d vec_r(Y) / d vec_r(W)`` for ``W`` in ``W_Q, W_K, W_V``:
    each ``(n d_v, numel(W))``, by reverse-mode autodiff."""
    X, W_Q, W_K, W_V = _check(X, W_Q, W_K, W_V)
    if not callable(layer):
        raise TypeError(f"layer must be callable (X, W_Q, W_K, W_V) -> Y, got "
                        f"{type(layer).__name__}")
    blocks = torch.func.jacrev(lambda q, k, v: layer(X, q, k, v), argnums=(0, 1, 2))(
        W_Q, W_K, W_V)
    n, dv = X.shape[0], W_V.shape[1]
    return {name: block.reshape(n * dv, -1)
            for name, block in zip(("W_Q", "W_K", "W_V"), blocks, strict=True)}


def condition_number(J: torch.Tensor) -> float:
    """sigma_max / sigma_min over the ``min(J.shape)`` singular values of ``J``."""
    J = nonempty("J", real_tensor("J", J, ndim=2))
    # J and J^T have the same singular values; LAPACK's gesdd factors a tall matrix through
    # a QR first, which is about twice as fast as its LQ path for a wide one (the attention
    # Jacobians here are 96 x 432). Both are backward stable with the same bound, so the
    # values agree to rounding (a relative 1e-15 on these kappas).
    s = torch.linalg.svdvals(J.T if J.shape[0] < J.shape[1] else J)
    return float(s[0] / s[-1]) if float(s[-1]) > 0 else math.inf


def gaussian_init(d: int, d_k: int, d_v: int, *, seed: int = 0,
                  dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, ...]:
    """``W_Q, W_K, W_V`` with i.i.d. ``N(0, 1/d)`` entries."""
    d, d_k, d_v = (positive_int(n, v) for n, v in (("d", d), ("d_k", d_k), ("d_v", d_v)))
    generator = torch.Generator().manual_seed(positive_int("seed", seed, minimum=0))
    dtype = float_dtype("dtype", dtype)
    return tuple(torch.randn(d, k, generator=generator, dtype=torch.float64).to(dtype)
                 / math.sqrt(d) for k in (d_k, d_k, d_v))


def conditioned_init(d: int, d_k: int, d_v: int, *, seed: int = 0,
                     dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, ...]:
    """The conditioned scheme [S]: ``W_Q, W_K`` semi-orthogonal (orthonormal columns or rows,
    from the QR of a Gaussian), ``W_V`` the rectangular identity."""
    d, d_k, d_v = (positive_int(n, v) for n, v in (("d", d), ("d_k", d_k), ("d_v", d_v)))
    generator = torch.Generator().manual_seed(positive_int("seed", seed, minimum=0))
    dtype = float_dtype("dtype", dtype)

    def semi_orthogonal() -> torch.Tensor:
        G = torch.randn(max(d, d_k), min(d, d_k), generator=generator, dtype=torch.float64)
        Q, R = torch.linalg.qr(G)
        Q = Q * torch.sign(torch.diagonal(R))                 # a unique, Haar-distributed Q
        return (Q if d >= d_k else Q.T).to(dtype)

    return semi_orthogonal(), semi_orthogonal(), torch.eye(d, d_v, dtype=dtype)
