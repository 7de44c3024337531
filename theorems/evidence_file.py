"""The evidence file: its schema, how check records are summarised, and how it is read and written.

This is the single interface between running checks and writing docs. It imports neither pytest
nor Hypothesis nor torch, so readers (the CLI, the site) stay light.

Schema (version 1)
------------------
::

    {
      "schema": 1,
      "run": {"git_sha", "git_dirty", "started", "finished", "hypothesis_profile",
              "hypothesis_seed", "python", "torch", "numpy", "hypothesis", "platform",
              "device", "workers",
              "partial": bool,            # not every claim's checks ran (-k, -x, a subset)
              "selection": str|null,      # the -k / -m expressions and paths that made it so
              "reused": {"checks": int, "started": str} | null},  # records taken from an
                                          # earlier run (reusable_checks; verify's reuse)
      "claims": {
        "<claim id>": {
          "status": "verified" | "refuted" | "inconclusive" | "failing" | "unchecked",
          "refutes": "as-written" | "reading" | "finite-test" | null,  # what a refutation
                                      # refutes (theorems.claims.REFUTATION_SCOPES)
          "summary": {"tiers": [...], "checks": int, "passed": int, "examples": int,
                      "worst_margin": float|null, "max_ratio": float|null, "duration": float},
          "checks": [{
              "nodeid", "name", "tier",
              "outcome": "passed"|"failed"|"skipped"|"inconclusive",  # inconclusive: an
                                      # interval it decides on contains its threshold
                                      # (theorems.evidence.decide; pytest reports a skip)
              "examples": int,            # Hypothesis test cases run + cases() reported
              "margin": {"worst", "last", "count"} | null,
              "ratio": {"worst", "last", "count"} | null,
              "metrics": {"<name>": {"worst", "last", "count", "worse"}},
              "tables": {"<name>": {"header": [...], "rows": [[...]]}},
              "figures": ["<path relative to the evidence file>"],
              "counterexample": str|null,     # pinned by a refutation check
              "proof": {"tool", "version", "source", "theorem", "trusts": [str],
                        "assumptions", "seconds", "sha256", "statement_sha256",
                        "scope": {"covers": "statement" | "part" | "special-case",
                                  "text": str},
                        "cached"} | null,  # a proved-tier check (theorems.proving)
              "intervals": [{"name", "estimate", "low", "high", "threshold", "level",
                             "trials", "method", "decided"}],  # confidence intervals a
                                      # sampled verdict turns on (additive within version 1)
              "falsifying_example": str|null, # Hypothesis' report when the check failed
              "message": str|null,            # failure or skip reason, first lines
              "calls": ["module:qualname"],   # constructions' public functions and classes
                                              # the check called (additive within version 1)
              "direct_calls": [...],          # those it called from its own code
              "duration": float               # seconds (a time: not compared between runs)
          }]
        }
      }
    }

Non-finite floats are written as the strings ``"inf"``, ``"-inf"`` and ``"nan"``.
``proof.seconds`` (compile or solve time) and ``proof.cached`` (whether it came from the proof
cache, see :mod:`theorems.proving`) depend on the run, like the times. Checks are
sorted by node id, so runs under pytest-xdist give the same file as serial runs. Only the
``started``/``finished``/``duration`` fields are times; with the ``ci`` profile two runs give the
same file apart from those. ``partial`` and ``selection`` were added within version 1: a reader
treats a file without them as complete. ``refutes`` was added within version 1 too (an
additive field, so the version stays 1): a reader treats a file without it as saying nothing
about scope. A proof's ``scope`` (what it covers of the claim), ``trusts`` (a list; it was one
string before) and ``statement_sha256`` were added within version 1 too; a proof without a
``scope`` says nothing about what it covers. So were the status and check outcome
``inconclusive`` and ``intervals`` (a reader treats a check without ``intervals`` as having
recorded none). ``run.reused`` was added within version 1 too: how many check records a run
took from an earlier run at the same commit, clean tree, profile and versions instead of
running them (:func:`reusable_checks`), and when that run started; null or absent when it ran
every check itself. Whether a claim is *proved* is derived by :func:`proved_checks` only: a
skipped, failed or inconclusive proof never counts, whatever ``summary.tiers`` (every tier
that has a check, skipped ones included) lists. The JSON Schema of this format is
:func:`json_schema`.

Where it goes: a complete run writes :data:`DEFAULT_PATH`, which the docs read; a partial run
writes :data:`PARTIAL_PATH` instead, so that ``pytest -k foo`` never replaces the evidence the
site is built from.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from empirics.provenance import as_float, git_dirty, git_sha, json_ready, utc_now, versions
from theorems.claims import STATUSES, TIERS, derive_status

SCHEMA_VERSION = 1
DEFAULT_PATH = Path("build") / "evidence.json"
PARTIAL_PATH = Path("build") / "evidence-partial.json"

__all__ = ["DEFAULT_PATH", "PARTIAL_PATH", "SCHEMA_CHANGELOG", "SCHEMA_VERSION", "as_float",
           "claim_records", "evidence_tiers", "is_partial", "json_schema", "load", "proved_checks",
           "reusable_checks", "run_metadata", "summarize", "write"]

# Every change to the format, newest last. An additive field (one a reader may ignore, whose
# absence means "not recorded") stays within a version; anything else bumps SCHEMA_VERSION.
SCHEMA_CHANGELOG = (
    (1, "first published format"),
    (1, "run.partial and run.selection (additive)"),
    (1, "claims.<id>.refutes: what a refutation refutes (additive)"),
    (1, "checks[].calls and direct_calls: the constructions module:qualname names a check "
        "called, and those it called from its own code (additive)"),
    (1, "checks[].proof.scope and proof.statement_sha256 (additive); proof.trusts is a list "
        "of what the proof trusts (it was one string)"),
    (1, "status and check outcome inconclusive, and checks[].intervals: the confidence "
        "intervals a sampled verdict turns on (a new value and a new field; the version "
        "stays 1)"),
    (1, "run.reused: the check records taken from an earlier run of the same code, profile "
        "and versions (additive)"),
)


def summarize(checks: Sequence[Mapping]) -> dict:
    """One claim's summary: its tiers, counts, examples, worst margin, max ratio, duration."""
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


