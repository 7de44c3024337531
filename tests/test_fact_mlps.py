"""Mutants and bad input for the fact-storing MLPs area.

Every mutant rebuilds a check of ``theorems.areas.fact_mlps`` around a broken construction (a width
one below the threshold, a perturbed solve, ROME with the wrong covariance, an MLP swap that
does not swap), a tightened bound, or a broken oracle, and asserts with ``expect_failure``
that the check then fails. The empirical mutants run tiny configs, so they stay cheap.
"""

from __future__ import annotations

import copy
import functools
import math
import pickle

import numpy as np
import pytest
import torch

from constructions import fact_mlps as fm
from empirics import fact_mlps as experiments
from theorems.areas.fact_mlps import (
    associative_memories,
    gradient_descent,
    rome,
    rome_gd,
    storage,
    storage_readout,
)
from theorems.evidence import expect_failure
from theorems.profiles import without_shrinking

# --- broken constructions ------------------------------------------------------------------------

def below_threshold(keys, values, facts, *, seed=0):
    """The encoder-decoder one hidden unit narrower than the threshold (at least 1 unit)."""
    keys_unique, index = torch.unique(keys, dim=0, return_inverse=True)
    facts_unique = torch.empty(len(keys_unique), dtype=torch.long).scatter_(0, index, facts)
    m = fm.smallest_code_dim(values, facts_unique, seed)
    h = fm.threshold_hidden(len(keys_unique), keys.shape[1], m)
    model, _ = fm.assemble_encoder_decoder(keys_unique, values, facts_unique,
                                           hidden=max(1, h - 1), code_dim=m, seed=seed)
    return model


