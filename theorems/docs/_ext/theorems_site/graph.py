"""The dependency graph of the claims, as an inline SVG whose nodes link to the claims.

An edge runs from a claim to each claim that depends on it (``depends_on`` read forwards),
nodes are filled by status and grouped by area. Graphviz lays the graph out when ``dot`` is
on the PATH (``unflatten`` first staggers the many claims without dependencies, so the graph
is not one very wide row). Without Graphviz a pure-Python layered layout is drawn instead:
the ranks are NetworkX's topological generations, wrapped into rows. Both renderers produce
the same nodes and links, and neither needs a network connection at view time.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Fill and text colours per status (also used by the legend and the CSS badges), and one more
# for a verified claim that rests on a claim that is not verified.
STATUS_COLOURS = {
    "verified": ("#d5f0dc", "#1b5e20"),
    "refuted": ("#efe0f7", "#5b2378"),
    "inconclusive": ("#ffe0b2", "#8a4b00"),
    "failing": ("#fbd5d5", "#a11a1a"),
    "unchecked": ("#eceff1", "#455a64"),
}
COLOURS = {**STATUS_COLOURS, "verified-alone": ("#fff4cc", "#1b5e20")}
# What every colour of the graph means: the legend.
LEGEND = {
    "verified": "verified with all its dependencies: it and every claim it transitively "
                "depends on are verified",
    "verified-alone": "verified on its own checks, but it depends (perhaps transitively) on a "
                      "claim that is refuted, inconclusive, failing or unchecked",
    "refuted": "a counterexample to the claim as stated is pinned",
    "inconclusive": "the interval of a sampled or seeded check did not decide",
    "failing": "some check failed",
    "unchecked": "no check ran (or only symbolic ones)",
}


@dataclass(frozen=True)
class Node:
    id: str
    area: str
    title: str
    status: str
    url: str
    depends_on: tuple[str, ...]
    through: bool = True  # verified with all its dependencies (only read when verified)
    proved: bool = False  # carries a passed machine-checked proof: drawn with a double border
    # each passed proof in words: what it covers and what it trusts (shown in the tooltip)
    proofs: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.id.split(".", 1)[1]

    @property
    def tooltip(self) -> str:
        return "\n".join([f"{self.id} ({self.status}{', machine-checked' if self.proved else ''})"
                          f": {self.title}", *self.proofs])

    @property
    def colour(self) -> str:
        """The key of :data:`COLOURS` (and :data:`LEGEND`) this node is drawn with."""
        return "verified-alone" if self.status == "verified" and not self.through else self.status


def focus_data(nodes: Sequence[Node]) -> str:
    """The nodes as JSON for the graph page's focus control (``graph-focus.js``), safe to
    embed in a ``<script type="application/json">`` element."""
    import json

    rows = [{"id": n.id, "area": n.area, "title": n.title, "status": n.status,
             "colour": n.colour, "fill": COLOURS[n.colour][0], "ink": COLOURS[n.colour][1],
             "url": n.url, "depends_on": list(n.depends_on), "proved": n.proved,
             "tooltip": n.tooltip}
            for n in nodes]
    return json.dumps(rows).replace("</", "<\\/")


def dot_source(nodes: Sequence[Node]) -> str:
    """Graphviz source: one cluster per area, status colours, a link and tooltip per node."""
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace(
            "\n", "\\n") + '"'

    known = {n.id for n in nodes}
    lines = ["digraph claims {",
             '  graph [rankdir=LR, nodesep=0.15, ranksep=0.5, fontname="Helvetica", '
             'fontsize=11, bgcolor="transparent"];',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11, '
             'margin="0.12,0.04", height=0.3];',
             '  edge [color="#78909c", arrowsize=0.6];']
    for area in sorted({n.area for n in nodes}):
        lines.append(f"  subgraph {quote('cluster_' + area)} {{")
        lines.append(f'    label={quote(area)}; style="rounded"; color="#b0bec5"; '
                     f'fontcolor="#455a64";')
        for node in (n for n in nodes if n.area == area):
            fill, ink = COLOURS[node.colour]
            proved = ", peripheries=2" if node.proved else ""
            lines.append(
                f"    {quote(node.id)} [label={quote(node.label)}, fillcolor={quote(fill)}, "
                f"color={quote(ink)}, fontcolor={quote(ink)}, URL={quote(node.url)}{proved}, "
                f'target="_top", tooltip={quote(node.tooltip)}];')
        lines.append("  }")
    for node in nodes:
        for dep in node.depends_on:
            if dep in known:
                lines.append(f"  {quote(dep)} -> {quote(node.id)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_with_graphviz(nodes: Sequence[Node], dot: str = "dot",
                         unflatten: str | None = "unflatten") -> str:
    """Lay out with Graphviz; return the ``<svg>`` element (no XML prolog)."""
    source = dot_source(nodes)
    if unflatten is not None:
        # -l: stagger the leaves of fan-outs over 3 ranks; -f also disconnected nodes; -c 4:
        # chain disconnected nodes four at a time, so that claims without dependencies wrap.
        source = subprocess.run([unflatten, "-f", "-l", "3", "-c", "4"], input=source,
                                capture_output=True, text=True, check=True, timeout=60).stdout
    svg = subprocess.run([dot, "-Tsvg"], input=source, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    svg = svg[svg.index("<svg"):]
    # Graphviz fixes the size in points: scale down to the page's width, never up.
    svg = re.sub(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"',
                 r'<svg class="tt-graph" style="max-width: \1pt; width: 100%; height: auto"',
                 svg, count=1)
    return svg


def render_in_python(nodes: Sequence[Node], per_row: int = 5) -> str:
    """A layered layout without Graphviz: ranks from NetworkX, rows wrapped, plain SVG."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(n.id for n in nodes)
    graph.add_edges_from((d, n.id) for n in nodes for d in n.depends_on if d in graph)
    by_id = {n.id: n for n in nodes}
    width, height, gap_x, gap_y, pad = 210, 26, 18, 22, 12
    position: dict[str, tuple[float, float]] = {}
    row = 0
    for generation in nx.topological_generations(graph):
        ordered = sorted(generation, key=lambda i: (by_id[i].area, i))
        for start in range(0, len(ordered), per_row):
            for column, node_id in enumerate(ordered[start:start + per_row]):
                position[node_id] = (pad + column * (width + gap_x),
                                     pad + row * (height + gap_y))
            row += 1
    total_w = pad * 2 + per_row * width + (per_row - 1) * gap_x
    total_h = pad * 2 + row * height + max(row - 1, 0) * gap_y
    parts = [f'<svg class="tt-graph" xmlns="http://www.w3.org/2000/svg" '
             f'viewBox="0 0 {total_w} {total_h}" style="max-width: {total_w}px; width: 100%; '
             f'height: auto" font-family="Helvetica, Arial, sans-serif" font-size="11">',
             '<defs><marker id="tt-arrow" viewBox="0 0 10 10" refX="10" refY="5" '
             'markerWidth="6" markerHeight="6" orient="auto-start-reverse">'
             '<path d="M 0 0 L 10 5 L 0 10 z" fill="#78909c"/></marker></defs>']
    for source, target in sorted(graph.edges):
        (x1, y1), (x2, y2) = position[source], position[target]
        parts.append(f'<path d="M {x1 + width / 2} {y1 + height} C {x1 + width / 2} '
                     f'{y1 + height + gap_y}, {x2 + width / 2} {y2 - gap_y}, {x2 + width / 2} '
                     f'{y2}" fill="none" stroke="#78909c" marker-end="url(#tt-arrow)"/>')
    for node_id, (x, y) in sorted(position.items()):
        node = by_id[node_id]
        fill, ink = COLOURS[node.colour]
        text = node.id if len(node.id) <= 34 else node.id[:33] + "…"
        inner = (f'<rect x="{x + 3}" y="{y + 3}" width="{width - 6}" height="{height - 6}" '
                 f'rx="4" fill="none" stroke="{ink}" class="tt-proved"/>' if node.proved else "")
        parts.append(
            f'<a href="{html.escape(node.url)}" target="_top"><title>'
            f'{html.escape(node.tooltip)}</title>'
            f'<rect x="{x}" y="{y}" width="{width}" height="{height}" rx="6" fill="{fill}" '
            f'stroke="{ink}"/>{inner}<text x="{x + width / 2}" y="{y + height / 2 + 4}" '
            f'text-anchor="middle" fill="{ink}">{html.escape(text)}</text></a>')
    parts.append("</svg>")
    return "\n".join(parts)


def renderer(choice: str) -> tuple[str, Callable[[Sequence[Node]], str]]:
    """(name, function) for ``choice`` in auto | graphviz | python."""
    if choice not in ("auto", "graphviz", "python"):
        raise ValueError(f"theorems_graph_renderer must be auto, graphviz or python, "
                         f"got {choice!r}")
    dot = shutil.which("dot")
    if choice == "graphviz" or (choice == "auto" and dot is not None):
        if dot is None:
            raise ValueError("theorems_graph_renderer is 'graphviz' but dot is not on the PATH")
        unflatten = shutil.which("unflatten")
        return "Graphviz", lambda nodes: render_with_graphviz(nodes, dot, unflatten)
    return "NetworkX layered layout", render_in_python
