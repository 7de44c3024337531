r"""Bilinear algorithms for the product of small associative algebras, and the Alder-Strassen
bound they meet.

An FFN whose hidden product is the multiplication of an associative algebra :math:`A` (a seed
paper's design, "provably optimal for its bilinear rank by the Alder-Strassen bound") costs
:math:`R(A)` scalar products, the rank of :math:`A`'s structure tensor
:math:`T_{ijk}` (:math:`e_ie_j = \sum_k T_{ijk}e_k`). Alder and Strassen (1981) proved
:math:`R(A) \ge 2\dim A - t(A)`, :math:`t(A)` the number of maximal two-sided ideals. A
*bilinear algorithm* of :math:`r` products is a list of triples :math:`(u_\rho, v_\rho,
w_\rho)` with :math:`T = \sum_\rho u_\rho\otimes v_\rho\otimes w_\rho`, i.e.
:math:`xy = \sum_\rho (u_\rho\cdot x)(v_\rho\cdot y)\,w_\rho`; it shows :math:`R(A) \le r`.

Algorithms here (exact, in ``Fraction`` arithmetic; ours [D] as written):

* :math:`\mathbb Q[x]/(f)`, :math:`f = \prod_i p_i^{e_i}` with distinct monic irreducible
  :math:`p_i` (:func:`crt_algorithm`): reduce :math:`a, b` modulo each :math:`q_i = p_i^{e_i}`
  (degree :math:`m_i`), multiply by evaluation at :math:`2m_i - 1` rational points and Lagrange
  interpolation, and recombine with the Chinese-remainder idempotents :math:`\epsilon_i`
  (:math:`\epsilon_i \equiv 1 \bmod q_i`, :math:`\equiv 0 \bmod q_j`). That is
  :math:`\sum_i(2m_i - 1) = 2n - t` products, :math:`t` the number of distinct :math:`p_i`,
  which is :math:`t(A)` (the maximal ideals of :math:`\mathbb Q[x]/(f)` are the
  :math:`(p_i)`).
* :math:`M_2(\mathbb Q)` (:func:`strassen_algorithm`): Strassen's 7 products, :math:`7 =
  2\cdot 4 - 1`.

Over :math:`\mathbb F_2` the rank of a tensor of side at most 3 is found by exhaustive search
(:func:`f2_rank_exceeds`, meet in the middle over sums of at most two rank-one tensors).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from fractions import Fraction

from constructions import _validate

Poly = list  # coefficients, lowest degree first


def _polynomial(name: str, f: object, *, monic: bool = True) -> list[int]:
    if isinstance(f, (str, bytes)) or not isinstance(f, Sequence):
        raise TypeError(f"{name} must be a sequence of integer coefficients, lowest degree "
                        f"first, got {type(f).__name__}")
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in f):
        raise TypeError(f"{name} must hold ints, got {list(f)!r}")
    if len(f) < 2:
        raise ValueError(f"{name} must have degree >= 1, got {list(f)!r}")
    if monic and f[-1] != 1:
        raise ValueError(f"{name} must be monic (last coefficient 1), got {list(f)!r}")
    return list(f)


def _trim(p: Poly) -> Poly:
    while len(p) > 1 and p[-1] == 0:
        p = p[:-1]
    return p


def _mul(p: Poly, q: Poly) -> Poly:
    out = [Fraction(0)] * (len(p) + len(q) - 1)
    for i, a in enumerate(p):
        for j, b in enumerate(q):
            out[i + j] += a * b
    return _trim(out)


def _divmod(p: Poly, q: Poly) -> tuple[Poly, Poly]:
    p, q = [Fraction(c) for c in _trim(p)], _trim(q)
    quotient = [Fraction(0)] * max(1, len(p) - len(q) + 1)
    while len(p) >= len(q) and any(p):
        shift, factor = len(p) - len(q), p[-1] / q[-1]
        quotient[shift] = factor
        for k, c in enumerate(q):
            p[k + shift] -= factor * c
        p = _trim(p[:-1]) if len(p) > 1 else p
    return _trim(quotient), _trim(p)


def _mod(p: Poly, q: Poly) -> Poly:
    return _divmod(p, q)[1]


def _inverse(a: Poly, q: Poly) -> Poly:
    """:math:`a^{-1} \\bmod q` for coprime :math:`a, q` (extended Euclid over Q)."""
    r0, r1 = [Fraction(c) for c in q], _mod(a, q)
    s0, s1 = [Fraction(0)], [Fraction(1)]
    while any(r1):
        quotient, remainder = _divmod(r0, r1)
        r0, r1 = r1, remainder
        s0, s1 = s1, _sub(s0, _mul(quotient, s1))
    if len(r0) != 1:
        raise ValueError("factors must be pairwise coprime (a common factor was found)")
    return _mod([c / r0[0] for c in s0], q)


def _sub(p: Poly, q: Poly) -> Poly:
    width = max(len(p), len(q))
    return _trim([(p[k] if k < len(p) else 0) - (q[k] if k < len(q) else 0)
                  for k in range(width)])


def _evaluate(p: Poly, point: int) -> Fraction:
    return sum((Fraction(c) * point**k for k, c in enumerate(p)), Fraction(0))


def _padded(p: Poly, n: int) -> list[Fraction]:
    return [Fraction(p[k]) if k < len(p) else Fraction(0) for k in range(n)]


def polynomial_structure_tensor(f: Sequence[int]) -> list:
    r""":math:`T_{ijk}` of :math:`\mathbb Q[x]/(f)` in the basis :math:`1, x, \dots,
    x^{n-1}`: the coefficient of :math:`x^k` in :math:`x^{i+j} \bmod f` (``f`` monic, integer
    coefficients lowest degree first, degree :math:`n`)."""
    f = _polynomial("f", f)
    n = len(f) - 1
    powers = [_padded(_mod([0] * (s) + [1], f), n) for s in range(2 * n - 1)]
    return [[[powers[i + j][k] for k in range(n)] for j in range(n)] for i in range(n)]


def crt_algorithm(factors: Sequence[tuple[Sequence[int], int]]) -> list[tuple[list, list, list]]:
    r"""A bilinear algorithm for :math:`\mathbb Q[x]/(f)`, :math:`f = \prod_i p_i^{e_i}`, from
    ``factors`` ``[(p_i, e_i), ...]`` (monic integer :math:`p_i`, pairwise coprime, exponents
    :math:`\ge 1`): :math:`\sum_i(2\deg(p_i)e_i - 1)` triples of ``Fraction`` vectors over the
    basis :math:`1, \dots, x^{n-1}` of :math:`\mathbb Q[x]/(f)`."""
    if isinstance(factors, (str, bytes)) or not isinstance(factors, Sequence) or not factors:
        raise TypeError(f"factors must be a non-empty sequence of (polynomial, exponent) "
                        f"pairs, got {type(factors).__name__}")
    local = []
    for index, pair in enumerate(factors):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"factors[{index}] must be a (polynomial, exponent) pair")
        p = _polynomial(f"factors[{index}]", pair[0])
        e = _validate.positive_int(f"factors[{index}] exponent", pair[1])
        q = [Fraction(1)]
        for _ in range(e):
            q = _mul(q, [Fraction(c) for c in p])
        local.append(q)
    f = [Fraction(1)]
    for q in local:
        f = _mul(f, q)
    n = len(f) - 1
    triples = []
    for q in local:
        cofactor = _divmod(f, q)[0]
        idempotent = _mod(_mul(cofactor, _inverse(_mod(cofactor, q), q)), f)
        m = len(q) - 1
        points = [(k + 1) // 2 * (1 if k % 2 else -1) for k in range(2 * m - 1)]  # 0, 1, -1, ..
        reduced = [_mod([0] * j + [1], q) for j in range(n)]                        # x^j mod q
        for r, point in enumerate(points):
            lagrange = [Fraction(1)]
            for s, other in enumerate(points):
                if s != r:
                    lagrange = _mul(lagrange, [Fraction(-other, point - other),
                                               Fraction(1, point - other)])
            u = [_evaluate(power, point) for power in reduced]
            w = _padded(_mod(_mul(idempotent, lagrange), f), n)
            triples.append((u, list(u), w))
    return triples


def matrix_structure_tensor(m: int = 2) -> list:
    r""":math:`T` of :math:`M_m(\mathbb Q)` in the basis :math:`E_{ab}` (index :math:`am + b`):
    :math:`E_{ab}E_{cd} = \delta_{bc}E_{ad}`."""
    m = _validate.positive_int("m", m)
    n = m * m
    T = [[[0] * n for _ in range(n)] for _ in range(n)]
    for a, b, d in itertools.product(range(m), repeat=3):
        T[a * m + b][b * m + d][a * m + d] = 1
    return T


def strassen_algorithm() -> list[tuple[list, list, list]]:
    """Strassen's 7 products for 2 x 2 matrices, over the basis E11, E12, E21, E22."""
    rows = [  # (u over A, v over B, w over C), entries for 11, 12, 21, 22
        ((1, 0, 0, 1), (1, 0, 0, 1), (1, 0, 0, 1)),     # (A11 + A22)(B11 + B22)
        ((0, 0, 1, 1), (1, 0, 0, 0), (0, 0, 1, -1)),    # (A21 + A22) B11
        ((1, 0, 0, 0), (0, 1, 0, -1), (0, 1, 0, 1)),    # A11 (B12 - B22)
        ((0, 0, 0, 1), (-1, 0, 1, 0), (1, 0, 1, 0)),    # A22 (B21 - B11)
        ((1, 1, 0, 0), (0, 0, 0, 1), (-1, 1, 0, 0)),    # (A11 + A12) B22
        ((-1, 0, 1, 0), (1, 1, 0, 0), (0, 0, 0, 1)),    # (A21 - A11)(B11 + B12)
        ((0, 1, 0, -1), (0, 0, 1, 1), (1, 0, 0, 0)),    # (A12 - A22)(B21 + B22)
    ]
    return [tuple(list(vector) for vector in row) for row in rows]


