"""The check writer's API: ``evidence``, ``check`` and ``expect_failure``.

Writing a check
---------------
::

    def decomposition_check(build=layer_norm):
        @given(x=vectors())
        def run(x):
            err = ...
            evidence.margin(tolerance - err)   # slack to the bound; the worst is kept
            assert err <= tolerance
        return run

    test_layer_norm_is_scaled_projection = check(LN_DECOMPOSITION, "property")(
        decomposition_check())

``evidence`` is a module-level object, not a function-scoped fixture, so it works inside
``@given`` (Hypothesis rejects function-scoped fixtures there). It writes to a context-local
recorder that the plugin (:mod:`theorems.plugin`) installs around each claim-marked test, and
does nothing outside one (for example when a mutant test in ``tests/`` re-runs a check on a
broken construction).

``evidence`` methods: ``margin(x)`` (worst = min), ``ratio(x)`` (tightness, worst = max),
``metric(name, value, worse="higher"|"lower")``, ``figure(fig, name)``,
``table(name, header, rows)``, ``cases(n)`` (examples checked without Hypothesis),
``counterexample(value)``, ``proof(record)`` (what a proved-tier check compiled or
solved) and ``interval(name, estimate, low, high, *, threshold, level, trials, method)`` (a
confidence interval a sampled verdict turns on). :func:`decide` records an interval and reads
the verdict off it, or ends the check as inconclusive. Inside a Hypothesis test, each
example's smallest margin and largest ratio are also passed to ``hypothesis.target``, which
steers the search towards the bound. The evidence file these records end up in is described in
:mod:`theorems.evidence_file`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from theorems.claims import TIERS, Claim

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
    intervals: list[dict] = field(default_factory=list)
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

    def interval(self, name: str, estimate: float, low: float, high: float, *,
                 threshold: float, level: float, trials: int, method: str) -> dict:
        """Record a confidence interval ``[low, high]`` (at ``level``, from ``trials`` samples,
        by ``method``) for a quantity estimated by ``estimate``, and the ``threshold`` a
        verdict compares it with; ``decided``: whether the interval excludes the threshold.
        Recording the same name again replaces it (a check re-deciding from a cache)."""
        values = [float(v) for v in (estimate, low, high, threshold, level)]
        if not values[1] <= values[2] or any(math.isnan(v) for v in values):
            raise ValueError(f"interval {name!r}: need low <= high and no NaN, got "
                             f"[{low}, {high}], estimate {estimate}, threshold {threshold}")
        if not 0 < values[4] < 1:
            raise ValueError(f"interval {name!r}: level must be in (0, 1), got {level}")
        record = {"name": str(name), "estimate": values[0], "low": values[1],
                  "high": values[2], "threshold": values[3], "level": values[4],
                  "trials": int(trials), "method": str(method),
                  "decided": values[1] > values[3] or values[2] < values[3]}
        self.intervals[:] = [r for r in self.intervals if r["name"] != record["name"]]
        self.intervals.append(record)
        return record

    def figure(self, fig, name: str = "") -> str | None:
        """Save a matplotlib figure as PNG beside the evidence file and close it; ``fig`` may
        also be the path of a PNG a published result saved, which is copied."""
        from empirics.provenance import save_figure

        if self.figure_dir is None:
            _close(fig)
            return None
        stem = re.sub(r"[^\w.-]+", "_", self.name + (f"-{name}" if name else ""))
        target = self.figure_dir / "figures" / self.claim / f"{stem}.png"
        if isinstance(fig, (str, Path)):
            target.parent.mkdir(parents=True, exist_ok=True)
            path = Path(shutil.copyfile(fig, target))
        else:
            path = save_figure(fig, target)
        relative = path.relative_to(self.figure_dir).as_posix()
        if relative not in self.figures:
            self.figures.append(relative)
        return relative

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
            "intervals": list(self.intervals),
        }


class _NullRecorder(Recorder):
    """Accepts every report and keeps nothing: evidence outside a claim-marked test."""

    def __init__(self) -> None:
        super().__init__(claim="", tier="")

    def figure(self, fig, name: str = "") -> None:
        _close(fig)

    def interval(self, name: str, estimate: float, low: float, high: float, *,
                 threshold: float, level: float, trials: int, method: str) -> dict:
        record = Recorder.interval(self, name, estimate, low, high, threshold=threshold,
                                   level=level, trials=trials, method=method)
        self.intervals.clear()  # validated, kept nowhere
        return record

    def finish_example(self) -> None:
        pass


def _close(fig) -> None:
    if not isinstance(fig, (str, Path)):
        import matplotlib.pyplot as plt

        plt.close(fig)


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


# --- sampled verdicts -------------------------------------------------------------------

INCONCLUSIVE = "inconclusive:"  # how the skip reason of an undecided check begins


def decide(name: str, interval, *, threshold: float) -> str:
    """Record ``interval`` (a :class:`theorems.intervals.Interval`) under ``name`` and return
    which side of ``threshold`` the quantity it covers is on: ``"above"`` when ``low >
    threshold``, ``"below"`` when ``high < threshold``.

    When the closed interval contains the threshold the sampled evidence does not decide, and
    the check ends here: it is skipped with a reason starting ``inconclusive:``, which the
    plugin records as outcome ``inconclusive`` (and the claim's status becomes inconclusive,
    :func:`theorems.claims.derive_status`). The skip is not an AssertionError, so it also
    passes through :func:`expect_failure`: a claim *as stated* that its own interval cannot
    decide is not refuted either.
    """
    record = evidence.interval(name, interval.estimate, interval.low, interval.high,
                               threshold=threshold, level=interval.level,
                               trials=interval.trials, method=interval.method)
    side = interval.side(threshold)
    if side is None:
        pytest.skip(f"{INCONCLUSIVE} {name}: the {record['level']:.0%} interval "
                    f"[{interval.low:.4g}, {interval.high:.4g}] ({interval.method}, "
                    f"{interval.trials} trials) contains the threshold {threshold:.4g}")
    return side


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
