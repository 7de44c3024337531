"""The circuit-discovery harness: cases, scoring, the two methods at smoke size, the diagram.

The methods run on the TransformerLens export (the ``interop`` extra); without
transformer-lens those tests skip and say why, except under ``THEOREMS_REQUIRE_EXTRAS``.
"""

from __future__ import annotations

import importlib
import math
import os

import pytest
import torch

from constructions.circuit_cases import (
    CASES,
    CircuitCase,
    all_cases,
    case_for_builder,
    sample_next_token_pairs,
)
from constructions.circuit_diagram import circuit_dot, layout
from constructions.circuits import induction_circuit
from constructions.files import INTEROP_HINT
from constructions.induction_heads.task import previous_occurrence
from empirics import circuit_discovery as cd

CASE = CASES["two-layer-induction"]

PUBLIC_API_EXAMPLES = {
    "circuit_cases.all_cases": lambda: {},
    "circuit_cases.case_for_builder": lambda: {"path": CASE.builder},
    "circuit_cases.case_for_claim": lambda: {"claim_id": CASE.claims[0]},
    "circuit_cases.sample_next_token_pairs": lambda: {
        "generator": torch.Generator().manual_seed(0), "batch": 2, "vocab_size": 3,
        "max_len": 4},
    "circuit_cases.sample_earlier_occurrence_pairs": lambda: {
        "generator": torch.Generator().manual_seed(0), "batch": 2, "vocab_size": 3,
        "max_len": 4},
    "circuit_diagram.circuit_dot": lambda: {"circuit": induction_circuit("two_layer", 3, 4)},
    "circuit_diagram.layout": lambda: {"circuit": induction_circuit("two_layer", 3, 4)},
    "circuit_diagram.node_label": lambda: {"node": "a1.h0"},
}
PUBLIC_API_ACCEPTED = {
    # any "module:name" is a valid question: None answers "not a circuit case" (the bundle's use)
    ("circuit_cases.case_for_builder", "path"): ("unknown",),
    ("circuit_cases.case_for_claim", "claim_id"): ("unknown",),
}


@pytest.fixture(scope="module")
def smoke(transformer_lens):
    return cd.CIRCUIT_DISCOVERY("smoke", device="cpu")


def test_sampled_pairs_meet_the_corruption_conditions():
    clean, corrupted = sample_next_token_pairs(torch.Generator().manual_seed(1), 64,
                                               vocab_size=3, max_len=5)
    previous = previous_occurrence(clean)[:, -1]
    assert bool((previous >= 0).all()) and bool((previous + 1 < 4).all())
    rows = torch.arange(64)
    changed = (clean != corrupted).sum(-1)
    assert bool((changed == 1).all())                          # exactly one token resampled
    assert bool((corrupted[rows, previous + 1] != clean[rows, previous + 1]).all())
    assert bool((corrupted[rows, previous + 1] != clean[:, -1]).all())


@pytest.mark.interop
def test_both_methods_recover_the_exact_induction_circuit(smoke):
    # Exact ground truth: the 10 non-circuit edges change nothing (circuits.induction-
    # sufficient), each circuit edge moves the metric by > 1 (circuits.induction-necessary).
    for method in cd.METHODS:
        for key in ("auc", "precision"):
            assert smoke.metrics[f"two-layer-induction/{method}/{key}"] == 1.0, (method, key)
        # Bit for bit 1: the top-2 edges are the circuit, and patching the other 10 reaches
        # the final logits only through products with exact zero weights or as exact zero
        # differences (the argument of circuits.induction-sufficient, on TL's hooks here).
        assert smoke.metric("two-layer-induction", method, "faithfulness") == 1.0
        assert f"two-layer-induction-{method}" in smoke.figures
    rows = smoke.tables["scores"]["rows"]
    assert {(r[0], r[1]) for r in rows} >= {("two-layer-induction", m) for m in cd.METHODS}


@pytest.mark.interop
def test_scores_against_a_wrong_circuit_fall(transformer_lens):
    """A mutant ground truth (one circuit edge swapped for a zero edge) is not what the methods
    find: AUC and precision can fail."""
    model, circuit = CASE.instance("smoke")
    clean, corrupted = CASE.prompts(torch.Generator().manual_seed(0), 4)
    setup = cd.Setup(CASE, model, clean, corrupted)
    wrong = circuit.without("input->a1.h0<v>").with_edge(
        next(e for e in circuit.complement() if e.name == "a0.h0->logits"))
    for method in cd.METHODS:
        scored = cd.scores(setup, wrong, method)
        assert scored["auc"] < 1 and scored["precision"] == 0.5
        # faithfulness scores the circuit the method found, not the ground truth: still 1
        assert scored["faithfulness"] == 1.0


