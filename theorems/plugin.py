"""The pytest plugin that gathers the checks' evidence into the evidence file.

It is registered through the package's ``pytest11`` entry point, so it is loaded by every pytest
session in an environment where transformer-theorems is installed, including other people's.
It therefore minds its own business, as Hypothesis' own plugin does:

* importing it imports the standard library and pytest only (a test asserts this): no
  Hypothesis, no torch, no Hypothesis profile;
* it is active only when the session collects a check of this project (a test carrying the
  ``claim`` mark that :func:`theorems.evidence.check` adds) or ``--evidence-out`` is given;
  otherwise it adds two command-line options and does nothing else, writing no file;
* its state lives in ``config.stash``.

When active, each check runs inside a context-local recorder (see :mod:`theorems.evidence`).
With ``--theorems-calls`` (``verify`` passes it), it also runs under a profile hook that
records which public functions and classes of the ``constructions`` and ``empirics`` packages
(subpackages included) it calls (``calls`` in its record, as ``module:qualname`` with the
module that defines them): the dependencies a check actually exercises, which
:func:`theorems.claims.dependency_mismatches` compares with the declared ``depends_on``. The
hook is not free: the interpreter calls it on every Python and C call, which measured about
doubled the time of tensor-heavy checks (the power method's iteration bounds: 13 -> 27 CPU-s).
Only ``verify``'s evidence is read for dependencies, so a plain ``pytest`` run leaves it off
and its records carry no ``calls`` (which :func:`~theorems.claims.dependency_mismatches` does
not judge). Each check's record travels on the test report's
``user_properties``, so under pytest-xdist the controller receives every worker's records and
aggregates them. A complete run writes the evidence file the docs read
(:data:`theorems.evidence_file.DEFAULT_PATH`); a partial one (``-k``, ``-x`` stopping early, a
subset of the areas, or ``-m`` deselecting every check of some claim, as the project's
default ``-m`` does for the claims whose only checks are slow or in the training tier) writes
:data:`~theorems.evidence_file.PARTIAL_PATH` instead, marked ``partial``, unless
``--evidence-out`` names the file. A check that :func:`theorems.evidence.decide` ended as
inconclusive (pytest reports it skipped, with a reason starting ``inconclusive:``) is recorded
with outcome ``inconclusive``. ``verify`` runs those checks (every training-tier one, and a
slow one that is a claim's sole evidence) and writes the complete file.

``--theorems-claim ID`` (repeatable) runs only the checks whose ``claim`` mark names one of
those claims, matched by id at collection rather than by a ``-k`` substring; such a run is
partial too. ``--theorems-reuse PATH`` (``verify`` passes it after checking that ``PATH`` comes
from a run of the same commit, clean tree, profile and versions) deselects, after every other
selection, the checks whose records that file holds
(:func:`theorems.evidence_file.reusable_checks`) and writes their records into this run's
evidence as if they had run, their figures copied beside it: the file is the one running every
check would write, apart from times, and its ``run.reused`` says how many were taken.

The file is written to a temporary file beside it and renamed over it only once it is
complete, so a run that is interrupted (Ctrl-C) or runs no check leaves the previous file as it
was.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PROPERTY_KEY = "theorems-evidence"
_CLAIMS_KEY = "theorems-claims"
_SCOPES_KEY = "theorems-refutes"
_COLLECTED_KEY = "theorems-collected-claims"
_REUSED_KEY = "theorems-reused-checks"
# Added to the slow checks of a claim that has no other check, so that ``verify`` (which
# selects ``not slow or sole_evidence``) still checks every claim while ``pytest`` skips them.
SOLE_EVIDENCE = "sole_evidence"
# Added to every check of the empirical tier (a gradient-descent experiment's smoke run): the
# project's default ``-m`` (pyproject's addopts) leaves them to ``verify`` and ``-m training``,
# which keeps the default run within its budget; a check's tier, not a list kept by hand, decides.
TRAINING = "training"


@dataclass
class _State:
    """The plugin's per-session state (in ``config.stash``)."""

    started: float
    out: Path | None  # --evidence-out, if given
    active: bool = False
    checks: dict[str, list[dict]] = field(default_factory=dict)
    collected: int = 0  # check items this process collected
    collected_claims: set[str] = field(default_factory=set)  # before any deselection
    worker_claims: set[str] = field(default_factory=set)
    worker_refutes: dict[str, str | None] = field(default_factory=dict)
    reused: set[str] = field(default_factory=set)  # node ids deselected by --theorems-reuse
    written: Path | None = None


