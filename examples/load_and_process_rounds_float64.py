"""Upstream gap: TransformerLens 3.9's ``load_and_process_state_dict`` rounds float64 weights
through float32, even with every processing flag off.

The oracle: the compact induction construction, whose float64 weights are not float32
numbers. ``to_transformer_lens`` loads them with ``load_state_dict`` and keeps every bit;
loading the same state dict with ``load_and_process_state_dict(fold_ln=False,
center_writing_weights=False, center_unembed=False, fold_value_biases=False)`` changes them.

This reproducer needs TransformerLens < 4 (HookedTransformer): 4.0 removed the class and its
``load_and_process_state_dict`` with it. Without it the script says so and exits 2.

Run: ``python examples/load_and_process_rounds_float64.py``; it exits 1 while the gap is there.
"""

import sys

import torch

try:
    from transformer_lens import HookedTransformer  # noqa: F401 (4.x raises ImportError here)
except ImportError:
    print("this reproducer needs TransformerLens < 4 (HookedTransformer), which 4.0 removed")
    sys.exit(2)

from constructions.export import to_transformer_lens, transformer_lens_layout
from constructions.induction_heads import compact_induction

model = compact_induction(vocab_size=5, max_len=8)
layout = transformer_lens_layout(model)
tl_model = to_transformer_lens(model)
exact = all(torch.equal(tl_model.state_dict()[k], v) for k, v in layout.state_dict.items())
tl_model.load_and_process_state_dict(dict(layout.state_dict), fold_ln=False,
                                     center_writing_weights=False, center_unembed=False,
                                     fold_value_biases=False)
changed = {k: float((tl_model.state_dict()[k] - v).abs().max())
           for k, v in layout.state_dict.items() if not torch.equal(tl_model.state_dict()[k], v)}
print(f"load_state_dict keeps every float64 bit: {exact}")
for key, gap in sorted(changed.items()):
    print(f"GAP {key} changed by up to {gap:.1e} (dtype {tl_model.state_dict()[key].dtype})")
sys.exit(1 if changed else 0)
