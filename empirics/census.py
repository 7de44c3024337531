"""How current the published empirics are: per experiment, its ``full`` result is current,
stale (its code changed since), single-seed, or missing. ``verify``'s summary and the docs
count these, so that nobody mistakes a stale or missing result for current evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from empirics.experiment import RESULTS_DIR, load_all, published


def census(directory: str | Path = RESULTS_DIR, config: str = "full") -> dict[str, Any]:
    """``{"experiments": n, "current": [...], "stale": [...], "missing": [...],
    "single_seed": [...]}``: names of the registered experiments by the state of their
    published ``config`` result (``single_seed`` lists current or stale ones from one seed)."""
    experiments = load_all()
    entries = {e["experiment"]: e for e in published(directory) if e["config"] == config}
    states: dict[str, list[str]] = {"current": [], "stale": [], "missing": [],
                                    "single_seed": []}
    for name in sorted(experiments):
        entry = entries.get(name)
        if entry is None:
            states["missing"].append(name)
            continue
        states["stale" if entry["stale"] else "current"].append(name)
        if len([s for s in entry["seeds"] if s is not None]) < 2:
            states["single_seed"].append(name)
    return {"experiments": len(experiments), "config": config, **states}


def summary_line(counts: dict[str, Any]) -> str:
    """One line: ``published empirics (full): 0 current, 7 stale, 9 missing of 16``."""
    return (f"published empirics ({counts['config']}): {len(counts['current'])} current, "
            f"{len(counts['stale'])} stale, {len(counts['missing'])} missing of "
            f"{counts['experiments']} experiments ({len(counts['single_seed'])} from one seed)")
