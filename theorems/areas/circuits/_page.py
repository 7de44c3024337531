r"""The MyST sections the circuits area adds to its docs page: per circuit case, its diagram, its
corruption and edges, the claims that check it, and the discovery methods' published scores.

The docs extension (``theorems_site``) imports an area package's private ``_page`` module
when it has one, calls its :func:`page_sections` with the published results and the claim ids
on the site, and puts the MyST it returns under the area's introduction (the package's
docstring). The diagram is generated from the case's ``circuit()``
(:func:`constructions.circuits.circuit_dot`) and rendered here to SVG: laid out by Graphviz
when ``dot`` is on the PATH (:func:`graphviz_svg`), by :func:`python_svg` otherwise. The claims
come from :data:`._cases.CHECKED_BY`; the scores from the published results of the
``circuit-discovery`` experiment (:mod:`empirics.circuit_discovery`), the ``full`` config when
there is one.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from constructions.circuits import (
    CIRCUIT_COLOUR,
    OTHER_COLOUR,
    Circuit,
    CircuitCase,
    all_cases,
    attention_graph,
    circuit_dot,
    layout,
)
from constructions.circuits import node_label as label
from theorems.areas.circuits._benchmark import benchmark_section, conformance_section
from theorems.areas.circuits._cases import claims_of
from theorems.areas.circuits._myst import _markdown, _number, _table, published_result

EXPERIMENT = "circuit-discovery"


def graphviz_svg(circuit: Circuit, dot: str = "dot") -> str:
    """The diagram laid out by Graphviz: the ``<svg>`` element, scaled to the page width."""
    svg = subprocess.run([dot, "-Tsvg"], input=circuit_dot(circuit), capture_output=True,
                         text=True, check=True, timeout=60).stdout
    svg = svg[svg.index("<svg"):]
    return re.sub(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"',
                  r'<svg class="tt-circuit" style="max-width: \1pt; width: 100%; height: auto"',
                  svg, count=1)


def python_svg(circuit: Circuit) -> str:
    """The diagram without Graphviz: :func:`~constructions.circuits.layout`'s columns,
    straight edges (circuit edges red and labelled in a tooltip), plain SVG."""
    places = layout(circuit)
    width, height, gap_x, gap_y, pad = 110, 36, 90, 24, 14
    columns = max(c for c, _ in places.values()) + 1
    rows = max(r for _, r in places.values()) + 1
    box = {n: (pad + c * (width + gap_x), pad + r * (height + gap_y))
           for n, (c, r) in places.items()}
    total_w, total_h = pad * 2 + columns * width + (columns - 1) * gap_x, pad * 2 + rows * (
        height + gap_y)
    roles = {e.name: e.role for e in circuit.edges}
    parts = [f'<svg class="tt-circuit" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 '
             f'{total_w} {total_h}" style="max-width: {total_w}px; width: 100%; height: auto" '
             f'font-family="Helvetica, Arial, sans-serif" font-size="11">']
    for edge in attention_graph(circuit.n_layers, circuit.n_heads):
        (x1, y1), (x2, y2) = box[edge.source], box[edge.target]
        port = {"q": 0.25, "k": 0.5, "v": 0.75, None: 0.5}[edge.input]
        inside = edge.name in roles
        tip = f"{edge.name}: {roles[edge.name]}" if inside else f"{edge.name} (not in the circuit)"
        style = (f'stroke="{CIRCUIT_COLOUR}" stroke-width="2.2"' if inside else
                 f'stroke="{OTHER_COLOUR}" stroke-dasharray="4 3"')
        parts.append(f'<line x1="{x1 + width}" y1="{y1 + height / 2}" x2="{x2}" '
                     f'y2="{y2 + port * height}" {style}><title>{html.escape(tip)}</title>'
                     f'</line>')
    used = set(circuit.nodes)
    for node, (x, y) in box.items():
        fill = "#ffebee" if node in used else "#eceff1"
        parts.append(f'<rect x="{x}" y="{y}" width="{width}" height="{height}" rx="4" '
                     f'fill="{fill}" stroke="#455a64"/><text x="{x + width / 2}" '
                     f'y="{y + height / 2 + 4}" text-anchor="middle">'
                     f'{html.escape(label(node))}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def circuit_svg(circuit: Circuit) -> str:
    """Graphviz's layout when ``dot`` is installed, else :func:`python_svg`."""
    dot = shutil.which("dot")
    return graphviz_svg(circuit, dot) if dot else python_svg(circuit)


