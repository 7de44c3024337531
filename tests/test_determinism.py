"""Deterministic evidence: two ``verify`` runs under the ``ci`` profile give the same evidence file
apart from times, whether the checks run serially or over two xdist workers, and with one torch
thread or two.

The default run compares three runs of two checks of one small area (one serial with one
thread, one over two workers, one serial with two threads), collected alone to keep it cheap;
the ``slow`` tier does the same for every claim through ``python -m theorems verify``. What may
differ is listed in :func:`without_times`: the run's times, its worker count and its thread
count, and each check's duration.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# bilinear's quadratic form: a property check, where a rounding-noise margin was seen to differ
# between layouts, and its proved check; two checks keep the three runs' cost near their
# start-up (each process imports torch and every area's claims)
SUBSET = ("theorems/areas/bilinear.py", "-k", "quadratic_form")


NOISE = ("margin", "ratio", "metrics")


def without_times(data: dict, *, noise: bool = True) -> dict:
    """The evidence with what legitimately differs between runs removed: times and the worker
    count, and with ``noise=False`` also the measured margins, ratios and metrics.

    Why the second: a check of a floating-point identity reports the slack ``1 - err/tol``
    where ``err`` is itself a few roundings, and which rounding happens depends on the kernel
    path that memory alignment picks (a serial and an xdist process allocate differently).
    Such a margin can differ in its leading digit between two correct runs (observed:
    ``bilinear.quadratic-form``), while statuses, outcomes, example counts, counterexamples
    and tables stay identical; both tiers compare those.
    """
    data = json.loads(json.dumps(data))
    for key in ("started", "finished", "workers"):
        data["run"].pop(key, None)
    for record in data["claims"].values():
        record["summary"].pop("duration")
        if not noise:
            record["summary"].pop("worst_margin")
            record["summary"].pop("max_ratio")
        for check in record["checks"]:
            check.pop("duration")
            for key in ("seconds", "cached"):  # a proof's compile time and cache hit
                (check.get("proof") or {}).pop(key, None)
            for key in NOISE if not noise else ():
                check.pop(key, None)
    return data


def run_checks(out: Path, *, jobs: str, threads: int, paths: tuple[str, ...]) -> dict:
    """The evidence of one ci-profile run: of the checks ``paths`` selects (pytest arguments),
    or of everything by ``verify``."""
    env = {**os.environ, "THEOREMS_TORCH_THREADS": str(threads)}
    if paths:
        # The plugins these runs use are named, not auto-loaded: the entry-point plugins of
        # other packages (anyio, jaxtyping, typeguard) play no part in the evidence, and pytest
        # rewrites the asserts of every module of an auto-loaded plugin's distribution (all of
        # Hypothesis), on every start where bytecode is not written: a quarter of a small run.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        command = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider",
                   "-o", "addopts=", "-m", "not slow", "-p", "theorems.plugin",
                   "-p", "_hypothesis_pytestplugin", "-p", "theorems.profiles",
                   "--hypothesis-profile=ci", f"--evidence-out={out}"]
        command += ["-p", "xdist.plugin", "-n", jobs] if jobs != "0" else []
    else:
        command = [sys.executable, "-m", "theorems", "verify", "--jobs", jobs, "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False,
                            timeout=1800, cwd=ROOT)
    assert out.is_file(), result.stdout[-2000:] + result.stderr[-2000:]
    return json.loads(out.read_text())


def assert_same_evidence(tmp_path: Path, paths: tuple[str, ...], *, noise: bool) -> None:
    parallel = "2" if importlib.util.find_spec("xdist") is not None else "0"
    runs = {name: run_checks(tmp_path / f"{name}.json", jobs=jobs, threads=threads, paths=paths)
            for name, jobs, threads in [("serial", "0", 1), ("xdist", parallel, 1),
                                        ("two-threads", "0", 2)]}
    reference = without_times(runs["serial"], noise=noise)
    assert any(r["checks"] for r in reference["claims"].values()), "no check ran"
    for name in ("xdist", "two-threads"):
        other = without_times(runs[name], noise=noise)
        differing = sorted(cid for cid in reference["claims"]
                           if reference["claims"][cid] != other["claims"].get(cid))
        assert not differing, f"{name} run differs from the serial one in {differing}"
        assert other == reference


@pytest.mark.integration
def test_evidence_is_the_same_serially_in_parallel_and_with_two_threads(tmp_path):
    assert_same_evidence(tmp_path, SUBSET, noise=False)


@pytest.mark.slow
def test_every_claims_evidence_is_the_same_serially_in_parallel_and_with_two_threads(tmp_path):
    # Every claim, through ``verify``. Measured margins, ratios and metrics are left out here
    # too: a margin that measures rounding noise is a property of the kernel path a process
    # layout picks (see without_times), so asserting it equal would fail correct runs.
    assert_same_evidence(tmp_path, (), noise=False)


def _derandomized_draws() -> list[int]:
    """200 derandomized draws of integers (the same test function every call)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    seen: list[int] = []

    @settings(derandomize=True, database=None, max_examples=200)
    @given(st.integers(-(2 ** 40), 2 ** 40))
    def record(x):
        seen.append(x)

    record()
    return seen


def test_a_derandomized_draw_ignores_the_modules_imported_before_it(tmp_path, monkeypatch):
    """theorems.profiles empties Hypothesis' pool of constants read from the user modules in
    sys.modules while derandomize is on: importing a module with new literals between two
    derandomized runs changes none of their draws (without it, the pool grows, and xdist's
    scheduling decided which checks drew which examples)."""
    import theorems.profiles  # noqa: F401 (the patch is applied on import)

    before = _derandomized_draws()
    constants = ", ".join(str(7 ** k + 11 * k) for k in range(3, 60))
    (tmp_path / "theorems_determinism_probe.py").write_text(f"CONSTANTS = ({constants})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("theorems_determinism_probe")
    assert _derandomized_draws() == before
