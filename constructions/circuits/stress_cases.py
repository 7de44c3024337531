r"""The stress constructions as benchmark cases: backup heads, a distractor sub-circuit and
superposed features in one head (:mod:`constructions.circuits.stress`), each a
:class:`~constructions.circuits.CircuitCase` with its ground-truth circuit, corruption, prompt
sampler and metric.

* ``backup-heads``: :func:`~constructions.circuits.stress.backup_induction` under
  :func:`~constructions.circuits.resample_earlier_occurrence`. Its circuit is not unique: either
  previous-token head's path with the induction head's output is a minimal circuit
  (:data:`~constructions.circuits.stress.BACKUP_PATHS`). The ground truth a method is scored
  against is their union (:func:`backup_circuit`, 5 edges): every edge that some minimal
  circuit needs. No single edge of the two paths moves the metric when patched alone, which
  is the stress on single-edge patching and attribution.
* ``distractor-sub-circuit``: :func:`~constructions.circuits.stress.distractor_induction`
  under the same corruption; the distractor heads are active (their outputs change) but add the
  same number to every logit, so the circuit is the plain induction path
  (:func:`distractor_circuit`, 3 edges).
* ``superposed-features-match`` and ``superposed-features-flag``:
  :func:`~constructions.circuits.stress.superposed_induction`, whose induction head writes the
  copied token and a flag of the matched token into overlapping directions. Under
  earlier-occurrence resampling, read by the logit difference, the circuit is the key path
  (:data:`~constructions.circuits.stress.SUPERPOSED_CIRCUITS` ``match``); under
  :func:`~constructions.circuits.stress.mark_final_token`, read by the final logit sum
  (:func:`final_logit_sum`: the flag's readout, which every logit difference annihilates), it
  is the value path (``flag``). The two circuits have the same nodes: a head-level method
  cannot tell them apart. Prompts avoid the marker :math:`\mu = S - 1`.

Every number of these models is exact in floating point (the module docstring of
:mod:`~constructions.circuits.stress`), and the circuits are certified by the claims
``circuits.backup-heads``, ``circuits.distractor`` and ``circuits.superposed-features``. The
cases are registered after all others by :mod:`constructions.circuits.cases`, so the earlier
cases keep their prompt streams.
"""

from __future__ import annotations

import dataclasses

import torch

from constructions import _validate
from constructions.circuits.case import CircuitCase
from constructions.circuits.corruptions import logit_difference
from constructions.circuits.graph import Circuit, attention_graph, other_edges
from constructions.circuits.induction_cases import (
    EARLIER_OCCURRENCE,
    sample_earlier_occurrence_pairs,
)
from constructions.circuits.stress import (
    BACKUP_PATHS,
    OUTPUT_EDGE,
    SUPERPOSED_CIRCUITS,
    backup_induction,
    distractor_induction,
    mark_final_token,
    superposed_induction,
)

_ROLES = {
    "input->a0.h0<v>": "token -> L0H0 (previous-token head) value: the record of each "
                       "position's previous token",
    "a0.h0->a1.h0<k>": "L0H0's record -> the induction head's key: which key matches the "
                       "current token",
    "input->a0.h1<v>": "token -> L0H1 (backup previous-token head) value: the same record",
    "a0.h1->a1.h0<k>": "L0H1's record -> the induction head's key: the backup match",
    "a0.h0->a1.h0<v>": "L0H0's record -> the induction head's value: the matched token's flag",
    "a1.h0->logits": "the induction head -> unembedding: the copied token",
}
_FLAG_OUTPUT = {"a1.h0->logits": "the induction head -> unembedding: the copied token and, "
                                 "along the all-ones direction, the flag"}
SIZES = {"smoke": {"vocab_size": 4, "max_len": 8}, "full": {"vocab_size": 16, "max_len": 32}}
PRIMARY = (*BACKUP_PATHS["primary"], OUTPUT_EDGE)
BACKUP = (*BACKUP_PATHS["backup"], OUTPUT_EDGE)
# Under the flag's corruption the query and the key of the induction head both change (the
# final token and its record become the marker): patched together they still match, so they
# are in no minimal circuit, yet either one patched alone breaks the match and moves the
# metric, so neither is don't-care (circuits.minimal-circuits)
COMPENSATING = ("input->a1.h0<q>", "a0.h0->a1.h0<k>")


