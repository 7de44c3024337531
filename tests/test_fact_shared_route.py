"""Mutants and bad input for the shared-route fact MLP (theorems/areas/fact_mlps/shared_route.py).

Each mutant rebuilds a check around a construction broken in one way (a key outside every
hat, a dropped gadget, a forward pass that shifts its code, an extra weight, half-size buckets)
or around a tightened claim, and asserts that the check fails at the assertion of the sentence
the mutant breaks.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from constructions import fact_shared_route as sr
from constructions.fact_codes import min_precision_bits
from tests.killed import failed_assertion, fails_at
from theorems.areas.fact_mlps import shared_route
from theorems.evidence import expect_failure

_CELLS: dict[bytes, tuple[torch.Tensor, torch.Tensor]] = {}


def cached_cells(build):
    """``build`` with the decoder's cells optimised once per set of values (the efficiency and
    precision checks build on the suite's fact sets, whose values differ by seed; the
    optimiser is most of a build's cost)."""
    def wrapped(keys, values, facts, **kw):
        if "cells" not in kw:
            key = values.numpy().tobytes()
            if key not in _CELLS:
                _CELLS[key] = sr.decodable_cells(values, 3, seed=kw.get("seed", 0))[:2]
            kw["cells"] = _CELLS[key]
        return build(keys, values, facts, **kw)
    return wrapped


def first_key_outside(keys, values, facts, **kw):
    """The lowest bound raised past the smallest projection: that key meets no gadget."""
    model = sr.shared_route_mlp(keys, values, facts, **kw)
    s = keys @ model.encoder.route
    with torch.no_grad():
        model.encoder.bounds[0] = (s.min() + model.encoder.bounds[1]) / 2
    return model


def dropped_gadget(keys, values, facts, **kw):
    """The first gadget's up-weights zeroed: its keys' codes become 0."""
    model = sr.shared_route_mlp(keys, values, facts, **kw)
    with torch.no_grad():
        model.encoder.up[0] = 0
    return model


def code_shifted_by_half(keys, values, facts, **kw):
    """Weights untouched, but the forward pass adds 1/2 to the code z: every key lands midway
    between two ladder points, past the ladder's tolerance (at most 1/2)."""
    model = sr.shared_route_mlp(keys, values, facts, **kw)
    model.encoder.hook_mlp_out.register_forward_hook(lambda module, args, out: out + 0.5)
    return model


def extra_weight(keys, values, facts, **kw):
    """One more weight tensor: a per-gadget copy of the route (what separate routes cost)."""
    model = sr.shared_route_mlp(keys, values, facts, **kw)
    B, d = model.encoder.up.shape
    model.encoder.routes = nn.Parameter(torch.zeros(B, d, dtype=torch.float64),
                                        requires_grad=False)
    return model


