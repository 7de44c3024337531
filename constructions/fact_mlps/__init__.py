r"""Fact-storing MLPs and associative memories.

Sources: Dugan et al. (2025, arXiv:2512.00207), "Constructing Efficient Fact-Storing MLPs for
Transformers"; Nichani, Lee, Bietti (2024, arXiv:2412.06538); Cabannes, Dohmatob, Bietti
(2024, arXiv:2310.02984); Meng et al. (2022, arXiv:2202.05262, ROME; code kmeng01/rome).

The task (the oracle every check and experiment shares)
--------------------------------------------------------
Keys :math:`k_1, \dots, k_F \in \mathbb R^d`, values :math:`v_1, \dots, v_{|V|} \in \mathbb
R^{d_v}` and a fact map :math:`f: [F] \to [|V|]`. A map :math:`g: \mathbb R^d \to \mathbb
R^{d_v}` *stores* the facts iff every key decodes to its value under dot-product decoding,

.. math::

    \mu_i(g) = \langle g(k_i), v_{f(i)}\rangle - \max_{j \ne f(i)} \langle g(k_i), v_j\rangle > 0
    \quad\text{for every } i,

which is what a transformer's unembedding does with the MLP output. ``_storage_margins``
returns the :math:`\mu_i` and :func:`recall` the fraction stored and the smallest margin.

Constructions
-------------
* :func:`linear_associative_memory`: :math:`W = \sum_i q_i\, v_{f(i)} k_i^\top` (Hebbian outer
  products; Nichani et al., Cabannes et al.), with optional weights :math:`q_i`.
* :func:`encoder_decoder_mlp`: the encoder-decoder MLP of Dugan et al. in its single-bucket
  form (see its docstring for the derivation of the threshold sizes).
* :func:`fact_transformer`: a one-layer transformer whose MLP is a swappable fact store.
* :func:`rome_edit` and :func:`rome_edit_as_coded`: ROME's rank-one update, as in the paper and
  as in the released code.

Everything is float64 by default; the builders take ``dtype=`` and ``device=``.
"""

from __future__ import annotations

from constructions.fact_mlps._shared import DECODE_FLOOR
from constructions.fact_mlps.decodability import (
    decodability,
    decoding_success_rate,
    jl_code_dim,
)
from constructions.fact_mlps.encoder_decoder import (
    GatedEncoderDecoder,
    assemble_encoder_decoder,
    encoder_decoder_mlp,
    encoder_system,
    orthonormal_projection,
    parameter_count,
    smallest_code_dim,
    threshold_hidden,
    value_margin,
)
from constructions.fact_mlps.memories import (
    LinearAssociativeMemory,
    linear_associative_memory,
    population_error,
    zipf_probabilities,
)
from constructions.fact_mlps.rome import (
    rome_edit,
    rome_edit_as_coded,
    second_moment,
)
from constructions.fact_mlps.task import (
    recall,
)
from constructions.fact_mlps.transformer import (
    FactTransformer,
    fact_prompts,
    fact_transformer,
)

__all__ = [
    "DECODE_FLOOR",
    "FactTransformer",
    "GatedEncoderDecoder",
    "LinearAssociativeMemory",
    "assemble_encoder_decoder",
    "decodability",
    "decoding_success_rate",
    "encoder_decoder_mlp",
    "encoder_system",
    "fact_prompts",
    "fact_transformer",
    "jl_code_dim",
    "linear_associative_memory",
    "orthonormal_projection",
    "parameter_count",
    "population_error",
    "recall",
    "rome_edit",
    "rome_edit_as_coded",
    "second_moment",
    "smallest_code_dim",
    "threshold_hidden",
    "value_margin",
    "zipf_probabilities",
]
