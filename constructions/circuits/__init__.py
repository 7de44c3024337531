r"""Ground-truth circuits of attention-only constructions, and edge patching on native hooks.

**The computational graph** of an attention-only transformer with :math:`L` layers of
:math:`H` heads (no MLPs, no normalisation) has the nodes ``input`` (token plus positional
embedding, the residual stream before layer 0), ``a{l}.h{h}`` (one head's output, which it
adds to the residual stream) and ``logits`` (the unembedding of the final residual stream).
Its edges, in the naming of the MIB circuit track (Mueller et al. 2025, whose leaderboard
format is ``"input->a1.h0<v>"``; the format was read in a third-party converter to it, not in
MIB's own code), run from every node to every later attention head's query, key or value input
(``<q>``, ``<k>``, ``<v>``) and to ``logits``. Since the residual stream is a sum, the input
of head :math:`v` is :math:`\sum_u \mathrm{out}_u` over the nodes upstream of it, and *patching
the edge* :math:`u \to v\langle x\rangle` from a corrupted run replaces :math:`\mathrm{out}_u`
by its corrupted value in that one input only; every node is then recomputed from its own
(clean or patched) inputs. :func:`edge_patched_logits` does exactly that, in the model's own
dtype, through the construction's hook points (:mod:`constructions.layers`), without
TransformerLens.

**A circuit** (:class:`Circuit`) is a set of edges with a role each; it is the ground truth
*relative to a corruption*: an edge belongs to it iff the corruption changes what the edge
carries in a way the output depends on. :func:`induction_mechanism` lists the edges whose
weights are non-zero in the induction constructions (what the mechanism uses on some input);
:func:`induction_circuit` is the subset that matters under a corruption:
:func:`resample_next_token` (what the induction head copies) or
:func:`resample_earlier_occurrence` (where it attends). Realistic variants with the same
circuits are in :mod:`constructions.circuits.variants` and :mod:`constructions.circuits.gauges`.

**The modules of this package**, one job each; everything public is re-exported here, so
``from constructions.circuits import X`` is the way in (two names of
:mod:`~constructions.circuits.icl_variants` that the induction variants also use are
re-exported with a prefix: ``lsa_spurious_head_variant``, ``LSA_SPURIOUS_HEADS``):

* :mod:`~constructions.circuits.graph`: the graph, :class:`Edge` and :class:`Circuit`;
* :mod:`~constructions.circuits.induction`: the induction constructions' mechanism and circuits;
* :mod:`~constructions.circuits.corruptions`: their two corruptions and the metric;
* :mod:`~constructions.circuits.patching`: edge patching on their native hook points;
* :mod:`~constructions.circuits.ablation`: zero and mean ablation of edges, and the circuits
  of the one-hot induction construction under each;
* :mod:`~constructions.circuits.variants`, :mod:`~constructions.circuits.gauges`: dense
  variants of the induction constructions with the same circuits;
* :mod:`~constructions.circuits.icl`, :mod:`~constructions.circuits.icl_variants`: the circuit
  of one-step-GD linear self-attention, its patching and its dense variants;
* :mod:`~constructions.circuits.majority`, :mod:`~constructions.circuits.majority_variants`:
  the same for the LayerNorm majority head;
* :mod:`~constructions.circuits.stress`: stress cases on an exact, saturated induction model:
  a backup previous-token head, a distractor sub-circuit, superposed features in one head;
* :mod:`~constructions.circuits.case`: :class:`CircuitCase`, a benchmark case (model, circuit,
  corruption, metric) and the registry;
* :mod:`~constructions.circuits.induction_cases`, :mod:`~constructions.circuits.native_cases`,
  :mod:`~constructions.circuits.stress_cases`: the cases, what the cases that do not export to
  TransformerLens need, and the stress constructions as cases (their circuits, samplers and the
  flag's metric);
* :mod:`~constructions.circuits.cases`: every case, registered in order (:func:`all_cases`);
* :mod:`~constructions.circuits.diagram`: a circuit as Graphviz source.

The package sits on the constructions it describes (:mod:`constructions.induction_heads`,
:mod:`constructions.icl_regression`, :mod:`constructions.layernorm`) and the
primitives; no other construction module imports it. Torch only, no TransformerLens.
"""

from __future__ import annotations

