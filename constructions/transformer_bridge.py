"""Public path of :mod:`constructions.interop.bridge`, where the code lives (the interop wing)."""

from constructions.interop.bridge import (
    DROPPABLE_ZEROS,
    bridge_state_dict,
    to_transformer_bridge,
    transformer_bridge_inputs,
)

__all__ = ["DROPPABLE_ZEROS", "bridge_state_dict", "to_transformer_bridge",
           "transformer_bridge_inputs"]
