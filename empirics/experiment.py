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
wall time, and a fingerprint of the experiment's source code.

Several seeds
-------------
:func:`run_seeds` runs seeds ``0..K-1`` of one config as a :func:`empirics.sweep.sweep`
(process pool or Ray), saves each as ``<config>-seed<k>.json``, and writes the aggregate as
``<config>.json``: per metric the mean, standard deviation, standard error and count over
seeds (:func:`empirics.sweep.aggregate`), with an error-bar figure. An experiment may add its
own aggregate figures with ``summarize(per_seed_dicts) -> {name: Figure}``. The aggregate's
``metrics`` are the means (numbers, like a one-seed result's) and ``spread`` holds the standard
deviation, standard error and count of each.

Published results and staleness
-------------------------------
Full-config results are published by running with ``--out empirics/results`` and committing
what it writes. A published result is *stale* when its ``record.code_fingerprint`` differs
from :meth:`Experiment.fingerprint`, i.e. the code it ran on has changed since;
:func:`is_stale` decides it and :func:`published` lists them (the docs use both).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import math
import pkgutil
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from empirics.plots import pyplot
from empirics.provenance import git_sha, interop_versions, json_ready, save_figure, utc_now
from empirics.training import pick_device

CONFIG_NAMES = ("smoke", "full")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


MetricPart = str | int | float | tuple[str, int | float]


def metric_key(*parts: MetricPart) -> str:
    """The one spelling of a :class:`Result` metric key: ``parts`` joined by ``/``.

    A part may itself be a key built here (a group of metrics). An int is written as is, a
    float with ``:g``, and a ``(label, number)`` pair as ``label=number``, so the experiment that
    writes a metric and the check that reads it cannot spell ``alpha=1`` and ``alpha=1.0``
    differently. Checks read a metric with :meth:`Result.metric` of the same parts; an
    experiment whose keys have a structure of their own wraps this in a typed function (for
    example :func:`empirics.ocr.metric_name`), which both sides call.

    >>> metric_key("factorized", ("wd", 0.0), "test_margin_min")
    'factorized/wd=0/test_margin_min'
    """
    if not parts:
        raise ValueError("metric_key: parts is empty")
    texts = []
    for part in parts:
        if isinstance(part, tuple) and len(part) == 2 and isinstance(part[0], str):
            text = f"{part[0]}={_number(part[1])}"
        elif isinstance(part, str):
            text = part
        else:
            text = _number(part)
        if not text:
            raise ValueError("metric_key: a part is empty")
        texts.append(text)
    return "/".join(texts)


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"metric_key: a part must be a str, a number or a (label, number) pair, "
                        f"not {value!r}")
    return str(value) if isinstance(value, int) else f"{value:g}"  # :g would write 1e+06


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

    def metric(self, *parts: MetricPart) -> float:
        """The metric named by :func:`metric_key` of ``parts``; a KeyError lists the keys."""
        key = metric_key(*parts)
        try:
            return self.metrics[key]
        except KeyError:
            raise KeyError(f"{self.experiment} has no metric {key!r}; it has "
                           f"{sorted(self.metrics)}") from None

    def rows(self, name: str) -> list[dict[str, Any]]:
        """The rows of table ``name`` as dicts keyed by its header."""
        table = self.tables[name]
        return [dict(zip(table["header"], row, strict=True)) for row in table["rows"]]

    def table(self, name: str, header: list[str], rows: list[list]) -> None:
        self.tables[name] = {"header": list(header), "rows": [list(r) for r in rows]}

    def as_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "config_name": self.config_name,
                "config": self.config, "seed": self.seed, "device": self.device,
                "metrics": self.metrics, "tables": self.tables, "training": self.training,
                "figures": sorted(self.figures), "record": self.record}

    def save(self, out: str | Path, *, stem: str | None = None) -> Path:
        """Write ``<out>/<experiment>/<stem>.json`` and its PNG figures; return the JSON path.

        ``stem`` defaults to the config name for seed 0 and ``<config>-seed<k>`` otherwise.
        Figures are written as ``<stem>-<figure>.png`` and closed.
        """
        directory = Path(out) / self.experiment
        directory.mkdir(parents=True, exist_ok=True)
        if stem is None:
            stem = self.config_name if self.seed == 0 else f"{self.config_name}-seed{self.seed}"
        names = _save_figures(self.figures, directory, stem)
        data = self.as_dict() | {"figures": names}
        path = directory / f"{stem}.json"
        path.write_text(json.dumps(json_ready(data), indent=1) + "\n")
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


