"""No check runs fewer examples than it did before the suite was made faster.

``benchmarks/example-counts-baseline.json`` holds each check's examples under the ``ci``
profile in the complete ``verify`` of the release before the speed work. Against the last
complete ci-profile ``build/evidence.json`` (CI's set-up runs ``verify`` first), every check of
the baseline must still exist, under its name (in whichever module now holds it) or a rename the
baseline file lists, or be listed as removed with the reason, and must run at least as many
examples: a check may get cheaper per example, never thinner. (A check whose count adds
``cases()`` per item found in its drawn data moves with the draws; such checks are listed, with
the reason, under ``varies``.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from theorems import evidence_file

ROOT = Path(__file__).resolve().parents[1]
BASELINE = json.loads((ROOT / "benchmarks" / "example-counts-baseline.json").read_text())


def current_counts() -> dict[str, int | None]:
    """Examples per check of the last complete ci-profile verify; ``None`` for a check that
    was skipped there (a tool missing) or ended inconclusive (it stops at its undecided
    interval, before the cases after it): nothing to compare."""
    path = ROOT / "build" / "evidence.json"
    if not path.exists():
        pytest.skip("no build/evidence.json: run python -m theorems verify")
    data = evidence_file.load(path)
    if evidence_file.is_partial(data) or data["run"].get("hypothesis_profile") != "ci":
        pytest.skip("build/evidence.json is not a complete ci-profile verify")
    return {c["nodeid"]: None if c["outcome"] in ("skipped", "inconclusive") else c["examples"]
            for record in data["claims"].values() for c in record["checks"]}


def test_every_check_keeps_its_examples():
    now = current_counts()
    renamed, removed = BASELINE.get("renamed", {}), BASELINE.get("removed", {})
    varies = BASELINE.get("varies", {})  # counts that move with the drawn examples: why
    fewer, gone = [], []
    # A check that moved to another module (a split, a renamed topic module) keeps its name:
    # the one current check of that name is the same check.
    by_name: dict[str, list[str]] = {}
    for nodeid in now:
        by_name.setdefault(nodeid.rpartition("::")[2], []).append(nodeid)
    for nodeid, before in BASELINE["examples"].items():
        if nodeid in removed:
            continue
        name = renamed.get(nodeid, nodeid)
        if name not in now and len(by_name.get(name.rpartition("::")[2], [])) == 1:
            name = by_name[name.rpartition("::")[2]][0]
        if name not in now:
            gone.append(nodeid)
        elif now[name] is not None and now[name] < before and nodeid not in varies:
            fewer.append(f"{name}: {now[name]} examples, {before} before")
    assert not gone, ("checks of the baseline that no longer run (list a rename or a removal "
                      f"with its reason in the baseline file): {gone}")
    assert not fewer, f"checks that run fewer examples than before: {fewer}"


def test_the_baseline_explains_every_removal():
    for nodeid, reason in BASELINE.get("removed", {}).items():
        assert nodeid in BASELINE["examples"] and isinstance(reason, str) and reason.strip()
    for old in BASELINE.get("renamed", {}):
        assert old in BASELINE["examples"]
    for nodeid, reason in BASELINE.get("varies", {}).items():
        assert nodeid in BASELINE["examples"] and isinstance(reason, str) and reason.strip()
