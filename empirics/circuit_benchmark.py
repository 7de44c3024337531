r"""Score MIB-format circuit submissions against the exact ground-truth circuits.

A submission (MIB's circuit-track rules, from its README) is a folder per task and model,
here ``<case>_<size>`` (:func:`~empirics.circuit_formats.folder_name`: the case id and the
size, ``smoke`` or ``full``, of the model), holding either

* one ``.json`` or ``.pt`` MIB graph file with a float importance score per edge (or per node:
  a file that carries node scores is scored at node level), or
* nine such files with binary circuits (``in_graph``), holding at most 0.1, 0.2, 0.5, 1, 2, 5,
  10, 20 and 50 % of the model's edges (the leaderboard's submission checker was not
  available; the files are matched to the budgets in increasing edge count).

The edges are the model's own (:func:`~constructions.circuits.attention_graph`; MIB's MLP
entries, which these attention-only models lack, are read and counted in ``extra``, not
scored). With :math:`E` the number of edges, :math:`C` the ground truth and :math:`\bar m` the
batch mean of the case's metric on the harness's prompts
(:func:`~empirics.circuit_discovery.case_setup`), the scores are:

* **faithfulness** of an edge set :math:`S`: :math:`f(S) = (\bar m(S) - \bar m(\emptyset)) /
  (\bar m(\text{all}) - \bar m(\emptyset))`, where :math:`\bar m(S)` is the clean run with
  every edge outside :math:`S` patched from the corrupted run (MIB's ``patching``
  intervention; the harness's :meth:`~empirics.circuit_discovery.Setup.patched_metric`);
* MIB's circuit at :math:`p \in P = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1)`:
  the top :math:`\lfloor pE \rfloor` edges by absolute score (MIB's ``apply_topn``; ties
  against the method, as in the harness), or at node level the edges between the top
  :math:`\lfloor pN \rfloor` scored nodes and the unscored ones (``logits`` always), each then
  pruned as MIB's ``Graph.prune`` does (a node stays while it has an outgoing edge and, unless
  it is ``input``, an incoming one); the nine binary circuits give the first nine points and
  the full model the last;
* **CPR** :math:`= \sum_i (p_{i+1} - p_i)(f_i + f_{i+1})/2` and **CMD** :math:`= \sum_i
  (p_{i+1} - p_i)(|1 - f_i| + |1 - f_{i+1}|)/2`, the trapezoids of MIB's leaderboard (over the
  percentages, not their logarithms: the leaderboard's ``compute_area``);
* **AUROC** (Mann-Whitney, ties one half) and **precision** of the top :math:`|C|` edges (ties
  against the method) of the ranking by absolute score; for nine binary circuits an edge's
  score is the number of circuits that hold it (nested circuits give their own ranking back);
  at node level both are over the heads, against the heads :math:`C` touches.

``reference`` gives the same scores for the ground truth itself (score 1 on :math:`C`, 0 off
it): the exact circuit reaches AUROC and precision 1 and faithfulness 1 from :math:`|C|`
edges on, so its CPR and CMD are what the circuit's size allows at MIB's percentages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from constructions import _validate
from empirics.circuit_discovery import case_setup, precision_at, ranked, roc_auc
from empirics.circuit_formats import (
    MIBFile,
    MIBGraph,
    case_by_name,
    edge_ends,
    mib_graph,
    read_mib_file,
)

PERCENTAGES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
BUDGETS = PERCENTAGES[:-1]  # the nine binary circuits


def areas(faithfulness: list[float]) -> tuple[float, float]:
    """(CPR, CMD): MIB's trapezoids of :math:`f` and :math:`|1 - f|` over
    :data:`PERCENTAGES`."""
    if len(faithfulness) != len(PERCENTAGES):
        raise ValueError(f"faithfulness must have one value per percentage "
                         f"({len(PERCENTAGES)}), got {len(faithfulness)}")
    cpr = cmd = 0.0
    for i in range(len(PERCENTAGES) - 1):
        width = PERCENTAGES[i + 1] - PERCENTAGES[i]
        f1, f2 = faithfulness[i], faithfulness[i + 1]
        cpr += width * (f1 + f2) / 2
        cmd += width * (abs(1 - f1) + abs(1 - f2)) / 2
    return cpr, cmd


def pruned(edges: set[str] | frozenset[str]) -> frozenset[str]:
    """MIB's ``Graph.prune`` on an edge set: repeatedly drop the nodes without an outgoing
    edge or (except ``input``) an incoming one, and the edges of dropped nodes; ``logits``
    stays."""
    kept = set(edges)
    while True:
        out = {edge_ends(e)[0] for e in kept}
        into = {edge_ends(e)[1] for e in kept} | {"input"}
        alive = (out & into) | {"logits"}
        now = {e for e in kept if set(edge_ends(e)) <= alive}
        if now == kept:
            return frozenset(kept)
        kept = now


class Scorer:
    """One case at one size on the harness's prompts: faithfulness of edge sets, with the
    clean and fully corrupted runs computed once."""

    def __init__(self, case_name: str, size: str, *, batch: int = 64, seed: int = 0):
        self.case = case_by_name(case_name)
        self.size = _validate.choice("size", size, tuple(self.case.sizes))
        self.setup, self.circuit = case_setup(self.case, self.size,
                                              _validate.positive_int("batch", batch),
                                              _validate.seed("seed", seed))
        self.graph: MIBGraph = mib_graph(self.circuit.n_layers, self.circuit.n_heads)
        self.edges = list(self.graph.model_edges)
        self.truth = self.circuit.edge_names
        self.clean = self.setup.patched_metric(())
        self.corrupted = self.setup.patched_metric(self.setup.graph)
        self._cache: dict[frozenset[str], float] = {}

    def faithfulness(self, kept: frozenset[str]) -> float:
        """:math:`f(S)` (module docstring); NaN when the corruption does not move the
        metric."""
        if kept not in self._cache:
            if self.clean == self.corrupted:
                self._cache[kept] = math.nan
            else:
                value = self.setup.patched_metric([e for e in self.setup.graph
                                                   if e.name not in kept])
                self._cache[kept] = (value - self.corrupted) / (self.clean - self.corrupted)
        return self._cache[kept]

    def edge_circuits(self, scores: Mapping[str, float]) -> list[frozenset[str]]:
        order = ranked({e: abs(scores[e]) for e in self.edges}, self.truth)
        return [pruned(set(order[:int(p * len(self.edges))])) for p in PERCENTAGES]

    def node_circuits(self, node_scores: Mapping[str, float]) -> list[frozenset[str]]:
        scored = {n: abs(s) for n, s in node_scores.items() if not math.isnan(s)}
        unscored = {n for n in self.graph.src_nodes if not n.startswith("m")} - set(scored)
        truth_nodes = {n for e in self.truth for n in edge_ends(e)}
        order = sorted(scored, key=lambda n: (-scored[n], n in truth_nodes, n))
        circuits = []
        for p in PERCENTAGES:
            inside = set(order[:int(p * len(scored))]) | unscored | {"logits"}
            circuits.append(pruned({e for e in self.edges if set(edge_ends(e)) <= inside}))
        return circuits

    def curve(self, circuits: list[frozenset[str]]) -> dict[str, Any]:
        values = [self.faithfulness(c) for c in circuits]
        cpr, cmd = areas(values)
        return {"faithfulness": values, "edge_counts": [len(c) for c in circuits],
                "cpr": cpr, "cmd": cmd}

    def ranking_scores(self, scores: Mapping[str, float]) -> dict[str, float]:
        absolute = {e: abs(scores[e]) for e in self.edges}
        return {"auroc": roc_auc(absolute, self.truth),
                "precision": precision_at(absolute, self.truth, len(self.truth))}

    def reference(self) -> dict[str, Any]:
        exact = {e: float(e in self.truth) for e in self.edges}
        return {**self.ranking_scores(exact), **self.curve(self.edge_circuits(exact))}


def _node_ranking(scorer: Scorer, node_scores: Mapping[str, float]) -> dict[str, float]:
    heads = list(scorer.graph.heads)
    truth = frozenset(n for e in scorer.truth for n in edge_ends(e) if n in heads)
    absolute = {n: abs(node_scores.get(n, math.nan)) for n in heads}
    absolute = {n: (math.inf if math.isnan(s) else s) for n, s in absolute.items()}
    return {"auroc": roc_auc(absolute, truth), "precision": precision_at(absolute, truth,
                                                                         len(truth))}


def score_folder(folder: str | Path, *, batch: int = 64, seed: int = 0) -> dict[str, Any]:
    """Score one ``<case>_<size>`` folder of a submission (module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"folder must be a directory, got {str(folder)!r}")
    case_name, _, size = folder.name.rpartition("_")
    if not case_name:
        raise ValueError(f"folder must be named <case>_<size>, got {folder.name!r}")
    case_by_name(case_name)
    files = sorted(p for p in folder.iterdir() if p.suffix in (".json", ".pt"))
    if len(files) not in (1, len(BUDGETS)):
        raise ValueError(f"folder {str(folder)!r}: a submission folder holds one importance-"
                         f"score file or {len(BUDGETS)} binary circuits (.json or .pt), found "
                         f"{len(files)}")
    scorer = Scorer(case_name, size, batch=batch, seed=seed)
    read = [read_mib_file(p, scorer.graph) for p in files]
    result: dict[str, Any] = {"case": case_name, "size": size, "edges": len(scorer.edges),
                              "k": len(scorer.truth), "extra": sum(f.extra for f in read)}
    if len(read) == 1 and read[0].node_scores is not None:
        result["kind"] = "node scores"
        result.update(_node_ranking(scorer, read[0].node_scores))
        result.update(scorer.curve(scorer.node_circuits(read[0].node_scores)))
    elif len(read) == 1:
        result["kind"] = "edge scores"
        result.update(scorer.ranking_scores(read[0].edge_scores))
        result.update(scorer.curve(scorer.edge_circuits(read[0].edge_scores)))
    else:
        result["kind"] = "binary circuits"
        result.update(_binary(scorer, read))
    result["reference"] = scorer.reference()
    return result


