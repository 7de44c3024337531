r"""The computational graph of an attention-only transformer, and a circuit as a set of its edges.

The graph of a model with :math:`L` layers of :math:`H` heads (no MLPs, no normalisation) has
the nodes ``input`` (token plus positional embedding, the residual stream before layer 0),
``a{l}.h{h}`` (one head's output, which it adds to the residual stream) and ``logits`` (the
unembedding of the final residual stream). Its edges, named as in the MIB circuit track
(``"input->a1.h0<v>"``), run from every node to every later head's query, key or value input
and to ``logits`` (:func:`attention_graph`). A :class:`Circuit` is a subset of them, each edge
with its role, relative to a named corruption; its MIB JSON form is
:meth:`Circuit.to_mib_json`. What patching an edge means is in :mod:`constructions.circuits`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable

from constructions import _validate

QKV = ("q", "k", "v")


@dataclasses.dataclass(frozen=True)
class Edge:
    """One edge ``source -> target<input>`` of the graph, with the role it plays.

    ``source`` is ``"input"`` or ``"a{l}.h{h}"``; ``target`` is ``"a{l}.h{h}"`` (then
    ``input`` is ``"q"``, ``"k"`` or ``"v"``) or ``"logits"`` (``input`` is ``None``).
    """

    source: str
    target: str
    input: str | None = None
    role: str = ""

    @property
    def name(self) -> str:
        """The MIB edge name, e.g. ``"a0.h0->a1.h0<k>"``."""
        return f"{self.source}->{self.target}" + (f"<{self.input}>" if self.input else "")

    def hooks(self, n_layers: int) -> tuple[str, str]:
        """(source, target) as TransformerLens hook names of ``to_transformer_lens(model,
        circuit_hooks=True)``, which sets ``use_attn_result`` and ``use_split_qkv_input``;
        ``logits`` reads the last block's ``hook_resid_post`` (these models have no final
        LayerNorm)."""
        n_layers = _validate.positive_int("n_layers", n_layers)
        return _source_hook(self.source), _target_hook(self.target, self.input, n_layers)


def _head(node: str) -> tuple[int, int]:
    layer, head = node[1:].split(".h")
    return int(layer), int(head)


def _source_hook(node: str) -> str:
    if node == "input":
        return "blocks.0.hook_resid_pre"
    layer, head = _head(node)
    return f"blocks.{layer}.attn.hook_result[:, :, {head}]"


def _target_hook(node: str, qkv: str | None, n_layers: int) -> str:
    if node == "logits":
        return f"blocks.{n_layers - 1}.hook_resid_post"  # the final residual stream
    layer, head = _head(node)
    return f"blocks.{layer}.hook_{qkv}_input[:, :, {head}]"


def attention_graph(n_layers: int, n_heads: int) -> tuple[Edge, ...]:
    """Every edge of an attention-only model's graph, in a fixed order (upstream first)."""
    n_layers = _validate.positive_int("n_layers", n_layers)
    n_heads = _validate.positive_int("n_heads", n_heads)
    heads = [[f"a{lay}.h{h}" for h in range(n_heads)] for lay in range(n_layers)]
    edges = []
    for layer in range(n_layers):
        upstream = ["input", *itertools.chain.from_iterable(heads[:layer])]
        edges += [Edge(u, v, x) for v in heads[layer] for x in QKV for u in upstream]
    edges += [Edge(u, "logits") for u in ["input", *itertools.chain.from_iterable(heads)]]
    return tuple(edges)


def other_edges(n_layers: int, n_heads: int, *excluded: Iterable[str]) -> tuple[str, ...]:
    """The names of the graph's edges outside every collection in ``excluded`` (edge names), in
    graph order: a case's don't-care edges are declared this way."""
    out = set().union(*(set(names) for names in excluded))
    return tuple(e.name for e in attention_graph(n_layers, n_heads) if e.name not in out)


