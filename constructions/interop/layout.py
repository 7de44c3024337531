r"""The TransformerLens layout of a construction, computed with torch alone.

:func:`transformer_lens_layout` turns an exportable construction into ``HookedTransformerConfig``
keyword arguments and a complete state dict (the folds, padding and stream widening that
:mod:`constructions.interop.transformer_lens` describes); :func:`transformer_lens_inputs` and
:func:`transformer_lens_outputs` map a construction's inputs and outputs to the export's. Both
exports, :mod:`constructions.interop.transformer_lens` (a ``HookedTransformer``) and
:mod:`constructions.interop.bridge` (a ``TransformerBridge``), load this layout, so neither
imports the other's model code; TransformerLens itself is never imported here.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import constructions
from constructions import _validate
from constructions.interop.files import installed_version
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


def transformer_lens_version() -> str | None:
    """The installed TransformerLens's version, or ``None`` (read from its package metadata,
    without importing it)."""
    return installed_version("transformer-lens")
