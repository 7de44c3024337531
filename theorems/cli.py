"""``python -m theorems``: list the claims, show one, verify them all, export the evidence as a
dataset, build the docs."""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from pathlib import Path

from theorems import evidence_file as ev
from theorems.catalogue import load_claims
from theorems.claims import (
    REFUTATION_SCOPES,
    VERIFIED_THROUGH,
    Claim,
    verified_through_dependencies,
)

PACKAGE_DIR = Path(__file__).resolve().parent
STATUS_MARK = {"verified": "✔ verified", "refuted": "✘ refuted", "failing": "! FAILING",
               "unchecked": "· unchecked", "inconclusive": "? inconclusive"}


def _format_number(value) -> str:
    if value is None:
        return "-"
    value = ev.as_float(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.4g}"


def cmd_list(args: argparse.Namespace) -> int:
    registry = load_claims()
    if args.json:
        print(json.dumps({"claims": [c.as_dict() for c in registry]}, indent=1))
        return 0
    for claim in registry:
        source = claim.sources[0]
        print(f"{claim.id:<44} [{claim.tags}] {claim.kind:<12} {source.label} "
              f"{source.where}")
        print(f"    {claim.title}")
        if claim.construction:
            print(f"    construction: {claim.construction}")
        if claim.refutes:
            print(f"    refutes: {claim.refutes}")
    print(f"\n{len(registry)} claims in {len(registry.areas())} areas")
    return 0


def _describe(claim: Claim) -> str:
    lines = [claim.id, "=" * len(claim.id), claim.title, "", "Statement:",
             textwrap.indent(textwrap.fill(claim.statement, 96), "  "), "", "Sources:"]
    for s in claim.sources:
        lines.append(f"  [{s.tag}] {s.ref} {s.label}, {s.where} ({s.url})")
        if not s.verified:
            lines.append(f"      locator unverified: {s.doubt}")
    if claim.construction:
        lines.append(f"Construction: {claim.construction}")
    if claim.depends_on:
        lines.append(f"Depends on: {', '.join(claim.depends_on)}")
    if claim.correction:
        lines += ["", f"Refutes: {claim.refutes} ({REFUTATION_SCOPES[claim.refutes]})",
                  "", "Corrected statement:",
                  textwrap.indent(textwrap.fill(claim.correction, 96), "  ")]
    if claim.notes:
        lines += ["", "Notes:", textwrap.indent(textwrap.fill(claim.notes, 96), "  ")]
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    registry = load_claims()
    if args.id not in registry:
        close = [c.id for c in registry if args.id in c.id]
        print(f"unknown claim {args.id!r}" + (f"; did you mean {', '.join(close)}?" if close
                                              else ""), file=sys.stderr)
        return 2
    print(_describe(registry[args.id]))
    path = Path(args.evidence)
    if not path.exists():
        print(f"\nNo evidence yet ({path} is missing): run `python -m theorems verify`.")
        return 0
    record = ev.load(path)["claims"].get(args.id)
    if record is None:
        print(f"\nThe last run ({path}) did not check this claim.")
        return 0
    print(f"\nStatus: {record['status']}  (from {path})")
    for check in record["checks"]:
        margin = _format_number((check["margin"] or {}).get("worst"))
        ratio = _format_number((check["ratio"] or {}).get("worst"))
        print(f"  {check['outcome']:<7} {check['tier']:<10} {check['name']:<50} "
              f"examples={check['examples']} worst_margin={margin} max_ratio={ratio} "
              f"{check['duration']:.2f}s")
        for name, metric in check["metrics"].items():
            print(f"      {name} = {_format_number(metric['last'])} "
                  f"(worst {_format_number(metric['worst'])})")
        for label in ("counterexample", "falsifying_example", "message"):
            if check.get(label):
                print(textwrap.indent(f"{label}: {check[label]}", "      "))
    return 0