def perturbed_solve(keys, values, facts, *, seed=0):
    """The encoder-decoder with its solved matrix A off by 1e-6 relative."""
    model = fm.encoder_decoder_mlp(keys, values, facts, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.up += 1e-6 * model.up.norm() * torch.randn(model.up.shape, generator=generator,
                                                         dtype=model.up.dtype)
    return model


def twice_as_wide(keys, values, facts, *, seed=0):
    """A wasteful encoder-decoder: twice the threshold width."""
    m = fm.smallest_code_dim(values, facts, seed)
    hidden = 2 * fm.threshold_hidden(len(torch.unique(keys, dim=0)), keys.shape[1], m)
    return fm.encoder_decoder_mlp(keys, values, facts, hidden=hidden, seed=seed)


def rome_wrong_covariance(W, C, k_star, v_star):
    """ROME with the identity for the keys' second moment."""
    return fm.rome_edit(W, torch.eye(C.shape[0], dtype=C.dtype), k_star, v_star)


def rome_perturbed(W, C, k_star, v_star):
    """ROME's update with its scale off by 1e-6 relative."""
    return W + (1 + 1e-6) * (fm.rome_edit(W, C, k_star, v_star) - W)


def rome_plus_noise(W, C, k_star, v_star):
    """ROME's update plus a full-rank perturbation of relative size 1e-8."""
    delta = fm.rome_edit(W, C, k_star, v_star) - W
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(W.shape, generator=generator, dtype=W.dtype)
    return W + delta + 1e-8 * float(delta.norm()) * noise


def rome_paper_variant(W, C, k_bar, k_prompt, v_star):
    """The paper's update built from k_bar alone, in place of the released code's."""
    return fm.rome_edit(W, C, k_bar, v_star)


class StuckSwap(fm.FactTransformer):
    """A fact transformer whose swap_mlp keeps the old MLP."""

    def swap_mlp(self, mlp):
        return self.mlp


def stuck_transformer(keys, values, mlp, **kwargs):
    model = fm.fact_transformer(keys, values, mlp, **kwargs)
    model.__class__ = StuckSwap
    return model


def tightened_jl(num_values: int, gamma: float) -> int:
    """The JL code dimension with its constant 4 replaced by 0.01."""
    eps = min(gamma / 2, 0.5)
    return max(1, math.ceil(0.01 * math.log(8 * num_values**2) / (eps**2 - eps**3)))


# --- FM.1 / FM.3 -------------------------------------------------------------------------------

@pytest.mark.mutant("fact-mlps.encoder-exact-storage")
@pytest.mark.parametrize("build", [below_threshold, perturbed_solve])
def test_broken_encoders_fail_the_storage_check(build):
    report = expect_failure(without_shrinking()(storage.exact_storage_check(build)))
    assert "Falsifying" in report or "Failing" in report


@pytest.mark.mutant("fact-mlps.encoder-exact-storage")
def test_width_one_below_threshold_fails_the_exhaustive_check():
    expect_failure(storage.threshold_exhaustive_check(
        lambda F, d, m: max(1, fm.threshold_hidden(F, d, m) - 1)))


@pytest.mark.mutant("fact-mlps.every-feasible-set")
def test_generic_witness_breaks_the_refutation():
    generator = torch.Generator().manual_seed(5)
    generic = torch.randn(8, 4, generator=generator, dtype=torch.float64)
    expect_failure(storage.subspace_refutation(generic))


def test_builder_rejects_the_subspace_witness_and_wider_encoders_store_it():
    keys, values, facts = storage.SUBSPACE_KEYS, storage.SUBSPACE_VALUES, storage.SUBSPACE_FACTS
    with pytest.raises(ValueError, match="degenerate position"):
        fm.encoder_decoder_mlp(keys, values, facts)
    # h * rank(keys) >= F m restores solvability: 6 * 3 >= 8 * 2
    model = fm.encoder_decoder_mlp(keys, values, facts, hidden=6)
    assert fm.recall(model, keys, values, facts)[0] == 1.0


# --- FM.2 ------------------------------------------------------------------------------------

@pytest.mark.mutant("fact-mlps.parameter-efficiency")
def test_a_wasteful_width_breaks_the_parameter_count():
    expect_failure(storage.efficiency_check(twice_as_wide, sizes=(16, 32)))


@pytest.mark.mutant("fact-mlps.parameter-efficiency")
def test_a_limit_without_the_code_term_is_rejected():
    import sympy as sp

    expect_failure(storage.parameter_limit_check(lambda m, d, V: 2 * m / sp.log(V, 2)))


# --- FM.4 ------------------------------------------------------------------------------------

@pytest.mark.mutant("fact-mlps.decodability-jl")
def test_tightened_jl_dimension_fails_the_property():
    expect_failure(without_shrinking()(storage_readout.decodability_check(tightened_jl)))


@pytest.mark.mutant("fact-mlps.decodability-jl")
def test_tightened_jl_dimension_fails_the_scaling_check():
    expect_failure(storage_readout.decodability_scaling_check(tightened_jl))


def test_decodability_proxy_is_monotone_in_the_margin():
    wide = fm.decodability(storage_readout.equicorrelated(8, 0.0), draws=32)
    narrow = fm.decodability(storage_readout.equicorrelated(8, 0.75), draws=32)
    assert wide is not None and narrow is not None and wide < narrow
    assert fm.decodability(storage_readout.equicorrelated(8, 0.75), draws=32, max_dim=2) is None


# --- FM.5 ------------------------------------------------------------------------------------

@pytest.mark.mutant("fact-mlps.mlp-swap")
def test_a_swap_that_keeps_the_old_mlp_fails():
    expect_failure(without_shrinking()(storage_readout.swap_check(stuck_transformer)))


# --- FM.6 and the associative memories (tiny configs) --------------------------------------------

TINY_WIDTH = {"d": 4, "num_values": 4, "num_facts": (4, 8, 16), "steps": 100, "max_hidden": 32}


def tiny_width_sweep() -> dict:
    return gradient_descent.width_sweep_data("smoke", **TINY_WIDTH)


def narrower_by_one() -> dict:
    """The tiny sweep's data with every reported width one smaller than found."""
    data = copy.deepcopy(tiny_width_sweep())
    for point in data["points"]:
        point["hidden"] -= 1
        point["params"] = 3 * point["hidden"] * TINY_WIDTH["d"]
    return data


def six_seeds(tilt: float = 0.0) -> dict:
    """The published full sweep's seeds 0-2 and a copy of them as seeds 3-5 (six seeds, the
    fewest a 95% sign-test interval can decide from). With ``tilt``, GD's parameter counts
    are replaced by a tenth of the construction's times (F/64)^(+-tilt), the sign alternating
    over seeds: per-seed slope differences of -+tilt, on both sides of 0."""
    data = copy.deepcopy(gradient_descent.published_width_data())
    copies = copy.deepcopy(data["points"])
    for point in copies:
        point["seed"] += 3
    data["points"] += copies
    if tilt:
        for point in data["points"]:
            sign = 1 if point["seed"] % 2 else -1
            point["params"] = (point["construction_params"] / 10
                               * (point["num_facts"] / 64) ** (sign * tilt))
    return data


@pytest.mark.training
@pytest.mark.mutant("fact-mlps.gd-cheaper")
def test_a_width_one_below_the_found_one_fails():
    report = expect_failure(gradient_descent.gd_cheaper_check(narrower_by_one))
    assert "not verified" in report


@pytest.mark.training
@pytest.mark.mutant("fact-mlps.gd-cheaper")
def test_a_tenfold_cheaper_gd_claim_fails():
    report = expect_failure(gradient_descent.gd_cheaper_check(tiny_width_sweep, cost_ratio=0.1))
    assert "GD needs" in report


@pytest.mark.mutant("fact-mlps.gd-matches-construction")
def test_slopes_matching_in_median_do_not_refute():
    # six seeds whose per-seed slope differences straddle 0: the sign-test interval contains
    # 0, so the refutation ends inconclusive (a skip, not a pass)
    with pytest.raises(pytest.skip.Exception) as skipped:
        gradient_descent.slope_refutation(functools.partial(six_seeds, 0.1))()
    assert "inconclusive: median per-seed slope difference" in str(skipped.value)
    assert "[-0.1, 0.1]" in str(skipped.value)


def test_three_published_seeds_cannot_decide_but_six_like_them_refute():
    with pytest.raises(pytest.skip.Exception, match="inconclusive: median per-seed slope"):
        gradient_descent.slope_refutation()()
    gradient_descent.slope_refutation(six_seeds)()  # passes: the refutation holds


def test_width_sweep_points_are_picklable_for_the_process_pool():
    point = {"num_facts": 4, "d": 4, "num_values": 4, "steps": 10, "lr": 1e-2,
             "max_hidden": 4, "seed": 0, "device": "cpu"}
    assert pickle.loads(pickle.dumps(experiments.minimal_width)) is experiments.minimal_width
    assert pickle.loads(pickle.dumps(point)) == point


@pytest.mark.mutant("fact-mlps.linear-memory-capacity")
def test_linear_in_d_capacity_is_rejected():
    expect_failure(associative_memories.capacity_check(exponent=1.0))


@pytest.mark.mutant("fact-mlps.zipf-memory-scaling")
@pytest.mark.parametrize("exponent", [-2.0, -0.25])
def test_other_zipf_exponents_are_rejected(exponent):
    """-2(α-1): a d² capacity; -(α-1)/(2α): storing by frequency. Both are refuted at α = 2."""
    expect_failure(associative_memories.zipf_check(exponent=exponent))


# --- FM.7 ------------------------------------------------------------------------------------

@pytest.mark.mutant("fact-mlps.rome-insertion")
def test_perturbed_rome_misses_the_new_value():
    expect_failure(without_shrinking()(rome.insertion_check(rome_perturbed)))


@pytest.mark.mutant("fact-mlps.rome-minimal-disturbance")
def test_wrong_covariance_breaks_pythagoras():
    expect_failure(without_shrinking()(rome.minimal_disturbance_check(rome_wrong_covariance)))


@pytest.mark.mutant("fact-mlps.rome-minimal-disturbance")
def test_wrong_covariance_disagrees_with_cvxpy():
    expect_failure(without_shrinking()(rome.cvxpy_min_cost_check(rome_wrong_covariance)))


@pytest.mark.mutant("fact-mlps.rome-unaffected-keys")
def test_wrong_covariance_moves_orthogonal_keys():
    expect_failure(without_shrinking()(rome.unaffected_keys_check(rome_wrong_covariance)))


@pytest.mark.mutant("fact-mlps.rome-rank-one")
def test_full_rank_noise_breaks_rank_one():
    expect_failure(without_shrinking()(rome.rank_one_check(rome_plus_noise)))


@pytest.mark.mutant("fact-mlps.rome-constrained-least-squares")
def test_wrong_covariance_is_not_the_constrained_optimum():
    expect_failure(without_shrinking()(rome.least_squares_check(rome_wrong_covariance)))


@pytest.mark.mutant("fact-mlps.rome-code-asymmetry")
def test_the_paper_variant_is_not_the_code():
    expect_failure(without_shrinking()(rome.asymmetry_check(rome_paper_variant)))
    expect_failure(rome.both_variants_check(rome_paper_variant))


@pytest.mark.training
@pytest.mark.mutant("fact-mlps.rome-gd")
def test_wrong_covariance_in_the_penalty_misses_rome():
    result = functools.partial(rome_gd.rome_gd_result, "smoke", penalty="I", steps=2000)
    report = expect_failure(rome_gd.rome_gd_check(result))
    assert "from ROME" in report


# --- bad input -------------------------------------------------------------------------------

KEYS = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
VALUES = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
FACTS = torch.tensor([0, 1, 0])


@pytest.mark.parametrize("keys, values, facts, error, match", [
    (KEYS[0], VALUES, FACTS, ValueError, "keys must have 2 dims"),
    (KEYS, VALUES[0], FACTS, ValueError, "values must have 2 dims"),
    (KEYS, VALUES, FACTS.double(), TypeError, "facts must have an integer dtype"),
    (KEYS, VALUES, torch.tensor([0, 1, 2]), ValueError, r"facts must lie in \[0, 2\)"),
    (KEYS, VALUES, torch.tensor([0, 1]), ValueError, "one entry per key"),
    (KEYS * float("nan"), VALUES, FACTS, ValueError, "keys must be finite"),
    ("keys", VALUES, FACTS, TypeError, "keys must be a torch.Tensor"),
])
def test_fact_sets_are_validated(keys, values, facts, error, match):
    with pytest.raises(error, match=match):
        fm.encoder_decoder_mlp(keys, values, facts)
    with pytest.raises(error, match=match):
        fm.linear_associative_memory(keys, values, facts)


def test_encoder_decoder_rejects_infeasible_and_unsolvable_requests():
    duplicate = torch.cat([KEYS, KEYS[:1]])
    with pytest.raises(ValueError, match="infeasible: keys 0 and 3 are equal"):
        fm.encoder_decoder_mlp(duplicate, VALUES, torch.tensor([0, 1, 0, 1]))
    # a duplicate key with the same fact is fine
    same = fm.encoder_decoder_mlp(duplicate, VALUES, torch.tensor([0, 1, 0, 0]))
    assert fm.recall(same, duplicate, VALUES, torch.tensor([0, 1, 0, 0]))[0] == 1.0
    m = fm.smallest_code_dim(VALUES, FACTS, 0)
    least = fm.threshold_hidden(3, 2, m)
    with pytest.raises(ValueError, match=f"hidden must be >= .* = {least}"):
        fm.encoder_decoder_mlp(KEYS, VALUES, FACTS, hidden=least - 1)
    with pytest.raises(ValueError, match="code_dim must be <= d_v = 2"):
        fm.encoder_decoder_mlp(KEYS, VALUES, FACTS, code_dim=3)
    with pytest.raises(ValueError, match="code_dim must be >= 1"):
        fm.encoder_decoder_mlp(KEYS, VALUES, FACTS, code_dim=0)
    with pytest.raises(TypeError, match="hidden must be an int"):
        fm.encoder_decoder_mlp(KEYS, VALUES, FACTS, hidden=2.5)
    with pytest.raises(TypeError, match="seed must be an int"):
        fm.encoder_decoder_mlp(KEYS, VALUES, FACTS, seed="0")
    with pytest.raises(ValueError, match="degenerate position"):
        fm.encoder_decoder_mlp(torch.zeros(1, 2, dtype=torch.float64), VALUES,
                               torch.tensor([0]))


def test_undecodable_values_are_rejected_with_the_margin():
    # v_1 = 2 v_0: <v_0, v_1> = 2 > |v_0|^2, so value 0 can never win a dot product
    values = torch.tensor([[1.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"values are not decodable.*gamma = -0.25"):
        fm.encoder_decoder_mlp(KEYS, values, FACTS)
    # a used value that decodes, with an undecodable one unused, is fine
    model = fm.encoder_decoder_mlp(KEYS, values, torch.tensor([1, 1, 1]))
    assert fm.recall(model, KEYS, values, torch.tensor([1, 1, 1]))[0] == 1.0


def test_code_dim_too_small_names_the_smallest():
    values = fm.orthonormal_projection(6, 6, 3)        # six orthonormal values
    keys = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    facts = torch.arange(6)
    smallest = fm.smallest_code_dim(values, facts, 0)
    assert smallest > 1
    with pytest.raises(ValueError, match=f"smallest working code_dim for seed=0 is {smallest}"):
        fm.encoder_decoder_mlp(keys, values, facts, code_dim=1)


def test_user_supplied_numpy_and_float32_inputs_work():
    keys = np.random.default_rng(0).normal(size=(12, 4))
    values = np.eye(3)
    facts = torch.tensor([0, 1, 2] * 4)
    model = fm.encoder_decoder_mlp(keys, values, facts, dtype=torch.float32)
    assert model.up.dtype == torch.float32
    assert fm.recall(model, keys, values, facts)[0] == 1.0
    memory = fm.linear_associative_memory(keys, values, facts)
    assert memory.W.shape == (3, 4)
    with pytest.raises(ValueError, match="weights must have shape"):
        fm.linear_associative_memory(keys, values, facts, weights=torch.ones(3))
    with pytest.raises(ValueError, match="k must have width 4"):
        model(torch.zeros(1, 5))


def test_recall_rejects_a_model_of_the_wrong_width():
    memory = fm.linear_associative_memory(KEYS, VALUES, FACTS)
    with pytest.raises(ValueError, match="outputs of width 3"):
        fm.recall(memory, KEYS, torch.eye(3, dtype=torch.float64)[:2], FACTS)


def test_fact_transformer_validates_its_mlp_and_prompts():
    mlp = fm.encoder_decoder_mlp(KEYS, VALUES, FACTS)
    model = fm.fact_transformer(KEYS, VALUES, mlp)
    with pytest.raises(TypeError, match=r"mlp must be an nn\.Module"):
        model.swap_mlp(lambda k: k)
    wrong = fm.linear_associative_memory(KEYS, torch.eye(3, dtype=torch.float64)[:2],
                                         FACTS)
    with pytest.raises(ValueError, match="mlp must map width 2 to width 2"):
        model.swap_mlp(wrong)
    with pytest.raises(ValueError, match="tokens must lie in"):
        model(torch.tensor([[0, 99]]))
    with pytest.raises(ValueError, match="positions must lie in"):
        fm.fact_prompts(torch.tensor([0]), torch.tensor([3]), num_subjects=3, num_fillers=1,
                        length=3)
    with pytest.raises(ValueError, match="num_fillers must be >= 0"):
        fm.fact_transformer(KEYS, VALUES, mlp, num_fillers=-1)
    previous = model.swap_mlp(fm.encoder_decoder_mlp(KEYS, VALUES, torch.tensor([1, 0, 1])))
    assert previous is mlp


@pytest.mark.parametrize("kwargs, error, match", [
    ({"C": -torch.eye(2, dtype=torch.float64)}, ValueError, "positive definite"),
    ({"C": torch.tensor([[1.0, 0.5], [0.0, 1.0]], dtype=torch.float64)}, ValueError,
     "C must be symmetric"),
    ({"C": torch.eye(3, dtype=torch.float64)}, ValueError, r"C must have shape \(2, 2\)"),
    ({"k_star": torch.zeros(2, dtype=torch.float64)}, ValueError, "k_star must be non-zero"),
    ({"v_star": torch.ones(2, dtype=torch.float64)}, ValueError, r"v_star must have shape"),
    ({"W": torch.ones(2, dtype=torch.float64)}, ValueError, "W must have 2 dims"),
])
def test_rome_edit_validates_its_arguments(kwargs, error, match):
    arguments = {"W": torch.ones(3, 2, dtype=torch.float64), "C": torch.eye(2, dtype=torch.float64),
                 "k_star": torch.ones(2, dtype=torch.float64),
                 "v_star": torch.ones(3, dtype=torch.float64)} | kwargs
    with pytest.raises(error, match=match):
        fm.rome_edit(**arguments)


def test_rome_as_coded_rejects_an_orthogonal_prompt_key():
    with pytest.raises(ValueError, match="k_prompt must not be C-orthogonal"):
        fm.rome_edit_as_coded(torch.eye(2, dtype=torch.float64), torch.eye(2, dtype=torch.float64),
                              torch.tensor([1.0, 0.0], dtype=torch.float64),
                              torch.tensor([0.0, 1.0], dtype=torch.float64),
                              torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize("call, error, match", [
    (lambda: fm.jl_code_dim(0, 0.5), ValueError, "num_values must be >= 1"),
    (lambda: fm.jl_code_dim(4, -0.1), ValueError, "gamma must be finite and > 0"),
    (lambda: fm.decoding_success_rate(VALUES, 0), ValueError, "m must be >= 1"),
    (lambda: fm.zipf_probabilities(10, 0.0), ValueError, "alpha must be finite and > 0"),
    (lambda: fm.population_error(fm.linear_associative_memory(KEYS, VALUES, FACTS), KEYS,
                                 VALUES, FACTS, torch.ones(2)), ValueError,
     "probabilities must have shape"),
])
def test_helpers_validate_their_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()
