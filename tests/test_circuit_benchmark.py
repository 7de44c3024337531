"""The circuit cases in MIB's and InterpBench's formats, and the scorer of MIB-format
submissions (:mod:`empirics.circuit_formats`, :mod:`empirics.circuit_benchmark`,
``python -m theorems.circuits``).

Scoring runs the harness's patched runs through nnsight (the ``interop`` extra), on the
smoke-size two-layer induction case with a batch of 8: one module-scoped write and
:class:`~empirics.circuit_benchmark.Scorer`, whose faithfulness values are cached, serve every
test.
"""

from __future__ import annotations

import json
import math
import pickle
import shutil

import pytest
import torch

from constructions.circuits import CASES, attention_graph
from empirics import circuit_benchmark as cb
from empirics import circuit_formats as cf
from theorems import circuits as cli

CASE = CASES["two-layer-induction-earlier-occurrence"]
SIZE, BATCH = "smoke", 8
FOLDER = f"{CASE.name}_{SIZE}"


@pytest.fixture(scope="module")
def written(nnsight, tmp_path_factory):
    out = tmp_path_factory.mktemp("benchmark")
    return cf.write_case(CASE, out, SIZE, batch=BATCH)


@pytest.fixture(scope="module")
def scorer(nnsight):
    return cb.Scorer(CASE.name, SIZE, batch=BATCH)


def _submit(tmp_path, files: dict[str, object]):
    """A submission folder for the case holding ``files`` (name -> JSON dict or .pt dict)."""
    folder = tmp_path / FOLDER
    folder.mkdir()
    for name, content in files.items():
        if name.endswith(".json"):
            (folder / name).write_text(json.dumps(content))
        else:
            torch.save(content, folder / name)
    return folder


def _score(folder, monkeypatch, scorer):
    """:func:`~empirics.circuit_benchmark.score_folder` on the module's scorer (the same
    case, size, batch and seed), so the patched runs are not repeated."""
    monkeypatch.setattr(cb, "Scorer", lambda *args, **kwargs: scorer)
    return cb.score_folder(folder, batch=BATCH)


def test_mib_graph_has_mibs_shape():
    # Graph.from_model: n_forward = 1 + L(H + 1), n_backward = L(3H + 1) + 1; the model's own
    # edges are the attention-only graph's
    graph = cf.mib_graph(2, 3)
    assert len(graph.src_nodes) == 1 + 2 * 4 and len(graph.dst_nodes) == 2 * 10 + 1
    assert set(graph.model_edges) <= set(graph.edges)
    assert set(graph.model_edges) == {e.name for e in attention_graph(2, 3)}
    assert graph.edges["a0.h1->a1.h2<k>"] == (2, 10 + 3 + 2)


@pytest.mark.interop
def test_a_written_case_holds_both_formats_and_its_ground_truth(written):
    circuit = CASE.circuit(**CASE.sizes[SIZE])
    truth = json.loads((written["mib"] / "ground_truth.json").read_text())
    assert {e for e, v in truth["edges"].items() if v["in_graph"]} == circuit.edge_names
    pt = torch.load(written["mib"] / "ground_truth.pt", weights_only=True)
    assert int(pt["edges_in_graph"].sum()) == len(circuit.edges)
    with open(written["interpbench"] / "edges.pkl", "rb") as f:
        pairs = pickle.load(f)
    assert ("hook_embed", "blocks.0.hook_v_input[0]") in pairs
    assert cf.edges_from_interpbench(pairs, 2) == circuit.edge_names
    with open(written["interpbench"] / "ll_model_cfg.pkl", "rb") as f:
        config = pickle.load(f)
    state = torch.load(written["interpbench"] / "ll_model.pth", weights_only=True)
    assert config["n_layers"] == 2 and "blocks.1.attn.mask" in state
    prompts = torch.load(written["mib"] / "prompts.pt", weights_only=True)
    assert prompts["clean"].shape == (BATCH, CASE.sizes[SIZE]["max_len"])


