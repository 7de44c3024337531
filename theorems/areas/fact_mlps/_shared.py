r"""Helpers shared by the topic modules of this area."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from theorems.strategies import gaussian_matrices

DUGAN = {"arxiv": "2512.00207", "ref": "Dugan et al. (2025), working draft v1"}
NICHANI = {"arxiv": "2412.06538", "ref": "Nichani, Lee, Bietti (2024), ICLR 2025"}
CABANNES = {"arxiv": "2310.02984", "ref": "Cabannes, Dohmatob, Bietti (2024), ICLR 2024"}
ROME = {"arxiv": "2202.05262", "ref": "Meng et al. (2022), NeurIPS; code kmeng01/rome"}


def t_quantile(dof: int) -> float:
    """Two-sided 95% Student-t quantile (SciPy, imported lazily)."""
    from scipy import stats

    return float(stats.t.ppf(0.975, dof))


# --- strategies ----------------------------------------------------------------------------------

def unit_rows(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True)


@st.composite
def fact_sets(draw, min_d: int = 2, max_d: int = 8, max_ratio: int = 4):
    """Generic fact sets: Gaussian keys at a random scale, unit Gaussian values, random facts.

    ``F <= max_ratio * d`` keeps the encoder system well enough conditioned for float64 to
    certify its rank (its condition number grows with F/d; see the exact-storage claim)."""
    d = draw(st.integers(min_d, max_d))
    F = draw(st.integers(1, max_ratio * d))
    num_values = draw(st.integers(2, 8))
    d_v = draw(st.integers(2, 8))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    keys = scale * draw(gaussian_matrices(F, d))
    values = unit_rows(draw(gaussian_matrices(num_values, d_v)))
    facts = torch.tensor(draw(st.lists(st.integers(0, num_values - 1), min_size=F, max_size=F)))
    return keys, values, facts, draw(st.integers(0, 2**16))


def seeded_fact_set(F: int, d: int, num_values: int, d_v: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randn(F, d, generator=generator, dtype=torch.float64)
    values = unit_rows(torch.randn(num_values, d_v, generator=generator, dtype=torch.float64))
    facts = torch.randint(0, num_values, (F,), generator=generator)
    return keys, values, facts


# --- ROME ----------------------------------------------------------------------------------------

def update_parts(W, C, k_star, v_star):
    r"""ROME's :math:`u = C^{-1}k_*` (by Cholesky, of the symmetrised :math:`C`) and
    :math:`\Lambda = (v_* - Wk_*)/(u^\top k_*)`, whose product :math:`\Lambda u^\top` is the
    update: what the checks of :mod:`.rome` and :mod:`.rome_gd` compare an edit with."""
    C = (C + C.T) / 2
    u = torch.cholesky_solve(k_star[:, None], torch.linalg.cholesky(C))[:, 0]
    return u, (v_star - W @ k_star) / float(u @ k_star)
