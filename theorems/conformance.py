"""``python -m theorems.conformance``: which hook means what, per tool and version, measured
against the exact activations of the exportable circuit constructions
(:mod:`empirics.conformance`).

``python -m theorems.conformance [--case ID ...] [--markdown FILE] [--json FILE]`` prints one
row per tool, hook and meaning (the worst deviation over the cases), and can write the same
table as Markdown (what the docs include) or JSON. A maintainer of TransformerLens or nnsight
can run it in their own CI: a tool that is not installed is listed as not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def markdown(rows: list[list[str]], header: list[str]) -> str:
    """A Markdown table (``|`` in cells escaped)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in rows]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from empirics.conformance import HEADER, report, table

    parser = argparse.ArgumentParser(prog="python -m theorems.conformance",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", help="a case id (repeatable; default all)")
    parser.add_argument("--markdown", help="also write the table as Markdown to this file")
    parser.add_argument("--json", help="also write every row as JSON to this file")
    args = parser.parse_args(argv)
    try:
        rows = report(args.case)
    except (ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    cells = table(sorted(rows, key=lambda r: (r["tool"], r["hook"], r["meaning"])))
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(HEADER)]
    for row in [HEADER, *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(cells, HEADER))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