def tensor_of(algorithm: Sequence[tuple], n: int) -> list:
    r""":math:`\sum_\rho u_\rho\otimes v_\rho\otimes w_\rho`, an ``n`` x ``n`` x ``n`` nested
    list (exact for ``int`` and ``Fraction`` entries)."""
    n = _validate.positive_int("n", n)
    if isinstance(algorithm, (str, bytes)) or not isinstance(algorithm, Sequence):
        raise TypeError(f"algorithm must be a sequence of (u, v, w) triples, "
                        f"got {type(algorithm).__name__}")
    T = [[[0] * n for _ in range(n)] for _ in range(n)]
    for index, triple in enumerate(algorithm):
        if len(triple) != 3 or any(len(vector) != n for vector in triple):
            raise ValueError(f"algorithm[{index}] must be three vectors of length n={n}")
        u, v, w = triple
        support = [k for k in range(n) if w[k]]
        for i in (i for i in range(n) if u[i]):
            for j in (j for j in range(n) if v[j]):
                uv = u[i] * v[j]
                for k in support:
                    T[i][j][k] += uv * w[k]
    return T


def _bits(T: list) -> int:
    n = len(T)
    return sum(1 << (i * n * n + j * n + k) for i, j, k in itertools.product(range(n), repeat=3)
               if T[i][j][k] % 2)