def half_size_buckets(keys, values, facts, **kw):
    return sr.shared_route_mlp(keys, values, facts, bucket_size=keys.shape[1] // 2, **kw)


@pytest.mark.mutant("fact-mlps.shared-route-storage")
def test_a_key_outside_every_hat_is_caught():
    fails_at(shared_route.storage_check(first_key_outside), "keys meet", F=64, seed=0)


@pytest.mark.mutant("fact-mlps.shared-route-storage")
def test_a_dropped_gadget_loses_facts_exactly():
    fails_at(shared_route.storage_check(dropped_gadget), "exact margin", F=64, seed=0)


@pytest.mark.mutant("fact-mlps.shared-route-storage")
def test_a_forward_pass_off_the_exact_function_is_caught():
    fails_at(shared_route.storage_check(code_shifted_by_half), "float64 recall", F=512,
             seed=2)


@pytest.mark.mutant("fact-mlps.shared-route-storage")
def test_an_uncounted_weight_is_caught():
    fails_at(shared_route.storage_check(extra_weight), "weights, the count says", F=64, seed=0)


@pytest.mark.mutant("fact-mlps.shared-route-efficiency")
def test_a_dropped_gadget_fails_efficiency():
    assert "recall" in failed_assertion(shared_route.efficiency_check(
        cached_cells(dropped_gadget), floors=((512, (0,), 3.0),)))


@pytest.mark.mutant("fact-mlps.shared-route-efficiency")
def test_half_size_buckets_store_too_few_bits_per_param():
    assert "bits/param <=" in failed_assertion(shared_route.efficiency_check(
        cached_cells(half_size_buckets), floors=((512, (0,), 3.0),)))


@pytest.mark.mutant("fact-mlps.shared-route-efficiency")
def test_a_tightened_floor_fails():
    assert "bits/param <=" in failed_assertion(shared_route.efficiency_check(
        cached_cells(sr.shared_route_mlp), floors=((512, (0,), 3.2),)))


@pytest.mark.mutant("fact-mlps.shared-route-precision")
def test_precision_one_bit_short_loses_a_fact():
    def one_bit_short(model, keys, values, facts):
        return min_precision_bits(model, keys, values, facts) - 1
    builders = (("shared-route", cached_cells(sr.shared_route_mlp)),)
    expect_failure(shared_route.precision_check(builders=builders, measure=one_bit_short))


@pytest.mark.mutant("fact-mlps.shared-route-precision")
def test_overstated_precision_is_caught():
    def one_bit_long(model, keys, values, facts):
        return min_precision_bits(model, keys, values, facts) + 1
    builders = (("shared-route", cached_cells(sr.shared_route_mlp)),)
    expect_failure(shared_route.precision_check(builders=builders, measure=one_bit_long))


@pytest.mark.mutant("fact-mlps.shared-route-beats-gd")
def test_gd_with_half_again_its_bits_wins():
    assert "GD stores more" in failed_assertion(shared_route.beats_gd_check(gd_advantage=1.5))


# --- bad input ---------------------------------------------------------------------------------

def test_cells_must_decode_and_match():
    keys, values, facts, cells = shared_route.drawn_fact_set(8, 0)
    with pytest.raises(TypeError, match="cells"):
        sr.shared_route_mlp(keys, values, facts, cells=cells[0])
    with pytest.raises(ValueError, match="cells"):
        sr.shared_route_mlp(keys, values, facts, cells=(cells[0], cells[1][:3]))
    with pytest.raises(ValueError, match="cells do not decode"):
        sr.shared_route_mlp(keys, values, facts, cells=(cells[0], -cells[1]))


def test_keys_with_one_projection_cannot_be_split():
    with pytest.raises(ValueError, match="cannot be split"):
        sr.split_sorted(torch.zeros(40, dtype=torch.float64), 32)


def test_bucket_size_above_d_is_rejected():
    keys, values, facts, cells = shared_route.drawn_fact_set(8, 0)
    with pytest.raises(ValueError, match="bucket_size"):
        sr.shared_route_mlp(keys, values, facts, bucket_size=33, cells=cells)


def test_undecodable_values_are_rejected():
    keys, values, facts, _ = shared_route.drawn_fact_set(8, 0)
    inside = torch.cat([values, values[:2].mean(0, keepdim=True)])  # a midpoint: not a vertex
    with pytest.raises(ValueError, match="not decodable"):
        sr.shared_route_mlp(keys, inside, facts)


def test_equal_keys_with_different_facts_are_infeasible():
    keys, values, facts, cells = shared_route.drawn_fact_set(8, 0)
    keys[1], facts[0], facts[1] = keys[0], 0, 1
    with pytest.raises(ValueError, match="infeasible"):
        sr.shared_route_mlp(keys, values, facts, cells=cells)


# --- the public-API fuzz's examples (tests/test_public_api.py) ---------------------------------

def _tiny_task() -> dict:
    """Eight facts on keys in R^4, three values in R^3 and the decoder cells that decode them
    (the identity: each value is its own point), so that no call pays the optimiser."""
    generator = torch.Generator().manual_seed(0)
    eye = torch.eye(3, dtype=torch.float64)
    return {"keys": torch.randn(8, 4, generator=generator, dtype=torch.float64),
            "values": eye, "facts": torch.tensor([0, 1, 2, 0, 1, 2, 0, 1]),
            "cells": (eye, eye)}


PUBLIC_API_EXAMPLES = {
    "fact_shared_route.principal_route": lambda: {"keys": _tiny_task()["keys"]},
    "fact_shared_route.split_sorted": lambda: {
        "projections": torch.arange(8, dtype=torch.float64), "bucket_size": 4},
    "fact_shared_route.cell_margin": lambda: {"values": torch.eye(3, dtype=torch.float64),
                                             "projection": torch.eye(3, dtype=torch.float64),
                                             "points": torch.eye(3, dtype=torch.float64)},
    "fact_shared_route.decodable_cells": lambda: {"values": torch.eye(3, dtype=torch.float64),
                                                 "code_dim": 2, "steps": 5},
    "fact_shared_route.shared_route_mlp": _tiny_task,
}
PUBLIC_API_ACCEPTED = {
    # the key dimension d, the value width d_v and the number of projections are free
    **{(f, p): ("mismatched",) for f, p in [
        ("fact_shared_route.principal_route", "keys"),
        ("fact_shared_route.split_sorted", "projections"),
        ("fact_shared_route.decodable_cells", "values"),
        ("fact_shared_route.shared_route_mlp", "keys")]},
    ("fact_shared_route.decodable_cells", "steps"): ("zero",),  # the initial Q and points
}
