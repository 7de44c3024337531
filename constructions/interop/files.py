r"""Constructions as shareable files: :func:`save` and :func:`load`.

A construction is written as ``NAME.safetensors`` (its ``state_dict``, plus any tensor
arguments of its builder under ``__args__/``) and a JSON sidecar ``NAME.json`` naming the
builder (``module:function``), the arguments it was called with, the versions that wrote it
and the SHA-256 of the weights. :func:`load` imports the builder, calls it again with those
arguments (so every non-tensor attribute, such as an attention ``scale``, is rebuilt by the
code that defines it), checks that the rebuilt weights equal the saved ones bit for bit
(``verify=True``), and loads the saved weights. A builder records its call when it is
decorated with :func:`~constructions.recording.recorded`, or when it is called through
:func:`~constructions.recording.build`.

``safetensors`` (the ``interop`` extra) is imported inside the functions that need it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from constructions.recording import BuildCall, build_call, import_builder, public_module

FORMAT = "transformer-theorems.construction"
FORMAT_VERSION = 1
ARGS_PREFIX = "__args__/"  # tensor arguments of the builder, beside the state dict
INTEROP_HINT = "pip install 'transformer-theorems[interop]'"


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


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (its package metadata; nothing is imported),
    or ``None`` where it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    if not isinstance(distribution, str):
        raise TypeError(f"distribution must be a str, got {type(distribution).__name__}")
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _versions() -> dict[str, str]:
    # "unknown": running from a source tree that was never installed
    return {"transformer-theorems": installed_version("transformer-theorems") or "unknown",
            "torch": torch.__version__}


def _paths(path: str | Path) -> tuple[Path, Path]:
    """(weights, sidecar) for ``NAME``, ``NAME.safetensors`` or ``NAME.json``, or for a bundle
    directory (:mod:`constructions.interop.bundle`): ``model.safetensors`` and ``config.json``."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    path = Path(path)
    if path.is_dir():
        return path / "model.safetensors", path / "config.json"
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
               "class": f"{public_module(type(model))}.{type(model).__qualname__}",
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

    ``path`` is ``NAME``, ``NAME.safetensors``, ``NAME.json`` or a bundle directory. With
    ``verify=True`` the weights the builder rebuilds must equal the saved ones bit for bit, else
    ``ValueError`` names the tensors that differ (a changed builder, or weights edited after
    building); ``verify=False`` loads the saved weights regardless. ``device`` overrides the
    recorded ``device`` argument. The result carries the :class:`BuildCall`, so it can be saved
    again.
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
    builder = import_builder(sidecar["builder"])
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
