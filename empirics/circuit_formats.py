r"""The circuit cases in the formats of MIB's circuit track and of InterpBench, and a reader of
MIB-format circuit files.

**MIB** (Mueller et al. 2025, arXiv 2504.13151; the circuit track's code, EAP-IG's
``eap/graph.py``, read in a fork of the track's repository). A graph (``Graph.from_model``)
has the source nodes ``input``, per layer ``a{l}.h{h}`` then ``m{l}``, and the destinations
``a{l}.h{h}<q|k|v>``, ``m{l}`` and ``logits``; every upstream source feeds every later
destination, and an edge is named ``"{source}->{destination}"`` (``"a0.h0->a1.h0<k>"``).
A file is the graph's JSON (``Graph.to_json``: ``cfg``, ``nodes`` ``{name: {"in_graph",
"score"?}}``, ``edges`` ``{name: {"score", "in_graph"}}``) or its ``.pt`` (``Graph.to_pt``:
``cfg``, ``src_nodes``, ``dst_nodes`` and ``(n_src, n_dst)`` tensors ``edges_scores``,
``edges_in_graph``, with ``nodes_in_graph`` and optionally ``nodes_scores``). MIB's graph
always has an MLP node per layer; the cases here are attention-only (or, for the one-layer
native cases, a single attention layer), so the files written here carry the MLP nodes that
MIB's loader expects with score 0 and outside every circuit, and :func:`read_mib_file` reads
a file with or without them (:class:`MIBGraph`).

**InterpBench** (Gupta, Arcuschin et al. 2024, arXiv 2407.14494; its code, FlyingPumba's
``circuits-benchmark``, ``iit_train.py`` and ``tracr_circuits_builder.py``, read here). A case
folder holds ``ll_model.pth`` (a ``HookedTransformer`` state dict), ``ll_model_cfg.pkl`` (the
pickled ``HookedTransformerConfig`` fields), ``meta.json`` and ``edges.pkl``: the pickled list
of ``(source, target)`` pairs of the ground truth at its ``acdc_hooks`` granularity, named by
TransformerLens hooks with a head index in brackets: ``hook_embed`` and ``hook_pos_embed`` (the
input), ``blocks.{l}.hook_{x}_input[h] -> blocks.{l}.attn.hook_{x}[h] ->
blocks.{l}.attn.hook_result[h]`` inside a head, ``blocks.{l}.attn.hook_result[h]`` out of it and
``blocks.{L-1}.hook_resid_post`` the output (:func:`interpbench_edges`). Every corruption of
the cases changes tokens, never positions, so the input of a circuit edge is ``hook_embed``.

What is written (:func:`write_case`), per case and size, in folders named ``<case>_<size>``
(MIB's ``<task>_<model>``): the ground truth (MIB's JSON and ``.pt``, InterpBench's
``edges.pkl``), the model (the TransformerLens checkpoint the export loads, where the case
exports; else the construction's own state dict, rebuilt from ``case.json``), and the
corruption: the harness's prompts (``prompts.pt``, the ``batch`` and ``seed`` of
:func:`~empirics.circuit_discovery.case_setup`) with the corruption's and the metric's
description in ``case.json``, which also lists, where they are enumerated, every minimal
circuit and the don't-care edges (``null`` elsewhere).
"""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from constructions import _validate
from constructions.circuits import Circuit, CircuitCase, all_cases, attention_graph
from constructions.interop.layout import transformer_lens_layout
from constructions.residual_layout import UnsupportedConstructionError

QKV = ("q", "k", "v")


