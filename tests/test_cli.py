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
    assert re.search(r"published empirics \(full, else cpu\): \d+ current, \d+ stale, \d+ missing",
                     result.stdout)


@pytest.mark.integration  # a verify subprocess
def test_show_reads_the_last_evidence(verified):
    _, out = verified
    result = theorems("show", "addition.failure-probability-linear", "--evidence", str(out))
    assert "Status: refuted" in result.stdout
    assert "Refutes: as-written" in result.stdout
    assert "counterexample: n_d = 6" in result.stdout


def fake_pytest_run(statuses: dict[str, str], commands: list | None = None,
                    returncode: int | None = None, then=None):
    """Stands in for the pytest subprocess: writes an evidence file with these statuses (an
    unchecked claim has no check), records the command in ``commands``, returns
    ``returncode`` (default: 1 if a claim is failing, else 0), or calls ``then()`` last.
    Other commands (``coqc --version`` when an area is first imported, say) run as usual."""
    real_run = subprocess.run

    def run(command, check=False, **kwargs):
        if not any(a.startswith("--evidence-out=") for a in command):
            return real_run(command, check=check, **kwargs)
        if commands is not None:
            commands.append(command)
        out = Path(next(a for a in command if a.startswith("--evidence-out="))
                   .split("=", 1)[1])
        claims = {}
        for claim_id, status in statuses.items():
            outcome = "failed" if status == "failing" else "passed"
            tier = "refutation" if status == "refuted" else "property"
            check_record = {"nodeid": claim_id, "name": claim_id, "tier": tier,
                            "outcome": outcome, "examples": 1, "margin": None, "ratio": None,
                            "duration": 0.0}
            checks = [] if status == "unchecked" else [check_record]
            claims[claim_id] = {"status": status, "summary": summarize(checks),
                                "checks": checks}
        out.write_text(json.dumps({"schema": 1, "run": {}, "claims": claims}))
        if then is not None:
            then()
        code = (1 if "failing" in statuses.values() else 0) if returncode is None else returncode
        return subprocess.CompletedProcess(command, code)
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


# --- selecting claims -----------------------------------------------------------------------

def no_pytest_run(command, check=False):
    raise AssertionError(f"pytest should not have started: {command}")


def theorems_claim_args(command: list[str]) -> list[str]:
    return [a.split("=", 1)[1] for a in command if a.startswith("--theorems-claim=")]


@pytest.fixture
def no_census(monkeypatch):
    """The published-results census (seconds of hashing) is not what these tests are about."""
    import empirics.census

    monkeypatch.setattr(empirics.census, "census", lambda: None)
    monkeypatch.setattr(empirics.census, "summary_line", lambda census: "(census)")


