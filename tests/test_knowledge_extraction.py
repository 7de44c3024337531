"""Mutants and bad input for knowledge acquisition and extraction (Xu & Chen,
theorems/areas/training_dynamics/knowledge_extraction.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from constructions.knowledge_extraction import (
    enumerated_miss_probability,
    extraction_level,
    fact_world,
    miss_probability,
    pretraining_loss,
    storage_transformer,
    tie_break_accuracy,
)
from empirics.knowledge_extraction import ARMS
from theorems.areas.training_dynamics import knowledge_extraction
from theorems.evidence import expect_failure

# --- the covering law ---------------------------------------------------------------------------


def miss_if_one_template_suffices(M, K, n_f):
    """The law with C(M-1, K) for C(M-K, K): a fine-tuned set 'misses' when it avoids one
    fixed template, not all K of the tested fact's."""
    return Fraction(math.comb(M - 1, K), math.comb(M, K)) ** n_f


def reach_instead_of_miss(M, K, n_f):
    return 1 - miss_probability(M, K, n_f)


@pytest.mark.mutant("training-dynamics.knowledge-covering-law")
def test_a_one_template_law_fails_the_enumeration():
    report = expect_failure(
        knowledge_extraction.enumeration_check(law=miss_if_one_template_suffices))
    assert "enumeration" in report, report


@pytest.mark.mutant("training-dynamics.knowledge-covering-law")
def test_the_reach_probability_has_the_opposite_trends():
    """1 - P: at M = 2, K = 1 it is 1/2 (the bounds hold with equality) and 1 at K = 2."""
    report = expect_failure(knowledge_extraction.trends_check(law=reach_instead_of_miss,
                                                   grid=knowledge_extraction.GRID[:20]))
    assert "is not 0" in report, report


def miss_one_fine_tuned_fact_short(M, K, n_f):
    """The law with n_f - 1 fine-tuned facts: 1 at M = 2, K = n_f = 1, above (1 - K/M)^(K n_f)."""
    return miss_probability(M, K, max(n_f - 1, 0))


def miss_flat_in_multiplicity(M, K, n_f):
    """P at K = 1 for every K <= M/2 (0 beyond): the K-trend alone fails, at M = 4."""
    return miss_probability(M, 1, n_f) if 2 * K <= M else Fraction(0)


def miss_saturating_in_fine_tuning(M, K, n_f):
    """P with n_f capped at 1: not strictly decreasing in n_f."""
    return miss_probability(M, K, min(n_f, 1))


def miss_on_even_universes(M, K, n_f):
    """P at M rounded down to even: flat from M = 2 to M = 3."""
    return miss_probability(M - M % 2, K, n_f)


@pytest.mark.mutant("training-dynamics.knowledge-covering-law")
def test_a_law_above_the_bounds_is_caught():
    report = expect_failure(knowledge_extraction.trends_check(law=miss_one_fine_tuned_fact_short,
                                                   grid=knowledge_extraction.GRID[:20]))
    assert "above (1-K/M)^(K n_f)" in report, report


@pytest.mark.mutant("training-dynamics.knowledge-covering-law")
def test_a_law_flat_in_multiplicity_is_caught():
    report = expect_failure(knowledge_extraction.trends_check(law=miss_flat_in_multiplicity,
                                                   grid=knowledge_extraction.GRID[:20]))
    assert "not decreasing at K=1" in report, report


@pytest.mark.mutant("training-dynamics.knowledge-covering-law")
def test_a_law_saturating_in_fine_tuning_is_caught():
    report = expect_failure(knowledge_extraction.trends_check(law=miss_saturating_in_fine_tuning,
                                                   grid=knowledge_extraction.GRID[:20]))
    assert "not decreasing at n_f=1" in report, report


@pytest.mark.mutant("training-dynamics.knowledge-covering-law")
def test_a_law_flat_in_the_universe_is_caught():
    report = expect_failure(knowledge_extraction.trends_check(law=miss_on_even_universes,
                                                   grid=knowledge_extraction.GRID[:20]))
    assert "not increasing at M=2" in report, report


def test_the_law_at_hand_values():
    # M = 4, K = 2: C(2,2)/C(4,2) = 1/6 per fine-tuned fact; K = 1: 3/4
    assert miss_probability(4, 2, 2) == Fraction(1, 36)
    assert miss_probability(4, 1, 3) == Fraction(27, 64)
    assert miss_probability(4, 3, 1) == 0 and miss_probability(5, 2, 0) == 1
    assert extraction_level(4, 2, 1, 10) == 1 - Fraction(1, 6) + Fraction(1, 60)