EXPERIMENTS: dict[str, Experiment] = {}


def load_all() -> dict[str, Experiment]:
    """Import every experiment module of the ``empirics`` package and return the registry."""
    import empirics

    for module in pkgutil.iter_modules(empirics.__path__):
        # experiments register themselves on import; engine modules register nothing
        if not module.name.startswith("_"):
            importlib.import_module(f"empirics.{module.name}")
    return EXPERIMENTS


def get(name: str) -> Experiment:
    """The registered experiment called ``name`` (loading every experiment module first)."""
    experiments = load_all()
    if name not in experiments:
        raise ValueError(f"unknown experiment {name!r}; known: {sorted(experiments)}")
    return experiments[name]


def run_record(device: torch.device) -> dict[str, Any]:
    """Where and when a result was produced: device, versions (TransformerLens's and nnsight's
    ``None`` where not installed), commit and date."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"device": str(device), "device_name": name, "torch": torch.__version__,
            "python": platform.python_version(), **interop_versions(), "git_sha": git_sha(),
            "date": utc_now()}


# --- several seeds ---------------------------------------------------------------------------

def _run_seed(point: dict) -> dict:
    """One seed of one experiment, run and saved in a sweep worker; returns its JSON dict."""
    # import only the module that defines the experiment (not every experiment module)
    importlib.import_module(point["module"])
    experiment = EXPERIMENTS[point["experiment"]]
    result = experiment(point["config"], device=point["device"], seed=point["seed"],
                        **point["overrides"])
    stem = f"{point['config']}-seed{point['seed']}"
    path = result.save(point["out"], stem=stem) if point["out"] is not None else None
    data = json_ready(result.as_dict())
    data["path"] = str(path) if path is not None else None
    return data


def run_seeds(experiment: Experiment | str, config: str = "smoke", *,
              seeds: int | Sequence[int] = 1, device: str | torch.device = "auto",
              out: str | Path | None = None,
              workers: int | None = None, backend: str = "process", progress: bool = True,
              resume: bool = False, **overrides) -> dict[str, Any]:
    """Run several seeds of one config as a sweep, then aggregate and (optionally) save.

    Returns the aggregate dict (also written to ``<out>/<name>/<config>.json`` when ``out`` is
    given): ``metrics`` maps each metric to its mean over seeds, ``spread`` to its
    ``{"std", "sem", "n"}``, ``per_seed`` lists each seed's metrics and JSON path, ``tables``
    holds the first seed's tables (seed ``tables_seed``) and ``figures`` the error-bar figure,
    the experiment's ``summarize`` figures and the first seed's own, and ``record`` describes
    the run. Non-finite per-seed metrics are left out of the means.

    With ``resume`` (and ``out``), a seed whose result is already saved under ``out`` from the
    current code (same fingerprint), the same config and the same device is read back instead
    of run again, so an interrupted sweep continues where it stopped; ``record.resumed`` lists
    those seeds.
    """
    from empirics.sweep import aggregate, sweep

    experiment = get(experiment) if isinstance(experiment, str) else experiment
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list or any(s < 0 for s in seed_list):
        raise ValueError(f"seeds must be a positive count or non-empty seeds >= 0, got {seeds!r}")
    name, values = experiment.config(config, **overrides)  # validate before starting workers
    device = pick_device(device)
    if resume and out is None:
        raise ValueError("resume needs out: the folder the saved seeds are read from")
    saved = ({s: data for s in seed_list
              if (data := _saved_seed(experiment, out, config, s, values, device)) is not None}
             if resume else {})
    points = [{"experiment": experiment.name, "module": experiment.run.__module__,
               "config": config, "seed": s,
               "device": str(device), "overrides": overrides,
               "out": None if out is None else str(out)} for s in seed_list if s not in saved]
    # One GPU is shared by every worker process; on CUDA the seeds run one after another.
    if device.type == "cuda" and backend == "process":
        backend = "serial"
    started = time.perf_counter()
    fresh = sweep(_run_seed, points, workers=workers, backend=backend, progress=progress,
                  desc=f"{experiment.name} seeds") if points else []
    per_seed = sorted([*saved.values(), *fresh], key=lambda d: d["seed"])
    rows = [{**{k: v for k, v in d["metrics"].items() if _is_number(v)}} for d in per_seed]
    summary = aggregate(rows)[0] if rows else {}
    # "metrics" holds the means (numbers, as in a one-seed result); "spread" the rest
    data = {"experiment": experiment.name, "config_name": name, "config": values,
            "seeds": seed_list, "device": str(device),
            "metrics": {k: stats["mean"] for k, stats in summary.items()},
            "spread": {k: {"std": stats["std"], "sem": stats["sem"], "n": stats["n"]}
                       for k, stats in summary.items()},
            "per_seed": [{"seed": d["seed"], "metrics": d["metrics"], "path": d["path"]}
                         for d in per_seed],
            # an aggregate cannot average a table: it shows the first seed's, and says so
            "tables": per_seed[0].get("tables", {}) if per_seed else {},
            "tables_seed": per_seed[0]["seed"] if per_seed else None,
            "figures": {},
            # a resumed seed's wall time is the one its own record gives
            "record": {**run_record(device),
                       "wall_time": round(time.perf_counter() - started + sum(
                           d["record"].get("wall_time", 0.0) for d in saved.values()), 3),
                       "backend": backend, "code_fingerprint": experiment.fingerprint(),
                       "resumed": sorted(saved)}}
    if out is not None:
        directory = Path(out) / experiment.name
        directory.mkdir(parents=True, exist_ok=True)
        figures = {"seeds": seeds_figure(experiment.name, summary, per_seed)}
        if experiment.summarize is not None:
            figures.update(experiment.summarize(per_seed))
        data["figures"] = _save_figures(figures, directory, name)
        # the first seed's own figures, by their names (files beside it), unless taken
        first_seed = per_seed[0]["seed"]
        for figure in per_seed[0].get("figures") or ():
            file = f"{config}-seed{first_seed}-{figure}.png"
            if figure not in data["figures"] and (directory / file).is_file():
                data["figures"][figure] = file
        (directory / f"{name}.json").write_text(json.dumps(json_ready(data), indent=1) + "\n")
        data["path"] = str(directory / f"{name}.json")
    return data



def _saved_seed(experiment: Experiment, out: str | Path, config: str, seed: int,
                values: Mapping[str, Any], device: torch.device) -> dict | None:
    """Seed ``seed``'s saved result under ``out`` when it can stand for a fresh run: the same
    code fingerprint, config values and device; otherwise None."""
    path = Path(out) / experiment.name / f"{config}-seed{seed}.json"
    if not path.is_file():
        return None
    data = load_result(path)
    current = (data["record"].get("code_fingerprint") == experiment.fingerprint()
               and data.get("config") == json.loads(json.dumps(json_ready(dict(values))))
               and data.get("device") == str(device) and data.get("seed") == seed)
    return {**data, "path": str(path)} if current else None


def seeds_figure(title: str, summary: Mapping[str, Mapping], per_seed: Sequence[dict]):
    """One panel per metric: every seed's value, and the mean ± standard deviation."""
    plt = pyplot()

    metrics = sorted(summary)
    columns = min(4, max(1, len(metrics)))
    rows = max(1, math.ceil(len(metrics) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.6 * rows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics, strict=False):
        values = [d["metrics"].get(metric) for d in per_seed]
        values = [float(v) for v in values if _is_number(v)]
        stats = summary[metric]
        ax.scatter(range(len(values)), values, s=12, alpha=0.6, label="seeds")
        ax.errorbar([len(values) / 2 - 0.5], [stats["mean"]],
                    yerr=[0.0 if math.isnan(stats["std"]) else stats["std"]],
                    color="black", marker="s", capsize=4, label="mean ± std")
        ax.set_title(metric, fontsize=8)
        ax.set_xticks([])
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    fig.suptitle(f"{title}: {len(per_seed)} seeds", fontsize=9)
    fig.tight_layout()
    return fig


def _save_figures(figures: Mapping[str, Any], directory: Path, stem: str) -> dict[str, str]:
    return {name: save_figure(fig, directory / f"{stem}-{name}.png", dpi=120).name
            for name, fig in figures.items()}


# --- published results -------------------------------------------------------------------------

def load_result(path: str | Path) -> dict[str, Any]:
    """Read a saved result (one seed, or the aggregate of several)."""
    data = json.loads(Path(path).read_text())
    for key in ("experiment", "config_name", "record"):
        if key not in data:
            raise ValueError(f"{path} is not a saved experiment result (no {key!r})")
    return data


def published_result(name: str, config: str = "full", *, seed: int | None = None,
                     directory: str | Path = RESULTS_DIR) -> dict[str, Any]:
    """The published result of experiment ``name`` under ``config``, read with
    :func:`load_result`: ``<directory>/<name>/<config>.json`` (one seed's result, or the
    aggregate over seeds), or with ``seed`` given, that seed's own result (with its tables and
    record), which a multi-seed publication keeps beside the aggregate as
    ``<config>-seed<k>.json``.

    Raises ``FileNotFoundError`` naming the path and the command that publishes it."""
    path = Path(directory) / name / f"{config}.json"
    command = (f"python -m empirics run {name} --config {config} --seeds 3 "
               f"--out {RESULTS_DIR}")
    if not path.is_file():
        raise FileNotFoundError(f"no published {config!r} result of {name!r} at {path}: run "
                                f"{command}")
    data = load_result(path)
    if seed is None:
        return data
    if "per_seed" in data:  # an aggregate: the seed's own file sits beside it
        path = path.with_name(f"{config}-seed{seed}.json")
        if not path.is_file():
            raise FileNotFoundError(f"no published seed {seed} of {name!r} {config!r} at {path}: "
                                    f"run {command}")
        return load_result(path)
    if data.get("seed") != seed:
        raise FileNotFoundError(f"the published {config!r} result of {name!r} at {path} is "
                                f"seed {data.get('seed')}, not {seed}: run {command}")
    return data


def is_stale(result: str | Path | Mapping[str, Any]) -> bool:
    """True when the code a saved result ran on has changed since.

    Compares the result's ``record.code_fingerprint`` with the current
    :meth:`Experiment.fingerprint` of its experiment. A result without a fingerprint, or of
    an experiment that no longer exists, is stale.
    """
    data = load_result(result) if isinstance(result, (str, Path)) else result
    saved = data.get("record", {}).get("code_fingerprint")
    experiments = load_all()
    experiment = experiments.get(data.get("experiment"))
    return saved is None or experiment is None or saved != experiment.fingerprint()


def published(directory: str | Path = RESULTS_DIR) -> list[dict[str, Any]]:
    """Every result JSON under ``directory`` (default ``empirics/results``) with its status.

    Each entry: ``experiment``, ``config``, ``path``, ``seeds`` (list, for aggregates),
    ``device``, ``date`` and ``stale``. Per-seed files of an aggregate are skipped.
    """
    entries = []
    for path in sorted(Path(directory).glob("*/*.json")):
        try:
            data = load_result(path)
        except (ValueError, json.JSONDecodeError):
            continue
        if "-seed" in path.stem:
            continue
        entries.append({"experiment": data["experiment"], "config": data["config_name"],
                        "path": str(path), "seeds": data.get("seeds", [data.get("seed")]),
                        "device": data["record"].get("device_name", data.get("device")),
                        "date": data["record"].get("date"), "stale": is_stale(data)})
    return entries


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

