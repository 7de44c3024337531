"""Suite-wide test setup for this repository's own pytest runs.

The evidence plugin is registered by the package's pytest11 entry point (:mod:`theorems.plugin`)
and stays inert outside sessions that collect this project's checks; the Hypothesis profile is
chosen here, so that it applies to this project's runs only.
"""

import os

import torch

from theorems import profiles

# Small-op CPU training slows 4-30x with 2 threads when another process is busy (see
# ../shared/MEASURED.md); one thread per process never slowed, and xdist runs one per core.
# THEOREMS_TORCH_THREADS changes it, so a test can show that the evidence does not depend on it.
torch.set_num_threads(int(os.environ.get("THEOREMS_TORCH_THREADS", "1")))
profiles.load_default()
