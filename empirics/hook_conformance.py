"""The hook-conformance report (:mod:`empirics.conformance`) as a published result: one table of
what each hook of each tool and version holds, measured against the exact activations.

The report runs once in this environment (torch, nnsight, the TransformerLens bridge of the
installed 4.x) and once in each third-party environment named by the config's ``venvs``
(:mod:`empirics.venvs`), whose TransformerLens (circuitkit's pins 3.8) adds the bridge and
``HookedTransformer`` of that version; ``python -m theorems.conformance --json`` runs there
and only its TransformerLens rows are kept (its torch rows repeat this environment's). An
environment that is missing is listed in the ``runs`` table as not run, with the path looked
at.
"""

from __future__ import annotations

import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from constructions.interop.files import installed_version
from empirics import venvs
from empirics.experiment import Experiment, Result, metric_key

INSTALL = {"circuitkit": "python3 -m venv VENV; VENV/bin/pip install torch==2.13.0; "
                         "VENV/bin/pip install circuitkit==0.2.0"}
RUNS = ["environment", "transformer-lens", "nnsight", "wall s", "CPU s", "outcome"]


def _tl_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from empirics.conformance import VERSIONS

    return [r for r in rows if VERSIONS.get(r["tool"]) == "transformer-lens"
            and r["band"] != "not run"]


def run(config: dict, device: torch.device, seed: int) -> Result:
    from empirics.conformance import HEADER, report, table

    cases = None if config["cases"] == "all" else list(config["cases"])
    result = Result("hook-conformance", config, seed, str(device))
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    rows = report(cases, batch=config["batch"], seed=seed)
    after = resource.getrusage(resource.RUSAGE_SELF)
    runs = [["this project's", installed_version("transformer-lens") or "-",
             installed_version("nnsight") or "-", round(time.perf_counter() - started, 1),
             round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1),
             "ok"]]
    for name in config["venvs"]:
        absent = venvs.missing(name, INSTALL.get(name, "see empirics/venvs.py"))
        if absent:
            runs.append([name, "-", "-", 0.0, 0.0, f"not run: {absent}"])
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "rows.json"
            args = ["--json", str(path), *[a for c in (cases or []) for a in ("--case", c)]]
            done = venvs.run_module(name, "theorems.conformance", *args)
            theirs = _tl_rows(json.loads(path.read_text())) if path.is_file() else []
        found = venvs.version(name, ("transformer-lens", "nnsight"))
        tail = (done.stderr.strip().splitlines() or [""])[-1][:200]
        runs.append([name, found["transformer-lens"] or "-", found["nnsight"] or "-",
                     done.wall_s, done.cpu_s,
                     "ok" if done.returncode == 0 else f"exit {done.returncode}: {tail}"])
        covered = {r["tool"] for r in theirs}
        rows = [r for r in rows if not (r["tool"] in covered and r["band"] == "not run")]
        rows += theirs
    rows.sort(key=lambda r: (r["tool"], str(r["version"]), r["hook"], r["meaning"]))
    result.table("hooks", HEADER, table(rows))
    result.table("runs", RUNS, runs)
    for row in rows:  # how many hooks break their name's promise, per tool and version
        if row["band"] != "not run":
            key = metric_key(f"{row['tool']} {row['version']}", "hooks not as named")
            result.metrics[key] = result.metrics.get(key, 0) + (not row["as named"])
    return result


HOOK_CONFORMANCE = Experiment(
    name="hook-conformance",
    description=("What each hook of torch, nnsight, the TransformerLens bridge (compatibility "
                 "mode on and off) and HookedTransformer holds, per tool and version, against "
                 "the exact activations of the exportable circuit constructions, and where "
                 "numbers drift."),
    configs={
        "smoke": {"cases": ["two-layer-induction"], "batch": 2, "venvs": []},
        "full": {"cases": "all", "batch": 4, "venvs": ["circuitkit"]},
    },
    run=run,
    code=("empirics.conformance", "empirics.venvs", "constructions.circuits",
          "constructions.interop"),
)