@pytest.mark.interop
def test_patching_every_edge_moves_the_metric_by_the_necessity_margin(transformer_lens):
    model, _ = CASE.instance("smoke")
    clean, corrupted = CASE.prompts(torch.Generator().manual_seed(2), 4)
    setup = cd.Setup(CASE, model, clean, corrupted)
    # With every edge patched, L1H0's inputs are all corrupted, so its edge to the logits
    # carries a zero difference: in exact arithmetic this is the minimality claim's patch of
    # the complement plus input->a1.h0<v>, which moves the metric by 2w >= 2/(1+omega) > 1.878
    # (circuits.induction-minimal). 1 leaves 0.878 for rounding of O(1) float64 sums.
    assert setup.patched_metric(()) - setup.patched_metric(setup.graph) > 1


def test_auc_and_precision_count_ties_against_the_method():
    truth = frozenset({"a", "b"})
    assert cd.roc_auc({"a": 2, "b": 2, "c": 0, "d": 0}, truth) == 1.0
    assert cd.roc_auc({"a": 1, "b": 0, "c": 0, "d": 0}, truth) == 0.75
    assert cd.roc_auc({"a": 0, "b": 0, "c": 0, "d": 0}, truth) == 0.5
    assert cd.precision_at({"a": 1, "b": 0, "c": 0, "d": 0}, truth, 2) == 0.5
    assert math.isnan(cd.roc_auc({"a": 1}, frozenset({"a"})))


def test_cases_are_found_by_either_builder():
    assert case_for_builder("constructions.induction_heads:two_layer_induction") is CASE
    assert case_for_builder("constructions.circuits:induction_circuit") is CASE
    assert case_for_builder("constructions.induction_heads:compact_induction") is (
        all_cases()["compact-induction"])
    assert case_for_builder("constructions.induction_heads:no_such_builder") is None
    assert "two-layer-induction" in all_cases()


def test_the_diagram_is_generated_from_the_circuit():
    circuit = induction_circuit("two_layer", 4, 8)
    dot = circuit_dot(circuit)
    assert dot.count("penwidth=2.2") == len(circuit.edges)      # the circuit, bold
    assert dot.count('style="dashed"') == len(circuit.complement())
    for edge in circuit.edges:
        assert edge.role in dot
    assert layout(circuit) == {"input": (0, 0), "a0.h0": (1, 0), "a1.h0": (2, 0),
                               "logits": (3, 0)}