@functools.cache
def _f2_tables(n: int) -> tuple[frozenset, frozenset]:
    """The sums over F_2 of at most one, and of at most two, rank-one n x n x n tensors."""
    vectors = [v for v in itertools.product((0, 1), repeat=n) if any(v)]
    ones = {_bits([[[u[i] * v[j] * w[k] for k in range(n)] for j in range(n)]
                   for i in range(n)]) for u in vectors for v in vectors for w in vectors}
    return frozenset({0} | ones), frozenset({0} | ones | {a ^ b for a in ones for b in ones})


def f2_rank_exceeds(T: list, r: int) -> bool:
    r"""Whether the tensor ``T`` (integer entries read modulo 2, side :math:`n \le 3`) has
    rank above ``r`` over :math:`\mathbb F_2` (``r`` :math:`\le 4`), by exhaustive search:
    the sums of at most one and at most two rank-one tensors are tabulated, and ``T`` has rank
    at most :math:`a + b` exactly when it is a sum of one from each table (:math:`a, b \le 2`)."""
    if not isinstance(T, list) or not T or not all(
            isinstance(s, list) and len(s) == len(T) and all(
                isinstance(t, list) and len(t) == len(T) for t in s) for s in T):
        raise ValueError("T must be an n x n x n nested list")
    n = len(T)
    if n > 3:
        raise ValueError(f"T must have side n <= 3 for an exhaustive search, got {n}")
    r = _validate.positive_int("r", r, minimum=0)
    if r > 4:
        raise ValueError(f"r must be <= 4 (two tabulated pairs), got {r}")
    upto_one, upto_two = _f2_tables(n)
    target = _bits(T)
    first = {0: {0}, 1: {0}, 2: {0}, 3: upto_one, 4: upto_two}[r]
    second = {0: {0}, 1: upto_one, 2: upto_two, 3: upto_two, 4: upto_two}[r]
    return not any(target ^ s in second for s in first)