from constructions.circuits.ablation import (
    ABLATIONS,
    ablation_circuit,
    all_prompts,
    edge_ablated_logits,
    mean_outputs,
    target_margin,
)
from constructions.circuits.case import CASES, CircuitCase, Sampler
from constructions.circuits.cases import all_cases, case_for_builder
from constructions.circuits.corruptions import (
    logit_difference,
    resample_earlier_occurrence,
    resample_next_token,
)
from constructions.circuits.diagram import (
    CIRCUIT_COLOUR,
    OTHER_COLOUR,
    circuit_dot,
    layout,
    node_label,
)
from constructions.circuits.gauges import (
    PERMUTATION,
    PERMUTED_HEADS,
    dyadic_gauge,
    gauge_size,
    head_renaming,
    permute_heads,
    permuted_variant,
    random_rotation,
    reparametrised_variant,
    rotation_variant,
)
from constructions.circuits.graph import QKV, Circuit, Edge, attention_graph
from constructions.circuits.icl import (
    icl_circuit,
    lsa_magnitude,
    lsa_patched_prediction,
    null_space_variant,
    shift_label,
)
from constructions.circuits.icl_variants import SPURIOUS_HEADS as LSA_SPURIOUS_HEADS
from constructions.circuits.icl_variants import (
    LSAEdgeView,
    MultiHeadLSA,
    multi_head_magnitude,
    multi_head_patched_prediction,
)
from constructions.circuits.icl_variants import spurious_head_variant as lsa_spurious_head_variant
from constructions.circuits.induction import (
    CORRUPTIONS,
    INDUCTION_KINDS,
    induction_circuit,
    induction_mechanism,
)
from constructions.circuits.induction_cases import (
    EARLIER_OCCURRENCE,
    EARLIER_SIZES,
    GAUGE_VARIANTS,
    INDUCTION_CASES,
    sample_earlier_occurrence_pairs,
    sample_next_token_pairs,
)
from constructions.circuits.majority import (
    majority_circuit,
    majority_operands,
    majority_patched_output,
    resample_token,
)
from constructions.circuits.majority_variants import (
    fixing_ones,
    ln_rotation_variant,
    ones_rotation,
    qk_gauge_variant,
)
from constructions.circuits.native_cases import (
    NATIVE_CASES,
    lsa_hooks,
    majority_hooks,
    prediction_metric,
    sample_label_shifts,
    sample_token_resamplings,
    token_metric,
)
from constructions.circuits.patching import edge_patched_logits, per_head_results
from constructions.circuits.stress import (
    BACKUP_PATHS,
    DISTRACTOR_EDGES,
    OUTPUT_EDGE,
    SUPERPOSED_CIRCUITS,
    backup_induction,
    distractor_induction,
    mark_final_token,
    superposed_induction,
)
from constructions.circuits.stress_cases import (
    STRESS_CASES,
    backup_circuit,
    distractor_circuit,
    final_logit_sum,
    sample_marked_pairs,
    sample_unmarked_occurrence_pairs,
    superposed_circuit,
)
from constructions.circuits.variants import (
    SPURIOUS_HEADS,
    gauge_width,
    hadamard,
    spurious_head_variant,
    value_gauge_variant,
)

__all__ = [
    "ABLATIONS",
    "BACKUP_PATHS",
    "CASES",
    "CIRCUIT_COLOUR",
    "CORRUPTIONS",
    "DISTRACTOR_EDGES",
    "EARLIER_OCCURRENCE",
    "EARLIER_SIZES",
    "GAUGE_VARIANTS",
    "INDUCTION_CASES",
    "INDUCTION_KINDS",
    "LSA_SPURIOUS_HEADS",
    "NATIVE_CASES",
    "OTHER_COLOUR",
    "OUTPUT_EDGE",
    "PERMUTATION",
    "PERMUTED_HEADS",
    "QKV",
    "SPURIOUS_HEADS",
    "STRESS_CASES",
    "SUPERPOSED_CIRCUITS",
    "Circuit",
    "CircuitCase",
    "Edge",
    "LSAEdgeView",
    "MultiHeadLSA",
    "Sampler",
    "ablation_circuit",
    "all_cases",
    "all_prompts",
    "attention_graph",
    "backup_circuit",
    "backup_induction",
    "case_for_builder",
    "circuit_dot",
    "distractor_circuit",
    "distractor_induction",
    "dyadic_gauge",
    "edge_ablated_logits",
    "edge_patched_logits",
    "final_logit_sum",
    "fixing_ones",
    "gauge_size",
    "gauge_width",
    "hadamard",
    "head_renaming",
    "icl_circuit",
    "induction_circuit",
    "induction_mechanism",
    "layout",
    "ln_rotation_variant",
    "logit_difference",
    "lsa_hooks",
    "lsa_magnitude",
    "lsa_patched_prediction",
    "lsa_spurious_head_variant",
    "majority_circuit",
    "majority_hooks",
    "majority_operands",
    "majority_patched_output",
    "mark_final_token",
    "mean_outputs",
    "multi_head_magnitude",
    "multi_head_patched_prediction",
    "node_label",
    "null_space_variant",
    "ones_rotation",
    "per_head_results",
    "permute_heads",
    "permuted_variant",
    "prediction_metric",
    "qk_gauge_variant",
    "random_rotation",
    "reparametrised_variant",
    "resample_earlier_occurrence",
    "resample_next_token",
    "resample_token",
    "rotation_variant",
    "sample_earlier_occurrence_pairs",
    "sample_label_shifts",
    "sample_marked_pairs",
    "sample_next_token_pairs",
    "sample_token_resamplings",
    "sample_unmarked_occurrence_pairs",
    "shift_label",
    "spurious_head_variant",
    "superposed_circuit",
    "superposed_induction",
    "target_margin",
    "token_metric",
    "value_gauge_variant",
]
