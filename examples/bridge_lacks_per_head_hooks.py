"""Upstream gap: a native TransformerBridge has no per-head result or split-QKV hooks.

TransformerLens 3.9 and 4.x, ``TransformerBridge.boot_native``: ``set_use_attn_result(True)``
and ``set_use_split_qkv_input(True)`` raise ``NotImplementedError`` (the native attention is an
``AttentionBridge``, not a ``JointQKVAttentionBridge``), so ``hook_result`` and
``hook_q_input`` never appear in the cache, and edge attribution patching cannot run on a
native model. The oracle is exact: the two-layer induction construction has one head per
layer, so its per-head result *is* the layer's attention output, which the bridge caches
(``hook_attn_out``) and which the construction computes itself.

Run: ``python examples/bridge_lacks_per_head_hooks.py``; it exits 1 while the gap is there.
"""

import sys

import torch

from constructions.export import to_transformer_bridge
from constructions.induction_heads import two_layer_induction

model = two_layer_induction(vocab_size=3, max_len=5)
bridge = to_transformer_bridge(model)
tokens = torch.tensor([[3, 0, 1, 2, 0, 1]])  # the BOS (token 3) first
missing = []
for setter in ("set_use_attn_result", "set_use_split_qkv_input"):
    try:
        getattr(bridge, setter)(True)
    except NotImplementedError as error:
        missing.append(f"{setter}: {str(error).splitlines()[0][:120]}")
_, cache = bridge.run_with_cache(tokens)
# what hook_result would hold, per the construction: one head, so the whole attention output
with torch.no_grad():
    x = model.W_E[tokens] + model.W_pos[: tokens.shape[1]]
    expected = model.layers[0](x)
gap = float((cache["blocks.0.hook_attn_out"] - expected).abs().max())
print(f"hook_attn_out matches the construction's one-head result to {gap:.1e}")
present = sorted(k for k in cache.keys() if k.endswith(("hook_result", "hook_q_input")))
print("per-head hooks in the cache:", present or "none")
for line in missing:
    print("GAP", line)
sys.exit(1 if missing or not present else 0)
