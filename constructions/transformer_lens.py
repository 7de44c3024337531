r"""Constructions as TransformerLens models.

**TransformerLens** (:func:`to_transformer_lens`). Constructions that are embeddings, causal
or bidirectional softmax attention, ReLU/GELU MLPs on a residual stream, an optional Pre-LN
``LayerNorm`` and an unembedding map one-to-one onto a ``HookedTransformer``. On
TransformerLens 4.x, which removed ``HookedTransformer``, :func:`to_transformer_lens` returns
the same weights as a ``TransformerBridge`` in compatibility mode
(:mod:`constructions.transformer_bridge`), so the example below runs on every major. The export

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
for the layers TransformerLens lacks (:func:`scanned_features`).

``transformer_lens`` (the ``interop`` extra) is imported inside the functions that need it;
no area module of ``constructions`` imports this module.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import re
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import constructions
from constructions import _validate
from constructions.files import INTEROP_HINT
from constructions.layers import Attention, L2Norm, LayerNorm, Looped
from constructions.recording import construction_name
from constructions.residual_layout import (
    LOOPED,
    AttentionBlock,
    Interface,
    MlpBlock,
    ResidualLayout,
    UnsupportedConstructionError,
    placed,
)


@dataclass(frozen=True)
class TransformerLensLayout:
    """``HookedTransformerConfig`` keyword arguments and the complete state dict of an export,
    computed with torch alone; :func:`to_transformer_lens` loads them into TransformerLens."""

    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    interface: Interface


def scanned_features(model: nn.Module) -> list[str]:
    """What a module of a class without ``residual_layout`` or ``transformer_lens_lacks`` uses
    that TransformerLens lacks."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    features = []
    tensors = [*model.parameters(), *model.buffers()]
    if any(t.is_complex() for t in tensors):
        features.append("complex numbers")
    for sub in model.modules():
        if isinstance(sub, Looped):
            features.append(LOOPED)
        elif isinstance(sub, L2Norm):
            features.append("ℓ2 normalisation of each token")
        elif isinstance(sub, Attention) and sub.kind != "softmax":
            features.append(f"{sub.kind} attention")
        elif isinstance(sub, LayerNorm):
            features.append("LayerNorm placed where no registered layout puts it")
    return list(dict.fromkeys(features))


