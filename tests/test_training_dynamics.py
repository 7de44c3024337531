"""Mutants and bad input for the training-dynamics area (theorems/areas/training_dynamics)."""

from __future__ import annotations

import pytest
import torch

from constructions.grokking_lazy_rich import (
    QuadraticNet,
    ntk_regression,
    quadratic_net,
    quadratic_test_loss,
    teacher_task,
)
from theorems.areas.training_dynamics import grokking
from theorems.evidence import expect_failure

# --- grokking as lazy to rich ---------------------------------------------------------------------


def loss_without_the_factor_two(g, delta):
    """The closed form with 2||Delta||_F^2 replaced by ||Delta||_F^2 (Isserlis miscounted)."""
    d = g.shape[-1]
    sym = (delta + delta.transpose(-1, -2)) / 2
    trace = sym.diagonal(dim1=-2, dim2=-1).sum(-1)
    return (g * g).sum(-1) / d + trace ** 2 / d ** 2 + (sym * sym).sum((-1, -2)) / d ** 2


def regression_without_feature_gradients(net, task):
    """NTK regression with the eps-term of the gradient dropped: the linear kernel's
    weights, which the closed form of the true kernel predictor does not match."""
    broken = QuadraticNet(net.W0, net.alpha, 0.0)
    return ntk_regression(broken, task)


@pytest.mark.mutant("training-dynamics.grokking-test-loss")
def test_a_miscounted_isserlis_term_fails_monte_carlo():
    # the pinned example (Delta = -beta beta^T / 2) fails first, so nothing is shrunk
    report = expect_failure(grokking.monte_carlo_check(loss=loss_without_the_factor_two))
    assert "Failing explicit example" in report


@pytest.mark.mutant("training-dynamics.grokking-test-loss")
def test_a_miscounted_isserlis_term_fails_the_exact_expectation():
    report = expect_failure(grokking.isserlis_check(loss=loss_without_the_factor_two,
                                                    dims=((2, 1),)))
    assert "Isserlis gives" in report


@pytest.mark.mutant("training-dynamics.grokking-ntk-level")
def test_the_wrong_kernel_misses_the_ntk_level():
    report = expect_failure(grokking.ntk_level_check(
        regression=regression_without_feature_gradients, cases=grokking.NTK_CASES[:1]))
    assert "misses the targets" in report or "NTK level" in report


@pytest.mark.mutant("training-dynamics.grokking-alpha-controls-laziness")
def test_frozen_features_do_not_beat_the_ntk_level():
    report = expect_failure(grokking.alpha_check({"steps": 1500, "seeds": 1},
                                                 freeze_features=True))
    assert "NTK level" in report


def test_the_closed_form_vanishes_at_the_rank_one_solution():
    """N/2 row pairs (u, u) -> (u + v, u - v) keep m and add (N/2) 2vv^T/N = vv^T to C; with
    v = beta / sqrt(alpha eps) that is beta beta^T/(alpha eps): zero test loss."""
    alpha, eps, width = 2.0, 0.5, 4
    u = torch.randn(width // 2, 3, generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64)
    beta = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    v = beta / (alpha * eps) ** 0.5
    net = QuadraticNet(torch.cat([u, u]), alpha, eps)
    assert float(net.test_loss(beta)) > 1.0            # unmoved: the target is not fitted
    with torch.no_grad():
        net.W.copy_(torch.cat([u + v, u - v]))
    assert float(net.test_loss(beta)) <= 1e-12           # a few dozen roundings of O(10) terms


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, match", [
    (lambda: quadratic_test_loss(torch.zeros(3), torch.zeros(2, 2)), ValueError, "delta"),
    (lambda: quadratic_test_loss([1.0], torch.zeros(1, 1)), TypeError, "g"),
    (lambda: teacher_task(0), ValueError, "dim"),
    (lambda: teacher_task(3, 2.5), TypeError, "train_size"),
    (lambda: quadratic_net(3, 2, alpha=-1.0), ValueError, "alpha"),
    (lambda: quadratic_net(3, 2, eps=float("nan")), ValueError, "eps"),
    (lambda: quadratic_net(3, 2, dtype=torch.int64), ValueError, "dtype"),
    (lambda: QuadraticNet(torch.zeros(3), 1.0, 0.1), ValueError, "W0"),
    (lambda: quadratic_net(3, 2)(torch.zeros(4, 5)), ValueError, "x"),
    (lambda: ntk_regression("net", teacher_task(3, 2)), TypeError, "net"),
    (lambda: ntk_regression(quadratic_net(3, 2), "task"), TypeError, "task"),
    (lambda: ntk_regression(quadratic_net(4, 2), teacher_task(3, 2)), ValueError, "D"),
])
def test_bad_input_is_rejected_with_the_parameter_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
