r"""Induction variants: spatial induction heads, attention sinks on Bigram-Backcopy, delay copy.

Three papers that extend the induction-heads area, each an induction-like copy mechanism with
an explicit construction here: *spatial induction heads* gather a cell's neighbourhood from a
flattened cellular automaton and match it against earlier configurations by Bayesian counting
(Kazemian et al. 2026, arXiv:2610.09124; only the abstract was readable); *active-dormant
heads* solve the Bigram-Backcopy task with a BOS sink whose value is drained to zero (Guo et
al. 2024, arXiv:2410.13835; task read from the authors' code); and *delay copy* tests whether
a copy learned at one distance transfers to others under RoPE, ALiBi or no positional encoding
(Nevermann & Gros 2026, arXiv:2609.11913; read in full). Everything that is not a sentence of
those sources is this project's derivation and is tagged D on its claim.

Topic modules: :mod:`.spatial_induction`, :mod:`.bigram_backcopy` (with
:mod:`.bigram_backcopy_dynamics`), :mod:`.delay_copy`; :mod:`.gd_scaling` holds the scaling
studies of the three papers' training trends.
"""
