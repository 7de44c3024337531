"""Mutants and bad input for the Hopfield-update claims (theorems/areas/hopfield.py)."""

from functools import partial

import pytest
import torch

from constructions.hopfield import HopfieldUpdate, hopfield_update, twicing
from theorems.areas.hopfield import (
    convex_hull_check,
    erasure_check,
    fixed_point_check,
    residual_check,
    twicing_check,
    twicing_hull_refutation,
)
from theorems.evidence import expect_failure


class UnnormalisedWeights(HopfieldUpdate):
    """exp instead of softmax: weights no longer sum to one."""

    def weights(self, xi):
        return (self.beta * xi @ self.patterns).exp()


class Overshooting(HopfieldUpdate):
    """Reads out 1.5 X p: its fixed points leave the convex hull."""

    def forward(self, xi):
        return 1.5 * super().forward(xi)


@pytest.mark.mutant("hopfield.convex-hull")
def test_unnormalised_weights_leave_the_hull():
    expect_failure(convex_hull_check(UnnormalisedWeights))


@pytest.mark.mutant("hopfield.orthogonal-erasure")
def test_a_residual_stream_does_not_erase():
    expect_failure(erasure_check(partial(hopfield_update, residual=True)))


@pytest.mark.mutant("hopfield.fixed-points")
def test_overshooting_update_has_fixed_points_outside_the_hull():
    expect_failure(fixed_point_check(Overshooting))


@pytest.mark.mutant("hopfield.residual-keeps-orthogonal")
def test_without_the_residual_the_orthogonal_part_is_lost():
    expect_failure(residual_check(residual=False))


@pytest.mark.mutant("hopfield.twicing-identity")
def test_transposed_square_breaks_twicing():
    expect_failure(twicing_check(lambda A, V: (2 * A - A @ A.T) @ V))


def _convex_twicing(A, V):
    """A^2 V in place of (2A - A^2)V: A^2 is row-stochastic and nonnegative, so this output
    does stay in the hull, and the refutation must then fail to find its counterexample."""
    return A @ (A @ V)


@pytest.mark.mutant("hopfield.twicing-convex-hull")
def test_a_convex_correction_cannot_be_refuted():
    expect_failure(twicing_hull_refutation(_convex_twicing))


@pytest.mark.parametrize("call, error, name", [
    (lambda: hopfield_update(torch.ones(3), 1.0), ValueError, "patterns"),
    (lambda: hopfield_update(torch.ones(3, 2), -1.0), ValueError, "beta"),
    (lambda: hopfield_update(torch.ones(3, 2), "hot"), TypeError, "beta"),
    (lambda: hopfield_update(torch.ones(3, 2), 1.0)(torch.ones(4)), ValueError, "xi"),
    (lambda: twicing(torch.ones(2, 3), torch.ones(3, 1)), ValueError, "A"),
    (lambda: twicing(torch.ones(3, 3), torch.ones(2, 1)), ValueError, "A"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()