@dataclasses.dataclass(frozen=True)
class MIBGraph:
    """MIB's graph of an ``n_layers``-layer, ``n_heads``-head model (``Graph.from_model`` with
    ``parallel_attn_mlp=False``): source and destination node names in MIB's tensor order,
    every edge as ``name -> (source index, destination index)`` in MIB's insertion order, and
    ``model_edges``, the edges of the case's own (attention-only) graph; the others touch an
    MLP node the model does not have."""

    n_layers: int
    n_heads: int
    src_nodes: tuple[str, ...]
    dst_nodes: tuple[str, ...]
    edges: dict[str, tuple[int, int]]
    model_edges: tuple[str, ...]

    @property
    def heads(self) -> tuple[str, ...]:
        return tuple(n for n in self.src_nodes if n.startswith("a"))


def mib_graph(n_layers: int, n_heads: int) -> MIBGraph:
    """MIB's graph (module docstring), built in the order of ``Graph.from_model``."""
    n_layers = _validate.positive_int("n_layers", n_layers)
    n_heads = _validate.positive_int("n_heads", n_heads)
    src = ["input"]
    dst = []
    for layer in range(n_layers):
        src += [f"a{layer}.h{h}" for h in range(n_heads)] + [f"m{layer}"]
        dst += [f"a{layer}.h{h}<{x}>" for x in QKV for h in range(n_heads)] + [f"m{layer}"]
    dst.append("logits")
    index_src = {n: i for i, n in enumerate(src)}
    index_dst = {n: i for i, n in enumerate(dst)}
    edges: dict[str, tuple[int, int]] = {}

    def add(u: str, v: str) -> None:
        edges[f"{u}->{v}"] = (index_src[u], index_dst[v])

    stream = ["input"]
    for layer in range(n_layers):
        heads = [f"a{layer}.h{h}" for h in range(n_heads)]
        for u in stream:
            for v in heads:
                for x in QKV:
                    add(u, f"{v}<{x}>")
        stream += heads
        for u in stream:
            add(u, f"m{layer}")
        stream.append(f"m{layer}")
    for u in stream:
        add(u, "logits")
    model = tuple(e.name for e in attention_graph(n_layers, n_heads))
    return MIBGraph(n_layers, n_heads, tuple(src), tuple(dst), edges, model)


def mib_json(graph: MIBGraph, d_model: int, edge_scores: Mapping[str, float],
             in_graph: frozenset[str] | set[str]) -> dict[str, Any]:
    """MIB's ``Graph.to_json`` dictionary: ``edge_scores`` by edge name (0 for an edge not
    given), ``in_graph`` the edges of the circuit; a node is in the graph when an edge of it is
    (``logits`` always, as MIB's ``LogitNode``)."""
    touched = {part for name in in_graph for part in edge_ends(name)}
    nodes = {n: {"in_graph": n in touched} for n in graph.src_nodes}
    nodes["logits"] = {"in_graph": True}
    return {"cfg": _cfg(graph, d_model), "nodes": nodes,
            "edges": {name: {"score": float(edge_scores.get(name, 0.0)),
                             "in_graph": name in in_graph} for name in graph.edges}}


def mib_pt(graph: MIBGraph, d_model: int, edge_scores: Mapping[str, float],
           in_graph: frozenset[str] | set[str]) -> dict[str, Any]:
    """MIB's ``Graph.to_pt`` dictionary for the same graph (float32 scores, as MIB's)."""
    scores = torch.zeros(len(graph.src_nodes), len(graph.dst_nodes))
    inside = torch.zeros(len(graph.src_nodes), len(graph.dst_nodes), dtype=torch.bool)
    for name, (i, j) in graph.edges.items():
        scores[i, j] = float(edge_scores.get(name, 0.0))
        inside[i, j] = name in in_graph
    touched = {part for name in in_graph for part in edge_ends(name)}
    return {"cfg": _cfg(graph, d_model), "src_nodes": list(graph.src_nodes),
            "dst_nodes": list(graph.dst_nodes), "edges_scores": scores,
            "edges_in_graph": inside,
            "nodes_in_graph": torch.tensor([n in touched for n in graph.src_nodes])}


def _cfg(graph: MIBGraph, d_model: int) -> dict[str, Any]:
    return {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "parallel_attn_mlp": False,
            "d_model": int(d_model)}


