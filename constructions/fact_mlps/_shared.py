r"""Helpers shared by this package's modules.
"""

from __future__ import annotations

import math

import torch

# The projected-value decoding margin below which a code dimension is rejected, relative to
# max_j |P v_j|^2. The encoder's exact solve carries a relative error of order gamma_n ~ 1e-12
# (n ~ 1e4 operations at u = 1.1e-16); sqrt(u) = 1.05e-8 keeps the decoding margin four orders
# of magnitude above it, so a correct solve can never flip an answer.
DECODE_FLOOR = math.sqrt(torch.finfo(torch.float64).eps / 2)


