"""Former path of :mod:`constructions.layernorm`, where the code lives (one name for the topic
in every layer); kept so that code importing it keeps working."""

from constructions.layernorm import (
    MajorityHead,
    layer_norm,
    majority_head,
    projection_form,
    selectability_margin,
)

__all__ = ["MajorityHead", "layer_norm", "majority_head", "projection_form",
           "selectability_margin"]