def _binary(scorer: Scorer, read: list[MIBFile]) -> dict[str, Any]:
    """The nine binary circuits: each within its budget, then the curve and the ranking by
    how many circuits hold each edge."""
    by_size = sorted(read, key=lambda f: (len(f.in_graph), str(f.path)))
    for budget, circuit in zip(BUDGETS, by_size, strict=True):
        if len(circuit.in_graph) > budget * len(scorer.edges):
            raise ValueError(f"path {str(circuit.path)!r}: the circuits must hold at most "
                             f"{[f'{100 * b:g}%' for b in BUDGETS]} of the {len(scorer.edges)} "
                             f"edges; in increasing size this one is the {100 * budget:g}% "
                             f"circuit but holds {len(circuit.in_graph)} edges")
    circuits = [pruned(c.in_graph) for c in by_size] + [frozenset(scorer.edges)]
    counts = {e: float(sum(e in c.in_graph for c in by_size)) for e in scorer.edges}
    return {**scorer.ranking_scores(counts), **scorer.curve(circuits)}


def score_submission(path: str | Path, *, batch: int = 64, seed: int = 0
                     ) -> list[dict[str, Any]]:
    """Score a submission: ``path`` is one ``<case>_<size>`` folder or a folder of them
    (every subfolder is scored). Raises ``ValueError`` naming the folder or file at fault."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"path must be a submission directory, got {str(path)!r}")
    if any(p.suffix in (".json", ".pt") for p in path.iterdir()):
        return [score_folder(path, batch=batch, seed=seed)]
    folders = sorted(p for p in path.iterdir() if p.is_dir())
    if not folders:
        raise ValueError(f"path must hold <case>_<size> folders or MIB files, {path} holds "
                         f"neither")
    return [score_folder(p, batch=batch, seed=seed) for p in folders]


def table(results: list[dict[str, Any]]) -> list[list[Any]]:
    """Rows ``[case, size, kind, AUROC, precision, CPR, CMD, reference CPR, reference CMD]``."""
    return [[r["case"], r["size"], r["kind"], r["auroc"], r["precision"], r["cpr"], r["cmd"],
             r["reference"]["cpr"], r["reference"]["cmd"]] for r in results]


HEADER = ["case", "size", "kind", "AUROC", "precision@|C|", "CPR", "CMD", "exact CPR",
          "exact CMD"]