def published_scores(results: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The circuit-discovery result to show: ``full`` if published, else any (smoke)."""
    return published_result(results, EXPERIMENT)


def figure_owner(name: str, cases: Sequence[str], methods: Sequence[str]
                 ) -> tuple[str, str] | None:
    """(case, method) of a figure the experiment named ``f"{case}-{method}"``, or None.

    Matched exactly against the known case ids and methods: a prefix test would give
    ``two-layer-induction`` the figures of ``two-layer-induction-rotated`` too.
    """
    owners = [(case, method) for case in cases for method in methods
              if name == f"{case}-{method}"]
    if len(owners) > 1:  # two ids whose joins collide: no page may guess which it is
        raise ValueError(f"figure {name!r} names more than one (case, method): {owners}")
    return owners[0] if owners else None


def case_figures(case: str, result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(figure name, path) of the published figures of ``case``, one per method."""
    from empirics.circuit_discovery import METHODS

    methods = tuple((result.get("config") or {}).get("methods") or METHODS)
    cases = tuple(all_cases())
    return [(name, path) for name, path in sorted(result.get("figure_paths", {}).items())
            if (figure_owner(name, cases, methods) or ("", ""))[0] == case]


def case_section(case: CircuitCase, result: Mapping[str, Any] | None,
                 claims: set[str] | None = None) -> str:
    """One case's section (MyST): diagram, corruption, edges, claims, scores."""
    _, circuit = case.instance("smoke")
    size = ", ".join(f"{k}={v}" for k, v in case.sizes["smoke"].items())
    lines = [f"## Circuit case: {_markdown(case.title)}", "",
             f"Case `{case.name}`: model `{case.builder}`, circuit `{case.circuit_builder}` "
             f"(diagram at the smoke size, {size}; generated from the circuit, not drawn).", "",
             "```{raw} html", f'<div class="tt-circuit-diagram" data-case="{case.name}">',
             circuit_svg(circuit), "</div>", "```", "",
             f"**Corruption.** {_markdown(case.corruption)}", "",
             _table(["edge", "role"], [[f"`{e.name}`", _markdown(e.role)]
                                       for e in circuit.edges]), ""]
    if case.minimal_circuits:
        circuits = "; ".join("{" + ", ".join(f"`{e}`" for e in k) + "}"
                             for k in case.minimal_circuits)
        lines += [f"**Every minimal circuit** ({len(case.minimal_circuits)}): {circuits}. "
                  f"**Don't-care edges** ({len(case.dont_care)}, patching one never moves the "
                  f"metric, whatever else is patched): "
                  + ", ".join(f"`{e}`" for e in case.dont_care) + ".", ""]
        others = ({e.name for e in attention_graph(circuit.n_layers, circuit.n_heads)}
                  - set().union(*map(set, case.minimal_circuits)) - set(case.dont_care))
        if others:
            lines += ["**In no minimal circuit, yet not don't-care:** "
                      + ", ".join(f"`{e}`" for e in sorted(others)) + ".", ""]
    checked = claims_of(case)
    if checked:
        refs = [f"{{ref}}`{c} <{c}>`" if claims is None or c in claims else f"`{c}`"
                for c in checked]
        lines += [f"**Checked claims:** {', '.join(refs)}.", ""]
    rows = [r for r in ((result or {}).get("tables", {}).get("scores", {}).get("rows", []))
            if r and r[0] == case.name]
    if rows:
        header = [_markdown(h) for h in result["tables"]["scores"]["header"][1:]]
        lines += [f"**Discovery methods** (published `{result['config_name']}` result of "
                  f"{{ref}}`{EXPERIMENT} <experiment-{EXPERIMENT}>`, batch "
                  f"{_number(result['config'].get('batch'))}"
                  + (f", {{staleness}}`{result['staleness']}`" if "staleness" in result else "")
                  + "):", "",
                  _table(header, [[_number(v) for v in r[1:]] for r in rows]), ""]
        for name, path in case_figures(case.name, result):
            lines += [f":::{{figure}} {path}", ":class: tt-figure", "", _markdown(name), ":::",
                      ""]
    else:
        lines += [f"**Discovery methods:** no published result of `{EXPERIMENT}` for this "
                  f"case yet (`python -m empirics run {EXPERIMENT} --config full --out "
                  f"empirics/results`).", ""]
    return "\n".join(lines)


def page_sections(results: Sequence[Mapping[str, Any]] = (),
                  claims: set[str] | None = None) -> str:
    """The benchmark section (formats, scoring, third-party scores), every registered case's
    section, then the hook-conformance table (:mod:`._benchmark`); ``results`` are published
    result dicts, ``claims`` the claim ids on the site (others are named, not linked)."""
    result = published_scores(results)
    return "\n".join([benchmark_section(results),
                      *(case_section(case, result, claims) for case in all_cases().values()),
                      conformance_section(results)])
