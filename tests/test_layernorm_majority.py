"""Mutants and bad input for the LN.4 majority experiment (Brody, Alon, Yahav 2023)."""

from __future__ import annotations

import math

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


def parallel_angle_bound(model, tokens: torch.Tensor) -> torch.Tensor:
    r"""Degrees: how far ``query_angles`` may put a query :math:`u_i = q_i W_K` from
    :math:`\mathbf 1` when :math:`W_K` is all ones (so :math:`u_i = s\mathbf 1`,
    :math:`s = \sum_k q_k`, exactly parallel in exact arithmetic).

    Each computed entry is a d-term sum of the exact products :math:`q_k \cdot 1`, within
    :math:`e = \gamma_d\sum_k|q_k|` of :math:`s` (the entries may sum in different orders);
    so :math:`\sin\theta \le e/(|s| - e)` with :math:`|s| - e \ge \min_j|\hat u_j| - 2e`,
    and :math:`1 - \cos\theta \le \sin^2\theta`. The computed cosine (a d-term dot product,
    a d-term sum of squares and its square root, :math:`\lVert\mathbf 1\rVert = 2` exact, a
    product and a division; entries of one sign, so relative) is within :math:`\gamma_{2d+4}`
    relative: :math:`|\cos| \ge 1 - \delta`, :math:`\delta = \sin^2\theta +
    \gamma_{2d+4}`. Then :math:`\arccos(1-\delta) = 2\arcsin\sqrt{\delta/2} \le
    \sqrt{2\delta}\,(1+\delta)`, and acos (1 ulp, assumed) and rad2deg round it by
    :math:`\gamma_4` relative."""
    d = model.d
    with torch.no_grad():
        q = model.W_Q(model.norm(model.embedding(tokens)))          # as effective_queries
        u = model.effective_queries(tokens)
    e = gamma(d) * q.abs().sum(-1)
    low = u.abs().amin(-1) - 2 * e
    assert bool((low > 0).all()), "the bound needs |s| > e"
    delta = (e / low) ** 2 + gamma(2 * d + 4)
    return torch.rad2deg((2 * delta).sqrt() * (1 + delta)) * (1 + gamma(4))


def uniform_pattern_bound(model, tokens: torch.Tensor) -> float:
    r"""How far a softmax row of the model's computed scores (all within :math:`S` of 0) may
    be from :math:`1/n`: the exact softmax of scores in :math:`[-S, S]` lies in
    :math:`[e^{-2S}, e^{2S}]/n`; the computed one shifts by the max (the difference rounds by
    :math:`u\cdot 2S`, a factor :math:`e^{2uS}`), takes n exps (1 ulp each, assumed), an
    n-term sum and a division (:math:`\gamma_{n+6}` relative); the deviation's subtraction
    and the rounded :math:`1/n` add :math:`\gamma_1/n` and :math:`u/n`."""
    n, u = tokens.shape[-1], gamma(1)
    with torch.no_grad():
        S = float(model._scores(model.norm(model.embedding(tokens))).abs().max())
    relative = math.expm1(2 * S) + math.exp(2 * S) * (math.expm1(2 * u * S) + gamma(n + 6))
    return (relative * (1 + gamma(1)) + gamma(1) + u) / n


def test_a_query_parallel_to_ones_attends_uniformly_only_after_layer_norm():
    tokens = torch.randint(6, (2, 9), generator=torch.Generator().manual_seed(4))
    deviations, tolerance = {}, None
    for normalizer in ("layernorm", "none"):
        model = majority_encoder(6, 4, normalizer, seed=0, dtype=torch.float64)
        with torch.no_grad():  # every key is (1.h_j) 1, so u_i = W_K^T W_Q h_i is ∥ 1
            model.W_K.weight.copy_(torch.ones(4, 4, dtype=torch.float64))
        angles = query_angles(model, tokens)
        # exactly parallel up to rounding (parallel_angle_bound: ~1e-6 degrees)
        assert bool((angles <= parallel_angle_bound(model, tokens)).all())
        pattern = model.attention_pattern(tokens)
        deviations[normalizer] = float((pattern - 1 / 9).abs().max())
        if normalizer == "layernorm":
            # LN keys sum to 0 up to rounding, so the scores are O(1e-15) and the pattern is
            # uniform within uniform_pattern_bound of its own computed scores
            tolerance = uniform_pattern_bound(model, tokens)
    assert deviations["layernorm"] <= tolerance
    # without LN the scores differ by O(1), and so does the pattern: beyond that allowance
    assert deviations["none"] > tolerance


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
