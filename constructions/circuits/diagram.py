r"""A circuit as a diagram: Graphviz DOT source and node positions, generated from the
:class:`~constructions.circuits.Circuit` itself (never drawn by hand).

:func:`circuit_dot` draws the whole graph of the model (:func:`~constructions.circuits.
attention_graph`): every head as a record with its query, key and value inputs as ports, the
circuit's edges bold and labelled with their roles (as tooltips), the other edges faint and
dashed, so a reader sees both what the circuit is and what it leaves out. :func:`layout`
gives a layered placement for renderers without Graphviz. Strings only: rendering is the
docs' job.
"""

from __future__ import annotations

import re

from constructions import _validate
from constructions.circuits.graph import QKV, Circuit, attention_graph

CIRCUIT_COLOUR = "#c62828"
OTHER_COLOUR = "#b0bec5"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def node_label(node: str) -> str:
    """``a1.h0`` -> ``L1H0``; ``input`` and ``logits`` as they are."""
    if not isinstance(node, str):
        raise TypeError(f"node must be a node name (str), got {type(node).__name__}")
    if node not in ("input", "logits") and re.fullmatch(r"a\d+\.h\d+", node) is None:
        raise ValueError(f"node must be 'input', 'logits' or 'a<layer>.h<head>', got {node!r}")
    if node.startswith("a"):
        layer, head = node[1:].split(".h")
        return f"L{layer}H{head}"
    return node


def _dot_id(node: str) -> str:
    return _quote(node.replace(".", "_"))


def circuit_dot(circuit: Circuit) -> str:
    """Graphviz source of ``circuit`` on its model's full graph (module docstring)."""
    _validate.instance("circuit", circuit, Circuit)
    inside = {e.name: e for e in circuit.edges}
    lines = [f"digraph {_quote(circuit.name)} {{",
             '  graph [rankdir=LR, nodesep=0.3, ranksep=0.8, fontname="Helvetica", '
             'fontsize=11, bgcolor="transparent"];',
             '  node [fontname="Helvetica", fontsize=11, color="#455a64"];',
             '  edge [arrowsize=0.6];',
             f"  label={_quote(_legend(circuit))}; labelloc=b; fontcolor=\"#455a64\";"]
    used = set(circuit.nodes)
    style = {True: 'style="filled", fillcolor="#ffebee"', False: 'style="filled", '
             'fillcolor="#eceff1"'}
    lines.append(f'  {_dot_id("input")} [shape=box, label="input\\n(embedding)", '
                 f'{style["input" in used]}];')
    for layer in range(circuit.n_layers):
        lines.append(f"  subgraph cluster_layer{layer} {{ label={_quote(f'layer {layer}')}; "
                     f'style="rounded"; color="#cfd8dc"; fontcolor="#607d8b";')
        for head in range(circuit.n_heads):
            node = f"a{layer}.h{head}"
            ports = "|".join(f"<{x}> {x}" for x in QKV)
            label = _quote(f"{{{ports}}}|{node_label(node)}")
            lines.append(f"    {_dot_id(node)} [shape=record, label={label}, "
                         f"{style[node in used]}];")
        lines.append("  }")
    lines.append(f'  {_dot_id("logits")} [shape=box, label="logits\\n(unembedding)", '
                 f'{style["logits" in used]}];')
    for edge in attention_graph(circuit.n_layers, circuit.n_heads):
        target = _dot_id(edge.target) + (f":{edge.input}" if edge.input else "")
        if edge.name in inside:
            role = inside[edge.name].role or edge.name
            attributes = (f"color={_quote(CIRCUIT_COLOUR)}, penwidth=2.2, "
                          f"tooltip={_quote(f'{edge.name}: {role}')}")
        else:
            attributes = (f'color={_quote(OTHER_COLOUR)}, style="dashed", '
                          f"tooltip={_quote(f'{edge.name} (not in the circuit)')}")
        lines.append(f"  {_dot_id(edge.source)} -> {target} [{attributes}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _legend(circuit: Circuit) -> str:
    total = len(attention_graph(circuit.n_layers, circuit.n_heads))
    under = f" under {circuit.corruption}" if circuit.corruption else ""
    return (f"red: the {len(circuit.edges)} circuit edges{under}; "
            f"dashed: the other {total - len(circuit.edges)} edges of the graph")


def layout(circuit: Circuit) -> dict[str, tuple[int, int]]:
    """Node -> (column, row): input in column 0, layer ``l``'s heads in column ``l + 1``
    (one row per head), logits in the last column."""
    _validate.instance("circuit", circuit, Circuit)
    places = {"input": (0, 0)}
    for layer in range(circuit.n_layers):
        for head in range(circuit.n_heads):
            places[f"a{layer}.h{head}"] = (layer + 1, head)
    places["logits"] = (circuit.n_layers + 1, 0)
    return places
