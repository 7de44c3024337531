r"""Induction heads: the task, and two exact two-layer attention-only constructions.

**The task** (Sanford, Hsu, Telgarsky 2024, arXiv:2408.14332, Section 1). The input is
:math:`\sigma_1 \dots \sigma_n` over :math:`\Sigma = \{0, \dots, S-1\}`. The output at
position :math:`i` is :math:`\tau_i = \sigma_{j^\star + 1}` with
:math:`j^\star = \max\{j < i : \sigma_j = \sigma_i\}`, or :math:`\bot` when no such :math:`j`
exists. :func:`induction_targets` is this specification (with :math:`\bot = -1`).

**The models.** Both builders return an :class:`InductionTransformer`: a standard two-layer,
one-head-per-layer, attention-only transformer (token and positional embeddings, two causal
softmax :class:`~constructions.layers.Attention` layers on a residual stream, an unembedding)
that prepends its own BOS token. Model position 0 holds BOS and model position :math:`t \ge 1`
holds :math:`\sigma_t`; the logits have :math:`S+1` classes, the last one meaning :math:`\bot`.

* Layer 1 is a *previous-token head*: query :math:`t` puts weight
  :math:`\alpha_t \ge \alpha` on key :math:`t-1`, so the layer writes
  :math:`\mathrm{prev}_t \approx \mathrm{emb}(\sigma_{t-1})`.
* Layer 2 is an *induction head*: query :math:`i` scores key :math:`j` by
  :math:`\beta_2\langle \mathrm{tok}_i, \mathrm{prev}_j\rangle + \lambda j + \theta[j = 0]`. The
  match term finds the keys right after an earlier occurrence of :math:`\sigma_i`, the recency
  bias :math:`\lambda j` makes the most recent one win, and the BOS sink :math:`\theta` wins when
  there is no match. The layer copies the winning key's token (BOS copies :math:`\bot`).

:func:`two_layer_induction` uses one-hot blocks (width :math:`3S + n + 5`);
:func:`compact_induction` puts tokens and positions on circles (width 11, independent of
:math:`S` and :math:`n`). Their temperatures are derived from margin conditions that hold for
*every* input of length :math:`\le n` (see each builder), and the condition functions
:func:`two_layer_conditions` and :func:`compact_conditions` evaluate those conditions in any
numeric library (``math``, ``mpmath``, or ``sympy`` for symbolic ``n``).

**Precision.** :meth:`InductionTransformer.run` accepts a ``rounding`` function applied to every
stored weight, activation, score and attention weight; with :func:`round_significand` this
emulates p-bit floating point. :func:`required_bits` is the precision the margins guarantee to
suffice: :math:`\lceil \log_2 M + 6\rceil`, where :math:`M` is the largest score magnitude, so
:math:`p = \log_2 n + O(\log\log n)` for the one-hot model and :math:`2\log_2 n + O(\log\log n)`
for the compact one.
"""

from __future__ import annotations

from constructions.induction_heads._shared import NO_MATCH, Rounding
from constructions.induction_heads.lower_bound import (
    STAR,
    combine_messages,
    index_instance,
    one_layer_messages,
)
from constructions.induction_heads.margins import (
    InductionParameters,
    circle_gaps,
    compact_conditions,
    compact_parameters,
    max_score,
    required_bits,
    round_significand,
    two_layer_conditions,
    two_layer_parameters,
)
from constructions.induction_heads.model import (
    COMPACT_WIDTH,
    InductionTransformer,
    compact_induction,
    guarantees,
    two_layer_induction,
)
from constructions.induction_heads.task import (
    induction_keys,
    induction_targets,
    previous_occurrence,
)

# One-line TransformerLens exports for the docs pages (constructions.export.export_line).
TRANSFORMER_LENS_EXAMPLES = {
    "two_layer_induction": "to_transformer_lens(two_layer_induction(vocab_size=5, max_len=8))",
    "compact_induction": "to_transformer_lens(compact_induction(vocab_size=5, max_len=8))",
}


__all__ = [
    "COMPACT_WIDTH",
    "NO_MATCH",
    "STAR",
    "TRANSFORMER_LENS_EXAMPLES",
    "InductionParameters",
    "InductionTransformer",
    "Rounding",
    "circle_gaps",
    "combine_messages",
    "compact_conditions",
    "compact_induction",
    "compact_parameters",
    "guarantees",
    "index_instance",
    "induction_keys",
    "induction_targets",
    "max_score",
    "one_layer_messages",
    "previous_occurrence",
    "required_bits",
    "round_significand",
    "two_layer_conditions",
    "two_layer_induction",
    "two_layer_parameters",
]
