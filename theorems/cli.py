"""``python -m theorems``: list the claims, show one, verify them all, export the evidence as a
dataset, build the docs."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
import textwrap
from pathlib import Path

from theorems import audit
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
               "inconclusive": "? inconclusive", "unchecked": "· unchecked"}


def close_matches(name: str, known: list[str]) -> list[str]:
    """Known names close to a mistyped ``name``: those containing it, then difflib's."""
    containing = [k for k in known if name and name in k]
    similar = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
    return list(dict.fromkeys(containing + similar))[:5]


def _unknown(what: str, name: str, known: list[str]) -> str:
    """One line: ``name`` is not a known ``what``, and the close matches, if any."""
    close = close_matches(name, known)
    return f"unknown {what} {name!r}" + (f"; did you mean {', '.join(close)}?" if close else "")


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
    if scope := audit.scope(claim.id):
        lines += ["", "Scope checked:", textwrap.indent(textwrap.fill(scope, 96), "  ")]
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    registry = load_claims()
    if args.id not in registry:
        print(_unknown("claim", args.id, [c.id for c in registry]), file=sys.stderr)
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
        for line in _proof_lines(check) + _interval_lines(check):
            print(textwrap.indent(line, "      "))
        for label in ("counterexample", "falsifying_example", "message"):
            if check.get(label):
                print(textwrap.indent(f"{label}: {check[label]}", "      "))
    return 0


def _proof_lines(check: dict) -> list[str]:
    """A proof check's tool, theorem, trust base and scope, as far as its record has them. A
    skipped proof (its tool is missing) says so and why: it is never shown as proved."""
    proof = check.get("proof")
    if check.get("tier") != "proved" and not proof:
        return []
    if check["outcome"] == "skipped":
        why = (check.get("message") or "no reason recorded").splitlines()[0]
        return [f"proof: skipped ({why}), not proved"]
    if not proof:
        return [f"proof: {check['outcome']}, but no proof was recorded: not proved"]
    label = "proved" if check["outcome"] == "passed" else f"proof {check['outcome']}, not proved"
    tool = " ".join(str(proof[k]) for k in ("tool", "version") if proof.get(k))
    theorem = f"theorem {proof['theorem']}" if proof.get("theorem") else ""
    where = f"in {proof['source']}" if proof.get("source") else ""
    lines = [f"{label}: " + " ".join(part for part in (tool, theorem, where) if part)]
    trusts = proof.get("trusts")
    if trusts:  # a list of strings (or, in older files, one string)
        lines.append("trusts: " + (trusts if isinstance(trusts, str) else "; ".join(trusts)))
    scope = proof.get("scope")
    if isinstance(scope, dict) and scope.get("covers"):
        lines.append(f"scope: {scope['covers']}"
                     + (f": {scope['text']}" if scope.get("text") else ""))
    return lines


def _interval_lines(check: dict) -> list[str]:
    """A seed- or trial-based check's intervals: estimate, interval, threshold, decided."""
    lines = []
    for interval in check.get("intervals") or ():
        decided = interval.get("decided")
        words = {True: "decided", False: "undecided"}.get(decided, "")
        details = ", ".join(str(interval[k]) + suffix for k, suffix in
                            (("level", " level"), ("trials", " trials"), ("method", ""))
                            if interval.get(k) is not None)
        lines.append(
            f"interval {interval.get('name', '?')}: estimate "
            f"{_format_number(interval.get('estimate'))} in "
            f"[{_format_number(interval.get('low'))}, {_format_number(interval.get('high'))}]"
            + (f" ({details})" if details else "")
            + (f", threshold {_format_number(interval['threshold'])}"
               if interval.get("threshold") is not None else "")
            + (f": {words}" if words else ""))
    return lines


def print_table(data: dict, only: list[str] | None = None) -> None:
    """One row per claim (only those in ``only``, when given), then the counts by status."""
    shown = {cid: record for cid, record in data["claims"].items()
             if only is None or cid in only}
    rows = []
    for claim_id, record in shown.items():
        s = record["summary"]
        rows.append((STATUS_MARK.get(record["status"], record["status"]), claim_id,
                     ",".join(ev.evidence_tiers(record)) or "-", str(s["examples"]),
                     _format_number(s["worst_margin"]), f"{s['duration']:.1f}s"))
    header = ("status", "claim", "tiers", "examples", "worst margin", "time")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    counts = {}
    for record in shown.values():
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    statuses = {cid: record["status"] for cid, record in data["claims"].items()}
    through = verified_through_dependencies(load_claims(), statuses)
    print("\n" + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
          + f"; {sum(through.get(cid, False) for cid in shown)} {VERIFIED_THROUGH}")


