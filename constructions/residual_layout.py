r"""What a TransformerLens export needs to know about a construction, in torch alone.

An exportable construction class has a method ``residual_layout(name, n_ctx)`` beside its
code that returns a :class:`ResidualLayout`: its embedding, positional embedding and
unembedding in the export's residual coordinates, its blocks (an :class:`AttentionBlock` and
an :class:`MlpBlock`, either ``None``) and the :class:`Interface` by which the export sees its
input and output. :func:`attention_block` and :func:`mlp_block` place a construction's layer
into chosen coordinates of a residual stream of width ``D``, :func:`placed` any weight.

A construction class that cannot be exported has a method ``transformer_lens_lacks()``
returning the features it uses that a ``HookedTransformer`` does not have (common ones are the
constants below), and a configuration of an exportable class that does not fit raises
:class:`UnsupportedConstructionError` from its ``residual_layout``.

This module imports neither ``constructions.layers`` nor TransformerLens, so that any module
of ``constructions`` may import it (``constructions.layers`` does): what it reads of a layer is
stated as a protocol, :class:`AttentionWeights` and :class:`MlpWeights`, which
``constructions.layers.Attention`` and ``MLP`` satisfy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from torch import nn

from constructions import _validate

# Context length of an export whose construction has no positional embedding and no length:
# it only sizes TransformerLens's (zero) W_pos, so inputs up to this length can be tokens.
DEFAULT_N_CTX = 1024
LOOPED = "looped (weight-shared) layers applied a variable number of times"
LINEAR_ATTENTION = "linear attention (scores used without a softmax)"
NO_SEQUENCE = "no attention or token sequence"


class UnsupportedConstructionError(ValueError):
    """A construction that TransformerLens's ``HookedTransformer`` cannot express exactly.

    ``construction`` names it (``builder (Class)`` when its build was recorded) and
    ``features`` lists what it uses that a ``HookedTransformer`` does not have.
    """

    def __init__(self, name: str, features: Iterable[str], hint: str = "") -> None:
        self.construction = name
        self.features = tuple(features)
        if self.features:
            message = (f"{name} cannot be exported to TransformerLens: it uses "
                       f"{'; '.join(self.features)}, which a HookedTransformer does not have")
        else:
            message = (f"{name} cannot be exported to TransformerLens: no exporter is registered "
                       f"for its class (an exportable class has a residual_layout method)")
        super().__init__(message + (f". {hint}" if hint else ""))


class AttentionWeights(Protocol):
    """What :func:`attention_block` reads of an attention layer (``constructions.layers.
    Attention``): ``W_Q, W_K`` ``(H, d, k)``, ``W_V`` ``(H, d, v)``, ``W_O`` ``(H, v, d_out)``,
    the normalisation ``kind`` (``"softmax"``, ``"hardmax"`` or ``"linear"``), the score
    ``scale`` and whether the layer is ``causal``."""

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor
    kind: str
    scale: float
    causal: bool


class MlpWeights(Protocol):
    """What :func:`mlp_block` reads of an MLP (``constructions.layers.MLP``):
    ``act(x W_in + b_in) W_out + b_out`` with ``W_in (d, h)``, ``W_out (h, d_out)`` and the
    ``activation``'s name."""

    W_in: torch.Tensor
    b_in: torch.Tensor
    W_out: torch.Tensor
    b_out: torch.Tensor
    activation: str


@dataclass(frozen=True)
class AttentionBlock:
    """One attention sublayer in the export's residual coordinates: ``W_Q, W_K`` are
    ``(H, D, k)``, ``W_V`` ``(H, D, v)``, ``W_O`` ``(H, v, D)``; scores are ``scale * q.k``."""

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor
    scale: float
    causal: bool


@dataclass(frozen=True)
class MlpBlock:
    """``act(x W_in + b_in) W_out + b_out`` with ``W_in (D, h)`` and ``W_out (h, D)``."""

    W_in: torch.Tensor
    b_in: torch.Tensor
    W_out: torch.Tensor
    b_out: torch.Tensor
    activation: str


