"""Mutants and bad input for knowledge acquisition and extraction (Xu & Chen,
theorems/areas/training_dynamics/knowledge.py)."""

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
from theorems.areas.training_dynamics import knowledge
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
    report = expect_failure(knowledge.enumeration_check(law=miss_if_one_template_suffices))
    assert "enumeration" in report


@pytest.mark.mutant("training-dynamics.knowledge-covering-law")
def test_the_reach_probability_has_the_opposite_trends():
    report = expect_failure(knowledge.trends_check(law=reach_instead_of_miss,
                                                   grid=knowledge.GRID[:20]))
    assert "not decreasing" in report or "is not 0" in report


def test_the_law_at_hand_values():
    # M = 4, K = 2: C(2,2)/C(4,2) = 1/6 per fine-tuned fact; K = 1: 3/4
    assert miss_probability(4, 2, 2) == Fraction(1, 36)
    assert miss_probability(4, 1, 3) == Fraction(27, 64)
    assert miss_probability(4, 3, 1) == 0 and miss_probability(5, 2, 0) == 1
    assert extraction_level(4, 2, 1, 10) == 1 - Fraction(1, 6) + Fraction(1, 60)


# --- the construction ---------------------------------------------------------------------------


_PINNED = fact_world(4, 1, 4, 1, 2, n_finetune=1, seed=0)   # the check's @example world


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
    report = expect_failure(knowledge.storage_check(build=build_with_full_trigger))
    assert "Failing explicit example" in report   # the pinned world, with unreachable facts
    world = _PINNED
    qa = world.qa_rows()
    acc = tie_break_accuracy(build_with_full_trigger(world)(qa[:, :4]), qa[:, 4])
    assert bool((acc.reshape(world.n_people, -1)[~world.reachable()] == 1).all())


@pytest.mark.mutant("training-dynamics.knowledge-storage-construction")
def test_a_low_threshold_misses_the_pretraining_level():
    report = expect_failure(knowledge.storage_check(build=build_with_low_threshold))
    assert "Failing explicit example" in report
    rows = _PINNED.pretraining_rows()
    loss = torch.nn.functional.cross_entropy(
        build_with_low_threshold(_PINNED, beta=10.0)(rows[:, :2]), rows[:, 2])
    exact = pretraining_loss(_PINNED.n_vocab, 10.0)
    assert abs(float(loss) - exact) > exact / 2   # several neurons fire: the logits move


@pytest.mark.mutant("training-dynamics.knowledge-storage-construction")
def test_attention_that_does_not_filter_extracts_nothing():
    report = expect_failure(knowledge.storage_check(build=build_without_filtering))
    assert "Failing explicit example" in report
    qa = _PINNED.qa_rows()
    logits = build_without_filtering(_PINNED)(qa[:, :4])
    assert bool((logits == 0).all())     # nothing fires, reachable facts included


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.knowledge-extraction-gd")
def test_a_violated_multiplicity_condition_breaks_the_covering_arm():
    # the covering arm with one template per fact and two fine-tuned people: the
    # hallucination arm's world, so its extraction falls below the threshold
    violated = {"n_templates": 16, "multiplicity": 1, "n_finetune": 2}
    report = expect_failure(knowledge.extraction_check({"arms": {"covering": violated}}))
    assert "covering arm" in report


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
