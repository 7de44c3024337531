"""The evidence bundle (theorems/dataset.py): schema validation, files, changelog, CLI."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import docs_fixture
import pytest

from theorems import dataset, evidence_file
from theorems.claims import load_all


@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    """The docs fixture's evidence file: every claim, every status."""
    directory = tmp_path_factory.mktemp("dataset-evidence")
    return docs_fixture.write_evidence(load_all(), directory)


def test_the_evidence_conforms_to_its_schema(evidence):
    data = evidence_file.load(evidence)
    schema = evidence_file.json_schema()
    assert dataset.validate(data, schema) == []
    assert dataset._validate(data, schema, "$") == []  # the fallback validator agrees


@pytest.mark.parametrize("break_it, where", [
    (lambda d: d.update(schema=2), "schema"),
    (lambda d: next(iter(d["claims"].values())).update(status="proved"), "status"),
    (lambda d: next(iter(d["claims"].values()))["checks"][0].pop("tier"), "tier"),
    (lambda d: d["run"].pop("git_sha"), "git_sha"),
])
def test_a_broken_evidence_file_is_caught_by_both_validators(evidence, break_it, where):
    data = copy.deepcopy(json.loads(evidence.read_text()))
    break_it(data)
    schema = evidence_file.json_schema()
    assert dataset.validate(data, schema), where
    assert dataset._validate(data, schema, "$"), where


def test_export_writes_the_bundle_and_the_changelog(evidence, tmp_path):
    first = dataset.export(tmp_path / "v1", evidence)
    assert [p.name for p in first] == list(dataset.FILES) and all(p.is_file() for p in first)
    manifest = json.loads((tmp_path / "v1" / "manifest.json").read_text())
    assert manifest["schema"] == evidence_file.SCHEMA_VERSION
    assert "cff-version: 1.2.0" in (tmp_path / "v1" / "CITATION.cff").read_text()
    claims = json.loads((tmp_path / "v1" / "claims.json").read_text())["claims"]
    assert len(claims) == len(load_all())
    # a second release in which one claim changed status
    data = json.loads(evidence.read_text())
    changed = next(cid for cid, r in data["claims"].items() if r["status"] == "verified")
    data["claims"][changed]["status"] = "failing"
    second = tmp_path / "second.json"
    second.write_text(json.dumps(data))
    dataset.export(tmp_path / "v2", second, previous=tmp_path / "v1")
    changes = json.loads((tmp_path / "v2" / "changes.json").read_text())["changes"]
    assert [(c["claim"], c["from"], c["to"]) for c in changes] == [
        (changed, "verified", "failing")]
    text = (tmp_path / "v2" / "CHANGES.md").read_text()
    assert f"`{changed}`: verified -> failing" in text and "schema changelog" in text


def test_export_command(evidence, tmp_path):
    result = subprocess.run([sys.executable, "-m", "theorems", "export", str(tmp_path / "out"),
                             "--evidence", str(evidence)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "evidence.schema.json").is_file()
