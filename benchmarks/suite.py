"""Benchmark of the suite itself: what the README's test command and ``verify`` cost, and where.

::

    python benchmarks/suite.py [--skip-tests] [--skip-verify] [--out benchmarks/results]
                               [--evidence build/evidence.json]

A script, not a timed test: timings are facts about a machine and its load, never assertions.
Run it on a quiet machine. It measures

* the **README's test command** (read from README.md's second ``bash`` block, run verbatim with
  a JUnit report added): wall time, CPU time of the whole process tree (from
  ``getrusage(RUSAGE_CHILDREN)``), and the seconds of every test, summed per area;
* **``python -m theorems verify``** (ci profile): wall and CPU time, and per check its seconds
  and Hypothesis examples from the evidence it writes;
* the **start-up cost per worker**: one ``pytest --collect-only`` of the default selection, which
  imports every area module and the heavy libraries a worker loads before its first test;
* each area's seconds against its **budget**: the README's 120 s on 2 cores is 240 CPU-s, less
  the measured start-up of two workers; a fifth of the rest is the suite's own tests'
  (``(suite)``), and the other four fifths are shared among the areas in proportion to their
  claims (:func:`budgets`; CONTRIBUTING.md states the rule). What is over budget, the suite's
  own tests included, is listed (:func:`over_budget`).

It writes ``results.json`` and ``results.md`` (the tables the README links) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WALL_BUDGET_S = 120.0       # the README's test command, 2 cores
VERIFY_BUDGET_S = 180.0     # verify, 2 cores
CORES = 2
SUITE = "(suite)"           # the suite's own tests: those of no area


def readme_test_command() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)
    return blocks[1].strip()


def timed(command: list[str], env: dict | None = None) -> dict:
    """Run ``command`` in the repository; its wall time and the CPU time of its process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tail = done.stdout.strip().splitlines()[-1:] or [""]
    return {"command": shlex.join(command), "returncode": done.returncode, "wall_s": wall,
            "cpu_s": cpu, "summary": tail[0]}


def area_of(path: str) -> str:
    """The area a test file belongs to: ``theorems/areas/<area>[/...]`` or
    ``tests/test_<area>.py`` (suite tests of no area count as :data:`SUITE`)."""
    parts = Path(path).parts
    if len(parts) >= 3 and parts[:2] == ("theorems", "areas"):
        return Path(parts[2]).stem.replace("_", "-")
    if len(parts) == 2 and parts[0] == "tests" and parts[1].startswith("test_"):
        from theorems.claims import area_modules
        name = Path(parts[1]).stem.removeprefix("test_")
        return name.replace("_", "-") if name in area_modules() else SUITE
    return SUITE


def junit_seconds(report: Path) -> dict[str, float]:
    """Seconds per test node id from a JUnit XML report."""
    seconds: dict[str, float] = {}
    for case in ET.parse(report).iter("testcase"):
        path = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        seconds[f"{path}::{case.get('name')}"] = float(case.get("time") or 0)
    return seconds


def budgets(startup_cpu_s: float) -> dict[str, float]:
    """CPU-second budgets in the default run: of the 240 CPU-s of 120 s on 2 cores, less two
    workers' start-up, a fifth for the suite's own tests (:data:`SUITE`) and the rest for the
    areas, each in proportion to its claims."""
    from theorems.claims import load_all

    registry = load_all()
    counts: dict[str, int] = defaultdict(int)
    for claim in registry:
        counts[claim.area] += 1
    pool = WALL_BUDGET_S * CORES - CORES * startup_cpu_s
    shares = {area: pool * 0.8 * n / len(registry) for area, n in sorted(counts.items())}
    return {SUITE: pool * 0.2, **shares}


def over_budget(seconds: dict[str, float], budget: dict[str, float]) -> list[str]:
    """The areas (and :data:`SUITE`) whose seconds exceed their budget, sorted."""
    return sorted(a for a, s in seconds.items() if s > budget.get(a, float("inf")))


