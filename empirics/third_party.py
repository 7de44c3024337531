r"""Third-party circuit discovery on the circuit cases: MIB's own EAP-IG code, as circuitkit
0.2.0 vendors it (``circuitkit.backends.eap``: ``Graph`` and ``attribute``, TransformerLens
3.8), writing MIB-format importance files that :mod:`empirics.circuit_benchmark` scores.

circuitkit pins ``transformer-lens==3.8.0`` and a large NLP stack, so this module runs in a
virtual environment of its own (never the project's)::

    python3 -m venv /work/venvs/circuitkit
    /work/venvs/circuitkit/bin/pip install torch==2.13.0     # first: no CUDA torch
    /work/venvs/circuitkit/bin/pip install circuitkit==0.2.0
    PYTHONPATH=. /work/venvs/circuitkit/bin/python -m empirics.third_party OUT --size full
    python -m theorems.circuits score OUT/<method>            # in the project's environment

What it adapts, and why:

* EAP-IG's ``attribute`` needs ``use_hook_mlp_in``, which an attention-only
  ``HookedTransformer`` lacks, so each exportable case is loaded with one zero MLP per layer
  (``d_mlp = 1``, every MLP weight and bias 0): the MLP adds exact zeros, the function is the
  construction's, and the MLP edges are zero maps, outside every ground truth.
* EAP-IG tokenizes strings; the cases' prompts are token ids, so its ``tokenize_batch_pair``
  is replaced by one that prepends the construction's BOS and returns full attention masks.
* The metric is the case's own (:attr:`CircuitCase.metric` on the logits after the BOS),
  batch-averaged, on the harness's prompts (the seed rule of
  :func:`~empirics.circuit_discovery.case_setup`).

The cases that do not export to TransformerLens (the majority head, one-step GD) are skipped,
said so in the output. Found here: on a model with one head per layer EAP-IG's
``gradient_hook`` (``eap_utils.py``) squeezes the head axis of its score block
(``s.squeeze(1)``), and the ``(3,)`` result broadcasts against ``scores[:3, 6:7]`` into a
shape error; the cases with one head per layer fail there, and the exception is reported.

**A local workaround, reported as separate methods** (``... + 1-head fix``, run only on the
one-head cases): for the duration of ``attribute`` the ``Graph`` object built here answers
``backward_index`` with the integer ``i`` where the package answers the one-element slice
``i:i+1``, so ``scores[:prev, i]`` has the squeezed block's shape. The installed package is
not changed, and its own methods' rows keep the failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from constructions.circuits import all_cases
from constructions.interop.layout import transformer_lens_layout
from constructions.residual_layout import UnsupportedConstructionError
from empirics.venvs import runner_main

# circuitkit 0.2.0's "exact" (activation patching) fails inside the package:
# get_scores_exact passes pair_padding_side= to evaluate_graph, which takes no such argument
METHODS = ("EAP", "EAP-IG-inputs")
FIX = " + 1-head fix"  # the local workaround's methods (module docstring)
ALL_METHODS = (*METHODS, *(m + FIX for m in METHODS))


def one_head_backward_index(graph):
    """Make ``graph.backward_index`` answer ``i`` for the package's one-element slice
    ``i:i+1`` (module docstring); returns a function that undoes it."""
    original = graph.backward_index

    def backward_index(node, qkv=None, attn_slice=True):
        index = original(node, qkv, attn_slice)
        if isinstance(index, slice) and index.stop - index.start == 1:
            return index.start
        return index

    graph.backward_index = backward_index
    return lambda: delattr(graph, "backward_index")


def hooked_with_zero_mlps(model):
    """The case's model as a TransformerLens 3.x ``HookedTransformer`` with a zero MLP per
    layer and the circuit hooks on (module docstring)."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    layout = transformer_lens_layout(model)
    config = {**layout.config, "attn_only": False, "d_mlp": 1, "act_fn": "relu",
              "use_attn_result": True, "use_split_qkv_input": True, "use_hook_mlp_in": True}
    tl_model = HookedTransformer(HookedTransformerConfig(**config))
    state = tl_model.state_dict()
    state.update(layout.state_dict)
    for key, value in list(state.items()):
        if ".mlp." in key:
            state[key] = torch.zeros_like(value)
    tl_model.load_state_dict(state, strict=True)
    return tl_model.eval()


def _tokenized_pair(bos: int):
    def tokenize_batch_pair(model, clean, corrupted, **kwargs):
        pad = torch.full((clean.shape[0], 1), bos)
        clean, corrupted = torch.cat([pad, clean], 1), torch.cat([pad, corrupted], 1)
        mask = torch.ones_like(clean)
        lengths = torch.full((clean.shape[0],), clean.shape[1])
        return clean, corrupted, mask, mask.clone(), lengths, clean.shape[1]
    return tokenize_batch_pair


def run_case(case, size: str, batch: int, seed: int, out: Path, methods=ALL_METHODS
             ) -> list[str]:
    """Attribute one case with each method; write ``out/<method>/<case>_<size>/importances.pt``."""
    from circuitkit.backends.eap import attribute as eap_attribute
    from circuitkit.backends.eap import evaluate as eap_evaluate
    from circuitkit.backends.eap.graph import Graph

    from empirics.circuit_formats import folder_name

    model, _ = case.instance(size)
    try:
        tl_model = hooked_with_zero_mlps(model)
    except UnsupportedConstructionError as error:
        return [f"{case.name}: skipped, {str(error).splitlines()[0][:100]}"]
    index = list(all_cases()).index(case.name)
    clean, corrupted = case.prompts(torch.Generator().manual_seed(seed * 1000 + index), batch,
                                    size)
    eap_attribute.tokenize_batch_pair = _tokenized_pair(model.vocab_size)
    eap_evaluate.tokenize_batch_pair = _tokenized_pair(model.vocab_size)
    data = [(clean, corrupted, (clean, corrupted))]

    def metric(logits, clean_logits, input_lengths, label):
        return case.metric(logits[:, 1:], *label).mean()

    lines = []
    for method in methods:
        graph = Graph.from_model(tl_model)
        base, fixed = method.removesuffix(FIX), method.endswith(FIX)
        if fixed and tl_model.cfg.n_heads != 1:
            lines.append(f"{case.name}: {method} skipped, not needed with "
                         f"{tl_model.cfg.n_heads} heads per layer")
            continue
        undo = one_head_backward_index(graph) if fixed else (lambda: None)
        kwargs = {"ig_steps": 5} if base == "EAP-IG-inputs" else {}
        try:
            eap_attribute.attribute(tl_model, graph, data, metric, method=base, quiet=True,
                                    **kwargs)
        except Exception as error:  # the package's own failure is the finding: report it
            lines.append(f"{case.name}: {method} fails: {type(error).__name__}: "
                         f"{str(error).splitlines()[0][:160]}")
            continue
        finally:
            undo()
        folder = out / method / folder_name(case, size)
        folder.mkdir(parents=True, exist_ok=True)
        graph.to_pt(str(folder / "importances.pt"))
        lines.append(f"{case.name}: {method} written")
    return lines


def main(argv=None) -> int:
    return runner_main("python -m empirics.third_party", ALL_METHODS, run_case, argv)


if __name__ == "__main__":
    sys.exit(main())
