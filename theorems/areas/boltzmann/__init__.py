r"""The Boltzmann operator and one-layer rank-1 attention (Kajitsuka & Sato, ICLR 2024,
arXiv:2307.14023). Only the paper's abstract could be read here, so the statements of Lemma 1,
Theorems 1 and 2, their constants, Eq. (10) and the memorization parameter count are tagged R
or S (from the claim catalogue, re-derived here), and each check tests the statement as written
on this page. Gaps far below float64 resolution (Lemma 1's δ′, Theorem 2's δ, down to
10^-14967 with the paper's constants) are certified in ball arithmetic (python-flint ``arb``),
from the constructions' float64 weights read as exact reals.

Precision. The arb working precision is set from the largest score, so that the balls' radii
lie far below the gaps they must resolve; every comparison used is true only when certain.
Float tolerances elsewhere are first-order rounding bounds (``theorems.numerics.gamma``) on the
same computation evaluated on absolute values, as each helper's docstring derives.
"""
