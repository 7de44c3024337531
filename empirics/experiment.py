"""The experiment interface: a name, a ``smoke`` and a ``full`` config, and ``run``.

An area's experiment module defines one or more :class:`Experiment` objects at import time::

    LN_MAJORITY = Experiment(
        name="ln-majority",
        description="LayerNorm makes majority learnable",
        claims=("layernorm.majority-learnable",),
        configs={"smoke": {...}, "full": {...}},
        run=run_ln_majority,           # (config: dict, device: torch.device, seed: int) -> Result
    )

``run`` trains with :func:`empirics.training.train`, compares the trained model with the
construction through gauge-invariant quantities, and returns a :class:`Result` holding those
metrics, its figures and tables. :meth:`Result.save` writes ``<out>/<name>/<config>.json``
plus one PNG per figure. The record carries the config, seed, device, versions, git SHA and
wall time, and a fingerprint of the experiment's source code, which is how the docs tell a
published result that has gone stale.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import math
import pkgutil
import platform
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from empirics.training import pick_device

CONFIG_NAMES = ("smoke", "full")
# Modules of the empirics package that hold the engine rather than an experiment.
ENGINE_MODULES = frozenset({"training", "experiment", "sweep", "compare", "bench", "plots",
                            "__main__", "cli"})


@dataclass
class Result:
    """Metrics comparing the trained model with the construction, plus figures and tables."""

    experiment: str
    config: dict[str, Any]
    seed: int
    device: str
    config_name: str = "custom"  # set by Experiment.__call__
    metrics: dict[str, float] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)   # name -> matplotlib Figure
    tables: dict[str, dict] = field(default_factory=dict)   # name -> {"header", "rows"}
    training: dict[str, Any] = field(default_factory=dict)  # TrainResult.as_record()s
    record: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str, header: list[str], rows: list[list]) -> None:
        self.tables[name] = {"header": list(header), "rows": [list(r) for r in rows]}

    def as_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "config_name": self.config_name,
                "config": self.config, "seed": self.seed, "device": self.device,
                "metrics": self.metrics, "tables": self.tables, "training": self.training,
                "figures": sorted(self.figures), "record": self.record}

    def save(self, out: str | Path) -> Path:
        """Write ``<out>/<experiment>/<config>.json`` and its PNG figures; return the JSON path."""
        import matplotlib.pyplot as plt

        directory = Path(out) / self.experiment
        directory.mkdir(parents=True, exist_ok=True)
        stem = self.config_name if self.seed == 0 else f"{self.config_name}-seed{self.seed}"
        names = {}
        for name, fig in self.figures.items():
            path = directory / f"{stem}-{name}.png"
            fig.savefig(path, dpi=120, bbox_inches="tight", metadata={"Software": None})
            plt.close(fig)
            names[name] = path.name
        data = self.as_dict() | {"figures": names}
        path = directory / f"{stem}.json"
        path.write_text(json.dumps(_finite(data), indent=1) + "\n")
        return path


@dataclass(frozen=True)
class Experiment:
    """A named gradient-descent experiment with a CPU ``smoke`` and a GPU ``full`` config."""

    name: str
    description: str
    configs: Mapping[str, Mapping[str, Any]]
    run: Callable[[dict, torch.device, int], Result]
    claims: tuple[str, ...] = ()
    code: tuple[str, ...] = ()  # further modules the result depends on, e.g. constructions

    def __post_init__(self) -> None:
        missing = [c for c in CONFIG_NAMES if c not in self.configs]
        if missing:
            raise ValueError(f"experiment {self.name!r} lacks configs {missing}")
        if self.name in EXPERIMENTS:
            raise ValueError(f"duplicate experiment name {self.name!r}")
        EXPERIMENTS[self.name] = self

    def __call__(self, config: str | Mapping[str, Any] = "smoke", *,
                 device: str | torch.device = "auto", seed: int = 0,
                 **overrides) -> Result:
        """Run a named config (with ``overrides``) or an explicit config dict."""
        if isinstance(config, str):
            if config not in self.configs:
                raise ValueError(f"config must be one of {sorted(self.configs)}, got {config!r}")
            name, values = config, dict(self.configs[config])
        else:
            name, values = "custom", dict(config)
        unknown = set(overrides) - set(values)
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)} for {self.name!r}")
        values.update(overrides)
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
        and the modules named in ``code``. The docs compare it to tell a stale result."""
        digest = hashlib.sha256()
        modules = [inspect.getmodule(self.run), *map(importlib.import_module,
                                                     ("empirics.training", *self.code))]
        for module in modules:
            try:
                digest.update(inspect.getsource(module).encode())
            except (OSError, TypeError):  # defined interactively: no source to hash
                digest.update(repr(module).encode())
        return digest.hexdigest()[:16]


EXPERIMENTS: dict[str, Experiment] = {}


def load_all() -> dict[str, Experiment]:
    """Import every experiment module of the ``empirics`` package and return the registry."""
    import empirics

    for module in pkgutil.iter_modules(empirics.__path__):
        if module.name not in ENGINE_MODULES and not module.name.startswith("_"):
            importlib.import_module(f"empirics.{module.name}")
    return EXPERIMENTS


def run_record(device: torch.device) -> dict[str, Any]:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = None
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": str(device), "device_name": name, "torch": torch.__version__,
            "python": platform.python_version(), "git_sha": sha,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
