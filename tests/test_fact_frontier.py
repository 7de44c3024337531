"""Mutants and bad input for the efficiency frontier (theorems/areas/fact_mlps/frontier.py).

Each mutant rebuilds a frontier check around a broken construction (a dropped bucket, a code
of one dimension too few, weights rounded below their precision) or a tightened claim, and
asserts with ``expect_failure`` that the check then fails.
"""

from __future__ import annotations

import pytest
import torch

from constructions import fact_codes as fc
from theorems.areas.fact_mlps import frontier
from theorems.evidence import expect_failure


def dropped_bucket(build):
    """The construction with its largest gadget's map zeroed (that bucket's keys lose codes)."""
    def broken(keys, values, facts, *, seed=0):
        model = build(keys, values, facts, seed=seed)
        with torch.no_grad():
            model.encoder.up[0] = 0
        return model
    return broken


def code_one_dimension_short(keys, values, facts, *, seed=0):
    """The scalar-code MLP with its decoder's projection one dimension short of the smallest
    that decodes every value."""
    model = fc.scalar_code_mlp(keys, values, facts, seed=seed)
    decoder = model.decoder
    n = decoder.projection.shape[0] - 1
    model.decoder = fc.LadderDecoder(decoder.knots, decoder.slopes[:, :n], decoder.offset[:n],
                                     decoder.projection[:n])
    return model


@pytest.mark.mutant("fact-mlps.multi-bucket-efficiency")
def test_dropped_bucket_breaks_multi_bucket():
    expect_failure(frontier.efficiency_check(dropped_bucket(fc.multi_bucket_mlp), sizes=(64,)))


@pytest.mark.mutant("fact-mlps.multi-bucket-efficiency")
def test_tightened_floor_fails_multi_bucket():
    expect_failure(frontier.efficiency_check(sizes=(64,), floor=0.5))


@pytest.mark.mutant("fact-mlps.frontier-construction")
def test_dropped_bucket_breaks_scalar_code():
    expect_failure(frontier.efficiency_check(dropped_bucket(fc.scalar_code_mlp), sizes=(512,),
                                             floor=1.0))


@pytest.mark.mutant("fact-mlps.frontier-construction")
def test_code_one_dimension_short_breaks_scalar_code():
    expect_failure(frontier.efficiency_check(code_one_dimension_short, sizes=(512,), floor=1.0))


@pytest.mark.mutant("fact-mlps.frontier-construction")
def test_tightened_bits_per_param_fails():
    expect_failure(frontier.efficiency_check(fc.scalar_code_mlp, sizes=(512,), floor=1.2))


@pytest.mark.mutant("fact-mlps.frontier-precision")
def test_rounded_below_precision_fails():
    """Weights rounded one bit below the measured precision lose a fact."""
    def one_bit_short(model, keys, values, facts):
        return fc.min_precision_bits(model, keys, values, facts) - 1
    expect_failure(frontier.precision_check(measure=one_bit_short))


@pytest.mark.mutant("fact-mlps.frontier-precision")
def test_overstated_precision_fails():
    def one_bit_long(model, keys, values, facts):
        return fc.min_precision_bits(model, keys, values, facts) + 1
    expect_failure(frontier.precision_check(measure=one_bit_long))


@pytest.mark.mutant("fact-mlps.gd-beats-frontier")
def test_gd_handicapped_loses():
    expect_failure(frontier.gd_frontier_check(advantage=0.4))


# --- bad input ------------------------------------------------------------------------------------

def small_task(F=40, seed=0):
    return frontier.task(F, seed)


@pytest.mark.parametrize("build", [fc.multi_bucket_mlp, fc.scalar_code_mlp])
def test_more_facts_than_capacity(build):
    keys, values, facts = small_task()
    with pytest.raises(ValueError, match=r"num_buckets=1 .*num_buckets\*bucket_size = 32"):
        build(keys, values, facts, num_buckets=1)


@pytest.mark.parametrize("build", [fc.multi_bucket_mlp, fc.scalar_code_mlp])
def test_bucket_larger_than_d(build):
    keys, values, facts = small_task()
    with pytest.raises(ValueError, match=r"bucket_size must be <= d = 32"):
        build(keys, values, facts, bucket_size=33)


