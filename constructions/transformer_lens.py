"""Public path of :mod:`constructions.interop.transformer_lens` and the layout it loads,
:mod:`constructions.interop.layout`, where the code lives (the interop wing)."""

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

# EXPORT_LINES, computed on first use as in the module it comes from (and, as there, not listed)
from constructions.interop.transformer_lens import __getattr__ as __getattr__
from constructions.interop.transformer_lens import export_line, export_lines, to_transformer_lens

__all__ = ["TransformerLensLayout", "construction_classes", "export_line", "export_lines",
           "residual_layout", "scanned_features", "to_transformer_lens", "transformer_lens_inputs",
           "transformer_lens_layout", "transformer_lens_outputs", "transformer_lens_version"]
