r"""Dense variants of the LayerNorm majority head: the same function, the same circuit.

:mod:`constructions.circuits.majority_variants` gives two gauges of
:func:`~constructions.layernorm.majority_head` that make its axis-aligned weights
dense: a query/key reparametrisation by an :math:`M` fixing :math:`\mathbf 1^\top`, and a
rotation of the residual stream by an :math:`R` fixing :math:`\mathbf 1` (which commutes with
the LayerNorm). Checked: each computes the original's output within a running rounding bound
(both runs' attention within :math:`e_w/n` of uniform, and their values compared), and the
majority circuit's three claims (:mod:`.majority`) re-run on each variant with the variant's
own computed operands. Sources: the construction is the layernorm area's (Brody, Alon, Yahav
2023, Section 4); the variants and bounds are ours [D].
"""

from __future__ import annotations

import torch
from hypothesis import example, given

from constructions.circuits import ln_rotation_variant, majority_operands, qk_gauge_variant
from constructions.layernorm import majority_head
from constructions.numerics import gamma
from theorems.areas.circuits import majority
from theorems.areas.circuits._shared import CONSTRUCTIONS, PATCHING, cached
from theorems.areas.circuits.majority import (
    BRODY,
    CORRUPTION,
    LONG_CASE,
    SETTING,
    SHORT_CASE,
    score_bound,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget

VARIANTS = (r"The variants: $f_M = \texttt{qk\_gauge\_variant}(f)$ has $W_Q \to W_QM$, "
            r"$W_K \to W_KM^{-\top}$ with a dense invertible $M$, $\mathbf 1^\top M = "
            r"\mathbf 1^\top$ ($\texttt{fixing\_ones}$); $f_R = \texttt{ln\_rotation\_"
            r"variant}(f)$ has $E \to ER$ and $W_{Q,K,V} \to R^\top W_{Q,K,V}$ with a dense "
            r"orthogonal $R$, $R\mathbf 1 = \mathbf 1$ ($\texttt{ones\_rotation}$), so that "
            r"$\mathrm{LN}(eR) = \mathrm{LN}(e)R$. Both are stored in float64 as computed. ")

BOUND = (r"For two runs on the same prompt (model $f$ with computed values $\hat v$ and "
         r"weights $\hat A$, model $f'$ with $\hat v'$, $\hat A'$), $\eta$ the larger of both "
         r"models' score bounds, $e_w$ from $\eta$ as above, $S_a = \sum_j|\hat v_{ja}|$, "
         r"$S'_a = \sum_j|\hat v'_{ja}|$, $D_a = \sum_j|\hat v_{ja} - \hat v'_{ja}|$: "
         r"$B_a = \big(2e_wS_a + (1+e_w)D_a + \gamma_n(1+e_w)(S_a + S'_a)\big)/n$. ")

MAJ_VARIANT_FUNCTION = Claim(
    id="circuits.majority-variants-same-function",
    title="The dense query/key gauge and the LayerNorm-commuting rotation compute the "
          "majority head's output within the derived rounding bound",
    statement=(SETTING + VARIANTS + BOUND + r"For every prompt and each $f' \in \{f_M, "
               r"f_R\}$: every computed score of $f'$ is rounding-sized, $\eta \le 2^{-30}$, "
               r"every computed value of $f'$ is within $2^{-30}$ of the one-hot $e_{t_j}$, "
               r"and every output coordinate satisfies $|o'_{ia} - o_{ia}| \le B_a(1 + "
               r"\gamma_{16})$."),
    source=Source(where="gauges of the majority-head construction (this project)", tag="D",
                  **BRODY),
    kind="construction",
    construction=f"{CONSTRUCTIONS}:qk_gauge_variant",
    depends_on=("layernorm.uniform-attention",),
    notes=r"In exact arithmetic $f' = f$; the check asserts the float64 bounds.",
)

MAJ_VARIANT_CIRCUIT = Claim(
    id="circuits.majority-variants-circuit",
    title="The majority circuit carries over to the dense variants: sufficient, necessary "
          "and minimal",
    statement=(SETTING + PATCHING + CORRUPTION + VARIANTS + r"On $f_M$ and on $f_R$, with "
               r"each variant's own computed operands in the bounds: patching the 3 edges "
               r"outside $C$ moves every output coordinate by at most the bound of "
               r"$\texttt{circuits.majority-sufficient}$, and patching each $e \in C$ alone, "
               r"or with $\bar C$, moves the metric by at least the bound of "
               r"$\texttt{circuits.majority-necessary}$ (about $2/n$)."),
    source=Source(where="the majority circuit, carried by the gauges (this project)", tag="D",
                  **BRODY),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:majority_circuit",
    depends_on=("circuits.majority-variants-same-function", "circuits.majority-sufficient",
                "circuits.majority-necessary"),
)

VARIANT_BUILDERS = (qk_gauge_variant, ln_rotation_variant)


def same_function_check(build=majority_head, variants=VARIANT_BUILDERS):
    build = cached(build)
    variant_of = cached(lambda variant, V, d, seed: variant(build(V, d, seed=seed)))

    @given(case=majority.token_resamplings())
    @example(case=LONG_CASE)
    @example(case=SHORT_CASE)
    @budget(0.3, minimum=4)  # three tiny forward passes per example
    def test_same_function(case):
        V, d, seed, tokens, _, _ = case
        model, prompt, n = build(V, d, seed=seed), torch.tensor([tokens]), len(tokens)
        ops = majority_operands(model, prompt)
        output = model(prompt)[0]                                        # (n, V)
        for variant in variants:
            other = variant_of(variant, V, d, seed)
            other_ops = majority_operands(other, prompt)
            eta = max(score_bound(o["queries"][0], o["keys"][0], m.attention.scale)
                      for o, m in ((ops, model), (other_ops, other)))
            # the claim's first part: the gauge keeps every key orthogonal to the queries'
            # direction, so the scores stay rounding-sized; a broken gauge fails here
            assert eta <= 2.0**-30, f"{variant.__name__}: the score bound {eta} is not " \
                "rounding-sized"
            v, v_other = ops["values"][0], other_ops["values"][0]            # (n, V)
            # and the values stay the one-hot tokens up to rounding (LN(E) W_V = I); a gauge
            # that leaves a map unrotated fails here
            one_hot = torch.nn.functional.one_hot(prompt[0], V).to(v)
            eps_v = float((v_other - one_hot).abs().max())
            assert eps_v <= 2.0**-30, f"{variant.__name__}: values are {eps_v} from one-hot"
            e_w = (1 + torch.tensor(2 * eta).expm1().item()) * (1 + gamma(n + 4)) - 1
            S, S_other = v.abs().sum(0), v_other.abs().sum(0)
            D = (v - v_other).abs().sum(0)
            # B_a (claim): |sum_j (A - A') v| <= 2 e_w S_a / n, |sum_j A' (v - v')| <=
            # (1 + e_w) D_a / n, each computed n-term sum adds gamma_n (1 + e_w) S / n, and
            # the one-hot W_O = I product is exact (one non-zero term times 1). |fl(o' - o)|
            # (a relative u) and evaluating B (<= 10 operations on non-negative terms) are
            # covered by 1 + gamma_16.
            tol = ((2 * e_w * S + (1 + e_w) * D + gamma(n) * (1 + e_w) * (S + S_other)) / n
                   * (1 + gamma(16)))
            moved = (other(prompt)[0] - output).abs()                        # (n, V)
            assert bool((moved <= tol).all()), (
                f"{variant.__name__} moved the output by {float(moved.max())} > the derived "
                f"bound {tol.tolist()}")
            evidence.margin(float((tol - moved).min()))
        evidence.cases(1)
    return test_same_function


test_same_function = check(MAJ_VARIANT_FUNCTION, "property")(same_function_check())
# the circuit claims of .majority, re-run on each variant (its own operands in the bounds)
test_qk_gauge_sufficient = check(MAJ_VARIANT_CIRCUIT, "property")(
    majority.sufficiency_check(variant=qk_gauge_variant))
test_rotation_sufficient = check(MAJ_VARIANT_CIRCUIT, "property")(
    majority.sufficiency_check(variant=ln_rotation_variant))
test_qk_gauge_necessary = check(MAJ_VARIANT_CIRCUIT, "property")(
    majority.necessity_check(variant=qk_gauge_variant))
test_rotation_necessary = check(MAJ_VARIANT_CIRCUIT, "property")(
    majority.necessity_check(variant=ln_rotation_variant))
test_qk_gauge_minimal = check(MAJ_VARIANT_CIRCUIT, "property")(
    majority.necessity_check(minimal=True, variant=qk_gauge_variant))
test_rotation_minimal = check(MAJ_VARIANT_CIRCUIT, "property")(
    majority.necessity_check(minimal=True, variant=ln_rotation_variant))
