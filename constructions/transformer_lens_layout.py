"""Public path of :mod:`constructions.interop.layout`, where the code lives (the interop wing)."""

from constructions.interop.layout import (
    TransformerLensLayout,
    construction_classes,
    residual_layout,
    scanned_features,
    transformer_lens_inputs,
    transformer_lens_layout,
    transformer_lens_outputs,
    transformer_lens_version,
)

__all__ = ["TransformerLensLayout", "construction_classes", "residual_layout", "scanned_features",
           "transformer_lens_inputs", "transformer_lens_layout", "transformer_lens_outputs",
           "transformer_lens_version"]
