"""The evidence as a citable dataset: ``python -m theorems export DIR``.

A bundle is a folder of plain files that can be archived, cited and diffed:

* ``evidence.json``: the evidence file (schema in :mod:`theorems.evidence_file`);
* ``evidence.schema.json``: its JSON Schema (:func:`theorems.evidence_file.json_schema`);
* ``claims.json``: the claim registry, as ``python -m theorems list --json`` prints it;
* ``CITATION.cff``: how to cite the bundle (Citation File Format 1.2.0);
* ``CHANGES.md`` and ``changes.json``: which claims changed status since the previous
  release's bundle (``--previous``), and why (the check outcomes behind each status), and the
  schema changelog; without a previous bundle, every claim's status is listed as new;
* ``manifest.json``: the bundle's version, the schema version, the commit, the file list.

The bundle imports nothing heavy (no torch, no Hypothesis): it reads files and the catalogue.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from theorems import evidence_file

BUNDLE_VERSION = 1  # the layout of the bundle itself; bump when a file changes its meaning
FILES = ("evidence.json", "evidence.schema.json", "claims.json", "CITATION.cff", "CHANGES.md",
         "changes.json", "manifest.json")
PROJECT = "transformer-theorems"


def validate(data: object, schema: Mapping) -> list[str]:
    """Every way ``data`` breaks ``schema`` (an empty list: it conforms).

    Uses ``jsonschema`` when it is installed; otherwise a small validator of the keywords
    :func:`~theorems.evidence_file.json_schema` uses (type, enum, const, required,
    properties, additionalProperties, items, minimum)."""
    try:
        import jsonschema
    except ImportError:
        return _validate(data, schema, "$")
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
            for e in validator.iter_errors(data)]


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: object, name: str) -> bool:
    if name in ("number", "integer"):
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        return numeric and (name == "number" or float(value).is_integer())
    return isinstance(value, _TYPES[name])


def _validate(data: object, schema: Mapping, where: str) -> list[str]:
    problems: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is(data, t) for t in names):
            return [f"{where}: {data!r:.60} is not of type {names}"]
    if "const" in schema and data != schema["const"]:
        problems.append(f"{where}: {data!r} is not {schema['const']!r}")
    if "enum" in schema and data not in schema["enum"]:
        problems.append(f"{where}: {data!r} is not one of {schema['enum']}")
    if "minimum" in schema and _is(data, "number") and data < schema["minimum"]:
        problems.append(f"{where}: {data!r} is below {schema['minimum']}")
    if isinstance(data, dict):
        problems += [f"{where}: missing {key!r}" for key in schema.get("required", ())
                     if key not in data]
        properties = schema.get("properties", {})
        for key, value in data.items():
            sub = properties.get(key, schema.get("additionalProperties"))
            if isinstance(sub, Mapping):
                problems += _validate(value, sub, f"{where}/{key}")
    if isinstance(data, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(data):
            problems += _validate(item, schema["items"], f"{where}/{i}")
    return problems


def status_changes(previous: Mapping | None, current: Mapping) -> list[dict]:
    """Per claim whose status differs from ``previous`` (a loaded evidence file, or None for
    a first release): its id, old and new status, and why (the outcomes now)."""
    before = {cid: r["status"] for cid, r in (previous or {}).get("claims", {}).items()}
    changes = []
    for claim_id, record in sorted(current["claims"].items()):
        old = before.get(claim_id)
        if old != record["status"]:
            outcomes = [f"{c['tier']} {c['name']}: {c['outcome']}" for c in record["checks"]]
            changes.append({"claim": claim_id, "from": old, "to": record["status"],
                            "why": outcomes or ["no check ran"]})
    for claim_id in sorted(set(before) - set(current["claims"])):
        changes.append({"claim": claim_id, "from": before[claim_id], "to": None,
                        "why": ["the claim was removed from the registry"]})
    return changes


def _changes_markdown(changes: list[dict], previous_sha: str | None, sha: str | None) -> str:
    lines = ["# Status changes", "",
             f"From {previous_sha or 'nothing (first release)'} to {sha}.", ""]
    if not changes:
        lines.append("No claim changed status.")
    for change in changes:
        lines.append(f"- `{change['claim']}`: {change['from'] or 'new'} -> "
                     f"{change['to'] or 'removed'}")
        lines += [f"  - {why}" for why in change["why"]]
    lines += ["", "# Evidence schema changelog", ""]
    lines += [f"- version {version}: {what}" for version, what in
              evidence_file.SCHEMA_CHANGELOG]
    return "\n".join(lines) + "\n"


def citation(data: Mapping) -> str:
    """A CITATION.cff for the bundle made from ``data`` (a loaded evidence file)."""
    run = data.get("run", {})
    sha = run.get("git_sha") or "unknown"
    date = (run.get("finished") or "")[:10]
    lines = ["cff-version: 1.2.0",
             "message: If you use this evidence, please cite it as below.",
             "type: dataset",
             f'title: "{PROJECT}: evidence for checked claims about small transformers"',
             "authors:",
             f'  - name: "The {PROJECT} contributors"',
             f'version: "bundle {BUNDLE_VERSION}, evidence schema '
             f'{evidence_file.SCHEMA_VERSION}, commit {sha[:12]}"',
             f'commit: "{sha}"']
    if date:
        lines.append(f"date-released: {date}")
    lines += ["license: MIT",
              "keywords:", "  - transformers", "  - mechanistic interpretability",
              "  - property-based testing"]
    return "\n".join(lines) + "\n"


def export(out: str | Path, evidence: str | Path = evidence_file.DEFAULT_PATH,
           previous: str | Path | None = None) -> list[Path]:
    """Write the bundle into ``out`` from the evidence file ``evidence``; return its files.

    ``previous`` is the previous release's ``evidence.json`` (or its bundle folder): the
    changelog is computed against it. The evidence must conform to the schema.
    """
    from theorems.catalogue import load_claims

    data = evidence_file.load(evidence)
    schema = evidence_file.json_schema()
    problems = validate(data, schema)
    if problems:
        raise ValueError(f"{evidence} does not conform to the evidence schema: {problems[:5]}")
    old = None
    if previous is not None:
        previous = Path(previous)
        old = evidence_file.load(previous / "evidence.json" if previous.is_dir() else previous)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(evidence, out / "evidence.json")
    (out / "evidence.schema.json").write_text(json.dumps(schema, indent=1) + "\n")
    registry = load_claims()
    (out / "claims.json").write_text(
        json.dumps({"claims": [c.as_dict() for c in registry]}, indent=1) + "\n")
    (out / "CITATION.cff").write_text(citation(data))
    changes = status_changes(old, data)
    sha = data["run"].get("git_sha")
    previous_sha = old["run"].get("git_sha") if old else None
    (out / "changes.json").write_text(json.dumps(
        {"from": previous_sha, "to": sha, "changes": changes,
         "schema_changelog": [list(e) for e in evidence_file.SCHEMA_CHANGELOG]},
        indent=1) + "\n")
    (out / "CHANGES.md").write_text(_changes_markdown(changes, previous_sha, sha))
    manifest = {"bundle": BUNDLE_VERSION, "schema": evidence_file.SCHEMA_VERSION,
                "git_sha": sha, "partial": evidence_file.is_partial(data),
                "claims": len(registry), "files": list(FILES)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return [out / name for name in FILES]
