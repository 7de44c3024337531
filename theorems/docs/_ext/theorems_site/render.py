"""MyST Markdown for every page, from :class:`~theorems_site.data.SiteData` and templates.

The page layouts are the Jinja templates in ``templates/``; this module gives them the
formatting helpers (numbers, code spans, fenced blocks, list-tables) and writes the pages.
Claim statements, titles and corrections are MyST Markdown with ``$...$`` math, as their
authors wrote them; every other string (check names, metric names, table cells, falsifying
examples) is data and is escaped or fenced, so it can never be read as markup.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
from sphinx.util import logging

from theorems import audit, proof_statements, proving
from theorems.claims import REFUTATION_SCOPES, SCALING_STUDY_OF, STATUSES, TAGS

from .data import (
    SCOPE_MEANING,
    STALENESS,
    ClaimView,
    ConstructionView,
    ResultView,
    SiteData,
    area_docname,
    area_intro,
    area_sections,
    experiment_anchor,
)
from .graph import COLOURS, LEGEND
from .markup import STATUS_MEANING, TIER_MEANING

TEMPLATES = Path(__file__).resolve().parent / "templates"
logger = logging.getLogger(__name__)
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|$~^&:=])")


# --- formatting helpers ----------------------------------------------------------------------

def number(value: Any) -> str:
    """A count with thousands separators, a float to 4 significant digits, '—' for none."""
    if value is None:
        return "—"
    if isinstance(value, str):  # the evidence file writes non-finite floats as strings
        value = float(value)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value + 0.0:.4g}"  # + 0.0 turns -0.0 into 0.0


def seconds(value: Any) -> str:
    return "—" if value is None else f"{float(value):.2f} s"


def text(value: Any) -> str:
    """Plain text in Markdown, on one line: every punctuation mark Markdown could read is
    escaped."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(str(value).split()))


