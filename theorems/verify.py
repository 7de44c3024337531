"""Run a verification: every check (or a subset) under a Hypothesis profile, in a pytest
subprocess, and return its report. The CLI (``python -m theorems verify``) and the site builder
(``python -m theorems docs``, when no evidence exists yet) both call :func:`verify`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from theorems import evidence_file
from theorems.claims import dependency_mismatches, inconsistencies, load_all

AREAS_DIR = Path(__file__).resolve().parent / "areas"
PROFILES = ("dev", "ci", "thorough")


@dataclass(frozen=True)
class VerifyReport:
    """What a verification produced: the evidence file (None if pytest wrote none), its data,
    pytest's exit code, the registry inconsistencies, and the failing, unchecked and
    inconclusive claims."""

    out: Path
    returncode: int
    data: dict | None
    problems: tuple[str, ...] = ()
    failing: tuple[str, ...] = field(default=())
    unchecked: tuple[str, ...] = field(default=())
    # sampled evidence whose interval did not decide: reported, not a failure of the run
    inconclusive: tuple[str, ...] = field(default=())
    # derived dependencies that disagree with depends_on: reported, not (yet) failing the run
    dependency_warnings: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """pytest ran (exit 0, or 1 for failed tests) and wrote evidence in which no claim is
        failing or, on a full run, unchecked, and the registry is consistent with it."""
        return (self.data is not None and not self.failing and not self.problems
                and not self.unchecked and self.returncode in (0, 1))


def default_out(keyword: str | None) -> Path:
    """Where a run writes by default: the docs' evidence file, or the partial one for ``-k``."""
    return evidence_file.PARTIAL_PATH if keyword else evidence_file.DEFAULT_PATH


def pytest_command(out: Path, *, profile: str = "ci", keyword: str | None = None,
                   jobs: str = "auto", slow: bool = False) -> list[str]:
    """The pytest command line of a verification (the checks only, not the suite's tests)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    # python_files names the area modules only, as pyproject does: pytest rewrites the asserts
    # of every imported module that matches it, so "*.py" rewrote all of torch, sympy and scipy
    # on every import (uncached where bytecode is not written), 2-4x the time of a small run.
    command = [sys.executable, "-m", "pytest", str(AREAS_DIR), "-q", "-p", "no:cacheprovider",
               "-o", "python_files=theorems/areas/*.py", "-o", "testpaths=", "-o", "addopts=",
               f"--rootdir={AREAS_DIR.parent.parent}",
               # registers the profiles before Hypothesis' plugin reads --hypothesis-profile
               "-p", "theorems.profiles", "--hypothesis-profile", profile,
               # one token: pytest takes a separate path argument into its rootdir search
               f"--evidence-out={out.resolve()}"]
    if keyword:
        command += ["-k", keyword]
    if not slow:  # a claim whose every check is slow keeps them (theorems.plugin)
        command += ["-m", "not slow or sole_evidence"]
    if jobs != "0" and importlib.util.find_spec("xdist") is not None:
        command += ["-n", jobs]
    return command


def verify(out: str | Path | None = None, *, profile: str = "ci", keyword: str | None = None,
           jobs: str = "auto", slow: bool = False, echo: bool = True) -> VerifyReport:
    """Run the checks and return the report; the evidence file is written to ``out``."""
    out = Path(out) if out is not None else default_out(keyword)
    command = pytest_command(out, profile=profile, keyword=keyword, jobs=jobs, slow=slow)
    if out.exists():
        out.unlink()  # a stale file must never be mistaken for this run's evidence
    if echo:
        print("$ " + " ".join(command), flush=True)
    result = subprocess.run(command, check=False)
    if not out.exists():
        return VerifyReport(out=out, returncode=result.returncode or 1, data=None)
    data = evidence_file.load(out)
    # A filtered run checks a subset by design, so "a claim has no check" is judged on full runs.
    checked = (None if keyword else
               {cid: r["summary"]["tiers"] for cid, r in data["claims"].items()})
    problems = tuple(inconsistencies(load_all(), data, checked))
    statuses = {cid: r["status"] for cid, r in data["claims"].items()}
    failing = tuple(cid for cid, status in statuses.items() if status == "failing")
    # On a full run every claim must have been checked: a skipped check (a missing tool, say)
    # leaves its claim unchecked, and that is not a pass.
    unchecked = () if keyword else tuple(cid for cid, status in statuses.items()
                                         if status == "unchecked")
    inconclusive = tuple(cid for cid, status in statuses.items() if status == "inconclusive")
    warnings = () if keyword else tuple(dependency_mismatches(load_all(), data))
    return VerifyReport(out=out, returncode=result.returncode, data=data, problems=problems,
                        failing=failing, unchecked=unchecked, inconclusive=inconclusive,
                        dependency_warnings=warnings)
