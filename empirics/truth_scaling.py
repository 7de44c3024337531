r"""A scaling study of the memorisation plateau of :mod:`empirics.truth_encoding` against the
size of the world of facts.

Ravfogel et al. (2025, arXiv:2510.15804) describe two phases: networks first memorise the
individual facts, then over a longer horizon learn to separate true from false. In the toy of
:mod:`empirics.truth_encoding` the first phase is a plateau of the :math:`a'`-token loss at the
exact level :math:`L_{mem}` before it falls to its Bayes level; the published ``cpu`` run (300
subjects, 150 attributes, 10000 steps) spends 0 to 2% of its evaluations within 0.05 nats of
:math:`L_{mem}`: no plateau. The ``full`` config (1000 subjects, 500 attributes, beyond a CPU's
budget) is the paper-scale world. This study asks which way the plateau moves as the world
grows toward it: the ``cpu`` config at 75, 150 and 300 subjects with half as many attributes
(38, 75, 150), every other setting (model, rate, batch, 10000 steps, evaluation every 200) the
``cpu`` config's, so the largest size is that config.

Quantity: ``mem_plateau_fraction``, the fraction of the evaluations (every 200 steps, the first
at step 0) at which the held-out :math:`a'`-token loss is within 0.05 nats of :math:`L_{mem}`
(the experiment's own metric). The experiment's ``cpu`` config trains one run a seed (the
process, the data and the initialisation from that seed), so the study's seeds are
independent.

Measured cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10 under
load from other jobs; CPU seconds do not count waiting): the ``cpu`` study took about 270 CPU-s
a seed (seed 0: 274 CPU-s by the process's clock; 1288 s of wall time for the three seeds); the
``cpu`` config itself about 103 a seed. Published with three seeds: the fraction is 0 or 1/51
at every size (slopes 0.0098, 0.0098, 0 per doubling; interval holding 0).
"""

from __future__ import annotations

import torch

from empirics.experiment import Experiment, Result
from empirics.scaling import run_study, study_config, summarize_study
from empirics.truth_encoding import EXPERIMENT as TRUTH

NAME = "truth-encoding-scaling"
QUANTITY = "mem_plateau_fraction"
SUBJECTS = [75, 150, 300]
KNOBS = {"n_subjects": SUBJECTS, "n_attributes": [38, 75, 150]}
SMOKE_SUBJECTS = [25, 50, 100]

CONFIGS = {
    "smoke": study_config("smoke", "n_subjects", SMOKE_SUBJECTS, [QUANTITY],
                          knobs={"n_subjects": SMOKE_SUBJECTS, "n_attributes": [13, 25, 50]},
                          overrides={"steps": 100, "eval_every": 20, "eval_size": 512,
                                     "probe_size": 256}),
    "cpu": study_config("cpu", "n_subjects", SUBJECTS, [QUANTITY], knobs=KNOBS),
    "full": study_config("full", "n_subjects", [250, 500, 1000], [QUANTITY],
                         knobs={"n_subjects": [250, 500, 1000],
                                "n_attributes": [125, 250, 500]}),
}


def run_scaling(config: dict, device: torch.device, seed: int) -> Result:
    """One seed of the study: the truth-encoding experiment at every world size of
    ``config``."""
    return run_study(TRUTH, NAME, config, device, seed)


SCALING = Experiment(
    name=NAME,
    description="The memorisation plateau of the truth-encoding toy against the world's size "
                "(Ravfogel et al. 2025)",
    configs=CONFIGS,
    run=run_scaling,
    summarize=summarize_study,
    claims=("training-dynamics.truth-plateau-scaling",),
    code=("empirics.scaling", "empirics.truth_encoding", *TRUTH.code),
)