@pytest.mark.interop
@pytest.mark.parametrize("name", ["ground_truth.json", "ground_truth.pt"])
def test_the_exact_circuit_round_trips_to_perfect_scores(written, tmp_path, monkeypatch,
                                                         scorer, name):
    folder = tmp_path / FOLDER
    folder.mkdir()
    shutil.copy(written["mib"] / name, folder / name)
    result = _score(folder, monkeypatch, scorer)
    assert result["kind"] == "edge scores"
    assert result["auroc"] == 1 and result["precision"] == 1
    k = result["k"]
    # faithfulness 1 from |C| edges on (the circuit is sufficient), to rounding: the patched
    # runs recompute every node from the same float64 inputs
    assert all(abs(f - 1) < 1e-9 for f, n in zip(result["faithfulness"], result["edge_counts"],
                                                 strict=True) if n >= k)
    assert (result["cpr"], result["cmd"]) == (result["reference"]["cpr"],
                                              result["reference"]["cmd"])


@pytest.mark.interop
def test_a_corrupted_submission_scores_lower(scorer, tmp_path, monkeypatch):
    graph, truth = scorer.graph, scorer.truth
    inside, outside = sorted(truth), [e for e in graph.model_edges if e not in truth]
    scores = {e: float(e in truth) for e in graph.model_edges}
    scores[inside[0]], scores[outside[0]] = 0.0, 1.0        # one circuit edge swapped out
    folder = _submit(tmp_path, {"scores.json": cf.mib_json(graph, 8, scores, set())})
    result = _score(folder, monkeypatch, scorer)
    assert result["auroc"] < 1 and result["precision"] < 1
    assert result["cpr"] < result["reference"]["cpr"]
    assert result["cmd"] > result["reference"]["cmd"]


@pytest.mark.interop
def test_nine_nested_binary_circuits_are_scored_by_the_ranking_they_nest(scorer, tmp_path,
                                                                         monkeypatch):
    # the exact ranking cut at MIB's budgets: of E = 12 edges the circuits hold 0 (six times),
    # 1, 2 and 6 edges, so the |C| = 3 circuit edges are held 3, 2 and 1 times and three
    # other edges once: Mann-Whitney (9 + 9 + (6 + 3/2)) / 27. Sorted, C's edges are
    # a0.h0->a1.h0<k>, a1.h0->logits, input->a0.h0<v>: the 1- and 2-edge circuits lack the
    # input edge and MIB's pruning empties them; the 50% circuit holds C
    graph, order = scorer.graph, sorted(scorer.truth) + sorted(
        set(scorer.graph.model_edges) - scorer.truth)
    E = len(graph.model_edges)
    files = {f"circuit_{i}.pt": cf.mib_pt(graph, 8, {}, set(order[:int(p * E)]))
             for i, p in enumerate(cb.BUDGETS)}
    result = _score(_submit(tmp_path, files), monkeypatch, scorer)
    assert (E, result["k"], result["kind"]) == (12, 3, "binary circuits")
    assert result["auroc"] == (9 + 9 + 7.5) / 27
    assert result["edge_counts"] == [0] * 8 + [6, 12]
    assert abs(result["faithfulness"][-2] - 1) < 1e-9


@pytest.mark.interop
def test_a_binary_circuit_over_its_budget_is_named(scorer, tmp_path, monkeypatch):
    graph = scorer.graph
    files = {f"circuit_{i}.json": cf.mib_json(graph, 8, {}, set(graph.model_edges[:2]))
             for i in range(len(cb.BUDGETS))}
    with pytest.raises(ValueError, match=r"^path .*circuit_\d\.json.*0\.1% circuit"):
        _score(_submit(tmp_path, files), monkeypatch, scorer)


@pytest.mark.interop
def test_node_scores_are_scored_at_node_level(nnsight, tmp_path, monkeypatch):
    # the next-token circuit (input -> a1.h0<v>, a1.h0 -> logits) holds one of the two heads;
    # scored at node level, the top node (50% of 3 scored nodes: 1) is a1.h0 alone, whose edges
    # lack the input and are pruned away, and all three nodes give the whole graph
    next_token = cb.Scorer("two-layer-induction", SIZE, batch=BATCH)
    graph = next_token.graph
    content = cf.mib_json(graph, 8, {}, set())
    for node, score in {"input": 0.5, "a0.h0": 0.0, "a1.h0": 1.0}.items():
        content["nodes"][node]["score"] = score
    folder = tmp_path / "two-layer-induction_smoke"
    folder.mkdir()
    (folder / "nodes.json").write_text(json.dumps(content))
    monkeypatch.setattr(cb, "Scorer", lambda *args, **kwargs: next_token)
    result = cb.score_folder(folder, batch=BATCH)
    assert result["kind"] == "node scores"
    assert (result["auroc"], result["precision"]) == (1, 1)
    assert result["edge_counts"] == [0] * 8 + [0, 12]


