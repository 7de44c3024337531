"""``python -m theorems.bundle CLAIM DIR``: a claim's construction as a model-card bundle.

Builds the claim's construction (``construction="module:builder"``) with the arguments given
as JSON (``--args '[5]' --kwargs '{"max_len": 8}'``), writes it with
:func:`constructions.bundle.write_bundle`, and fills the card from the claim and its record in
the evidence file (``--evidence``, default ``build/evidence.json``; the card says so when the
file or the record is missing). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from theorems import evidence_file as ev
from theorems.claims import load_all


def _json(kind: type, text: str, flag: str):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise SystemExit(f"{flag} is not JSON: {error}") from error
    if not isinstance(value, kind):
        raise SystemExit(f"{flag} must be a JSON {kind.__name__}, got {type(value).__name__}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m theorems.bundle", description=__doc__)
    parser.add_argument("claim", help="claim id, e.g. induction-heads.two-layer-exact")
    parser.add_argument("directory", type=Path, help="where to write the bundle")
    parser.add_argument("--args", default="[]", help="positional builder arguments (JSON list)")
    parser.add_argument("--kwargs", default="{}", help="keyword builder arguments (JSON object)")
    parser.add_argument("--evidence", type=Path, default=ev.DEFAULT_PATH,
                        help="evidence file for the card's status (default: %(default)s)")
    options = parser.parse_args(argv)
    args = _json(list, options.args, "--args")
    kwargs = _json(dict, options.kwargs, "--kwargs")

    from constructions.bundle import write_bundle
    from constructions.recording import build

    registry = load_all()
    ids = {claim.id for claim in registry}
    if options.claim not in ids:
        raise SystemExit(f"unknown claim {options.claim!r} (python -m theorems list names them)")
    claim = registry[options.claim]
    if not claim.construction:
        raise SystemExit(f"claim {claim.id} names no construction to bundle")
    record = None
    if options.evidence.exists():
        record = ev.load(options.evidence)["claims"].get(claim.id)
    model = build(claim.construction, *args, **kwargs)
    write_bundle(model, options.directory, claim=claim.as_dict(), record=record)
    print(f"wrote {options.directory}/ (model.safetensors, config.json, README.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
