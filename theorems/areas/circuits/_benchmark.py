r"""The circuits page's benchmark sections (MyST): the cases as a benchmark in MIB's and
InterpBench's formats (how to write them, how to score a submission), the third-party methods'
published scores with what each misses, and the hook-conformance table per tool and version.

The numbers come from published results only: ``circuit-third-party``
(:mod:`empirics.circuit_third_party`), ``circuit-discovery`` (the project's own harness) and
``hook-conformance`` (:mod:`empirics.hook_conformance`), the ``full`` config when there is one;
a section without its result says how to publish it. :mod:`._page` calls
:func:`benchmark_section` and :func:`conformance_section`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from theorems.areas.circuits._myst import _markdown
from theorems.areas.circuits._myst import _table as list_table
from theorems.areas.circuits._myst import published_result as published

THIRD_PARTY = "circuit-third-party"
HARNESS = "circuit-discovery"
CONFORMANCE = "hook-conformance"
MIB = "https://arxiv.org/abs/2504.13151"
INTERPBENCH = "https://arxiv.org/abs/2407.14494"


def _text(value: Any) -> str:
    """A cell as plain MyST text: numbers to 4 significant digits, active characters
    escaped."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return _markdown(str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    return list_table([_text(h) for h in header], [[_text(c) for c in r] for r in rows])


def _provenance(result: Mapping[str, Any], experiment: str) -> str:
    """"published ``full`` result of <experiment>, seed(s) ..., staleness"."""
    seeds = result.get("seeds") or [result.get("seed", 0)]
    text = (f"published `{result.get('config_name')}` result of {{ref}}`{experiment} "
            f"<experiment-{experiment}>`, seed{'s' if len(seeds) > 1 else ''} "
            f"{', '.join(map(str, seeds))}")
    if "staleness" in result:
        text += f", {{staleness}}`{result['staleness']}`"
    return text


def _unpublished(experiment: str) -> str:
    return (f"No published result of `{experiment}` yet (`python -m empirics run {experiment} "
            f"--config full --out empirics/results`).")


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def short_outcome(outcome: str) -> str:
    """A score row's outcome as the table shows it: a failure by its exception's name (the
    message is in "Where a method misses"), a skip by its reason's first clause; whole
    messages made the table too wide to read."""
    if outcome.startswith("fails: "):
        return f"fails: {outcome.removeprefix('fails: ').split(':')[0]} (see below)"
    if outcome.startswith("skipped, "):
        return outcome.split(":")[0]
    return outcome


def misses(result: Mapping[str, Any] | None) -> list[str]:
    """Sentences (MyST) for the third-party result's methods that did not run or are not exact
    on a case: one per failure, naming the methods and cases it hit (one failure of a package
    hits every case of a kind), then one per inexact score, with its AUROC, precision, CPR and
    CMD beside the exact circuit's."""
    table = (result or {}).get("tables", {}).get("scores")
    if not table:
        return []
    failures: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    inexact = []
    for row in (dict(zip(table["header"], r, strict=True)) for r in table["rows"]):
        case = row["case"] if row["variant"] == "-" else f"{row['case']}-{row['variant']}"
        outcome = str(row["outcome"])
        if outcome.startswith(("skipped", "not run")):
            continue  # a case the tool cannot load, or a missing tool: in the tables above
        if outcome != "scored":
            methods, cases = failures.setdefault((row["implementation"], outcome), ([], []))
            methods += [row["method"]] if row["method"] not in methods else []
            cases += [case] if case not in cases else []
            continue
        auroc, precision = _number(row["AUROC"]), _number(row["precision@|C|"])
        if auroc < 1 or precision < 1:
            inexact.append(f"* {_text(row['method'])} ({_text(row['implementation'])}) on "
                           f"`{case}` scores AUROC {_text(auroc)}, precision "
                           f"{_text(precision)} at the circuit's size, CPR "
                           f"{_text(row['CPR'])} (the exact circuit's "
                           f"{_text(row['exact CPR'])}), CMD {_text(row['CMD'])} (exact "
                           f"{_text(row['exact CMD'])}).")
    return [f"* {', '.join(map(_text, methods))} ({_text(implementation)}) "
            f"{'fails' if len(methods) == 1 else 'fail'} on "
            f"{', '.join(f'`{c}`' for c in cases)}: {_text(outcome.removeprefix('fails: '))}"
            for (implementation, outcome), (methods, cases) in failures.items()] + inexact


def harness_misses(result: Mapping[str, Any] | None) -> list[str]:
    """The same for the project's own harness (``circuit-discovery``): AUROC or precision
    below 1."""
    table = (result or {}).get("tables", {}).get("scores")
    if not table:
        return []
    lines = []
    for row in (dict(zip(table["header"], r, strict=True)) for r in table["rows"]):
        auroc = _number(row.get("ROC AUC"))
        precision = _number(row.get("precision@|C|", 1.0))
        if auroc < 1 or precision < 1:
            lines.append(f"* {_text(row['method'])} (this project's harness) on "
                         f"`{row['case']}` scores AUROC {_text(auroc)}, precision "
                         f"{_text(precision)} at the circuit's size.")
    return lines


