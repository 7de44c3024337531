r"""The circuit of the one-step-GD linear self-attention under a label shift.

:func:`~constructions.icl_regression.one_step_gd` read as a 1-layer, 1-head model
(:mod:`constructions.circuits.icl`): shifting one context label changes the head's value
input and, through the head, the read-out; the query, key and residual edges carry nothing
the prediction depends on. Checked: sufficiency (bit for bit), necessity (each circuit edge
moves the prediction by the derived :math:`\delta\eta\|x_j\|^2/n` up to rounding) and
minimality, over Hypothesis prompts whose query repeats the shifted example. Sources: the
construction is the icl-regression area's (von Oswald et al. 2023; Ahn et al. 2023's code
layout); the circuit, corruption and bounds are ours [D].
"""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.circuits import (
    icl_circuit,
    lsa_magnitude,
    lsa_patched_prediction,
    multi_head_magnitude,
    multi_head_patched_prediction,
    null_space_variant,
    shift_label,
)
from constructions.circuits.icl_variants import SPURIOUS_HEADS, spurious_head_variant
from constructions.icl_regression import one_step_gd, prompt
from constructions.numerics import gamma, unit_roundoff
from theorems.areas.circuits._shared import CONSTRUCTIONS, PATCHING
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget
from theorems.proof_statements import Scope
from theorems.proving import coq_proof

VON_OSWALD = {"arxiv": "2212.07677", "ref": "von Oswald et al. (2023), ICML"}

SETTING = (r"Let $f = \texttt{one\_step\_gd}(d, \eta)$, $\eta > 0$: one linear-attention head "
           r"on tokens $z_j = (x_j; y_j)$, $j \le n$, and the query $z_q = (x_q; 0)$, with "
           r"value $W_{PV}z_j = y_je_y$, key $z_j$, query $W_{KQ}z_q$, $W_{KQ} = "
           r"\mathrm{diag}(-\eta I_d, 0)$, and prediction $\hat y = -(z_{q,y} + e_y^\top "
           r"W_{PV}\tfrac1n\sum_j z_jz_j^\top W_{KQ}z_q) = \eta\,x_q^\top\tfrac1n\sum_j "
           r"y_jx_j$. Its graph (1 layer, 1 head) has the 5 edges input $\to a_0\langle q"
           r"\rangle, \langle k\rangle, \langle v\rangle$, input $\to$ logits (the residual "
           r"$z_{q,y}$) and $a_0 \to$ logits. ")

CORRUPTION = (r"The clean prompt has $x_q = x_k$ for one context index $k$; the corrupted one "
              r"has $y_k$ replaced by $y_k + \delta$, $\delta \ne 0$. The circuit is $C = "
              r"\{\text{input} \to a_0\langle v\rangle,\ a_0 \to \text{logits}\}$, the metric "
              r"the prediction $m(P) = \hat y^P$. ")

ICL_SUFFICIENT = Claim(
    id="circuits.icl-sufficient",
    title="Under a label shift, patching the one-step-GD head's query, key and residual "
          "edges leaves its prediction bit for bit unchanged",
    statement=(SETTING + PATCHING + CORRUPTION + r"Patching the 3 edges outside $C$ leaves "
               r"$\hat y$ unchanged exactly in float64: the query column is the same in both "
               r"prompts, and the keys differ in their $y$ coordinate only, which $W_{KQ}$'s "
               r"zero $y$ row multiplies by an exact zero."),
    source=Source(where="circuit of the one-step-GD construction (this project)", tag="D",
                  **VON_OSWALD),
    kind="construction",
    construction=f"{CONSTRUCTIONS}:icl_circuit",
    depends_on=("icl-regression.one-step-gd",),
)

ICL_NECESSARY = Claim(
    id="circuits.icl-necessary",
    title="Patching either edge of the one-step-GD circuit moves the prediction by "
          "|delta| eta |x_k|^2 / n, less rounding",
    statement=(SETTING + PATCHING + CORRUPTION + r"For each $e \in C$, in float64 "
               r"$|m(\{e\}) - m(\emptyset)| \ge \big(|\delta|\eta\|x_k\|^2(1-\gamma_{d+3})/n "
               r"- \varepsilon\big)(1-8u)$, "
               r"$\varepsilon = \gamma_K(T_\emptyset + T_e)/(1-\gamma_K)$, "
               r"$K = n + 3(d+1) + 1$, $T$ the absolute-value evaluation of each run's head "
               r"term ($\texttt{lsa\_magnitude}$)."),
    source=Source(where="from the one-step-GD weights (this project)", tag="D",
                  **VON_OSWALD),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:icl_circuit",
    depends_on=("icl-regression.one-step-gd",),
    notes=(r"In exact arithmetic $m(\{e\}) - m(\emptyset) = \delta\eta\|x_k\|^2/n$ "
           r"(move_bound's derivation); the check asserts only the float64 bound on $|\cdot|$."),
)

