"""``python -m theorems.bundle CLAIM DIR``: a claim's construction as a model-card bundle.

Builds the claim's construction (``construction="module:builder"``) with the arguments given
as JSON (``--args '[5]' --kwargs '{"max_len": 8}'``), writes it with
:func:`constructions.interop.bundle.write_bundle`, and fills the card from the claim and its
record in the evidence file (``--evidence``, default ``build/evidence.json``; the card says so
when the file or the record is missing). Nothing is downloaded.

When the claim checks a circuit case (:mod:`theorems.areas.circuits._cases` maps the circuits
claims to their cases), or its construction is a case's model builder or circuit builder
(:func:`constructions.circuits.case_for_builder`), the case's model is bundled; when the
arguments are the case's size arguments, the bundle also holds ``circuit.json``: the ground-truth
circuit in the MIB edge format (:meth:`~constructions.circuits.Circuit.to_mib_json`), and the
card says under which corruption it holds. With other arguments (a non-default temperature,
say) the ground truth is not derived, and the card says that instead.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

from constructions.circuits import case_for_builder
from theorems import evidence_file as ev
from theorems.areas.circuits._cases import case_for_claim
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

    from constructions.interop.bundle import write_bundle
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
    case = case_for_claim(claim.id) or case_for_builder(claim.construction)
    # a claim about a case's circuit bundles the case's model (the circuit is not a module)
    builder = case.builder if case is not None else claim.construction
    model = build(builder, *args, **kwargs)
    write_bundle(model, options.directory, claim=claim.as_dict(), record=record)
    written = "model.safetensors, config.json, README.md"
    if case is not None and _write_circuit(case, options.directory, args, kwargs):
        written += ", circuit.json"
    print(f"wrote {options.directory}/ ({written})")
    return 0


def _write_circuit(case, directory: Path, args: list, kwargs: dict) -> bool:
    """Write ``circuit.json`` and a card section when the builder arguments are the case's size
    arguments; otherwise only the card section saying why there is none."""
    arguments = inspect.signature(case.build).bind(*args, **kwargs).arguments
    sizes = set(inspect.signature(case.circuit).parameters)
    card = directory / "README.md"
    if set(arguments) == sizes:
        circuit = case.circuit(**arguments)
        (directory / "circuit.json").write_text(json.dumps(circuit.to_mib_json(), indent=1)
                                                + "\n")
        edges = ", ".join(f"`{e.name}`" for e in circuit.edges)
        section = (f"\n## Ground-truth circuit\n\n`circuit.json` holds the circuit of case "
                   f"`{case.name}` in the MIB circuit-track edge format: {edges} "
                   f"({len(circuit.edges)} of {len(circuit.to_mib_json()['edges'])} edges). "
                   f"It is the ground truth relative to the corruption {case.corruption}\n")
        card.write_text(card.read_text() + section)
        return True
    extra = sorted(set(arguments) - sizes)
    card.write_text(card.read_text() + f"\n## Ground-truth circuit\n\nNone written: the "
                    f"circuit of case `{case.name}` is derived for the default construction, "
                    f"and this one was built with {', '.join(extra)} set.\n")
    return False


if __name__ == "__main__":
    sys.exit(main())