def _selected_claims(args: argparse.Namespace) -> list[str] | str:
    """The claim ids that ``--claim`` and ``--area`` name (empty: no selection), or a
    one-line error for an unknown id or area, or for a claim id given to ``-k``."""
    registry = load_claims()
    ids, areas = [c.id for c in registry], registry.areas()
    for claim_id in args.claim:
        if claim_id not in registry:
            return _unknown("claim", claim_id, ids)
    for area in args.area:
        if area not in areas:
            return _unknown("area", area, areas)
    if args.k is not None and args.k.strip() in registry:
        # pytest's -k matches test names, which do not contain the dotted claim ids
        return f"-k matches test names, not claim ids: use --claim {args.k.strip()}"
    return list(dict.fromkeys([*args.claim, *(c.id for c in registry if c.area in args.area)]))


def cmd_verify(args: argparse.Namespace) -> int:
    from theorems.verify import check_keyword, verify

    selected = _selected_claims(args)
    if isinstance(selected, str):
        print(f"verify: {selected}", file=sys.stderr)
        return 2
    if args.k is not None:
        try:
            check_keyword(args.k)
        except ValueError as error:
            print(f"verify: {error}", file=sys.stderr)
            return 2
    report = verify(args.out, profile=args.profile, keyword=args.k, claims=selected,
                    jobs=args.jobs, slow=args.slow, reuse=not args.no_reuse)
    if report.data is None:
        out = report.out
        kept = (f"{out} is unchanged" if out.exists() else f"{out} was not written")
        if report.returncode == 5:  # pytest's "no tests collected": the selection is empty
            print(f"verify: {'-k ' + repr(args.k) if args.k else 'the selection'} selects "
                  f"no check; {kept}", file=sys.stderr)
        else:
            print(f"verify: no evidence was written (pytest exit code {report.returncode}); "
                  f"{kept}", file=sys.stderr)
        return report.returncode
    print()
    if selected or args.k:  # the claims this run selected, not the rest as unchecked
        only = (selected if not args.k else
                [cid for cid, record in report.data["claims"].items() if record["checks"]])
        print_table(report.data, only=only)
    else:
        print_table(report.data)
    from empirics.census import census, summary_line

    print(summary_line(census()))
    reused = report.data["run"].get("reused")
    if reused:
        checks = sum(len(r["checks"]) for r in report.data["claims"].values())
        print(f"reused: the records of {reused['checks']} of these {checks} checks come from "
              f"the run of {reused['started']} (same commit, clean tree, profile and "
              f"versions); the other {checks - reused['checks']} ran now")
    if ev.is_partial(report.data):
        selection = textwrap.shorten(str(report.data["run"].get("selection")), 100,
                                     placeholder=" ...")  # an area's claims: a long list
        print(f"partial run ({selection}): evidence written to {report.out}")
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
    p.add_argument("--claim", action="append", default=[], metavar="ID",
                   help="only the checks of this claim (repeatable; ids as `list` prints them)")
    p.add_argument("--area", action="append", default=[], metavar="NAME",
                   help="only the checks of this area's claims (repeatable)")
    p.add_argument("-k", default=None,
                   help="only checks whose test names match this pytest -k expression")
    p.add_argument("--jobs", "-n", default="auto",
                   help="pytest-xdist workers ('auto', a number, or 0 for serial)")
    p.add_argument("--slow", action="store_true", help="include checks marked slow")
    p.add_argument("--no-reuse", action="store_true",
                   help=f"run every check, even those whose records {ev.PARTIAL_PATH.name} "
                        "beside the output holds from a run of the same commit, clean tree, "
                        "profile and versions")
    p.add_argument("--out", default=None,
                   help=f"evidence file (default: {ev.DEFAULT_PATH}, or {ev.PARTIAL_PATH} "
                        "with a selection, so that a subset never replaces what the docs "
                        "read); replaced only when the run completes")
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


def _silence_stdout() -> None:
    """Send the rest of stdout to /dev/null: its reader has gone (``list | head``), and the
    interpreter's final flush must not raise again (the recipe of Python's signal docs)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        sys.stdout = open(os.devnull, "w")  # left open: the process is ending
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, while it can still be handled
        return code
    except BrokenPipeError:
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left
    except KeyboardInterrupt:
        print(f"{args.command}: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT
