"""Mutants for the head-level ground truth on the native cases
(theorems.areas.circuits.head_level_native).

Each mutant rebuilds a check of the module around a wrong head-level circuit, a wrong edge
circuit or a broken model, and asserts with ``fails_at`` that the check fails, at the
assertion of the sentence it breaks, on a pinned example (``failed_assertion`` for the
exhaustive promotion check).
"""

from __future__ import annotations

import pytest
import torch
from killed import failed_assertion, fails_at

from constructions.circuits import Edge, all_cases, icl_circuit
from theorems.areas.circuits import head_level, head_level_native, icl, majority
from theorems.areas.circuits._cases import claims_of
from theorems.areas.circuits.head_level_native import native_instance

# the pinned example running every case: the edge-level checks' short and dense cases
PINNED = {"resampling": majority.SHORT_CASE, "shift": icl.DENSE_CASE, "pick": -1}
SPURIOUS = ("one-step-gd-spurious-head",)


def _spurious_head_reading_labels(name, d, eta):
    """The spurious-head variant whose spurious head writes into the label row: its term
    then reads the shifted label, so node-patching it (outside H) moves the prediction."""
    model, circuit = native_instance(name, d, eta)
    model = type(model)([type(h)(h.W_PV.clone(), h.W_KQ.clone(), mask_query=h.mask_query)
                         for h in model.heads])
    with torch.no_grad():
        model.heads[0].W_PV[-1] = 0.5
    return model, circuit


@pytest.mark.mutant("circuits.head-level-sufficient")
def test_a_spurious_head_writing_the_label_row_breaks_native_sufficiency():
    check = head_level_native.native_sufficiency_check(build=_spurious_head_reading_labels,
                                                       cases=SPURIOUS)
    fails_at(check, r"one-step-gd-spurious-head: node-patching \['a0.h0'\] moved the metric "
             r"by .*, not bit for bit", **PINNED)


@pytest.mark.mutant("circuits.head-level-necessary")
def test_the_spurious_head_in_the_native_head_circuit_is_not_necessary():
    # the spurious head's term is an exact zero: node-patching it alone moves nothing
    check = head_level_native.native_necessity_check(
        head_circuit=lambda name, circuit: head_level.heads_of(circuit) | {"a0.h0"},
        cases=SPURIOUS)
    fails_at(check, r"one-step-gd-spurious-head: node-patching a0.h0 alone moved the metric "
             r"by 0.0 < the edge-level bound", **PINNED)


def _half_output_majority(name, V, d):
    """The majority head with W_O halved: the move is about 1/n, while the bound, which reads
    the (intact) values, is about 2/n."""
    model, circuit = all_cases()[name].instance({"vocab_size": V, "d": d})
    with torch.no_grad():
        model.attention.W_O.mul_(0.5)
    return model, circuit


@pytest.mark.mutant("circuits.head-level-necessary")
def test_a_halved_majority_output_breaks_native_necessity():
    check = head_level_native.native_necessity_check(build=_half_output_majority,
                                                     cases=("majority-head",))
    fails_at(check, r"majority-head: node-patching a0.h0 alone moved the metric by .* < the "
             r"edge-level bound", **PINNED)


def _native(name):
    return {name: head_level_native.NATIVE_HEAD_CIRCUITS[name]}


@pytest.mark.mutant("circuits.head-level-promotion")
def test_an_unrenamed_spurious_head_circuit_promotes_the_spurious_head():
    # icl_circuit(d) not relabelled: its head a0.h0 is the spurious one in the variant
    check = head_level.promotion_check(
        declared=_native("one-step-gd-spurious-head"),
        circuit_of=lambda name, d, _: icl_circuit(d).relabelled({}, 2, d + 1),
        sizes=head_level_native.SIZES)
    report = failed_assertion(check)
    assert "the edge circuit touches the heads ['a0.h0'], not ['a0.h1']" in report, report


@pytest.mark.mutant("circuits.head-level-promotion")
def test_a_query_edge_in_the_majority_circuit_changes_the_finer_count():
    # input -> a0.h0<q> added: H is unchanged but one fewer edge of H lies outside C
    check = head_level.promotion_check(
        declared=_native("majority-head"),
        circuit_of=lambda name, S, n: head_level_native.native_circuit(name, S, n).with_edge(
            Edge("input", "a0.h0", "q", "added")), sizes=head_level_native.SIZES)
    report = failed_assertion(check)
    assert "1 edges into or out of H are outside the edge circuit, not 2" in report, report


def test_every_native_case_has_a_head_level_circuit():
    native = {name for name, case in all_cases().items() if case.native is not None}
    assert set(head_level_native.NATIVE_HEAD_CIRCUITS) == native
    assert set(head_level_native.NATIVE_CASES) == native
    for name in native:
        for claim in ("circuits.head-level-sufficient", "circuits.head-level-necessary",
                      "circuits.head-level-promotion"):
            assert claim in claims_of(all_cases()[name])
