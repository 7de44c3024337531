"""Deterministic evidence: two ``verify`` runs under the ``ci`` profile give the same evidence
file apart from times, whether the checks run serially or over two xdist workers, and with one
torch thread or two.

The default run compares three runs of the checks of two small areas (one serial with one
thread, one over two workers, one serial with two threads), collected alone to keep it cheap;
the ``slow`` tier does the same for every claim through ``python -m theorems verify``. What may differ is listed in :func:`without_times`: the run's times, its worker
count and its thread count, and each check's duration.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBSET = ("theorems/areas/bilinear.py", "theorems/areas/hopfield.py")


def without_times(data: dict) -> dict:
    """The evidence with what legitimately differs between runs removed."""
    data = json.loads(json.dumps(data))
    for key in ("started", "finished", "workers"):
        data["run"].pop(key, None)
    for record in data["claims"].values():
        record["summary"].pop("duration")
        for check in record["checks"]:
            check.pop("duration")
    return data


def run_checks(out: Path, *, jobs: str, threads: int, paths: tuple[str, ...]) -> dict:
    """The evidence of one ci-profile run: of ``paths`` alone, or of everything by ``verify``."""
    if paths:
        command = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider",
                   "-o", "addopts=", "-m", "not slow", "-p", "theorems.profiles",
                   "--hypothesis-profile=ci", f"--evidence-out={out}"]
        command += ["-n", jobs] if jobs != "0" else ["-p", "no:xdist"]
    else:
        command = [sys.executable, "-m", "theorems", "verify", "--jobs", jobs, "--out", str(out)]
    env = {**os.environ, "THEOREMS_TORCH_THREADS": str(threads)}
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False,
                            timeout=1800, cwd=ROOT)
    assert out.is_file(), result.stdout[-2000:] + result.stderr[-2000:]
    return json.loads(out.read_text())


def assert_same_evidence(tmp_path: Path, paths: tuple[str, ...]) -> None:
    parallel = "2" if importlib.util.find_spec("xdist") is not None else "0"
    runs = {name: run_checks(tmp_path / f"{name}.json", jobs=jobs, threads=threads, paths=paths)
            for name, jobs, threads in [("serial", "0", 1), ("xdist", parallel, 1),
                                        ("two-threads", "0", 2)]}
    reference = without_times(runs["serial"])
    assert any(r["checks"] for r in reference["claims"].values()), "no check ran"
    for name in ("xdist", "two-threads"):
        other = without_times(runs[name])
        differing = sorted(cid for cid in reference["claims"]
                           if reference["claims"][cid] != other["claims"].get(cid))
        assert not differing, f"{name} run differs from the serial one in {differing}"
        assert other == reference


def test_evidence_is_the_same_serially_in_parallel_and_with_two_threads(tmp_path):
    assert_same_evidence(tmp_path, SUBSET)


@pytest.mark.slow
def test_every_claims_evidence_is_the_same_serially_in_parallel_and_with_two_threads(tmp_path):
    assert_same_evidence(tmp_path, ())
