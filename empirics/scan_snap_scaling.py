r"""A scaling study of the snap of :mod:`empirics.scan_snap` against the length of training.

Tian et al. (2023, arXiv:2305.16380) find that the attention's scanning decelerates and then
"snaps": a phase transition, set by the two learning rates, leaves an almost fixed token
combination. Its measurable form here is ``z_doubling_ratio_max``: the change of the
row-centred ``Z`` over the last doubling of training time :math:`[T/2, T]` over its largest
change over an earlier doubling. A combination frozen by a snap drives it toward 0 as
:math:`T` grows; steady :math:`\log t` scanning keeps it near 1. The published ``full`` run
(20000 steps) has it at about 0.84 for :math:`\eta_Z/\eta_Y = 0.05`. This study asks which way
it moves as training lengthens: the ``full`` config at :math:`\eta_Z/\eta_Y = 0.05` alone (the
claim's main ratio), one data stream a seed, for :math:`T \in \{2500, 5000, 10000, 20000\}`
steps (the largest is the ``full`` config's length; every other setting is its own). Each
length is its own run from the zero initialisation with the seed's stream, so the shorter
runs are prefixes of the longer ones (the same SGD steps on the same batches).

The experiment draws its streams from ``SeedSequence(seed).spawn(seeds)``; with ``seeds`` 1
study seed :math:`j` uses the first child of ``SeedSequence(j)`` alone, so the study's seeds are
independent.

Measured cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10 under
load from other jobs): 158 s of wall time for the three seeds of the ``cpu`` study (37500 steps
of one run a seed), so at most about 53 CPU-s a seed; the ``full`` config's 25 runs of 20000
steps took about 370 CPU-s a seed. Published with three seeds: r falls by about 0.020 per
doubling of the length, from about 0.90 to 0.84.
"""

from __future__ import annotations

import torch

from empirics.experiment import Experiment, Result
from empirics.scaling import run_study, study_config, summarize_study
from empirics.scan_snap import EXPERIMENT as SCAN_SNAP

NAME = "scan-snap-scaling"
QUANTITY = "ratio=0.05/z_doubling_ratio_max"
ONE_RUN = {"lr_z_ratios": [0.05], "main_ratio": 0.05, "seeds": 1}

CONFIGS = {
    "smoke": study_config("smoke", "steps", [200, 400, 800], [QUANTITY], overrides=ONE_RUN),
    "cpu": study_config("full", "steps", [2500, 5000, 10_000, 20_000], [QUANTITY],
                        overrides=ONE_RUN),
    "full": study_config("full", "steps", [20_000, 40_000, 80_000], [QUANTITY],
                         overrides=ONE_RUN),
}


def run_scaling(config: dict, device: torch.device, seed: int) -> Result:
    """One seed of the study: the scan-and-snap experiment at every length of ``config``."""
    return run_study(SCAN_SNAP, NAME, config, device, seed)


SCALING = Experiment(
    name=NAME,
    description="The snap of the Y/Z model's attention against the length of training (Tian "
                "et al. 2023)",
    configs=CONFIGS,
    run=run_scaling,
    summarize=summarize_study,
    claims=("training-dynamics.scan-snap-scaling",),
    code=("empirics.scaling", "empirics.scan_snap", *SCAN_SNAP.code),
)
