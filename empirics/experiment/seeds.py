"""Several seeds of one config (:func:`run_seeds`): run as a sweep, or read back from a saved
run of the same code, config and device, then aggregated (mean, spread) with an error-bar
figure (:func:`seeds_figure`)."""

from __future__ import annotations

import importlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from empirics.experiment.discovery import get
from empirics.experiment.interface import EXPERIMENTS, Experiment, run_record
from empirics.experiment.published import load_result, stands_for
from empirics.experiment.result import figure_file, save_figures
from empirics.plots import pyplot
from empirics.provenance import json_ready
from empirics.training import pick_device


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
        data["figures"] = save_figures(figures, directory, name)
        # the first seed's own figures, by their names (files beside it), unless taken
        first_seed = per_seed[0]["seed"]
        for figure in per_seed[0].get("figures") or ():
            file = figure_file(f"{config}-seed{first_seed}", figure)
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
    return ({**data, "path": str(path)} if stands_for(data, experiment, values, device, seed)
            else None)


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


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
