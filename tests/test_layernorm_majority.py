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


@pytest.mark.training
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


def _spectral_upper(M: torch.Tensor) -> float:
    """An upper bound on |M|_2: the Frobenius norm, its own rounding covered by gamma_{k+2}."""
    return float(M.norm()) * (1 + gamma(M.numel() + 2))


def test_effective_queries_and_attention_are_gauge_invariant():
    model = majority_encoder(6, 4, "layernorm", seed=1, dtype=torch.float64)
    tokens = torch.randint(6, (3, 7), generator=torch.Generator().manual_seed(2))
    angles, pattern = query_angles(model, tokens), model.attention_pattern(tokens)
    with torch.no_grad():
        h = model.norm(model.embedding(tokens))                       # (B, n, d), unchanged
        W_Q, W_K = model.W_Q.weight.clone(), model.W_K.weight.clone()
    d, n = 4, tokens.shape[-1]
    A = torch.randn(4, 4, generator=torch.Generator().manual_seed(3),
                    dtype=torch.float64) + 4 * torch.eye(4, dtype=torch.float64)
    inverse = torch.linalg.inv(A)
    with torch.no_grad():  # W_Q -> A W_Q, W_K -> A^{-T} W_K leaves W_K^T W_Q unchanged
        model.W_Q.weight.copy_(A @ W_Q)
        model.W_K.weight.copy_(inverse.T @ W_K)
    # A posteriori, nothing assumed of inv: the computed inverse gives inv A = I + F with
    # |F|_2 <= |inv A - I| computed plus its rounding gamma_{d+1}(|inv||A| + I); the stored
    # W_Q' = A W_Q + E1, W_K' = inv^T W_K + E2 with |E1| <= gamma_d |A||W_Q|,
    # |E2| <= gamma_d |inv^T||W_K|. So with q = W_Q h, k = W_K h (exact) the exact scores move
    # by q^T F^T k + q^T A^T E2 h + (E1 h)^T inv^T k + (E1 h)^T E2 h, over sqrt(d) = 2 (exact)
    eye = torch.eye(d, dtype=torch.float64)
    F = _spectral_upper(inverse @ A - eye) + _spectral_upper(
        gamma(d + 1) * (inverse.abs() @ A.abs() + eye))
    E1 = _spectral_upper(gamma(d) * A.abs() @ W_Q.abs())
    E2 = _spectral_upper(gamma(d) * inverse.T.abs() @ W_K.abs())
    norm_A, norm_inv = _spectral_upper(A), _spectral_upper(inverse)
    # |q| <= |computed q| + gamma_d | |W_Q||h| |, the norms' own rounding gamma_{d+2}
    q_norm = ((h @ W_Q.T).norm(dim=-1) + gamma(d) * (h.abs() @ W_Q.abs().T).norm(dim=-1)
              ) * (1 + gamma(d + 2))
    k_norm = ((h @ W_K.T).norm(dim=-1) + gamma(d) * (h.abs() @ W_K.abs().T).norm(dim=-1)
              ) * (1 + gamma(d + 2))
    h_norm = h.norm(dim=-1) * (1 + gamma(d + 2))
    exact_move = (F * q_norm[..., :, None] * k_norm[..., None, :]
                  + norm_A * E2 * q_norm[..., :, None] * h_norm[..., None, :]
                  + E1 * norm_inv * h_norm[..., :, None] * k_norm[..., None, :]
                  + E1 * E2 * h_norm[..., :, None] * h_norm[..., None, :]) / 2
    # each computed score (two chained d-term products) is within gamma_{2d} of the products'
    # magnitudes, |W_Q||h| . |W_K||h| / 2, for the original and the gauged weights
    def magnitude(WQ, WK):
        return (h.abs() @ WQ.abs().T) @ (h.abs() @ WK.abs().T).mT / 2

    with torch.no_grad():
        rounding = gamma(2 * d) * (magnitude(W_Q, W_K)
                                   + magnitude(model.W_Q.weight, model.W_K.weight))
    delta = float((exact_move + rounding).amax(-1).max()) * (1 + gamma(8))
    # softmax: scores moved by at most delta give weights within a factor e^{+-2 delta}; each
    # computed softmax also rounds (n exps at 1 ulp, an n-term sum, a division: gamma_{n+6}
    # relative; the max shift s_j - max, |.| <= 2S with S the largest |score|, rounds by 2uS
    # in the exponent of the numerator and of each term of the sum: e^{4uS} - 1)
    S = float(model._scores(h).abs().max()) + delta
    softmax_rounding = gamma(n + 6) + math.expm1(4 * gamma(1) * S)
    tolerance = math.expm1(2 * delta) + 2 * softmax_rounding * math.exp(2 * delta)
    assert float((model.attention_pattern(tokens) - pattern).abs().max()) <= tolerance
    # angles: u = W_K^T W_Q h moves, exactly, by W_K^T F q + W_K^T inv^T... (the same terms
    # with h in place of k: |du| <= F |W_K|_2 |q| + |W_K|_2 |inv| E1 |h| + E2 (|A||q| + E1|h|));
    # each computed u is within gamma_{2d} |W_K^T||W_Q||h| of the exact, and the line through u
    # turns by at most asin(|du|/|u|) <= (pi/2) |du|/|u|; each computed angle adds acos's
    # modulus of continuity at its cosine's rounding gamma_{2d+4}: acos(1 - t) <= sqrt(2t)(1+t)
    with torch.no_grad():
        u = model.effective_queries(tokens)
        u_abs = (h.abs() @ W_Q.abs().T) @ W_K.abs() + (
            h.abs() @ model.W_Q.weight.abs().T) @ model.W_K.weight.abs()
    norm_WK = _spectral_upper(W_K)
    du = (F * norm_WK * q_norm + norm_WK * norm_inv * E1 * h_norm
          + E2 * (norm_A * q_norm + E1 * h_norm)) + gamma(2 * d) * u_abs.norm(dim=-1)
    low = u.norm(dim=-1) * (1 - gamma(d + 2)) - du
    assert bool((low > 0).all())
    t = gamma(2 * d + 4)
    turn = (math.pi / 2) * du / low + 2 * math.sqrt(2 * t) * (1 + t)
    shift = (query_angles(model, tokens) - angles).abs()
    assert bool((shift <= torch.rad2deg(turn) * (1 + gamma(4))).all())


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
