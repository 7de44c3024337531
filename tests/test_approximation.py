"""Mutants and bad input for the approximation area (single-layer universality, virtual node,
NTK-attention prefix, DeepNorm)."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from constructions.equivariance import lift_positions
from constructions.universality import copy_first_token, random_single_layer
from constructions.virtual_node import (
    VirtualNodeRound,
    apply_feature_map,
    matching_linear_attention,
    virtual_node_round,
)
from theorems.areas.approximation import universality as ua
from theorems.areas.approximation import virtual_node as vn
from theorems.evidence import expect_failure

# --- universality --------------------------------------------------------------------------


def positioned_layer(d, **kwargs):
    """A random layer that sees positions (the lift): no longer permutation-equivariant."""
    return random_single_layer(d, positions=2.0, **kwargs)


@pytest.mark.mutant("approximation.equivariance-lower-bound")
def test_a_positional_encoding_breaks_equivariance():
    expect_failure(ua.lower_bound_check(build=positioned_layer))


def copy_with_positions(d, *, max_len, **_):
    """The copy construction (with positions) in place of a position-free layer."""
    return copy_first_token(d, max_len)


@pytest.mark.mutant("approximation.single-layer-universal")
def test_the_refutation_fails_once_the_layer_sees_positions():
    # with positions the as-stated check passes on the pinned pair, so the refutation must fail
    expect_failure(ua.refutation(build=copy_with_positions))


@pytest.mark.mutant("approximation.positional-copy")
def test_reading_the_wrong_position_breaks_the_copy():
    expect_failure(ua.copy_check(build=partial(copy_first_token, source=1)))


def test_lift_positions_rejects_bad_input():
    with pytest.raises(TypeError, match="x must be a torch"):
        lift_positions([1.0, 2.0])
    with pytest.raises(ValueError, match="x must have shape"):
        lift_positions(torch.ones(3))
    with pytest.raises(ValueError, match="scale must be finite"):
        lift_positions(torch.ones(2, 3), float("nan"))


def test_single_layer_builders_reject_bad_input():
    with pytest.raises(TypeError, match="d must be an int"):
        random_single_layer(1.5)
    with pytest.raises(ValueError, match="max_len must be given"):
        random_single_layer(2, positions=1.0)
    with pytest.raises(ValueError, match="positions must be finite and > 0"):
        random_single_layer(2, positions=-1.0, max_len=3)
    with pytest.raises(ValueError, match="source must be < max_len"):
        copy_first_token(2, 3, source=3)
    with pytest.raises(ValueError, match="max_len must be >= 2"):
        copy_first_token(2, 1)
    with pytest.raises(ValueError, match="beta must be finite and > 0"):
        copy_first_token(2, 3, beta=0.0)
    model = copy_first_token(2, 3)
    with pytest.raises(ValueError, match="x must have width 2"):
        model(torch.zeros(1, 3, 5))
    with pytest.raises(ValueError, match="x must have 3 tokens"):
        model(torch.zeros(1, 4, 2))
    with pytest.raises(ValueError, match="x must have 3 dims"):
        model(torch.zeros(3, 2))


# --- virtual node --------------------------------------------------------------------------


class MeanNormalisedRound(VirtualNodeRound):
    """The virtual node divides by the node count n instead of phi(q)^T z."""

    def aggregate(self, phi_q, phi_k, v):
        return phi_q @ (phi_k.transpose(-1, -2) @ v) / phi_k.shape[-2]


def mean_normalised_round(d, d_v, r, *, feature_map="exp", seed=0):
    base = virtual_node_round(d, d_v, r, feature_map=feature_map, seed=seed)
    return MeanNormalisedRound(base.W_Q, base.W_K, base.W_V, base.W_phi, feature_map)


@pytest.mark.mutant("approximation.virtual-node-linear-attention")
def test_a_wrong_normaliser_breaks_the_identity():
    expect_failure(vn.edge_free_check(build=mean_normalised_round))


@pytest.mark.mutant("approximation.virtual-node-linear-attention")
def test_local_messages_break_edge_invariance():
    expect_failure(vn.edge_free_check(local_weight=0.5))


@pytest.mark.mutant("approximation.virtual-node-linear-attention")
def test_a_feature_map_that_can_be_negative_lets_the_denominator_vanish():
    report = expect_failure(vn.edge_free_check(feature_maps=("identity",)))
    assert "'seed': -1" in report  # the pinned X = (1, -1), where phi(q)^T z = 0


def test_virtual_node_builders_reject_bad_input():
    with pytest.raises(ValueError, match="feature_map must be one of"):
        virtual_node_round(2, 2, 3, feature_map="relu")
    with pytest.raises(ValueError, match="r must be >= 1"):
        matching_linear_attention(2, 2, 0)
    with pytest.raises(TypeError, match="local_weight must be a real number"):
        virtual_node_round(2, 2, 3, local_weight="0")
    with pytest.raises(ValueError, match="feature_map must be one of"):
        apply_feature_map("tanh", torch.zeros(2), torch.zeros(2, 2))
    model = virtual_node_round(2, 2, 3)
    with pytest.raises(ValueError, match="x must have width 2"):
        model(torch.zeros(1, 4, 3), torch.zeros(1, 4, 4))
    with pytest.raises(ValueError, match="adjacency must have shape"):
        model(torch.zeros(1, 4, 2), torch.zeros(1, 4, 3))
    with pytest.raises(ValueError, match="W_K must have shape"):
        VirtualNodeRound(torch.zeros(2, 2), torch.zeros(3, 2), torch.zeros(2, 2),
                         torch.zeros(2, 3), "exp")
