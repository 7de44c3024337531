r"""Constructions as TransformerLens models.

**TransformerLens** (:func:`to_transformer_lens`). Constructions that are embeddings, causal
or bidirectional softmax attention, ReLU/GELU MLPs on a residual stream, an optional Pre-LN
``LayerNorm`` and an unembedding map one-to-one onto a ``HookedTransformer``. On
TransformerLens 4.x, which removed ``HookedTransformer``, :func:`to_transformer_lens` returns
the same weights as a ``TransformerBridge`` in compatibility mode
(:mod:`constructions.interop.bridge`), so the example below runs on every major. The export

* folds each layer's score scale, and TransformerLens's division by :math:`\sqrt{d_{head}}`,
  into :math:`W_Q`: :math:`W_Q^{TL} = \mathrm{scale}\cdot\sqrt{d_{head}}\;W_Q`;
* pads every head to one :math:`d_{head}` (the widest query, key or value map), every layer to
  one head count and one :math:`d_{mlp}`, with zero blocks that add exact zeros;
* writes an explicit unembedding and ``d_vocab_out`` (TransformerLens issue #481), biases as
  zeros, ``normalization_type=None`` without LayerNorm and ``attn_only=True`` without MLPs;
* loads with ``load_state_dict`` and *no* weight processing: no LayerNorm folding, no centring
  of writing weights or of the unembedding (TransformerLens issue #557). In TransformerLens 3.9
  ``load_and_process_state_dict`` also rounds float64 weights through float32 even with every
  processing flag off, so it is not used at all.

A construction that is not just a residual stream of sublayers gets a wider residual stream:
where it reads an MLP's or a head's output *instead of* adding it to its input, the output is
written into fresh coordinates that the next sublayer (or the unembedding) reads. Everything
else raises :class:`UnsupportedConstructionError`, naming the construction and what
TransformerLens lacks (looped weights, ℓ2 normalisation, linear or hardmax attention, complex
numbers, gated or bilinear MLPs, ...).

How the exported model sees the input (:func:`transformer_lens_inputs`): token models take
token ids, with the BOS the construction prepends itself (token ``vocab_size`` at position 0)
now passed explicitly, so logits *and* attention patterns index the same positions as
:meth:`~constructions.induction_heads.InductionTransformer.attention_patterns`; models of
real vectors take the residual stream (``start_at_layer=0``), zero-padded to the export's
width. :func:`transformer_lens_outputs` maps the logits back to the construction's output.

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

Each exportable class describes itself with a ``residual_layout(name, n_ctx)`` method
(:mod:`constructions.residual_layout`); each class that cannot be exported names what
TransformerLens lacks with ``transformer_lens_lacks()``. Modules of other classes are scanned
for the layers TransformerLens lacks (:func:`scanned_features`). The layout and the maps of
inputs and outputs (:func:`transformer_lens_layout`, :func:`transformer_lens_inputs`,
:func:`transformer_lens_outputs`, :func:`scanned_features`) live in
:mod:`constructions.interop.layout`, which both exports load.

``transformer_lens`` (the ``interop`` extra) is imported inside the functions that need it;
no area module of ``constructions`` imports this module.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings

from torch import nn

import constructions
from constructions.interop.bridge import _bridge
from constructions.interop.files import INTEROP_HINT
from constructions.interop.layout import (
    TransformerLensLayout,
    transformer_lens_layout,
    transformer_lens_version,
)
from constructions.recording import construction_name

__all__ = ["export_line", "export_lines", "to_transformer_lens"]


def _hooked_transformer_class():
    """``(HookedTransformer, HookedTransformerConfig)``, or ``None`` where the installed
    TransformerLens has none (4.0 removed it; its ``__getattr__`` raises ``ImportError``)."""
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except (ImportError, AttributeError):
        return None
    return HookedTransformer, HookedTransformerConfig


def to_transformer_lens(model: nn.Module, *, n_ctx: int | None = None,
                        circuit_hooks: bool = False):
    """Export ``model`` as the installed TransformerLens's model class, computing the same
    function (module docstring): same dtype and device, weights loaded without processing.

    * TransformerLens 2.x and 3.x: a ``transformer_lens.HookedTransformer``.
    * TransformerLens 4.x: a ``transformer_lens.model_bridge.TransformerBridge``, the one
      :func:`~constructions.interop.bridge.to_transformer_bridge` builds, in compatibility
      mode without weight processing. 4.0 removed ``HookedTransformer`` and names the bridge in
      compatibility mode as its replacement; there ``run_with_cache``, ``cache["pattern", L]``,
      the ``blocks.L.hook_*`` names, ``cfg`` and :func:`transformer_lens_inputs` (including
      ``start_at_layer=0`` for models of real vectors) work as on a ``HookedTransformer``.

    Why one function returns either class: a user who asks for "this construction in
    TransformerLens" gets the model class of the TransformerLens that ``pip`` installed, and the
    README's ``to_transformer_lens(model).run_with_cache(...)`` runs as written on every major;
    raising on 4.x would break that call where most users are. Code that needs the
    ``HookedTransformer`` class itself (its weight-processing methods, in-place edits of
    ``W_Q``) needs TransformerLens < 4; :func:`transformer_lens_layout` gives the weights under
    either.

    ``circuit_hooks=True`` turns on the hooks that circuit-discovery tools (ACDC, edge
    attribution patching) read and patch: ``use_attn_result`` (``hook_result``, the per-head
    outputs), ``use_split_qkv_input`` (``hook_q_input``/``hook_k_input``/``hook_v_input``, a
    copy of the residual stream per head) and, where the construction has MLPs,
    ``use_hook_mlp_in``. TransformerLens then sums the heads' results itself, another
    summation order, so the outputs agree to rounding rather than bit for bit. It needs
    ``HookedTransformer`` (2.x, 3.x): the native bridge of 3.9 and 4.x has no per-head result
    or split-QKV hooks (``examples/bridge_lacks_per_head_hooks.py``), so on 4.x it raises
    ``ImportError`` saying so.

    Feed it :func:`transformer_lens_inputs` ``(model, x)`` and map its logits back with
    :func:`transformer_lens_outputs`. Raises :class:`UnsupportedConstructionError` (a
    ``ValueError``) naming what TransformerLens lacks, and ``ImportError`` without
    TransformerLens (the ``interop`` extra).
    """
    if not isinstance(circuit_hooks, bool):
        raise TypeError(f"circuit_hooks must be a bool, got {type(circuit_hooks).__name__}")
    layout = transformer_lens_layout(model, n_ctx=n_ctx)
    return _export(layout, construction_name(model), circuit_hooks=circuit_hooks)


def _export(layout: TransformerLensLayout, name: str, *, circuit_hooks: bool = False):
    """``layout`` loaded into the installed TransformerLens's model class
    (:func:`to_transformer_lens`)."""
    installed = transformer_lens_version()
    if installed is None:
        raise ImportError(f"to_transformer_lens needs transformer-lens: {INTEROP_HINT}")
    if _hooked_transformer_class() is not None:
        return _hooked_transformer(layout, name, circuit_hooks=circuit_hooks)
    if circuit_hooks:
        raise ImportError(
            f"to_transformer_lens(..., circuit_hooks=True) needs transformer-lens 2.x or 3.x "
            f"(HookedTransformer; pip install 'transformer-lens>=3.9,<4'): the native "
            f"TransformerBridge of transformer-lens {installed} has no per-head result or "
            f"split-QKV hooks")
    return _bridge(layout, name)


def _hooked_transformer(layout: TransformerLensLayout, name: str, *, circuit_hooks: bool):
    """``layout`` loaded into a ``HookedTransformer`` (TransformerLens 2.x, 3.x)."""
    HookedTransformer, HookedTransformerConfig = _hooked_transformer_class()
    hooks = {}
    if circuit_hooks:
        hooks = {"use_attn_result": True, "use_split_qkv_input": True,
                 "use_hook_mlp_in": not layout.config["attn_only"]}
    config = HookedTransformerConfig(**layout.config, **hooks)
    with warnings.catch_warnings():
        # 3.x warns that HookedTransformer goes away in 4.0 (where the bridge is used instead)
        warnings.filterwarnings("ignore", message="HookedTransformer is deprecated",
                                category=DeprecationWarning)
        tl_model = HookedTransformer(config)
    state = tl_model.state_dict()
    parameters = {key for key, _ in tl_model.named_parameters()}
    if parameters - set(layout.state_dict) or set(layout.state_dict) - set(state):
        missing = sorted(parameters - set(layout.state_dict))
        unknown = sorted(set(layout.state_dict) - set(state))
        raise RuntimeError(f"the export of {name} does not match this TransformerLens's "
                           f"parameters: missing {missing}, unknown {unknown}")
    state.update(layout.state_dict)  # buffers (masks) stay TransformerLens's own
    tl_model.load_state_dict(state, strict=True)
    return tl_model.eval()


def export_lines() -> dict[str, str]:
    """One-line exports for the docs, ``"module:builder"`` -> the line (which the tests run):
    each area module of :mod:`constructions` lists its own in a module-level
    ``TRANSFORMER_LENS_EXAMPLES`` dict, builder name -> line."""
    lines = {}
    for info in pkgutil.iter_modules(constructions.__path__):
        module = importlib.import_module(f"constructions.{info.name}")
        for builder, line in getattr(module, "TRANSFORMER_LENS_EXAMPLES", {}).items():
            lines[f"{module.__name__}:{builder}"] = line
    return lines


def __getattr__(name: str):
    if name == "EXPORT_LINES":  # computed on first use: it imports every area module
        return export_lines()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def export_line(construction: str) -> str | None:
    """The one-line export of a claim's construction (``"module:builder"``) for its docs page,
    with its imports, or ``None`` when the construction does not export."""
    if not isinstance(construction, str):
        raise TypeError(f"construction must be a str 'module:builder', "
                        f"got {type(construction).__name__}")
    line = export_lines().get(construction)
    if line is None:
        return None
    module, _, builder = construction.partition(":")
    # the builder, then the other names of its module that the line calls
    namespace = vars(importlib.import_module(module))
    called = re.findall(r"(?<![\w.])([A-Za-z_]\w*)\(", line)
    names = list(dict.fromkeys([builder] + [n for n in called if n in namespace]))
    imports = (f"import torch\nfrom {module} import {', '.join(names)}\n"
               f"from constructions.export import to_transformer_lens\n")
    return imports + f"tl_model = {line}"