def run_tests() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        command = [*shlex.split(readme_test_command()), f"--junitxml={report}", "-q"]
        command[0:1] = [sys.executable] if command[0] == "python" else command[0:1]
        result = timed(command)
        per_test = junit_seconds(report) if report.exists() else {}
    per_area: dict[str, float] = defaultdict(float)
    for nodeid, seconds in per_test.items():
        per_area[area_of(nodeid.split("::")[0])] += seconds
    slowest = sorted(per_test.items(), key=lambda kv: -kv[1])[:15]
    return {**result, "per_area_s": dict(sorted(per_area.items())), "slowest": slowest}


def run_verify(out: Path | None = None) -> dict:
    """``verify`` into ``out`` (the evidence and its figures are kept there), or a temporary
    folder."""
    with tempfile.TemporaryDirectory() as tmp:
        out = out.resolve() if out is not None else Path(tmp) / "evidence.json"
        result = timed([sys.executable, "-m", "theorems", "verify", "--out", str(out)])
        data = json.loads(out.read_text()) if out.exists() else {"claims": {}}
    checks = [{"nodeid": c["nodeid"], "seconds": c.get("duration", 0.0),
               "examples": c.get("examples", 0), "area": claim_id.split(".")[0]}
              for claim_id, record in data["claims"].items() for c in record["checks"]]
    per_area: dict[str, float] = defaultdict(float)
    for c in checks:
        per_area[c["area"]] += c["seconds"]
    return {**result, "checks": sorted(checks, key=lambda c: c["nodeid"]),
            "per_area_s": dict(sorted(per_area.items()))}


def run_startup() -> dict:
    return timed([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist"])


def markdown(results: dict) -> str:
    lines = ["# Suite benchmark", "",
             f"Measured {results['when']} on {results['machine']} "
             f"(`python benchmarks/suite.py`; timings are this machine's, never asserted).", ""]
    lines += ["| what | wall s | CPU s | budget (wall) | result |", "|---|---|---|---|---|"]
    for key, label, budget in (("tests", "README test command", WALL_BUDGET_S),
                               ("verify", "`python -m theorems verify`", VERIFY_BUDGET_S),
                               ("startup", "one worker's start-up (collection)", None)):
        if key in results:
            r = results[key]
            lines.append(f"| {label} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | "
                         f"{'' if budget is None else f'{budget:.0f}'} | {r['summary']} |")
    if "tests" in results:
        over = results["over_budget"]
        lines += ["", "## Default run: CPU seconds per area against its budget", "",
                  "| area | s | budget s |", "|---|---|---|"]
        for area, seconds in results["tests"]["per_area_s"].items():
            budget = results["budgets"].get(area)
            mark = " **over**" if area in over else ""
            lines.append(f"| {area} | {seconds:.1f} | "
                         f"{'' if budget is None else f'{budget:.1f}'}{mark} |")
        lines += ["", "## Slowest tests of the default run", "", "| s | test |", "|---|---|"]
        lines += [f"| {s:.1f} | `{nodeid}` |" for nodeid, s in results["tests"]["slowest"]]
    if "verify" in results:
        lines += ["", "## verify: seconds and examples per area", "", "| area | s | checks |"
                  " examples |", "|---|---|---|---|"]
        by_area: dict[str, list] = defaultdict(list)
        for c in results["verify"]["checks"]:
            by_area[c["area"]].append(c)
        for area, checks in sorted(by_area.items()):
            lines.append(f"| {area} | {sum(c['seconds'] for c in checks):.1f} | {len(checks)} | "
                         f"{sum(c['examples'] for c in checks)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-verify", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--evidence", type=Path, default=None,
                        help="keep verify's evidence here (build/evidence.json, say)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at start"}
    print("start-up (collection) ...", flush=True)
    results["startup"] = run_startup()
    if not args.skip_tests:
        print("the README's test command ...", flush=True)
        results["tests"] = run_tests()
        results["budgets"] = budgets(results["startup"]["cpu_s"])
        results["over_budget"] = over_budget(results["tests"]["per_area_s"], results["budgets"])
    if not args.skip_verify:
        print("verify ...", flush=True)
        results["verify"] = run_verify(args.evidence)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    text = markdown(results)
    (args.out / "results.md").write_text(text)
    print(text)
    if results.get("over_budget"):
        print("over budget: " + ", ".join(results["over_budget"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
