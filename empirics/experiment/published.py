"""Published results (``full`` configs, or an experiment's ``cpu`` config, committed under
``empirics/results``): reading one
(:func:`load_result`, :func:`published_result`), whether the code it ran on has changed since
(:func:`is_stale`), the list of them with that status (:func:`published`), and a published
seed standing for a fresh run of the same code and config (:func:`reuse_or_run`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from empirics.experiment.discovery import load_all
from empirics.experiment.interface import Experiment
from empirics.experiment.result import Result
from empirics.provenance import json_ready

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


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


def stands_for(data: Mapping[str, Any], experiment: Experiment, values: Mapping[str, Any],
               device: torch.device | str, seed: int) -> bool:
    """Whether the saved one-seed result ``data`` can stand for a fresh run of ``experiment``
    with config ``values`` on ``device`` with ``seed``: the same code fingerprint, config
    values (compared as JSON), device and seed."""
    return (data["record"].get("code_fingerprint") == experiment.fingerprint()
            and data.get("config") == json.loads(json.dumps(json_ready(dict(values))))
            and data.get("device") == str(device) and data.get("seed") == seed)


def reuse_or_run(experiment: Experiment, config: str = "cpu", *, seed: int = 0,
                 directory: str | Path = RESULTS_DIR, **overrides) -> Result:
    """Seed ``seed`` of ``experiment`` at ``config`` (with ``overrides``) on the CPU: the
    published result when it :func:`stands_for` that run, else a fresh run.

    A content-hashed cache: the fingerprint hashes every module the run executes, so a
    published seed is reused only for the code that produced it, and a check reading the
    result sees what a fresh run on the same code gives (the published seeds and the checks
    both run torch single-threaded on the CPU). The returned result's ``record.reused`` names
    the file it was read from; its figures are the PNG paths saved beside it."""
    _, values = experiment.config(config, **overrides)
    folder = Path(directory) / experiment.name
    for path in (folder / f"{config}-seed{seed}.json", folder / f"{config}.json"):
        if not path.is_file():
            continue
        data = load_result(path)
        if "per_seed" not in data and stands_for(data, experiment, values, "cpu", seed):
            return _result_from(data, path)
    return experiment(config, device="cpu", seed=seed, **overrides)


def _result_from(data: Mapping[str, Any], path: Path) -> Result:
    """The :class:`Result` a saved one-seed JSON holds (non-finite metrics back to floats)."""
    metrics = {k: float(v) if v in ("nan", "inf", "-inf") else v
               for k, v in data["metrics"].items()}
    return Result(experiment=data["experiment"], config=dict(data["config"]), seed=data["seed"],
                  device=data["device"], config_name=data["config_name"], metrics=metrics,
                  figures={name: path.parent / file for name, file in data["figures"].items()},
                  tables=dict(data["tables"]), training=dict(data.get("training", {})),
                  record={**data["record"], "reused": str(path)})
