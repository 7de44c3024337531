"""Hypothesis strategies shared across areas: small, composable, and torch-valued.

Every strategy returns float64 torch tensors (convert at the call site for other dtypes).
Area-specific strategies live beside their claims in the area module.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


def tensors(shape: tuple[int, ...], bound: float = 10.0) -> st.SearchStrategy[torch.Tensor]:
    """float64 tensors of a fixed shape with entries in ``[-bound, bound]``."""
    elements = st.floats(-bound, bound, allow_nan=False, allow_infinity=False,
                         allow_subnormal=False, width=64)
    # A copy in torch's own (64-byte aligned) memory: vectorised kernels pick their code path
    # by alignment, and numpy's buffers would make last bits vary from run to run.
    return hnp.arrays(np.float64, shape, elements=elements).map(
        lambda a: torch.from_numpy(a).clone())


def seeds() -> st.SearchStrategy[int]:
    """Seeds for ``torch.Generator``: for checks that evaluate a whole random batch per example."""
    return st.integers(0, 2**31 - 1)


@st.composite
def gaussian_matrices(draw, rows: int, cols: int, scale: float = 1.0) -> torch.Tensor:
    """A seeded Gaussian ``(rows, cols)`` matrix: cheap to draw, and shrinks by its seed."""
    generator = torch.Generator().manual_seed(draw(seeds()))
    return scale * torch.randn(rows, cols, generator=generator, dtype=torch.float64)


@st.composite
def orthogonal_matrices(draw, d: int) -> torch.Tensor:
    """A random orthogonal ``(d, d)`` matrix (QR of a Gaussian, signs fixed)."""
    q, r = torch.linalg.qr(draw(gaussian_matrices(d, d)))
    return q * torch.sign(torch.diagonal(r))


@st.composite
def spd_matrices(draw, d: int, max_condition: float = 1e3) -> torch.Tensor:
    """A symmetric positive-definite matrix with condition number at most ``max_condition``.

    Eigenvalues are log-uniform in ``[1, max_condition]``, and the extremes are drawn
    explicitly so that the worst conditioning is actually exercised.
    """
    log_max = float(np.log(max_condition))
    logs = draw(st.lists(st.floats(0.0, log_max), min_size=d, max_size=d))
    if d >= 2 and draw(st.booleans()):
        logs[0], logs[-1] = 0.0, log_max
    eigenvalues = torch.tensor(np.exp(logs), dtype=torch.float64)
    Q = draw(orthogonal_matrices(d))
    spd = (Q * eigenvalues) @ Q.T
    return (spd + spd.T) / 2  # exactly symmetric: the product alone is only symmetric to ~1e-16

