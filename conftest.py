"""Suite-wide test setup. The evidence plugin itself is registered by the package's pytest11
entry point (theorems.evidence)."""

import torch

# Small-op CPU training slows 4-30x with 2 threads when another process is busy (see
# ../shared/MEASURED.md); one thread per process never slowed, and xdist runs one per core.
torch.set_num_threads(1)
