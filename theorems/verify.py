"""Run a verification: every check (or a subset) under a Hypothesis profile, in a pytest
subprocess, and return its report. The CLI (``python -m theorems verify``) and the site builder
(``python -m theorems docs``, when no evidence exists yet) both call :func:`verify`.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
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


def default_out(keyword: str | None, claims: Sequence[str] = ()) -> Path:
    """Where a run writes by default: the docs' evidence file, or the partial one for ``-k``
    or a selection of claims."""
    return evidence_file.PARTIAL_PATH if keyword or claims else evidence_file.DEFAULT_PATH


def check_keyword(keyword: str) -> None:
    """Raise ValueError when pytest's own ``-k`` parser rejects ``keyword``, so that a bad
    expression is reported in one line before any pytest run starts."""
    from _pytest.mark.expression import Expression  # the parser pytest's -k uses

    try:
        Expression.compile(keyword)
    except SyntaxError as error:
        raise ValueError(f"keyword {keyword!r} is not a pytest -k expression: {error.msg} "
                         f"(column {error.offset})") from None


def pytest_command(out: Path, *, profile: str = "ci", keyword: str | None = None,
                   claims: Sequence[str] = (), jobs: str = "auto",
                   slow: bool = False) -> list[str]:
    """The pytest command line of a verification (the checks only, not the suite's tests);
    ``claims`` selects the checks of those claim ids (the plugin's ``--theorems-claim``)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    if isinstance(claims, str):
        raise TypeError(f"claims must be a sequence of claim ids, got the string {claims!r}")
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
    command += [f"--theorems-claim={claim_id}" for claim_id in claims]
    if not slow:  # a claim whose every check is slow keeps them (theorems.plugin)
        command += ["-m", "not slow or sole_evidence"]
    if jobs != "0" and importlib.util.find_spec("xdist") is not None:
        command += ["-n", jobs]
    return command


def verify(out: str | Path | None = None, *, profile: str = "ci", keyword: str | None = None,
           claims: Sequence[str] = (), jobs: str = "auto", slow: bool = False,
           echo: bool = True) -> VerifyReport:
    """Run the checks (those matching ``keyword``, of the claims ``claims``, or all) and return
    the report; the evidence file is written to ``out``.

    pytest writes to a temporary file beside ``out``, which replaces ``out`` only when pytest
    finished its run (exit code 0, or 1 for failed tests): an interrupted run, one that selects
    no check, or one that stops on an error leaves the previous file as it was, and an old file
    is never read as this run's evidence.
    """
    if keyword is not None:
        check_keyword(keyword)
    out = Path(out) if out is not None else default_out(keyword, claims)
    temporary = out.with_name(f".{out.name}.verify-{os.getpid()}.tmp")
    command = pytest_command(temporary, profile=profile, keyword=keyword, claims=claims,
                             jobs=jobs, slow=slow)
    if echo:
        print("$ " + " ".join(command), flush=True)
    try:
        result = subprocess.run(command, check=False)
        written = result.returncode in (0, 1) and temporary.exists()
        if written:
            os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)
    if not written:
        return VerifyReport(out=out, returncode=result.returncode or 1, data=None)
    data = evidence_file.load(out)
    filtered = bool(keyword or claims)
    # A filtered run checks a subset by design, so "a claim has no check" is judged on full runs.
    checked = (None if filtered else
               {cid: r["summary"]["tiers"] for cid, r in data["claims"].items()})
    problems = tuple(inconsistencies(load_all(), data, checked))
    statuses = {cid: r["status"] for cid, r in data["claims"].items()}
    failing = tuple(cid for cid, status in statuses.items() if status == "failing")
    # On a full run every claim must have been checked: a skipped check (a missing tool, say)
    # leaves its claim unchecked, and that is not a pass.
    unchecked = () if filtered else tuple(cid for cid, status in statuses.items()
                                          if status == "unchecked")
    inconclusive = tuple(cid for cid, status in statuses.items() if status == "inconclusive")
    warnings = () if filtered else tuple(dependency_mismatches(load_all(), data))
    return VerifyReport(out=out, returncode=result.returncode, data=data, problems=problems,
                        failing=failing, unchecked=unchecked, inconclusive=inconclusive,
                        dependency_warnings=warnings)
