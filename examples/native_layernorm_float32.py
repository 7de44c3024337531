"""Upstream gap: the native model's own ``NativeLayerNormPre`` normalises in float32, whatever
the model's dtype (TransformerLens 3.9 and 4.3, ``model_bridge/sources/native/model.py``:
``x_fp32 = x.to(torch.float32)``), so the native model run on its own (``bridge.original_model``)
computes a float64 LayerNorm only to float32 accuracy.

The bridge's forward is not affected: its ``LayerNormPreBridge`` recomputes the norm in
``NormalizationBridge._python_norm_forward``, which upcasts only dtypes below float32, so
``to_transformer_bridge`` exports the mean-field transformer exactly in float64. The gap is the
inconsistency between the two code paths of one model.

The oracle: the LayerNorm of the mean-field Pre-LN transformer
(``constructions.prenorm_gradients``), without affine terms and with ``eps = 0``, which its
float64 forward computes with ``torch.nn.functional.layer_norm``. The script evaluates
``NativeLayerNormPre`` on Gaussian residual streams, as the construction's, and compares.

Run: ``python examples/native_layernorm_float32.py``; it exits 1 while the gap is there.
"""

import sys

import torch
from transformer_lens.model_bridge.sources.native.model import NativeLayerNormPre

x = torch.randn(4, 6, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
exact = torch.nn.functional.layer_norm(x, (8,), eps=0.0)
with torch.no_grad():
    native = NativeLayerNormPre(eps=0.0)(x)
gap = float((native - exact).abs().max())
# a float64 LayerNorm of 8 entries of size ~1 is accurate to a few 1e-16; float32 to ~1e-7
print(f"native LNPre in {native.dtype} differs from the float64 LayerNorm by {gap:.1e}")
sys.exit(1 if gap > 1e-12 else 0)
