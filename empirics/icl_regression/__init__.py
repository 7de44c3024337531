r"""Gradient descent against the in-context regression constructions (IR.1–IR.6).

Three experiments, each with a CPU ``smoke`` config (what the checks run) and a GPU ``full``
config (larger ``d`` and ``n``):

* ``icl-regression-lsa``: a one-layer LSA from a small random start, trained by Adam on a
  :class:`RegressionCase` (isotropic, preconditioned, or sine responses) and compared with
  the closed form through its gauge-invariant effective predictor; the figure plots
  :math:`\lVert\Gamma_t - \Gamma^*\rVert_F/\lVert\Gamma^*\rVert_F` against the step. The smoke
  config trains full-batch on a fixed set of prompts, the very prompts of the convex
  (lifted least-squares) fit, so trained and convex optimum share their Monte Carlo error;
  the full config trains online on fresh prompts and takes the Polyak–Ruppert average of the
  last part of training as its estimate.
* ``icl-regression-zfb``: full-batch gradient descent with a small step (a forward-Euler
  gradient flow) from Zhang–Frei–Bartlett's balanced initialisation, on antithetic prompts
  (each task with its mirror, so the empirical risk keeps the population's symmetry and the
  odd blocks stay zero). Each step records what the conservation law of
  :math:`Q = \lVert W_{PV}\rVert_F^2 - \lVert W_{KQ}\rVert_F^2` needs.
* ``icl-regression-cot``: one layer in the :math:`(x, y, w, 1)` layout, trained online with
  a teacher-forced chain-of-thought loss to map :math:`w_k \mapsto w_{k+1}`; compared
  through its effective update map and the gauge-invariant products
  :math:`W_{PV}[w,x]W_{KQ}[x,w]` and :math:`W_{PV}[w,x]W_{KQ}[y,1]`.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``icl-regression-cot``: about 125 CPU-min a seed, extrapolated from two runs of the full
  config cut to 40 and 80 of its 20000 steps (17 and 32 CPU-s); not run to the end on a CPU, so
  its full config is left to a GPU.
* ``icl-regression-lsa``: about 59 CPU-min a seed, extrapolated from two runs of the full config
  cut to 40 and 80 of its 20000 steps (20 and 27 CPU-s); not run to the end on a CPU, so its
  full config is left to a GPU.
* ``icl-regression-zfb``: its full config cut to 40 of its 20000 steps did not finish within 60
  CPU-s, so a seed takes more than 6 CPU-hours (counting 15 CPU-s as start-up); left to a GPU.

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10
under load from other jobs; CPU seconds do not count waiting):

* ``icl-regression-zfb``: 44 CPU-s for three seeds (about 15 a seed); published with three
  seeds at the ``cpu`` size (n=20, d=5, 400000 prompts, 8000 steps): Q goes from 0 to -0.0037,
  -0.0038, -0.0037 while S = 3.77, 3.78, 3.76; u_y = 1.373, 1.374, 1.371; off-block entries 0.
* ``icl-regression-cot``: 242 CPU-s for three seeds (about 81 a seed); published with three
  seeds at the ``cpu`` size (d=5, n=20, k=5, 12000 steps): coefficient distance 3.4e-06,
  1.3e-04, 1.8e-07 (the trained update against the GD step).
* ``icl-regression-lsa``: 227 CPU-s for three seeds (about 76 a seed); published with three
  seeds at the ``cpu`` size (the preconditioned case at n=20, d=5, 2048 fresh prompts a step,
  8000 steps): relative distance of the averaged trained preconditioner to the closed form
  0.0018, 0.0026, 0.0018.

Modules: :mod:`.cases` (the regression cases and the LSA's random start),
:mod:`.sufficient_statistics` (the Monte Carlo statistics of the lifted least-squares problem,
which the smoke configs train on and the checks fit), and one module per experiment,
:mod:`.lsa`, :mod:`.zfb` and :mod:`.cot`. Importing the package registers the three.
"""

from __future__ import annotations

from empirics.icl_regression.cases import (
    CASE_NAMES,
    RegressionCase,
    lifted_snapshot,
    random_lsa,
    regression_case,
)
from empirics.icl_regression.cot import COT_EXPERIMENT, cot_coefficients, cot_features, run_cot
from empirics.icl_regression.lsa import (
    LSA_EXPERIMENT,
    distance_figure,
    gamma_from_lifted,
    run_lsa,
    trained_coefficients,
)
from empirics.icl_regression.sufficient_statistics import (
    LiftedStatistics,
    lifted_statistics,
    mirror_parity,
)
from empirics.icl_regression.zfb import ZFB_EXPERIMENT, conservation_figure, run_zfb

__all__ = [
    "CASE_NAMES",
    "COT_EXPERIMENT",
    "LSA_EXPERIMENT",
    "ZFB_EXPERIMENT",
    "LiftedStatistics",
    "RegressionCase",
    "conservation_figure",
    "cot_coefficients",
    "cot_features",
    "distance_figure",
    "gamma_from_lifted",
    "lifted_snapshot",
    "lifted_statistics",
    "mirror_parity",
    "random_lsa",
    "regression_case",
    "run_cot",
    "run_lsa",
    "run_zfb",
    "trained_coefficients",
]
