r"""Constructions as TransformerLens ``TransformerBridge`` models (TransformerLens 3.9 and 4.x).

TransformerLens 4.0 removed ``HookedTransformer``; its models are ``TransformerBridge``\ s.
:func:`to_transformer_bridge` builds one around TransformerLens's own native transformer
(``TransformerBridge.boot_native(config)``, no Hugging Face download) from the same
:class:`~constructions.interop.layout.TransformerLensLayout` that
:func:`~constructions.interop.transformer_lens.to_transformer_lens` loads, and

* converts the layout's ``HookedTransformer`` state dict to the bridge's keys with
  TransformerLens's ``convert_tl_checkpoint`` where it exists (4.x) and with
  :func:`bridge_state_dict` (this module's own conversion, the same rearrangements) where it
  does not (3.9);
* loads it with ``load_state_dict(strict=True)`` and then checks that every tensor of the
  bridge equals the converted one bit for bit, and that the conversion dropped no weight of
  the layout (it may drop only tensors that are exactly zero, such as an unembedding bias the
  native model does not have);
* never processes weights: ``enable_compatibility_mode(no_processing=True)`` only renames the
  hooks (``cache["pattern", L]``, ``blocks.L.hook_resid_post``), it folds and centres nothing;
* keeps the construction's dtype and device (float64 stays float64).

The bridge sees token models' inputs as the ``HookedTransformer`` export does; it has no
``start_at_layer``, so models of real vectors pass the residual stream as ``input`` itself (a
floating tensor is taken as input embeddings, to which the bridge adds the export's positional
embedding, which is zero for every such layout): :func:`transformer_bridge_inputs`.

Which export needs which major: :func:`to_transformer_bridge` needs TransformerLens 3.9 or 4.x;
:func:`~constructions.interop.transformer_lens.to_transformer_lens` builds a
``HookedTransformer`` on 2.x and 3.x and, on 4.x, returns this module's bridge.

A layout with LayerNorm (the mean-field transformer) exports in float64. The native model's own
``NativeLayerNormPre`` normalises in float32 (``x.to(torch.float32)``,
``model_bridge/sources/native/model.py`` line 98 in 4.3, 93 in 3.9;
``examples/native_layernorm_float32.py``), but the bridge never runs it: its
``LayerNormPreBridge`` (``model_bridge/generalized_components/normalization.py``, 4.3 line 234)
sets ``use_native_layernorm_autograd=False``, so ``NormalizationBridge.forward`` takes
``_python_norm_forward`` (4.3 line 114), which recomputes the norm and upcasts only dtypes other
than float32 and float64 (line 122). The export checks that on the bridge it built (the
component its forward calls, on an input whose float32 evaluation is wrong), and refuses a
TransformerLens whose bridge normalises float64 in float32.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from constructions.interop.files import INTEROP_HINT
from constructions.interop.layout import (
    TransformerLensLayout,
    transformer_lens_inputs,
    transformer_lens_layout,
    transformer_lens_version,
)
from constructions.recording import construction_name
from constructions.residual_layout import UnsupportedConstructionError

# Layout keys whose values the conversion may drop, provided they are exactly zero: the native
# model's unembedding has no bias.
DROPPABLE_ZEROS = ("unembed.b_U",)


def _heads_in(weight: torch.Tensor) -> torch.Tensor:
    """``W_Q, W_K, W_V`` ``(H, D, k)`` as an ``nn.Linear`` weight ``(H k, D)``."""
    H, D, k = weight.shape
    return weight.permute(0, 2, 1).reshape(H * k, D)


def _heads_out(weight: torch.Tensor) -> torch.Tensor:
    """``W_O`` ``(H, k, D)`` as an ``nn.Linear`` weight ``(D, H k)``."""
    H, k, D = weight.shape
    return weight.reshape(H * k, D).T


def bridge_state_dict(layout: TransformerLensLayout) -> dict[str, torch.Tensor]:
    """The layout's ``HookedTransformer`` state dict under the native bridge's keys
    (``nn.Linear`` weights are ``(out, in)``; heads are concatenated along ``out``)."""
    if not isinstance(layout, TransformerLensLayout):
        raise TypeError(f"layout must be a TransformerLensLayout (from transformer_lens_layout), "
                        f"got {type(layout).__name__}")
    state = layout.state_dict
    out = {"embed.weight": state["embed.W_E"], "pos_embed.weight": state["pos_embed.W_pos"],
           "unembed.weight": state["unembed.W_U"].T, "unembed.bias": state["unembed.b_U"]}
    for layer in range(layout.config["n_layers"]):
        attn, mlp = f"blocks.{layer}.attn", f"blocks.{layer}.mlp"
        for name in "QKV":
            out[f"{attn}.{name.lower()}.weight"] = _heads_in(state[f"{attn}.W_{name}"])
            out[f"{attn}.{name.lower()}.bias"] = state[f"{attn}.b_{name}"].reshape(-1)
        out[f"{attn}.o.weight"] = _heads_out(state[f"{attn}.W_O"])
        out[f"{attn}.o.bias"] = state[f"{attn}.b_O"]
        if f"{mlp}.W_in" in state:
            out[f"{mlp}.in.weight"] = state[f"{mlp}.W_in"].T
            out[f"{mlp}.in.bias"] = state[f"{mlp}.b_in"]
            out[f"{mlp}.out.weight"] = state[f"{mlp}.W_out"].T
            out[f"{mlp}.out.bias"] = state[f"{mlp}.b_out"]
    return {k: v.contiguous() for k, v in out.items()}


def _convert(layout: TransformerLensLayout, cfg) -> dict[str, torch.Tensor]:
    """The layout's state dict under the bridge's keys: TransformerLens's own
    ``convert_tl_checkpoint`` (4.x), else :func:`bridge_state_dict` (3.9 has no converter)."""
    try:
        from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint
    except ImportError:
        return bridge_state_dict(layout)
    return {k: v.contiguous() for k, v in convert_tl_checkpoint(dict(layout.state_dict),
                                                                 cfg).items()}


def _bridge_layer_norm_keeps(bridge, dtype: torch.dtype) -> bool:
    """Whether ``bridge``'s own LayerNorm (``blocks.0.ln1``, the component its forward calls)
    computes in ``dtype``: on ``x = (0, 1, 1 + 2^{-40})`` a float32 evaluation loses the
    ``2^{-40}``."""
    ln = bridge.blocks[0].ln1
    x = torch.tensor([[0.0, 1.0, 1.0 + 2.0 ** -40]], dtype=dtype,
                     device=next(bridge.parameters()).device)
    ours = nn.functional.layer_norm(x, (3,), eps=0.0)
    with torch.no_grad():
        theirs = ln(x)
    # both evaluate a 3-term mean and variance: agreement to 1e-12 needs the 2^-40 (~1e-12) kept
    return theirs.dtype == dtype and float((theirs - ours).abs().max()) <= 2.0 ** -44


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def transformer_bridge_inputs(model: nn.Module, x: torch.Tensor) -> dict[str, Any]:
    """Keyword arguments for the bridge's ``forward``/``run_with_cache`` that correspond to
    ``model``'s input ``x``: :func:`~constructions.interop.layout.transformer_lens_inputs`
    without ``start_at_layer``."""
    inputs = transformer_lens_inputs(model, x)
    inputs.pop("start_at_layer", None)
    return inputs


def to_transformer_bridge(model: nn.Module, *, n_ctx: int | None = None):
    """Export ``model`` as a ``transformer_lens.model_bridge.TransformerBridge`` (TransformerLens
    3.9 or 4.x) that computes the same function, in compatibility mode without weight
    processing (module docstring). On 4.x this is what
    :func:`~constructions.interop.transformer_lens.to_transformer_lens` returns too.

    Feed it :func:`transformer_bridge_inputs` ``(model, x)`` and map its logits back with
    :func:`~constructions.interop.layout.transformer_lens_outputs`.
    Raises :class:`UnsupportedConstructionError` (a ``ValueError``) naming what TransformerLens
    lacks, and ``ImportError`` without TransformerLens 3.9 or later.
    """
    layout = transformer_lens_layout(model, n_ctx=n_ctx)
    return _bridge(layout, construction_name(model))


def _bridge(layout: TransformerLensLayout, name: str):
    """``layout`` loaded into a native ``TransformerBridge`` (:func:`to_transformer_bridge`)."""
    try:
        from transformer_lens.config import TransformerBridgeConfig
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError as error:
        installed = transformer_lens_version()
        raise ImportError(
            "to_transformer_bridge needs transformer-lens 3.9 or 4.x, "
            + (f"not {installed}: pip install 'transformer-lens>=3.9,<5'" if installed
               else INTEROP_HINT)) from error
    if not hasattr(TransformerBridge, "boot_native"):
        raise ImportError(f"to_transformer_bridge needs transformer-lens 3.9 or 4.x "
                          f"(TransformerBridge.boot_native), not {transformer_lens_version()}")
    config = dict(layout.config)
    dtype, device = config.pop("dtype"), config.pop("device")
    W_pos = layout.state_dict["pos_embed.W_pos"]
    if layout.interface.kind == "residual" and bool(W_pos.ne(0).any()):
        raise RuntimeError(f"{name}'s layout adds a positional embedding to a residual input, "
                           f"which the bridge would add to the input embeddings")
    cfg = TransformerBridgeConfig.from_dict(config)
    # init_weights=False leaves nn.Linear's default initialisation, which draws from the global
    # generator: fork it, so that exporting does not change the caller's random stream.
    with torch.random.fork_rng(devices=[]):
        bridge = TransformerBridge.boot_native(cfg, dtype=dtype, device=device,
                                               model_name=config["model_name"])
    converted = _convert(layout, bridge.cfg)
    expected = bridge.state_dict()
    if set(converted) != set(expected):
        raise RuntimeError(f"the bridge export of {name} does not match this TransformerLens's "
                           f"native model: missing {sorted(set(expected) - set(converted))}, "
                           f"unknown {sorted(set(converted) - set(expected))}")
    kept = sum(v.numel() for v in converted.values())
    dropped = [k for k in DROPPABLE_ZEROS if k in layout.state_dict
               and bool(layout.state_dict[k].ne(0).any())]
    total = sum(v.numel() for k, v in layout.state_dict.items() if k not in DROPPABLE_ZEROS)
    if dropped or kept < total:
        raise RuntimeError(f"converting {name} for the bridge dropped weights ({kept} of {total} "
                           f"kept; nonzero {dropped})")
    if layout.config["normalization_type"] and not _bridge_layer_norm_keeps(bridge, dtype):
        raise UnsupportedConstructionError(name, [
            f"LayerNorm in {str(dtype).removeprefix('torch.')} (this TransformerLens's bridge "
            f"normalises in float32)"],
            hint="to_transformer_lens on transformer-lens 2.x or 3.x (a HookedTransformer) "
                 "exports it exactly")
    bridge.load_state_dict(converted, strict=True)
    bridge.enable_compatibility_mode(disable_warnings=True, no_processing=True)
    loaded = bridge.state_dict()
    differ = [k for k, v in converted.items()
              if loaded[k].dtype != v.dtype or not torch.equal(_bits(loaded[k]), _bits(v))]
    if differ:
        raise RuntimeError(f"the bridge holds other weights than {name}'s export: {differ}")
    return bridge.eval()

