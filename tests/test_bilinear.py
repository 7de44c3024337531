"""Mutants and bad input for the bilinear-layer claims (theorems/areas/bilinear.py)."""

import pytest
import torch

from constructions.bilinear import BilinearLayer, bilinear_layer
from theorems.areas.bilinear import (
    quadratic_form_check,
    symmetric_part_check,
    tensor_identity_check,
)
from theorems.evidence import expect_failure


class FirstWeightTwice(BilinearLayer):
    """Builds B from W1 in both slots: right shape, wrong tensor."""

    def tensor(self):
        return torch.einsum("oh,hj,hk->ojk", self.W_O, self.W1, self.W1)


class GatedByRelu(BilinearLayer):
    """A ReLU on one branch: no longer a quadratic form (fails f(-x) = f(x))."""

    def forward(self, x):
        return (torch.relu(x @ self.W1.T) * (x @ self.W2.T)) @ self.W_O.T


def rebuilt(kind):
    def build(d, h, o, *, seed):
        layer = bilinear_layer(d, h, o, seed=seed)
        return kind(layer.W1.data, layer.W2.data, layer.W_O.data)
    return build


@pytest.mark.mutant("bilinear.tensor-identity")
def test_wrong_tensor_breaks_the_identity():
    expect_failure(tensor_identity_check(rebuilt(FirstWeightTwice)))


@pytest.mark.mutant("bilinear.symmetric-part")
def test_unhalved_symmetrisation_breaks_the_symmetric_part():
    expect_failure(symmetric_part_check(lambda B: B + B.transpose(1, 2)))


@pytest.mark.mutant("bilinear.quadratic-form")
def test_a_relu_breaks_the_quadratic_form():
    expect_failure(quadratic_form_check(rebuilt(GatedByRelu)))


@pytest.mark.mutant("bilinear.quadratic-form")
def test_a_wrong_tensor_breaks_polarization():
    """The layer itself is right (homogeneous of degree 2), its tensor is not: only the
    polarization identity, which reads B^s from the tensor, can fail."""
    check = quadratic_form_check(rebuilt(FirstWeightTwice))
    expect_failure(check)
    x, y = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0],
                                                                      dtype=torch.float64)
    with pytest.raises(AssertionError, match=r"^f\(x\+y\)"):
        check.hypothesis.inner_test(case=(3, 2, 2, 0, x, y), alpha=-1.0)


@pytest.mark.parametrize("call, error, name", [
    (lambda: bilinear_layer(0, 3), ValueError, "d_in"),
    (lambda: bilinear_layer(3, 2, 1.5), TypeError, "d_out"),
    (lambda: BilinearLayer(torch.ones(2, 3), torch.ones(3, 2)), ValueError, "W2"),
    (lambda: BilinearLayer(torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3)), ValueError,
     "W_O"),
    (lambda: bilinear_layer(3, 2)(torch.ones(4)), ValueError, "x"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()
