r"""Helpers shared by this package's modules.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

NO_MATCH = -1  # what induction_targets returns for \bot
Rounding = Callable[[torch.Tensor], torch.Tensor]
