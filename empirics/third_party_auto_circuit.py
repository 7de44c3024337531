r"""Third-party circuit discovery on the circuit cases: auto-circuit 1.0.1 (Miller, Chughtai,
Saunders 2024, arXiv 2407.08734; ``auto_circuit.prune_algos``), writing MIB-format
importance files that :mod:`empirics.circuit_benchmark` scores.

auto-circuit's code is its own: its ``PatchableModel`` wraps a TransformerLens
``HookedTransformer`` with edge masks (``patchable_model(factorized=True)``), and each method
scores the masks. It shares no code with MIB's EAP-IG (:mod:`empirics.third_party`);
circuitkit's ``backends.acdc`` is a vendored copy of auto-circuit (its ``mask_gradient.py``
differs only in imports), so it would count this implementation twice.

auto-circuit imports ``HookedTransformerKeyValueCache`` from ``transformer_lens``, which
TransformerLens 3 and 4 no longer export, so it runs in a virtual environment of its own with
TransformerLens 2.18::

    python3 -m venv VENV
    VENV/bin/pip install torch==2.13.0                      # first: no CUDA torch
    VENV/bin/pip install auto-circuit==1.0.1
    VENV/bin/pip install transformer-lens==2.18.0 "pyarrow<20" "numpy<2" torch==2.13.0
    PYTHONPATH=. VENV/bin/python -m empirics.third_party_auto_circuit OUT --size smoke

(``auto_circuit.prune_algos.prune_algos`` imports tracr and JAX, which fail against
NumPy 1; the methods are imported from their own modules.)

The methods, each on the case's clean and corrupted prompts (the harness's, the seed rule of
:func:`~empirics.circuit_discovery.case_setup`) with the corrupted run as the ablation
(``AblationType.RESAMPLE``, ``clean_corrupt="corrupt"``: MIB's patching), and the case's metric
as auto-circuit's own: for the induction cases the final-position logit difference
:math:`\ell_\tau - \ell_{\tau'}` (:func:`~constructions.circuits.logit_difference`) is
``answer_function="avg_diff"`` with ``answers`` :math:`\tau` and ``wrong_answers``
:math:`\tau'` on ``slice_output="last_seq"``; for the superposed-features flag case the final
logit sum (:func:`~constructions.circuits.final_logit_sum`) is ``answer_function="avg_val"``
with every class an answer: the mean of the final logits, the sum over :math:`C` classes
divided by :math:`C`, a positive multiple that orders the edges as the sum does:

* ``auto-circuit EAP``: ``mask_gradient_prune_scores(grad_function="logit", mask_val=0)``,
  which its authors test equal to their replication of Syed et al.'s edge attribution patching;
* ``auto-circuit EAP-IG``: the same with ``integrated_grad_samples=5`` (integrated gradients
  of the edge masks from the corrupted to the clean run);
* ``auto-circuit ACDC``: ``acdc_prune_scores`` (Conmy et al.'s ACDC, KL divergence to the full
  model, thresholds :math:`b \cdot 10^{e}` for :math:`b \in \{1,3,5,7,9\}`, :math:`e \in
  \{-5..-2\}`); an edge's score is the threshold that pruned it, and an edge no threshold
  pruned (score :math:`\infty`) is written as twice the largest finite score, which keeps
  the order (MIB files hold finite scores).

The cases that do not export to TransformerLens (the majority head, one-step GD) are skipped,
said so in the output, as would be a case whose metric is neither the induction logit
difference nor the final logit sum (:func:`answers` reads the targets).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

from constructions.circuits import all_cases, final_logit_sum
from constructions.circuits.corruptions import logit_difference
from constructions.induction_heads.task import induction_targets
from constructions.interop.layout import transformer_lens_layout
from constructions.residual_layout import UnsupportedConstructionError
from empirics.venvs import runner_main

METHODS = ("auto-circuit EAP", "auto-circuit EAP-IG", "auto-circuit ACDC")


def mib_name(name: str) -> str:
    """An auto-circuit edge name (``"Resid Start->A0.0.Q"``, ``"A0.0->A1.0.K"``,
    ``"A1.0->Resid End"``) in MIB's spelling (``"input->a0.h0<q>"``, ...)."""
    def node(part: str) -> str:
        if part == "Resid Start":
            return "input"
        if part == "Resid End":
            return "logits"
        if not part.startswith("A"):
            raise ValueError(f"name must be an attention-only auto-circuit edge, got {name!r}")
        layer, head, *qkv = part[1:].split(".")
        return f"a{layer}.h{head}" + (f"<{qkv[0].lower()}>" if qkv else "")
    source, arrow, target = name.partition("->")
    if not arrow:
        raise ValueError(f"name must be an auto-circuit edge 'SRC->DEST', got {name!r}")
    return f"{node(source)}->{node(target)}"


