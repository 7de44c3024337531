r"""Helpers shared by the topic modules of this area."""

from __future__ import annotations

from statistics import NormalDist

import torch
from hypothesis import strategies as st

from theorems.claims import Source
from theorems.strategies import seeds

MAHANKALI = {"arxiv": "2307.03576", "ref": "Mahankali, Hashimoto, Ma (2023)"}
AHN = {"arxiv": "2306.00297", "ref": "Ahn, Cheng, Daneshmand, Sra (2023), NeurIPS"}
ZFB = {"arxiv": "2306.09927", "ref": "Zhang, Frei, Bartlett (2024), JMLR 25(49)"}
VON_OSWALD = {"arxiv": "2212.07677", "ref": "von Oswald et al. (2023), ICML"}
HWL = {"arxiv": "2502.21212", "ref": "Huang, Wang, Lee (2025), ICLR"}
AHN_CODE = Source(where="official code chengxiang/LinearTransformer, linear_transformer.py "
                        "(query masked as a key, loss (output[N, d] + y)^2)", tag="V", **AHN)
DERIVED = "derived in this project and confirmed by Monte Carlo; the paper's constant is unread"

ALPHA = 1e-3   # family-wise false-alarm rate of every Monte Carlo comparison in this module
N, D_FEATURES = 10, 3                     # the prompts of IR.1, IR.2, IR.3, IR.5
FIT_PROMPTS = 200_000                     # Monte Carlo prompts per lifted least-squares fit
SEED = 0


def z_score(m: int, alpha: float = ALPHA) -> float:
    """Two-sided Bonferroni z for ``m`` simultaneous comparisons at family-wise ``alpha``."""
    return NormalDist().inv_cdf(1 - alpha / (2 * m))


def half_unit(printed: float) -> float:
    """Half a unit in the last printed digit: the rounding of a number shown as ``printed``."""
    return 0.5 * 10 ** -len(repr(printed).split(".")[1])


# --- shared strategies ----------------------------------------------------------------------

def gaussian(generator: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return scale * torch.randn(*shape, generator=generator, dtype=torch.float64)


@st.composite
def regression_batches(draw, max_d: int = 4, max_n: int = 12, batch: int = 6):
    """A seeded batch of arbitrary (not distribution-bound) prompts, ``(X, y, x_q)``."""
    d, n = draw(st.integers(1, max_d)), draw(st.integers(1, max_n))
    generator = torch.Generator().manual_seed(draw(seeds()))
    scale = draw(st.sampled_from([1e-3, 1.0, 30.0]))
    return (gaussian(generator, batch, n, d, scale=scale), gaussian(generator, batch, n),
            gaussian(generator, batch, d, scale=scale), generator)


