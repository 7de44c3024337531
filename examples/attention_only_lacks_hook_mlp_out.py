"""Upstream gap: node attribution over "every layer's MLP" fails on attention-only models.

A ``HookedTransformer`` with ``attn_only=True`` (TransformerLens 2.x/3.x) has no
``blocks.L.hook_mlp_out`` (nor ``hook_mlp_in``), and neither has the ``TransformerBridge`` of
TransformerLens 4.3, so a node-attribution loop that reads ``hook_mlp_out`` for every layer (as
circuit tools written for GPT-2-style models do) raises ``KeyError`` on it, although the
answer is known exactly: an attention-only model's MLP output is zero. The oracle is the
attention-only two-layer induction construction, exported by ``to_transformer_lens`` (a
``HookedTransformer`` on 2.x/3.x, a ``TransformerBridge`` on 4.x: it reproduces on both).

Run: ``python examples/attention_only_lacks_hook_mlp_out.py``; it exits 1 while the gap is there.
"""

import sys

import torch

from constructions.export import to_transformer_lens
from constructions.induction_heads import two_layer_induction

tl_model = to_transformer_lens(two_layer_induction(vocab_size=3, max_len=5))
_, cache = tl_model.run_with_cache(torch.tensor([[3, 0, 1, 2, 0, 1]]))
missing = [f"blocks.{layer}.hook_mlp_out" for layer in range(tl_model.cfg.n_layers)
           if f"blocks.{layer}.hook_mlp_out" not in cache]
for name in missing:
    print(f"GAP {name} is not in the cache (attn_only=True); the exact value is zeros "
          f"of shape {tuple(cache['blocks.0.hook_resid_post'].shape)}")
sys.exit(1 if missing else 0)