ICL_MINIMAL = Claim(
    id="circuits.icl-minimal",
    title="No edge of the one-step-GD circuit can be dropped",
    statement=(SETTING + PATCHING + CORRUPTION + r"For each $e \in C$, patching $\bar C \cup "
               r"\{e\}$ moves the prediction by at least the necessity bound (with $T_e$ the "
               r"magnitude of the run whose head reads the corrupted prompt)."),
    source=Source(where="from sufficiency and necessity (this project)", tag="D",
                  **VON_OSWALD),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:icl_circuit",
    depends_on=("circuits.icl-sufficient", "circuits.icl-necessary"),
)


ICL_VARIANT = Claim(
    id="circuits.icl-variant",
    title="Dense weights in the read-out's null space keep the one-step-GD prediction and "
          "its circuit, bit for bit",
    statement=(SETTING + PATCHING + CORRUPTION + r"Let $f_N = \texttt{null\_space\_variant}"
               r"(f)$: rows $1..d$ of $W_{PV}$ and the last column of $W_{KQ}$ (not its $y$ "
               r"row) filled with dense Gaussian entries. On every prompt $f_N$ predicts "
               r"$f$'s $\hat y$ bit for bit in float64, and on $f_N$ the circuit $C$ is "
               r"sufficient (bit for bit), necessary and minimal with the bounds above ($T$ "
               r"evaluated with $f_N$'s weights)."),
    source=Source(where="null space of the one-step-GD read-out (this project)", tag="D",
                  **VON_OSWALD),
    kind="construction",
    construction=f"{CONSTRUCTIONS}:null_space_variant",
    depends_on=("circuits.icl-sufficient", "circuits.icl-necessary"),
)


ICL_SPURIOUS = Claim(
    id="circuits.icl-spurious-head",
    title="A dense spurious head before the one-step-GD head keeps its prediction bit for "
          "bit, and the circuit (renamed) is sufficient, necessary and minimal on it",
    statement=(SETTING + PATCHING + CORRUPTION + r"Let $f_S = \texttt{spurious\_head\_"
               r"variant}(f)$: two heads summed on one residual stream, $\hat y = -(z_{q,y} + "
               r"t_0 + t_1)$ with $t_h = e_y^\top W^h_{PV}GW^h_{KQ}z_q$; head 0 spurious, "
               r"$W^0_{KQ}$ dense Gaussian and $W^0_{PV}$ dense Gaussian in rows $1..d$ with "
               r"a zero label row; head 1 is $f$'s. Its graph (1 layer, 2 heads) has 9 "
               r"edges, and $C_S$ is $C$ with $a_0$ renamed $a_1$. On every prompt $f_S$ "
               r"predicts $f$'s $\hat y$ bit for bit in float64, and on $f_S$ the circuit "
               r"$C_S$ is sufficient (bit for bit), necessary and minimal with the bounds "
               r"above ($T$ summed over the heads)."),
    source=Source(where="spurious heads in the read-out's null space (this project)", tag="D",
                  **VON_OSWALD),
    kind="construction",
    construction=f"{CONSTRUCTIONS}.icl_variants:spurious_head_variant",
    depends_on=("circuits.icl-sufficient", "circuits.icl-necessary"),
)


# --- cases ------------------------------------------------------------------------------------

finite = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)


@st.composite
def label_shifts(draw):
    """(d, eta, X, y, k, delta) with ||x_k|| >= 1/2, |delta| >= 1/2."""
    d = draw(st.integers(1, 4))
    n = draw(st.integers(1, 8))
    eta = draw(st.floats(0.1, 2.0))
    X = draw(st.lists(st.lists(finite, min_size=d, max_size=d), min_size=n, max_size=n))
    y = draw(st.lists(finite, min_size=n, max_size=n))
    k = draw(st.integers(0, n - 1))
    X[k][0] = draw(st.one_of(st.floats(0.5, 2.0), st.floats(-2.0, -0.5)))
    delta = draw(st.one_of(st.floats(0.5, 4.0), st.floats(-4.0, -0.5)))
    return d, eta, X, y, k, delta


SMALL_CASE = (1, 0.1, [[0.5]], [0.0], 0, 0.5)   # the smallest derived move: 0.0125
DENSE_CASE = (4, 2.0, [[2.0, -2.0, 1.5, 2.0]] * 8, [2.0] * 8, 7, -4.0)


