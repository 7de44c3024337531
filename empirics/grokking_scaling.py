r"""A scaling study of the grokking delay at :math:`\alpha = 1` (:mod:`empirics.grokking_lazy_rich`)
against the task's dimension.

Kumar et al. (2024, arXiv:2310.06110) find that grokking needs a data size large enough to
generalise eventually but not so large that train and test losses track each other. The
published ``cpu`` run (dimension :math:`D = 50`, :math:`P = 275` training points, width
:math:`N = 250`) shows no delay at :math:`\alpha = 1`: the test loss halves before the training
loss reaches 1% of its initial value. The paper's own size is :math:`D = 100, P = 550, N = 500`
(the ``full`` config, beyond a CPU's budget). This study asks which way the delay moves as the
task grows toward it: the same network at :math:`D \in \{6, 12, 25, 50\}` with
:math:`P \approx 5.5D` and :math:`N = 5D` (the ratios of the paper's Figure-1 setup, so the
largest size is the published ``cpu`` config's), at :math:`\alpha = 1` alone.

Quantity: ``alpha=1/delay``, the first recorded step (every 250) at which the exact test loss
is below half its initial value minus the first at which the training loss is below 1% of its
initial value (the experiment's own metric; positive is a grokking delay). Two settings differ
from the published ``cpu`` config, both so that the quantity is defined and the seeds are
independent:

* ``steps`` 40000 (``cpu``: 10000): the training loss of the :math:`D = 50` runs does not reach
  1% of its initial value within 10000 steps at seeds 0 and 2, which makes the delay
  :math:`-\infty`; a longer run only extends the same trajectory (full-batch GD is
  deterministic), so the delay is unchanged wherever both thresholds were already met;
* ``seeds`` 1 (``cpu``: 2): the experiment trains tasks ``seed`` and ``seed + 1`` together, so
  study seeds 0, 1, 2 would share tasks; with one run a seed, study seed :math:`j` uses task
  :math:`j` and initialisation :math:`10^4 + j` alone.

Measured cost (one thread of this project's 2-core CPU machine, 2026-12-04, under load; CPU
seconds): a pilot of the ``cpu`` study took 4.6, 4.7, 6.8 and 16.0 CPU-s a seed at the four
sizes (about 32 a seed).
"""

from __future__ import annotations

import torch

from empirics.experiment import Experiment, Result
from empirics.grokking_lazy_rich import EXPERIMENT as GROKKING
from empirics.scaling import run_study, study_config, summarize_study

NAME = "grokking-lazy-rich-scaling"
QUANTITY = "alpha=1/delay"
# P = 5.5 D and N = 5 D, as in the paper's D = 100, P = 550, N = 500; the largest is the cpu
# config's (50, 275, 250), the others halve D (rounded)
DIMS = [6, 12, 25, 50]
KNOBS = {"dim": DIMS, "train_size": [33, 66, 138, 275], "width": [30, 60, 125, 250]}
SMOKE_DIMS = [4, 6, 8]
SMOKE_KNOBS = {"dim": SMOKE_DIMS, "train_size": [22, 33, 44], "width": [20, 30, 40]}
ONE_RUN = {"alphas": [1.0], "seeds": 1}

CONFIGS = {
    "smoke": study_config("smoke", "dim", SMOKE_DIMS, [QUANTITY], knobs=SMOKE_KNOBS,
                          overrides={**ONE_RUN, "steps": 10_000}),
    "cpu": study_config("cpu", "dim", DIMS, [QUANTITY], knobs=KNOBS,
                        overrides={**ONE_RUN, "steps": 40_000}),
    "full": study_config("full", "dim", [25, 50, 100], [QUANTITY],
                         knobs={"dim": [25, 50, 100], "train_size": [138, 275, 550],
                                "width": [125, 250, 500]}, overrides=ONE_RUN),
}


def run_scaling(config: dict, device: torch.device, seed: int) -> Result:
    """One seed of the study: the grokking experiment at every dimension of ``config``."""
    return run_study(GROKKING, NAME, config, device, seed)


SCALING = Experiment(
    name=NAME,
    description="The grokking delay at alpha = 1 against the task's dimension (Kumar et al. "
                "2024)",
    configs=CONFIGS,
    run=run_scaling,
    summarize=summarize_study,
    claims=("training-dynamics.grokking-delay-scaling",),
    code=("empirics.scaling", "empirics.grokking_lazy_rich", *GROKKING.code),
)
