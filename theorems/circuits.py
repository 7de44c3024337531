"""``python -m theorems.circuits``: the circuit cases as a benchmark in MIB's and InterpBench's
formats, and the scorer of MIB-format submissions against the exact ground truth.

* ``write OUT [--size full] [--case ID ...]`` writes every case (or the named ones) under
  ``OUT/mib/<case>_<size>/`` and ``OUT/interpbench/<case>_<size>/``
  (:mod:`empirics.circuit_formats`).
* ``score DIR [--json FILE]`` scores a submission, one ``<case>_<size>`` folder or a folder of
  them (:mod:`empirics.circuit_benchmark`): AUROC, precision at the circuit's size, CPR and
  CMD, beside the exact circuit's own CPR and CMD.

Bad input (an unknown case, a malformed file, a circuit over its budget) ends with exit
status 2 and one line naming what is wrong. The work is done in :mod:`empirics`; this module
only parses the command line (it sits in :mod:`theorems`, above both, as the CLIs do).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence


def _number(value: object) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def cmd_write(args: argparse.Namespace) -> int:
    from constructions.circuits import all_cases
    from empirics.circuit_formats import case_by_name, write_case

    names = args.case or list(all_cases())
    cases = [case_by_name(name) for name in names]
    for case in cases:
        folders = write_case(case, args.out, args.size, batch=args.batch, seed=args.seed)
        print(f"{case.name}: {folders['mib']}  {folders['interpbench']}")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from empirics.circuit_benchmark import HEADER, score_submission, table

    results = score_submission(args.dir, batch=args.batch, seed=args.seed)
    rows = [[_number(v) for v in row] for row in table(results)]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADER)]
    print("  ".join(h.ljust(w) for h, w in zip(HEADER, widths, strict=True)))
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
    extra = sum(r["extra"] for r in results)
    if extra:
        print(f"note: {extra} scored or selected MLP entries were ignored: these models have "
              f"no MLPs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="python -m theorems.circuits", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = main.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="write the cases in MIB's and InterpBench's formats")
    write.add_argument("out")
    write.add_argument("--size", default="full", choices=("smoke", "full"))
    write.add_argument("--case", action="append", help="a case id (repeatable; default all)")
    score = sub.add_parser("score", help="score an MIB-format submission")
    score.add_argument("dir")
    score.add_argument("--json", help="also write every score as JSON to this file")
    for command in (write, score):
        command.add_argument("--batch", type=int, default=64,
                             help="prompts per case (the published harness's 64)")
        command.add_argument("--seed", type=int, default=0)
    write.set_defaults(run=cmd_write)
    score.set_defaults(run=cmd_score)
    return main


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