def label_shift_prompts(case):
    """(d, eta, clean, corrupted): the ``(d+1, n+1)`` prompt of a :func:`label_shifts` case
    and its label shift."""
    d, eta, X, y, k, delta = case
    X = torch.tensor(X, dtype=torch.float64)
    clean = prompt(X, torch.tensor(y, dtype=torch.float64), X[k])
    return d, eta, clean, shift_label(clean, k, delta)


# The checks below call it by this name: Hypothesis derandomises a check by its source, so
# renaming the call would change their drawn examples and evidence.
_prompts = label_shift_prompts


def move_bound(model, clean, corrupted, case, patched_run, magnitude=lsa_magnitude) -> float:
    """The derived least float64 move (claim): the exact move less both runs' rounding.
    ``magnitude`` sums the heads' magnitudes for a multi-head variant, whose extra heads'
    terms are exact zeros (so no further rounding)."""
    d, eta, X, _, k, delta = case
    n = len(X)
    x_k = torch.tensor(X[k], dtype=torch.float64)
    K = n + 3 * (d + 1) + 1
    t_clean = float(magnitude(model, clean, clean, clean))
    t_patched = float(magnitude(model, *patched_run))
    exact = abs(delta) * eta * float(x_k @ x_k) / n * (1 - gamma(d + 3))
    # each run's head term errs by <= gamma_K times its exact magnitude, which is <= the
    # computed one / (1 - gamma_K) (non-negative terms); the residual z_{q,y} = 0 and the
    # negation are exact. (1 - 8u): the move's subtraction, and this bound's own six float64
    # operations, each a relative u.
    epsilon = gamma(K) / (1 - gamma(K)) * (t_clean + t_patched)
    return (exact - epsilon) * (1 - 8 * unit_roundoff())


# --- checks -----------------------------------------------------------------------------------

def identity(model):
    return model


def _circuit(circuit, d, model, heads):
    """``circuit(d)``, its heads renamed by ``heads`` in a multi-head variant."""
    kept = circuit(d)
    return kept.relabelled(heads, model.n_heads, d + 1) if heads else kept


def sufficiency_check(build=one_step_gd, circuit=icl_circuit, variant=identity,
                      patch=lsa_patched_prediction, heads=None):
    """Patch the circuit's complement on ``variant(build(d, eta))``; a multi-head variant
    passes its ``patch`` function and the renaming ``heads`` of its circuit."""
    @given(case=label_shifts())
    @example(case=SMALL_CASE)
    @example(case=DENSE_CASE)
    @budget(0.3, minimum=4)  # two tiny predictions per example
    def test_sufficient(case):
        d, eta, clean, corrupted = _prompts(case)
        model = variant(build(d, eta))
        kept = _circuit(circuit, d, model, heads)
        reference = patch(model, clean, corrupted, ())
        patched = patch(model, clean, corrupted, kept.complement())
        # Bit-identity, not a tolerance: the query column (query and residual edges) is equal
        # in both prompts, and a patched key differs in its y entry only, which meets W_KQ's
        # zero y row: fl(y' * 0) = 0, so G @ W_KQ repeats the clean run's operands.
        assert torch.equal(patched, reference), (
            f"the prediction moved by {float((patched - reference).abs().max())} when the "
            f"edges outside the circuit were patched")
        evidence.cases(1)
    return test_sufficient


test_sufficient = check(ICL_SUFFICIENT, "property")(sufficiency_check())


def necessity_check(build=one_step_gd, circuit=icl_circuit, minimal=False,
                    variant=identity, patch=lsa_patched_prediction, heads=None,
                    magnitude=lsa_magnitude):
    """Patch each circuit edge alone (necessity) or with the whole complement (minimality);
    ``variant``, ``patch``, ``heads`` as for :func:`sufficiency_check`."""
    real = (heads or {}).get("a0.h0", "a0.h0")   # the one-step-GD head's name in the model

    @given(case=label_shifts())
    @example(case=SMALL_CASE)
    @example(case=DENSE_CASE)
    @budget(0.3, minimum=4)  # a few tiny predictions per example
    def test_necessary(case):
        d, eta, clean, corrupted = _prompts(case)
        model = variant(build(d, eta))
        kept = _circuit(circuit, d, model, heads)
        base = patch(model, clean, corrupted, ())
        for edge in kept.edges:
            patched = [edge, *kept.complement()] if minimal else [edge]
            names = {e.name for e in patched}
            # the inputs the patched run's head term reads (value, key, query); a spurious
            # head's term is an exact zero whatever it reads
            head_reads = [corrupted if f"{real}->logits" in names
                          or f"input->{real}<{x}>" in names else clean for x in "vkq"]
            bound = move_bound(model, clean, corrupted, case, head_reads, magnitude)
            assert bound > 0, f"the derived bound {bound} should be positive"
            moved = float((patch(model, clean, corrupted, patched) - base).abs().min())
            assert moved >= bound, (f"patching {edge.name}"
                                    f"{' and the complement' if minimal else ''} moved the "
                                    f"prediction by {moved} < {bound}")
            evidence.margin(moved - bound)
        evidence.cases(1)
    return test_necessary


