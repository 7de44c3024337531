r"""Constructions as shareable files and as TransformerLens models: one import for both.

This module is a facade over the interop wing (:mod:`constructions.interop`) and the two
modules the area modules share with it:

* :mod:`constructions.recording`: :func:`recorded` builders and :func:`build` record how a
  construction was built (the area modules import this, and only this);
* :mod:`constructions.residual_layout`: what each exportable class's ``residual_layout``
  method returns, in torch alone;
* :mod:`constructions.interop.files`: :func:`save` and :func:`load`, safetensors plus a JSON
  sidecar;
* :mod:`constructions.interop.layout`: :func:`transformer_lens_layout`, the config and state
  dict that both exports load, and the maps of inputs and outputs;
* :mod:`constructions.interop.transformer_lens`: :func:`to_transformer_lens` (a
  ``HookedTransformer`` on TransformerLens 2.x/3.x, the bridge below on 4.x);
* :mod:`constructions.interop.bridge`: :func:`to_transformer_bridge` (TransformerLens 3.9
  and 4.x), from the same layout.

Example (the README's)::

    >>> import torch
    >>> from constructions.induction_heads import two_layer_induction
    >>> from constructions.export import to_transformer_lens
    >>> model = two_layer_induction(vocab_size=4, max_len=8)
    >>> tl_model = to_transformer_lens(model)      # a HookedTransformer; on TL 4.x a bridge
    >>> tokens = torch.tensor([[0, 1, 2, 3, 0, 1, 2]])
    >>> bos = torch.full((1, 1), model.vocab_size)  # the construction's BOS, token 4
    >>> logits, cache = tl_model.run_with_cache(torch.cat([bos, tokens], dim=1))
    >>> cache["pattern", 0][0, 0].argmax(-1).tolist()   # layer 1: the previous token
    [0, 0, 1, 2, 3, 4, 5, 6]
    >>> cache["pattern", 1][0, 0].argmax(-1).tolist()   # layer 2: after the last match
    [0, 0, 0, 0, 0, 2, 3, 4]
    >>> logits[0, 1:].argmax(-1).tolist()   # 4 is "no earlier occurrence"
    [4, 4, 4, 4, 1, 2, 3]

``constructions`` imports only torch, numpy and math at import time: ``transformer_lens`` and
``safetensors`` (the ``interop`` extra) are imported inside the functions that need them.
"""

from __future__ import annotations

from constructions.interop.bridge import (
    bridge_state_dict,
    to_transformer_bridge,
    transformer_bridge_inputs,
)
from constructions.interop.files import (
    ARGS_PREFIX,
    FORMAT,
    FORMAT_VERSION,
    INTEROP_HINT,
    load,
    save,
)
from constructions.interop.layout import (
    TransformerLensLayout,
    construction_classes,
    transformer_lens_inputs,
    transformer_lens_layout,
    transformer_lens_outputs,
)
from constructions.interop.transformer_lens import (
    export_line,
    export_lines,
    to_transformer_lens,
)
from constructions.recording import BuildCall, build, build_call, recorded
from constructions.residual_layout import (
    DEFAULT_N_CTX,
    Interface,
    ResidualLayout,
    UnsupportedConstructionError,
)

__all__ = [
    "ARGS_PREFIX", "DEFAULT_N_CTX", "FORMAT", "FORMAT_VERSION", "INTEROP_HINT",
    "BuildCall", "Interface", "ResidualLayout", "TransformerLensLayout",
    "UnsupportedConstructionError", "bridge_state_dict", "build", "build_call", "export_line",
    "export_lines", "load", "recorded", "save", "to_transformer_bridge", "to_transformer_lens",
    "transformer_bridge_inputs", "transformer_lens_inputs", "transformer_lens_layout",
    "transformer_lens_outputs",
]


def _class_paths(method: str) -> set[str]:
    return {f"{cls.__module__}.{cls.__qualname__}" for cls in construction_classes(method)}


def __getattr__(name: str):
    # The class paths of the exportable (_SPECS) and the non-exportable (_UNSUPPORTED)
    # construction classes, found from their methods rather than kept in a list.
    if name == "EXPORT_LINES":  # builder -> its docs line, from the area modules
        return export_lines()
    if name == "_SPECS":
        return _class_paths("residual_layout")
    if name == "_UNSUPPORTED":
        return _class_paths("transformer_lens_lacks")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
