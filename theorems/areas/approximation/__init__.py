r"""Approximation and exact identities: what one layer or one block can express

Four seed papers claim what a single layer or block expresses, or what its constants balance:
a single-layer Transformer as a universal approximator (Gumaan 2025; refuted as stated, since
without positional information every such layer is permutation-equivariant), one
virtual-node message-passing round as a linear-attention layer (Cai et al. 2023, exact), an
infinitely long prefix folded into a finite summary (NTK-Attention, 2024, exact for a finite
feature map), and DeepNorm's residual and initialisation constants (Wang et al. 2022, which
balance an update budget exactly and keep one SGD step's output change flat in depth).

Four later seed papers add exact parts of larger claims: the tied special cases in which
attention and the MLP are exact energy gradients, and momentum on the residual stream as a
filter (Gai, Huang, Wu 2026); the low-rank Taylor truncation of exp(QKᵀ) behind
almost-linear-time attention gradients (Liang et al. 2024); small associative algebras whose
product, used in an FFN, meets the Alder-Strassen rank bound; and what the prefix summary of
Nautile-370M's SeqCond Attention holds (Chenebaux 2026), on the definition in the author's code.

The topic modules: :mod:`.universality`, :mod:`.virtual_node`, :mod:`.prefix_attention`,
:mod:`.deepnorm`, :mod:`.momentum_streams`, :mod:`.polynomial_method`, :mod:`.algebra_rank` and
:mod:`.seqcond`. Tolerances are first-order rounding bounds (``theorems.numerics.gamma``) on
the whole computation compared, derived beside each check, where the arithmetic is not exact.
"""
