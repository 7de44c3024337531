"""Mutants and bad input for the LN.4 majority experiment (Brody, Alon, Yahav 2023)."""

from __future__ import annotations

import pytest
import torch

from empirics.layernorm import (
    EXPERIMENT,
    class_counts,
    majority_batch,
    majority_encoder,
    majority_labels,
    query_angles,
)
from theorems.areas.layernorm import majority_learnable_check
from theorems.evidence import expect_failure
from theorems.numerics import gamma


def projection_dropped(num_classes, d, normalizer="layernorm", **kwargs):
    """The LayerNorm arm loses its projection onto 1-perp (the other arms are unchanged)."""
    if normalizer == "layernorm":
        normalizer = "no-projection"
    return majority_encoder(num_classes, d, normalizer, **kwargs)


@pytest.mark.mutant("layernorm.majority-learnable")
def test_dropping_the_projection_from_the_layer_norm_arm_breaks_the_alignment():
    report = expect_failure(majority_learnable_check(build=projection_dropped))
    assert "with LayerNorm" in report


def test_the_sampler_meets_its_margin_and_the_oracle():
    tokens, labels = majority_batch(64, 12, 5, 3, torch.Generator().manual_seed(0))
    counts = class_counts(tokens, 5)
    top = counts.topk(2, dim=-1).values
    assert bool((top[:, 0] - top[:, 1] >= 3).all())
    assert torch.equal(labels, counts.argmax(-1))
    assert torch.equal(majority_labels(tokens, 5), labels)


def test_effective_queries_and_attention_are_gauge_invariant():
    model = majority_encoder(6, 4, "layernorm", seed=1, dtype=torch.float64)
    tokens = torch.randint(6, (3, 7), generator=torch.Generator().manual_seed(2))
    angles, pattern = query_angles(model, tokens), model.attention_pattern(tokens)
    A = torch.randn(4, 4, generator=torch.Generator().manual_seed(3),
                    dtype=torch.float64) + 4 * torch.eye(4, dtype=torch.float64)
    with torch.no_grad():  # W_Q -> A W_Q, W_K -> A^{-T} W_K leaves W_K^T W_Q unchanged
        model.W_Q.weight.copy_(A @ model.W_Q.weight)
        model.W_K.weight.copy_(torch.linalg.inv(A).T @ model.W_K.weight)
    # a 4x4 inverse and two extra 4-term products: rounding of a few gamma(4) times cond(A)
    tolerance = 100 * gamma(4) * float(torch.linalg.cond(A))
    assert float((model.attention_pattern(tokens) - pattern).abs().max()) <= tolerance
    # angles come from acos(|cos|): an O(tolerance) change in cos moves an angle by at most
    # tolerance / sin(theta) rad, or sqrt(2 tolerance) rad near 0; bound both in degrees
    shift = float((query_angles(model, tokens) - angles).abs().max())
    assert shift <= 57.3 * (2 * tolerance) ** 0.5


def test_a_query_parallel_to_ones_attends_uniformly_only_after_layer_norm():
    tokens = torch.randint(6, (2, 9), generator=torch.Generator().manual_seed(4))
    for normalizer, uniform in (("layernorm", True), ("none", False)):
        model = majority_encoder(6, 4, normalizer, seed=0, dtype=torch.float64)
        with torch.no_grad():  # every key is (1.h_j) 1, so u_i = W_K^T W_Q h_i is ∥ 1
            model.W_K.weight.copy_(torch.ones(4, 4, dtype=torch.float64))
        angles = query_angles(model, tokens)
        # exactly parallel up to rounding: acos(1 - 1e-16) ~ 1.5e-8 rad ~ 1e-6 degrees
        assert float(angles.max()) <= 1e-6
        pattern = model.attention_pattern(tokens)
        deviation = float((pattern - 1 / 9).abs().max())
        # LN keys sum to 0 up to gamma(4)-rounding, so every score is O(1e-15) and the softmax
        # is 1/n to within exp(2 |s|) - 1 ~ 1e-14 (1e-12 leaves margin); without LN the scores
        # differ by O(1) and so does the pattern
        assert (deviation <= 1e-12) == uniform


@pytest.mark.parametrize("call, error, match", [
    (lambda: majority_batch(0, 8, 4, 1, torch.Generator()), ValueError, "batch"),
    (lambda: majority_batch(4, 8, 1, 1, torch.Generator()), ValueError, "num_classes"),
    (lambda: majority_batch(4, 8, 4, 9, torch.Generator()), ValueError, "min_margin"),
    (lambda: majority_encoder(4, 4, "batchnorm"), ValueError, "normalizer"),
    (lambda: majority_encoder(4, 1), ValueError, "d must"),
    (lambda: majority_encoder(4, 4, dtype="float32"), TypeError, "dtype"),
    (lambda: majority_labels(torch.tensor([[0, 1]]), 2), ValueError, "tied"),
    (lambda: majority_labels(torch.tensor([[0, 5]]), 2), ValueError, "tokens"),
    (lambda: majority_labels(torch.tensor([[0.0, 1.0]]), 2), TypeError, "tokens"),
    (lambda: EXPERIMENT("smoke", device="cpu", variants=["batchnorm"]), ValueError, "variants"),
])
def test_bad_input_is_rejected_with_the_parameter_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