def print_table(data: dict) -> None:
    rows = []
    for claim_id, record in data["claims"].items():
        s = record["summary"]
        rows.append((STATUS_MARK[record["status"]], claim_id, ",".join(s["tiers"]) or "-",
                     str(s["examples"]), _format_number(s["worst_margin"]),
                     f"{s['duration']:.1f}s"))
    header = ("status", "claim", "tiers", "examples", "worst margin", "time")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    counts = {}
    for record in data["claims"].values():
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    statuses = {cid: record["status"] for cid, record in data["claims"].items()}
    through = verified_through_dependencies(load_claims(), statuses)
    print("\n" + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
          + f"; {sum(through.values())} {VERIFIED_THROUGH}")


def cmd_verify(args: argparse.Namespace) -> int:
    from theorems.verify import verify

    report = verify(args.out, profile=args.profile, keyword=args.k, jobs=args.jobs,
                    slow=args.slow)
    if report.data is None:
        print(f"verify: no evidence was written (pytest exit code {report.returncode})",
              file=sys.stderr)
        return report.returncode
    print()
    print_table(report.data)
    from empirics.census import census, summary_line

    print(summary_line(census()))
    if ev.is_partial(report.data):
        print(f"partial run ({report.data['run'].get('selection')}): evidence written to "
              f"{report.out}")
    for problem in report.problems:
        print(f"inconsistent: {problem}", file=sys.stderr)
    for warning in report.dependency_warnings:
        print(f"dependency (derived from the checks' calls): {warning}", file=sys.stderr)
    for label, claims in (("failing", report.failing), ("unchecked", report.unchecked)):
        if claims:
            print(f"\n{len(claims)} {label}: {', '.join(claims)}", file=sys.stderr)
    return 0 if report.ok else 1


def cmd_export(args: argparse.Namespace) -> int:
    from theorems.dataset import export

    path = Path(args.evidence)
    if not path.exists():
        print(f"export: {path} is missing: run `python -m theorems verify` first",
              file=sys.stderr)
        return 2
    try:
        files = export(args.dir, path, previous=args.previous)
    except ValueError as error:
        print(f"export: {error}", file=sys.stderr)
        return 1
    for file in files:
        print(file)
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    try:
        from theorems import site
    except ImportError as error:  # the docs extra is not installed
        print(f"docs: {error}. Install the docs extra: pip install -e '.[docs]'", file=sys.stderr)
        return 2
    return site.main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m theorems", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list every claim (runs no checks)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_list)

    p = sub.add_parser("show", help="a claim's statement, source and last evidence")
    p.add_argument("id")
    p.add_argument("--evidence", default=str(ev.DEFAULT_PATH))
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("verify", help="run every check and write the evidence file")
    p.add_argument("--profile", default="ci", choices=("dev", "ci", "thorough"),
                   help="Hypothesis profile (default: ci, derandomized)")
    p.add_argument("-k", default=None, help="only checks matching this pytest -k expression")
    p.add_argument("--jobs", "-n", default="auto",
                   help="pytest-xdist workers ('auto', a number, or 0 for serial)")
    p.add_argument("--slow", action="store_true", help="include checks marked slow")
    p.add_argument("--out", default=None,
                   help=f"evidence file (default: {ev.DEFAULT_PATH}, or {ev.PARTIAL_PATH} "
                        "with -k, so that a subset never replaces what the docs read)")
    p.set_defaults(run=cmd_verify)

    p = sub.add_parser("export", help="write the evidence as a citable dataset bundle")
    p.add_argument("dir", help="folder to write the bundle into")
    p.add_argument("--evidence", default=str(ev.DEFAULT_PATH))
    p.add_argument("--previous", default=None,
                   help="the previous release's evidence.json (or bundle folder): the "
                        "changelog lists the status changes since it")
    p.set_defaults(run=cmd_export)

    p = sub.add_parser("docs", help="generate and build the documentation site")
    p.add_argument("--serve", action="store_true", help="serve build/site on localhost")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--evidence", default=str(ev.DEFAULT_PATH))
    p.add_argument("--out", default="build/site")
    p.set_defaults(run=cmd_docs)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)
