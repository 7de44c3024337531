"""The third-party circuit-discovery harness (:mod:`empirics.circuit_third_party`, its
runners :mod:`empirics.third_party` and :mod:`empirics.third_party_auto_circuit`, and
:mod:`empirics.venvs`) and the hook-conformance experiment (:mod:`empirics.hook_conformance`).

The default tests are cheap: they parse what a runner prints, map auto-circuit's edge names,
and check that a missing environment is said in words. Running the packages themselves needs
their environments and minutes of CPU: the ``integration`` test runs the smoke config where
they exist.
"""

from __future__ import annotations

import math

import pytest

from constructions.circuits import all_cases, attention_graph
from empirics import circuit_third_party as ctp
from empirics import venvs
from empirics.third_party import one_head_backward_index
from empirics.third_party_auto_circuit import finite_scores, mib_name

CIRCUITKIT = ctp.TOOLS["circuitkit"]["methods"]


def test_runner_lines_are_parsed_per_case_and_method():
    line = ("two-layer-induction: EAP fails: RuntimeError: output with shape [3, 1] doesn't "
            "match the broadcast shape [3, 3]")
    assert ctp.parse_line(line, CIRCUITKIT) == [
        ("two-layer-induction", "EAP", "fails: RuntimeError: output with shape [3, 1] doesn't "
                                       "match the broadcast shape [3, 3]")]
    assert ctp.parse_line("a-b: EAP-IG-inputs + 1-head fix written", CIRCUITKIT) == [
        ("a-b", "EAP-IG-inputs + 1-head fix", "written")]
    # a case skipped by the runner: every method of the tool, with the reason
    skipped = ctp.parse_line("majority-head: skipped, MajorityHead cannot be exported",
                             CIRCUITKIT)
    assert [m for _, m, _ in skipped] == list(CIRCUITKIT)
    assert {o for _, _, o in skipped} == {"skipped, MajorityHead cannot be exported"}
    # the packages' own chatter, and methods of another tool, are not outcomes
    assert ctp.parse_line("Loaded pretrained model x into HookedTransformer", CIRCUITKIT) == []
    assert ctp.parse_line("a: auto-circuit ACDC written", CIRCUITKIT) == []


def test_a_case_id_splits_into_its_base_case_and_variant():
    names = tuple(all_cases())
    assert ctp.variant_of("two-layer-induction", names) == ("two-layer-induction", "-")
    assert ctp.variant_of("two-layer-induction-rotated", names) == ("two-layer-induction",
                                                                    "rotated")
    assert ctp.variant_of("compact-induction-earlier-occurrence", names) == (
        "compact-induction", "earlier-occurrence")


def test_auto_circuit_edge_names_are_mibs():
    assert mib_name("Resid Start->A0.0.Q") == "input->a0.h0<q>"
    assert mib_name("A0.1->A1.0.K") == "a0.h1->a1.h0<k>"
    assert mib_name("A1.0->Resid End") == "a1.h0->logits"
    # every edge of a two-head model's graph maps onto the graph the scorer reads
    graph = {e.name for e in attention_graph(2, 2)}
    ours = {mib_name(f"{s}->{d}") for s in ("Resid Start", "A0.0", "A0.1")
            for d in ("A1.0.Q", "A1.1.V", "Resid End")}
    assert ours <= graph
    with pytest.raises(ValueError, match="attention-only"):
        mib_name("MLP 0->Resid End")
    with pytest.raises(ValueError, match="SRC->DEST"):
        mib_name("A0.0")


def test_acdc_never_pruned_edges_stay_on_top_and_finite():
    scores = finite_scores({"a": math.inf, "b": 0.03, "c": -0.5, "d": 0.0})
    assert scores == {"a": 1.0, "b": 0.03, "c": -0.5, "d": 0.0}
    assert finite_scores({"a": math.inf, "b": 0.0}) == {"a": 1.0, "b": 0.0}
    with pytest.raises(ValueError, match="finite"):
        finite_scores({"a": math.nan})


def test_the_one_head_fix_answers_an_index_for_a_one_element_slice_and_is_undone():
    class Graph:
        def backward_index(self, node, qkv=None, attn_slice=True):
            return slice(6, 7) if node == "one" else (slice(6, 8) if node == "two" else 3)

    graph = Graph()
    undo = one_head_backward_index(graph)
    assert (graph.backward_index("one", "q"), graph.backward_index("two", "q"),
            graph.backward_index("mlp")) == (6, slice(6, 8), 3)
    undo()
    assert graph.backward_index("one", "q") == slice(6, 7)  # the package's answer again


def test_a_missing_environment_is_said_with_its_path_and_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("THEOREMS_VENVS", str(tmp_path))
    monkeypatch.delenv("THEOREMS_VENV_AUTO_CIRCUIT", raising=False)
    assert venvs.venv("auto-circuit") == tmp_path / "auto-circuit"
    message = venvs.missing("auto-circuit", "pip install auto-circuit")
    assert str(tmp_path / "auto-circuit") in message
    assert "THEOREMS_VENV_AUTO_CIRCUIT" in message and "pip install auto-circuit" in message
    monkeypatch.setenv("THEOREMS_VENV_AUTO_CIRCUIT", str(tmp_path / "elsewhere"))
    assert venvs.venv("auto-circuit") == tmp_path / "elsewhere"
    # the experiment reports every case and method of a missing tool as not run, and goes on
    outcomes, row = ctp.run_tool("auto-circuit", {"cases": ["two-layer-induction"],
                                                  "size": "smoke", "batch": 2}, 0, tmp_path)
    assert [(c, m) for c, m, _ in outcomes] == [("two-layer-induction", m) for m in
                                                ctp.TOOLS["auto-circuit"]["methods"]]
    assert all(o.startswith("not run: no virtual environment for auto-circuit at ")
               for _, _, o in outcomes)
    assert row[-1].startswith("not run:")
    with pytest.raises(ValueError, match="name"):
        venvs.variable("")


@pytest.mark.integration
def test_the_smoke_config_scores_both_tools_where_their_environments_exist():
    """Minutes of CPU: both packages on two cases (one head, two heads per layer)."""
    missing = [t for t, spec in ctp.TOOLS.items() if venvs.missing(t, spec["install"])]
    if missing:
        pytest.skip(f"no environment for {missing}")
    result = ctp.CIRCUIT_THIRD_PARTY("smoke", device="cpu")
    rows = result.rows("scores")
    by = {(r["method"], r["case"], r["variant"]): r for r in rows}
    # the package's one-head failure is reported, its local fix scored separately
    assert by[("EAP", "two-layer-induction", "-")]["outcome"].startswith("fails: RuntimeError")
    assert by[("EAP + 1-head fix", "two-layer-induction", "-")]["outcome"] == "scored"
    assert by[("auto-circuit EAP", "two-layer-induction", "spurious-heads")]["AUROC"] == 1.0
