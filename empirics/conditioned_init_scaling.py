r"""A scaling study of the speed-up of :mod:`empirics.conditioned_init` against the width.

The conditioned initialisation (OpenReview cKNOCYPo2W) makes every head's :math:`W_Q, W_K`
semi-orthogonal (condition number 1) and :math:`W_V` a slice of the identity; a Gaussian
:math:`d\times d` matrix's condition number grows with :math:`d`, so if better conditioning is
what speeds training up, the speed-up should grow with the width. The published ``cpu`` run
(:math:`d = 32`, eight training seeds a seed) shows none: 185-189 steps to 95% held-out
accuracy for the Gaussian arm against 184-186 for the conditioned one. This study runs the
``cpu`` config at :math:`d \in \{16, 24, 32\}` (the largest is the ``cpu`` config's; at
:math:`d = 8` a run did not reach the target within its 1200 steps, which leaves the saving
undefined) with one training seed a study seed.

Quantity: ``steps_saved_mean``, the Gaussian arm's steps to the target minus the conditioned
arm's (positive: conditioned is faster), both arms from the same embeddings, :math:`W_O` and
data stream. With ``seeds`` 1 the experiment trains training seed ``seed`` alone (its streams
are children of ``SeedSequence(seed)``), so the study's seeds are independent; the ``cpu``
config's eight would overlap between consecutive study seeds.

Measured cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10 under
load from other jobs): 56.7 s of wall time for the eight seeds of the ``cpu`` study, so at most
about 7 CPU-s a seed (a pilot at :math:`d = 16` took about 3 CPU-s a training seed, both arms).
Published with eight seeds: the saving's slope on :math:`\log_2 d` is undecided (mean -36
steps per doubling, interval holding 0).
"""

from __future__ import annotations

import torch

from empirics.conditioned_init import EXPERIMENT as CONDITIONED
from empirics.experiment import Experiment, Result
from empirics.scaling import run_study, study_config, summarize_study

NAME = "conditioned-init-scaling"
QUANTITY = "steps_saved_mean"
WIDTHS = [16, 24, 32]

CONFIGS = {
    "smoke": study_config("smoke", "d_model", WIDTHS, [QUANTITY], overrides={"seeds": 1}),
    "cpu": study_config("cpu", "d_model", WIDTHS, [QUANTITY], overrides={"seeds": 1}),
    "full": study_config("full", "d_model", [32, 64, 128], [QUANTITY], overrides={"seeds": 1}),
}


def run_scaling(config: dict, device: torch.device, seed: int) -> Result:
    """One seed of the study: the conditioned-init experiment at every width of ``config``."""
    return run_study(CONDITIONED, NAME, config, device, seed)


SCALING = Experiment(
    name=NAME,
    description="The speed-up of conditioned attention initialisation against the width "
                "(OpenReview cKNOCYPo2W)",
    configs=CONFIGS,
    run=run_scaling,
    summarize=summarize_study,
    claims=("training-dynamics.conditioned-init-scaling",),
    code=("empirics.scaling", "empirics.conditioned_init", *CONDITIONED.code),
)
