r"""Helpers shared by the topic modules of this area."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from constructions.power_method import (
    power_iteration,
    sample_data,
)
from theorems.claims import Source
from theorems.numerics import gamma
from theorems.strategies import seeds

WU = {"arxiv": "2606.00605", "ref": "Wu, Zhang, Cao (2026)"}
ABSTRACT = Source(where="Abstract (the qualitative result)", tag="V", **WU)
LAYOUT = Source(where="input layout E = [[X, 0], [0, a]] and block weights (our "
                      "reconstruction; it reproduces the reported limit)", tag="D", **WU)

MODEL = (
    r"Let $d \ge 2$, $n \ge 1$, $X \in \mathbb R^{d\times n}$ with unit-norm columns, "
    r"$S = XX^\top$, $a \in \mathbb R^d \setminus \{0\}$, and "
    r"$E_0 = \begin{pmatrix} X & 0 \\ 0 & a\end{pmatrix} \in \mathbb R^{2d\times(n+1)}$. One "
    r"layer is $\mathrm{TF}(E) = \mathrm N(E + VEE^\top WE)$, where $\mathrm N$ divides every "
    r"column by its $\ell_2$ norm (the paper's 'LN'), and the block weights are "
    r"$W = \begin{pmatrix} 0 & wI \\ 0 & 0\end{pmatrix}$, "
    r"$V = \begin{pmatrix} 0 & 0 \\ vI & 0\end{pmatrix}$ with $\rho = wv$; $E_{k+1} = "
    r"\mathrm{TF}(E_k)$ shares $(V, W)$ across loops. ")

# --- tolerances ----------------------------------------------------------------------------------


def eigenvalue_error(S: torch.Tensor, n: int | None = None) -> torch.Tensor:
    r"""A bound on how far ``eigvalsh(S)``'s values are from those of the exact
    :math:`XX^\top` (per batch entry): ``eigh`` is backward stable, its values exact for
    :math:`S + E` with :math:`\lVert E\rVert_2 \le \gamma_{4d^2}\lVert S\rVert_2` (the
    :math:`O(d^2u)` constant assumed, as in :func:`eigvector_tolerance`), and
    :math:`\lVert S\rVert_2 \le \mathrm{tr}\,S` (PSD); forming :math:`S = XX^\top` from
    ``n`` columns adds :math:`\gamma_n\lVert|X||X|^\top\rVert_F \le \gamma_n\mathrm{tr}\,S`
    (Cauchy–Schwarz: :math:`(|X||X|^\top)_{ij} \le \sqrt{S_{ii}S_{jj}}`). By Weyl each
    eigenvalue moves by at most the sum; the trace's own rounding is covered by
    :math:`1 + \gamma_{d+1}`."""
    d = S.shape[-1]
    trace = torch.diagonal(S, dim1=-2, dim2=-1).sum(-1) * (1 + gamma(d + 1))
    return (gamma(4 * d * d) + (gamma(n) if n else 0.0)) * trace


def _log_growth(X: torch.Tensor, a: torch.Tensor, loops: int, rho: float | None):
    """Reference iterates, log of an upper bound on |M| and of lower bounds on the growth
    factors g_k = |M y_k| (the bound grows with |M| and falls with every g)."""
    X, a = X.double(), a.double()
    n, d = X.shape[-1], X.shape[-2]
    S = X @ X.mT
    ys = power_iteration(S, a, loops, shift=rho)
    eig = torch.linalg.eigvalsh(S)
    # the eigenvalues of the exact XX^T are within e of the computed ones (eigenvalue_error);
    # |M| = max |1 + rho lambda| moves by at most |rho| e, and its few operations round by
    # gamma_3
    e = eigenvalue_error(S, n)
    if rho is None:
        norm_M = eig[..., -1] + e
    else:
        norm_M = torch.maximum((1 + rho * eig[..., -1]).abs(),
                               (1 + rho * eig[..., 0]).abs()) + abs(rho) * e
    norm_M = norm_M * (1 + gamma(3))
    Sy = (S.unsqueeze(1) @ ys[:, :-1].unsqueeze(-1)).squeeze(-1)
    My = Sy if rho is None else ys[:, :-1] + rho * Sy
    # My as computed is within gamma_{n+d+2} || |y| + |rho||X|(|X|^T|y|) || of the exact
    # M y (forming S, S y, the residual) and its norm within gamma_{d+2} relative
    absX, absy = X.abs(), ys[:, :-1].abs()
    c = (absX.unsqueeze(1) @ (absX.mT.unsqueeze(1) @ absy.unsqueeze(-1))).squeeze(-1)
    c = (c if rho is None else absy + abs(rho) * c).norm(dim=-1)
    g = My.norm(dim=-1) * (1 - gamma(d + 2)) - gamma(n + d + 2) * c
    return ys, norm_M.log(), g.clamp_min(0).log()


def iteration_error_bound(X: torch.Tensor, a: torch.Tensor, loops: int,
                          rho: float | None) -> torch.Tensor:
    r"""First-order bound on the float64 error of the direction :math:`y_L`, per example.

    :math:`\sum_{k<L} A_{k+1}\,(\gamma_m c_k/g_k + \gamma_{2d+4})` with
    :math:`c_k = \lVert\,|y_k| + |\rho|\,|X|(|X|^\top|y_k|)\rVert`,
    :math:`g_k = \lVert My_k\rVert` and :math:`A_{k+1} = \lVert M\rVert^{L-k-1}/
    \prod_{i=k+1}^{L-1}g_i` (module docstring). ``rho=None`` is the unshifted method.
    """
    B, d, n = X.shape
    ys, log_norm_M, log_g = _log_growth(X, a, loops, rho)
    absX = X.double().abs()
    absy = ys[:, :-1].abs()
    c = (absX.unsqueeze(1) @ (absX.mT.unsqueeze(1) @ absy.unsqueeze(-1))).squeeze(-1)
    c = c if rho is None else absy + abs(rho) * c
    m = n + 2 * d + 8
    local = gamma(m) * c.norm(dim=-1) / log_g.exp() + gamma(2 * d + 4)
    bound = torch.zeros(B, dtype=torch.float64)
    for k in range(loops):
        log_amp = (loops - k - 1) * log_norm_M - log_g[:, k + 1:].sum(-1)
        bound = bound + log_amp.exp() * local[:, k]
    # the bound's own evaluation (positive terms: a sum of L, products, exp and log of at
    # most L + 6 roundings each, 1 ulp assumed for exp and log) rounds by gamma_{3L+8}
    return bound * (1 + gamma(3 * loops + 8))


def eigvector_tolerance(S: torch.Tensor, gap: float, n: int | None = None) -> float:
    r"""Error of the computed principal projector against that of the exact :math:`XX^\top`
    (``S`` computed from ``n`` columns): ``eigh`` is backward stable with a perturbation of
    norm :math:`O(d^2u)\lVert S\rVert` (we take :math:`\gamma_{4d^2}`), forming ``S`` adds
    its own (together :math:`e` = :func:`eigenvalue_error`), and by Davis–Kahan the projector
    moves by at most :math:`e/(\hat g - e)`, the computed eigengap :math:`\hat g` less the
    perturbation being a lower bound on the separation; ``inf`` when that is not positive."""
    e = float(eigenvalue_error(S, n))
    return e / (gap - e) * (1 + gamma(3)) if gap > e else math.inf


# --- strategies ----------------------------------------------------------------------------------

BATCH = 4  # one Hypothesis example carries a batch of this many (X, a) pairs


@st.composite
def power_cases(draw, *, min_log_rho: float = -2.0, max_log_rho: float = 6.0,
                max_d: int = 8, max_loops: int = 6):
    """``(X, a, loops, rho)``: X ``(4, d, n)`` with uniform unit columns, a uniform unit,
    d in [2, 8], n in [d, 3d], loops in [1, 6], rho log-uniform."""
    d = draw(st.integers(2, max_d))
    n = draw(st.integers(d, 3 * d))
    loops = draw(st.integers(1, max_loops))
    rho = 10.0 ** draw(st.floats(min_log_rho, max_log_rho))
    X, a = sample_data(BATCH, d, n, generator=torch.Generator().manual_seed(draw(seeds())))
    return X, a, loops, rho


def _eigen_case(d: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    X, a = sample_data(BATCH, d, n, generator=torch.Generator().manual_seed(seed))
    return X, a


# A query that is an eigenvector (every loop is then the identity on it), the largest growth
# the strategy allows (rho = 1e6, six loops), and a plain case pinned so that a broken
# construction fails on an explicit example (no search needed).
EIGEN_X, _ = _eigen_case(3, 5, 7)
EIGEN_A = torch.linalg.eigh(EIGEN_X @ EIGEN_X.mT)[1][..., -2]
EXTREME_X, EXTREME_A = _eigen_case(8, 24, 11)
PLAIN_X, PLAIN_A = _eigen_case(4, 8, 3)


def max_abs(t: torch.Tensor) -> float:
    return float(t.abs().max()) if t.numel() else 0.0


