"""Upstream gap: on a native TransformerBridge, ``blocks.L.attn.hook_attn_scores`` holds the
attention *pattern* (after the softmax), not the scores.

TransformerLens 3.8 and 4.3, ``TransformerBridge.boot_native``, with and without
``enable_compatibility_mode(no_processing=True)`` (found by ``python -m theorems.conformance``).
A ``HookedTransformer`` (TransformerLens 3.8) caches the scaled, causally masked scores there.
The oracle is exact: the two-layer induction construction's scores are
:math:`q k^\\top / \\sqrt{d_{head}}` of the export's weights, large (about 10 to 100 here), while
every row of the cached tensor sums to 1.

Run: ``python examples/bridge_attn_scores_hold_the_pattern.py``; it exits 1 while the gap is
there.
"""

import sys

import torch

from constructions.export import to_transformer_bridge
from constructions.induction_heads import two_layer_induction

model = two_layer_induction(vocab_size=4, max_len=8)
bridge = to_transformer_bridge(model)
tokens = torch.tensor([[4, 0, 1, 2, 3, 0, 1, 2, 3]])  # the BOS (token 4) first
_, cache = bridge.run_with_cache(tokens)
scores, pattern = cache["blocks.1.attn.hook_attn_scores"], cache["blocks.1.attn.hook_pattern"]
layer = model.layers[1]
x = cache["blocks.1.hook_resid_pre"]
q = torch.einsum("bnd,hdk->bhnk", x, layer.W_Q)
k = torch.einsum("bnd,hdk->bhnk", x, layer.W_K)
exact = layer.scale * q @ k.transpose(-1, -2)        # the construction's scores, unmasked
mask = torch.tril(torch.ones(9, 9, dtype=torch.bool))
print("largest exact score:", float(exact[..., mask].abs().max()))
print("hook_attn_scores equals hook_pattern:", torch.equal(scores, pattern))
print("rows of hook_attn_scores sum to:", scores.sum(-1)[0, 0, :3].tolist())
sys.exit(1 if torch.allclose(scores, pattern) else 0)
