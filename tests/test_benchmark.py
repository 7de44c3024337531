"""The suite benchmark's budget rule (benchmarks/suite.py, CONTRIBUTING.md): of 120 s on 2 cores
less two workers' start-up, a fifth for the suite's own tests and the rest for the areas by their
claims; what exceeds its budget is listed, the suite's own tests included. (The benchmark itself
is a script, never a timed test.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from theorems.claims import load_all

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "suite.py"


@pytest.fixture(scope="module")
def suite():
    spec = importlib.util.spec_from_file_location("benchmark_suite", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_budgets_share_what_is_left_after_start_up(suite):
    budget = suite.budgets(startup_cpu_s=10.0)
    pool = 120 * 2 - 2 * 10.0
    assert budget[suite.SUITE] == pytest.approx(pool / 5)
    assert sum(budget.values()) == pytest.approx(pool)
    registry = load_all()
    area = registry.areas()[0]
    claims = sum(c.area == area for c in registry)
    assert budget[area] == pytest.approx(pool * 0.8 * claims / len(registry))


def test_what_exceeds_its_budget_is_listed_the_suites_own_tests_included(suite):
    budget = {suite.SUITE: 40.0, "addition": 4.0, "bilinear": 3.0}
    spent = {suite.SUITE: 41.0, "addition": 12.6, "bilinear": 0.7, "unbudgeted": 9.0}
    assert suite.over_budget(spent, budget) == [suite.SUITE, "addition"]