def proved_checks(record: Mapping) -> list[Mapping]:
    """A claim record's passed machine-checked proofs: its checks of tier ``proved`` that
    passed and carry a proof record. A proof that was skipped (its tool missing), failed or
    was inconclusive is not one. This is the one derivation of "proved": the CLI's table and
    the site's chips, counts and headers all call it."""
    return [c for c in record.get("checks", ())
            if c["tier"] == "proved" and c["outcome"] == "passed" and c.get("proof")]


def evidence_tiers(record: Mapping) -> list[str]:
    """The tiers a claim's evidence comes from: those of its passed checks, in
    :data:`~theorems.claims.TIERS` order, with ``proved`` only when :func:`proved_checks`
    finds a proof. ``summary.tiers`` lists every tier that has a check, skipped ones too."""
    passed = {c["tier"] for c in record.get("checks", ())
              if c["outcome"] == "passed" and c["tier"] != "proved"}
    if proved_checks(record):
        passed.add("proved")
    return sorted(passed, key=TIERS.index)


def claim_records(checks_by_claim: Mapping[str, list[dict]], claim_ids: Sequence[str],
                  refutes: Mapping[str, str | None] | None = None) -> dict:
    """Per claim: its derived status, what a refutation of it refutes (``refutes``: claim id
    to scope, from the registry), its summary and check records (sorted by node id)."""
    records = {}
    refutes = refutes or {}
    for claim_id in sorted(set(claim_ids) | set(checks_by_claim)):
        checks = sorted(checks_by_claim.get(claim_id, []), key=lambda c: c["nodeid"])
        records[claim_id] = {"status": derive_status(checks),
                             "refutes": refutes.get(claim_id),
                             "summary": summarize(checks), "checks": checks}
    return records


def reusable_checks(data: Mapping, folder: str | os.PathLike, *, calls: bool,
                    ) -> dict[str, tuple[str, dict]]:
    """Node id -> (claim id, record) of the checks of ``data`` (an evidence file in ``folder``)
    that a later run of the same code may take as its own instead of running them again.

    Whether the code, the Hypothesis profile and the versions are the same is the caller's to
    check (:mod:`theorems.verify`); here each record is judged: a check that ran to an outcome
    (passed, failed or inconclusive; a skip may mean a missing tool, so a skipped check runs
    again), whose figures are beside the file, and that recorded the constructions it called
    when ``calls`` asks for them (``--theorems-calls``, which verify passes). Under the ``ci``
    profile such a record is what running the check again records, apart from times."""
    found = {}
    for claim_id, record in data.get("claims", {}).items():
        for check in record.get("checks", ()):
            if (check["outcome"] != "skipped" and ("calls" in check or not calls)
                    and all((Path(folder) / f).is_file() for f in check.get("figures") or ())):
                found[check["nodeid"]] = (claim_id, check)
    return found


def run_metadata(started: float, workers: int, *, partial: bool = False,
                 selection: str | None = None, hypothesis_profile: str | None = None,
                 hypothesis_seed: str | None = None, device: str = "cpu",
                 reused: dict | None = None) -> dict:
    """The ``run`` record: commit, times, profile, seed, versions, platform, device, and the
    records reused from an earlier run."""
    found = versions()
    return {
        "git_sha": git_sha(),
        "git_dirty": git_dirty(),
        "started": utc_now(started),
        "finished": utc_now(),
        "hypothesis_profile": hypothesis_profile,
        "hypothesis_seed": hypothesis_seed,
        "python": found["python"],
        "torch": found.get("torch"),
        "numpy": found.get("numpy"),
        "hypothesis": found.get("hypothesis"),
        "platform": platform.platform(terse=True),
        "device": device,
        "workers": workers,
        "partial": partial,
        "selection": selection,
        "reused": reused,
    }


