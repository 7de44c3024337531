r"""Induction heads: one layer needs :math:`hmp = \Omega(n)`, two layers solve it exactly.

Sources. Sanford, Hsu, Telgarsky (2024), arXiv:2408.14332: the task definition and the
citation of Bietti et al.'s two-layer construction were read in the paper's Section 1 [V]; the
bound :math:`hmp = \Omega(n)` and the two-layer size :math:`O(1)\cdot O(1)\cdot O(\log n)` for
:math:`|\Sigma| \le n` come from a summary of the paper [S]; the Alice/Bob details of the
INDEX reduction are this project's reconstruction [R]. Bietti et al. (2023), arXiv:2306.00802:
the previous-token + induction-head mechanism and the observation that one-layer models fail
to learn in-context bigrams while two-layer ones succeed were read in its introduction and
Figure 1 [V]. The explicit weights, temperatures, margin conditions and precision bound are
ours [D] (see :mod:`constructions.induction_heads`).

Each claim is followed by its checks; each check is built by a factory that takes the
construction (or formula) under test, so ``tests/test_induction_heads.py`` can rebuild it
around a broken one and assert that it then fails.
"""
