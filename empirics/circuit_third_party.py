r"""Third-party circuit discovery scored against the exact circuits: two independent
implementations, each run in its own virtual environment on every case, written in MIB's
format and scored by :mod:`empirics.circuit_benchmark`.

* **MIB's EAP-IG**, as circuitkit 0.2.0 vendors it (``circuitkit.backends.eap``; Hanna et al.'s
  code, the MIB circuit track's): ``EAP`` and ``EAP-IG-inputs``
  (:mod:`empirics.third_party`), plus the same two with a local workaround of its one-head
  shape bug, as separate methods (``... + 1-head fix``) run only on the one-head cases.
* **auto-circuit 1.0.1** (Miller et al.'s code): EAP, EAP-IG over the edge masks and ACDC
  (:mod:`empirics.third_party_auto_circuit`).

They share no code: circuitkit's other backend, ``backends.acdc``, is a vendored copy of
auto-circuit, so running it too would score one implementation twice.

Per method and case (the ``variant`` is what the case id adds to its base case's, such as
``rotated``): AUROC, precision at :math:`|C|`, CPR and CMD, beside the exact circuit's own CPR
and CMD (what :math:`|C|` allows at MIB's percentages), the seed of the prompts
(:func:`~empirics.circuit_discovery.case_setup`'s rule) and the outcome: ``scored``, or the
package's exception, or why the case was skipped (it does not export to TransformerLens). The
``runs`` table gives each tool's versions, wall and CPU seconds. A tool whose environment is
missing (:mod:`empirics.venvs`: ``THEOREMS_VENV_CIRCUITKIT``, ``THEOREMS_VENV_AUTO_CIRCUIT``
or ``THEOREMS_VENVS``) is reported as not run, with the path looked at; the run goes on.

Measured (published ``full``, seed 0, every case at its smoke size, batch 64, on a 2-core CPU
shared with other jobs): circuitkit 12.5 CPU-s (19 s wall), auto-circuit 97 CPU-s (130 s wall,
ACDC most of it), 112 CPU-s for the whole run with the scoring; a first run under heavier
contention took 42 + 233 CPU-s. At the full sizes ACDC alone took over 3 CPU-minutes on one
two-head case, which is why ``full`` keeps the smoke sizes.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from constructions.circuits import all_cases
from empirics import venvs
from empirics.experiment import Experiment, Result, metric_key

TOOLS: dict[str, dict[str, Any]] = {
    "circuitkit": {
        "module": "empirics.third_party",
        "implementation": "MIB EAP-IG (circuitkit 0.2.0)",
        "methods": ("EAP", "EAP-IG-inputs", "EAP + 1-head fix", "EAP-IG-inputs + 1-head fix"),
        "distributions": ("circuitkit", "transformer-lens", "torch"),
        "install": "python3 -m venv VENV; VENV/bin/pip install torch==2.13.0; "
                   "VENV/bin/pip install circuitkit==0.2.0",
    },
    "auto-circuit": {
        "module": "empirics.third_party_auto_circuit",
        "implementation": "auto-circuit 1.0.1",
        "methods": ("auto-circuit EAP", "auto-circuit EAP-IG", "auto-circuit ACDC"),
        "distributions": ("auto-circuit", "transformer-lens", "torch"),
        "install": "python3 -m venv VENV; VENV/bin/pip install torch==2.13.0; "
                   "VENV/bin/pip install auto-circuit==1.0.1; VENV/bin/pip install "
                   "transformer-lens==2.18.0 'pyarrow<20' 'numpy<2' torch==2.13.0",
    },
}
SCORES = ["method", "implementation", "case", "variant", "size", "AUROC", "precision@|C|",
          "CPR", "CMD", "exact CPR", "exact CMD", "seed", "outcome"]
RUNS = ["tool", "versions", "environment", "cases", "wall s", "CPU s", "outcome"]
_LINE = re.compile(r"^(?P<case>[\w-]+): (?:(?P<method>.+?) )?(?P<what>written|fails: .*|"
                   r"skipped, .*)$")


def parse_line(line: str, methods: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """``(case, method, outcome)`` of one line a runner prints: ``"<case>: <method> written"``,
    ``"<case>: <method> fails: <why>"``, ``"<case>: [<method>] skipped, <why>"`` (without a
    method: every method of the tool). Other lines (the packages' own chatter) give ``[]``."""
    match = _LINE.match(line.strip())
    if not match:
        return []
    case, method, what = match["case"], match["method"], match["what"]
    if method is not None and method not in methods:
        return []
    return [(case, m, what) for m in ((method,) if method else methods)]


def variant_of(case: str, cases: tuple[str, ...]) -> tuple[str, str]:
    """(base case, variant): the longest other case id that ``case`` extends by ``-...``,
    and what it adds (``"-"`` for a base case)."""
    bases = [c for c in cases if case.startswith(c + "-")]
    if not bases:
        return case, "-"
    base = max(bases, key=len)
    return base, case[len(base) + 1:]


def _cell(value: float) -> float | str:
    return "nan" if isinstance(value, float) and math.isnan(value) else value


def run_tool(tool: str, config: dict, seed: int, out: Path
             ) -> tuple[list[tuple[str, str, str]], list[Any]]:
    """Run one tool's runner in its environment: (its outcomes, its ``runs`` row)."""
    spec = TOOLS[tool]
    methods = tuple(spec["methods"])
    cases = list(all_cases()) if config["cases"] == "all" else list(config["cases"])
    absent = venvs.missing(tool, spec["install"])
    if absent:
        return ([(c, m, f"not run: {absent}") for c in cases for m in methods],
                [tool, "-", str(venvs.venv(tool)), 0, 0.0, 0.0, f"not run: {absent}"])
    versions = venvs.version(tool, spec["distributions"])
    args = [str(out / tool), "--size", config["size"], "--batch", str(config["batch"]),
            "--seed", str(seed), *[a for c in cases for a in ("--case", c)]]
    done = venvs.run_module(tool, spec["module"], *args)
    outcomes = [o for line in done.stdout.splitlines() for o in parse_line(line, methods)]
    seen = {(c, m) for c, m, _ in outcomes}
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
    for case in cases:  # a runner that died part-way: the rest say how
        outcomes += [(case, m, f"fails: the runner exited {done.returncode}: {tail}")
                     for m in methods if (case, m) not in seen]
    row = [tool, ", ".join(f"{d} {v}" for d, v in versions.items()), str(venvs.venv(tool)),
           len(cases), done.wall_s, done.cpu_s,
           "ok" if done.returncode == 0 else f"exit {done.returncode}: {tail}"]
    return outcomes, row


def run(config: dict, device: torch.device, seed: int) -> Result:
    from empirics.circuit_benchmark import score_folder

    result = Result("circuit-third-party", config, seed, str(device))
    names = tuple(all_cases())
    rows, runs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for tool in config["tools"]:
            outcomes, row = run_tool(tool, config, seed, Path(tmp))
            runs.append(row)
            for case, method, outcome in outcomes:
                base, variant = variant_of(case, names)
                cells = [method, TOOLS[tool]["implementation"], base, variant, config["size"]]
                if outcome != "written":
                    rows.append([*cells, "", "", "", "", "", "", seed, outcome])
                    continue
                folder = Path(tmp) / tool / method / f"{case}_{config['size']}"
                scored = score_folder(folder, batch=config["batch"], seed=seed)
                for key in ("auroc", "precision", "cpr", "cmd"):
                    result.metrics[metric_key(case, method, key)] = scored[key]
                rows.append([*cells, *(_cell(scored[k]) for k in ("auroc", "precision",
                                                                   "cpr", "cmd")),
                             _cell(scored["reference"]["cpr"]),
                             _cell(scored["reference"]["cmd"]), seed, "scored"])
    result.table("scores", SCORES, rows)
    result.table("runs", RUNS, runs)
    return result


CIRCUIT_THIRD_PARTY = Experiment(
    name="circuit-third-party",
    description=("Two independent third-party circuit-discovery implementations, MIB's EAP-IG "
                 "(as circuitkit 0.2.0 vendors it) and auto-circuit 1.0.1, each run in its own "
                 "virtual environment on every circuit case, written in MIB's format and "
                 "scored against the exact circuits: AUROC, precision, CPR and CMD."),
    configs={
        "smoke": {"cases": ["two-layer-induction", "two-layer-induction-spurious-heads"],
                  "size": "smoke", "batch": 8, "tools": list(TOOLS)},
        # every case at its smoke size, batch 64 (the harness's): the third-party packages'
        # per-edge loops (ACDC: 20 thresholds x every edge) are CPU-bound here
        "full": {"cases": "all", "size": "smoke", "batch": 64, "tools": list(TOOLS)},
    },
    run=run,
    code=("constructions.circuits", "empirics.third_party", "empirics.third_party_auto_circuit",
          "empirics.circuit_benchmark", "empirics.circuit_formats", "empirics.circuit_discovery",
          "empirics.venvs"),
)
