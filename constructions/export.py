r"""Constructions as shareable files and as TransformerLens models.

**Files** (:func:`save`, :func:`load`). A construction is written as ``NAME.safetensors`` (its
``state_dict``, plus any tensor arguments of its builder under ``__args__/``) and a JSON
sidecar ``NAME.json`` naming the builder (``module:function``), the arguments it was called
with, the versions that wrote it and the SHA-256 of the weights. :func:`load` imports the
builder, calls it again with those arguments (so every non-tensor attribute, such as an
attention ``scale``, is rebuilt by the code that defines it), checks that the rebuilt weights
equal the saved ones bit for bit (``verify=True``), and loads the saved weights. A builder
records its call when it is decorated with :func:`recorded`, or when it is called through
:func:`build`.

**TransformerLens** (:func:`to_transformer_lens`). Constructions that are embeddings, causal
or bidirectional softmax attention, ReLU/GELU MLPs on a residual stream, an optional Pre-LN
``LayerNorm`` and an unembedding map one-to-one onto a ``HookedTransformer``. The export

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
    >>> tl_model = to_transformer_lens(model)      # a transformer_lens.HookedTransformer
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

import functools
import hashlib
import importlib
import inspect
import json
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from constructions import _validate
from constructions.layers import MLP, Attention, L2Norm, LayerNorm, Looped

FORMAT = "transformer-theorems.construction"
FORMAT_VERSION = 1
ARGS_PREFIX = "__args__/"  # tensor arguments of the builder, beside the state dict
# Context length of an export whose construction has no positional embedding and no length:
# it only sizes TransformerLens's (zero) W_pos, so inputs up to this length can be tokens.
DEFAULT_N_CTX = 1024
INTEROP_HINT = "pip install 'transformer-theorems[interop]'"


# --- recording how a construction was built ------------------------------------------------------

@dataclass(frozen=True)
class BuildCall:
    """How a construction was built: ``builder(*args, **kwargs)``, with ``builder`` given as
    ``"module:qualname"``. Tensor arguments are stored as detached copies."""

    builder: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def rebuild(self, **overrides) -> nn.Module:
        """Call the builder again (with some keyword arguments replaced)."""
        return _import(self.builder)(*self.args, **{**self.kwargs, **overrides})


def _frozen(value: Any) -> Any:
    """A copy that later in-place edits of the caller's tensors cannot change."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple)):
        return type(value)(_frozen(v) for v in value)
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    return value


def _import(path: str) -> Any:
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"builder must be 'module:qualname', got {path!r}")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target


def _builder_path(builder: Callable) -> str:
    """``module:qualname`` of a builder, checked to import back to the same function."""
    if not callable(builder):
        raise TypeError(f"builder must be callable, got {type(builder).__name__}")
    module = getattr(builder, "__module__", None)
    qualname = getattr(builder, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise ValueError(f"builder {builder!r} is not importable by name (a lambda, local "
                         f"function or partial cannot be rebuilt from a file)")
    path = f"{module}:{qualname}"
    try:
        found = _import(path)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"builder {path} does not import back: {error}") from error
    if inspect.unwrap(found) is not inspect.unwrap(builder):
        raise ValueError(f"builder {path} imports back to a different object")
    return path


