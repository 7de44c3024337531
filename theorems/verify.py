"""Run a verification: every check (or a subset) under a Hypothesis profile, in a pytest
subprocess, and return its report. The CLI (``python -m theorems verify``) and the site builder
(``python -m theorems docs``, when no evidence exists yet) both call :func:`verify`.

A run does not repeat what an earlier run beside it already did: when ``evidence-partial.json``
in the output's folder (what ``pytest`` or a ``verify --area`` run writes) comes from the same
commit with a clean tree, the same profile and the same versions, and its checks recorded their
calls (``pytest --theorems-calls``), its records are reused (:func:`reuse_source`) and only
the other checks run: the evidence is what running them all writes, apart from times. A dirty
tree, another commit, profile or version, and ``reuse=False`` (``--no-reuse``) reuse nothing.
"""

from __future__ import annotations

import importlib.util
import os
import platform
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


def reuse_source(out: Path, profile: str) -> tuple[Path | None, str | None]:
    """The evidence file whose check records a verification into ``out`` under ``profile`` may
    reuse (``evidence-partial.json`` beside ``out``), or None; and what to tell the user (None
    when there is no such file).

    Reused only if a fresh run would record the same: the file's run is of the commit checked
    out now, with no tracked change then and no change, tracked or untracked, now; of
    ``profile`` without a fixed seed; of this Python, platform, torch, numpy and Hypothesis;
    and its checks recorded their calls, as verify's do. Which of its records qualify is
    :func:`theorems.evidence_file.reusable_checks`' to say."""
    from constructions.interop.files import installed_version  # torch: load_all imports it
    from empirics.provenance import git, git_sha

    source = out.parent / evidence_file.PARTIAL_PATH.name
    if not source.is_file():
        return None, None
    try:
        data = evidence_file.load(source)
    except (ValueError, KeyError) as error:
        return None, f"not reusing {source}: {error}"
    run = data.get("run", {})
    head, status = git_sha(), git("status", "--porcelain")
    installed = {"python": platform.python_version(), "platform": platform.platform(terse=True),
                 **{name: installed_version(name) for name in ("torch", "numpy", "hypothesis")}}
    reasons = [
        (head is None or status is None, "this is not a git checkout"),
        (run.get("git_sha") != head, f"it ran at commit {str(run.get('git_sha'))[:10]}, not "
                                     f"at {str(head)[:10]}"),
        (run.get("git_dirty") is not False, "it ran with uncommitted changes"),
        (bool(status), "the tree has changes (tracked or untracked) now"),
        (run.get("hypothesis_profile") != profile,
         f"it ran under the {run.get('hypothesis_profile')} profile, not {profile}"),
        (run.get("hypothesis_seed") is not None, "it ran with a fixed Hypothesis seed"),
        *((run.get(name) != version, f"it ran with {name} {run.get(name)}, not {version}")
          for name, version in installed.items()),
    ]
    for failed, reason in reasons:
        if failed:
            return None, f"not reusing {source}: {reason}; every check runs"
    found = evidence_file.reusable_checks(data, source.parent, calls=True)
    if not found:
        return None, (f"not reusing {source}: each of its checks was skipped or recorded no "
                      f"calls, which verify records (run pytest with --theorems-calls to make "
                      f"its run reusable)")
    return source, (f"reusing the records of up to {len(found)} checks from {source} (the run "
                    f"of {run.get('started')} at {head[:10]}, {profile} profile, clean tree); "
                    f"the others run now")


def pytest_command(out: Path, *, profile: str = "ci", keyword: str | None = None,
                   claims: Sequence[str] = (), jobs: str = "auto",
                   slow: bool = False, reuse: Path | None = None) -> list[str]:
    """The pytest command line of a verification (the checks only, not the suite's tests);
    ``claims`` selects the checks of those claim ids (the plugin's ``--theorems-claim``),
    ``reuse`` names an evidence file whose records stand for its checks (:func:`reuse_source`)."""
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
               f"--evidence-out={out.resolve()}",
               "--theorems-calls",  # the dependencies its checks exercise (dependency_mismatches)
               # entry-point plugins that play no part, imported by every process otherwise
               # (as pyproject's addopts, which this command replaces)
               "-p", "no:anyio", "-p", "no:jaxtyping", "-p", "no:typeguard"]
    if keyword:
        command += ["-k", keyword]
    command += [f"--theorems-claim={claim_id}" for claim_id in claims]
    if reuse is not None:
        command.append(f"--theorems-reuse={Path(reuse).resolve()}")
    if not slow:  # a claim whose every check is slow keeps them (theorems.plugin)
        command += ["-m", "not slow or sole_evidence"]
    if jobs != "0" and importlib.util.find_spec("xdist") is not None:
        command += ["-n", jobs]
    return command


def verify(out: str | Path | None = None, *, profile: str = "ci", keyword: str | None = None,
           claims: Sequence[str] = (), jobs: str = "auto", slow: bool = False,
           echo: bool = True, reuse: bool = True) -> VerifyReport:
    """Run the checks (those matching ``keyword``, of the claims ``claims``, or all) and return
    the report; the evidence file is written to ``out``. With ``reuse``, the records of an
    earlier run of the same code beside ``out`` stand for the checks they hold (module
    docstring); the evidence's ``run.reused`` says how many.

    pytest writes to a temporary file beside ``out``, which replaces ``out`` only when pytest
    finished its run (exit code 0, or 1 for failed tests): an interrupted run, one that selects
    no check, or one that stops on an error leaves the previous file as it was, and an old file
    is never read as this run's evidence.
    """
    if keyword is not None:
        check_keyword(keyword)
    out = Path(out) if out is not None else default_out(keyword, claims)
    temporary = out.with_name(f".{out.name}.verify-{os.getpid()}.tmp")
    source, message = reuse_source(out, profile) if reuse else (None, None)
    command = pytest_command(temporary, profile=profile, keyword=keyword, claims=claims,
                             jobs=jobs, slow=slow, reuse=source)
    if echo:
        if message:
            print(f"verify: {message}", flush=True)
        print("$ " + " ".join(command), flush=True)
    try:
        result = subprocess.run(command, check=False)
        # exit code 5 (no test ran) with reuse: every selected check's record was reused
        finished = (0, 1, 5) if source is not None else (0, 1)
        written = result.returncode in finished and temporary.exists()
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
    returncode = 0 if result.returncode == 5 else result.returncode
    return VerifyReport(out=out, returncode=returncode, data=data, problems=problems,
                        failing=failing, unchecked=unchecked, inconclusive=inconclusive,
                        dependency_warnings=warnings)