# --- the construction ---------------------------------------------------------------------------


_PINNED = fact_world(4, 1, 4, 1, 2, n_finetune=1, seed=0)   # the check's @example world


def storage_fails_at(build, match: str) -> None:
    """The storage check rebuilt around ``build`` fails, and on its pinned example (the world
    above, beta = gap = 10) it fails at the assertion matching ``match``."""
    check = knowledge_extraction.storage_check(build=build)
    assert "Failing explicit example" in expect_failure(check)
    with pytest.raises(AssertionError, match=match):
        check.hypothesis.inner_test(case=(_PINNED, 10.0, 10.0))


def _question_rows(model):
    w = model.world
    return [w.question_token(r) for r in range(w.n_relations)]


def build_with_full_trigger(world, **kw):
    """The question token sent to every template of its relation, covered or not: it extracts
    facts that no fine-tuned fact reaches."""
    model = storage_transformer(world, **kw)
    for r, q in enumerate(_question_rows(model)):
        model.value_map[q, world.template_token(r, torch.arange(world.n_templates))] = 1.0
    return model


def build_with_low_threshold(world, **kw):
    model = storage_transformer(world, **kw)
    model.b_in.fill_(-0.4)      # one matching token (drive 1/2) now fires a neuron
    return model


def build_without_filtering(world, **kw):
    model = storage_transformer(world, **kw)
    model.key_logit.zero_()     # Q and A take half the attention: no neuron fires in Q&A
    return model


@pytest.mark.mutant("training-dynamics.knowledge-storage-construction")
def test_a_full_trigger_extracts_unreachable_facts():
    storage_fails_at(build_with_full_trigger, "Q&A accuracy differs")
    world = _PINNED
    qa = world.qa_rows()
    acc = tie_break_accuracy(build_with_full_trigger(world)(qa[:, :4]), qa[:, 4])
    assert bool((acc.reshape(world.n_people, -1)[~world.reachable()] == 1).all())


@pytest.mark.mutant("training-dynamics.knowledge-storage-construction")
def test_a_low_threshold_misses_the_pretraining_level():
    storage_fails_at(build_with_low_threshold, "pre-training loss off")
    rows = _PINNED.pretraining_rows()
    loss = torch.nn.functional.cross_entropy(
        build_with_low_threshold(_PINNED, beta=10.0)(rows[:, :2]), rows[:, 2])
    exact = pretraining_loss(_PINNED.n_vocab, 10.0)
    assert abs(float(loss) - exact) > exact / 2   # several neurons fire: the logits move


@pytest.mark.mutant("training-dynamics.knowledge-storage-construction")
def test_attention_that_does_not_filter_extracts_nothing():
    storage_fails_at(build_without_filtering, "Q&A accuracy differs")
    qa = _PINNED.qa_rows()
    logits = build_without_filtering(_PINNED)(qa[:, :4])
    assert bool((logits == 0).all())     # nothing fires, reachable facts included


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.knowledge-extraction-gd")
def test_a_violated_multiplicity_condition_breaks_the_covering_arm():
    # the covering arm with one template per fact and two fine-tuned people: the
    # hallucination arm's world, so its extraction falls below the threshold
    violated = {"n_templates": 16, "multiplicity": 1, "n_finetune": 2}
    report = expect_failure(knowledge_extraction.extraction_check({"arms": {"covering": violated}}))
    assert "covering arm" in report


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.knowledge-extraction-gd")
def test_five_pre_training_steps_do_not_store_the_facts():
    """(i) alone: the covering arm (run first) stopped after 5 of its 200 pre-training steps."""
    report = expect_failure(knowledge_extraction.extraction_check({"pretrain_steps": 5}))
    assert report.startswith("covering: the pre-training loss ends at"), report


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.knowledge-extraction-gd")
def test_a_covered_hallucination_arm_does_not_hallucinate():
    """(iii): the hallucination arm given the covering arm's world (every tested fact
    reachable, oracle level 1), so its full fine-tuning extracts as much as the covering arm;
    (i) and (ii) are the unmutated run's."""
    covered = dict(ARMS["covering"])
    report = expect_failure(knowledge_extraction.extraction_check(
        {"arms": {"covering": covered, "hallucination": covered}}))
    assert report.startswith("the arms' full fine-tuning extractions differ by"), report


def test_the_pinned_world_has_reachable_and_unreachable_facts():
    reach = _PINNED.reachable()[~_PINNED.finetune]
    assert bool(reach.any()) and not bool(reach.all())


