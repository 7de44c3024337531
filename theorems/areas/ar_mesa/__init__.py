r"""Mesa-optimization in autoregressive linear attention (Zheng et al. 2024, arXiv:2405.16845).

Only the abstract was readable. The model, data and initialisation come from the authors'
code (ML-GSAI/MesaOpt-AR-Transformer); every constant below was derived here (see
:mod:`constructions.ar_mesa`) and is checked against the construction. Each check is built
by a factory that takes what it tests, so ``tests/test_ar_mesa.py`` can rebuild it around a
broken construction and assert that it then fails.

Monte Carlo tolerances: each estimate is compared with its closed form within
``Z_LIMIT`` standard errors (sample standard deviation over independent sequences,
divided by the square root of their number). The conditional means given :math:`x_1` are
known exactly, so they serve as control variates: what remains is the phase average that
the derivation claims, with a much smaller error.

Topic modules, in the order of the claims: :mod:`.one_step` (the forward pass is one GD step),
:mod:`.population_error` (the expected error as a quadratic in :math:`ab`),
:mod:`.population_optimum` (the optimal :math:`ab` for one-hot and Gaussian starts),
:mod:`.recovery` (when the limiting mesa-optimizer predicts exactly) and :mod:`.training`
(gradient descent from the authors' initialisation). :mod:`._shared` holds the notation, the
sources and the Monte Carlo helpers several of them use.
"""
