r"""In-context linear regression by one layer of linear self-attention (IR.1–IR.6).
**Only the papers' openings (title, abstract, start of the introduction) were read.** Every
constant on this page was derived in this project and confirmed numerically (tag D), or read
from the authors' official code (Ahn et al.'s ``linear_transformer.py``, von Oswald et al.'s
``src/transformer.py``); none is quoted from a theorem, and each claim's sources say which.
Papers: Mahankali, Hashimoto, Ma (2023); Ahn, Cheng, Daneshmand, Sra (2023); Zhang, Frei,
Bartlett (2024); von Oswald et al. (2023); Huang, Wang, Lee (2025).

Conventions are those of :mod:`constructions.icl_regression`: tokens are columns, the query is
masked as a key, and :math:`\hat y = -f(Z)_{d+1,n+1}`.

How the Monte Carlo checks derive their tolerances. Every comparison with a closed form is a
test at family-wise false-alarm rate :data:`ALPHA`: with ``m`` compared numbers, the
two-sided Bonferroni z-score :func:`z_score` times the Monte Carlo standard error. Least-squares
coefficients use the sandwich (heteroscedasticity-robust) standard errors; losses use the
per-prompt standard deviation over :math:`\sqrt B`. A *trained* model is held to the same
resolution as the convex optimum fitted on the same prompts: its excess risk over the closed
form, in the lifted metric, must not exceed what the least-squares solution's own sampling
error is expected to produce (:meth:`~empirics.icl_regression.LiftedStatistics.resolution`).
"""