def test_fine_tuned_facts_are_reachable_and_attention_filters_the_format():
    world = fact_world(6, 2, 5, 2, 3, seed=1)
    assert bool(world.reachable()[world.finetune].all())
    model = storage_transformer(world, gap=10.0)
    attn = model.attention(world.qa_rows()[:, :4])
    assert torch.allclose(attn[:, [0, 3]], torch.full_like(attn[:, [0, 3]],
                                                           math.exp(-10) / (2 + 2 * math.exp(-10))))


# --- bad input ----------------------------------------------------------------------------------

_WORLD = fact_world(4, 1, 3, 1, 2)


@pytest.mark.parametrize("call, error, match", [
    (lambda: miss_probability(4, 0, 1), ValueError, "multiplicity"),
    (lambda: miss_probability(3, 4, 1), ValueError, "multiplicity"),
    (lambda: miss_probability(4, 2, -1), ValueError, "n_finetune"),
    (lambda: miss_probability(4.0, 2, 1), TypeError, "n_templates"),
    (lambda: extraction_level(4, 2, 1, 0), ValueError, "n_vocab"),
    (lambda: enumerated_miss_probability(12, 6, 3), ValueError, "too many"),
    (lambda: fact_world(1), ValueError, "n_people"),
    (lambda: fact_world(4, n_finetune=4), ValueError, "n_finetune"),
    (lambda: fact_world(4, n_values=1), ValueError, "n_values"),
    (lambda: fact_world(4, seed=-1), ValueError, "seed"),
    (lambda: storage_transformer("world"), TypeError, "world"),
    (lambda: storage_transformer(_WORLD, gap=1.0), ValueError, "gap"),
    (lambda: storage_transformer(_WORLD, beta=0.0), ValueError, "beta"),
    (lambda: storage_transformer(_WORLD, dtype=torch.int64), ValueError, "dtype"),
    (lambda: storage_transformer(_WORLD)(torch.tensor([[0, 99]])), ValueError, "tokens"),
    (lambda: storage_transformer(_WORLD)(torch.tensor([0, 1])), ValueError, "tokens"),
    (lambda: pretraining_loss(1, 1.0), ValueError, "n_vocab"),
    (lambda: tie_break_accuracy(torch.zeros(3), torch.zeros(3, dtype=torch.long)), ValueError,
     "logits"),
    (lambda: tie_break_accuracy(torch.full((1, 2), math.nan), torch.zeros(1, dtype=torch.long)),
     ValueError, "logits"),
    (lambda: tie_break_accuracy(torch.zeros(2, 3), torch.zeros(3, dtype=torch.long)),
     ValueError, "targets"),
])
def test_bad_input_is_rejected_with_the_parameter_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- valid example arguments for tests/test_public_api.py ---------------------------------------

def _world():
    from constructions.knowledge_extraction import fact_world

    return fact_world(4, 1, 3, 1, 2)


PUBLIC_API_EXAMPLES = {
    "knowledge_extraction.miss_probability": lambda: {
        "n_templates": 4, "multiplicity": 2, "n_finetune": 1},
    "knowledge_extraction.extraction_level": lambda: {
        "n_templates": 4, "multiplicity": 2, "n_finetune": 1, "n_vocab": 5},
    "knowledge_extraction.enumerated_miss_probability": lambda: {
        "n_templates": 4, "multiplicity": 2, "n_finetune": 1},
    "knowledge_extraction.fact_world": lambda: {"n_people": 4, "n_relations": 1,
                                                "n_templates": 3, "multiplicity": 1,
                                                "n_values": 2},
    "knowledge_extraction.storage_transformer": lambda: {"world": _world()},
    "knowledge_extraction.pretraining_loss": lambda: {"n_vocab": 5, "beta": 2.0},
    "knowledge_extraction.tie_break_accuracy": lambda: {
        "logits": torch.zeros(2, 3, dtype=torch.float64),
        "targets": torch.tensor([0, 2])},
}
PUBLIC_API_ACCEPTED = {
    # no fine-tuned fact (n_finetune = 0) is a valid, fully unreachable case
    ("knowledge_extraction.miss_probability", "n_finetune"): ("zero",),
    ("knowledge_extraction.extraction_level", "n_finetune"): ("zero",),
    ("knowledge_extraction.enumerated_miss_probability", "n_finetune"): ("zero",),
    # more columns (a larger vocabulary) than the targets use is valid
    ("knowledge_extraction.tie_break_accuracy", "logits"): ("mismatched",),
}
