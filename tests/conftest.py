"""Session summaries for the tests in this folder (the soundness harness's counts), and the
``transformer_lens`` and ``nnsight`` fixtures the circuit tests share (tests/test_export.py
keeps its own).

The counts are taken from the test reports, which reach the controller under pytest-xdist too,
so ``pytest -n auto`` prints them as a serial run does.
"""

from __future__ import annotations

import importlib
import os

import pytest

from constructions.interop.files import INTEROP_HINT

_KINDS = {"test_rerounded_weights_pass": "rerounded", "test_two_threads_pass": "two-threads"}


class SoundnessTally:
    """Per kind of equivalent mutant: [tried, survived]; and the ids that were killed."""

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}
        self.killed: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" or "test_soundness.py::" not in report.nodeid:
            return
        kind = _KINDS.get(report.nodeid.split("::")[1].split("[")[0])
        if kind is None:
            return
        counts = self.counts.setdefault(kind, [0, 0])
        counts[0] += 1
        if report.passed:
            counts[1] += 1
        else:
            self.killed.append(report.nodeid.split("[", 1)[-1].rstrip("]"))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.counts:
            return
        terminalreporter.section("soundness harness: equivalent mutants")
        for kind, (tried, survived) in sorted(self.counts.items()):
            terminalreporter.write_line(f"{kind}: tried {tried}, survived {survived}")
        for name in self.killed:
            terminalreporter.write_line(f"killed (a false alarm): {name}")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(SoundnessTally(), "soundness-tally")


@pytest.fixture(autouse=True)
def _mutants_stop_at_the_first_failure(request: pytest.FixtureRequest):
    """A mutant test only asserts *that* its check fails, so Hypothesis need not shrink the
    counterexample it finds: while a ``mutant``-marked test runs, the current profile is
    replaced by one without the shrink phase (the checks the test builds inherit it; the
    examples drawn, and so the first failure, are the profile's own). Shrinking was most of
    some mutants' time."""
    if request.node.get_closest_marker("mutant") is None:
        yield
        return
    from hypothesis import settings

    from theorems.profiles import without_shrinking

    name = settings.get_current_profile_name()
    settings.register_profile(f"{name}-mutant", parent=settings.get_profile(name),
                              phases=without_shrinking().phases)
    settings.load_profile(f"{name}-mutant")
    try:
        yield
    finally:
        settings.load_profile(name)


def _interop(name: str):
    """The interop extra's module ``name``; missing, the test skips and says how to install it,
    or fails under ``THEOREMS_REQUIRE_EXTRAS`` (every extra is meant to be installed)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("THEOREMS_REQUIRE_EXTRAS"):
            pytest.fail(f"{name} is missing, but THEOREMS_REQUIRE_EXTRAS says every extra is "
                        f"installed")
        pytest.skip(f"{name} is not installed: {INTEROP_HINT}")


@pytest.fixture(scope="module")
def transformer_lens():
    """TransformerLens with ``HookedTransformer`` (2.x, 3.x), which ``to_transformer_lens``
    builds; 4.x removed it, so there the test skips and says so, CI or not."""
    module = _interop("transformer_lens")
    try:
        module.HookedTransformer  # noqa: B018 (4.x removed it; to_transformer_lens needs it)
    except (AttributeError, ImportError):
        from importlib.metadata import version

        pytest.skip(f"transformer-lens {version('transformer-lens')} has no HookedTransformer "
                    f"(4.0 removed it), which to_transformer_lens builds")
    return module


@pytest.fixture(scope="module")
def nnsight():
    """nnsight, which the circuit-discovery harness patches through."""
    return _interop("nnsight")