def write(path: str | os.PathLike, run: dict, claims: dict) -> Path:
    """Write an evidence file (schema :data:`SCHEMA_VERSION`) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"schema": SCHEMA_VERSION, "run": run, "claims": claims}
    path.write_text(json.dumps(json_ready(data), indent=1) + "\n")
    return path


def load(path: str | os.PathLike = DEFAULT_PATH) -> dict:
    """Read an evidence file, checking its schema version and its statuses."""
    data = json.loads(Path(path).read_text())
    if data.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"{path}: evidence schema {data.get('schema')!r}, "
                         f"expected {SCHEMA_VERSION}")
    for claim_id, record in data["claims"].items():
        if record["status"] not in STATUSES:
            raise ValueError(f"{path}: claim {claim_id} has unknown status {record['status']!r}")
    return data


def is_partial(data: Mapping) -> bool:
    """Whether a loaded evidence file comes from a run that did not check every claim."""
    return bool(data.get("run", {}).get("partial", False))


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of an evidence file of :data:`SCHEMA_VERSION`."""
    number = {"type": ["number", "string", "null"]}  # non-finite floats are strings
    stat = {"type": ["object", "null"], "required": ["worst", "last", "count"],
            "properties": {"worst": number, "last": number, "count": {"type": "integer"}}}
    string_or_null = {"type": ["string", "null"]}
    check = {
        "type": "object",
        "required": ["nodeid", "name", "tier", "outcome", "examples", "margin", "ratio",
                     "metrics", "tables", "figures", "counterexample", "falsifying_example",
                     "message", "duration"],
        "properties": {
            "nodeid": {"type": "string"}, "name": {"type": "string"},
            "tier": {"enum": list(TIERS)},
            "outcome": {"enum": ["passed", "failed", "skipped", "inconclusive"]},
            "examples": {"type": "integer", "minimum": 0},
            "margin": stat, "ratio": stat,
            "metrics": {"type": "object", "additionalProperties": {
                "type": "object", "required": ["worst", "last", "count"],
                "properties": {"worst": number, "last": number, "count": {"type": "integer"},
                               "worse": {"enum": ["lower", "higher"]}}}},
            "tables": {"type": "object", "additionalProperties": {
                "type": "object", "required": ["header", "rows"],
                "properties": {"header": {"type": "array"},
                               "rows": {"type": "array", "items": {"type": "array"}}}}},
            "figures": {"type": "array", "items": {"type": "string"}},
            "counterexample": string_or_null, "falsifying_example": string_or_null,
            "message": string_or_null, "duration": {"type": "number"},
            "calls": {"type": "array", "items": {"type": "string"}},
            "proof": {"type": ["object", "null"], "properties": {
                "trusts": {"type": "array", "items": {"type": "string"}},
                "scope": {"type": "object", "required": ["covers", "text"],
                          "properties": {"covers": {"enum": ["statement", "part",
                                                             "special-case"]},
                                         "text": {"type": "string"}}}}},
            "direct_calls": {"type": "array", "items": {"type": "string"}},
            "intervals": {"type": "array", "items": {
                "type": "object",
                "required": ["name", "estimate", "low", "high", "threshold", "level",
                             "trials", "method", "decided"],
                "properties": {"name": {"type": "string"}, "estimate": number, "low": number,
                               "high": number, "threshold": number, "level": number,
                               "trials": {"type": "integer"}, "method": {"type": "string"},
                               "decided": {"type": "boolean"}}}},
        },
    }
    claim = {
        "type": "object", "required": ["status", "summary", "checks"],
        "properties": {
            "status": {"enum": list(STATUSES)},
            "refutes": {"enum": ["as-written", "reading", "finite-test", None]},
            "summary": {"type": "object",
                        "required": ["tiers", "checks", "passed", "examples", "worst_margin",
                                     "max_ratio", "duration"],
                        "properties": {"tiers": {"type": "array",
                                                 "items": {"enum": list(TIERS)}},
                                       "checks": {"type": "integer"},
                                       "passed": {"type": "integer"},
                                       "examples": {"type": "integer"},
                                       "worst_margin": number, "max_ratio": number,
                                       "duration": {"type": "number"}}},
            "checks": {"type": "array", "items": check},
        },
    }
    run_fields = ["git_sha", "git_dirty", "started", "finished", "hypothesis_profile",
                  "hypothesis_seed", "python", "torch", "numpy", "hypothesis", "platform",
                  "device", "workers"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"transformer-theorems/evidence/{SCHEMA_VERSION}",
        "title": "transformer-theorems evidence file",
        "description": "What every check of every claim produced, and the status derived "
                       "from it (theorems/evidence_file.py documents each field).",
        "type": "object", "required": ["schema", "run", "claims"],
        "properties": {
            "schema": {"const": SCHEMA_VERSION},
            "run": {"type": "object", "required": run_fields,
                    "properties": {"git_dirty": {"type": ["boolean", "null"]},
                                   "workers": {"type": "integer"},
                                   "partial": {"type": "boolean"},
                                   "selection": string_or_null,
                                   "reused": {"type": ["object", "null"],
                                              "required": ["checks", "started"]}}},
            "claims": {"type": "object", "additionalProperties": claim},
        },
    }
