"""The README's tables, generated: claims by area and status, and the papers the claims cite.

::

    python -m theorems.readme [--evidence build/evidence.json] [--check]

rewrites the block between ``<!-- claims:begin -->`` and ``<!-- claims:end -->`` in README.md
from the registry (claims per area) and a *complete* evidence file (statuses per area), and the
block between ``<!-- papers:begin -->`` and ``<!-- papers:end -->`` from the registry alone
(one row per paper the claims' sources cite, with its areas and claims), so the README never
states a count by hand. ``--check`` writes nothing and exits 1 when a block differs;
``tests/test_readme.py`` compares the papers block always and the claims block whenever a
complete ``build/evidence.json`` exists (CI's set-up runs ``verify`` first). Without a complete
evidence file only the papers block is written, and the command exits 2.
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
PAPERS_BEGIN, PAPERS_END = "<!-- papers:begin -->", "<!-- papers:end -->"
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


def papers_block() -> str:
    """The markdown between the papers markers: every paper (arXiv or OpenReview id) that a
    claim's source cites, with the first reference text the registry gives it, the areas of
    the claims citing it and their number, ordered by id."""
    registry = load_claims()
    papers: dict[str, dict] = {}
    for claim in registry:
        for source in claim.sources:
            paper = papers.setdefault(source.label, {"source": source, "claims": set(),
                                                     "areas": set()})
            paper["claims"].add(claim.id)
            paper["areas"].add(claim.area)
    lines = [f"{len(papers)} papers are cited by the claims' sources, one row per arXiv or "
             "OpenReview id: the seed papers, and the papers a claim cites for a lemma it "
             "uses.", "",
             "| paper | id | areas | claims |", "|---|---|---|---|"]
    for label in sorted(papers, key=lambda label: (label.startswith("OpenReview"), label)):
        paper = papers[label]
        source = paper["source"]
        reference = (source.ref or source.where).replace("|", "/")
        areas = ", ".join(f"`{area}`" for area in sorted(paper["areas"]))
        lines.append(f"| {reference} | [{label}]({source.url}) | {areas} | "
                     f"{len(paper['claims'])} |")
    return "\n".join(lines)


def current_block(text: str, begin: str = BEGIN, end: str = END) -> str:
    """What README ``text`` holds between the markers (``ValueError`` without them)."""
    try:
        start = text.index(begin) + len(begin)
        stop = text.index(end, start)
    except ValueError:
        raise ValueError(f"the README has no {begin} ... {end} block") from None
    return text[start:stop].strip("\n")


def replace_block(text: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    """``text`` with ``block`` between the markers."""
    current_block(text, begin, end)  # the markers exist
    start = text.index(begin) + len(begin)
    return text[:start] + "\n" + block + "\n" + text[text.index(end, start):]


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
                        help="exit 1 if a block of the README is out of date; write nothing")
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    blocks = {"papers": (papers_block(), PAPERS_BEGIN, PAPERS_END)}
    evidence = complete_evidence(args.evidence)
    if evidence is not None:
        blocks["claims"] = (claims_block(evidence), BEGIN, END)
    stale = [name for name, (block, begin, end) in blocks.items()
             if current_block(text, begin, end) != block]
    if args.check and stale:
        print(f"readme: the {' and '.join(stale)} table(s) are out of date; run "
              "`python -m theorems.readme`", file=sys.stderr)
        return 1
    for name in stale:
        block, begin, end = blocks[name]
        text = replace_block(text, block, begin, end)
        print(f"readme: wrote the {name} table to {args.readme}")
    if stale and not args.check:
        args.readme.write_text(text)
    if evidence is None:
        print(f"readme: {args.evidence} is missing or partial, so the claims table was not "
              "checked; run `python -m theorems verify`", file=sys.stderr)
        return 2
    if not stale:
        print("readme: the tables are current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
