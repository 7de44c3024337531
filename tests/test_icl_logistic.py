"""Mutants and bad input for looped in-context logistic regression (Zhang & Cao 2026)."""

from __future__ import annotations

import functools

import pytest
import torch

from constructions.icl_logistic import (
    looped_ngd,
    max_margin_direction,
    ngd_step,
    normalized_margin,
    separable_task,
    signed_examples,
    svm_kkt_residual,
)
from theorems.areas.icl_logistic import (
    certificate_check,
    convergence_check,
    one_step_check,
    trained_check,
)
from theorems.evidence import expect_failure
from theorems.profiles import without_shrinking

unnormalized = functools.partial(looped_ngd, normalize=False)


def l1_svm(X, y):
    """The wrong norm: the minimum-l1-norm separator, whose l2 margin is below gamma*."""
    import cvxpy as cp

    Z = signed_examples(X, y).numpy()
    w = cp.Variable(Z.shape[1])
    cp.Problem(cp.Minimize(cp.norm1(w)), [Z @ w >= 1]).solve(solver="CLARABEL")
    return torch.as_tensor(w.value)


@pytest.mark.mutant("icl-logistic.one-ngd-step")
def test_dropping_the_softmax_normalization_is_not_a_normalized_step():
    expect_failure(without_shrinking()(one_step_check(build=unnormalized)))


@pytest.mark.mutant("icl-logistic.svm-direction")
def test_an_l1_svm_or_an_unnormalized_layer_breaks_the_svm_checks():
    expect_failure(certificate_check(svm=l1_svm, settings=without_shrinking(max_examples=20)))
    expect_failure(convergence_check(build=unnormalized))


@pytest.mark.mutant("icl-logistic.trained-layer")
def test_the_trained_layer_does_not_loop_like_an_unnormalized_construction():
    report = expect_failure(trained_check(reference=unnormalized))
    assert "away from the construction" in report


# --- the construction's views ----------------------------------------------------------------

def test_shapes_patterns_and_the_last_iterate():
    X, y = separable_task(7, 3, generator=torch.Generator().manual_seed(0))
    model = looped_ngd(0.5, loops=4)
    states, patterns = model.iterates(X, y), model.patterns(X, y)
    assert states.shape == (5, 3) and patterns.shape == (4, 7)
    assert torch.equal(model(X, y), states[-1])
    assert torch.allclose(patterns.sum(-1), torch.ones(4, dtype=torch.float64))
    # the first loop attends uniformly (w_0 = 0) and moves by eta times the mean of z_i
    assert torch.allclose(patterns[0], torch.full((7,), 1 / 7, dtype=torch.float64))
    assert torch.allclose(states[1], 0.5 * signed_examples(X, y).mean(0))
    batched = model.iterates(X[None].expand(2, -1, -1), y[None].expand(2, -1))
    assert torch.equal(batched[0], states) and torch.equal(batched[1], states)


def test_the_svm_is_certified_and_bounds_every_margin():
    X, y = separable_task(12, 4, generator=torch.Generator().manual_seed(1))
    w_star = max_margin_direction(X, y)
    assert svm_kkt_residual(w_star, X, y) <= 1e-9
    assert float((signed_examples(X, y) @ w_star).min()) >= 1 - 1e-9
    w = looped_ngd(1.0, loops=50)(X, y)
    assert float(normalized_margin(w, X, y)) <= 1 / float(w_star.norm()) * (1 + 1e-8)


def test_ngd_step_from_zero_is_eta_times_the_mean_signed_example():
    X, y = separable_task(5, 2, generator=torch.Generator().manual_seed(2))
    step = ngd_step(torch.zeros(2, dtype=torch.float64), X, y, 2.0)
    assert torch.allclose(step, 2.0 * signed_examples(X, y).mean(0), rtol=0, atol=1e-15)


# --- bad input ----------------------------------------------------------------------------------

X0, Y0 = separable_task(4, 2, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("call, error, match", [
    (lambda: looped_ngd(0.0, loops=2), ValueError, "eta"),
    (lambda: looped_ngd(-1.0, loops=2), ValueError, "eta"),
    (lambda: looped_ngd(float("nan"), loops=2), ValueError, "eta"),
    (lambda: looped_ngd(1.0, loops=0), ValueError, "loops"),
    (lambda: looped_ngd(1.0, loops=2.0), TypeError, "loops"),
    (lambda: looped_ngd(1.0, loops=2, normalize="yes"), TypeError, "normalize"),
    (lambda: looped_ngd(1.0, loops=2, dtype=torch.int64), ValueError, "dtype"),
    (lambda: looped_ngd(1.0, loops=2)(X0, torch.zeros(4)), ValueError, "y must hold"),
    (lambda: looped_ngd(1.0, loops=2)(X0, Y0[:3]), ValueError, "y must have shape"),
    (lambda: looped_ngd(1.0, loops=2)(X0[0], Y0[0]), ValueError, "X must"),
    (lambda: looped_ngd(1.0, loops=2)(X0.tolist(), Y0), TypeError, "X must"),
    (lambda: ngd_step(torch.zeros(3), X0, Y0, 1.0), ValueError, "w must"),
    (lambda: ngd_step(torch.zeros(2), X0, Y0, 0.0), ValueError, "eta"),
    (lambda: max_margin_direction(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]),
                                  torch.tensor([1.0, 1.0])), ValueError, "separable"),
    (lambda: max_margin_direction(X0[None], Y0[None]), ValueError, "one task"),
    (lambda: separable_task(0, 2), ValueError, "n must"),
    (lambda: separable_task(3, 2, batch=0), ValueError, "batch"),
])
def test_bad_input_is_rejected_with_the_parameter_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