def test_cpr_and_cmd_are_mibs_trapezoids():
    assert cb.areas([1.0] * 10) == pytest.approx((0.999, 0.0), abs=1e-15)
    assert cb.areas([0.0] * 10) == pytest.approx((0.0, 0.999), abs=1e-15)
    # pruning drops an edge whose source has no input, as MIB's Graph.prune
    assert cb.pruned({"a0.h0->logits"}) == frozenset()
    assert cb.pruned({"input->a0.h0<v>", "a0.h0->logits"}) == {"input->a0.h0<v>",
                                                               "a0.h0->logits"}


GRAPH = cf.mib_graph(2, 1)
GOOD = cf.mib_json(GRAPH, 8, {}, set())


@pytest.mark.parametrize("content, message", [
    ("{not json", "not a readable JSON"),
    ({"cfg": GOOD["cfg"], "nodes": {}}, "must hold 'cfg', 'nodes' and 'edges'"),
    ({**GOOD, "cfg": {**GOOD["cfg"], "n_heads": 2}}, "cfg must give n_layers=2 and n_heads=1"),
    ({**GOOD, "edges": {k: v for k, v in GOOD["edges"].items() if k != "input->logits"}},
     "missing \\['input->logits'\\]"),
    ({**GOOD, "edges": {**GOOD["edges"], "input->a5.h0<q>": {"score": 0, "in_graph": False}}},
     "unknown \\['input->a5.h0<q>'\\]"),
    ({**GOOD, "edges": {**GOOD["edges"], "input->logits": {"score": math.inf,
                                                           "in_graph": False}}}, "finite"),
    ({**GOOD, "edges": {**GOOD["edges"], "input->logits": {"score": 1.0}}}, "boolean"),
])
def test_a_bad_file_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "scores.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ValueError, match=rf"^path '.*scores\.json': .*{message}"):
        cf.read_mib_file(path, GRAPH)


def test_a_bad_submission_folder_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "no-such-case_smoke").mkdir()
    (tmp_path / "no-such-case_smoke" / "a.json").write_text("{}")
    with pytest.raises(ValueError, match=r"^case must be a registered case id"):
        cb.score_submission(tmp_path)
    assert cli.main(["score", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: case must be a registered case id") and err.count("\n") == 1
    empty = tmp_path / f"{FOLDER}"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"^folder .*found 0"):
        cb.score_folder(empty)
    with pytest.raises(ValueError, match=r"^path must be a submission directory"):
        cb.score_submission(tmp_path / "missing")


# --- the hook-conformance report (empirics.conformance) ----------------------------------------

def test_the_constructions_hooks_hold_what_their_names_promise():
    from empirics import conformance as hc

    model, _ = CASES["two-layer-induction-spurious-heads"].instance(SIZE)
    tokens = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3]])
    bos = torch.cat([torch.tensor([[model.vocab_size]]), tokens], dim=1)
    exact = hc.exact_native(model, bos)
    for name, tensor in hc.run_torch(model, tokens).items():
        meaning, r, named = hc.classify(name, tensor, exact)
        assert named and hc.band(r) == "float64", (name, meaning, r)
    # a hook holding another quantity is named as that quantity
    cache = hc.run_torch(model, tokens)
    meaning, _, named = hc.classify("blocks.1.attn.hook_attn_scores",
                                    cache["blocks.1.attn.hook_pattern"], exact)
    assert (meaning, named) == ("pattern", False)


def test_a_lone_dash_in_a_page_cell_is_text_not_a_list():
    # the third-party table's variant column holds "-" for a base case; unescaped, MyST made
    # each such cell a bullet list
    from theorems.areas.circuits._myst import _markdown, _table
    assert _markdown("-") == r"\-" and _markdown("+") == r"\+"
    assert "* - \\-" in _table(["variant"], [[_markdown("-")]]).splitlines()


def test_the_scores_table_shows_short_outcomes():
    from theorems.areas.circuits._benchmark import short_outcome
    assert short_outcome("fails: RuntimeError: output with shape [3, 1] doesn't match") == (
        "fails: RuntimeError (see below)")
    assert short_outcome("skipped, MajorityHead cannot be exported to TransformerLens: it "
                         "uses LayerNorm") == ("skipped, MajorityHead cannot be exported to "
                                               "TransformerLens")
    assert short_outcome("scored") == "scored"