def patched_names(patched: Iterable[Edge | str], n_layers: int, n_heads: int) -> set[str]:
    """The names of the edges in ``patched`` (edges or names), each checked to be an edge of
    the ``n_layers``-layer, ``n_heads``-head graph (the one-layer constructions' patching)."""
    names = {e.name for e in attention_graph(n_layers, n_heads)}
    chosen = set()
    for edge in patched:
        name = edge.name if isinstance(edge, Edge) else edge
        if name not in names:
            raise ValueError(f"patched must hold edges of the {n_layers}-layer, "
                             f"{n_heads}-head graph, got {name!r}")
        chosen.add(name)
    return chosen


@dataclasses.dataclass(frozen=True)
class Circuit:
    """A circuit of an attention-only model: the edges that carry the computation.

    ``edges`` is a subset of :func:`attention_graph` ``(n_layers, n_heads)``, each with its
    role; ``corruption`` names the corruption it is the ground truth for.
    """

    name: str
    n_layers: int
    n_heads: int
    d_model: int
    edges: tuple[Edge, ...]
    corruption: str = ""

    def __post_init__(self) -> None:
        names = {e.name for e in attention_graph(self.n_layers, self.n_heads)}
        for edge in self.edges:
            if not isinstance(edge, Edge) or edge.name not in names:
                raise ValueError(f"edges must be edges of the {self.n_layers}-layer, "
                                 f"{self.n_heads}-head graph, got {edge!r}")
        if len({e.name for e in self.edges}) != len(self.edges):
            raise ValueError("edges must be distinct")

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes the edges touch, in graph order."""
        touched = {e.source for e in self.edges} | {e.target for e in self.edges}
        order = ["input", *(f"a{lay}.h{h}" for lay in range(self.n_layers)
                            for h in range(self.n_heads)), "logits"]
        return tuple(n for n in order if n in touched)

    @property
    def edge_names(self) -> frozenset[str]:
        return frozenset(e.name for e in self.edges)

    def complement(self) -> tuple[Edge, ...]:
        """The edges of the full graph that are not in the circuit."""
        return tuple(e for e in attention_graph(self.n_layers, self.n_heads)
                     if e.name not in self.edge_names)

    def hook_names(self) -> dict[str, tuple[str, str]]:
        """Each edge's (source, target) TransformerLens hook names, by MIB edge name."""
        return {e.name: e.hooks(self.n_layers) for e in self.edges}

    def without(self, name: str) -> Circuit:
        """This circuit with the edge called ``name`` dropped."""
        if name not in self.edge_names:
            raise ValueError(f"name must be an edge of the circuit, got {name!r}")
        return dataclasses.replace(self, edges=tuple(e for e in self.edges if e.name != name))

    def with_edge(self, edge: Edge) -> Circuit:
        """This circuit with one more edge."""
        return dataclasses.replace(self, edges=(*self.edges, edge))

    def relabelled(self, heads: dict[str, str], n_heads: int, d_model: int) -> Circuit:
        """The same circuit in a model whose heads were renamed by ``heads`` (old node name ->
        new), with ``n_heads`` heads a layer and width ``d_model`` (a variant's)."""
        _validate.instance("heads", heads, dict)
        n_heads = _validate.positive_int("n_heads", n_heads)
        d_model = _validate.positive_int("d_model", d_model)

        def rename(node: str) -> str:
            return heads.get(node, node)
        edges = tuple(dataclasses.replace(e, source=rename(e.source), target=rename(e.target))
                      for e in self.edges)
        return Circuit(self.name, self.n_layers, n_heads, d_model, edges, self.corruption)

    def to_mib_json(self) -> dict:
        """The circuit in the MIB circuit-track graph format: ``cfg``, and every node and edge
        of the full graph with ``in_graph`` (and ``score`` 1 or 0 for edges). The graph has no
        MLP nodes: these models have none."""
        graph = attention_graph(self.n_layers, self.n_heads)
        inside, nodes = self.edge_names, self.nodes
        all_nodes = ["input", *(f"a{lay}.h{h}" for lay in range(self.n_layers)
                                for h in range(self.n_heads)), "logits"]
        return {
            "cfg": {"n_layers": self.n_layers, "n_heads": self.n_heads,
                    "d_model": self.d_model, "parallel_attn_mlp": False},
            "nodes": {n: {"in_graph": n in nodes} for n in all_nodes},
            "edges": {e.name: {"score": float(e.name in inside), "in_graph": e.name in inside}
                      for e in graph},
        }