def residual_layout(model: nn.Module, n_ctx: int | None) -> ResidualLayout:
    """``model``'s :class:`ResidualLayout`, from its class's ``residual_layout`` method; raises
    :class:`UnsupportedConstructionError` with the features its class says TransformerLens
    lacks (``transformer_lens_lacks``), or that a scan of its modules finds."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    name = construction_name(model)
    if callable(getattr(model, "residual_layout", None)):
        return model.residual_layout(name, n_ctx)
    if callable(getattr(model, "transformer_lens_lacks", None)):
        raise UnsupportedConstructionError(name, model.transformer_lens_lacks())
    raise UnsupportedConstructionError(name, scanned_features(model))


def construction_classes(method: str) -> set[type]:
    """The classes of the modules of :mod:`constructions` that define ``method`` themselves
    (``"residual_layout"``: the exportable ones; ``"transformer_lens_lacks"``: the others),
    found by importing every module of the package."""
    if not isinstance(method, str):
        raise TypeError(f"method must be a str, got {type(method).__name__}")
    found = set()
    for info in pkgutil.iter_modules(constructions.__path__):
        module = importlib.import_module(f"constructions.{info.name}")
        for value in vars(module).values():
            # a package's classes live in its topic modules and are re-exported by it
            own = (value.__module__ == module.__name__
                   or value.__module__.startswith(module.__name__ + ".")) if isinstance(
                       value, type) else False
            if (own and issubclass(value, nn.Module) and method in vars(value)):
                found.add(value)
    return found


def _padded(weight: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    return placed(weight, shape, *(slice(0, s) for s in weight.shape))


def transformer_lens_layout(model: nn.Module, *, n_ctx: int | None = None
                            ) -> TransformerLensLayout:
    """The ``HookedTransformerConfig`` arguments and state dict of ``model``'s export (torch
    only; raises :class:`UnsupportedConstructionError` before anything is imported).

    ``n_ctx`` sets the context length of constructions without a positional embedding
    (default: their sequence length, or :data:`DEFAULT_N_CTX`); it is fixed otherwise.
    """
    spec = residual_layout(model, n_ctx)
    attns = [a for a, _ in spec.blocks if a is not None]
    mlps = [m for _, m in spec.blocks if m is not None]
    if len({a.causal for a in attns}) > 1:
        raise UnsupportedConstructionError(spec.name, ["both causal and bidirectional attention"])
    if len({m.activation for m in mlps}) > 1:
        raise UnsupportedConstructionError(spec.name, ["MLPs with different activations"])
    D, W = spec.d_model, spec.W_E
    H = max([a.W_Q.shape[0] for a in attns], default=1)
    d_head = max([max(a.W_Q.shape[2], a.W_V.shape[2]) for a in attns], default=1)
    d_mlp = max([m.W_in.shape[1] for m in mlps], default=0)
    # TransformerLens divides scores by attn_scale = sqrt(d_head): fold it (and the layer's own
    # scale) into W_Q, so that q.k / sqrt(d_head) is the construction's score.
    fold = math.sqrt(d_head)
    state: dict[str, torch.Tensor] = {"embed.W_E": spec.W_E.clone(),
                                      "pos_embed.W_pos": spec.W_pos.clone(),
                                      "unembed.W_U": spec.W_U.clone(),
                                      "unembed.b_U": W.new_zeros(spec.W_U.shape[1])}
    for layer, (attn, mlp) in enumerate(spec.blocks):
        prefix = f"blocks.{layer}"
        if attn is None:  # zero weights: the head outputs exactly zero
            zeros = (W.new_zeros(s) for s in ((1, D, 1), (1, D, 1), (1, D, 1), (1, 1, D)))
            attn = AttentionBlock(*zeros, scale=1.0, causal=attns[0].causal if attns else True)
        qk, vo = (H, D, d_head), (H, d_head, D)
        state[f"{prefix}.attn.W_Q"] = _padded(attn.W_Q * (attn.scale * fold), qk)
        state[f"{prefix}.attn.W_K"] = _padded(attn.W_K, qk)
        state[f"{prefix}.attn.W_V"] = _padded(attn.W_V, qk)
        state[f"{prefix}.attn.W_O"] = _padded(attn.W_O, vo)
        for bias in "QKV":
            state[f"{prefix}.attn.b_{bias}"] = W.new_zeros(H, d_head)
        state[f"{prefix}.attn.b_O"] = W.new_zeros(D)
        if mlps:
            if mlp is None:  # zero weights and biases: the MLP outputs exactly zero
                mlp = MlpBlock(W.new_zeros(D, 1), W.new_zeros(1), W.new_zeros(1, D), W.new_zeros(D),
                           mlps[0].activation)
            state[f"{prefix}.mlp.W_in"] = _padded(mlp.W_in, (D, d_mlp))
            state[f"{prefix}.mlp.b_in"] = _padded(mlp.b_in, (d_mlp,))
            state[f"{prefix}.mlp.W_out"] = _padded(mlp.W_out, (d_mlp, D))
            state[f"{prefix}.mlp.b_out"] = mlp.b_out.clone()
    config = {
        "model_name": spec.name.split(" ")[0], "d_model": D, "d_head": d_head, "n_heads": H,
        "n_layers": len(spec.blocks), "n_ctx": spec.W_pos.shape[0],
        "d_vocab": spec.W_E.shape[0], "d_vocab_out": spec.W_U.shape[1],
        "attn_only": not mlps, "d_mlp": d_mlp or None,
        "act_fn": mlps[0].activation if mlps else None,
        "normalization_type": "LNPre" if spec.layer_norm else None,
        "eps": 0.0 if spec.layer_norm else 1e-5,
        "positional_embedding_type": "standard",
        "attention_dir": "causal" if attns and attns[0].causal else "bidirectional",
        "dtype": W.dtype, "device": str(W.device), "default_prepend_bos": False,
        "init_weights": False,
    }
    return TransformerLensLayout(config, state, spec.interface)


def transformer_lens_version() -> str | None:
    """The installed TransformerLens's version, or ``None`` (read from its package metadata,
    without importing it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformer-lens")
    except PackageNotFoundError:
        return None


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
      :func:`~constructions.transformer_bridge.to_transformer_bridge` builds, in compatibility
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
    from constructions.transformer_bridge import _bridge  # imports this module

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


def transformer_lens_inputs(model: nn.Module, x: torch.Tensor) -> dict[str, Any]:
    """Keyword arguments for the export's ``forward``/``run_with_cache`` that correspond to
    ``model``'s input ``x``: ``{"input": tokens}`` (BOS prepended where the construction adds
    one) or ``{"input": residual, "start_at_layer": 0}`` for models of real vectors."""
    return residual_layout(model, None).interface.inputs(x)


def transformer_lens_outputs(model: nn.Module, logits: torch.Tensor) -> torch.Tensor:
    """The export's logits as ``model``'s output (BOS position dropped, scalar outputs
    squeezed), batched: ``(B, n, ...)``. ``logits`` is ``(B, positions, d_vocab_out)``; NaN and
    inf pass through as they are."""
    spec = residual_layout(model, None)
    logits = _validate.real_tensor("logits", logits, finite=False,
                                   shape=(None, None, spec.W_U.shape[1]))
    if spec.interface.bos is not None and logits.shape[1] < 1:
        raise ValueError("logits must include the BOS position, got 0 positions")
    return spec.interface.outputs(logits)


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
