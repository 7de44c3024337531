r"""The polynomial method behind almost-linear-time attention and its gradients (Liang, Sha, Shi,
Song, Zhou 2024, "Multi-Layer Transformers Gradient Can be Approximated in Almost Linear Time",
arXiv:2408.13233, which builds on the low-rank approximation of Alman and Song 2023).

For queries and keys :math:`q_i, k_j \in \mathbb R^d` (rows of :math:`Q, K \in \mathbb R^{n\times
d}`) the degree-:math:`g` Taylor truncation of the attention matrix, entrywise,

.. math::

    P_g = \sum_{r=0}^{g} \frac{(QK^\top)^{\circ r}}{r!}, \qquad
    (q\cdot k)^r/r! = \sum_{|\alpha| = r} \frac{q^\alpha k^\alpha}{\alpha!}

(multinomial theorem; :math:`\alpha \in \mathbb N^d`, :math:`q^\alpha = \prod_a q_a^{\alpha_a}`,
:math:`\alpha! = \prod_a\alpha_a!`), factors as :math:`P_g = UV^\top` with
:math:`U_{i\alpha} = q_i^\alpha/\alpha!` and :math:`V_{j\alpha} = k_j^\alpha` over the
:math:`\binom{d+g}{g}` multi-indices with :math:`|\alpha| \le g`: so
:math:`\mathrm{rank}\,P_g \le \binom{d+g}{g}`, independent of :math:`n`, and :math:`P_gV'` costs
:math:`O(n\binom{d+g}{g}d_v)` instead of :math:`O(n^2d_v)`. With :math:`B = \max_{ij}|q_i\cdot
k_j|` the Lagrange remainder bounds every entry's error,
:math:`|e^{q_i\cdot k_j} - (P_g)_{ij}| \le B^{g+1}e^B/(g+1)!` (:func:`taylor_error_bound`).
The factorisation and the bound are this project's statement of the method [D]; the paper's
own lemma (its constants, the degree it picks for :math:`1/\mathrm{poly}(n)` error) was not
read.

:func:`integer_taylor_factors` scales :math:`U` by :math:`g!` so that integer :math:`Q, K` give
integer factors (:math:`g!/\alpha!` is an integer when :math:`|\alpha| \le g`): the
factorisation can then be checked exactly.
"""

from __future__ import annotations

import itertools
import math

import torch

from constructions import _validate


def multi_indices(d: int, degree: int) -> list[tuple[int, ...]]:
    r"""Every :math:`\alpha \in \mathbb N^d` with :math:`|\alpha| \le` ``degree``, by total
    degree then lexicographically: :math:`\binom{d + g}{g}` of them."""
    d = _validate.positive_int("d", d)
    degree = _validate.positive_int("degree", degree, minimum=0)
    found = []
    for total in range(degree + 1):
        for cut in itertools.combinations(range(total + d - 1), d - 1):  # stars and bars
            bounds = (-1, *cut, total + d - 1)
            found.append(tuple(bounds[a + 1] - bounds[a] - 1 for a in range(d)))
    return found


def _monomials(X: torch.Tensor, indices: list[tuple[int, ...]]) -> torch.Tensor:
    """``(n, D)``: :math:`x^\\alpha` for every row and multi-index (products of powers)."""
    powers = torch.tensor(indices, dtype=torch.int64)                    # (D, d)
    return torch.prod(X[:, None, :] ** powers[None, :, :], dim=-1)


def _points(name: str, X: object, *, integer: bool = False) -> torch.Tensor:
    if integer:
        if not isinstance(X, torch.Tensor) or X.dtype != torch.int64:
            raise TypeError(f"{name} must be an int64 torch.Tensor")
        if X.ndim != 2 or X.numel() == 0:
            raise ValueError(f"{name} must be a non-empty (n, d) matrix, got {tuple(X.shape)}")
        return X
    return _validate.nonempty(name, _validate.real_tensor(name, X, ndim=2))


def taylor_factors(Q: torch.Tensor, K: torch.Tensor, degree: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(U, V)`` with :math:`U_{i\alpha} = q_i^\alpha/\alpha!`, :math:`V_{j\alpha} =
    k_j^\alpha` over :func:`multi_indices`: :math:`UV^\top = P_g`."""
    Q, K = _points("Q", Q), _points("K", K)
    _validate.matching("K", K, Q.shape[1], to="Q's width")
    indices = multi_indices(Q.shape[1], degree)
    factorials = torch.tensor([math.prod(math.factorial(a) for a in alpha) for alpha in indices],
                              dtype=Q.dtype)
    return _monomials(Q, indices) / factorials, _monomials(K.to(Q.dtype), indices)


def integer_taylor_factors(Q: torch.Tensor, K: torch.Tensor, degree: int
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(U, V)`` for integer (``int64``) :math:`Q, K`: :math:`U_{i\alpha} =
    (g!/\alpha!)\,q_i^\alpha`, :math:`V_{j\alpha} = k_j^\alpha`, so :math:`UV^\top = g!\,P_g`
    exactly (while no entry overflows int64)."""
    Q, K = _points("Q", Q, integer=True), _points("K", K, integer=True)
    _validate.matching("K", K, Q.shape[1], to="Q's width")
    indices = multi_indices(Q.shape[1], degree)
    scale = torch.tensor([math.factorial(degree) // math.prod(math.factorial(a) for a in alpha)
                          for alpha in indices], dtype=torch.int64)
    return _monomials(Q, indices) * scale, _monomials(K, indices)


def integer_taylor_matrix(Q: torch.Tensor, K: torch.Tensor, degree: int) -> torch.Tensor:
    r""":math:`g!\,P_g = \sum_{r\le g}(g!/r!)(QK^\top)^{\circ r}` for integer :math:`Q, K`,
    computed entrywise from the scores (the definition, without the factorisation)."""
    Q, K = _points("Q", Q, integer=True), _points("K", K, integer=True)
    _validate.matching("K", K, Q.shape[1], to="Q's width")
    degree = _validate.positive_int("degree", degree, minimum=0)
    scores = Q @ K.T
    return sum(math.factorial(degree) // math.factorial(r) * scores**r
               for r in range(degree + 1))


def taylor_error_bound(B: float, degree: int) -> float:
    r"""The Lagrange bound :math:`B^{g+1}e^B/(g+1)!` on :math:`|e^s - \sum_{r\le g}s^r/r!|`
    for :math:`|s| \le B`."""
    B = _validate.positive_float("B", B, allow_zero=True)
    degree = _validate.positive_int("degree", degree, minimum=0)
    return B ** (degree + 1) * math.exp(B) / math.factorial(degree + 1)