@dataclass(frozen=True)
class Interface:
    """How the exported model sees a construction's input and output.

    ``kind="tokens"``: token ids, with ``bos`` (if not ``None``) prepended at position 0 and its
    logits dropped again. ``kind="residual"``: real vectors ``(B, n, d)`` enter as the residual
    stream (``start_at_layer=0``), in ``dtype`` and zero-padded to ``width``; ``scalar`` takes
    the single logit.
    """

    kind: Literal["tokens", "residual"]
    vocab_size: int = 0
    max_len: int | None = None
    bos: int | None = None
    width: int = 0
    scalar: bool = False
    dtype: torch.dtype = torch.float64

    def inputs(self, x: torch.Tensor) -> dict[str, Any]:
        if self.kind == "tokens":
            tokens = _validate.token_tensor("x", x, vocab_size=self.vocab_size,
                                            max_len=self.max_len)
            tokens = tokens if tokens.ndim == 2 else tokens.unsqueeze(0)
            if self.bos is not None:
                bos = tokens.new_full((tokens.shape[0], 1), self.bos)
                tokens = torch.cat([bos, tokens], dim=1)
            return {"input": tokens}
        x = _validate.real_tensor("x", x, ndim=3)
        if x.shape[-1] > self.width:
            raise ValueError(f"x must have width <= {self.width}, got shape {tuple(x.shape)}")
        x = nn.functional.pad(x.to(self.dtype), (0, self.width - x.shape[-1]))
        return {"input": x, "start_at_layer": 0}

    def outputs(self, logits: torch.Tensor) -> torch.Tensor:
        if self.bos is not None:
            logits = logits[:, 1:]
        return logits[..., 0] if self.scalar else logits


@dataclass(frozen=True)
class ResidualLayout:
    """A construction as TransformerLens sees it, before padding to uniform shapes."""

    name: str
    d_model: int
    W_E: torch.Tensor      # (d_vocab, D)
    W_pos: torch.Tensor    # (n_ctx, D)
    W_U: torch.Tensor      # (D, d_vocab_out)
    blocks: tuple[tuple[AttentionBlock | None, MlpBlock | None], ...]
    interface: Interface
    layer_norm: bool = False  # Pre-LN LayerNorm without affine terms, eps = 0, and a final one


def _slice_of(name: str, value: object, length: int) -> range:
    """The coordinates ``value`` (a slice, ``name``) selects out of ``range(length)``."""
    if not isinstance(value, slice):
        raise TypeError(f"{name} must be a slice, got {type(value).__name__}")
    try:
        selected = range(length)[value]
    except (TypeError, ValueError) as error:  # a non-int bound, a zero step
        raise ValueError(f"{name} must be a slice of ints with a positive step, got {value}: "
                         f"{error}") from error
    if selected.step < 0:  # torch tensors take no negative steps
        raise ValueError(f"{name} must be a slice with a positive step, got {value}")
    return selected


def placed(weight: torch.Tensor, shape: tuple[int, ...], *index: slice) -> torch.Tensor:
    """A zero tensor of ``shape`` holding ``weight`` at ``index`` (a block of the stream): one
    slice per leading dim of ``shape``, selecting exactly ``weight``'s shape."""
    _validate.instance("weight", weight, torch.Tensor)
    if not isinstance(shape, tuple) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}")
    if any(s < 0 for s in shape):
        raise ValueError(f"shape must have sizes >= 0, got {shape}")
    if len(index) > len(shape):
        raise ValueError(f"index has {len(index)} slices for a shape of {len(shape)} dims")
    block = tuple(len(_slice_of("index", i, size)) for i, size in zip(index, shape, strict=False))
    if block + shape[len(index):] != tuple(weight.shape):
        raise ValueError(f"weight of shape {tuple(weight.shape)} does not fit index {index} of "
                         f"shape {shape}, which selects {block + shape[len(index):]}")
    out = weight.new_zeros(shape)
    out[index] = weight
    return out