def _inline_text(value: str) -> str:
    """:func:`text` for a piece of a line: runs of whitespace kept (as one space)."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", re.sub(r"\s+", " ", value))


_RST_INLINE = re.compile(r":math:`(?P<math>[^`]+)`|``(?P<literal>[^`]+)``")


def rst_inline(value: str) -> str:
    """A line of reStructuredText (a module docstring's title) as MyST: ``:math:`x``` becomes
    ``$x$``, a literal becomes a code span, everything else is escaped text."""
    out, position = [], 0
    for match in _RST_INLINE.finditer(value):
        out.append(_inline_text(value[position:match.start()]))
        out.append(f"${match['math']}$" if match["math"] else code(match["literal"]))
        position = match.end()
    out.append(_inline_text(value[position:]))
    return "".join(out).strip()


def code(value: Any) -> str:
    """An inline code span that survives backticks inside the value."""
    flat = " ".join(str(value).split())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def fence(value: Any, language: str = "text") -> str:
    """A fenced code block that survives backtick fences inside the value."""
    body = str(value).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"^`{3,}", body, flags=re.M)), default=2)
    ticks = "`" * (longest + 1)
    return f"{ticks}{language}\n{body}\n{ticks}"


def list_table(header: Sequence[str] | None, rows: Iterable[Sequence[str]], *,
               classes: str = "", caption: str = "", widths: str = "auto") -> str:
    """A MyST ``list-table``; a cell may hold several lines of Markdown (indented for it)."""
    lines = [f"::::{{list-table}} {caption}".rstrip(),
             f":header-rows: {0 if header is None else 1}", f":widths: {widths}"]
    if classes:
        lines.append(f":class: {classes}")
    lines.append("")
    for row in [*([list(header)] if header is not None else []), *map(list, rows)]:
        for index, cell in enumerate(row):
            first, *rest = (str(cell) if str(cell).strip() else "\u00a0").split("\n")
            lines.append(("* - " if index == 0 else "  - ") + first)
            lines.extend(("    " + line) if line.strip() else "" for line in rest)
    lines.append("::::")
    return "\n".join(lines)


def table_shape_problems(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    """How a data table's rows disagree with its header (an empty list: every row has one
    cell per header cell). docutils drops a list-table whose rows differ in length, with
    only a warning, so a mis-shaped table must be caught before it becomes markup."""
    return [f"row {number} has {len(row)} cells" for number, row in enumerate(rows, 1)
            if len(row) != len(header)]


def data_table(table: Mapping[str, Any], *, caption: str = "") -> str:
    """A table a check or an experiment reported (``{"header": [...], "rows": [[...]]}``),
    every cell and the caption as data. A mis-shaped one is not rendered as a table: a
    warning names it (a strict build fails on it) and the page shows an error box with the
    raw cells."""
    header, rows = list(table.get("header") or []), list(table.get("rows") or [])
    problems = table_shape_problems(header, rows)
    if not problems:
        return list_table([text(h) for h in header], map(text_row, rows), classes="tt-data",
                          caption=text(caption))
    message = (f"the table {caption or '(untitled)'} is mis-shaped: its header has "
               f"{len(header)} cells but {'; '.join(problems)}")
    logger.warning("theorems_site: %s", message, type="theorems", subtype="table")
    raw = "\n".join(" | ".join(str(c) for c in row) for row in [header, *rows])
    return "\n".join([":::{admonition} Mis-shaped table: not shown as a table",
                      ":class: error", "", text(message) + ".", "", fence(raw), ":::"])


def interval_rows(view: ClaimView) -> list[list[str]]:
    """One row per interval a check reported (contract 1): its estimate and interval at its
    confidence level, the threshold it is compared with, the trials and the method."""
    rows = []
    for check, interval in view.intervals:
        decided = interval.get("decided")
        level = interval.get("level")
        at = f" at {number(100 * float(level))}%" if level is not None else ""
        rows.append([code(check), text(interval.get("name", "—")),
                     f"{number(interval.get('estimate'))} \\[{number(interval.get('low'))}, "
                     f"{number(interval.get('high'))}\\]{at}",
                     number(interval.get("threshold")), number(interval.get("trials")),
                     text(interval.get("method") or "—"),
                     "—" if decided is None else ("yes" if decided else "**no**")])
    return rows


def reason(message: str | None, outcome: str) -> str:
    """A skipped or inconclusive check's message as text, without a leading ``outcome:``
    (the plugin's inconclusive reasons start with it; the page shows the outcome already)."""
    body = (message or "").strip()
    if body.lower().startswith(f"{outcome}:"):
        body = body[len(outcome) + 1:].strip()
    return text(body)


def ref(claim_id: str, label: str | None = None) -> str:
    """A cross-reference to a claim's section (its label is its id)."""
    return f"{{ref}}`{text(label or claim_id)} <{claim_id}>`"


def margin_or_ratio(summary: dict) -> str:
    parts = []
    if summary.get("worst_margin") is not None:
        parts.append(f"margin {number(summary['worst_margin'])}")
    if summary.get("max_ratio") is not None:
        parts.append(f"ratio {number(summary['max_ratio'])}")
    return " · ".join(parts) or "—"


def extreme(check: dict, key: str) -> str:
    return number((check.get(key) or {}).get("worst"))


def short_sha(sha: str | None) -> str:
    return sha[:10] if sha else "unknown"


# --- pages -----------------------------------------------------------------------------------

def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters.update(number=number, seconds=seconds, text=text, code=code, fence=fence,
                       sha=short_sha, rst_inline=rst_inline, check_row=check_row, text_row=text_row,
                       claim_nav_row=claim_nav_row, claim_row=claim_row, reason=reason)
    env.globals.update(
        list_table=list_table, ref=ref, area_docname=area_docname, metric_rows=metric_rows,
        area_rows=area_rows, tier_rows=tier_rows, run_rows=run_rows, config_rows=config_rows,
        experiment_rows=experiment_rows, experiment_anchor=experiment_anchor,
        result_metric_rows=result_metric_rows,
        result_meta_rows=result_meta_rows, vocabulary_rows=vocabulary_rows,
        data_table=data_table, interval_rows=interval_rows,
        STATUSES=STATUSES, TAGS=TAGS, STALENESS=STALENESS, STATUS_MEANING=STATUS_MEANING,
        REFUTATION_SCOPES=REFUTATION_SCOPES, LEGEND=LEGEND, COLOURS=COLOURS,
        TIER_MEANING=TIER_MEANING, SCOPE_MEANING=SCOPE_MEANING, audit_scope=audit.scope,
        ALLOWED_AXIOMS=sorted(proving.ALLOWED_AXIOMS), proof_rows=proof_rows,
        SCALING_STUDY_OF=SCALING_STUDY_OF)
    return env


def proof_rows() -> list[list[str]]:
    """The reviewed proved checks (``proofs/REVIEWED.json``), one row each: claim, tool,
    file, theorem and what the proof covers."""
    return [[code(entry["claim"]), text(entry["tool"]), code(entry["file"]),
             code(entry["theorem"]), f"{{scope}}`{entry['scope']['covers']}`"]
            for entry in proof_statements.load_reviewed()]


def constructions(site: SiteData) -> dict[str, tuple[ConstructionView, bool]]:
    """Claim id -> (its construction, whether this is the first claim documenting it).

    Autodoc indexes an object once; later claims built on the same construction show the
    same entry with ``:no-index:``, so cross-references resolve to the first one.
    """
    seen: set[str] = set()
    out = {}
    for view in site.claims:
        construction = ConstructionView.of(view.claim)
        if construction is not None:
            out[view.id] = (construction, construction.dotted not in seen)
            seen.add(construction.dotted)
    return out


def pages(site: SiteData, *, graph_svg: str, graph_renderer: str,
          figures: dict[str, str], graph_data: str = "[]",
          proofs: dict[str, str] | None = None) -> dict[str, str]:
    """Docname -> MyST source, for every page of the site.

    ``figures`` maps a figure's path in the evidence or results to its path in the source
    tree (absolute from the source root, as Sphinx reads ``/...``); ``proofs`` maps a proof
    file's repository path to its copy there (the claim page links it for download).
    """
    env = environment()
    common = {"site": site, "figures": figures, "constructions": constructions(site),
              "proofs": proofs or {}}
    out = {"index": env.get_template("index.md.jinja").render(**common),
           "graph": env.get_template("graph.md.jinja").render(
               **common, svg=graph_svg, renderer=graph_renderer, graph_data=graph_data),
           "empirics": env.get_template("empirics.md.jinja").render(**common),
           "reading": env.get_template("reading.md.jinja").render(**common),
           "trust": env.get_template("trust.md.jinja").render(**common)}
    area_template = env.get_template("area.md.jinja")
    for area in site.areas:
        title, intro = area_intro(area)
        out[area_docname(area)] = area_template.render(
            **common, area=area, title=title, intro=intro, claims=site.claims_in(area),
            sections=area_sections(area, site, figures))
    return out


def area_rows(site: SiteData) -> list[list[str]]:
    rows = []
    for area in site.areas:
        claims = site.claims_in(area)
        counts = site.status_counts(claims)
        rows.append([f"{{doc}}`{area} </{area_docname(area)}>`", number(len(claims)),
                     *(number(counts[s]) for s in STATUSES)])
    return rows


def tier_rows(site: SiteData) -> list[list[str]]:
    return [[f"{{tier}}`{row['tier']}`", *(number(row[k]) for k in
                                          ("claims", "checks", "passed", "failed",
                                           "inconclusive", "skipped", "examples"))]
            for row in site.tier_counts()]


def run_rows(run: dict) -> list[list[str]]:
    """The evidence run's metadata, one row per field."""
    def get(key: str) -> str:
        value = run.get(key)
        return "—" if value is None else text(value)

    seed = run.get("hypothesis_seed")
    if seed is None:
        seed = "derandomized" if run.get("hypothesis_profile") == "ci" else "random"
    return [["git commit", code(short_sha(run.get("git_sha")))
             + (" (with uncommitted changes)" if run.get("git_dirty") else "")],
            ["started", get("started")], ["finished", get("finished")],
            ["Hypothesis profile", get("hypothesis_profile")], ["Hypothesis seed", text(seed)],
            ["Python", get("python")], ["torch", get("torch")], ["NumPy", get("numpy")],
            ["Hypothesis", get("hypothesis")], ["platform", get("platform")],
            ["device", get("device")], ["pytest-xdist workers", get("workers")]]


def check_row(check: dict) -> list[str]:
    """A row of a claim's evidence table: one check."""
    if check["outcome"] == "failed" or check.get("counterexample"):
        falsified = "shown above"  # in full width, above the table
    elif check["outcome"] in ("skipped", "inconclusive") and check.get("message"):
        falsified = f"{check['outcome']}: {reason(check['message'], check['outcome'])}"
    else:
        falsified = "—"
    return [code(check["name"]), f"{{tier}}`{check['tier']}`",
            f"{{outcome}}`{check['outcome']}`", number(check["examples"]),
            extreme(check, "margin"), extreme(check, "ratio"), seconds(check["duration"]),
            falsified]


def metric_rows(view: ClaimView) -> list[list[str]]:
    return [[code(check["name"]), text(name), number(metric["last"]), number(metric["worst"]),
             text(metric.get("worse", "higher"))]
            for check in view.checks for name, metric in check.get("metrics", {}).items()]


def cell(value: Any) -> str:
    """A data value in a table: numbers formatted (non-finite ones as the evidence writes
    them), anything else as escaped text."""
    if value is None or isinstance(value, (bool, int, float)) or value in ("inf", "-inf", "nan"):
        return number(value)
    return text(value)


def text_row(row: Sequence[Any]) -> list[str]:
    return [cell(value) for value in row]


def result_metric_rows(result: ResultView) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a result's metrics; an aggregate adds its spread over seeds."""
    metrics = result.data.get("metrics") or {}
    spread = result.data.get("spread") or {}
    if not spread:
        return ["metric", "value"], [[text(k), cell(v)] for k, v in metrics.items()]
    return (["metric", "mean", "std", "sem", "seeds"],
            [[text(k), cell(v), *(cell((spread.get(k) or {}).get(s)) for s in ("std", "sem", "n"))]
             for k, v in metrics.items()])


def config_rows(configs: dict[str, dict]) -> list[list[str]]:
    """One row per config key, one column per config (a key a config lacks shows '—')."""
    keys = sorted({key for config in configs.values() for key in config})
    return [[code(key), *(code(config[key]) if key in config else "—"
                          for config in configs.values())] for key in keys]


def experiment_rows(site: SiteData) -> list[list[str]]:
    """The empirics page's overview: each experiment, its claims and its results' markers."""
    rows = []
    for experiment in site.experiments:
        claims = ", ".join(ref(c) if c in site.by_id else code(c) for c in experiment.claims)
        results = " ".join(f"{text(r.label)} {{staleness}}`{r.staleness}`"
                           for r in experiment.results) or "none yet"
        rows.append([f"{{ref}}`{text(experiment.name)} <{experiment.slug}>`", claims or "—",
                     results])
    return rows


def result_meta_rows(result: ResultView) -> list[list[str]]:
    record = result.record
    device = record.get("device") or result.data.get("device", "—")
    if record.get("device_name") and record.get("device_name") != device:
        device = f"{device} ({record['device_name']})"
    return [["device", text(device)], ["date", text(record.get("date", "—"))],
            ["seeds" if len(result.seeds) > 1 else "seed",
             ", ".join(number(seed) for seed in result.seeds)],
            ["git commit", code(short_sha(record.get("git_sha")))],
            ["wall time", seconds(record.get("wall_time"))],
            ["torch / Python", text(f"{record.get('torch', '—')} / {record.get('python', '—')}")],
            ["code", f"{{staleness}}`{result.staleness}` {text(STALENESS[result.staleness])}"],
            ["file", code(f"{result.path.parent.name}/{result.path.name}")]]


def vocabulary_rows(kind: str, meanings: dict[str, str]) -> list[list[str]]:
    return [[f"{{{kind}}}`{value}`", text(meaning)] for value, meaning in meanings.items()]


def claim_nav_row(view: ClaimView) -> list[str]:
    return [ref(view.id), f"{{status}}`{view.status}`", view.claim.title]


def dependency_cell(view: ClaimView) -> str:
    """The second line of the index's status cell: whether the claim is verified with all it rests
    on (theorems.claims.verified_through_dependencies)."""
    if view.through:
        return "all verified"
    if view.status == "verified":
        return "rests on unverified"
    return "—"


def claim_row(view: ClaimView) -> list[str]:
    """A row of the index's claims table: the id links to the claim, the title below it; the
    status chip has whether the claim is verified with all its dependencies below it (one
    column fewer, so the table fits the page)."""
    area = view.claim.area
    return [f"{ref(view.id)}\n\n{view.claim.title}", f"{{doc}}`{area} </{area_docname(area)}>`",
            f"{{status}}`{view.status}`\n\n{dependency_cell(view)}",
            " ".join(f"{{tier}}`{t}`" for t in view.tiers) or "—",
            margin_or_ratio(view.summary), " ".join(f"{{tag}}`{t}`" for t in view.claim.tags)]