def benchmark_section(results: Sequence[Mapping[str, Any]]) -> str:
    """How to use the cases as a benchmark, and the third-party scores (MyST)."""
    lines = [
        "## Circuit benchmark", "",
        "Every case below is a benchmark task with an exact ground-truth circuit, written in "
        f"the formats of [MIB]({MIB})'s circuit track (edge names `a0.h0->a1.h0<k>`, graph "
        f"JSON and `.pt`) and of [InterpBench]({INTERPBENCH}) (`edges.pkl`, the "
        "TransformerLens weights and config):", "",
        "```bash",
        "python -m theorems.circuits write OUT               # every case, both formats "
        "(--size smoke|full, --case ID)",
        "python -m theorems.circuits score SUBMISSION        # an MIB-format submission",
        "```", "",
        "`write` puts each case under `OUT/mib/<case>_<size>/` (`ground_truth.json` and "
        "`ground_truth.pt` in MIB's graph format, `model.pth`, the prompts `prompts.pt`, and "
        "`case.json`: corruption, metric, graph and roles) and `OUT/interpbench/<case>_<size>/` "
        "(`edges.pkl`, `ll_model.pth`, `ll_model_cfg.pkl`, `meta.json`); the formats are "
        "described in `empirics.circuit_formats`. A submission is MIB's: a folder "
        "`<case>_<size>` per task holding one file of edge (or node) scores, or nine binary "
        "circuits at 0.1 to 50 % of the edges. `score` gives AUROC, precision at the "
        "circuit's size, MIB's CPR and CMD, and the exact circuit's own CPR and CMD (what "
        "the circuit's size allows at MIB's percentages); `empirics.circuit_benchmark` "
        "defines each, and `empirics.circuit_discovery.score_edges` scores edge scores from "
        "Python.", "",
        "### Third-party methods", ""]
    result = published(results, THIRD_PARTY)
    if result is None:
        lines += [_unpublished(THIRD_PARTY), ""]
    else:
        lines += [
            "Two independent implementations, each in its own virtual environment: MIB's "
            "EAP-IG code as circuitkit 0.2.0 vendors it, and auto-circuit 1.0.1 "
            "(circuitkit's ACDC backend is a vendored copy of auto-circuit, so it is not run "
            "as a third). circuitkit's EAP-IG fails on every model with one head per layer: "
            "its `gradient_hook` squeezes the head axis (`s.squeeze(1)`) and the add into "
            "the score matrix fails on shapes; methods marked `+ 1-head fix` are the same "
            "with a local workaround (the graph answers an index for the one-element head "
            "slice; the package is not changed), run only on those cases "
            f"({_provenance(result, THIRD_PARTY)}, batch "
            f"{_text(result.get('config', {}).get('batch'))}):", ""]
        for name in ("scores", "runs"):
            table = result.get("tables", {}).get(name)
            if table:
                rows = table["rows"]
                if name == "scores" and "outcome" in table["header"]:
                    at = table["header"].index("outcome")
                    rows = [[*r[:at], short_outcome(str(r[at])), *r[at + 1:]] for r in rows]
                lines += [_table(table["header"], rows), ""]
    lines += ["### Where a method misses", ""]
    found = misses(result) + harness_misses(published(results, HARNESS))
    lines += found or ["Every published method recovers every circuit exactly (AUROC and "
                       "precision 1)."]
    return "\n".join([*lines, ""])


def conformance_rows(table: Mapping[str, Any]) -> list[list[Any]]:
    """Per tool and version: hooks run, hooks not holding what their name promises, and how
    many fall in each band."""
    bands = ("float64", "float32", "drift", "unmatched")
    counts: dict[tuple[str, str], list[int]] = {}
    for row in (dict(zip(table["header"], r, strict=True)) for r in table["rows"]):
        if row["band"] == "not run":
            continue
        seen = counts.setdefault((row["tool"], row["version"]), [0] * (2 + len(bands)))
        seen[0] += 1
        seen[1] += row["as named"] != "yes"
        if row["band"] in bands:
            seen[2 + bands.index(row["band"])] += 1
    return [[tool, version, *values] for (tool, version), values in sorted(counts.items())]


def conformance_section(results: Sequence[Mapping[str, Any]]) -> str:
    """The hook-conformance table per tool and version (MyST)."""
    lines = [
        "## Hook conformance", "",
        "What each hook of each tool holds, measured against the exact activations of the "
        "exportable cases (two `longdouble` evaluations: the construction's convention and "
        "the TransformerLens export's). A hook *means* the exact quantity it matches best; "
        "*as named* says whether that is what its name promises; *r / u64* is the worst "
        "relative deviation over the cases in units of float64's $u = 2^{-53}$, banded "
        "*float64* ($\\le 2^{10}u$), *float32* ($\\le 2^{10}u_{32}$), *drift* (larger) or "
        "*unmatched*. A maintainer can run it in their own CI:", "",
        "```bash", "python -m theorems.conformance [--case ID] [--markdown FILE] [--json FILE]",
        "```", ""]
    result = published(results, CONFORMANCE)
    table = (result or {}).get("tables", {}).get("hooks")
    if not table:
        return "\n".join([*lines, _unpublished(CONFORMANCE), ""])
    lines += [f"Per tool and version ({_provenance(result, CONFORMANCE)}):", "",
              _table(["tool", "version", "hooks", "not as named", "float64", "float32",
                      "drift", "unmatched"], conformance_rows(table)), ""]
    rows = [dict(zip(table["header"], r, strict=True)) for r in table["rows"]]
    odd = [r for r in rows if r["band"] not in ("float64", "not run") or r["as named"] != "yes"]
    if odd:
        lines += ["Hooks that do not hold what their name promises, or drift:", "",
                  _table(table["header"], [[r[h] for h in table["header"]] for r in odd]), ""]
    skipped = [r for r in rows if r["band"] == "not run"]
    if skipped:
        lines += ["Not run: " + "; ".join(f"{_text(r['tool'])} ({_text(r['meaning'])})"
                                          for r in skipped) + ".", ""]
    runs = result.get("tables", {}).get("runs")
    if runs:
        lines += ["Environments:", "", _table(runs["header"], runs["rows"]), ""]
    lines += ["Every hook:", "", _table(table["header"], table["rows"]), ""]
    return "\n".join(lines)
