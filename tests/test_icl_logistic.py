"""Mutants and bad input for looped in-context logistic regression (Zhang & Cao 2026)."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from constructions.icl_logistic import (
    looped_ngd,
    max_margin_direction,
    ngd_step,
    normalized_margin,
    separable_task,
    signed_examples,
    softmax_update,
    svm_kkt_residual,
)
from theorems.areas.icl_logistic import (
    KKT_CERTIFIED,
    certificate_check,
    convergence_check,
    ngd_tolerance,
    one_step_check,
    svm_certificate_tolerances,
    trained_check,
)
from theorems.evidence import expect_failure
from theorems.numerics import gamma
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


@pytest.mark.training
@pytest.mark.mutant("icl-logistic.trained-layer")
def test_the_trained_layer_does_not_loop_like_an_unnormalized_construction():
    report = expect_failure(trained_check(reference=unnormalized))
    assert "away from the construction" in report


# --- the construction's views ----------------------------------------------------------------

def test_shapes_patterns_and_the_last_iterate():
    n, d, eta = 7, 3, 0.5
    X, y = separable_task(n, d, generator=torch.Generator().manual_seed(0))
    Z = signed_examples(X, y)
    model = looped_ngd(eta, loops=4)
    states, patterns = model.iterates(X, y), model.patterns(X, y)
    assert states.shape == (5, 3) and patterns.shape == (4, 7)
    # bit-identical: forward and iterates run the same _run (same ops, same order) and
    # forward returns its last state
    assert torch.equal(model(X, y), states[-1])
    # each weight: exp (< 1 ulp, 2u), an n-term sum, a division: gamma_{n+3} relative; summing
    # the n weights adds gamma_{n-1}: |sum - 1| <= gamma_{2n+2}
    assert float((patterns.sum(-1) - 1).abs().max()) <= gamma(2 * n + 2)
    # w_0 = 0 makes every score exactly 0: each weight is 1/n within gamma_{n+3} relative
    assert float((patterns[0] - 1 / n).abs().max()) <= gamma(n + 3) / n
    # the first loop moves by eta times the mean of z_i: the layer's weights (gamma_{n+3}),
    # eta z (u) and the n-term sum (gamma_{n-1}); the reference's sum and division gamma_n
    tol = gamma(3 * n + 3) * eta * Z.abs().mean(0)
    assert bool(((states[1] - eta * Z.mean(0)).abs() <= tol).all())
    batched = model.iterates(X[None].expand(2, -1, -1), y[None].expand(2, -1))
    # a batch of two may sum in another order than one task: compare each batched loop with
    # one unbatched layer step from the same state, within the layer-vs-layer rounding bound
    # (ngd_tolerance bounds layer vs oracle on both sides; each side bounds one layer)
    W_Q, W_K, W_V = model.weights(d)
    for b in range(2):
        for t in range(4):
            w = batched[b, t][None]
            step, _ = softmax_update(w, Z[None], W_Q, W_K, W_V)
            error = (batched[b, t + 1] - step[0]).abs()
            assert bool((error <= ngd_tolerance(w, Z[None], eta)[0]).all()), (b, t)


def test_the_svm_is_certified_and_bounds_every_margin():
    X, y = separable_task(12, 4, generator=torch.Generator().manual_seed(1))
    Z = signed_examples(X, y)
    w_star = max_margin_direction(X, y)
    residual = svm_kkt_residual(w_star, X, y)
    assert residual <= KKT_CERTIFIED  # the construction's own acceptance threshold
    # the residual bounds the violation of <w*, z_i> >= 1, computed by numpy; torch's d-term
    # dot products here may round otherwise: 2 gamma_d |z_i||w*| on top
    kappa = float(Z.norm(dim=-1).max() * w_star.norm())
    assert float((Z @ w_star).min()) >= 1 - residual - 2 * gamma(4) * kappa
    w = looped_ngd(1.0, loops=50)(X, y)
    margin = normalized_margin(w[None], X[None], y[None])
    ratio = margin * float(w_star.norm())
    excess, _ = svm_certificate_tolerances(w_star, Z, residual, w[None], margin, ratio)
    assert float(ratio) <= 1 + excess


def test_ngd_step_from_zero_is_eta_times_the_mean_signed_example():
    n, eta = 5, 2.0
    X, y = separable_task(n, 2, generator=torch.Generator().manual_seed(2))
    Z = signed_examples(X, y)
    step = ngd_step(torch.zeros(2, dtype=torch.float64), X, y, eta)
    # the oracle: p_i = exp(0 - lse), lse = log(n) (relative error u ln n + 2u), an n-term
    # gradient sum (gamma_n), eta g (u); the reference mean: gamma_n. Per entry of eta mean|z|
    tol = gamma(2 * n + 4 + math.ceil(math.log(n))) * eta * Z.abs().mean(0)
    assert bool(((step - eta * Z.mean(0)).abs() <= tol).all())


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
