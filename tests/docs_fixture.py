"""A deterministic evidence file and results folder for the docs tests.

The docs tests build the site from the real claim registry, so every area's statements and
construction docstrings go through Sphinx with warnings as errors. Running every check for
that would take minutes and vary between runs, so the evidence is synthesised here instead,
through the foundation's own record builders (``claim_records``), from the checks each claim
declares. It covers every status and every kind of evidence a page can show:

* each claim gets one passed check per tier it declares, with examples, a margin and a
  ratio; a refutation check pins a counterexample, so claims with one come out ``refuted``;
* ``FAILING`` (the first claim without a refutation check) also gets a failed check with a
  falsifying example, so it comes out ``failing``;
* ``UNCHECKED`` (the last claim) is left out of the evidence, as a claim added after the run;
* ``FIGURED`` (the second claim) reports a metric, a table and a figure;
* a ``proved`` check carries a proof record taken from a REAL run (:func:`real_proofs`: two
  proof checks run inside the evidence recorder, as the plugin runs them): the Coq proof of
  ``bilinear.v``'s ``symmetric_part``, or for ``induction-heads`` claims the z3 proof of the
  two-layer margins, with the tool names, scope and trust base exactly as the runner writes
  them (where a tool is missing, the real check was skipped, and so is the fixture's);
* ``SKIPPED_PROOF`` (a claim with a Coq proof) has its proof check skipped, as the plugin
  records one when ``coqc`` is missing: it must show as skipped, never as proved;
* ``INCONCLUSIVE`` gets a sampled check whose interval does not decide (contract 1);
* the file also holds a record for a claim that no longer exists.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from theorems.claims import Registry
from theorems.evidence import declared_checks
from theorems.evidence_file import SCHEMA_VERSION, claim_records

RUN = {"git_sha": "0123456789abcdef0123456789abcdef01234567", "git_dirty": False,
       "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:01:00Z",
       "hypothesis_profile": "ci", "hypothesis_seed": None, "python": "3.11.7",
       "torch": "2.13.0+cpu", "numpy": "2.0.0", "hypothesis": "6.100.0",
       "platform": "Linux-x86_64", "device": "cpu", "workers": 2}
RETIRED = "retired.claim"
# The real checks the fixture's proof records come from: a Coq proof and a z3 proof.
REAL_PROOF_CHECKS = {"coq": "test_symmetric_part_proved", "smt": "test_two_layer_margins_proved"}
# What the plugin records for a Coq proof check skipped because coqc is missing
# (theorems.proving.missing_coq's reason, the skip's message).
SKIPPED_PROOF_MESSAGE = ("coqc not found: install Coq 8.16 and MathComp (apt-get install coq "
                         "libcoq-mathcomp-ssreflect libcoq-mathcomp-algebra) to run proved "
                         "checks")
INTERVAL = {"name": "success rate", "estimate": 0.52, "low": 0.48, "high": 0.56,
            "threshold": 0.5, "level": 0.95, "trials": 600, "method": "Clopper-Pearson",
            "decided": False}
FALSIFYING = "Falsifying example: run(\n    x=tensor([0.0, 1.0], dtype=torch.float64),\n)"


def require(module: str):
    """Import ``module``; skip without it, saying why, except where every extra must be present
    (``THEOREMS_REQUIRE_EXTRAS=1``, which ``.ci/run`` sets once it has installed them)."""
    if os.environ.get("THEOREMS_REQUIRE_EXTRAS"):
        return __import__(module)
    return pytest.importorskip(module, reason=f"{module} is in the docs extra: "
                                              "pip install -e '.[docs]'")


def real_run(directory: Path, checks: tuple[str, ...] = tuple(REAL_PROOF_CHECKS.values()),
             ) -> Path:
    """Run ``python -m theorems verify`` (dev profile, no workers) on ``checks`` only, writing
    ``directory/evidence.json``; return its path. A real, partial evidence file (it starts a
    pytest process: for the integration tests)."""
    from theorems.verify import verify

    out = directory / "evidence.json"
    report = verify(out, profile="dev", keyword=" or ".join(checks), jobs="0", echo=False)
    if report.data is None:
        raise RuntimeError(f"verify wrote no evidence (pytest exit {report.returncode})")
    return out


def real_proofs() -> dict[str, dict]:
    """Kind (``coq``, ``smt``) -> the record of :data:`REAL_PROOF_CHECKS`' check, run here as
    the evidence plugin runs a check: inside a :class:`~theorems.evidence.Recorder`, whose
    record (with the proof's tool, version, scope and trust base as the runner writes them)
    becomes the check's; a check that skips (its tool missing) gives a skipped record.
    Proofs come from the proof cache when it has them, so this takes seconds."""
    import importlib

    from _pytest.outcomes import Skipped

    from theorems.evidence import Recorder, recording

    modules = {"coq": "theorems.areas.bilinear",
               "smt": "theorems.areas.induction_heads.exactness"}
    records = {}
    for kind, name in REAL_PROOF_CHECKS.items():
        run = getattr(importlib.import_module(modules[kind]), name)
        mark = next(m for m in run.pytestmark if m.name == "claim")
        recorder = Recorder(claim=mark.args[0], tier=mark.kwargs["tier"], name=name)
        outcome: dict = {"outcome": "passed", "message": None}
        with recording(recorder):
            try:
                run()
            except Skipped as skip:
                outcome = {"outcome": "skipped", "message": str(skip.msg)}
        records[kind] = {"name": name, **recorder.as_dict(), **outcome}
    return records


def roles(registry: Registry) -> dict[str, str]:
    """Which real claims play the failing, unchecked, figured, skipped-proof and inconclusive
    parts."""
    declared = declared_checks()
    ids = [c.id for c in registry]
    plain = [i for i in ids if "refutation" not in declared.get(i, [])]
    coq_proved = [i for i in plain if "proved" in declared.get(i, []) and i != plain[0]
                  and not i.startswith("induction-heads.") and i != "bilinear.symmetric-part"]
    return {"failing": plain[0], "unchecked": ids[-1], "figured": ids[1],
            "skipped_proof": coq_proved[0],
            "inconclusive": next(i for i in plain[1:] if i not in (ids[1], coq_proved[0]))}


def _check(claim_id: str, tier: str, index: int, proofs: dict | None = None, **extra) -> dict:
    record = {"nodeid": f"theorems/areas/{claim_id.split('.')[0]}.py::test_{index}_{tier}",
              "name": f"test_{claim_id.split('.', 1)[1].replace('-', '_')}_{tier}",
              "tier": tier, "outcome": "passed", "duration": 0.25, "examples": 100,
              "margin": {"worst": 0.125, "last": 0.5, "count": 100, "worse": "lower"},
              "ratio": {"worst": 0.875, "last": 0.5, "count": 100, "worse": "higher"},
              "metrics": {}, "tables": {}, "figures": [], "counterexample": None,
              "falsifying_example": None, "message": None}
    if tier == "refutation":
        record.update(examples=1, margin=None, ratio=None,
                      counterexample=f"the pinned counterexample to {claim_id}")
    if tier == "proved":
        real = (proofs or {}).get("smt" if claim_id.startswith("induction-heads.") else "coq",
                                  {"outcome": "skipped", "examples": 0,
                                   "message": "no proof record was given to the fixture"})
        record.update(examples=real["examples"], margin=None, ratio=None,
                      outcome=real["outcome"], message=real["message"])
        if real.get("proof") is not None:
            record["proof"] = json.loads(json.dumps(real["proof"]))  # a copy per claim
    record.update(extra)
    return record


def write_evidence(registry: Registry, directory: Path, proofs: dict[str, dict] | None = None,
                   ) -> Path:
    """Write ``directory/evidence.json`` (and its figure) for ``registry``, its proof records
    from ``proofs`` (:func:`real_proofs`; without them every proof check is skipped); return
    its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    part = roles(registry)
    declared = declared_checks()
    checks: dict[str, list[dict]] = {}
    for claim in registry:
        if claim.id == part["unchecked"]:
            continue
        tiers = declared.get(claim.id) or ["property"]
        checks[claim.id] = [_check(claim.id, tier, i, proofs) for i, tier in enumerate(tiers)]
    for check in checks[part["skipped_proof"]]:
        if check["tier"] == "proved":  # as the plugin records a skip: no proof record
            check.pop("proof", None)
            check.update(outcome="skipped", message=SKIPPED_PROOF_MESSAGE, examples=0)
    # a sampled check whose interval straddles its threshold (contract 1)
    checks[part["inconclusive"]].append(_check(
        part["inconclusive"], "empirical", 98, outcome="inconclusive", margin=None,
        ratio=None, message="inconclusive: the 95% interval [0.48, 0.56] contains the "
                            "threshold 0.5",
        intervals=[INTERVAL]))
    checks[part["failing"]].append(_check(
        part["failing"], "property", 99, outcome="failed", falsifying_example=FALSIFYING,
        message="AssertionError: margin -0.5 < 0", margin={"worst": -0.5, "last": -0.5,
                                                            "count": 3, "worse": "lower"}))
    figure = f"figures/{part['figured']}/fixture-figure.png"
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1, 2], [0, 1, 4])
    (directory / figure).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(directory / figure, dpi=40, metadata={"Software": None})
    plt.close(fig)
    checks[part["figured"]][0].update(
        metrics={"gap": {"worst": 0.25, "last": 0.5, "count": 4, "worse": "lower"}},
        tables={"fixture table": {"header": ["n", "value *not emphasis*"],
                                  "rows": [[1, "a|b"], [2, "$x$"]]}},
        figures=[figure])
    checks[RETIRED] = [_check(RETIRED, "property", 0)]
    data = {"schema": SCHEMA_VERSION, "run": RUN,
            "claims": claim_records(checks, [c.id for c in registry if c.id != part["unchecked"]])}
    path = directory / "evidence.json"
    path.write_text(json.dumps(data, indent=1))
    return path


