r"""Helpers shared by this package's modules.
"""

from __future__ import annotations

from typing import Literal

# IR.7's autoregressive layer lives in its own module; it is part of this area's API.
from constructions.ar_mesa import ar_mesa_layer as ar_mesa_layer

ResponseKind = Literal["linear", "sine"]
RESPONSES = ("linear", "sine")
MultiStepMode = Literal["loop", "cot"]
MULTI_STEP_MODES = ("loop", "cot")


