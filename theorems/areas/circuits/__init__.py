r"""Ground-truth circuits: attention constructions as exact benchmarks for circuit discovery.

Circuit-discovery methods (activation and attribution patching, ACDC, EAP) are judged on models
whose circuit is known. Here the circuit follows from a construction's weights and is checked:
the edges of :func:`constructions.circuits.induction_mechanism` are exactly the non-zero ones,
and a circuit of :func:`~constructions.circuits.induction_circuit` is, relative to each of two
corruptions, sufficient (patching every other edge leaves the metric bit for bit unchanged),
necessary (patching any one circuit edge moves the metric by at least a bound derived from the
construction's margins) and minimal. :func:`~constructions.circuits.resample_next_token`
changes *what* the induction head copies (circuit: 2 edges, :mod:`.next_token`);
:func:`~constructions.circuits.resample_earlier_occurrence`, the issue's corruption, changes
*where* it attends (circuit: 3 edges, the previous-token head's value input, its composition
into the induction head's key, and the induction head's output; :mod:`.earlier_occurrence`).
Realistic variants (:mod:`constructions.circuits.variants`: dense spurious heads before the real
ones, and an exact Hadamard gauge of the value/output maps) compute the same function and carry
the same circuit, checked again on them; so do gauge variants of *both* induction
constructions (:mod:`constructions.circuits.gauges`, :mod:`.gauges`): a dense random rotation of
the residual stream, a dense non-orthogonal dyadic reparametrisation of every head's
:math:`W_Q/W_K` and :math:`W_V/W_O`, and a head permutation of the spurious-head variant.
The rotation and the reparametrisation are not bit-exact in float64, and the permutation and
the spurious-head variant need not be (their batched head sums may round in another order): the
checks compare against a running forward-error bound carried through the forward pass and
every edge-patched run (:mod:`._tracked`). The one-step-GD linear self-attention
(:mod:`constructions.circuits.icl`) is a third case: under a shift of one context label its
circuit is the label value edge and the head's read-out (:mod:`.icl`); the LayerNorm majority
head (:mod:`constructions.circuits.majority`) a fourth: under a token resampling, its value edge
and output (:mod:`.majority`), sufficient within a running rounding bound. Both have dense
variants on which their circuit claims re-run: for the majority head a query/key gauge by an
:math:`M` fixing :math:`\mathbf 1^\top` and a rotation of the residual stream by an :math:`R`
fixing :math:`\mathbf 1` (which commutes with the LayerNorm), each computing the same output
within a derived rounding bound (:mod:`.majority_variants`); for one-step GD dense weights in
the read-out's null space and a dense spurious head before the real one, both bit for bit
(:mod:`.icl`). The compact
induction construction (width 11, circle codes) has the same 2-edge next-token circuit, but
sufficient only within a derived bound: two edges outside it move the metric through
:math:`\langle u_a, u_{\tau'} - u_\tau\rangle \ne 0`, by at most :math:`2\bar\varepsilon
|u_\tau - u_{\tau'}|`, which each circuit edge's derived least move exceeds;
likewise its 3-edge earlier-occurrence circuit, where only the induction head's value input
moves the metric off the circuit (:mod:`.compact`). Stress cases on a saturated, bit-exact
induction model (:mod:`.stress`: backup heads, a distractor sub-circuit, superposed features in
one head) are benchmark cases too; on them and on the one-hot construction every minimal
circuit and every don't-care edge is enumerated, at the edge and at the head level, and each
case declares them (:mod:`.minimal_circuits`); every other case has ground truth at the head
level as well (:mod:`.head_level`). Patching runs on the
constructions' own hook points in float64
(:func:`~constructions.circuits.edge_patched_logits`), without TransformerLens.

Sources: the constructions and their exactness are the induction-heads area's (Sanford, Hsu,
Telgarsky 2024, arXiv:2408.14332; Bietti et al. 2023); the circuit statements, the corruptions,
the variants and the bounds are ours [D]; the one-step-GD construction is the icl-regression
area's (von Oswald et al. 2023, arXiv:2212.07677), the majority head the layernorm area's
(Brody, Alon, Yahav 2023, arXiv:2305.02582). The edge naming is that of the MIB circuit track
(Mueller et al. 2025; arXiv id 2504.13151 recalled [R]), read in a third-party converter to its
leaderboard format [S].
"""
