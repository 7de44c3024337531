"""python -m theorems, exercised through subprocesses as a user would run it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from theorems import cli, verify
from theorems.claims import load_all
from theorems.evidence_file import summarize


def theorems(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "theorems", *args], capture_output=True,
                          text=True, timeout=600, cwd=cwd, check=False)


def test_list_json_names_every_registered_claim():
    result = theorems("list", "--json")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)["claims"]
    assert [c["id"] for c in listed] == [c.id for c in load_all()]
    for claim in listed:
        assert claim["sources"] and {"arxiv", "where", "tag"} <= set(claim["sources"][0])
    scopes = {c["id"]: c["refutes"] for c in listed}
    assert scopes["fact-mlps.gd-matches-construction"] == "finite-test"
    assert scopes["boltzmann.ordered-separation"] == "reading"


def test_list_is_human_readable():
    result = theorems("list")
    assert result.returncode == 0
    assert "layernorm.projection-decomposition" in result.stdout
    assert "arXiv:2305.02582" in result.stdout


def test_show_prints_statement_and_source(tmp_path):
    result = theorems("show", "addition.failure-set", "--evidence", str(tmp_path / "none.json"))
    assert result.returncode == 0
    assert "Statement:" in result.stdout and "arXiv:2310.13121" in result.stdout
    assert "No evidence yet" in result.stdout


def test_show_unknown_claim_suggests_close_ids():
    result = theorems("show", "failure-set")
    assert result.returncode == 2
    assert "addition.failure-set" in result.stderr


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """One verify run on a cheap subset, with a refuted claim in it."""
    out = tmp_path_factory.mktemp("verify") / "evidence.json"
    # two claims' checks: a property and a proved one, and a refutation
    result = theorems("verify", "-k", "bilinear and tensor or linear_failure", "--jobs", "0",
                      "--out", str(out))
    return result, out


@pytest.mark.integration  # a verify subprocess
def test_verify_writes_evidence_and_prints_one_row_per_claim(verified):
    result, out = verified
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert data["run"]["hypothesis_profile"] == "ci"
    assert data["claims"]["bilinear.tensor-identity"]["status"] == "verified"
    assert data["claims"]["addition.failure-probability-linear"]["status"] == "refuted"
    assert data["claims"]["addition.failure-probability-linear"]["refutes"] == "as-written"
    assert data["claims"]["bilinear.tensor-identity"]["refutes"] is None
    assert re.search(r"✔ verified\s+bilinear\.tensor-identity\s+property(,proved)?\s+\d+",
                     result.stdout)
    assert re.search(r"✘ refuted\s+addition\.failure-probability-linear\s+refutation",
                     result.stdout)
    assert re.search(r"; \d+ verified with all its dependencies", result.stdout)
    assert re.search(r"published empirics \(full\): \d+ current, \d+ stale, \d+ missing",
                     result.stdout)


@pytest.mark.integration  # a verify subprocess
def test_show_reads_the_last_evidence(verified):
    _, out = verified
    result = theorems("show", "addition.failure-probability-linear", "--evidence", str(out))
    assert "Status: refuted" in result.stdout
    assert "Refutes: as-written" in result.stdout
    assert "counterexample: n_d = 6" in result.stdout


def fake_pytest_run(statuses: dict[str, str]):
    """Stands in for the pytest subprocess: writes an evidence file with these statuses."""
    def run(command, check=False):
        out = Path(next(a for a in command if a.startswith("--evidence-out="))
                   .split("=", 1)[1])
        claims = {}
        for claim_id, status in statuses.items():
            outcome = "failed" if status == "failing" else "passed"
            tier = "refutation" if status == "refuted" else "property"
            check_record = {"nodeid": claim_id, "name": claim_id, "tier": tier,
                            "outcome": outcome, "examples": 1, "margin": None, "ratio": None,
                            "duration": 0.0}
            claims[claim_id] = {"status": status, "summary": summarize([check_record]),
                                "checks": [check_record]}
        out.write_text(json.dumps({"schema": 1, "run": {}, "claims": claims}))
        return subprocess.CompletedProcess(command, 1 if "failing" in statuses.values() else 0)
    return run


@pytest.mark.parametrize("status, code", [("verified", 0), ("refuted", 0), ("failing", 1)])
def test_verify_exit_code_follows_the_statuses(monkeypatch, tmp_path, capsys, status, code):
    monkeypatch.setattr(verify.subprocess, "run", fake_pytest_run({"bilinear.tensor-identity":
                                                                status}))
    assert cli.main(["verify", "-k", "bilinear", "--out", str(tmp_path / "e.json")]) == code
    assert status in capsys.readouterr().out


def test_verify_without_evidence_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setattr(verify.subprocess, "run",
                        lambda command, check=False: subprocess.CompletedProcess(command, 5))
    assert cli.main(["verify", "-k", "nothing", "--out", str(tmp_path / "e.json")]) == 5


def test_list_reads_the_catalogue_without_the_checks_machinery():
    """``list`` imports neither Hypothesis nor torch nor any experiment module."""
    light = ("empirics.provenance", "empirics.plots")
    code = ("import sys; import theorems.cli as c; c.main(['list']); "
            "heavy = [m for m in sys.modules if m in ('hypothesis', 'torch') "
            f"or (m.startswith('empirics.') and m not in {light!r})]; "
            "print('HEAVY', sorted(heavy))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stdout.strip().splitlines()[-1] == "HEAVY []"


def test_the_light_catalogue_is_the_full_one():
    from theorems.catalogue import is_light, load_claims

    light = load_claims()
    assert is_light(light), "some claim needs the full import: see theorems/catalogue.py"
    assert [c.as_dict() for c in light] == [c.as_dict() for c in load_all()]
