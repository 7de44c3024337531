"""The README's table of claims, generated: counts by area, and by status from a complete run.

::

    python -m theorems.readme [--evidence build/evidence.json] [--check]

rewrites the block between ``<!-- claims:begin -->`` and ``<!-- claims:end -->`` in README.md
from the registry (claims per area) and a *complete* evidence file (statuses per area), so the
README never states a count by hand. ``--check`` writes nothing and exits 1 when the block
differs; ``tests/test_readme.py`` makes the same comparison whenever a complete
``build/evidence.json`` exists (CI's set-up runs ``verify`` first).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from theorems import evidence_file
from theorems.catalogue import load_claims
from theorems.claims import STATUSES

BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
README = Path("README.md")  # run from the repository root


def claims_block(evidence: Mapping | None) -> str:
    """The markdown between the markers: a table of areas with their claims and, from a
    complete evidence file, how many of them each status holds."""
    registry = load_claims()
    per_area = Counter(claim.area for claim in registry)
    statuses = {} if evidence is None else {cid: record["status"]
                                            for cid, record in evidence["claims"].items()}
    shown = [s for s in STATUSES if any(v == s for v in statuses.values())]
    header = ["area", "claims", *shown]
    rows = []
    for area in sorted(per_area):
        counts = Counter(statuses.get(c.id) for c in registry if c.area == area)
        rows.append([f"`{area}`", str(per_area[area]), *(str(counts[s]) for s in shown)])
    total = Counter(statuses.values())
    rows.append(["**all**", f"**{len(registry)}**", *(f"**{total[s]}**" for s in shown)])
    lines = [f"{len(registry)} claims in {len(per_area)} areas"
             + ("; a complete `verify` at the ci profile gives "
                + ", ".join(f"{total[s]} {s}" for s in shown) + "." if shown else "."),
             "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def current_block(text: str) -> str:
    """What README ``text`` holds between the markers (``ValueError`` without them)."""
    try:
        start = text.index(BEGIN) + len(BEGIN)
        end = text.index(END, start)
    except ValueError:
        raise ValueError(f"the README has no {BEGIN} ... {END} block") from None
    return text[start:end].strip("\n")


def complete_evidence(path: Path) -> dict | None:
    """The evidence at ``path`` if it exists and is complete (a full ``verify``), else None."""
    if not path.exists():
        return None
    data = evidence_file.load(path)
    return None if evidence_file.is_partial(data) else data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evidence", type=Path, default=evidence_file.DEFAULT_PATH)
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the README's block is out of date; write nothing")
    args = parser.parse_args(argv)
    evidence = complete_evidence(args.evidence)
    if evidence is None:
        print(f"readme: {args.evidence} is missing or partial; run `python -m theorems verify`",
              file=sys.stderr)
        return 2
    text = args.readme.read_text()
    block = claims_block(evidence)
    if current_block(text) == block:
        print("readme: the claims table is current")
        return 0
    if args.check:
        print("readme: the claims table is out of date; run `python -m theorems.readme`",
              file=sys.stderr)
        return 1
    start = text.index(BEGIN) + len(BEGIN)
    args.readme.write_text(text[:start] + "\n" + block + "\n" + text[text.index(END, start):])
    print(f"readme: wrote the claims table to {args.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
