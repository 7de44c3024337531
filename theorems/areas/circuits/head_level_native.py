r"""Ground truth at the head level on the native circuit cases: the majority head, one-step GD
and their dense variants, checked against the head-level claims of :mod:`.head_level`.

The six native cases (:mod:`constructions.circuits.native_cases`) are 1-layer graphs: the only
edge out of a head :math:`h` is :math:`h \to \mathrm{logits}`, so node-patching :math:`h` is
patching that one edge, and the edge-level claims' patch functions
(:func:`~constructions.circuits.majority_patched_output`,
:func:`~constructions.circuits.lsa_patched_prediction`,
:func:`~constructions.circuits.multi_head_patched_prediction`) and bounds
(:func:`.majority.necessity_bound`, :func:`.icl.move_bound`) apply to it as they stand. The
checks here are attached to the claims of :mod:`.head_level`, whose statements say what they
assert on these cases: :math:`H` is the real head (renamed ``a0.h1`` on the spurious-head
variant), :math:`\bar H` is empty but on the spurious-head variant, where node-patching the
spurious head leaves the prediction bit for bit, and node-patching the real head moves the
metric by at least the edge-level necessity bound of its output edge. Sources: as
:mod:`.head_level`'s; the statements and bounds are ours [D].
"""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.circuits import (
    Circuit,
    all_cases,
    attention_graph,
    lsa_magnitude,
    lsa_patched_prediction,
    majority_patched_output,
    multi_head_magnitude,
    multi_head_patched_prediction,
    resample_token,
)
from theorems.areas.circuits import icl, majority
from theorems.areas.circuits.head_level import (
    HL_NECESSARY,
    HL_PROMOTION,
    HL_SUFFICIENT,
    heads_of,
    promotion_check,
)
from theorems.evidence import check, evidence
from theorems.profiles import budget

MAJORITY_CASES = ("majority-head", "majority-head-qk-gauge", "majority-head-ln-rotation")
ICL_CASES = ("one-step-gd", "one-step-gd-null-space", "one-step-gd-spurious-head")
NATIVE_CASES = (*MAJORITY_CASES, *ICL_CASES)

# Case name -> (H, declared; the number of edges into or out of H outside the edge circuit):
# the real head, and its query and key inputs.
NATIVE_HEAD_CIRCUITS: dict[str, tuple[frozenset[str], int]] = {
    **{name: (frozenset({"a0.h0"}), 2) for name in NATIVE_CASES},
    "one-step-gd-spurious-head": (frozenset({"a0.h1"}), 2),
}

# The edge-level patch function and magnitude of each one-step-GD case (as .icl's checks use
# them: the multi-head ones on the spurious-head variant).
_LSA = {"one-step-gd": (lsa_patched_prediction, lsa_magnitude),
        "one-step-gd-null-space": (lsa_patched_prediction, lsa_magnitude),
        "one-step-gd-spurious-head": (multi_head_patched_prediction, multi_head_magnitude)}


def native_instance(name: str, first: int, second: float):
    """The case's (model, circuit) at ``(V, d)`` (majority cases) or ``(d, eta)`` (one-step
    GD), by the case's own builder. Built afresh each time (tiny models): a cache shared by the
    checks would hide a builder's call from whichever check ran second, and so from the
    dependency audit of the calls it records."""
    size = ({"vocab_size": first, "d": second} if name in MAJORITY_CASES
            else {"d": first, "eta": second})
    return all_cases()[name].instance(size)


def native_circuit(name: str, first: int, second: int) -> Circuit:
    """The case's edge circuit, for the promotion check's ``(S, n)`` read as ``(V, d)`` on a
    majority case and as ``(d, 1/2)`` on a one-step-GD case (its circuit reads only d)."""
    return native_instance(name, first, second if name in MAJORITY_CASES else 0.5)[1]


# The promotion check's sizes, (V, d) on the majority cases, d on the one-step-GD ones
SIZES = ((2, 3), (4, 8), (6, 12))


class NativeRun:
    """One case on one (clean, corrupted) pair: ``metric(heads)`` is the case's metric
    ``(1,)`` with every edge out of each head of ``heads`` patched (node patching), by the
    edge-level claims' patch function."""

    def __init__(self, name: str, resampling: tuple, shift: tuple, build=native_instance):
        self.name = name
        if name in MAJORITY_CASES:
            V, d, _, tokens, r, b = resampling
            self.model, self.circuit = build(name, V, d)
            self.clean = torch.tensor([tokens])
            self.corrupted = resample_token(self.clean, r, b, V)
            self.patch, self.magnitude = majority_patched_output, None
        else:
            d, eta, clean, corrupted = icl.label_shift_prompts(shift)
            self.model, self.circuit = build(name, d, eta)
            self.clean, self.corrupted = clean[None], corrupted[None]   # a batch of one
            self.patch, self.magnitude = _LSA[name]
        self.shift = shift

    def heads(self) -> frozenset[str]:
        return frozenset(f"a0.h{h}" for h in range(self.circuit.n_heads))

    def metric(self, heads) -> torch.Tensor:
        edges = [e for e in attention_graph(1, self.circuit.n_heads) if e.source in heads]
        output = self.patch(self.model, self.clean, self.corrupted, edges)
        return all_cases()[self.name].metric(output, self.clean, self.corrupted)

    def necessity_bound(self, base: torch.Tensor, value: torch.Tensor) -> float:
        """The edge-level necessity bound of the edge ``h -> logits`` (``value`` the metric
        with it patched, ``base`` unpatched)."""
        if self.name in MAJORITY_CASES:
            return majority.necessity_bound(self.model, self.clean, self.corrupted,
                                            float(base[0]), float(value[0]))
        # the head's term reads the corrupted prompt in all three inputs when its output
        # edge is patched, as in .icl's necessity check for a0.h0 -> logits
        return icl.move_bound(self.model, self.clean, self.corrupted, self.shift,
                              (self.corrupted,) * 3, self.magnitude)