def _circuit(model: torch.nn.Module, name: str, edges: tuple[str, ...], corruption: str,
             roles: dict[str, str] | None = None) -> Circuit:
    roles = {**_ROLES, **(roles or {})}
    shape = (len(model.layers), model.layers[0].n_heads)
    graph = {e.name: e for e in attention_graph(*shape)}
    return Circuit(name, *shape, model.d_model,
                   tuple(dataclasses.replace(graph[e], role=roles[e]) for e in edges),
                   corruption=corruption)


def backup_circuit(vocab_size: int, max_len: int) -> Circuit:
    """The union of the backup model's two minimal circuits under earlier-occurrence
    resampling: both previous-token heads' paths and the induction head's output."""
    return _circuit(backup_induction(vocab_size, max_len),
                    "backup-heads circuit (union of the two minimal circuits)",
                    (*BACKUP_PATHS["primary"], *BACKUP), "resample_earlier_occurrence")


def distractor_circuit(vocab_size: int, max_len: int) -> Circuit:
    """The distractor model's circuit under earlier-occurrence resampling: the induction path
    (the distractor heads are active but unused)."""
    return _circuit(distractor_induction(vocab_size, max_len), "distractor circuit",
                    PRIMARY, "resample_earlier_occurrence")


def superposed_circuit(vocab_size: int, max_len: int, feature: str = "match") -> Circuit:
    """The superposed model's circuit for one feature: ``"match"`` (earlier-occurrence
    resampling, the logit difference) or ``"flag"`` (:func:`~constructions.circuits.stress.
    mark_final_token`, the final logit sum)."""
    feature = _validate.choice("feature", feature, ("match", "flag"))
    corruption = ("resample_earlier_occurrence" if feature == "match"
                  else "mark_final_token")
    return _circuit(superposed_induction(vocab_size, max_len), f"superposed {feature} circuit",
                    SUPERPOSED_CIRCUITS[feature], corruption, _FLAG_OUTPUT)


def sample_unmarked_occurrence_pairs(generator: torch.Generator, batch: int, *,
                                     vocab_size: int, max_len: int
                                     ) -> tuple[torch.Tensor, torch.Tensor]:
    r""":func:`~constructions.circuits.sample_earlier_occurrence_pairs` over the tokens below
    the marker :math:`\mu = S - 1` (``vocab_size - 1`` of them, so ``vocab_size >= 4``)."""
    S = _validate.positive_int("vocab_size", vocab_size, minimum=4)
    return sample_earlier_occurrence_pairs(generator, batch, vocab_size=S - 1,
                                           max_len=max_len)


