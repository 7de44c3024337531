"""The evidence plugin, end to end: a throwaway test module is run by pytest and the evidence
file it writes is inspected.

A run of one session goes through ``pytest.main`` in this process (:func:`run_pytest`): the
plugin keeps its state per session (``config.stash``), so an inner session is the same as one
in a fresh interpreter, without paying for a second interpreter's start-up (torch, Hypothesis
and every area module imported again, about 5 CPU-s a run). Only what needs a fresh
interpreter starts one: the comparison with an xdist run, what importing the plugin imports,
and another project's session."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from theorems.evidence_file import load

DEMO = '''
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from hypothesis import example, given, strategies as st

from theorems.claims import Claim, Source
from theorems.evidence import check, decide, evidence, expect_failure
from theorems.intervals import Interval

SOURCE = Source(arxiv="2408.14332", where="Theorem 1", tag="V")
GOOD = Claim(id="demo.good", title="t", statement="s", source=SOURCE, kind="identity")
BAD = Claim(id="demo.bad", title="t", statement="s", source=SOURCE, kind="bound")
REFUTED = Claim(id="demo.refuted", title="t", statement="s", source=SOURCE, kind="identity",
                correction="x != 3 except at 3", refutes="as-written")
SYMBOLIC = Claim(id="demo.symbolic-only", title="t", statement="s", source=SOURCE,
                 kind="identity")
UNCHECKED = Claim(id="demo.unchecked", title="t", statement="s", source=SOURCE, kind="identity")
UNDECIDED = Claim(id="demo.undecided", title="t", statement="s", source=SOURCE, kind="bound")


@check(GOOD, "property")
@given(x=st.integers(0, 10**6))
@example(x=10**6)
def test_good(x):
    evidence.margin(10**6 + 1 - x)
    evidence.ratio(x / 10**6)
    evidence.metric("x", x, worse="higher")


@check(GOOD, "exhaustive")
def test_good_exhaustively():
    from constructions.numerics import gamma

    from constructions.induction_heads import two_layer_parameters

    gamma(3)  # recorded in the check's calls
    two_layer_parameters(4)  # recorded under the subpackage module that defines it
    evidence.cases(7)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    evidence.figure(fig, "line")
    evidence.table("squares", ["n", "n^2"], [[n, n * n] for n in range(3)])
    assert decide("p", Interval(0.8, 0.7, 0.9, 0.95, 40, "demo"), threshold=0.5) == "above"


@check(BAD, "property")
@given(x=st.integers(0, 100))
def test_bad(x):
    evidence.margin(50 - x)
    assert x < 50


def claim_as_stated():
    @given(x=st.integers(0, 5))
    @example(x=3)
    def run(x):
        assert x != 3
    return run


@check(REFUTED, "refutation")
def test_refutation():
    evidence.counterexample(expect_failure(claim_as_stated()))


@check(SYMBOLIC, "symbolic")
def test_symbolic():
    evidence.cases(1)


@check(UNDECIDED, "property")
def test_undecided_passes():
    evidence.cases(1)


@check(UNDECIDED, "numeric")
def test_undecided():
    decide("median ratio", Interval(1.1, 0.9, 1.3, 0.95, 20, "demo"), threshold=1.0)
    raise AssertionError("decide returned on an interval containing the threshold")
'''


# What every inner session is given: no cache folder, the ci profile (registered by loading
# theorems.profiles as a plugin first). ``no:unraisableexception`` skips the garbage
# collections that plugin runs when a session ends (pytester skips them the same way).
# The inner sessions load no entry-point plugin that this project's addopts leave out: anyio's,
# imported in a process where an earlier test imported part of anyio, fails to load (an
# internal error of the inner session, seen in the full xdist run).
SESSION = ("-p", "no:cacheprovider", "-p", "no:unraisableexception",
           "-p", "no:anyio", "-p", "no:jaxtyping", "-p", "no:typeguard",
           "-p", "theorems.profiles", "--hypothesis-profile=ci")


def run_pytest(directory: Path, *args: str) -> pytest.RunResult:
    """``pytest *args`` in ``directory``, as one session of this process (``pytest.main``), and
    what it printed.

    What a session leaves in the process is put back afterwards: the working directory,
    ``sys.path`` (pytest prepends the test folder), the test modules of ``directory`` (so that
    the next session imports its own copy), and the Hypothesis profile (the inner session
    loads ``ci``). Its claims go to a registry of their own (``isolated_registry``), as a fresh
    interpreter's would; every area's claims are registered in the real registry first, which
    the plugin reads when it writes (``load_all``), so that no area module is first imported
    while the isolated registry is current."""
    from hypothesis import settings

    from theorems.claims import isolated_registry, load_all

    load_all()
    profile, cwd, path = settings.get_current_profile_name(), os.getcwd(), list(sys.path)
    before = set(sys.modules)
    out, err = io.StringIO(), io.StringIO()
    importlib.invalidate_caches()  # the test modules were written just now
    start = time.perf_counter()
    try:
        os.chdir(directory)
        with isolated_registry(), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            ret = pytest.main([*SESSION, *args])
    finally:
        os.chdir(cwd)
        sys.path[:] = path
        for name in set(sys.modules) - before:
            file = getattr(sys.modules[name], "__file__", None)
            if file and Path(file).resolve().is_relative_to(Path(directory).resolve()):
                del sys.modules[name]
        settings.load_profile(profile)
    return pytest.RunResult(ret, out.getvalue().splitlines(), err.getvalue().splitlines(),
                            time.perf_counter() - start)


def run_pytest_subprocess(directory: Path, *args: str) -> subprocess.CompletedProcess:
    """``pytest *args`` in ``directory`` in a fresh interpreter (for an xdist run)."""
    return subprocess.run([sys.executable, "-m", "pytest", *SESSION, *args], cwd=directory,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def demo_directory(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("demo")


@pytest.fixture(scope="module")
def demo_serial(demo_directory) -> tuple[pytest.RunResult, dict]:
    """The demo module run serially, once for the tests that read it: what it printed and its
    evidence."""
    (demo_directory / "test_demo.py").write_text(DEMO)
    out = demo_directory / "serial" / "evidence.json"
    return run_pytest(demo_directory, f"--evidence-out={out}", "--theorems-calls"), load(out)


def without_times(data: dict) -> dict:
    data = json.loads(json.dumps(data))
    for key in ("started", "finished", "workers"):
        data["run"].pop(key)
    for record in data["claims"].values():
        record["summary"].pop("duration")
        for check in record["checks"]:
            check.pop("duration")
    return data


def test_evidence_file_records_each_check(demo_serial, demo_directory):
    result, data = demo_serial
    result.assert_outcomes(passed=5, failed=1, skipped=1)
    claims = data["claims"]
    assert {cid: claims[cid]["status"] for cid in claims if cid.startswith("demo.")} == {
        "demo.good": "verified", "demo.bad": "failing", "demo.refuted": "refuted",
        "demo.symbolic-only": "unchecked", "demo.unchecked": "unchecked",
        "demo.undecided": "inconclusive"}

    good = {c["tier"]: c for c in claims["demo.good"]["checks"]}
    assert good["property"]["examples"] == 101  # the ci profile's 100, plus the @example
    assert good["property"]["margin"]["worst"] == 1  # the @example x = 10**6
    assert good["property"]["ratio"]["worst"] == 1.0
    assert good["property"]["metrics"]["x"]["worst"] == 10**6
    assert good["exhaustive"]["examples"] == 7
    assert "constructions.numerics:gamma" in good["exhaustive"]["calls"]
    assert ("constructions.induction_heads.margins:two_layer_parameters"
            in good["exhaustive"]["direct_calls"])
    assert good["property"]["calls"] == []  # nothing from constructions was called
    assert good["exhaustive"]["tables"]["squares"]["rows"] == [[0, 0], [1, 1], [2, 4]]
    figure = demo_directory / "serial" / good["exhaustive"]["figures"][0]
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert claims["demo.good"]["summary"]["tiers"] == ["property", "exhaustive"]

    (bad,) = claims["demo.bad"]["checks"]
    assert bad["outcome"] == "failed"
    assert "test_bad(" in bad["falsifying_example"]
    assert "x=50" in bad["falsifying_example"]  # Hypothesis shrinks to the boundary
    assert bad["margin"]["worst"] < 0

    assert good["exhaustive"]["intervals"] == [{
        "name": "p", "estimate": 0.8, "low": 0.7, "high": 0.9, "threshold": 0.5, "level": 0.95,
        "trials": 40, "method": "demo", "decided": True}]
    assert good["property"]["intervals"] == []

    undecided = {c["tier"]: c for c in claims["demo.undecided"]["checks"]}
    assert undecided["property"]["outcome"] == "passed"
    assert undecided["numeric"]["outcome"] == "inconclusive"  # a skip, recorded as such
    assert undecided["numeric"]["message"].startswith("inconclusive: median ratio")
    assert undecided["numeric"]["intervals"] == [{
        "name": "median ratio", "estimate": 1.1, "low": 0.9, "high": 1.3, "threshold": 1.0,
        "level": 0.95, "trials": 20, "method": "demo", "decided": False}]

    (refutation,) = claims["demo.refuted"]["checks"]
    assert "x=3" in refutation["counterexample"]
    assert data["run"]["hypothesis_profile"] == "ci"


def test_reused_records_give_the_evidence_of_running_every_check(demo_serial, demo_directory):
    """``--theorems-reuse`` (verify's reuse of an earlier run of the same code): the checks
    whose records the earlier run holds are deselected, the others run, and the evidence is
    that of running them all (the demo's full run), apart from times and ``run.reused``, which
    says what was taken; a figure is copied beside it. With every record reused nothing runs,
    and the evidence is still written whole."""
    _, fresh = demo_serial
    earlier = demo_directory / "earlier" / "evidence.json"
    run_pytest(demo_directory, f"--evidence-out={earlier}", "--theorems-calls",
               "-k", "good or refutation", "test_demo.py").assert_outcomes(passed=3,
                                                                           deselected=4)
    out = demo_directory / "reused" / "evidence.json"
    result = run_pytest(demo_directory, f"--evidence-out={out}", "--theorems-calls",
                        f"--theorems-reuse={earlier}", "test_demo.py")
    result.assert_outcomes(passed=2, failed=1, skipped=1, deselected=3)
    result.stdout.fnmatch_lines([f"theorems: 3 checks' records reused from {earlier}"])
    reused = load(out)
    assert reused["run"].pop("reused") == {"checks": 3,
                                           "started": load(earlier)["run"]["started"]}
    assert fresh["run"]["reused"] is None
    assert without_times(reused) == without_times({**fresh, "run": {
        k: v for k, v in fresh["run"].items() if k != "reused"}})
    (figure,) = next(c for c in reused["claims"]["demo.good"]["checks"]
                     if c["tier"] == "exhaustive")["figures"]
    assert (out.parent / figure).read_bytes() == (earlier.parent / figure).read_bytes()

    everything = demo_directory / "everything" / "evidence.json"
    result = run_pytest(demo_directory, f"--evidence-out={everything}", "--theorems-calls",
                        f"--theorems-reuse={out}", "test_demo.py")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED  # all 7 deselected: none ran
    again = load(everything)
    assert again["run"].pop("reused")["checks"] == 7
    assert without_times(again) == without_times(reused)


@pytest.mark.integration  # an xdist run of its own (three more processes)
def test_a_second_run_gives_the_same_evidence_under_xdist(demo_serial, demo_directory):
    """Two ci-profile runs, the second split over two xdist workers (serial if xdist is
    missing), agree apart from times."""
    parallel = ("-n", "2") if importlib.util.find_spec("xdist") is not None else ()
    out = demo_directory / "again" / "evidence.json"
    process = run_pytest_subprocess(demo_directory, f"--evidence-out={out}", "--theorems-calls",
                                    *parallel)
    again = load(out)
    assert "5 passed" in process.stdout and "1 failed" in process.stdout, process.stdout
    if parallel:
        assert again["run"]["workers"] == 2
    assert without_times(again) == without_times(demo_serial[1])


def test_a_check_naming_an_unknown_claim_is_a_usage_error(tmp_path):
    (tmp_path / "test_typo.py").write_text('''
from theorems.evidence import check

@check("demo.no-such-claim", "property")
def test_typo():
    pass
''')
    result = run_pytest(tmp_path, "--no-evidence")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*a check names unknown claim 'demo.no-such-claim'*"])


def test_runs_without_claim_checks_leave_the_evidence_file_alone(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    out = tmp_path / "evidence.json"
    out.write_text("previous")
    result = run_pytest(tmp_path, f"--evidence-out={out}")
    result.assert_outcomes(passed=1)
    assert out.read_text() == "previous"


def test_unknown_tier_is_rejected():
    from theorems.evidence import check

    with pytest.raises(ValueError, match="tier"):
        check("demo.good", "anecdotal")


# --- minding its own business ------------------------------------------------------------------

def test_importing_the_plugin_imports_neither_hypothesis_nor_torch():
    code = ("import sys, theorems.plugin; "
            "print(sorted(m for m in ('hypothesis', 'torch', 'numpy') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.strip() == "[]"


OTHER_PROJECT = """
from hypothesis import given, settings, strategies as st

def test_profile_is_hypothesis_own():
    assert settings.get_current_profile_name() == "default"
    assert settings.default.max_examples == 100

@given(st.integers())
def test_a_property(x):
    assert x == x
"""


@pytest.mark.integration  # another project's session needs an interpreter of its own
def test_another_projects_pytest_run_is_untouched(tmp_path):
    """The plugin is installed (pytest11), but this project has no checks: no Hypothesis
    profile is registered or loaded, and no file is written."""
    (tmp_path / "test_other.py").write_text(OTHER_PROJECT)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # its own rootdir, not ours
    # Hypothesis itself loads a built-in "ci" profile when CI is set: leave that out of the
    # comparison, which is about what this package does.
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            check=False, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    # Hypothesis' own example database and Python's bytecode cache are theirs, not ours.
    written = {p.name for p in tmp_path.iterdir()} - {".hypothesis", "__pycache__"}
    assert written == {"pytest.ini", "test_other.py"}
    from importlib.metadata import entry_points

    assert any(e.value == "theorems.plugin" for e in entry_points(group="pytest11")), (
        "the test is only meaningful with the plugin installed")


def test_a_partial_run_does_not_replace_the_evidence_the_docs_read(demo_directory):
    """``-k`` selects a subset: the evidence goes to evidence-partial.json, marked partial."""
    build = demo_directory / "build"
    (demo_directory / "test_demo.py").write_text(DEMO)  # also when run on its own (-k)
    (demo_directory / "pytest.ini").write_text("[pytest]\n")
    build.mkdir(exist_ok=True)
    (build / "evidence.json").write_text("complete run")
    result = run_pytest(demo_directory, "-k", "good", "test_demo.py")
    assert result.ret == 0, result.outlines + result.errlines
    assert (build / "evidence.json").read_text() == "complete run"
    partial = load(build / "evidence-partial.json")
    assert partial["run"]["partial"] is True
    assert partial["run"]["selection"] == "-k good"
    assert partial["claims"]["demo.good"]["status"] == "verified"
    # without --theorems-calls (verify passes it) the call-recording hook stays off: the
    # records carry no calls, which dependency_mismatches does not judge
    assert all("calls" not in c for c in partial["claims"]["demo.good"]["checks"])


SLOW_ONLY = '''
import pytest

from theorems.claims import Claim, Source
from theorems.evidence import check

SOURCE = Source(arxiv="2408.14332", where="Theorem 1", tag="V")
FAST = Claim(id="demo.fast", title="t", statement="s", source=SOURCE, kind="identity")
SLOW = Claim(id="demo.slow-only", title="t", statement="s", source=SOURCE, kind="identity")
TRAINED = Claim(id="demo.trained", title="t", statement="s", source=SOURCE, kind="dynamics")


@check(FAST, "property")
def test_fast():
    pass


@pytest.mark.slow
@check(SLOW, "property")
def test_slow():
    pass


@check(TRAINED, "empirical")  # the plugin puts it in the training tier
def test_trained():
    pass
'''


def test_a_run_that_deselects_every_check_of_a_claim_is_partial(tmp_path):
    """A default run (``-m 'not slow and not training'``) that leaves a claim without a single
    check says so: it is partial and names the claim, so the claim does not read as merely
    unchecked. An empirical-tier check is in the training tier without being marked by hand."""
    (tmp_path / "test_slow_only.py").write_text(SLOW_ONLY)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    out = tmp_path / "evidence.json"
    result = run_pytest(tmp_path, f"--evidence-out={out}", "-m", "not slow and not training",
                        "test_slow_only.py")
    assert result.ret == 0, result.outlines + result.errlines
    result.assert_outcomes(passed=1, deselected=2)
    run = load(out)["run"]
    assert run["partial"] is True
    assert "every check deselected by -m (demo.slow-only, demo.trained)" in run["selection"]
    assert "demo.fast" not in run["selection"]


def test_a_figure_is_saved_or_copied_beside_the_evidence(tmp_path):
    """A check records a matplotlib figure it drew, or a PNG a published result saved (the
    Result's own figure, never redrawn by the check)."""
    from empirics.plots import pyplot
    from theorems.evidence import Recorder

    recorder = Recorder("area.claim", "empirical", figure_dir=tmp_path, name="test_x")
    fig, ax = pyplot().subplots()
    ax.plot([0, 1])
    drawn = recorder.figure(fig, "drawn")
    published = tmp_path / "published.png"
    published.write_bytes(b"\x89PNG fake")
    copied = recorder.figure(published, "published")
    assert recorder.figures == [drawn, copied]
    assert (tmp_path / copied).read_bytes() == b"\x89PNG fake"
    assert (tmp_path / drawn).stat().st_size > 0


def test_the_call_recorder_counts_calls_not_class_bodies(tmp_path):
    """Importing a module inside a check executes its class bodies: that is not a call of the
    class (the recorder listed every experiment class when a check imported all experiments)."""
    import importlib.util

    from theorems.plugin import _CallRecorder

    source = tmp_path / "recorded_module.py"
    source.write_text("class Model:\n    def __init__(self):\n        pass\n\n\n"
                      "def build():\n    return Model()\n\n\n"
                      "DEFAULT = build()  # import-time work: not the check's call\n")
    spec = importlib.util.spec_from_file_location("recorded_module", source)
    module = importlib.util.module_from_spec(spec)
    with _CallRecorder({str(source): ("recorded_module", False)}) as recorder:
        spec.loader.exec_module(module)              # runs the class body
    assert recorder.names() == []
    with _CallRecorder({str(source): ("recorded_module", False)}) as recorder:
        module.build()
    assert recorder.names() == ["recorded_module:Model", "recorded_module:build"]


def test_theorems_claim_selects_the_checks_of_a_claim_by_its_mark(demo_directory):
    """``--theorems-claim`` (``verify --claim``) runs exactly the checks whose claim mark names
    it, whatever the test is called; the run is partial and says which claims it selected."""
    (demo_directory / "test_demo.py").write_text(DEMO)
    out = demo_directory / "claim" / "evidence.json"
    result = run_pytest(demo_directory, f"--evidence-out={out}", "--theorems-claim=demo.good",
                        "test_demo.py")
    assert result.ret == 0, result.outlines + result.errlines
    result.assert_outcomes(passed=2, deselected=5)
    data = load(out)
    assert [c["name"] for c in data["claims"]["demo.good"]["checks"]] == [
        "test_good", "test_good_exhaustively"]
    assert all(not r["checks"] for cid, r in data["claims"].items() if cid != "demo.good")
    assert data["run"]["partial"] is True
    assert data["run"]["selection"] == "claims demo.good"


INTERRUPTED = '''
from theorems.claims import Claim, Source
from theorems.evidence import check

SOURCE = Source(arxiv="2408.14332", where="Theorem 1", tag="V")
DONE = Claim(id="demo.done", title="t", statement="s", source=SOURCE, kind="identity")
CUT = Claim(id="demo.cut", title="t", statement="s", source=SOURCE, kind="identity")


@check(DONE, "property")
def test_done():
    pass


@check(CUT, "property")
def test_cut():
    raise KeyboardInterrupt  # what Ctrl-C does to the running check
'''


def test_an_interrupted_run_leaves_the_previous_evidence_file(tmp_path):
    """A run cut short by Ctrl-C after some checks ran writes nothing: the previous file stays
    (the file is only ever replaced whole, by renaming a complete one over it)."""
    (tmp_path / "test_interrupted.py").write_text(INTERRUPTED)
    out = tmp_path / "build" / "evidence.json"
    out.parent.mkdir()
    out.write_text("previous")
    result = run_pytest(tmp_path, f"--evidence-out={out}", "test_interrupted.py")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.outlines + result.errlines
    result.stdout.fnmatch_lines(["theorems: interrupted: no evidence written*"])
    assert out.read_text() == "previous"
    assert [p.name for p in out.parent.iterdir()] == ["evidence.json"]