def edge_ends(name: str) -> tuple[str, str]:
    """(source node, destination node) of an edge name, without the ``<x>``."""
    source, target = name.split("->")
    return source, target.split("<")[0]


# --- reading MIB files ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MIBFile:
    """What a MIB circuit file says about the model's edges: ``edge_scores`` and
    ``in_graph`` for every edge of ``graph.model_edges``, ``node_scores`` for the source nodes
    where the file carries node scores (else ``None``), and ``extra``: how many MLP entries
    (edges or nodes of MLPs the model does not have) were present with a non-zero score or in
    the graph, which scoring cannot use."""

    path: Path
    edge_scores: dict[str, float]
    in_graph: frozenset[str]
    node_scores: dict[str, float] | None
    extra: int


def read_mib_file(path: str | Path, graph: MIBGraph) -> MIBFile:
    """Read a MIB circuit file (``.json`` or ``.pt``) of the model whose graph is ``graph``.

    Its ``cfg`` must give ``graph``'s ``n_layers`` and ``n_heads``; every edge of the model's
    graph must be present (MLP edges may be, or not); every name must be an edge of MIB's
    graph; scores must be finite (node scores may be NaN: MIB's "unscored"). Raises
    ``ValueError`` naming the file and what is wrong."""
    path = Path(path)
    if path.suffix not in (".json", ".pt"):
        raise ValueError(f"path must be a MIB circuit file (.json or .pt), got {path.name!r}")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise _bad(path, f"not a readable JSON file ({error})") from error
        edges, nodes, in_nodes = _json_entries(path, data)
    else:
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises many kinds for a file that is not a .pt
            raise _bad(path, f"not a readable torch file ({error})") from error
        edges, nodes, in_nodes = _pt_entries(path, data, graph)
    cfg = data.get("cfg")
    if not isinstance(cfg, Mapping) or (cfg.get("n_layers"), cfg.get("n_heads")) != (
            graph.n_layers, graph.n_heads):
        raise _bad(path, f"cfg must give n_layers={graph.n_layers} and n_heads="
                         f"{graph.n_heads} (the case's model), got {cfg!r}")
    unknown = sorted(set(edges) - set(graph.edges))
    missing = [e for e in graph.model_edges if e not in edges]
    if unknown or missing:
        raise _bad(path, f"edges must be named as in MIB's graph and cover the "
                         f"model's {len(graph.model_edges)} edges: unknown {unknown[:5]}, "
                         f"missing {missing[:5]}")
    model = set(graph.model_edges)
    extra = sum(1 for e, (s, inside) in edges.items() if e not in model and (s or inside))
    if nodes is not None:
        unknown_nodes = sorted(set(nodes) - set(graph.src_nodes))
        if unknown_nodes:
            raise _bad(path, f"nodes must be MIB source nodes, got {unknown_nodes[:5]}")
        extra += sum(1 for n, s in nodes.items() if n.startswith("m") and not math.isnan(s)
                     and s != 0)
        nodes = {n: s for n, s in nodes.items() if not n.startswith("m")}
    del in_nodes  # a node's membership follows from its edges' (MIB's prune)
    return MIBFile(path, {e: edges[e][0] for e in graph.model_edges},
                   frozenset(e for e in graph.model_edges if edges[e][1]), nodes, extra)


def _bad(path: Path, message: str) -> ValueError:
    """The error for a bad file: it names the parameter (``path``) and the file."""
    return ValueError(f"path {str(path)!r}: {message}")