_STATE = pytest.StashKey[_State]()
_RECORDER = pytest.StashKey[object]()
_CALLS = pytest.StashKey[object]()
_FILES = pytest.StashKey[dict]()
_REUSABLE = pytest.StashKey[dict]()


def _construction_files() -> dict[str, tuple[str, bool]]:
    """File name -> (module name, whether it is part of ``constructions``) of every public
    module of the ``constructions`` and ``empirics`` packages, subpackages included.

    The files are found on disk, not imported (an empirics module may be heavy, and a check
    imports what it needs anyway). A module is public when no part of its dotted name starts
    with ``_`` (a package's ``__init__`` is the package itself): private modules such as
    ``constructions._validate`` are helpers that no claim names.
    """
    import importlib.util

    files = {}
    for package in ("constructions", "empirics"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        for root in spec.submodule_search_locations:
            for path in sorted(Path(root).rglob("*.py")):
                parts = [package, *path.relative_to(root).with_suffix("").parts]
                if parts[-1] == "__init__":
                    parts.pop()
                if any(part.startswith("_") for part in parts):
                    continue
                files[str(path)] = (".".join(parts), package == "constructions")
    return files


def _public(qualname: str) -> str | None:
    """The name a claim's ``construction`` would use for a called code object: ``f``,
    ``Cls`` for ``Cls.__init__``/``Cls.__call__``, ``Cls.method``; None for private helpers,
    lambdas and comprehensions."""
    parts = qualname.split(".")
    if parts[-1] in ("__init__", "__call__", "__post_init__") and len(parts) > 1:
        parts = parts[:-1]
    if any(p.startswith(("_", "<")) for p in parts):
        return None
    return ".".join(parts)


_CO_OPTIMIZED = 0x0001  # inspect.CO_OPTIMIZED (inspect is not imported: the plugin stays light)


def _importing(frame) -> bool:
    """Whether ``frame`` runs inside an import (``importlib``'s bootstrap is on the stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class _CallRecorder:
    """A ``sys.setprofile`` hook that records calls into the constructions modules.

    Only what the check itself runs counts: a function frame (``CO_OPTIMIZED``; a module or
    class body executed by an import is not a call of that class), and not one made while a
    module is being imported (import machinery on the stack): code a module runs when a check
    imports it first runs in whichever check imports it first, which depends on what the
    process imported before, so recording it would make the evidence depend on the order in
    which checks ran."""

    def __init__(self, files: dict[str, tuple[str, bool]]) -> None:
        self.files, self.calls, self.previous = files, set(), None

    def hook(self, frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_flags & _CO_OPTIMIZED:
            entry = self.files.get(frame.f_code.co_filename)
            if entry is not None:
                # direct: called from the check's own code (or an experiment's), not from
                # inside a construction
                caller = frame.f_back
                inside = caller is not None and self.files.get(caller.f_code.co_filename,
                                                               ("", False))[1]
                key = (entry[0], frame.f_code.co_qualname, not inside)
                if key not in self.calls and not _importing(caller):
                    self.calls.add(key)

    def __enter__(self) -> _CallRecorder:
        self.previous = sys.getprofile()
        sys.setprofile(self.hook)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self.previous)

    def names(self, direct_only: bool = False) -> list[str]:
        public = {(m, _public(q)) for m, q, direct in self.calls if direct or not direct_only}
        return sorted(f"{m}:{q}" for m, q in public if q is not None)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("theorems", "transformer-theorems evidence")
    group.addoption("--evidence-out", default=None,
                    help="where to write the evidence file (default: <rootdir>/build/"
                         "evidence.json for a complete run, evidence-partial.json otherwise)")
    group.addoption("--no-evidence", action="store_true",
                    help="do not write the evidence file")
    group.addoption("--theorems-calls", action="store_true",
                    help="record which constructions each check calls (verify does; it about "
                         "doubles the cost of tensor-heavy checks)")
    group.addoption("--theorems-claim", action="append", default=[], metavar="ID",
                    help="run only the checks of this claim (repeatable)")
    group.addoption("--theorems-reuse", default=None, metavar="PATH",
                    help="take the records of the checks this evidence file holds instead of "
                         "running them (verify passes it for a file of the same commit, clean "
                         "tree, profile and versions)")


def pytest_configure(config: pytest.Config) -> None:
    out = config.getoption("--evidence-out")
    config.stash[_STATE] = _State(started=time.time(), out=Path(out) if out else None,
                                  active=out is not None)
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Controller(config), "theorems-evidence-controller")
    if config.getoption("theorems_reuse", default=None):
        config.pluginmanager.register(_Reuse(), "theorems-evidence-reuse")


def _claim_mark(item: pytest.Item):
    return item.get_closest_marker("claim")


@pytest.hookimpl(tryfirst=True)  # before -m/-k deselect anything
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    checks = [item for item in items if _claim_mark(item) is not None]
    if not checks:
        return
    state = config.stash[_STATE]
    state.active, state.collected = True, len(checks)
    state.collected_claims = {_claim_mark(item).args[0] for item in checks}
    fast = {_claim_mark(item).args[0] for item in checks if item.get_closest_marker("slow") is None}
    for item in checks:
        if _claim_mark(item).args[0] not in fast:
            item.add_marker(SOLE_EVIDENCE)
        if _claim_mark(item).kwargs.get("tier") == "empirical":
            item.add_marker(TRAINING)
    from theorems.claims import TIERS, current_registry

    registry = current_registry()
    problems = []
    for item in checks:
        mark = _claim_mark(item)
        if len(mark.args) != 1 or set(mark.kwargs) != {"tier"}:
            problems.append(f"{item.nodeid}: use @check(claim, tier=...) (got {mark})")
        elif mark.kwargs["tier"] not in TIERS:
            problems.append(f"{item.nodeid}: unknown tier {mark.kwargs['tier']!r}")
        elif mark.args[0] not in registry:
            problems.append(f"{item.nodeid}: a check names unknown claim {mark.args[0]!r}")
    if problems:
        raise pytest.UsageError("invalid claim marks:\n  " + "\n  ".join(problems))
    # --theorems-claim: the checks of those claims, by their mark (``python -m theorems verify
    # --claim`` has checked the ids against the registry before starting pytest)
    selected = set(config.getoption("theorems_claim", default=None) or ())
    if selected:
        keep, dropped = [], []
        for item in items:
            mark = _claim_mark(item)
            (keep if mark is not None and mark.args[0] in selected else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    mark = _claim_mark(item)
    if mark is None:
        return (yield)
    from theorems.evidence import Recorder, recording

    figure_dir = _default_out(item.config).parent
    recorder = Recorder(claim=mark.args[0], tier=mark.kwargs["tier"], figure_dir=figure_dir,
                        name=item.name)
    item.stash[_RECORDER] = recorder
    if not item.config.getoption("theorems_calls", default=False):
        with recording(recorder):
            return (yield)
    files = item.config.stash.get(_FILES, None)
    if files is None:
        files = item.config.stash[_FILES] = _construction_files()
    calls = _CallRecorder(files)
    item.stash[_CALLS] = calls
    with recording(recorder), calls:
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    mark = _claim_mark(item)
    if mark is None:
        return report
    is_result = call.when == "call" or (call.when == "setup" and report.outcome != "passed")
    if not is_result:
        return report
    from empirics.provenance import json_ready
    from theorems.evidence import FAILURE_NOTE_PREFIXES, INCONCLUSIVE, Recorder, failure_text

    recorder = item.stash.get(_RECORDER, None) or Recorder(mark.args[0], mark.kwargs["tier"])
    record = {"nodeid": item.nodeid, "name": item.name, "claim": mark.args[0],
              "tier": mark.kwargs["tier"], "outcome": report.outcome,
              "duration": round(report.duration, 4), **recorder.as_dict(),
              "falsifying_example": None, "message": None}
    calls = item.stash.get(_CALLS, None)
    if calls is not None:  # recorded only under --theorems-calls
        record["calls"] = calls.names()
        record["direct_calls"] = calls.names(direct_only=True)
    if call.excinfo is not None:
        error = call.excinfo.value
        if report.outcome == "failed":
            notes = failure_text(error)
            record["falsifying_example"] = (notes if notes.startswith(FAILURE_NOTE_PREFIXES)
                                             else None)
        message = str(getattr(error, "msg", None) or error).strip()
        record["message"] = "\n".join(message.splitlines()[:6]) or type(error).__name__
        if report.outcome == "skipped" and message.startswith(INCONCLUSIVE):
            record["outcome"] = "inconclusive"  # theorems.evidence.decide: undecided interval
    report.user_properties.append((PROPERTY_KEY, json.dumps(json_ready(record))))
    return report


def _reusable(config: pytest.Config) -> dict[str, tuple[str, dict]]:
    """Node id -> (claim id, record) of what ``--theorems-reuse`` names (read once a process)."""
    found = config.stash.get(_REUSABLE, None)
    if found is None:
        from theorems import evidence_file

        path = Path(config.getoption("theorems_reuse"))
        found = config.stash[_REUSABLE] = evidence_file.reusable_checks(
            evidence_file.load(path), path.parent,
            calls=bool(config.getoption("theorems_calls", default=False)))
    return found


class _Reuse:
    """``--theorems-reuse``: deselects the checks whose records are reused."""

    @pytest.hookimpl(trylast=True)  # after -m, -k and --theorems-claim have selected
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        records = _reusable(config)
        reused = [item for item in items
                  if _claim_mark(item) is not None and item.nodeid in records]
        if reused:
            ids = {item.nodeid for item in reused}
            config.stash[_STATE].reused |= ids
            config.hook.pytest_deselected(items=reused)
            items[:] = [item for item in items if item.nodeid not in ids]


class _Controller:
    """The controller's half (or a run without xdist): gathers every check record that arrives
    on a test report, and the claim ids each xdist worker registered."""

    def __init__(self, config: pytest.Config) -> None:
        self.state = config.stash[_STATE]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, payload in report.user_properties:
            if key == PROPERTY_KEY:
                record = json.loads(payload)
                self.state.active = True
                self.state.checks.setdefault(record.pop("claim"), []).append(record)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """pytest-xdist: a worker finished; take the claim ids its collection registered."""
        output = getattr(node, "workeroutput", {})
        self.state.worker_claims.update(output.get(_CLAIMS_KEY, []))
        self.state.worker_refutes.update(output.get(_SCOPES_KEY, {}))
        self.state.collected_claims.update(output.get(_COLLECTED_KEY, []))
        self.state.reused.update(output.get(_REUSED_KEY, []))


def _default_out(config: pytest.Config) -> Path:
    state = config.stash[_STATE]
    if state.out is not None:
        return state.out
    from theorems.evidence_file import DEFAULT_PATH

    return Path(config.rootpath) / DEFAULT_PATH


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist sends the worker's output
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash[_STATE]
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: report which claims it registered
        if state.active:
            from theorems.claims import current_registry

            workeroutput[_CLAIMS_KEY] = sorted(current_registry().claims)
            workeroutput[_SCOPES_KEY] = {c.id: c.refutes for c in current_registry()}
            workeroutput[_COLLECTED_KEY] = sorted(state.collected_claims)
            workeroutput[_REUSED_KEY] = sorted(state.reused)
        return
    if not (state.checks or state.reused) or config.getoption("--no-evidence"):
        return  # no check ran: keep the last evidence file as it is, and write nothing
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return  # Ctrl-C: what ran is not this selection's evidence; keep the last file
    _write(session, state, exitstatus)


def _write(session: pytest.Session, state: _State, exitstatus: int) -> None:
    from theorems import evidence_file
    from theorems.claims import current_registry, load_all

    config = session.config
    registry = load_all()
    claim_ids = state.worker_claims | set(registry.claims) | set(current_registry().claims)
    refutes = {**state.worker_refutes,
               **{c.id: c.refutes for c in (*registry, *current_registry())}}
    selection = _selection(config)
    reused = _merge_reused(config, state)
    # A claim with no check collected at all (a subset of the areas was run), or whose every
    # check was deselected by -m (the slow-only claims in a default run), would read as
    # unchecked: such a run is partial and leaves the evidence `docs` reads alone.
    uncollected = claim_ids - state.collected_claims
    deselected = state.collected_claims - set(state.checks)
    stopped = bool(session.shouldstop or session.shouldfail)
    partial = bool(selection or uncollected or deselected or stopped)
    if state.out is not None:
        out = state.out
    else:
        out = Path(config.rootpath) / (evidence_file.PARTIAL_PATH if partial
                                       else evidence_file.DEFAULT_PATH)
    hypothesis = sys.modules.get("hypothesis")
    torch = sys.modules.get("torch")
    device = ("cuda: " + torch.cuda.get_device_name(0)
              if torch is not None and torch.cuda.is_available() else "cpu")
    seed = config.getoption("hypothesis_seed", default=None)
    run = evidence_file.run_metadata(
        state.started, int(getattr(config.option, "numprocesses", 0) or 0), partial=partial,
        selection=selection or _why_partial(uncollected, deselected, stopped),
        hypothesis_profile=(hypothesis.settings.get_current_profile_name()
                            if hypothesis is not None else None),
        hypothesis_seed=None if seed is None else str(seed), device=device, reused=reused)
    # Written beside the file and renamed over it only when complete: a reader (or a run
    # killed while writing) never sees half a file, and the previous one stays until then.
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        evidence_file.write(temporary, run,
                            evidence_file.claim_records(state.checks, sorted(claim_ids), refutes))
        os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)
    state.written = out


def _merge_reused(config: pytest.Config, state: _State) -> dict | None:
    """Put the reused records among this run's (their figures copied beside this run's
    evidence file); return ``run.reused`` (None when nothing was reused)."""
    if not state.reused:
        return None
    import shutil

    from theorems import evidence_file

    source = Path(config.getoption("theorems_reuse"))
    records = _reusable(config)
    folder = _default_out(config).parent
    for nodeid in sorted(state.reused):
        claim_id, record = records[nodeid]
        for figure in record.get("figures") or ():
            if (source.parent / figure).resolve() != (folder / figure).resolve():
                (folder / figure).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source.parent / figure, folder / figure)
        state.checks.setdefault(claim_id, []).append(dict(record))
    return {"checks": len(state.reused),
            "started": evidence_file.load(source)["run"].get("started")}


def _why_partial(uncollected: set[str], deselected: set[str], stopped: bool) -> str | None:
    """What made a run without ``-k`` partial, in words (None: it is complete)."""
    reasons = []
    if uncollected:
        reasons.append(f"{len(uncollected)} claims had no check collected")
    if deselected:
        reasons.append(f"{len(deselected)} claims had every check deselected by -m "
                       f"({', '.join(sorted(deselected))})")
    if stopped:
        reasons.append("stopped early")
    return "; ".join(reasons) or None


def _selection(config: pytest.Config) -> str | None:
    """The ``-k`` expression and the ``--theorems-claim`` ids, if any: either always makes a
    run partial."""
    keyword = config.getoption("keyword", default="")
    claims = sorted(set(config.getoption("theorems_claim", default=None) or ()))
    parts = ([f"-k {keyword}"] if keyword else []) + (
        [f"claims {', '.join(claims)}"] if claims else [])
    return "; ".join(parts) or None


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.written is not None:
        if state.reused:
            terminalreporter.write_line(f"theorems: {len(state.reused)} checks' records reused "
                                        f"from {config.getoption('theorems_reuse')}")
        terminalreporter.write_line(f"theorems: evidence for {len(state.checks)} checked "
                                    f"claims written to {state.written}")
    elif state is not None and state.checks and exitstatus == pytest.ExitCode.INTERRUPTED:
        terminalreporter.write_line("theorems: interrupted: no evidence written, the previous "
                                    "evidence file is unchanged")