@pytest.mark.parametrize("build", [fc.multi_bucket_mlp, fc.scalar_code_mlp])
def test_undecodable_values(build):
    keys, values, facts = small_task()
    values = values.clone()
    values[1] = values[0]                       # two equal values: neither beats the other
    facts = facts.clone()
    facts[:2] = torch.tensor([0, 1])
    with pytest.raises(ValueError, match=r"values are not decodable.*gamma = 0"):
        build(keys, values, facts)


@pytest.mark.parametrize("build", [fc.multi_bucket_mlp, fc.scalar_code_mlp])
def test_code_dim_too_small(build):
    keys, values, facts = small_task()
    with pytest.raises(ValueError, match=r"code_dim=1 is too small"):
        build(keys, values, facts, code_dim=1)


def test_conflicting_keys_and_seed_type():
    keys, values, facts = small_task()
    keys = keys.clone()
    keys[1] = keys[0]
    facts = facts.clone()
    facts[:2] = torch.tensor([0, 1])
    with pytest.raises(ValueError, match="facts are infeasible"):
        fc.scalar_code_mlp(keys, values, facts)
    with pytest.raises(TypeError, match="seed must be an int"):
        fc.scalar_code_mlp(*small_task(), seed=1.5)


def test_precision_arguments():
    keys, values, facts = small_task()
    model = fc.scalar_code_mlp(keys, values, facts)
    with pytest.raises(ValueError, match="bits"):
        fc.rounded(model, 0)
    with pytest.raises(ValueError, match="max_bits"):
        fc.min_precision_bits(model, keys, values, facts, max_bits=0)
    with pytest.raises(ValueError, match="exponent"):
        fc.counting_bound(8, -1)


@pytest.mark.training
@pytest.mark.mutant("fact-mlps.frontier-construction")
def test_published_frontier_tightened_fails():
    expect_failure(frontier.published_frontier_check(floor=2.5))


# --- the public-API fuzz's examples (tests/test_public_api.py) ---------------------------------

def _tiny_task() -> dict:
    """Eight facts on keys in R^4 with three values in R^3 (decodable: distinct unit vectors)."""
    generator = torch.Generator().manual_seed(0)
    keys = torch.randn(8, 4, generator=generator, dtype=torch.float64)
    values = torch.eye(3, dtype=torch.float64)
    return {"keys": keys, "values": values, "facts": torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])}


def _tiny_model() -> torch.nn.Module:
    return fc.scalar_code_mlp(**_tiny_task())


def _bucket_system() -> dict:
    task = _tiny_task()
    routes, thresholds, _ = fc.peel_buckets(task["keys"], 4, 0)
    return {"keys": task["keys"], "codes": task["facts"].to(torch.float64)[:, None],
            "routes": routes, "thresholds": thresholds}


PUBLIC_API_EXAMPLES = {
    "fact_codes.peel_buckets": lambda: {"keys": _tiny_task()["keys"], "bucket_size": 4,
                                        "seed": 0},
    "fact_codes.solve_buckets": _bucket_system,
    "fact_codes.multi_bucket_mlp": _tiny_task,
    "fact_codes.scalar_code_mlp": _tiny_task,
    "fact_codes.ladder_tolerance": lambda: {"points": torch.eye(3, dtype=torch.float64),
                                            "decoded": torch.eye(3, dtype=torch.float64)},
    "fact_codes.rounded": lambda: {"model": _tiny_model(), "bits": 24},
    "fact_codes.min_precision_bits": lambda: {"model": _tiny_model(), **_tiny_task()},
    "fact_codes.exponent_bits": lambda: {"model": _tiny_model(), "bits": 24},
    "fact_codes.counting_bound": lambda: {"bits": 24, "exponent": 8},
}
PUBLIC_API_ACCEPTED = {
    # the key dimension d, the value width d_v and the code width m are free: one longer is as
    # valid (solve_buckets' codes, and keys with routes of the same d, are checked together)
    **{(f, p): ("mismatched",) for f, p in [
        ("fact_codes.peel_buckets", "keys"), ("fact_codes.solve_buckets", "codes"),
        ("fact_codes.multi_bucket_mlp", "keys"), ("fact_codes.multi_bucket_mlp", "values"),
        ("fact_codes.scalar_code_mlp", "keys"), ("fact_codes.scalar_code_mlp", "values")]},
    ("fact_codes.counting_bound", "exponent"): ("zero",),  # no exponent bits: one binade
}