def _stream_slices(read: object, write: object, D: object, d_in: int, d_out: int) -> None:
    """Check that ``read`` and ``write`` select ``d_in`` and ``d_out`` of ``D`` coordinates."""
    D = _validate.positive_int("D", D)
    for name, value, width in (("read", read, d_in), ("write", write, d_out)):
        selected = len(_slice_of(name, value, D))
        if selected != width:
            raise ValueError(f"{name} must select {width} of the D={D} residual coordinates, "
                             f"got {value}, which selects {selected}")


def _module_with(name: str, value: object, protocol: type, what: str) -> None:
    """Raise ``TypeError`` naming ``name`` unless ``value`` is a module with the attributes of
    ``protocol`` (checked by what it has, not by class: ``constructions.layers`` imports this
    module; not by ``isinstance`` either, which reads attributes statically and so misses an
    ``nn.Module``'s parameters)."""
    attributes = tuple(protocol.__annotations__)
    missing = [a for a in attributes if not hasattr(value, a)]
    if not isinstance(value, nn.Module) or missing:
        raise TypeError(f"{name} must be {what} (an nn.Module with {', '.join(attributes)}), "
                        f"got {type(value).__name__}")


def attention_block(name: str, layer: AttentionWeights, D: int, read: slice, write: slice
                    ) -> AttentionBlock:
    """``layer`` reading residual coordinates ``read`` and writing ``write`` (of ``D``)."""
    _validate.instance("name", name, str)
    _module_with("layer", layer, AttentionWeights, "an Attention layer")
    if layer.kind != "softmax":
        feature = {"linear": LINEAR_ATTENTION,
                   "hardmax": "hardmax (average-hard) attention"}[layer.kind]
        raise UnsupportedConstructionError(name, [feature])
    H, d, k = layer.W_Q.shape
    v = layer.W_V.shape[2]
    _stream_slices(read, write, D, d, layer.W_O.shape[2])
    return AttentionBlock(
        W_Q=placed(layer.W_Q.detach(), (H, D, k), slice(None), read),
        W_K=placed(layer.W_K.detach(), (H, D, k), slice(None), read),
        W_V=placed(layer.W_V.detach(), (H, D, v), slice(None), read),
        W_O=placed(layer.W_O.detach(), (H, v, D), slice(None), slice(None), write),
        scale=layer.scale, causal=layer.causal)


def mlp_block(name: str, mlp: MlpWeights, D: int, read: slice, write: slice) -> MlpBlock:
    """``mlp`` reading residual coordinates ``read`` and writing ``write`` (of ``D``)."""
    _validate.instance("name", name, str)
    _module_with("mlp", mlp, MlpWeights, "an MLP")
    if mlp.activation not in ("relu", "gelu"):  # TransformerLens: relu; gelu is F.gelu (erf)
        raise UnsupportedConstructionError(name, [f"an MLP with activation {mlp.activation!r}"])
    h = mlp.W_in.shape[1]
    _stream_slices(read, write, D, mlp.W_in.shape[0], mlp.W_out.shape[1])
    return MlpBlock(W_in=placed(mlp.W_in.detach(), (D, h), read),
                    b_in=mlp.b_in.detach().clone(),
                    W_out=placed(mlp.W_out.detach(), (h, D), slice(None), write),
                    b_out=placed(mlp.b_out.detach(), (D,), write),
                    activation=mlp.activation)


def context_length(name: str, n_ctx: int | None, default: int) -> int:
    """The export's context length: ``n_ctx`` (validated), else ``default``."""
    _validate.instance("name", name, str)
    default = _validate.positive_int("default", default)
    return default if n_ctx is None else _validate.positive_int("n_ctx", n_ctx)


def fixed_context_length(name: str, n_ctx: int | None, fixed: int) -> int:
    """``fixed``, the length a positional embedding sets; ``n_ctx`` may only repeat it."""
    _validate.instance("name", name, str)
    fixed = _validate.positive_int("fixed", fixed)
    if n_ctx is not None:
        _validate.positive_int("n_ctx", n_ctx)
    if n_ctx is not None and n_ctx != fixed:
        raise ValueError(f"n_ctx of {name} is fixed by its positional embedding to {fixed}, "
                         f"got {n_ctx}")
    return fixed