def build(tmp_path_factory) -> tuple[Path, dict, dict]:
    """Build the fixture site once per test session; return (site, report, evidence).

    Under pytest-xdist every worker would otherwise build its own copy. The workers share the
    session's base temporary folder, so the first one builds there under a file lock and the
    others read its result (the pattern pytest-xdist documents for once-per-session work).
    Without xdist the site is built in this session's own temporary folder.
    """
    from filelock import FileLock

    from theorems.claims import load_all
    from theorems.site import build_site

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "docs-site"
    with FileLock(str(root) + ".lock"):
        done = root / "report.json"
        if not done.is_file():
            root.mkdir(parents=True, exist_ok=True)
            evidence = write_evidence(load_all(), root, real_proofs())
            report = build_site(evidence, root / "site", results=write_results(root),
                                strict=True)
            done.write_text(json.dumps({"warnings": list(report.warnings),
                                        "status": report.status}))
    report = json.loads(done.read_text())
    return root / "site", report, json.loads((root / "evidence.json").read_text())


def write_results(directory: Path) -> Path:
    """Published results of an experiment that does not exist (so they are orphaned): an
    aggregate over three seeds, with one per-seed file the site must not list separately."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = directory / "results" / "fixture-experiment"
    folder.mkdir(parents=True)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0])
    fig.savefig(folder / "full-loss.png", dpi=40, metadata={"Software": None})
    plt.close(fig)
    record = {"device": "cuda", "device_name": "NVIDIA H200", "torch": "2.13.0",
              "python": "3.11.7", "git_sha": "fedcba9876543210",
              "date": "2026-01-02T03:04:05Z", "wall_time": 12.5,
              "code_fingerprint": "0000000000000000"}
    aggregate = {"experiment": "fixture-experiment", "config_name": "full",
                 "config": {"steps": 1000, "lr": 0.001}, "seeds": [0, 1, 2], "device": "cuda",
                 "metrics": {"final loss": 0.0125},
                 "spread": {"final loss": {"std": 0.002, "sem": 0.00115, "n": 3}},
                 "per_seed": [], "figures": {"loss": "full-loss.png"}, "record": record}
    (folder / "full.json").write_text(json.dumps(aggregate, indent=1))
    one = {"experiment": "fixture-experiment", "config_name": "full",
           "config": {"steps": 1000, "lr": 0.001}, "seed": 1, "device": "cuda",
           "metrics": {"final loss": 0.0131}, "tables": {}, "training": {}, "figures": {},
           "record": record}
    (folder / "full-seed1.json").write_text(json.dumps(one, indent=1))
    write_circuit_scores(directory / "results", record)
    write_benchmark_results(directory / "results", record)
    return directory / "results"


# Figures of two cases whose ids share a prefix: each belongs under its own case only.
CIRCUIT_FIGURES = ("two-layer-induction-eap", "two-layer-induction-rotated-eap")


def write_circuit_scores(results: Path, record: dict) -> None:
    """A (stale) circuit-discovery result: the circuits page shows its scores and figures."""
    import matplotlib.pyplot as plt

    folder = results / "circuit-discovery"
    folder.mkdir(parents=True)
    for name in CIRCUIT_FIGURES:
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.bar([0, 1], [0, 2])
        ax.set_title(name)
        fig.savefig(folder / f"full-{name}.png", dpi=40, metadata={"Software": None})
        plt.close(fig)
    data = {"experiment": "circuit-discovery", "config_name": "full",
            "config": {"batch": 64, "methods": ["activation-patching", "eap"]},
            "seed": 0, "device": "cuda", "metrics": {"two-layer-induction/eap/auc": 0.9375},
            "tables": {"scores": {"header": ["case", "method", "ROC AUC", "top-|C| edges"],
                                  "rows": [["two-layer-induction", "eap", 0.9375,
                                            "a1.h0->logits, input->a1.h0<v>"],
                                           ["two-layer-induction-rotated", "eap", 0.875,
                                            "a1.h0->logits"]]}},
            "training": {}, "figures": {name: f"full-{name}.png" for name in CIRCUIT_FIGURES},
            "record": record}
    (folder / "full.json").write_text(json.dumps(data, indent=1))


def write_benchmark_results(results: Path, record: dict) -> None:
    """A circuit-third-party result (one method scored, one failing, one not exact) and a
    hook-conformance result (one hook not as named): the circuits page's benchmark sections."""
    from empirics.circuit_third_party import RUNS, SCORES
    from empirics.conformance import HEADER
    from empirics.hook_conformance import RUNS as CONFORMANCE_RUNS

    def write(name: str, tables: dict) -> None:
        (results / name).mkdir(parents=True)
        data = {"experiment": name, "config_name": "full", "config": {"batch": 64}, "seed": 0,
                "device": "cpu", "metrics": {}, "tables": tables, "training": {},
                "figures": {}, "record": record}
        (results / name / "full.json").write_text(json.dumps(data, indent=1))

    exact = ["two-layer-induction", "-", "smoke", 1.0, 1.0, 0.85, 0.149, 0.85, 0.149, 0]
    write("circuit-third-party", {
        "scores": {"header": SCORES, "rows": [
            ["auto-circuit EAP", "auto-circuit 1.0.1", *exact, "scored"],
            ["EAP", "MIB EAP-IG (circuitkit 0.2.0)", "two-layer-induction", "-", "smoke",
             "", "", "", "", "", "", 0, "fails: RuntimeError: output with shape [3, 1] "
             "doesn't match the broadcast shape [3, 3]"],
            ["auto-circuit ACDC", "auto-circuit 1.0.1", "two-layer-induction", "rotated",
             "smoke", 0.8125, 0.5, 0.61, 0.39, 0.85, 0.149, 0, "scored"]]},
        "runs": {"header": RUNS, "rows": [["auto-circuit", "auto-circuit 1.0.1",
                                           "/venvs/auto-circuit", 2, 60.0, 31.5, "ok"]]}})
    write("hook-conformance", {
        "hooks": {"header": HEADER, "rows": [
            ["bridge (native names)", "4.3.0", "blocks.L.attn.hook_attn_scores", "pattern",
             "NO", "7.03", "float64", "11", "two-layer-induction"],
            ["torch", "2.13.0", "hook_embed", "embed", "yes", "0", "float64", "11",
             "two-layer-induction"]]},
        "runs": {"header": CONFORMANCE_RUNS, "rows": [["this project's", "4.3.0", "0.8.1",
                                                       5.0, 4.0, "ok"]]}})