test_necessary = check(ICL_NECESSARY, "property")(necessity_check())
test_minimal = check(ICL_MINIMAL, "property")(necessity_check(minimal=True))


def same_prediction_check(build=one_step_gd, variant=null_space_variant):
    @given(case=label_shifts())
    @example(case=DENSE_CASE)
    @budget(0.3, minimum=4)  # two tiny predictions per example
    def test_same_prediction(case):
        d, eta, clean, corrupted = _prompts(case)
        model = build(d, eta)
        # Bit-identity, not a tolerance (null_space_variant's docstring): predict reads only
        # W_PV's last row, and the dense W_KQ column meets the query's exact-zero label slot
        for Z in (clean, corrupted):
            assert torch.equal(variant(model).predict(Z), model.predict(Z)), (
                "the null-space variant changed the prediction by "
                f"{float((variant(model).predict(Z) - model.predict(Z)).abs().max())}")
        evidence.cases(1)
    return test_same_prediction


test_variant_same_prediction = check(ICL_VARIANT, "property")(same_prediction_check())
test_variant_sufficient = check(ICL_VARIANT, "property")(
    sufficiency_check(variant=null_space_variant))
test_variant_necessary = check(ICL_VARIANT, "property")(
    necessity_check(variant=null_space_variant))
test_variant_minimal = check(ICL_VARIANT, "property")(
    necessity_check(minimal=True, variant=null_space_variant))


def same_multi_head_prediction_check(build=one_step_gd, variant=spurious_head_variant):
    @given(case=label_shifts())
    @example(case=DENSE_CASE)
    @budget(0.3, minimum=4)  # two tiny predictions per example
    def test_same_prediction(case):
        d, eta, clean, corrupted = _prompts(case)
        model = build(d, eta)
        other = variant(model)
        # Bit-identity, not a tolerance (constructions.circuits.icl_variants): the spurious head's
        # term is a product with an exact-zero label row, an exact 0 for finite prompts, and
        # fl(0 + t) = t; the real head's term repeats the original's operations
        for Z in (clean, corrupted):
            assert torch.equal(other.predict(Z), model.predict(Z)), (
                "the spurious-head variant changed the prediction by "
                f"{float((other.predict(Z) - model.predict(Z)).abs().max())}")
        evidence.cases(1)
    return test_same_prediction


SPURIOUS = {"variant": spurious_head_variant, "patch": multi_head_patched_prediction,
            "heads": SPURIOUS_HEADS}
test_spurious_same_prediction = check(ICL_SPURIOUS, "property")(
    same_multi_head_prediction_check())
test_spurious_sufficient = check(ICL_SPURIOUS, "property")(sufficiency_check(**SPURIOUS))
test_spurious_necessary = check(ICL_SPURIOUS, "property")(
    necessity_check(magnitude=multi_head_magnitude, **SPURIOUS))
test_spurious_minimal = check(ICL_SPURIOUS, "property")(
    necessity_check(minimal=True, magnitude=multi_head_magnitude, **SPURIOUS))


# --- proved ---
# Coq, MathComp: the exact-arithmetic identities behind the bit-for-bit sentences.
test_sufficiency_proved = check(ICL_SUFFICIENT, "proved")(
    coq_proof("proofs/coq/circuits_icl.v", theorem="icl_sufficient",
              scope=Scope("part", "in exact arithmetic over any field, for every d, n, eta, X, "
                          "x_q and any clean and corrupted labels (y_k -> y_k + delta is one "
                          "case): yhat = eta x_q^T (1/n) sum_j y_j x_j, and patching any subset "
                          "of the 3 edges outside C leaves yhat unchanged; not the float64 "
                          "bit-for-bit sentence, which the property check asserts")))
test_variant_proved = check(ICL_VARIANT, "proved")(
    coq_proof("proofs/coq/circuits_icl.v", theorem="icl_variant",
              scope=Scope("part", "in exact arithmetic over any field: whatever values fill "
                          "rows 1..d of W_PV and the top d entries of W_KQ's last column (y row "
                          "of W_KQ zero, W_PV's y row (0, 1)), the variant's prediction equals "
                          "f's on every prompt and under every patching of the 4 input edges; "
                          "not the float64 bit-for-bit sentence nor the necessity and minimality "
                          "re-runs, which the property checks assert")))
