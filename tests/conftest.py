"""Session summaries for the tests in this folder: the soundness harness's counts."""

from __future__ import annotations

import pytest

_TALLY_KEY = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def soundness_tally(request) -> dict:
    """Per kind of equivalent mutant: ``[tried, survived]``, plus the ids that were killed."""
    return request.config.stash.setdefault(_TALLY_KEY, {"killed": []})


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    tally = config.stash.get(_TALLY_KEY, None)
    if not tally:
        return
    terminalreporter.section("soundness harness: equivalent mutants")
    for kind, counts in sorted(tally.items()):
        if kind != "killed":
            terminalreporter.write_line(f"{kind}: tried {counts[0]}, survived {counts[1]}")
    for name in tally["killed"]:
        terminalreporter.write_line(f"killed (a false alarm): {name}")
