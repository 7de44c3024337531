"""Evidence: what checks report, and the pytest plugin that writes ``build/evidence.json``.

Writing a check
---------------
::

    @check(LN_DECOMPOSITION, tier="property")
    @given(x=vectors())
    def test_layer_norm_is_scaled_projection(x):
        err = ...
        evidence.margin(tolerance - err)   # slack to the bound; the worst is kept
        assert err <= tolerance

``evidence`` is a module-level object, not a function-scoped fixture, so it works inside
``@given`` (Hypothesis rejects function-scoped fixtures there). It writes to a context-local
recorder that the plugin installs around each claim-marked test, and does nothing outside one
(for example when a mutant test in ``tests/`` re-runs a check on a broken construction).
A session-scoped ``evidence`` fixture returns the same object, for tests that prefer fixtures.

``evidence`` methods: ``margin(x)`` (worst = min), ``ratio(x)`` (tightness, worst = max),
``metric(name, value, worse="higher"|"lower")``, ``figure(fig, name)``,
``table(name, header, rows)``, ``cases(n)`` (examples checked without Hypothesis),
``counterexample(value)`` and ``proof(record)`` (what a proved-tier check compiled or
solved). Inside a Hypothesis test, each example's smallest margin and largest ratio are also
passed to ``hypothesis.target``, which steers the search towards the bound.

Evidence file schema (version 1)
--------------------------------
::

    {
      "schema": 1,
      "run": {"git_sha", "git_dirty", "started", "finished", "hypothesis_profile",
              "hypothesis_seed", "python", "torch", "numpy", "hypothesis", "platform",
              "device", "workers"},
      "claims": {
        "<claim id>": {
          "status": "verified" | "refuted" | "failing" | "unchecked",
          "summary": {"tiers": [...], "checks": int, "passed": int, "examples": int,
                      "worst_margin": float|null, "max_ratio": float|null, "duration": float},
          "checks": [{
              "nodeid", "name", "tier", "outcome": "passed"|"failed"|"skipped",
              "examples": int,            # Hypothesis test cases run + cases() reported
              "margin": {"worst", "last", "count"} | null,
              "ratio": {"worst", "last", "count"} | null,
              "metrics": {"<name>": {"worst", "last", "count", "worse"}},
              "tables": {"<name>": {"header": [...], "rows": [[...]]}},
              "figures": ["<path relative to the evidence file>"],
              "counterexample": str|null,     # pinned by a refutation check
              "proof": {"tool", "version", "source", "theorem", "trusts", "assumptions",
                        "seconds", "sha256", "cached"} | null,  # a proved-tier check
              "falsifying_example": str|null, # Hypothesis' report when the check failed
              "message": str|null,            # failure or skip reason, first lines
              "duration": float               # seconds (a time: not compared between runs)
          }]
        }
      }
    }

Non-finite floats are written as the strings ``"inf"``, ``"-inf"`` and ``"nan"``.
``proof.seconds`` (compile or solve time) and ``proof.cached`` (whether it came from the proof
cache, see :mod:`theorems.proving`) depend on the run, like the times. Checks are
sorted by node id, so runs under pytest-xdist give the same file as serial runs. Under xdist
each worker attaches its records to the test report's ``user_properties``; the controller
aggregates them. Only the ``started``/``finished``/``duration`` fields are times; with the
``ci`` profile two runs give the same file apart from those.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from theorems import profiles
from theorems.claims import STATUSES, TIERS, Claim, derive_status

SCHEMA_VERSION = 1
DEFAULT_PATH = Path("build") / "evidence.json"
_PROPERTY_KEY = "theorems-evidence"
_CLAIMS_KEY = "theorems-claims"
# How Hypothesis' failure notes begin ("Falsifying example", "Failing test case",
# "Failing explicit example", depending on its version and the phase).
FAILURE_NOTE_PREFIXES = ("Falsifying", "Failing")


# --- the recorder ------------------------------------------------------------------------

@dataclass
class _Extreme:
    """Running worst and last value of one reported quantity."""

    worse: str  # "higher" or "lower": which direction is worse
    worst: float | None = None
    last: float | None = None
    count: int = 0

    def add(self, value: float) -> None:
        value = float(value)
        self.last, self.count = value, self.count + 1
        if self.worst is None or math.isnan(value):
            self.worst = value
        elif not math.isnan(self.worst):
            self.worst = max(self.worst, value) if self.worse == "higher" else min(self.worst,
                                                                                   value)

    def as_dict(self) -> dict:
        return {"worst": self.worst, "last": self.last, "count": self.count, "worse": self.worse}


@dataclass
class Recorder:
    """Evidence from one check (one pytest test item)."""

    claim: str
    tier: str
    figure_dir: Path | None = None
    name: str = "check"
    examples: int = 0
    margin_: _Extreme = field(default_factory=lambda: _Extreme("lower"))
    ratio_: _Extreme = field(default_factory=lambda: _Extreme("higher"))
    metrics: dict[str, _Extreme] = field(default_factory=dict)
    tables: dict[str, dict] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    counterexample_: str | None = None
    proof_: dict | None = None
    # per-Hypothesis-example extremes, passed to hypothesis.target at the end of the example
    _example_margin: float | None = None
    _example_ratio: float | None = None

    def margin(self, value: float) -> float:
        value = float(value)
        self.margin_.add(value)
        if self._example_margin is None or value < self._example_margin:
            self._example_margin = value
        return value

    def ratio(self, value: float) -> float:
        value = float(value)
        self.ratio_.add(value)
        if self._example_ratio is None or value > self._example_ratio:
            self._example_ratio = value
        return value

    def metric(self, name: str, value: float, *, worse: str = "higher") -> float:
        if worse not in ("higher", "lower"):
            raise ValueError(f"worse must be 'higher' or 'lower', got {worse!r}")
        self.metrics.setdefault(name, _Extreme(worse)).add(value)
        return float(value)

    def table(self, name: str, header: Sequence[str], rows: Sequence[Sequence]) -> None:
        self.tables[name] = {"header": list(header), "rows": [list(r) for r in rows]}

    def cases(self, n: int) -> None:
        self.examples += int(n)

    def counterexample(self, value: object) -> None:
        """Pin the counterexample a refutation check found; it counts as one example."""
        self.counterexample_ = value if isinstance(value, str) else repr(value)
        self.examples += 1

    def proof(self, record: dict) -> None:
        """What a proved-tier check ran: tool, version, trusted axioms, time (theorems.proving)."""
        self.proof_ = dict(record)

    def figure(self, fig, name: str = "") -> str | None:
        """Save a matplotlib figure as PNG beside the evidence file and close it."""
        import matplotlib.pyplot as plt

        try:
            if self.figure_dir is None:
                return None
            stem = re.sub(r"[^\w.-]+", "_", self.name + (f"-{name}" if name else ""))
            path = self.figure_dir / "figures" / self.claim / f"{stem}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
            relative = path.relative_to(self.figure_dir).as_posix()
            if relative not in self.figures:
                self.figures.append(relative)
            return relative
        finally:
            plt.close(fig)

    def start_example(self) -> None:
        self._example_margin = self._example_ratio = None
        self.examples += 1

    def finish_example(self) -> None:
        from hypothesis import target

        # Scores are rounded to 8 significant digits: last-bit differences between runs (BLAS
        # kernels may vary with memory alignment) must not steer the derandomized search.
        if self._example_margin is not None and math.isfinite(self._example_margin):
            target(-float(f"{self._example_margin:.8g}"), label="negative worst margin")
        if self._example_ratio is not None and math.isfinite(self._example_ratio):
            target(float(f"{self._example_ratio:.8g}"), label="tightness ratio")

    def as_dict(self) -> dict:
        return {
            "examples": self.examples,
            "margin": self.margin_.as_dict() if self.margin_.count else None,
            "ratio": self.ratio_.as_dict() if self.ratio_.count else None,
            "metrics": {k: v.as_dict() for k, v in sorted(self.metrics.items())},
            "tables": self.tables,
            "figures": self.figures,
            "counterexample": self.counterexample_,
            "proof": self.proof_,
        }


class _NullRecorder(Recorder):
    """Accepts every report and keeps nothing: evidence outside a claim-marked test."""

    def __init__(self) -> None:
        super().__init__(claim="", tier="")

    def figure(self, fig, name: str = "") -> None:
        import matplotlib.pyplot as plt

        plt.close(fig)

    def finish_example(self) -> None:
        pass


_NULL = _NullRecorder()
_CURRENT: ContextVar[Recorder | None] = ContextVar("evidence_recorder", default=None)


class _Evidence:
    """Forwards every call to the recorder of the running check (see the module docstring)."""

    def __getattr__(self, name: str):
        recorder = _CURRENT.get() or _NULL
        return getattr(recorder, name)

    @property
    def active(self) -> bool:
        return _CURRENT.get() is not None


evidence = _Evidence()


@contextlib.contextmanager
def recording(recorder: Recorder | None) -> Iterator[Recorder | None]:
    """Install ``recorder`` (or none) as the current one for the block."""
    token = _CURRENT.set(recorder)
    try:
        yield recorder
    finally:
        _CURRENT.reset(token)


# --- linking checks to claims -------------------------------------------------------------

def check(claim: Claim | str, tier: str) -> Callable:
    """Mark a test as a check of ``claim`` in ``tier``; count its Hypothesis examples.

    Apply it above ``@given``. It adds ``pytest.mark.claim(id, tier=tier)`` and, for a
    Hypothesis test, wraps the documented, reassignable ``.hypothesis.inner_test`` so that
    each example is counted and its worst margin is fed to ``hypothesis.target``.
    """
    claim_id = claim.id if isinstance(claim, Claim) else claim
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")

    def decorate(fn: Callable) -> Callable:
        hypothesis_handle = getattr(fn, "hypothesis", None)
        if hypothesis_handle is not None:
            inner = hypothesis_handle.inner_test

            @functools.wraps(inner)
            def counted(*args, **kwargs):
                recorder = evidence if evidence.active else _NULL
                recorder.start_example()
                result = inner(*args, **kwargs)
                recorder.finish_example()
                return result

            hypothesis_handle.inner_test = counted
        return pytest.mark.claim(claim_id, tier=tier)(fn)

    return decorate


def declared_checks() -> dict[str, list[str]]:
    """Claim id -> tiers of the checks declared in the area modules, without running pytest.

    Found by introspection of each area module's ``test_*`` functions and their ``claim``
    marks, so the registry's consistency can be tested in milliseconds.
    """
    import importlib

    from theorems.claims import area_modules, topic_modules

    declared: dict[str, list[str]] = {}
    for name in (topic for area in area_modules() for topic in topic_modules(area)):
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if not attribute.startswith("test") or not callable(value):
                continue
            for mark in getattr(value, "pytestmark", []):
                if mark.name == "claim":
                    declared.setdefault(mark.args[0], []).append(mark.kwargs.get("tier"))
    return declared


def expect_failure(fn: Callable, *args, **kwargs) -> str:
    """Run a check and require it to fail with an assertion; return what it reported.

    Mutant tests use this on a check rebuilt around a broken construction, and refutation
    checks use it on the claim *as stated*. For a Hypothesis check the returned text is its
    falsifying example. Errors other than assertions propagate: a check must report failure,
    not crash. Evidence reporting is suspended meanwhile, so the outer check's evidence is
    not polluted by the run it expects to fail.
    """
    with recording(None), _closing_new_figures():
        try:
            fn(*args, **kwargs)
        except AssertionError as error:
            return failure_text(error)
        except ExceptionGroup as group:  # Hypothesis reports several distinct failures so
            if group.subgroup(AssertionError) is None or group.subgroup(
                    lambda e: not isinstance(e, (AssertionError, ExceptionGroup))):
                raise
            return failure_text(group)
    raise AssertionError(f"{getattr(fn, '__name__', fn)} passed, but it was expected to fail")


@contextlib.contextmanager
def _closing_new_figures() -> Iterator[None]:
    """Close the matplotlib figures a check opened: one that fails never hands them over."""
    import sys

    pyplot = sys.modules.get("matplotlib.pyplot")
    before = set(pyplot.get_fignums()) if pyplot else set()
    try:
        yield
    finally:
        pyplot = sys.modules.get("matplotlib.pyplot")
        for number in set(pyplot.get_fignums()) - before if pyplot else ():
            pyplot.close(number)


def failure_text(error: BaseException) -> str:
    """Hypothesis' "Falsifying example" notes if any, else the error's first line."""
    notes: list[str] = []
    stack = [error]
    while stack:
        err = stack.pop()
        notes.extend(n for n in getattr(err, "__notes__", ())
                     if n.startswith(FAILURE_NOTE_PREFIXES))
        if isinstance(err, BaseExceptionGroup):
            stack.extend(err.exceptions)
    if notes:
        return "\n".join(notes)
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


# --- JSON helpers --------------------------------------------------------------------------

def _jsonable(value):
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy or torch scalar
        return _jsonable(value.item())
    return value


def as_float(value) -> float | None:
    """Inverse of the non-finite encoding, for readers of the evidence file."""
    if value is None:
        return None
    return float(value)


def summarize(checks: list[dict]) -> dict:
    def extreme(key: str, pick: Callable) -> float | None:
        values = [as_float(c[key]["worst"]) for c in checks if c.get(key)]
        return pick(values) if values else None

    return {
        "tiers": sorted({c["tier"] for c in checks}, key=TIERS.index),
        "checks": len(checks),
        "passed": sum(c["outcome"] == "passed" for c in checks),
        "examples": sum(c["examples"] for c in checks),
        "worst_margin": extreme("margin", min),
        "max_ratio": extreme("ratio", max),
        "duration": round(sum(c["duration"] for c in checks), 3),
    }


def claim_records(checks_by_claim: dict[str, list[dict]], claim_ids: Sequence[str]) -> dict:
    records = {}
    for claim_id in sorted(set(claim_ids) | set(checks_by_claim)):
        checks = sorted(checks_by_claim.get(claim_id, []), key=lambda c: c["nodeid"])
        records[claim_id] = {"status": derive_status(checks), "summary": summarize(checks),
                             "checks": checks}
    return records


def load(path: str | os.PathLike = DEFAULT_PATH) -> dict:
    """Read an evidence file, checking its schema version."""
    data = json.loads(Path(path).read_text())
    if data.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"{path}: evidence schema {data.get('schema')!r}, "
                         f"expected {SCHEMA_VERSION}")
    for claim_id, record in data["claims"].items():
        if record["status"] not in STATUSES:
            raise ValueError(f"{path}: claim {claim_id} has unknown status {record['status']!r}")
    return data


def run_metadata(started: float, workers: int) -> dict:
    import hypothesis
    import numpy
    import torch

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {
        "git_sha": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hypothesis_profile": profiles.current_profile(),
        "hypothesis_seed": os.environ.get("THEOREMS_HYPOTHESIS_SEED"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "hypothesis": hypothesis.__version__,
        "platform": platform.platform(terse=True),
        "device": device,
        "workers": workers,
    }


# --- the pytest plugin ---------------------------------------------------------------------

_RECORDER_KEY = pytest.StashKey[Recorder]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("theorems", "transformer-theorems evidence")
    group.addoption("--evidence-out", default=None,
                    help=f"where to write the evidence file (default: <rootdir>/{DEFAULT_PATH})")
    group.addoption("--no-evidence", action="store_true",
                    help="do not write the evidence file")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "claim(id, tier): links a check to a claim and a tier")
    out = config.getoption("--evidence-out")
    config._theorems_out = Path(out) if out else Path(config.rootpath) / DEFAULT_PATH
    config._theorems_started = time.time()
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(EvidenceCollector(config), "theorems-evidence-collector")
    seed = config.getoption("hypothesis_seed", default=None)
    if seed is not None:
        os.environ["THEOREMS_HYPOTHESIS_SEED"] = str(seed)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker, send the ids of the claims its collection registered."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from theorems.claims import current_registry

        workeroutput[_CLAIMS_KEY] = sorted(current_registry().claims)


def _claim_mark(item: pytest.Item):
    return item.get_closest_marker("claim")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from theorems.claims import current_registry

    registry = current_registry()
    problems = []
    for item in items:
        mark = _claim_mark(item)
        if mark is None:
            continue
        if len(mark.args) != 1 or set(mark.kwargs) != {"tier"}:
            problems.append(f"{item.nodeid}: use @check(claim, tier=...) (got {mark})")
        elif mark.kwargs["tier"] not in TIERS:
            problems.append(f"{item.nodeid}: unknown tier {mark.kwargs['tier']!r}")
        elif mark.args[0] not in registry:
            problems.append(f"{item.nodeid}: a check names unknown claim {mark.args[0]!r}")
    if problems:
        raise pytest.UsageError("invalid claim marks:\n  " + "\n  ".join(problems))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    mark = _claim_mark(item)
    if mark is None:
        return (yield)
    recorder = Recorder(claim=mark.args[0], tier=mark.kwargs["tier"],
                        figure_dir=item.config._theorems_out.parent, name=item.name)
    item.stash[_RECORDER_KEY] = recorder
    with recording(recorder):
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
    recorder = item.stash.get(_RECORDER_KEY, None) or Recorder(mark.args[0], mark.kwargs["tier"])
    record = {"nodeid": item.nodeid, "name": item.name, "claim": mark.args[0],
              "tier": mark.kwargs["tier"], "outcome": report.outcome,
              "duration": round(report.duration, 4), **recorder.as_dict(),
              "falsifying_example": None, "message": None}
    if call.excinfo is not None:
        error = call.excinfo.value
        if report.outcome == "failed":
            notes = failure_text(error)
            record["falsifying_example"] = (notes if notes.startswith(FAILURE_NOTE_PREFIXES)
                                             else None)
        message = str(getattr(error, "msg", None) or error).strip()
        record["message"] = "\n".join(message.splitlines()[:6]) or type(error).__name__
    report.user_properties.append((_PROPERTY_KEY, json.dumps(_jsonable(record))))
    return report


class EvidenceCollector:
    """Controller-side half of the plugin: aggregates records and writes the evidence file."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.checks: dict[str, list[dict]] = {}
        self.claim_ids: set[str] = set()  # claims registered where tests were collected
        self.written: Path | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, payload in report.user_properties:
            if key == _PROPERTY_KEY:
                record = json.loads(payload)
                self.checks.setdefault(record.pop("claim"), []).append(record)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """pytest-xdist: a worker finished; take the claim ids its collection registered."""
        self.claim_ids.update(getattr(node, "workeroutput", {}).get(_CLAIMS_KEY, []))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.config.getoption("--no-evidence") or not self.checks:
            return  # no claim was checked: keep the last evidence file as it is
        from theorems.claims import current_registry, load_all

        claim_ids = self.claim_ids | set(load_all().claims) | set(current_registry().claims)
        workers = int(getattr(self.config.option, "numprocesses", 0) or 0)
        data = {"schema": SCHEMA_VERSION,
                "run": run_metadata(self.config._theorems_started, workers),
                "claims": claim_records(self.checks, sorted(claim_ids))}
        out = self.config._theorems_out
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(_jsonable(data), indent=1) + "\n")
        self.written = out

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.written is not None:
            terminalreporter.write_line(f"theorems: evidence for {len(self.checks)} checked "
                                        f"claims written to {self.written}")


@pytest.fixture(scope="session", name="evidence")
def evidence_fixture():
    """The ``evidence`` object, as a fixture (session-scoped, so it works under ``@given``)."""
    return evidence