def _score(path: Path, what: str, value: object, allow_nan: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(path, f"{what} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) and not (allow_nan and math.isnan(value)):
        raise _bad(path, f"{what} must be finite, got {value}")
    return value


def _json_entries(path: Path, data: object):
    """(edge -> (score, in_graph), node -> score or None, node -> in_graph) of a JSON file."""
    if not isinstance(data, Mapping) or not {"cfg", "nodes", "edges"} <= set(data):
        raise _bad(path, "a MIB graph JSON must hold 'cfg', 'nodes' and 'edges'")
    if not isinstance(data["edges"], Mapping) or not isinstance(data["nodes"], Mapping):
        raise _bad(path, "'edges' and 'nodes' must be objects keyed by name")
    edges = {}
    for name, entry in data["edges"].items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("in_graph"), bool):
            raise _bad(path, f"edge {name!r} must have a boolean 'in_graph'")
        edges[name] = (_score(path, f"the score of edge {name!r}", entry.get("score", 0.0)),
                       entry["in_graph"])
    scored = any(isinstance(e, Mapping) and "score" in e for e in data["nodes"].values())
    nodes = {}
    for name, entry in data["nodes"].items():
        if name == "logits":
            continue
        if not isinstance(entry, Mapping):
            raise _bad(path, f"node {name!r} must be an object")
        if scored:
            nodes[name] = _score(path, f"the score of node {name!r}",
                                 entry.get("score", math.nan), allow_nan=True)
    in_nodes = {n: bool(e.get("in_graph")) for n, e in data["nodes"].items()
                if isinstance(e, Mapping)}
    return edges, (nodes if scored else None), in_nodes


def _pt_entries(path: Path, data: object, graph: MIBGraph):
    """The same for a ``.pt`` file in MIB's layout (its own node lists name the rows and
    columns, so a file without MLP rows reads too)."""
    keys = ("cfg", "src_nodes", "dst_nodes", "edges_scores", "edges_in_graph")
    if not isinstance(data, Mapping) or not set(keys) <= set(data):
        raise _bad(path, f"a MIB graph .pt must hold {list(keys)}")
    src, dst = list(data["src_nodes"]), list(data["dst_nodes"])
    scores, inside = data["edges_scores"], data["edges_in_graph"]
    for name, tensor in (("edges_scores", scores), ("edges_in_graph", inside)):
        if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != (len(src), len(dst)):
            raise _bad(path, f"{name} must be a (len(src_nodes), len(dst_nodes)) = "
                             f"({len(src)}, {len(dst)}) tensor")
    edges = {}
    for name in graph.edges:
        u, _, v = name.partition("->")
        if u in src and v in dst:
            i, j = src.index(u), dst.index(v)
            edges[name] = (_score(path, f"the score of edge {name!r}", float(scores[i, j])),
                           bool(inside[i, j]))
    nodes = None
    if "nodes_scores" in data and data["nodes_scores"] is not None:
        node_scores = data["nodes_scores"]
        if not isinstance(node_scores, torch.Tensor) or node_scores.shape != (len(src),):
            raise _bad(path, "nodes_scores must be a (len(src_nodes),) tensor")
        nodes = {n: _score(path, f"the score of node {n!r}", float(s), allow_nan=True)
                 for n, s in zip(src, node_scores.tolist(), strict=True)}
        if all(math.isnan(s) for s in nodes.values()):
            nodes = None
    return edges, nodes, {}


# --- InterpBench --------------------------------------------------------------------------------

def _hook_source(node: str) -> str:
    if node == "input":
        return "hook_embed"  # the corruptions change tokens, never positions
    layer, head = node[1:].split(".h")
    return f"blocks.{layer}.attn.hook_result[{head}]"


def interpbench_edges(circuit: Circuit) -> list[tuple[str, str]]:
    """The circuit as InterpBench's ``edges.pkl`` list at its ``acdc_hooks`` granularity
    (module docstring): each edge ``u -> a{l}.h{h}<x>`` is ``(u's hook, blocks.{l}.hook_{x}_
    input[h])`` with the head's own ``hook_{x}_input[h] -> attn.hook_{x}[h] ->
    attn.hook_result[h]`` path, and ``u -> logits`` is ``(u's hook, blocks.{L-1}.hook_resid_
    post)``."""
    _validate.instance("circuit", circuit, Circuit)
    pairs: list[tuple[str, str]] = []
    for edge in circuit.edges:
        source = _hook_source(edge.source)
        if edge.target == "logits":
            pairs.append((source, f"blocks.{circuit.n_layers - 1}.hook_resid_post"))
            continue
        layer, head = edge.target[1:].split(".h")
        x = edge.input
        entry = f"blocks.{layer}.hook_{x}_input[{head}]"
        inner = f"blocks.{layer}.attn.hook_{x}[{head}]"
        pairs += [(source, entry), (entry, inner),
                  (inner, f"blocks.{layer}.attn.hook_result[{head}]")]
    return list(dict.fromkeys(pairs))


_HEAD_INPUT = re.compile(r"blocks\.(\d+)\.hook_([qkv])_input\[(\d+)\]")
_HEAD_RESULT = re.compile(r"blocks\.(\d+)\.attn\.hook_result\[(\d+)\]")
_INPUTS = ("hook_embed", "hook_pos_embed", "blocks.0.hook_resid_pre")


def edges_from_interpbench(pairs: list[tuple[str, str]], n_layers: int) -> frozenset[str]:
    """The MIB edge names of an ``edges.pkl`` list (the inverse of :func:`interpbench_edges`;
    the edges inside heads are dropped, as InterpBench's evaluation drops them). Raises
    ``ValueError`` naming ``pairs`` for a pair that is neither."""
    n_layers = _validate.positive_int("n_layers", n_layers)
    output = f"blocks.{n_layers - 1}.hook_resid_post"
    names = set()
    for source, target in pairs:
        entry = _HEAD_INPUT.fullmatch(target)
        if entry is None and target != output:
            if re.fullmatch(r"blocks\.\d+\.attn\.hook_(q|k|v|result)\[\d+\]", target):
                continue                                  # inside a head
            raise ValueError(f"pairs must be InterpBench acdc_hooks edges, got {target!r}")
        result = _HEAD_RESULT.fullmatch(source)
        if source in _INPUTS:
            u = "input"
        elif result is not None:
            u = f"a{result[1]}.h{result[2]}"
        else:
            raise ValueError(f"pairs must be InterpBench acdc_hooks edges, got {source!r}")
        names.add(f"{u}->logits" if entry is None else
                  f"{u}->a{entry[1]}.h{entry[3]}<{entry[2]}>")
    return frozenset(names)


def transformer_lens_checkpoint(model: torch.nn.Module, n_ctx: int | None = None
                                ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(state dict, config fields) of ``model`` as a TransformerLens ``HookedTransformer``
    (:func:`~constructions.interop.layout.transformer_lens_layout`, no weight
    processing), with the buffers a strict ``load_state_dict`` of TransformerLens 2.x/3.x
    expects beside the weights: each attention layer's causal ``mask`` (the lower triangle of
    ``n_ctx x n_ctx``) and its ``IGNORE`` (minus infinity). Raises
    ``UnsupportedConstructionError`` for a model that does not export."""
    layout = transformer_lens_layout(model, n_ctx=n_ctx)
    config = dict(layout.config)
    state = dict(layout.state_dict)
    n = config["n_ctx"]
    for layer in range(config["n_layers"]):
        state[f"blocks.{layer}.attn.mask"] = torch.tril(torch.ones(n, n, dtype=torch.bool))
        state[f"blocks.{layer}.attn.IGNORE"] = torch.tensor(-math.inf, dtype=config["dtype"])
    return state, config


# --- writing a case ---------------------------------------------------------------------------

def case_by_name(name: str) -> CircuitCase:
    cases = all_cases()
    if not isinstance(name, str) or name not in cases:
        raise ValueError(f"case must be a registered case id, one of {sorted(cases)}; "
                         f"got {name!r}")
    return cases[name]


def folder_name(case: CircuitCase, size: str) -> str:
    """``<case>_<size>``: MIB's ``<task>_<model>`` (neither part holds an underscore)."""
    return f"{case.name}_{size}"


def write_case(case: CircuitCase, out: str | Path, size: str = "full", *, batch: int = 64,
               seed: int = 0) -> dict[str, Path]:
    """Write ``case`` at ``size`` in both formats under ``out/mib/<case>_<size>/`` and
    ``out/interpbench/<case>_<size>/`` (module docstring); returns the two folders."""
    from empirics.circuit_discovery import case_setup

    _validate.instance("case", case, CircuitCase)
    size = _validate.choice("size", size, tuple(case.sizes))
    batch = _validate.positive_int("batch", batch)
    seed = _validate.seed("seed", seed)
    out = Path(out)
    model, circuit = case.instance(size)
    setup, _ = case_setup(case, size, batch, seed)
    name = folder_name(case, size)
    mib, ib = out / "mib" / name, out / "interpbench" / name
    mib.mkdir(parents=True, exist_ok=True)
    ib.mkdir(parents=True, exist_ok=True)

    graph = mib_graph(circuit.n_layers, circuit.n_heads)
    truth = circuit.edge_names
    scores = {e: 1.0 for e in truth}
    (mib / "ground_truth.json").write_text(json.dumps(mib_json(graph, circuit.d_model, scores,
                                                               truth)))
    torch.save(mib_pt(graph, circuit.d_model, scores, truth), mib / "ground_truth.pt")
    torch.save({"clean": setup.clean.cpu(), "corrupted": setup.corrupted.cpu()},
               mib / "prompts.pt")
    with open(ib / "edges.pkl", "wb") as f:
        pickle.dump(interpbench_edges(circuit), f)

    try:
        state, config = transformer_lens_checkpoint(model)
        layout = "transformer_lens"
    except UnsupportedConstructionError as error:
        state, config, layout = model.state_dict(), None, f"native: {error}"
    for folder, weights in ((mib, "model.pth"), (ib, "ll_model.pth")):
        torch.save(state, folder / weights)
    if config is not None:
        with open(ib / "ll_model_cfg.pkl", "wb") as f:
            pickle.dump(config, f)
    record = {
        "case": case.name, "title": case.title, "size": size,
        "builder": case.builder, "builder_kwargs": dict(case.sizes[size]),
        "circuit_builder": case.circuit_builder,
        "graph": {"n_layers": circuit.n_layers, "n_heads": circuit.n_heads,
                  "d_model": circuit.d_model, "edges": [e.name for e in setup.graph]},
        "ground_truth": sorted(truth),
        # where every minimal circuit is enumerated (CircuitCase): the ground truth is their
        # union, and a don't-care edge never moves the metric, whatever else is patched
        "minimal_circuits": [sorted(k) for k in case.minimal_circuits] or None,
        "dont_care": sorted(case.dont_care) if case.dont_care else None,
        "roles": {e.name: e.role for e in circuit.edges},
        "corruption": case.corruption,
        "metric": f"{case.metric.__module__}:{case.metric.__qualname__}",
        "prompts": {"file": "prompts.pt", "batch": batch, "seed": seed,
                    "sampler": f"{case.sample.__module__}:{case.sample.__qualname__}"},
        "model": {"layout": layout,
                  "config": None if config is None else
                  {k: (str(v) if isinstance(v, torch.dtype) else v) for k, v in config.items()}},
    }
    (mib / "case.json").write_text(json.dumps(record, indent=1))
    (ib / "meta.json").write_text(json.dumps(record, indent=1))
    return {"mib": mib, "interpbench": ib}


def write_all(out: str | Path, size: str = "full", *, batch: int = 64, seed: int = 0
              ) -> list[dict[str, Path]]:
    """:func:`write_case` for every registered case."""
    return [write_case(case, out, size, batch=batch, seed=seed)
            for case in all_cases().values()]