def finite_scores(scores: dict[str, float]) -> dict[str, float]:
    """``+inf`` (an edge ACDC never pruned) as twice the largest finite absolute score (1 when
    there is none): the order by absolute score is kept and every score is finite."""
    finite = [abs(s) for s in scores.values() if math.isfinite(s)]
    top = 2 * max(finite, default=0.5) or 1.0
    if any(math.isnan(s) or s == -math.inf for s in scores.values()):
        raise ValueError("scores must be finite or +inf")
    return {e: (top if s == math.inf else s) for e, s in scores.items()}


def hooked(model):
    """The case's model as a TransformerLens 2.x ``HookedTransformer`` with per-head results
    and split Q/K/V inputs (what ``patchable_model(separate_qkv=True)`` needs)."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    layout = transformer_lens_layout(model)
    config = {**layout.config, "use_attn_result": True, "use_split_qkv_input": True}
    tl_model = HookedTransformer(HookedTransformerConfig(**config))
    tl_model.load_state_dict(layout.state_dict, strict=False)
    return tl_model.eval()


def answers(clean: torch.Tensor, corrupted: torch.Tensor, classes: int
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(answers, wrong answers) ``(B, 1)``: the final oracle targets :math:`\\tau` of the clean
    and :math:`\\tau'` of the corrupted prompts (no earlier occurrence: the class
    ``classes - 1``), as :func:`~constructions.circuits.logit_difference` reads them."""
    out = []
    for prompt in (clean, corrupted):
        target = induction_targets(prompt)[:, -1]
        out.append(torch.where(target < 0, classes - 1, target).unsqueeze(-1))
    return out[0], out[1]


def run_case(case, size: str, batch: int, seed: int, out: Path, methods=METHODS) -> list[str]:
    """Score one case with each method; write ``out/<method>/<case>_<size>/importances.json``."""
    from auto_circuit.data import PromptDataLoader, PromptDataset
    from auto_circuit.prune_algos.ACDC import acdc_prune_scores
    from auto_circuit.prune_algos.mask_gradient import mask_gradient_prune_scores
    from auto_circuit.types import AblationType
    from auto_circuit.utils.graph_utils import patchable_model

    from empirics.circuit_formats import folder_name, mib_graph, mib_json

    model, circuit = case.instance(size)
    try:
        tl_model = hooked(model)
    except UnsupportedConstructionError as error:
        return [f"{case.name}: skipped, {str(error).splitlines()[0][:100]}"]
    if case.metric not in (logit_difference, final_logit_sum):  # what answers() can express
        return [f"{case.name}: skipped, its metric is neither the induction logit difference "
                f"nor the final logit sum"]
    index = list(all_cases()).index(case.name)
    clean, corrupted = case.prompts(torch.Generator().manual_seed(seed * 1000 + index), batch,
                                    size)
    classes = tl_model.cfg.d_vocab_out
    if case.metric is final_logit_sum:   # avg_val over every class: the sum / C
        answer_function = "avg_val"
        right = wrong = torch.arange(classes).expand(clean.shape[0], classes)
    else:
        answer_function = "avg_diff"
        right, wrong = answers(clean, corrupted, classes)
    bos = torch.full((clean.shape[0], 1), model.vocab_size)
    dataset = PromptDataset(torch.cat([bos, clean], 1), torch.cat([bos, corrupted], 1),
                            list(right), list(wrong))
    loader = PromptDataLoader(dataset, seq_len=None, diverge_idx=0, batch_size=batch)
    patchable = patchable_model(tl_model, factorized=True, slice_output="last_seq",
                                separate_qkv=True, device=torch.device("cpu"))
    runs = {
        "auto-circuit EAP": lambda: mask_gradient_prune_scores(
            patchable, loader, None, grad_function="logit", answer_function=answer_function,
            mask_val=0.0, ablation_type=AblationType.RESAMPLE, clean_corrupt="corrupt"),
        "auto-circuit EAP-IG": lambda: mask_gradient_prune_scores(
            patchable, loader, None, grad_function="logit", answer_function=answer_function,
            integrated_grad_samples=5, ablation_type=AblationType.RESAMPLE,
            clean_corrupt="corrupt"),
        "auto-circuit ACDC": lambda: acdc_prune_scores(patchable, loader, None),
    }
    graph = mib_graph(circuit.n_layers, circuit.n_heads)
    lines = []
    for method in methods:
        try:
            prune_scores = runs[method]()
        except Exception as error:  # the package's own failure is the finding: report it
            lines.append(f"{case.name}: {method} fails: {type(error).__name__}: "
                         f"{str(error).splitlines()[0][:160]}")
            continue
        scores = finite_scores({mib_name(e.name): float(e.prune_score(prune_scores))
                                for e in patchable.edges})
        folder = out / method / folder_name(case, size)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "importances.json").write_text(json.dumps(
            mib_json(graph, model.d_model, scores, set())))
        lines.append(f"{case.name}: {method} written")
    return lines


def main(argv=None) -> int:
    return runner_main("python -m empirics.third_party_auto_circuit", METHODS, run_case, argv)


if __name__ == "__main__":
    sys.exit(main())
