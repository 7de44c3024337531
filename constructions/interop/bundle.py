r"""A construction as a model-card bundle: one directory in the Hugging Face mixin layout.

:func:`write_bundle` writes

* ``model.safetensors``: the ``state_dict`` (and tensor arguments of the builder), exactly as
  :func:`constructions.interop.files.save` writes them;
* ``config.json``: the sidecar of :func:`~constructions.interop.files.save` (builder,
  arguments, versions, SHA-256 of the weights) plus ``architectures``, the TransformerLens
  config of the export (or the features TransformerLens lacks) and which export needs which
  major;
* ``README.md``: a short model card: the claim's statement, status and evidence summary when
  given, and how to load the bundle in plain torch, TransformerLens 3 and 4 and nnsight.

:func:`load_bundle` (or :func:`constructions.interop.files.load` on the directory) rebuilds
the model with its builder and checks the rebuilt weights against the saved ones bit for bit.
Nothing is downloaded. The card's claim text comes in as plain data, so that this module
imports nothing from ``theorems`` (``python -m theorems.bundle CLAIM DIR`` fills it in).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from constructions.interop.files import load, save
from constructions.recording import build_call
from constructions.residual_layout import UnsupportedConstructionError

WEIGHTS, CONFIG, CARD = "model.safetensors", "config.json", "README.md"


def _transformer_lens_section(model: nn.Module) -> dict[str, Any]:
    from constructions.interop.layout import transformer_lens_layout

    try:
        layout = transformer_lens_layout(model)
    except UnsupportedConstructionError as error:
        return {"exportable": False, "lacks": list(error.features), "reason": str(error)}
    config = {k: (str(v).removeprefix("torch.") if isinstance(v, torch.dtype) else v)
              for k, v in layout.config.items()}
    return {"exportable": True, "config": config,
            "exports": {"to_transformer_lens": "transformer-lens 4.x (a TransformerBridge) or "
                                               "2.x/3.x (a HookedTransformer)",
                        "to_transformer_bridge": "transformer-lens 3.9 or 4.x"}}


def _card(config: Mapping[str, Any], claim: Mapping[str, Any] | None,
          record: Mapping[str, Any] | None) -> str:
    name = config["builder"].rpartition(":")[2]
    module = config["builder"].partition(":")[0]
    lines = [f"# {claim['title'] if claim else name}", ""]
    if claim:
        lines += [f"Claim `{claim['id']}` of transformer-theorems, built by `{config['builder']}`.",
                  "", "**Statement.**", "", claim["statement"].strip(), ""]
        if claim.get("correction"):
            lines += ["**Correction.**", "", claim["correction"].strip(), ""]
        sources = claim.get("sources") or []
        lines += [f"Source: {s['ref']}, arXiv:{s['arxiv']}, {s['where']} [{s['tag']}]"
                  for s in sources] + [""]
    else:
        lines += [f"A construction of transformer-theorems, built by `{config['builder']}`.", ""]
    if record:
        summary = record.get("summary", {})
        lines += [f"**Status:** {record['status']}. Evidence: {summary.get('passed', 0)} of "
                  f"{summary.get('checks', 0)} checks passed over {summary.get('examples', 0)} "
                  f"examples (tiers: {', '.join(summary.get('tiers', []))}).", ""]
    elif claim:
        lines += ["**Status:** not in the evidence file given.", ""]
    arguments = ", ".join([json.dumps(a) for a in config["args"]]
                          + [f"{k}={json.dumps(v)}" for k, v in config["kwargs"].items()])
    lines += ["## Load it", "", "Plain torch (rebuilds the model with its builder and checks the "
              "weights bit for bit), with `transformer-theorems` installed:", "", "```python",
              "from constructions.bundle import load_bundle",
              "model = load_bundle('path/to/this/directory')", "```", "",
              f"which is `{module}.{name}({arguments})` with these weights.", ""]
    section = config["transformer_lens"]
    if section["exportable"]:
        lines += ["TransformerLens 4 (`TransformerBridge`) and 3 (`HookedTransformer`):", "",
                  "```python", "from constructions.export import to_transformer_lens, "
                  "to_transformer_bridge", "tl_model = to_transformer_lens(model)   # "
                  "4.x: a TransformerBridge; 2.x/3.x: a HookedTransformer",
                  "bridge = to_transformer_bridge(model)   # transformer-lens 3.9/4.x", "```", ""]
    else:
        lines += [f"TransformerLens cannot express it: it uses {'; '.join(section['lacks'])}.",
                  ""]
    lines += ["nnsight (the hook points are named as in TransformerLens):", "", "```python",
              "from nnsight import NNsight", "wrapped = NNsight(model)", "```", ""]
    return "\n".join(lines)


def write_bundle(model: nn.Module, directory: str | Path, *,
                 claim: Mapping[str, Any] | None = None,
                 record: Mapping[str, Any] | None = None) -> Path:
    """Write ``model`` (which must carry a :class:`~constructions.recording.BuildCall`) as a
    bundle in ``directory``; ``claim`` (``Claim.as_dict()``) and ``record`` (its entry in the
    evidence file) fill the card. Returns the directory."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(directory, (str, Path)):
        raise TypeError(f"directory must be a str or Path, got {type(directory).__name__}")
    for label, value in (("claim", claim), ("record", record)):
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"{label} must be a mapping or None, got {type(value).__name__}")
    if build_call(model) is None:
        raise ValueError(f"{type(model).__name__} carries no record of its builder call; build "
                         f"it with constructions.export.build(builder, ...) or a @recorded "
                         f"builder")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"directory {directory} exists and is not a directory")
    _, sidecar = save(model, directory / WEIGHTS)
    config = json.loads(sidecar.read_text())
    sidecar.unlink()
    config = {"architectures": [type(model).__name__], **config,
              "transformer_lens": _transformer_lens_section(model)}
    if claim is not None:
        config["claim"] = claim["id"]
    (directory / CONFIG).write_text(json.dumps(config, indent=1, allow_nan=False) + "\n")
    (directory / CARD).write_text(_card(config, claim, record))
    return directory


def load_bundle(directory: str | Path, *, verify: bool = True, device=None) -> nn.Module:
    """Rebuild the model of a bundle written by :func:`write_bundle` (see
    :func:`constructions.interop.files.load`)."""
    if not isinstance(directory, (str, Path)):
        raise TypeError(f"directory must be a str or Path, got {type(directory).__name__}")
    if not Path(directory).is_dir():
        raise FileNotFoundError(f"no bundle directory {directory}")
    return load(directory, verify=verify, device=device)
