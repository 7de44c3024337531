r"""Scaling study of ``power-method-layerwise`` (Wu, Zhang, Cao 2026, arXiv:2606.00605) in
training steps: ``power-method-layerwise-scaling``.

:mod:`empirics.power_method`'s layer-wise experiment trains one layer, with and without
normalisation, on the first power iterate. At its ``cpu`` size (d = 8, n = 16, 4000 SGD steps)
the paper's picture holds only in part: with normalisation the loss falls and the learned
contraction rate approaches :math:`\lambda_2/\lambda_1` (0.798 against 0.776 at the end), but
without it the run sits at the closed-form plateau at half-training and then leaves the block
manifold and ends below the plateau. The study runs that experiment at
:math:`s \in \{500, 1000, 2000, 4000\}` steps (the ``cpu`` config is the largest size, the
others halve it; everything else is the ``cpu`` config), every size with the seed's data and
initialisation, and reads at each size

* ``ln/rate_gap``: the mean over held-out examples of the learned rate with normalisation minus
  :math:`\lambda_2/\lambda_1` (the quantity the trend claim
  ``power-method.layerwise-scaling`` is about: the paper's rate "decreases towards"
  :math:`\lambda_2/\lambda_1`, so the gap falls with training);
* ``ln/heldout_loss``: the held-out loss with normalisation;
* ``no_ln/heldout_loss`` and ``no_ln/off_ratio``: the held-out loss without normalisation and
  how far its weights are from the block manifold (``block_coordinates``' off ratio), which
  show at what length of training the run without normalisation leaves the plateau.

No level is set for the crossing: the paper's level for the rate gap is its limit 0, which the
rate approaches and does not cross, so a log-linear fit's crossing of it would mean nothing.
The slopes, intervals and figures are :func:`empirics.scaling.slope_fit` and
:func:`empirics.scaling.summarize_study`.

Sizes of the smoke study: 75, 150 and 300 steps of the smoke config; of the full study: 2500 to
20000 steps of the full config (for a GPU).

Measured cpu-study cost (one thread of this project's 2-core CPU machine, 2026-12-04, under
load from other jobs; CPU seconds do not count waiting): 255 CPU-s for three seeds (about 85 a
seed; the 4000-step size is the cpu config itself, about 45). Published with three seeds: the
rate gap with normalisation is 0.054, 0.040, 0.030, 0.022 (seed 0; the other seeds agree to
3e-4), slope -0.0104 per doubling with 95% t interval [-0.0105, -0.0103]; the loss with it
0.048 to 0.011. Without normalisation the off ratio is 6.5-7.3e-7, 6.7-8.5e-6, 0.80-1.00e-3
and 0.90-0.92, and the loss equals the closed-form plateau to four digits up to 2000 steps and
falls below it (0.237-0.248) only at 4000.

The study lives in its own module so that defining it leaves the fingerprint, and so the
published results, of ``power-method-gd`` and ``power-method-layerwise`` unchanged; its own
fingerprint covers :mod:`empirics.power_method` through ``code``.
"""

from __future__ import annotations

import torch

from empirics.experiment import Experiment, Result
from empirics.power_method import LAYERWISE_EXPERIMENT
from empirics.scaling import run_study, study_config, summarize_study

NAME = "power-method-layerwise-scaling"
QUANTITIES = ("ln/rate_gap", "ln/heldout_loss", "no_ln/heldout_loss", "no_ln/off_ratio")

CONFIGS = {
    "smoke": study_config("smoke", "steps", [75, 150, 300], QUANTITIES),
    "cpu": study_config("cpu", "steps", [500, 1000, 2000, 4000], QUANTITIES),
    "full": study_config("full", "steps", [2500, 5000, 10_000, 20_000], QUANTITIES),
}


def run_scaling(config: dict, device: torch.device, seed: int) -> Result:
    """One seed of the study: ``power-method-layerwise`` at every size of ``config``."""
    return run_study(LAYERWISE_EXPERIMENT, NAME, config, device, seed)


SCALING_EXPERIMENT = Experiment(
    name=NAME,
    description=("power-method-layerwise at 4 lengths of training: does the learned rate "
                 "with normalisation keep approaching lambda_2/lambda_1, and when does the "
                 "run without it leave the block manifold"),
    configs=CONFIGS,
    run=run_scaling,
    summarize=summarize_study,
    claims=("power-method.layerwise-scaling",),
    code=("empirics.scaling", "empirics.power_method", *LAYERWISE_EXPERIMENT.code),
)
