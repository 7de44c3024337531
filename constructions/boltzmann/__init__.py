r"""The Boltzmann operator, and one-layer rank-1 softmax attention as a contextual mapping
(Kajitsuka & Sato, ICLR 2024, arXiv:2307.14023).

Conventions. Tokens are rows: a sequence is ``x`` of shape ``(B, n, d)`` (the paper writes
:math:`Z\in\mathbb R^{d\times n}` with tokens as columns; every formula here is its transpose).

**Boltzmann operator.** For :math:`a\in\mathbb R^n` and an inverse temperature :math:`\beta`,

.. math::

    \mathrm{boltz}_\beta(a) = \frac{\sum_i a_i e^{\beta a_i}}{\sum_j e^{\beta a_j}}
    = a^\top\sigma_S[\beta a],\qquad \mathrm{boltz} = \mathrm{boltz}_1,\qquad
    \mathrm{boltz}_\beta(a) = \mathrm{boltz}(\beta a)/\beta .

**Rank-1 attention computes it.** With :math:`W_Q = \rho\,w`, :math:`W_K = W_V = w`
(each :math:`d\times 1`) and :math:`W_O = c\,u^\top`, the score of query :math:`q` on key
:math:`k` is :math:`\rho\,s_q p_k` with :math:`s_q = w^\top x_q`, :math:`p_k = w^\top x_k`, and
the head adds :math:`c\,u\,\mathrm{boltz}_{\rho s_q}(p)` to token :math:`q`.

**Theorem 2 (contextual mapping).** Let the vocabulary :math:`\mathcal V` (rows of
``vocabulary``) be tokenwise separated: :math:`r_{\min}\le\lVert v\rVert\le r_{\max}` and
:math:`\lVert v - v'\rVert\ge\varepsilon` for distinct :math:`v, v'`. Pick a unit :math:`w` with
:math:`|w^\top(x - x')|\ge c_w\lVert x - x'\rVert` on :math:`\mathcal V\cup\{0\}` (a random
direction has :math:`c_w\ge\sqrt{8/(\pi d)}/(|\mathcal V|+1)^2` with positive probability,
Park et al. 2021). Then every score vector :math:`a = \rho s_q p` has entries at least
:math:`\rho c_w^2\varepsilon r_{\min}` apart and at most :math:`\rho r_{\max}^2` in size, so

.. math::

    \rho = \frac{2\ln n + 3}{c_w^2\,\varepsilon\,r_{\min}}

meets the hypothesis of Lemma 1 (score gaps :math:`\ge 2\ln n + 3`), and Lemma 1 separates the
Boltzmann values of different contexts by :math:`(\ln n)^2 e^{-2\rho r_{\max}^2}`. With
:math:`c = \varepsilon/(4 r_{\max})` the layer maps tokens to norm at most
:math:`r = r_{\max} + \varepsilon/4` and separates outputs whose tokens or whose context *sets*
differ by

.. math::

    \delta = \frac{\varepsilon(\ln n)^2}{4\rho r_{\max}^2}\,e^{-2\rho r_{\max}^2}.

With the worst-case constant :math:`c_w = \sqrt{8/(\pi d)}/(|\mathcal V|+1)^2` this is the
paper's closed form (:attr:`ContextualMapping.theorem_delta`). The builder searches for a good
``w`` and uses its measured :math:`c_w`, which gives a smaller :math:`\rho` and a larger (still
astronomically small) :math:`\delta`; the paper's :math:`\delta` then holds a fortiori, because
:math:`\delta(\rho)` decreases in :math:`\rho`. Float64 cannot resolve such gaps, which is
why the checks certify them in interval arithmetic.

**Memorization.** :func:`memorizing_transformer` turns labelled data into one rank-1 attention
layer plus a ReLU FFN that reads the scalar "context id" :math:`w^\top y` of each attention
output :math:`y` and interpolates the labels with flat plateaus. Its :math:`\rho` is chosen
from the data so that the ids are resolvable in float64 (the theorem's :math:`\rho` is not).
"""

from __future__ import annotations

from constructions.boltzmann.approximation import (
    EquivariantApproximator,
    equivariant_approximator,
    quantizer,
)
from constructions.boltzmann.context import (
    ContextualMapping,
    contextual_mapping,
)
from constructions.boltzmann.memorization import (
    SEPARATION_FACTOR,
    MemorizingTransformer,
    context_id_error_bound,
    labelled_sequences,
    memorizing_transformer,
    token_only_ceiling,
)
from constructions.boltzmann.operator import (
    best_direction,
    best_spacing_direction,
    boltzmann,
    projection_constant,
    rank_one_head,
    separation,
    theorem_projection_constant,
)

# One-line TransformerLens exports for the docs pages (constructions.export.export_line).
TRANSFORMER_LENS_EXAMPLES = {
    "rank_one_head":
        "to_transformer_lens(rank_one_head(torch.ones(3, dtype=torch.float64), rho=2.0))",
    "contextual_mapping":
        "to_transformer_lens(contextual_mapping(torch.randn(6, 4, dtype=torch.float64), "
        "seq_len=3))",
    "memorizing_transformer":
        "to_transformer_lens(memorizing_transformer(*labelled_sequences(8, 3, 4, 10, 2)))",
    "equivariant_approximator":
        "to_transformer_lens(equivariant_approximator(lambda x: x.sum(-1), seq_len=2, d=1, "
        "grid=3))",
}


__all__ = [
    "SEPARATION_FACTOR",
    "TRANSFORMER_LENS_EXAMPLES",
    "ContextualMapping",
    "EquivariantApproximator",
    "MemorizingTransformer",
    "best_direction",
    "best_spacing_direction",
    "boltzmann",
    "context_id_error_bound",
    "contextual_mapping",
    "equivariant_approximator",
    "labelled_sequences",
    "memorizing_transformer",
    "projection_constant",
    "quantizer",
    "rank_one_head",
    "separation",
    "theorem_projection_constant",
    "token_only_ceiling",
]
