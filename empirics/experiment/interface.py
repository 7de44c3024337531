"""An experiment (:class:`Experiment`: a name, a ``smoke`` and a ``full`` config, optionally a
``cpu`` one, and ``run``), the
registry it joins when it is defined (:data:`EXPERIMENTS`), the fingerprint of the code a
result depends on (:meth:`Experiment.fingerprint`), and the record of where and when a result
was produced (:func:`run_record`)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import pkgutil
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from empirics.experiment.result import Result
from empirics.provenance import git_sha, interop_versions, utc_now
from empirics.training import pick_device

CONFIG_NAMES = ("smoke", "full")  # every experiment defines these
# Configs whose results are published under empirics/results, largest first: ``full`` is sized
# for a GPU; ``cpu``, optional, sits between smoke and full, sized for a few CPU-minutes a seed
# (on a machine without a GPU), large enough for the paper's trend to have a chance to show.
PUBLISHED_CONFIGS = ("full", "cpu")


@dataclass(frozen=True)
class Experiment:
    """A named gradient-descent experiment with a CPU ``smoke`` and a GPU ``full`` config, and
    optionally a ``cpu`` config between them (see :data:`PUBLISHED_CONFIGS`)."""

    name: str
    description: str
    configs: Mapping[str, Mapping[str, Any]]
    run: Callable[[dict, torch.device, int], Result]
    claims: tuple[str, ...] = ()
    code: tuple[str, ...] = ()  # further modules the result depends on, e.g. constructions
    # optional: figures over several seeds, from the per-seed Result.as_dict()s
    summarize: Callable[[list[dict]], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        missing = [c for c in CONFIG_NAMES if c not in self.configs]
        if missing:
            raise ValueError(f"experiment {self.name!r} lacks configs {missing}")
        if self.name in EXPERIMENTS:
            raise ValueError(f"duplicate experiment name {self.name!r}")
        EXPERIMENTS[self.name] = self

    def config(self, config: str | Mapping[str, Any] = "smoke",
               **overrides) -> tuple[str, dict[str, Any]]:
        """(name, values) of a named config (or an explicit dict) with ``overrides`` applied."""
        if isinstance(config, str):
            if config not in self.configs:
                raise ValueError(f"config must be one of {sorted(self.configs)}, got {config!r}")
            name, values = config, dict(self.configs[config])
        elif isinstance(config, Mapping):
            name, values = "custom", dict(config)
        else:
            raise TypeError(f"config must be a config name or a dict, got "
                            f"{type(config).__name__}")
        unknown = set(overrides) - set(values)
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)} for {self.name!r}; "
                             f"known: {sorted(values)}")
        values.update(overrides)
        return name, values

    def __call__(self, config: str | Mapping[str, Any] = "smoke", *,
                 device: str | torch.device = "auto", seed: int = 0,
                 **overrides) -> Result:
        """Run a named config (with ``overrides``) or an explicit config dict."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        name, values = self.config(config, **overrides)
        device = pick_device(device)
        started = time.perf_counter()
        result = self.run(values, device, seed)
        result.config_name = name
        result.record = {**run_record(device), "wall_time": round(time.perf_counter() - started,
                                                                  3),
                         "code_fingerprint": self.fingerprint(), **result.record}
        return result

    def fingerprint(self) -> str:
        """Hash of the code the result depends on: the module defining ``run``, the trainer,
        and the modules named in ``code`` (a package with every module in it: its
        ``__init__`` alone would miss a change to the construction it re-exports). The docs
        compare it to tell a stale result.

        What is hashed is each module's code without its docstrings and comments
        (:func:`code_without_docs`), so documenting an experiment (its measured run times,
        say) does not make its published results stale; any change to what runs does."""
        digest = hashlib.sha256()
        named = [inspect.getmodule(self.run), *map(importlib.import_module,
                                                   ("empirics.training", *self.code))]
        for module in [part for package in named for part in package_modules(package)]:
            try:
                digest.update(code_without_docs(inspect.getsource(module)).encode())
            except (OSError, TypeError):  # defined interactively: no source to hash
                digest.update(repr(module).encode())
        return digest.hexdigest()[:16]


def package_modules(module) -> list:
    """``module`` itself, then, for a package, every module below it in the order of their
    names (so the fingerprint does not depend on the order the file system lists them)."""
    if not hasattr(module, "__path__"):
        return [module]
    names = sorted(info.name for info in pkgutil.walk_packages(module.__path__,
                                                              prefix=module.__name__ + "."))
    return [module, *map(importlib.import_module, names)]


def code_without_docs(source: str) -> str:
    """``source`` re-printed from its syntax tree with every docstring removed.

    Comments and layout vanish with the round trip through :mod:`ast`; a docstring is the
    first statement of a module, class or function when it is a string constant. Sources that
    differ only in comments, docstrings and layout map to the same text (so do a few other
    spellings of the same code, such as a string's quotes)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


# name -> experiment: an Experiment adds itself when it is defined (see __post_init__)
EXPERIMENTS: dict[str, Experiment] = {}


def run_record(device: torch.device) -> dict[str, Any]:
    """Where and when a result was produced: device, versions (TransformerLens's and nnsight's
    ``None`` where not installed), commit and date."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": str(device), "device_name": name, "torch": torch.__version__,
            "python": platform.python_version(), **interop_versions(), "git_sha": git_sha(),
            "date": utc_now()}