def sample_marked_pairs(generator: torch.Generator, batch: int, *, vocab_size: int,
                        max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Clean prompts as :func:`sample_unmarked_occurrence_pairs` draws them, and their
    :func:`~constructions.circuits.stress.mark_final_token` corruptions (the repeated token
    renamed to the marker at both of its positions)."""
    clean, _ = sample_unmarked_occurrence_pairs(generator, batch, vocab_size=vocab_size,
                                                max_len=max_len)
    return clean, mark_final_token(clean, vocab_size)


def final_logit_sum(logits: torch.Tensor, clean: torch.Tensor, corrupted: torch.Tensor
                    ) -> torch.Tensor:
    r"""The flag's readout :math:`\sum_c \ell_{i,c}` at the final position :math:`i`, ``(B,)``:
    ``logits`` ``(B, n, C)``; ``clean`` and ``corrupted`` ``(B, n)`` prompts (not read, but
    checked to match ``logits``). On :func:`~constructions.circuits.stress.
    superposed_induction` it is :math:`1 + (S+1)b`, :math:`b` the flag."""
    logits = _validate.real_tensor("logits", logits, ndim=3)
    if 0 in logits.shape:
        raise ValueError(f"logits must have shape (B, n, C) with B, n, C >= 1, got "
                         f"{tuple(logits.shape)}")
    for name, prompt in (("clean", clean), ("corrupted", corrupted)):
        prompt = _validate.token_tensor(name, prompt, vocab_size=logits.shape[-1], ndim=2)
        if prompt.shape != logits.shape[:2]:
            raise ValueError(f"{name} must have the shape (B, n) = {tuple(logits.shape[:2])} of "
                             f"logits, got {tuple(prompt.shape)}")
    return logits[:, -1].sum(-1)


STRESS_CASES = (
    CircuitCase(
        name="backup-heads", title="Backup previous-token head (saturated, earlier occurrence)",
        builder="constructions.circuits.stress:backup_induction",
        circuit_builder="constructions.circuits.stress_cases:backup_circuit",
        build=backup_induction, circuit=backup_circuit, sample=sample_earlier_occurrence_pairs,
        metric=logit_difference,
        corruption=(EARLIER_OCCURRENCE + " Two identical previous-token heads write the same "
                    "record, and either one alone lets the induction head match: the two "
                    "paths are the two minimal circuits, the ground truth is their union, and "
                    "no edge of either path moves the metric when patched alone."),
        sizes=SIZES, minimal_circuits=(PRIMARY, BACKUP),
        dont_care=other_edges(2, 2, PRIMARY, BACKUP)),
    CircuitCase(
        name="distractor-sub-circuit",
        title="Distractor sub-circuit, active but unused (saturated, earlier occurrence)",
        builder="constructions.circuits.stress:distractor_induction",
        circuit_builder="constructions.circuits.stress_cases:distractor_circuit",
        build=distractor_induction, circuit=distractor_circuit,
        sample=sample_earlier_occurrence_pairs, metric=logit_difference,
        corruption=(EARLIER_OCCURRENCE + " A current-token head and a duplicate-token head "
                    "react to it (the earliest occurrence of the final token moves), but add "
                    "the same number to every logit: active, and unused by the metric."),
        sizes=SIZES, minimal_circuits=(PRIMARY,), dont_care=other_edges(2, 2, PRIMARY)),
    CircuitCase(
        name="superposed-features-match",
        title="Superposed features in one head: the match, read by the logit difference",
        builder="constructions.circuits.stress:superposed_induction",
        circuit_builder="constructions.circuits.stress_cases:superposed_circuit",
        build=superposed_induction, circuit=superposed_circuit,
        sample=sample_unmarked_occurrence_pairs, metric=logit_difference,
        corruption=(EARLIER_OCCURRENCE + " Prompts avoid the marker S - 1. The induction "
                    "head also copies a flag of the matched token along the all-ones "
                    "direction of its own output block, which the logit difference "
                    "annihilates: the circuit is the key path."),
        sizes=SIZES, minimal_circuits=(SUPERPOSED_CIRCUITS["match"],),
        dont_care=other_edges(2, 2, SUPERPOSED_CIRCUITS["match"])),
    CircuitCase(
        name="superposed-features-flag",
        title="Superposed features in one head: the flag, read by the logit sum",
        builder="constructions.circuits.stress:superposed_induction",
        circuit_builder="constructions.circuits.stress_cases:superposed_circuit",
        build=superposed_induction,
        circuit=lambda vocab_size, max_len: superposed_circuit(vocab_size, max_len, "flag"),
        sample=sample_marked_pairs, metric=final_logit_sum,
        corruption=("mark_final_token: the final token, at both of its positions, becomes the "
                    "marker S - 1 (clean prompts avoid it, with one earlier occurrence of the "
                    "final token). The induction head matches the same key and copies the same "
                    "token; only the flag of the matched token turns from +1 to -1. The metric "
                    "is the final logit sum, 1 + (S + 1) b, the flag's readout: the circuit is "
                    "the value path, with the same nodes as the match's key path. The "
                    "induction head's query and key inputs are in no minimal circuit (patched "
                    "together they still match) but each moves the metric when patched alone: "
                    "they are neither circuit nor don't-care."),
        sizes=SIZES, minimal_circuits=(SUPERPOSED_CIRCUITS["flag"],),
        dont_care=other_edges(2, 2, SUPERPOSED_CIRCUITS["flag"], COMPENSATING)),
)