def test_verify_claim_selects_its_checks_by_id_and_prints_only_its_row(monkeypatch, tmp_path,
                                                                         capsys, no_census):
    """``--claim`` hands the id to the plugin (which matches the checks' claim marks), prints
    only that claim's row, not the others as unchecked, and replaces the previous file."""
    commands = []
    monkeypatch.setattr(verify.subprocess, "run", fake_pytest_run(
        {"layernorm.uniform-attention": "verified", "addition.failure-set": "unchecked",
         "bilinear.tensor-identity": "unchecked"}, commands))
    out = tmp_path / "e.json"
    out.write_text("previous")
    assert cli.main(["verify", "--claim", "layernorm.uniform-attention", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    [command] = commands
    assert theorems_claim_args(command) == ["layernorm.uniform-attention"]
    assert "-k" not in command
    assert re.search(r"✔ verified\s+layernorm\.uniform-attention", printed)
    assert "unchecked" not in printed and "addition.failure-set" not in printed
    assert "\n1 verified;" in printed
    assert json.loads(out.read_text())["claims"]["layernorm.uniform-attention"]["status"] == (
        "verified")
    assert [p.name for p in tmp_path.iterdir()] == ["e.json"]  # no temporary file left


def test_verify_area_selects_every_claim_of_the_area(monkeypatch, tmp_path, no_census):
    from theorems.catalogue import load_claims

    commands = []
    monkeypatch.setattr(verify.subprocess, "run", fake_pytest_run(
        {"bilinear.tensor-identity": "verified"}, commands))
    assert cli.main(["verify", "--area", "bilinear", "--claim", "addition.failure-set",
                     "--out", str(tmp_path / "e.json")]) == 0
    bilinear = [c.id for c in load_claims() if c.area == "bilinear"]
    assert len(bilinear) > 1
    assert theorems_claim_args(commands[0]) == ["addition.failure-set", *bilinear]


def test_verify_k_prints_only_the_claims_it_checked(monkeypatch, tmp_path, capsys, no_census):
    monkeypatch.setattr(verify.subprocess, "run", fake_pytest_run(
        {"bilinear.tensor-identity": "verified", "addition.failure-set": "unchecked"}))
    assert cli.main(["verify", "-k", "bilinear", "--out", str(tmp_path / "e.json")]) == 0
    printed = capsys.readouterr().out
    assert "bilinear.tensor-identity" in printed and "addition.failure-set" not in printed


@pytest.mark.parametrize("args, message", [
    (["--claim", "layernorm.uniform_attention"],
     "verify: unknown claim 'layernorm.uniform_attention'; did you mean "
     "layernorm.uniform-attention"),
    (["--area", "fact_mlps"], "verify: unknown area 'fact_mlps'; did you mean fact-mlps?"),
    (["-k", "addition and"], "verify: keyword 'addition and' is not a pytest -k expression: "
                             "expected not OR left parenthesis OR identifier; got end of input"),
    (["-k", "layernorm.uniform-attention"],
     "verify: -k matches test names, not claim ids: use --claim layernorm.uniform-attention"),
])
def test_a_bad_selection_is_one_line_before_pytest_starts(monkeypatch, tmp_path, capsys, args,
                                                         message):
    monkeypatch.setattr(verify.subprocess, "run", no_pytest_run)
    out = tmp_path / "e.json"
    out.write_text("previous")
    assert cli.main(["verify", *args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(message) and captured.err.count("\n") == 1, captured.err
    assert out.read_text() == "previous"


def test_the_keyword_is_checked_by_pytests_own_parser():
    verify.check_keyword("bilinear and not (tensor or slow)")
    with pytest.raises(ValueError, match="keyword"):
        verify.verify(keyword="a or", echo=False)


# --- the previous evidence file stays until a run completes ---------------------------------

def test_a_k_that_selects_nothing_says_so_and_keeps_the_evidence(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(verify.subprocess, "run",
                        lambda command, check=False: subprocess.CompletedProcess(command, 5))
    out = tmp_path / "e.json"
    out.write_text("previous")
    assert cli.main(["verify", "-k", "nonexistent", "--out", str(out)]) == 5
    err = capsys.readouterr().err
    assert err == f"verify: -k 'nonexistent' selects no check; {out} is unchanged\n"
    assert out.read_text() == "previous"


def test_an_interrupted_run_keeps_the_evidence(monkeypatch, tmp_path, capsys):
    """pytest interrupted (exit code 2) after writing, or verify itself interrupted while
    pytest runs: the previous file stays, and no temporary file is left beside it."""
    out = tmp_path / "e.json"
    out.write_text("previous")
    monkeypatch.setattr(verify.subprocess, "run", fake_pytest_run(
        {"bilinear.tensor-identity": "verified"}, returncode=2))
    assert cli.main(["verify", "--out", str(out)]) == 2
    assert "no evidence was written (pytest exit code 2)" in capsys.readouterr().err

    def interrupt():
        raise KeyboardInterrupt

    monkeypatch.setattr(verify.subprocess, "run", fake_pytest_run(
        {"bilinear.tensor-identity": "verified"}, then=interrupt))
    assert cli.main(["verify", "--out", str(out)]) == 130
    assert capsys.readouterr().err == "verify: interrupted\n"
    assert out.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["e.json"]


# --- show ------------------------------------------------------------------------------------

def test_show_unknown_claim_is_one_line_with_close_matches(capsys):
    assert cli.main(["show", "layernorm.uniform_attention"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("unknown claim 'layernorm.uniform_attention'; did you mean "
                                   "layernorm.uniform-attention")
    assert captured.err.count("\n") == 1


def check_record(name: str, tier: str, outcome: str = "passed", **fields) -> dict:
    return {"nodeid": f"theorems/areas/bilinear.py::{name}", "name": name, "tier": tier,
            "outcome": outcome, "examples": 1, "margin": None, "ratio": None, "metrics": {},
            "tables": {}, "figures": [], "counterexample": None, "falsifying_example": None,
            "message": None, "duration": 0.5, **fields}


def write_evidence(path: Path, claim_id: str, status: str, checks: list[dict]) -> None:
    path.write_text(json.dumps({"schema": 1, "run": {}, "claims": {claim_id: {
        "status": status, "refutes": None, "summary": summarize(checks), "checks": checks}}}))


def test_show_prints_a_proofs_tool_theorem_trust_base_and_scope(tmp_path, capsys):
    """Contract 2: what a proof is, what it trusts and which part of the statement it covers;
    a skipped proof says why and is not shown as proved. A sampled check shows its intervals
    (contract 1). Fields a record lacks are left out, not an error."""
    proved = check_record("test_proved", "proved", proof={
        "tool": "Coq", "version": "8.18.0", "source": "proofs/bilinear.v",
        "theorem": "tensor_identity", "trusts": ["the Coq 8.18.0 kernel", "no axioms"],
        "scope": {"covers": "part", "text": "the first sentence"}, "assumptions": []})
    skipped = check_record("test_proved_z3", "proved", "skipped", proof=None,
                           message="z3 is not installed")
    sparse = check_record("test_proved_old", "proved", proof={"tool": "z3",
                                                              "trusts": "z3 4.12's unsat"})
    sampled = check_record("test_sampled", "empirical", intervals=[{
        "name": "accuracy", "estimate": 0.93, "low": 0.91, "high": 0.95, "threshold": 0.9,
        "level": 0.95, "trials": 400, "method": "wilson", "decided": True}, {"name": "bare"}])
    path = tmp_path / "e.json"
    write_evidence(path, "bilinear.tensor-identity", "verified",
                   [proved, skipped, sparse, sampled])
    assert cli.main(["show", "bilinear.tensor-identity", "--evidence", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("proved: Coq 8.18.0 theorem tensor_identity in proofs/bilinear.v\n"
            "      trusts: the Coq 8.18.0 kernel; no axioms\n"
            "      scope: part: the first sentence\n") in out
    assert "proof: skipped (z3 is not installed), not proved\n" in out
    assert "proved: z3\n      trusts: z3 4.12's unsat\n" in out
    assert ("interval accuracy: estimate 0.93 in [0.91, 0.95] (0.95 level, 400 trials, "
            "wilson), threshold 0.9: decided\n") in out
    assert "interval bare: estimate - in [-, -]\n" in out


def test_show_prints_an_inconclusive_status(tmp_path, capsys):
    from theorems.claims import STATUSES

    if "inconclusive" not in STATUSES:
        pytest.skip("the inconclusive status (contract 1) is not in theorems.claims yet")
    path = tmp_path / "e.json"
    write_evidence(path, "bilinear.tensor-identity", "inconclusive",
                   [check_record("test_sampled", "empirical", "inconclusive")])
    assert cli.main(["show", "bilinear.tensor-identity", "--evidence", str(path)]) == 0
    assert "Status: inconclusive" in capsys.readouterr().out


def test_the_table_marks_an_inconclusive_claim(capsys):
    checks = [check_record("test_sampled", "empirical", "inconclusive")]
    cli.print_table({"claims": {"bilinear.tensor-identity": {
        "status": "inconclusive", "summary": summarize(checks), "checks": checks}}})
    out = capsys.readouterr().out
    assert re.search(r"\? inconclusive\s+bilinear\.tensor-identity", out)
    assert "\n1 inconclusive;" in out


def test_the_table_never_lists_a_skipped_proof_as_proved(capsys):
    """The tiers column comes from the passed checks only (evidence_file.evidence_tiers): a
    proof skipped for a missing tool is no evidence."""
    checks = [check_record("test_identity", "property", "passed"),
              check_record("test_identity_proved", "proved", "skipped")]
    cli.print_table({"claims": {"bilinear.tensor-identity": {
        "status": "verified", "summary": summarize(checks), "checks": checks}}})
    row = next(line for line in capsys.readouterr().out.splitlines()
               if "bilinear.tensor-identity" in line)
    assert "property" in row and "proved" not in row


# --- pipes -----------------------------------------------------------------------------------

class ClosedPipe:
    """A stdout whose reader has gone, as after ``| head``."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise OSError("not a real file")


@pytest.mark.parametrize("args", [["list"], ["show", "addition.failure-set"]])
def test_a_closed_pipe_ends_quietly(monkeypatch, capsys, args):
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli.main(args) == 141
    assert capsys.readouterr().err == ""


def test_a_closed_pipe_ends_quietly_as_users_meet_it():
    """``python -m theorems list | head``: the reader is gone before the first write."""
    process = subprocess.Popen([sys.executable, "-m", "theorems", "list"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    _, err = process.communicate(timeout=120)
    assert (process.returncode, err.decode()) == (141, "")


# --- docs --------------------------------------------------------------------------------------

def test_docs_counts_warnings_not_lines(tmp_path):
    """A docutils error quotes the offending block, over several lines: it is one warning."""
    pytest.importorskip("sphinx")
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    from theorems.site import WarningLog

    source = tmp_path / "src"
    source.mkdir()
    (source / "conf.py").write_text("")
    (source / "index.rst").write_text("Title\n=====\n\n.. no-such-directive::\n\n   a\n   b\n\n"
                                      "`unclosed\n")
    log = WarningLog()
    # in its own docutils namespace, as build_site builds: a bare Sphinx app leaves its nodes
    # and directives registered, and the next build in this process warns about each
    with docutils_namespace():
        app = Sphinx(source, source, tmp_path / "out", tmp_path / "doctrees", "html",
                     status=None, warning=log, freshenv=True)
        app.build(force_all=True)
    assert len(log.entries) == 2, log.entries
    assert len(log.getvalue().splitlines()) > 2
    assert "no-such-directive" in log.entries[0] and "unclosed" not in log.entries[0]