def recorded(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    """Decorate a builder so that every module it returns carries its :class:`BuildCall`
    (as ``module.build_call``), which :func:`save` writes. The signature and docstring are
    unchanged."""
    path_cache: list[str] = []

    @functools.wraps(builder)
    def build_and_record(*args, **kwargs):
        model = builder(*args, **kwargs)
        if isinstance(model, nn.Module):
            if not path_cache:
                path_cache.append(_builder_path(build_and_record))
            model.build_call = BuildCall(path_cache[0], _frozen(args), _frozen(kwargs))
        return model

    return build_and_record


def build(builder: Callable[..., nn.Module] | str, *args, **kwargs) -> nn.Module:
    """Call any importable builder (a function or ``"module:qualname"``) and record the call,
    so that :func:`save` can write the result: ``build(contextual_mapping, vocabulary, 3)``."""
    if isinstance(builder, str):
        path, builder = builder, _import(builder)
    else:
        path = _builder_path(builder)
    model = builder(*args, **kwargs)
    if not isinstance(model, nn.Module):
        raise TypeError(f"{path} returned {type(model).__name__}, not an nn.Module")
    model.build_call = BuildCall(path, _frozen(args), _frozen(kwargs))
    return model


def build_call(model: nn.Module) -> BuildCall | None:
    """The recorded :class:`BuildCall` of ``model``, or ``None``."""
    call = getattr(model, "build_call", None)
    return call if isinstance(call, BuildCall) else None


def _name(model: nn.Module) -> str:
    """``builder (Class)`` when the build was recorded, else the class name."""
    call = build_call(model)
    cls = type(model).__name__
    return f"{call.builder.rpartition(':')[2]} ({cls})" if call else cls


# --- save and load -------------------------------------------------------------------------------

def _encode(value: Any, where: str, tensors: dict[str, torch.Tensor]) -> Any:
    """JSON for one builder argument; tensors go to ``tensors`` under ``__args__/<where>``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, torch.dtype):
        return {"$dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"$device": str(value)}
    if isinstance(value, (torch.Tensor, np.ndarray)):
        key = ARGS_PREFIX + where
        tensor = torch.as_tensor(value).detach()
        tensors[key] = tensor.cpu().contiguous().clone()
        return {"$tensor" if isinstance(value, torch.Tensor) else "$ndarray": key}
    if isinstance(value, (list, tuple)):
        items = [_encode(v, f"{where}.{i}", tensors) for i, v in enumerate(value)]
        return items if isinstance(value, list) else {"$tuple": items}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"$dict": {k: _encode(v, f"{where}.{k}", tensors) for k, v in value.items()}}
    raise TypeError(f"builder argument {where!r} is a {type(value).__name__}, which a file cannot "
                    f"hold (allowed: numbers, strings, None, dtypes, devices, tensors, arrays, "
                    f"and lists, tuples and str-keyed dicts of them)")


def _decode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    (tag, inner), = value.items()
    if tag == "$float":
        return float(inner)
    if tag == "$dtype":
        return getattr(torch, inner)
    if tag == "$device":
        return torch.device(inner)
    if tag == "$tensor":
        return tensors[inner].clone()
    if tag == "$ndarray":
        return tensors[inner].numpy().copy()
    if tag == "$tuple":
        return tuple(_decode(v, tensors) for v in inner)
    if tag == "$dict":
        return {k: _decode(v, tensors) for k, v in inner.items()}
    raise ValueError(f"unknown tagged value {tag!r} in the sidecar")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = version("transformer-theorems")
    except PackageNotFoundError:  # running from a source tree that was never installed
        package = "unknown"
    return {"transformer-theorems": package, "torch": torch.__version__}


def _paths(path: str | Path) -> tuple[Path, Path]:
    """(weights, sidecar) for ``NAME``, ``NAME.safetensors`` or ``NAME.json``."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    path = Path(path)
    if path.suffix in (".safetensors", ".json"):
        path = path.with_suffix("")
    return path.with_name(path.name + ".safetensors"), path.with_name(path.name + ".json")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _safetensors():
    try:
        import safetensors.torch
    except ImportError as error:
        raise ImportError(f"saving and loading constructions needs safetensors: "
                          f"{INTEROP_HINT}") from error
    return safetensors.torch


def save(model: nn.Module, path: str | Path) -> tuple[Path, Path]:
    """Write ``model`` as ``PATH.safetensors`` plus the sidecar ``PATH.json``; return both paths.

    The model must carry a :class:`BuildCall` (a :func:`recorded` builder, or :func:`build`),
    whose arguments must be JSON values, dtypes, devices, tensors or arrays. The weights are
    stored exactly (every dtype safetensors supports); the sidecar is also embedded in the
    weights file's metadata, so the ``.safetensors`` file alone suffices to :func:`load`.
    Only the ``state_dict`` is saved: other attributes (an attention ``scale``, a float
    temperature) are rebuilt from the arguments, so edits to them after building are lost.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    call = build_call(model)
    if call is None:
        raise ValueError(f"{type(model).__name__} carries no record of the builder call that made "
                         f"it, so it cannot be rebuilt from a file; build it with "
                         f"constructions.export.build(builder, ...) or a @recorded builder")
    weights_path, sidecar_path = _paths(path)
    tensors: dict[str, torch.Tensor] = {}
    args = [_encode(v, str(i), tensors) for i, v in enumerate(call.args)]
    kwargs = {k: _encode(v, k, tensors) for k, v in call.kwargs.items()}
    state = model.state_dict()
    if any(key.startswith(ARGS_PREFIX) for key in state):
        raise ValueError(f"a state_dict key starts with the reserved prefix {ARGS_PREFIX!r}")
    # clone: safetensors refuses tensors that share storage (views of one parameter)
    tensors.update({k: v.detach().cpu().contiguous().clone() for k, v in state.items()})
    sidecar = {"format": FORMAT, "format_version": FORMAT_VERSION, "builder": call.builder,
               "args": args, "kwargs": kwargs,
               "class": f"{type(model).__module__}.{type(model).__qualname__}",
               "versions": _versions()}
    text = json.dumps(sidecar, indent=1, allow_nan=False)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    _safetensors().save_file(tensors, str(weights_path), metadata={FORMAT: text})
    sidecar["weights"] = {"file": weights_path.name, "sha256": _sha256(weights_path)}
    sidecar_path.write_text(json.dumps(sidecar, indent=1, allow_nan=False) + "\n")
    return weights_path, sidecar_path


def _read(weights_path: Path, sidecar_path: Path) -> dict:
    if sidecar_path.exists():
        sidecar = json.loads(sidecar_path.read_text())
        expected = sidecar.get("weights", {}).get("sha256")
        if expected is not None and expected != _sha256(weights_path):
            raise ValueError(f"{weights_path} does not match its sidecar {sidecar_path.name} "
                             f"(SHA-256 differs): the weights were changed after saving")
    else:  # the weights file alone: its metadata holds the same sidecar
        from safetensors import safe_open

        with safe_open(str(weights_path), framework="pt") as handle:
            text = (handle.metadata() or {}).get(FORMAT)
        if text is None:
            raise ValueError(f"{weights_path} has no sidecar {sidecar_path.name} and no "
                             f"{FORMAT} metadata: it was not written by constructions.export.save")
        sidecar = json.loads(text)
    if sidecar.get("format") != FORMAT or sidecar.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{sidecar_path} is not a {FORMAT} file of version {FORMAT_VERSION}")
    return sidecar


def load(path: str | Path, *, verify: bool = True, device=None) -> nn.Module:
    """Rebuild a construction written by :func:`save` and load its saved weights.

    ``path`` is ``NAME``, ``NAME.safetensors`` or ``NAME.json``. With ``verify=True`` the
    weights the builder rebuilds must equal the saved ones bit for bit, else ``ValueError``
    names the tensors that differ (a changed builder, or weights edited after building);
    ``verify=False`` loads the saved weights regardless. ``device`` overrides the recorded
    ``device`` argument. The result carries the :class:`BuildCall`, so it can be saved again.
    """
    if not isinstance(verify, bool):
        raise TypeError(f"verify must be a bool, got {type(verify).__name__}")
    weights_path, sidecar_path = _paths(path)
    if not weights_path.exists():
        raise FileNotFoundError(f"no weights file {weights_path}")
    sidecar = _read(weights_path, sidecar_path)
    tensors = _safetensors().load_file(str(weights_path), device="cpu")
    args = tuple(_decode(v, tensors) for v in sidecar["args"])
    kwargs = {k: _decode(v, tensors) for k, v in sidecar["kwargs"].items()}
    builder = _import(sidecar["builder"])
    if device is not None:
        if "device" not in inspect.signature(builder).parameters:
            raise ValueError(f"{sidecar['builder']} takes no device argument; move the loaded "
                             f"model with .to(device) instead")
        kwargs["device"] = device
    model = builder(*args, **kwargs)
    state = {k: v for k, v in tensors.items() if not k.startswith(ARGS_PREFIX)}
    current = model.state_dict()
    if set(current) != set(state):
        changed = sorted(set(current) ^ set(state))
        raise ValueError(f"{sidecar['builder']} now builds other tensors than the file holds "
                         f"({changed} differ; saved by {sidecar['versions']})")
    if verify:
        differ = {k: _difference(current[k], v) for k, v in state.items()
                  if not _identical(current[k], v)}
        if differ:
            listed = ", ".join(f"{k} ({d})" for k, d in sorted(differ.items()))
            raise ValueError(
                f"{sidecar['builder']} with the saved arguments rebuilds different weights "
                f"(installed {_versions()}, saved by {sidecar['versions']}): {listed}; "
                f"pass verify=False to load the saved weights anyway")
    for key, value in state.items():
        if current[key].dtype != value.dtype:
            raise ValueError(f"{key} was saved as {value.dtype} but {sidecar['builder']} now "
                             f"builds {current[key].dtype}")
    model.load_state_dict(state, strict=True)
    model.build_call = BuildCall(sidecar["builder"], args, kwargs)
    return model


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def _identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bits (so NaN equals NaN, and 0.0 differs from -0.0)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(_bits(a), _bits(b))


def _difference(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{tuple(a.shape)} vs saved {b.dtype}{tuple(b.shape)}"
    gap = (a.detach().cpu().double() - b.double()).abs().max().item()
    return f"max |difference| {gap:.3g}"


# --- TransformerLens -----------------------------------------------------------------------------

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
                       f"for its class (constructions.export maps classes to layouts)")
        super().__init__(message + (f". {hint}" if hint else ""))


@dataclass(frozen=True)
class _Attn:
    """One attention sublayer in the export's residual coordinates: ``W_Q, W_K`` are
    ``(H, D, k)``, ``W_V`` ``(H, D, v)``, ``W_O`` ``(H, v, D)``; scores are ``scale * q.k``."""

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor
    scale: float
    causal: bool


@dataclass(frozen=True)
class _Mlp:
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
class _Spec:
    """A construction as TransformerLens sees it, before padding to uniform shapes."""

    name: str
    d_model: int
    W_E: torch.Tensor      # (d_vocab, D)
    W_pos: torch.Tensor    # (n_ctx, D)
    W_U: torch.Tensor      # (D, d_vocab_out)
    blocks: tuple[tuple[_Attn | None, _Mlp | None], ...]
    interface: Interface
    layer_norm: bool = False  # Pre-LN LayerNorm without affine terms, eps = 0, and a final one


@dataclass(frozen=True)
class TransformerLensLayout:
    """``HookedTransformerConfig`` keyword arguments and the complete state dict of an export,
    computed with torch alone; :func:`to_transformer_lens` loads them into TransformerLens."""

    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    interface: Interface


def _placed(weight: torch.Tensor, shape: tuple[int, ...], *index: slice) -> torch.Tensor:
    """A zero tensor of ``shape`` holding ``weight`` at ``index`` (a block of the stream)."""
    out = weight.new_zeros(shape)
    out[index] = weight
    return out


def _attention(name: str, layer: Attention, D: int, read: slice, write: slice) -> _Attn:
    """``layer`` reading residual coordinates ``read`` and writing ``write``."""
    if layer.kind != "softmax":
        feature = {"linear": "linear attention (scores used without a softmax)",
                   "hardmax": "hardmax (average-hard) attention"}[layer.kind]
        raise UnsupportedConstructionError(name, [feature])
    H, _, k = layer.W_Q.shape
    v = layer.W_V.shape[2]
    return _Attn(W_Q=_placed(layer.W_Q.detach(), (H, D, k), slice(None), read),
                 W_K=_placed(layer.W_K.detach(), (H, D, k), slice(None), read),
                 W_V=_placed(layer.W_V.detach(), (H, D, v), slice(None), read),
                 W_O=_placed(layer.W_O.detach(), (H, v, D), slice(None), slice(None), write),
                 scale=layer.scale, causal=layer.causal)


def _mlp(name: str, mlp: MLP, D: int, read: slice, write: slice) -> _Mlp:
    if mlp.activation not in ("relu", "gelu"):  # TransformerLens: relu; gelu is F.gelu (erf)
        raise UnsupportedConstructionError(name, [f"an MLP with activation {mlp.activation!r}"])
    h = mlp.W_in.shape[1]
    return _Mlp(W_in=_placed(mlp.W_in.detach(), (D, h), read),
                b_in=mlp.b_in.detach().clone(),
                W_out=_placed(mlp.W_out.detach(), (h, D), slice(None), write),
                b_out=_placed(mlp.b_out.detach(), (D,), write),
                activation=mlp.activation)


def _n_ctx(name: str, n_ctx: int | None, default: int) -> int:
    return default if n_ctx is None else _validate.positive_int("n_ctx", n_ctx)


def _fixed_n_ctx(name: str, n_ctx: int | None, fixed: int) -> int:
    if n_ctx is not None and n_ctx != fixed:
        raise ValueError(f"n_ctx of {name} is fixed by its positional embedding to {fixed}, "
                         f"got {n_ctx}")
    return fixed


def _spec_induction(model, name: str, n_ctx: int | None) -> _Spec:
    """:class:`~constructions.induction_heads.InductionTransformer`: embeddings, attention
    layers on the residual stream, unembedding; one-to-one, BOS passed explicitly."""
    D = model.d_model
    _fixed_n_ctx(name, n_ctx, model.max_len + 1)
    every = slice(None)
    blocks = tuple((_attention(name, layer, D, every, every), None) for layer in model.layers)
    return _Spec(name, D, model.W_E.detach(), model.W_pos.detach(), model.W_U.detach(), blocks,
                 Interface("tokens", vocab_size=model.vocab_size, max_len=model.max_len,
                           bos=model.vocab_size))


def _spec_attention(layer: Attention, name: str, n_ctx: int | None) -> _Spec:
    """A bare :class:`~constructions.layers.Attention` (no residual): the input ``x`` (width
    d) sits in the first d coordinates, the head writes the next ``d_out``, which the
    unembedding reads, so the logits are ``Attn(x)``."""
    d, d_out = layer.d_model, layer.W_O.shape[2]
    D = d + d_out
    W = layer.W_Q
    blocks = ((_attention(name, layer, D, slice(0, d), slice(d, D)), None),)
    W_U = _placed(torch.eye(d_out, dtype=W.dtype, device=W.device), (D, d_out), slice(d, D))
    return _Spec(name, D, W.new_zeros(1, D), W.new_zeros(_n_ctx(name, n_ctx, DEFAULT_N_CTX), D),
                 W_U, blocks, Interface("residual", width=D, dtype=W.dtype))


def _spec_contextual_mapping(model, name: str, n_ctx: int | None) -> _Spec:
    """:class:`~constructions.boltzmann.ContextualMapping` ``x + Attn(x)``: one layer, the
    identity unembedding, and the vocabulary as token embedding (token ids work too)."""
    vocabulary = model.vocabulary.detach()
    D = vocabulary.shape[1]
    every = slice(None)
    blocks = ((_attention(name, model.attention, D, every, every), None),)
    eye = torch.eye(D, dtype=vocabulary.dtype, device=vocabulary.device)
    W_pos = vocabulary.new_zeros(_n_ctx(name, n_ctx, model.seq_len), D)
    return _Spec(name, D, vocabulary, W_pos, eye, blocks,
                 Interface("residual", width=D, dtype=vocabulary.dtype))


def _spec_memorizing(model, name: str, n_ctx: int | None, *, read: slice | None = None,
                     offset: int = 0, width: int | None = None) -> tuple:
    """The blocks of :class:`~constructions.boltzmann.MemorizingTransformer` ``FFN(y +
    Attn(y))``: attention on coordinates ``read`` (residual), the FFN's scalar output into
    the coordinate after them, which the unembedding reads."""
    d = model.d_model
    read = slice(offset, offset + d) if read is None else read
    out = slice(read.stop, read.stop + 1)
    D = out.stop if width is None else width
    return (_attention(name, model.attention, D, read, read),
            _mlp(name, model.ffn, D, read, out)), out, D


def _spec_memorizer(model, name: str, n_ctx: int | None) -> _Spec:
    block, out, D = _spec_memorizing(model, name, n_ctx)
    W = model.w
    W_U = _placed(torch.ones(1, 1, dtype=W.dtype, device=W.device), (D, 1), out)
    return _Spec(name, D, W.new_zeros(1, D), W.new_zeros(_n_ctx(name, n_ctx, model.seq_len), D),
                 W_U, (block,), Interface("residual", width=D, scalar=True, dtype=W.dtype))


def _spec_equivariant(model, name: str, n_ctx: int | None) -> _Spec:
    """:class:`~constructions.boltzmann.EquivariantApproximator` ``FFN_2(SA(FFN_1(x)))``: block
    1 has no attention and the quantiser FFN writing ``FFN_1(x)`` into fresh coordinates;
    block 2 is the memorizer on those coordinates."""
    d = model.memorizer.d_model
    D = 2 * d + 1
    quantize = _mlp(name, model.quantize, D, slice(0, d), slice(d, 2 * d))
    block, out, _ = _spec_memorizing(model.memorizer, name, n_ctx, offset=d, width=D)
    W = model.memorizer.w
    W_U = _placed(torch.ones(1, 1, dtype=W.dtype, device=W.device), (D, 1), out)
    W_pos = W.new_zeros(_n_ctx(name, n_ctx, model.memorizer.seq_len), D)
    return _Spec(name, D, W.new_zeros(1, D), W_pos, W_U, ((None, quantize), block),
                 Interface("residual", width=D, scalar=True, dtype=W.dtype))


def _spec_majority(model, name: str, n_ctx: int | None) -> _Spec:
    """:class:`~constructions.layernorm_geometry.MajorityHead` without its LayerNorm: the head
    reads the embedding block and writes token frequencies into a fresh block that the
    unembedding reads (the model has no residual around the head)."""
    if model.normalize:
        raise UnsupportedConstructionError(name, [
            "LayerNorm on the embeddings alone, with no residual stream and no final LayerNorm "
            "(TransformerLens normalises the whole residual stream before every sublayer and "
            "before the unembedding)"], hint="majority_head(..., normalize=False) exports")
    E = model.embeddings.detach()
    V, d = E.shape
    D = d + V
    blocks = ((_attention(name, model.attention, D, slice(0, d), slice(d, D)), None),)
    W_U = _placed(torch.eye(V, dtype=E.dtype, device=E.device), (D, V), slice(d, D))
    return _Spec(name, D, _placed(E, (V, D), slice(None), slice(0, d)),
                 E.new_zeros(_n_ctx(name, n_ctx, DEFAULT_N_CTX), D), W_U, blocks,
                 Interface("tokens", vocab_size=V))


def _spec_mean_field(model, name: str, n_ctx: int | None) -> _Spec:
    """``empirics.prenorm_gradients.MeanFieldTransformer`` (Pre-LN, one trial, final LayerNorm):
    uniform attention is a head with :math:`W_Q = W_K = 0`; LayerNorm without affine terms and
    with :math:`\\epsilon = 0` is TransformerLens's ``LNPre`` with ``eps=0``."""
    features = []
    if model.arch != "pre":
        features.append("Post-LN (LayerNorm after the residual sum)")
    if model.W_V.shape[1] != 1:
        features.append(f"a batch of {model.W_V.shape[1]} independent models (trials)")
    if model.arch == "pre" and not model.final_norm:
        features.append("Pre-LN without a final LayerNorm (TransformerLens normalises before the "
                        "unembedding whenever it normalises anywhere)")
    if features:
        raise UnsupportedConstructionError(name, features)
    W = model.W_V
    D = W.shape[-1]
    eye = torch.eye(D, dtype=W.dtype, device=W.device)
    blocks = []
    for layer in range(model.depth):
        uniform = Attention(W.new_zeros(D, 1), W.new_zeros(D, 1), model.W_V[layer, 0].detach(),
                            model.W_O[layer, 0].detach())
        ffn = MLP(model.W_1[layer, 0].detach(), W.new_zeros(model.W_1.shape[-1]),
                  model._W_2(layer)[0].detach(), W.new_zeros(D))
        every = slice(None)
        blocks.append((_attention(name, uniform, D, every, every),
                       _mlp(name, ffn, D, every, every)))
    return _Spec(name, D, W.new_zeros(1, D), W.new_zeros(_n_ctx(name, n_ctx, DEFAULT_N_CTX), D),
                 eye, tuple(blocks), Interface("residual", width=D, dtype=W.dtype), layer_norm=True)


_SPECS: dict[str, Callable[..., _Spec]] = {
    "constructions.induction_heads.InductionTransformer": _spec_induction,
    "constructions.layers.Attention": _spec_attention,
    "constructions.boltzmann.ContextualMapping": _spec_contextual_mapping,
    "constructions.boltzmann.MemorizingTransformer": _spec_memorizer,
    "constructions.boltzmann.EquivariantApproximator": _spec_equivariant,
    "constructions.layernorm_geometry.MajorityHead": _spec_majority,
    "empirics.prenorm_gradients.MeanFieldTransformer": _spec_mean_field,
}

# What the constructions that do not fit use, by class: (features, applies(model)).
_LOOPED = "looped (weight-shared) layers applied a variable number of times"
_UNSUPPORTED: dict[str, tuple[tuple[str, Callable[[nn.Module], bool]], ...]] = {
    "constructions.power_method.LoopedPowerTransformer": (
        (_LOOPED, lambda m: True),
        ("ℓ2 normalisation of each token (no mean-centring, unlike LayerNorm)",
         lambda m: m.normalize),
        ("linear attention (scores used without a softmax)", lambda m: True)),
    "constructions.icl_logistic.LoopedNGD": (
        (_LOOPED, lambda m: True),
        ("unnormalised exponential attention (exp of the scores, no softmax)",
         lambda m: not m.normalize),
        ("cross-attention from a separate query state to fixed example tokens (only the "
         "query state is updated)", lambda m: True)),
    "constructions.icl_regression.LinearSelfAttention": (
        ("linear attention (scores used without a softmax)", lambda m: True),),
    "constructions.icl_regression.MultiStepGD": (
        ("linear attention (scores used without a softmax)", lambda m: True),
        (_LOOPED, lambda m: m.mode == "loop"),
        ("chain-of-thought steps that append output tokens", lambda m: m.mode == "cot")),
    "constructions.ar_mesa.ARLinearAttention": (
        ("complex numbers", lambda m: True),
        ("linear attention (scores used without a softmax)", lambda m: True)),
    "constructions.bilinear.BilinearLayer": (
        ("a bilinear MLP (the product of two linear maps, no activation)", lambda m: True),),
    "constructions.fact_mlps.GatedEncoderDecoder": (
        ("a sigmoid-gated MLP (TransformerLens's gated MLP has no sigmoid activation)",
         lambda m: True),
        ("no attention or token sequence (a map on single vectors)", lambda m: True)),
    "constructions.fact_mlps.LinearAssociativeMemory": (
        ("no attention or token sequence (a linear map on single vectors)", lambda m: True),),
    "constructions.fact_mlps.FactTransformer": (
        ("hardmax (average-hard) attention", lambda m: m.attention.kind == "hardmax"),
        ("a fact-store MLP other than a ReLU/GELU MLP (linear, gated or encoder-decoder)",
         lambda m: not (isinstance(m.mlp, MLP) and m.mlp.activation in ("relu", "gelu")))),
    "constructions.hopfield.HopfieldUpdate": (
        ("attention over a fixed set of stored patterns rather than over the sequence",
         lambda m: True),),
}


def _scanned_features(model: nn.Module) -> list[str]:
    """What a module of an unregistered class uses that TransformerLens lacks."""
    features = []
    tensors = [*model.parameters(), *model.buffers()]
    if any(t.is_complex() for t in tensors):
        features.append("complex numbers")
    for sub in model.modules():
        if isinstance(sub, Looped):
            features.append(_LOOPED)
        elif isinstance(sub, L2Norm):
            features.append("ℓ2 normalisation of each token")
        elif isinstance(sub, Attention) and sub.kind != "softmax":
            features.append(f"{sub.kind} attention")
        elif isinstance(sub, LayerNorm):
            features.append("LayerNorm placed where no registered layout puts it")
    return list(dict.fromkeys(features))


def _spec(model: nn.Module, n_ctx: int | None) -> _Spec:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    cls = f"{type(model).__module__}.{type(model).__qualname__}"
    name = _name(model)
    if cls in _SPECS:
        return _SPECS[cls](model, name, n_ctx)
    if cls in _UNSUPPORTED:
        features = [feature for feature, applies in _UNSUPPORTED[cls] if applies(model)]
        raise UnsupportedConstructionError(name, features)
    raise UnsupportedConstructionError(name, _scanned_features(model))


def _padded(weight: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    return _placed(weight, shape, *(slice(0, s) for s in weight.shape))


def transformer_lens_layout(model: nn.Module, *, n_ctx: int | None = None
                            ) -> TransformerLensLayout:
    """The ``HookedTransformerConfig`` arguments and state dict of ``model``'s export (torch
    only; raises :class:`UnsupportedConstructionError` before anything is imported).

    ``n_ctx`` sets the context length of constructions without a positional embedding
    (default: their sequence length, or :data:`DEFAULT_N_CTX`); it is fixed otherwise.
    """
    spec = _spec(model, n_ctx)
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
            attn = _Attn(*(W.new_zeros(s) for s in ((1, D, 1), (1, D, 1), (1, D, 1), (1, 1, D))),
                         scale=1.0, causal=attns[0].causal if attns else True)
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
                mlp = _Mlp(W.new_zeros(D, 1), W.new_zeros(1), W.new_zeros(1, D), W.new_zeros(D),
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


def to_transformer_lens(model: nn.Module, *, n_ctx: int | None = None):
    """Export ``model`` as a ``transformer_lens.HookedTransformer`` that computes the same
    function (module docstring): same dtype and device, weights loaded without processing.

    Feed it :func:`transformer_lens_inputs` ``(model, x)`` and map its logits back with
    :func:`transformer_lens_outputs`. Raises :class:`UnsupportedConstructionError` (a
    ``ValueError``) naming what TransformerLens lacks, and ``ImportError`` without the
    ``interop`` extra.
    """
    layout = transformer_lens_layout(model, n_ctx=n_ctx)
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as error:
        raise ImportError(f"to_transformer_lens needs transformer-lens 2.x or 3.x (4.0 removed "
                          f"HookedTransformer): {INTEROP_HINT}") from error
    config = HookedTransformerConfig(**layout.config)
    with warnings.catch_warnings():
        # 3.x warns that HookedTransformer goes away in 4.0; the interop extra pins < 4.
        warnings.filterwarnings("ignore", message="HookedTransformer is deprecated",
                                category=DeprecationWarning)
        tl_model = HookedTransformer(config)
    state = tl_model.state_dict()
    parameters = {name for name, _ in tl_model.named_parameters()}
    if parameters - set(layout.state_dict) or set(layout.state_dict) - set(state):
        raise RuntimeError(f"the export of {_name(model)} does not match this TransformerLens's "
                           f"parameters: missing {sorted(parameters - set(layout.state_dict))}, "
                           f"unknown {sorted(set(layout.state_dict) - set(state))}")
    state.update(layout.state_dict)  # buffers (masks) stay TransformerLens's own
    tl_model.load_state_dict(state, strict=True)
    return tl_model.eval()


def transformer_lens_inputs(model: nn.Module, x: torch.Tensor) -> dict[str, Any]:
    """Keyword arguments for the export's ``forward``/``run_with_cache`` that correspond to
    ``model``'s input ``x``: ``{"input": tokens}`` (BOS prepended where the construction adds
    one) or ``{"input": residual, "start_at_layer": 0}`` for models of real vectors."""
    return _spec(model, None).interface.inputs(x)


def transformer_lens_outputs(model: nn.Module, logits: torch.Tensor) -> torch.Tensor:
    """The export's logits as ``model``'s output (BOS position dropped, scalar outputs
    squeezed), batched: ``(B, n, ...)``."""
    return _spec(model, None).interface.outputs(logits)


# One-line exports for the docs: builder -> the line (which the tests run).
EXPORT_LINES: dict[str, str] = {
    "constructions.induction_heads:two_layer_induction":
        "to_transformer_lens(two_layer_induction(vocab_size=5, max_len=8))",
    "constructions.induction_heads:compact_induction":
        "to_transformer_lens(compact_induction(vocab_size=5, max_len=8))",
    "constructions.boltzmann:rank_one_head":
        "to_transformer_lens(rank_one_head(torch.ones(3, dtype=torch.float64), rho=2.0))",
    "constructions.boltzmann:contextual_mapping":
        "to_transformer_lens(contextual_mapping(torch.randn(6, 4, dtype=torch.float64), "
        "seq_len=3))",
    "constructions.boltzmann:memorizing_transformer":
        "to_transformer_lens(memorizing_transformer(*labelled_sequences(8, 3, 4, 10, 2)))",
    "constructions.boltzmann:equivariant_approximator":
        "to_transformer_lens(equivariant_approximator(lambda x: x.sum(-1), seq_len=2, d=1, "
        "grid=3))",
    "constructions.layernorm_geometry:majority_head":
        "to_transformer_lens(majority_head(vocab_size=3, d=8, normalize=False))",
    "empirics.prenorm_gradients:mean_field_transformer":
        "to_transformer_lens(mean_field_transformer('pre', depth=2, d=8))",
}


def export_line(construction: str) -> str | None:
    """The one-line export of a claim's construction (``"module:builder"``) for its docs page,
    with its imports, or ``None`` when the construction does not export."""
    line = EXPORT_LINES.get(construction)
    if line is None:
        return None
    module, _, builder = construction.partition(":")
    names = [builder] + (["labelled_sequences"] if builder == "memorizing_transformer" else [])
    imports = (f"import torch\nfrom {module} import {', '.join(names)}\n"
               f"from constructions.export import to_transformer_lens\n")
    return imports + f"tl_model = {line}"