@pytest.mark.parametrize("call, error, name", [
    (lambda: CASE.register(), ValueError, "name"),
    (lambda: case_for_builder(3), TypeError, "path"),
    (lambda: CASE.instance("huge"), ValueError, "size"),
    (lambda: CASE.instance(3), TypeError, "size"),
    (lambda: CASE.prompts("seed", 4), TypeError, "generator"),
    (lambda: CASE.prompts(torch.Generator(), 0), ValueError, "batch"),
    (lambda: sample_next_token_pairs(torch.Generator(), 2, vocab_size=2, max_len=5),
     ValueError, "vocab_size"),
    (lambda: sample_next_token_pairs(torch.Generator(), 2, vocab_size=3, max_len=2),
     ValueError, "max_len"),
    (lambda: circuit_dot("circuit"), TypeError, "circuit"),
    (lambda: CircuitCase(**{**vars(CASE), "sizes": {"smoke": {}}}), ValueError, "sizes"),
    (lambda: cd.CIRCUIT_DISCOVERY("smoke", device="cpu", cases=["no-such-case"]), ValueError,
     "cases"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()


def test_the_page_section_shows_the_published_scores_and_either_diagram(monkeypatch):
    from theorems import circuit_pages

    result = {"experiment": "circuit-discovery", "config_name": "full", "config": {"batch": 8},
              "tables": {"scores": {"header": ["case", "method", "ROC AUC"],
                                    "rows": [["two-layer-induction", "eap", 0.75],
                                             ["another-case", "eap", 0.5]]}}}
    text = circuit_pages.case_sections([result], claims=set())
    # the two-layer-induction case's own section: its score, not another case's
    own = text.split("Case `two-layer-induction`:")[1].split("## Circuit case:")[0]
    assert "| 0.75" not in own and "  - 0.75" in own and "0.5" not in own.split("ROC AUC")[1]
    assert "`circuits.induction-sufficient`" in text      # not on the site: named, not linked
    assert "{ref}`circuit-discovery <experiment-circuit-discovery>`" in text
    assert 'class="tt-circuit"' in text
    monkeypatch.setattr(circuit_pages.shutil, "which", lambda name: None)  # no Graphviz
    fallback = circuit_pages.case_sections([], claims=None)
    circuits = [case.instance("smoke")[1] for case in all_cases().values()]
    assert fallback.count('stroke-width="2.2"') == sum(len(c.edges) for c in circuits)
    assert fallback.count("stroke-dasharray") == sum(len(c.complement()) for c in circuits)
    assert "no published result" in fallback


# --- the cases that do not export: nnsight on their native hook points ------------------------

NATIVE = [name for name, case in all_cases().items() if case.native is not None]


@pytest.fixture(scope="module")
def nnsight():
    try:
        return importlib.import_module("nnsight")
    except ImportError:
        if os.environ.get("THEOREMS_REQUIRE_EXTRAS"):
            pytest.fail("nnsight is missing, but THEOREMS_REQUIRE_EXTRAS says every extra is "
                        "installed")
        pytest.skip(f"nnsight is not installed: {INTEROP_HINT}")


def test_the_majority_head_and_one_step_gd_cases_and_their_variants_are_registered():
    assert set(NATIVE) >= {"majority-head", "majority-head-qk-gauge",
                           "majority-head-ln-rotation", "one-step-gd",
                           "one-step-gd-null-space", "one-step-gd-spurious-head"}


@pytest.mark.interop
def test_nnsight_scores_the_cases_that_do_not_export(smoke, nnsight):
    for name in NATIVE:
        for method in cd.METHODS:
            # Off-circuit edges move the metric by at most the sufficiency bound (bit for bit 0
            # for one-step GD, circuits.icl-sufficient; rounding-sized for the majority head,
            # circuits.majority-sufficient), circuit edges by >= 1.9/n or the derived
            # delta eta |x_k|^2 / n: both methods rank the circuit first.
            assert smoke.metric(name, method, "auc") == 1.0, (name, method)
            assert smoke.metric(name, method, "precision") == 1.0, (name, method)
            faithfulness = smoke.metric(name, method, "faithfulness")
            if name.startswith("one-step-gd"):
                # patching the complement is bit for bit the clean run (circuits.icl-
                # sufficient and its variants): (m_clean - m_corr) / (m_clean - m_corr)
                assert faithfulness == 1.0, (name, method)
            else:
                # |m(complement) - m_clean| <= 2 x the majority-sufficient bound, which with
                # eta <= 2^-30 is <= 2 (2 e_w + 2 gamma_n (1 + e_w)) (1 + eps_V) < 2e-8 at
                # e_w <= 2.2e-9 (n = 8), over a gap of >= 1.9 / n > 0.23: |f - 1| < 1e-7
                assert abs(faithfulness - 1) < 1e-7, (name, method)
            assert f"{name}-{method}" in smoke.figures


@pytest.mark.interop
def test_nnsight_patching_is_the_native_patching(nnsight):
    from constructions.icl_variants import multi_head_patched_prediction
    from constructions.majority_circuit import majority_patched_output

    for name, patched_run in (("majority-head", majority_patched_output),
                              ("one-step-gd-spurious-head", multi_head_patched_prediction)):
        case = all_cases()[name]
        model, circuit = case.instance("smoke")
        clean, corrupted = case.prompts(torch.Generator().manual_seed(4), 4)
        setup = cd.setup_for(case, model, clean, corrupted)
        for patched in [(), circuit.edges[:1], circuit.complement(), setup.graph]:
            direct = case.metric(patched_run(model, clean, corrupted, patched), clean,
                                 corrupted).mean()
            # the same operations on the same operands: the corrupted run's activation at a
            # hook point is what the patched input gives there (constructions.native_cases)
            assert setup.patched_metric(patched) == float(direct), (name, patched)


@pytest.mark.interop
def test_a_mis_scored_method_gets_an_auc_below_one(nnsight, monkeypatch):
    """The scoring can fail: random scores (seeded) and inverted scores rank the circuit
    below other edges."""
    generator = torch.Generator().manual_seed(0)

    def random_scores(setup):
        return {e.name: float(torch.rand(1, generator=generator)) for e in setup.graph}

    def inverted_scores(setup):
        return {name: -s for name, s in cd.native_activation_patching(setup).items()}

    monkeypatch.setitem(cd.NATIVE_METHOD_FUNCTIONS, "random", random_scores)
    monkeypatch.setitem(cd.NATIVE_METHOD_FUNCTIONS, "inverted", inverted_scores)
    case = all_cases()["one-step-gd-spurious-head"]
    model, circuit = case.instance("smoke")
    clean, corrupted = case.prompts(torch.Generator().manual_seed(0), 4)
    setup = cd.setup_for(case, model, clean, corrupted)
    assert cd.scores(setup, circuit, "random")["auc"] < 1
    inverted = cd.scores(setup, circuit, "inverted")
    assert inverted["auc"] == 0.0 and inverted["precision"] == 0.0
    # the method found the wrong circuit: patching everything else leaves none of the gap
    assert inverted["faithfulness"] == 0.0
