"""How current the published empirics are: per experiment, its largest published result
(``full``, else ``cpu``: :data:`~empirics.experiment.PUBLISHED_CONFIGS`) is current, stale (its
code changed since), single-seed, or missing. ``verify``'s summary and the docs count these, so
that nobody mistakes a stale or missing result for current evidence, and say which experiments
are published at the ``cpu`` size only, so that nobody mistakes one for the paper's scale."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from empirics.experiment import PUBLISHED_CONFIGS, RESULTS_DIR, load_all, published

LARGEST = "full, else cpu"  # how the counts name the config they read when none is asked for


def largest_config(configs: Iterable[str]) -> str | None:
    """The config among ``configs`` (those an experiment has published) that counts for it:
    the first of :data:`PUBLISHED_CONFIGS` present (``full``, else ``cpu``), or ``None``."""
    present = set(configs)
    return next((c for c in PUBLISHED_CONFIGS if c in present), None)


def census(directory: str | Path = RESULTS_DIR, config: str | None = None) -> dict[str, Any]:
    """``{"experiments": n, "config": ..., "current": [...], "stale": [...], "missing": [...],
    "single_seed": [...], "counted": {name: config}}``: names of the registered experiments by
    the state of their published result, read at ``config`` when given, else at the largest
    config each has published (:func:`largest_config`); ``counted`` says which config each
    published experiment was counted at, and ``single_seed`` lists current or stale ones from
    one seed."""
    experiments = load_all()
    entries: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in published(directory):
        entries.setdefault(entry["experiment"], {})[entry["config"]] = entry
    states: dict[str, list[str]] = {"current": [], "stale": [], "missing": [],
                                    "single_seed": []}
    counted: dict[str, str] = {}
    for name in sorted(experiments):
        mine = entries.get(name, {})
        chosen = config if config is not None else largest_config(mine)
        entry = mine.get(chosen) if chosen is not None else None
        if entry is None:
            states["missing"].append(name)
            continue
        counted[name] = chosen
        states["stale" if entry["stale"] else "current"].append(name)
        if len([s for s in entry["seeds"] if s is not None]) < 2:
            states["single_seed"].append(name)
    return {"experiments": len(experiments), "config": config or LARGEST, **states,
            "counted": counted}


def summary_line(counts: dict[str, Any]) -> str:
    """One line: ``published empirics (full, else cpu): 3 current, 7 stale, 9 missing of 19
    experiments (0 from one seed, 2 at cpu size)``."""
    cpu = sum(1 for c in counts.get("counted", {}).values() if c == "cpu")
    return (f"published empirics ({counts['config']}): {len(counts['current'])} current, "
            f"{len(counts['stale'])} stale, {len(counts['missing'])} missing of "
            f"{counts['experiments']} experiments ({len(counts['single_seed'])} from one seed, "
            f"{cpu} at cpu size)")
