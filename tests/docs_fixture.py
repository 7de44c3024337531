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

A strict build of the whole site takes about 15 CPU-s, so :func:`cached_build` keeps each build
under ``build/docs-cache/``, keyed by a hash of everything the build reads (the evidence and its
figures, the results folder, every file of the three packages, the commit, the installed
distributions, Graphviz, the build's options): a run whose inputs are those of an earlier one
reads that run's strict build instead of repeating it. ``THEOREMS_DOCS_CACHE=off`` builds
every time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Iterator
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
ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "docs-cache"
CACHE_KEPT = 4  # builds kept (the fixture site, the strict-failure test's, and older ones)


def require(module: str) -> None:
    """Skip the calling test module without ``module``, saying why, except where every extra
    must be present (``THEOREMS_REQUIRE_EXTRAS=1``, which ``.ci/run`` sets once it has
    installed them): there its absence is an error. It looks for the module without importing
    it: a test module calls this at collection, which every xdist worker pays, also where the
    module's tests are deselected (the browser test's Playwright)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if found:
        return
    if os.environ.get("THEOREMS_REQUIRE_EXTRAS"):
        raise ImportError(f"{module} is missing, but THEOREMS_REQUIRE_EXTRAS says every extra "
                          f"is installed")
    pytest.skip(f"{module} is in the docs extra: pip install -e '.[docs]'",
                allow_module_level=True)


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
        proof = records[kind].get("proof")
        if proof is not None:
            # the compile time and the proof-cache hit differ from run to run and no page shows
            # them: pinned, so that the fixture's evidence (and its build's cache key) is the
            # same on every run
            proof.update(seconds=1.0, cached=False)
    return records


def roles(registry: Registry) -> dict[str, str]:
    """Which real claims play the failing, unchecked, figured, skipped-proof and inconclusive
    parts. Chosen by id, not by the registry's order, which is the order the area modules were
    first imported in: a process that imported one early (an xdist worker given a test module
    that imports it) would pick other claims than the process that built the site."""
    declared = declared_checks()
    ids = sorted(c.id for c in registry)
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

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "docs-site"
    with FileLock(str(root) + ".lock"):
        done = root / "report.json"
        if not done.is_file():
            root.mkdir(parents=True, exist_ok=True)
            evidence = write_evidence(load_all(), root, real_proofs())
            site, report = cached_build(evidence, root / "site", results=write_results(root),
                                        strict=True)
            done.write_text(json.dumps({**report, "site": str(site)}))
    report = json.loads(done.read_text())
    return Path(report.pop("site")), report, json.loads((root / "evidence.json").read_text())


def cached_build(evidence: Path, out: Path, *, results: Path | None, **options,
                 ) -> tuple[Path, dict]:
    """``theorems.site.build_site(evidence, out, results=results, **options)``, or the site an
    earlier build made from the same inputs (module docstring); return the site's folder and
    the build's report (``warnings``, ``status``). A new build is kept in the cache (the
    newest :data:`CACHE_KEPT`), and a build is only ever stored whole, its report last."""
    from filelock import FileLock

    from theorems.site import build_site, missing_figures

    # (without its figures, build_site refuses the evidence: nothing to cache)
    if os.environ.get("THEOREMS_DOCS_CACHE", "on").lower() in ("off", "0", "no") or (
            missing_figures(evidence)):
        report = build_site(evidence, out, results=results, **options)
        return out, {"warnings": list(report.warnings), "status": report.status}
    key = _build_key(evidence, results, options)
    entry = CACHE / key
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(entry) + ".lock"):
        if not (entry / "report.json").is_file():
            temporary = CACHE / f"{key}.{os.getpid()}.tmp"
            shutil.rmtree(temporary, ignore_errors=True)
            report = build_site(evidence, temporary / "site", results=results, **options)
            shutil.rmtree(temporary / "site-src")  # the generated sources and doctrees
            (temporary / "report.json").write_text(json.dumps(
                {"warnings": list(report.warnings), "status": report.status}))
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(temporary, entry)
        (entry / "report.json").touch()  # recently used: kept by _evict
    _evict()
    return entry / "site", json.loads((entry / "report.json").read_text())


def _evict() -> None:
    """Remove all but the :data:`CACHE_KEPT` most recently used builds."""
    builds = sorted((p for p in CACHE.glob("*/report.json")), key=lambda p: p.stat().st_mtime,
                    reverse=True)
    for report in builds[CACHE_KEPT:]:
        shutil.rmtree(report.parent, ignore_errors=True)
        Path(str(report.parent) + ".lock").unlink(missing_ok=True)


def _build_key(evidence: Path, results: Path | None, options: dict) -> str:
    """A hash of everything a build of ``evidence`` reads: the file and the figures it names,
    the results folder, every file of the packages (the registry, the docstrings autodoc shows,
    the extension, its templates and the Sphinx configuration), the commit (the pages say
    whether the evidence is older than it), Python and every installed distribution (Sphinx,
    its extensions, the theme), the Graphviz programs and the build's options."""
    import importlib.metadata

    from empirics.provenance import git_sha

    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(hashlib.sha256(label.encode()).digest() + hashlib.sha256(data).digest())

    add("options", json.dumps(options, sort_keys=True, default=str).encode())
    add("commit", (git_sha() or "").encode())
    add("python", sys.version.encode())
    add("distributions", "\n".join(sorted(
        f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
    )).encode())
    for program in ("dot", "unflatten"):
        found = shutil.which(program)
        stat = Path(found).stat() if found else None
        add(program, f"{found} {stat and stat.st_size} {stat and stat.st_mtime_ns}".encode())
    add("evidence", evidence.read_bytes())
    named = {figure for record in json.loads(evidence.read_text())["claims"].values()
             for check in record["checks"] for figure in check.get("figures") or ()}
    for figure in sorted(named):
        add(f"figure {figure}", (evidence.parent / figure).read_bytes())
    folders = [("results", results)] if results is not None else []
    folders += [(package, ROOT / package) for package in ("theorems", "constructions", "empirics")]
    for label, folder in folders:
        for path in _files(folder):
            add(f"{label} {path.relative_to(folder).as_posix()}", path.read_bytes())
    return digest.hexdigest()[:32]


def _files(folder: Path) -> Iterator[Path]:
    """The files under ``folder``, sorted, without bytecode and the docs' generated sources."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not {"__pycache__", "_generated"} & set(path.parts):
            yield path


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
    # a space in the name, as a scaling study's figures have (named after a metric key): the
    # site must stage it under a name a figure directive can read
    fig.savefig(folder / "full-loss curve.png", dpi=40, metadata={"Software": None})
    plt.close(fig)
    record = {"device": "cuda", "device_name": "NVIDIA H200", "torch": "2.13.0",
              "python": "3.11.7", "git_sha": "fedcba9876543210",
              "date": "2026-01-02T03:04:05Z", "wall_time": 12.5,
              "code_fingerprint": "0000000000000000"}
    aggregate = {"experiment": "fixture-experiment", "config_name": "full",
                 "config": {"steps": 1000, "lr": 0.001}, "seeds": [0, 1, 2], "device": "cuda",
                 "metrics": {"final loss": 0.0125},
                 "spread": {"final loss": {"std": 0.002, "sem": 0.00115, "n": 3}},
                 "per_seed": [], "figures": {"loss": "full-loss curve.png"}, "record": record}
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
