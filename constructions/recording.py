r"""How a construction was built: :func:`recorded` builders and :func:`build` attach a
:class:`BuildCall` (``builder(*args, **kwargs)``, the builder named ``"module:qualname"``) to the
module they return, which :func:`constructions.interop.files.save` writes and
:func:`constructions.interop.files.load` calls again.

The area modules of ``constructions`` import this module (and nothing else of the export):
it needs only the standard library, numpy and torch.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class BuildCall:
    """How a construction was built: ``builder(*args, **kwargs)``, with ``builder`` given as
    ``"module:qualname"``. Tensor arguments are stored as detached copies."""

    builder: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def rebuild(self, **overrides) -> nn.Module:
        """Call the builder again (with some keyword arguments replaced)."""
        return import_builder(self.builder)(*self.args, **{**self.kwargs, **overrides})


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


def import_builder(path: str) -> Any:
    """The object named ``"module:qualname"`` (a builder). Raises ``ValueError`` where no such
    module or attribute exists; an ``ImportError`` raised *inside* the module (a dependency it
    lacks) propagates as it is."""
    if not isinstance(path, str):
        raise TypeError(f"path must be a str 'module:qualname', got {type(path).__name__}")
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"path must be 'module:qualname', got {path!r}")
    try:
        target: Any = importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or not (module == error.name
                                      or module.startswith(error.name + ".")):
            raise  # the module exists but imports a package that is missing
        raise ValueError(f"path {path!r} names no module: {error}") from error
    for part in name.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as error:
            raise ValueError(f"path {path!r} names no object: {error}") from error
    return target


def public_module(obj: Any) -> str:
    """The module a user imports ``obj`` from: its defining module, or the package above it
    that re-exports the same object (an area that is a package re-exports its topic modules'
    API), so that recorded names do not depend on which topic module defines a builder."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise TypeError(f"obj must be a function or class (with __module__ and __qualname__), "
                        f"got {type(obj).__name__}")
    while "." in module and "." not in qualname:
        parent = module.rpartition(".")[0]
        if parent == "constructions":
            break
        try:
            found = import_builder(f"{parent}:{qualname}")
        except (ImportError, ValueError):
            break
        if inspect.unwrap(found) is not inspect.unwrap(obj):
            break
        module = parent
    return module


def _builder_path(builder: Callable) -> str:
    """``module:qualname`` of a builder, checked to import back to the same function."""
    if not callable(builder):
        raise TypeError(f"builder must be callable, got {type(builder).__name__}")
    module = getattr(builder, "__module__", None)
    qualname = getattr(builder, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise ValueError(f"builder {builder!r} is not importable by name (a lambda, local "
                         f"function or partial cannot be rebuilt from a file)")
    module = public_module(builder)
    path = f"{module}:{qualname}"
    try:
        found = import_builder(path)
    except (ImportError, ValueError) as error:
        raise ValueError(f"builder {path} does not import back: {error}") from error
    if inspect.unwrap(found) is not inspect.unwrap(builder):
        raise ValueError(f"builder {path} imports back to a different object")
    return path


def recorded(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    """Decorate a builder so that every module it returns carries its :class:`BuildCall`
    (as ``module.build_call``), which :func:`save` writes. The signature and docstring are
    unchanged."""
    if not callable(builder):
        raise TypeError(f"builder must be callable, got {type(builder).__name__}")
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
        try:
            path, builder = builder, import_builder(builder)
        except ValueError as error:  # import_builder names its parameter "path"
            raise ValueError(f"builder {str(error).removeprefix('path ')}") from error
    else:
        path = _builder_path(builder)
    model = builder(*args, **kwargs)
    if not isinstance(model, nn.Module):
        raise TypeError(f"{path} returned {type(model).__name__}, not an nn.Module")
    model.build_call = BuildCall(path, _frozen(args), _frozen(kwargs))
    return model


def build_call(model: nn.Module) -> BuildCall | None:
    """The recorded :class:`BuildCall` of ``model``, or ``None``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    call = getattr(model, "build_call", None)
    return call if isinstance(call, BuildCall) else None


def construction_name(model: nn.Module) -> str:
    """``builder (Class)`` when the build was recorded, else the class name."""
    call = build_call(model)
    cls = type(model).__name__
    return f"{call.builder.rpartition(':')[2]} ({cls})" if call else cls