def _head_level(name: str, circuit: Circuit) -> frozenset[str]:
    return heads_of(circuit)


# (a token resampling of .majority, a label shift of .icl): the edge-level checks' pinned cases
PINNED = ((majority.LONG_CASE, icl.SMALL_CASE), (majority.SHORT_CASE, icl.DENSE_CASE))


def _drawn(cases: tuple, fraction: float, minimum: int):
    """A drawn example runs one drawn case (``pick``) on the edge-level strategies' prompts;
    the pinned pairs run every case (pick -1)."""
    def decorate(test):
        for resampling, shift in PINNED:
            test = example(resampling=resampling, shift=shift, pick=-1)(test)
        return given(resampling=majority.token_resamplings(), shift=icl.label_shifts(),
                     pick=st.integers(0, len(cases) - 1))(budget(fraction, minimum=minimum)(test))
    return decorate


def _runs(cases, pick, resampling, shift, build):
    for name in (cases if pick < 0 else cases[pick:pick + 1]):
        yield NativeRun(name, resampling, shift, build)


def native_sufficiency_check(head_circuit=_head_level, cases=NATIVE_CASES,
                             build=native_instance):
    """Node-patch every head outside H on the native cases; ``head_circuit(name, circuit)``
    is H and ``build(name, first, second)`` the case's (model, circuit) (a mutant changes
    either)."""

    @_drawn(cases, 0.1, 2)  # one or two tiny predictions per case
    def test_head_level_native_sufficient(resampling, shift, pick):
        for run in _runs(cases, pick, resampling, shift, build):
            outside = run.heads() - head_circuit(run.name, run.circuit)
            base, patched = run.metric(()), run.metric(outside)
            # Bit for bit: on the five one-head cases outside is empty (H holds the only head)
            # and both are the same computation. On one-step-gd-spurious-head outside is the
            # spurious head a0.h0, whose term e_y^T W0_PV G W0_KQ z_q starts from W0_PV's
            # exact-zero label row: every entry of each product is a sum of products with an
            # exact 0, so the term is an exact (signed) 0 whichever prompt it reads (finite
            # prompts), the real head's term repeats the clean run's operations, and
            # fl(+-0 + t) = t; the residual edge is not patched.
            assert torch.equal(patched, base), (
                f"{run.name}: node-patching {sorted(outside)} moved the metric by "
                f"{float((patched - base).abs().max())}, not bit for bit")
        evidence.cases(1)
    return test_head_level_native_sufficient


def native_necessity_check(head_circuit=_head_level, cases=NATIVE_CASES, build=native_instance):
    """Node-patch each head of H alone on the native cases (``head_circuit``, ``build`` as
    for sufficiency)."""

    @_drawn(cases, 0.1, 2)  # two tiny predictions and the running bound per case
    def test_head_level_native_necessary(resampling, shift, pick):
        for run in _runs(cases, pick, resampling, shift, build):
            base = run.metric(())
            for head in sorted(head_circuit(run.name, run.circuit)):
                # node-patching head patches head -> logits, its only out-edge in a 1-layer
                # graph: the edge-level necessity bound of that edge applies as it stands
                value = run.metric({head})
                bound = run.necessity_bound(base, value)
                assert bound > 0, f"{run.name}: the edge-level bound {bound} is not positive"
                moved = float((value - base).abs().min())
                assert moved >= bound, (
                    f"{run.name}: node-patching {head} alone moved the metric by {moved} < "
                    f"the edge-level bound {bound}")
                evidence.margin(moved - bound)
        evidence.cases(1)
    return test_head_level_native_necessary


test_head_level_native_sufficient = check(HL_SUFFICIENT, "property")(native_sufficiency_check())
test_head_level_native_necessary = check(HL_NECESSARY, "property")(native_necessity_check())
test_head_level_native_promotion = check(HL_PROMOTION, "exhaustive")(
    promotion_check(declared=NATIVE_HEAD_CIRCUITS, circuit_of=native_circuit, sizes=SIZES))
