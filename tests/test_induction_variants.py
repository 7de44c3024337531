"""Mutants and bad input for the induction-variants area.

Every mutant rebuilds a check of ``theorems.areas.induction_variants`` around a broken
construction (no time circle, no recency bias, a weak column circle, a weak match layer, a BOS
value that is not zero, a fixed-offset copier, ...) or a tightened bound, and asserts with
``expect_failure`` that the check then fails.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

import killed
import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from interop_support import edited_export, required

from constructions import bigram_backcopy as bb
from constructions import delay_copy as dc
from constructions import spatial_induction as sih
from theorems.areas.induction_variants import bigram_backcopy as bb_checks
from theorems.areas.induction_variants import bigram_backcopy_dynamics as bb_dynamics
from theorems.areas.induction_variants import delay_copy as dg_checks
from theorems.areas.induction_variants import spatial_induction as sih_checks
from theorems.evidence import expect_failure
from theorems.numerics import gamma, unit_roundoff
from theorems.profiles import budget
from theorems.strategies import seeds
from theorems.trends import sizes_reversed

fails_at = functools.partial(killed.fails_at, literal=True)  # messages as plain text


# --- spatial induction heads -------------------------------------------------------------------


def with_temperatures(**changes):
    """The circuit builder with some derived gather temperatures replaced."""
    def build(task, positions, **kwargs):
        temps = sih.gather_temperatures(task.dim, task.side, positions)
        return sih.spatial_induction_circuit(
            task, positions, temperatures=dataclasses.replace(temps, **changes), **kwargs)
    return build


SIH_MUTANTS = {"no time circle": with_temperatures(time=0.0),
               "no recency bias": with_temperatures(recency=0.0),
               "weak column circle": with_temperatures(space=5.0)}


@pytest.mark.mutant("induction-variants.sih-gather")
@pytest.mark.parametrize("mutant", sorted(SIH_MUTANTS))
def test_broken_gathers_fail_the_gather_check(mutant):
    fails_at(sih_checks.gather_check(build=SIH_MUTANTS[mutant]), "on a true neighbour <",
             case=sih_checks.PINNED[2])


@pytest.mark.mutant("induction-variants.sih-gather")
def test_a_wider_positional_table_fails_the_dimension_check():
    def build(task, positions, **kwargs):
        model = sih.spatial_induction_circuit(task, positions, **kwargs)
        if task.side > 8:  # a table that grows with L
            model.features = torch.nn.functional.pad(model.features, (0, 1))
        return model
    report = expect_failure(sih_checks.dimension_check(build=build))
    assert "!= {4D + 6}" in report


@pytest.mark.mutant("induction-variants.sih-bayes")
@pytest.mark.parametrize("mutant", ["no recency bias", "weak column circle"])
def test_broken_gathers_fail_the_bayes_check(mutant):
    fails_at(sih_checks.bayes_check(build=SIH_MUTANTS[mutant]), "> bound",
             case=sih_checks.PINNED[2])


@pytest.mark.mutant("induction-variants.sih-bayes")
def test_a_wrong_prior_sink_fails_the_bayes_check():
    def build(task, positions, **kwargs):
        model = sih.spatial_induction_circuit(task, positions, **kwargs)
        model.bos_value = torch.nn.functional.one_hot(
            torch.tensor(0), task.n_states).to(model.bos_value)  # value e_0, not alpha / A
        return model
    fails_at(sih_checks.bayes_check(build=build), "> bound", case=sih_checks.PINNED[2])


@pytest.mark.mutant("induction-variants.sih-bayes")
def test_a_prior_sink_without_its_normalisation_fails_the_counting_identity():
    # the BOS value alpha_a instead of alpha_a / A: the output is (N_c(a) + A alpha_a)/(N_c + A)
    report = expect_failure(sih_checks.counting_identity_check(bos_value=lambda a, A: a))
    assert "the match output is not" in report


@pytest.mark.mutant("induction-variants.sih-bayes")
def test_the_bound_without_its_leak_term_fails():
    def bound(model, n, total, log_max):
        return np.zeros_like(total, dtype=float)  # a bound that ignores leak and rounding
    fails_at(sih_checks.bayes_check(
        build=functools.partial(sih.spatial_induction_circuit, match_beta=8.0), bound=bound),
        "> bound", case=sih_checks.PINNED[2])


@pytest.mark.mutant("induction-variants.sih-deterministic")
@pytest.mark.parametrize("mutant", sorted(SIH_MUTANTS))
def test_broken_gathers_fail_the_deterministic_check(mutant):
    fails_at(sih_checks.deterministic_check(build=SIH_MUTANTS[mutant]),
             "seen cells mispredicted", case=sih_checks.PINNED[1])


@pytest.mark.mutant("induction-variants.sih-margins")
def test_half_the_time_temperature_fails_the_symbolic_margins():
    def temperatures(volume, side, positions, *, lib):
        temps = sih.temperatures_for(volume, side, positions, lib=lib)
        return dataclasses.replace(temps, time=temps.time / 2)
    report = expect_failure(sih_checks.margin_symbolic_check(temperatures=temperatures))
    assert "(wrong time phase) slack minus 1" in report


@pytest.mark.mutant("induction-variants.sih-margins")
def test_a_slightly_weak_recency_fails_the_certified_margins():
    def temperatures(dim, side, positions):
        temps = sih.gather_temperatures(dim, side, positions)
        return dataclasses.replace(temps, recency=temps.recency * (1 - 1 / 30))
    report = expect_failure(sih_checks.margin_certified_check(temperatures=temperatures,
                                                              sides=(3, 4)))
    assert "fails at D=" in report


# --- bad input: spatial induction -------------------------------------------------------------

def ca(**kwargs):
    values = {"dim": 1, "side": 5, "n_states": 2, "offsets": sih.neighbourhood(1)} | kwargs
    return sih.CellularAutomaton(**values)


@pytest.mark.parametrize("kwargs, error, name", [
    ({"dim": 3}, ValueError, "dim"), ({"dim": 1.0}, TypeError, "dim"),
    ({"side": 2}, ValueError, "side"), ({"n_states": 1}, ValueError, "n_states"),
    ({"offsets": ()}, TypeError, "offsets"), ({"offsets": ((0, 1),)}, ValueError, "offsets"),
    ({"side": 3, "offsets": ((-2,), (1,))}, ValueError, "offsets"),
])
def test_bad_cellular_automata_are_rejected(kwargs, error, name):
    with pytest.raises(error, match=name):
        ca(**kwargs)


def test_bad_neighbourhoods_rules_and_tokens_are_rejected():
    with pytest.raises(ValueError, match="kind"):
        sih.neighbourhood(2, "hex")
    with pytest.raises(ValueError, match="radius"):
        sih.neighbourhood(1, radius=0)
    task = ca()
    generator = np.random.default_rng(0)
    rules = task.sample_rules(1, generator)
    with pytest.raises(ValueError, match="rules"):
        task.sample(rules * 0.5, 3, generator)  # rows that do not sum to 1
    with pytest.raises(ValueError, match="rules"):
        task.sample(rules[:, :3], 3, generator)
    with pytest.raises(ValueError, match="alpha"):
        task.sample_rules(1, generator, alpha=-1.0)
    with pytest.raises(ValueError, match="grid"):
        task.flatten(np.full((1, 2, 5), 2))  # state 2 with k = 2
    model = sih.spatial_induction_circuit(task, 10)
    with pytest.raises(ValueError, match="tokens"):
        model(torch.tensor([[2, 0, 3]]))  # token 3 out of range
    with pytest.raises(ValueError, match="tokens"):
        model(torch.tensor([[0, 1]]))  # no BOS first
    with pytest.raises(ValueError, match="tokens"):
        model(torch.zeros(1, 12, dtype=torch.long))  # longer than max_positions + 1
    with pytest.raises(TypeError, match="tokens"):
        model(torch.zeros(1, 3))
    with pytest.raises(TypeError, match="task"):
        sih.spatial_induction_circuit("ca", 10)
    with pytest.raises(ValueError, match="match_beta"):
        sih.spatial_induction_circuit(task, 10, match_beta=0.0)
    with pytest.raises(ValueError, match="positions"):
        sih.gather_temperatures(1, 5, 0)


# --- Bigram-Backcopy ------------------------------------------------------------------------

def ignoring_triggers(task, tokens):
    """A broken oracle: the bigram row everywhere, as if there were no triggers."""
    law = torch.from_numpy(task.cond[tokens.clamp(max=task.vocab_size - 1).numpy()])
    law[:, 0] = torch.from_numpy(task.first_token_law)
    return law


@pytest.mark.mutant("induction-variants.bb-task")
def test_an_oracle_without_backcopy_fails_the_task_check():
    fails_at(bb_checks.task_check(oracle=ignoring_triggers), "the oracle is not the delta",
             case=bb_checks.PINNED[0])


def _bigram_only(task, batch, length, generator):
    """A broken sampler: the bigram row at triggers too (the oracle still back-copies)."""
    cumulative = task.cond.cumsum(-1)
    out = np.empty((batch, length), dtype=np.int64)
    out[:, 0] = task.bos
    out[:, 1] = generator.choice(task.vocab_size, size=batch, p=task.first_token_law)
    for i in range(1, length - 1):
        u = generator.random((batch, 1))
        out[:, i + 1] = np.minimum((cumulative[out[:, i]] < u).sum(-1), task.vocab_size - 1)
    return torch.from_numpy(out)


@pytest.mark.mutant("induction-variants.bb-task")
def test_a_sampler_without_backcopy_fails_the_task_check():
    fails_at(bb_checks.task_check(sampler=_bigram_only), "oracle probability 0",
             case=bb_checks.PINNED[0])


@pytest.mark.mutant("induction-variants.bb-active-dormant")
def test_a_bos_value_that_is_not_zero_fails_the_construction_check():
    def build(task, max_len, **kwargs):
        e0 = torch.zeros(task.vocab_size, dtype=torch.float64)
        e0[0] = 1.0
        return bb.active_dormant_model(task, max_len, bos_value=e0, **kwargs)
    fails_at(bb_checks.construction_check(build=build), "the head is not dormant",
             case=bb_checks.PINNED[0])


@pytest.mark.mutant("induction-variants.bb-active-dormant")
def test_a_sink_for_every_token_fails_the_construction_check():
    def build(task, max_len, **kwargs):
        model = bb.active_dormant_model(task, max_len, **kwargs)
        model.W_sink = torch.full_like(model.W_sink, 2 * model.beta)  # triggers sink too
        return model
    fails_at(bb_checks.construction_check(build=build), "a trigger query misses the previous token",
             case=bb_checks.PINNED[0])


@pytest.mark.mutant("induction-variants.bb-active-dormant")
def test_a_weak_sink_fails_the_construction_check():
    def build(task, max_len, **kwargs):
        model = bb.active_dormant_model(task, max_len, **kwargs)
        model.W_sink = model.W_sink / 2  # sink score beta: the previous token ties with the BOS
        return model
    fails_at(bb_checks.construction_check(build=build), "a non-trigger query misses the BOS sink",
             case=bb_checks.PINNED[0])


@pytest.mark.mutant("induction-variants.bb-active-dormant")
def test_squared_bigram_logits_fail_the_construction_check():
    def build(task, max_len, **kwargs):
        model = bb.active_dormant_model(task, max_len, **kwargs)
        model.W_mlp = 2 * model.W_mlp  # logits 2 log cond: the law cond^2 / sum, not cond
        return model
    fails_at(bb_checks.construction_check(build=build), "non-trigger KL",
             case=bb_checks.PINNED[0])


@pytest.mark.mutant("induction-variants.bb-active-dormant")
def test_a_quarter_value_gain_fails_the_trigger_kl():
    # values gamma/4 e_x while the bound reads gamma: KL ~ (V-1) e^-15 at a trigger, far above
    # the (V-1) e^-60 bound plus its rounding slack (~1e-11); half the gain (e^-30 ~ 1e-13)
    # would sit below that slack
    def build(task, max_len, **kwargs):
        model = bb.active_dormant_model(task, max_len, **kwargs)
        model.W_OV = model.W_OV / 4
        return model
    fails_at(bb_checks.construction_check(build=build), "trigger KL",
             case=bb_checks.PINNED[0])


@pytest.mark.mutant("induction-variants.bb-value-drain")
def test_the_refutation_fails_without_its_counterexample():
    # v = e_0 does break exactness: the statement holds there, and the refutation must fail
    report = expect_failure(bb_checks.drain_refutation(counterexample=[1.0] + [0.0] * 31))
    assert "expected to fail" in report


@pytest.mark.mutant("induction-variants.bb-value-drain")
def test_the_refutation_fails_when_pinned_at_a_zero_value():
    # v = 0 keeps every prediction exact, but the statement excludes it: the check must see
    # that the head is dormant there
    report = expect_failure(bb_checks.drain_refutation(counterexample=[0.0] * 32))
    assert "v is no nonzero BOS value" in report


def half_drain(a, b, n, s2, lib=math):
    adot, bdot = bb.caricature_flow(a, b, n, s2, lib=lib)
    return adot, bdot / 2  # the value drains at half the gradient rate


def double_sink(a, b, n, s2, lib=math):
    adot, bdot = bb.caricature_flow(a, b, n, s2, lib=lib)
    return 2 * adot, bdot  # the sink grows twice as fast as the gradient says


@pytest.mark.mutant("induction-variants.bb-caricature")
def test_a_wrong_drain_rate_fails_the_symbolic_caricature():
    report = expect_failure(bb_dynamics.caricature_symbolic_check(flow=half_drain))
    assert "bdot is not -2 p^2 b" in report


def clock_with_a_flipped_term(a, n, s2, lib=math):
    # - m^3/u flipped to + m^3/u: the clock gains 2 m^3/u / (2 c m^2) = m^2 e^-a / s^2
    return bb.caricature_clock(a, n, s2, lib=lib) + (n - 1) ** 2 * lib.exp(-a) / s2


@pytest.mark.mutant("induction-variants.bb-caricature")
def test_a_wrong_clock_fails_the_symbolic_caricature():
    report = expect_failure(bb_dynamics.caricature_symbolic_check(clock=clock_with_a_flipped_term))
    assert "the clock's derivative is not 1/adot" in report


@pytest.mark.mutant("induction-variants.bb-caricature")
def test_a_faster_sink_fails_the_numeric_caricature():
    report = expect_failure(bb_dynamics.caricature_numeric_check(flow=double_sink))
    assert "the flow leaves the drained clock" in report


# --- bad input: Bigram-Backcopy -------------------------------------------------------------

def test_bad_bigram_backcopy_input_is_rejected():
    cond = bb.dirichlet_bigrams(6, 0.5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="cond"):
        bb.BigramBackcopy(cond * 1.1, 2)  # rows that do not sum to 1
    with pytest.raises(ValueError, match="cond"):
        bb.BigramBackcopy(cond[:, :5], 2)
    with pytest.raises(ValueError, match="n_triggers"):
        bb.BigramBackcopy(cond, 5)
    with pytest.raises(TypeError, match="n_triggers"):
        bb.BigramBackcopy(cond, 2.0)
    with pytest.raises(ValueError, match="marginal"):
        bb.BigramBackcopy(cond, 2, marginal=np.ones(6))
    with pytest.raises(ValueError, match="concentration"):
        bb.dirichlet_bigrams(6, -1.0, np.random.default_rng(0))
    task = bb.BigramBackcopy(cond, 2)
    model = bb.active_dormant_model(task, 8)
    with pytest.raises(ValueError, match="tokens"):
        model(torch.tensor([[6, 7]]))  # token 7 out of range
    with pytest.raises(ValueError, match="tokens"):
        model(torch.tensor([[0, 1]]))  # no BOS first
    with pytest.raises(ValueError, match="tokens"):
        model(torch.full((1, 9), 6).index_fill(1, torch.tensor([0]), 6))  # BOS twice, too long
    with pytest.raises(ValueError, match="bos_value"):
        bb.active_dormant_model(task, 8, bos_value=torch.zeros(5))
    with pytest.raises(TypeError, match="task"):
        bb.active_dormant_model(cond, 8)
    with pytest.raises(ValueError, match="beta"):
        bb.active_dormant_model(task, 8, beta=-1.0)
    with pytest.raises(ValueError, match="length"):
        task.sample(2, 1, np.random.default_rng(0))


# --- delay copy -----------------------------------------------------------------------------

@pytest.mark.mutant("induction-variants.dg-task")
def test_a_fixed_offset_copier_is_not_the_oracle():
    def copier(tokens, task):
        return dc.fixed_offset_copier(tokens, task, task.distances[0])
    fails_at(dg_checks.task_check(copier=copier), "the copier and the targets disagree",
             task=dg_checks.PINNED_TASKS[0], seed=0)


@pytest.mark.mutant("induction-variants.dg-task")
def test_an_oracle_that_pastes_every_token_of_an_s_pair_fails():
    def copier(tokens, task):
        as_c = tokens.clone()
        as_c[as_c == task.S] = task.C  # S pairs treated as C pairs
        return dc.oracle_copier(as_c, task)
    fails_at(dg_checks.task_check(copier=copier), "the copier and the targets disagree",
             task=dg_checks.PINNED_TASKS[2], seed=2)


@pytest.mark.mutant("induction-variants.dg-offset")
def test_an_off_by_one_fixed_copier_fails_the_offset_check():
    def copier(tokens, task, distance):
        return dc.fixed_offset_copier(tokens, task, distance + 1)
    fails_at(dg_checks.offset_check(copier=copier), "a step is wrong at d_C = d",
             task=dg_checks.PINNED_TASKS[0], seed=0, shift=0)


@pytest.mark.mutant("induction-variants.dg-offset")
def test_a_copier_that_skips_control_tokens_fails_the_offset_check():
    # reads one further back when it would read a control token: right at step m of a pair
    # with d_C = d + 1 (it finds s_m behind the C), unchanged at d_C = d
    def copier(tokens, task, distance):
        out = dc.fixed_offset_copier(tokens, task, distance)
        further = dc.fixed_offset_copier(tokens, task, distance + 1)
        return torch.where(out >= task.n_data, further, out)
    fails_at(dg_checks.offset_check(copier=copier), "does not read the C token",
             task=dg_checks.PINNED_TASKS[0], seed=0, shift=1)


def _paste_reversed(task, batch, generator, distance):
    """A broken generator: every C pair pastes its source in reverse order."""
    sample = task.sample(batch, generator, distance=distance)
    for b, pairs in enumerate(sample.pairs):
        for pair in pairs:
            if pair.kind == "C":
                for k, token in enumerate(reversed(pair.source)):
                    if pair.second + 1 + k < task.length:
                        sample.tokens[b, pair.second + 1 + k] = token
    return sample


@pytest.mark.mutant("induction-variants.dg-offset")
def test_a_reversed_paste_fails_the_offset_check():
    fails_at(dg_checks.offset_check(sample=_paste_reversed), "the offset is not d_C + m",
             task=dg_checks.PINNED_TASKS[0], seed=0, shift=0)


@pytest.mark.mutant("induction-variants.dg-induction-baseline")
def test_the_leading_order_formula_fails_the_enumeration():
    report = expect_failure(dg_checks.exhaustive_check(formula=lambda n, m, g: Fraction(
        dc.approximate_induction_accuracy(n, m, g))))
    assert "!= formula" in report


@pytest.mark.mutant("induction-variants.dg-induction-baseline")
def test_mirrored_bad_ranks_fail_the_stepwise_enumeration():
    # B_k with k - 2 read as m - k: the same mean over k, a different acc_k at each step
    def step(n_data, copy_len, gap, k):
        return dg_checks.step_accuracy(n_data, copy_len, gap, copy_len + 2 - k)
    report = expect_failure(dg_checks.exhaustive_check(step=step))
    assert "!= acc_k" in report


@pytest.mark.mutant("induction-variants.dg-induction-baseline")
def test_an_approximation_without_the_paste_tokens_fails_the_3p2_bound():
    # the catalogue's formula with n = g (the m - 1 pasted tokens forgotten)
    def approximation(n_data, copy_len, gap):
        return dg_checks.catalogue_accuracy(n_data, 1, gap)
    report = expect_failure(dg_checks.exhaustive_check(approximation=approximation))
    assert "> 3p^2" in report


@pytest.mark.mutant("induction-variants.dg-induction-baseline")
def test_a_fixed_offset_copier_fails_the_monte_carlo_check():
    def copier(tokens, task):  # tuned to d_C = 20, evaluated at d_C = 42
        return dc.fixed_offset_copier(tokens, task, 20)
    report = expect_failure(dg_checks.monte_carlo_check(copier=copier, gaps=(40,),
                                                        sequences=40))
    assert "vs formula" in report


# --- bad input: delay copy ------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, name", [
    ({"n_data": 1}, ValueError, "n_data"), ({"copy_len": 0}, ValueError, "copy_len"),
    ({"distances": (5, 2)}, ValueError, "distances"), ({"distances": 5}, ValueError, "distances"),
    ({"kinds": ("X",)}, ValueError, "kinds"), ({"mean_duration": 10.0}, ValueError,
                                                "mean_duration"),
    ({"length": 1.5}, TypeError, "length"),
])
def test_bad_delay_copy_tasks_are_rejected(kwargs, error, name):
    with pytest.raises(error, match=name):
        dc.DelayCopyTask(**kwargs)


def test_bad_delay_copy_input_is_rejected():
    task = dc.DelayCopyTask(n_data=8, copy_len=3, distances=(4, 6), length=32)
    with pytest.raises(ValueError, match="tokens"):
        dc.oracle_copier(torch.tensor([[0, 11]]), task)  # vocab is 11
    with pytest.raises(TypeError, match="tokens"):
        dc.induction_copier(torch.zeros(1, 4), task)
    with pytest.raises(ValueError, match="distance"):
        dc.fixed_offset_copier(torch.zeros(1, 4, dtype=torch.long), task, 0)
    with pytest.raises(ValueError, match="gap"):
        dc.induction_accuracy(8, 3, -1)
    with pytest.raises(ValueError, match="copy_len"):
        dc.induction_accuracy(8, 1, 2)
    with pytest.raises(ValueError, match="distance"):
        task.sample(2, np.random.default_rng(0), distance=0)


@pytest.mark.training
@pytest.mark.mutant("induction-variants.bb-gd-sinks")
def test_swapped_arms_fail_the_sink_check():
    # the ReLU run read as the softmax one, and the softmax+SGD run (share 0.14 < 1/2, so the
    # ReLU sentence, asserted first, still holds) as the ReLU one: 0.06 against 0.14 at seed 0,
    # a failure by far more than any rounding (not on a tie of two identical runs)
    report = expect_failure(bb_dynamics.gd_check(arms=("relu+adam", "softmax+sgd"),
                                               variants=("relu+adam", "softmax+sgd")))
    assert "softmax+Adam BOS share" in report and "concentrates" not in report


@pytest.mark.training
@pytest.mark.mutant("induction-variants.bb-gd-sinks")
def test_a_softmax_run_read_as_the_relu_arm_fails_the_half_threshold():
    # the softmax+Adam run read as the ReLU arm: share 0.96 at seed 0, far above 1/2
    report = expect_failure(bb_dynamics.gd_check(arms=("softmax+adam", "softmax+adam"),
                                               variants=("softmax+adam",)))
    assert "ReLU attention concentrates on the BOS" in report


@pytest.mark.slow
@pytest.mark.mutant("induction-variants.dg-gd-small-models")
def test_nope_and_rope_swapped_fail_the_small_model_check():
    # the arm read as NoPE trained with RoPE and the arm read as RoPE without encoding: at
    # seed 0 the "NoPE" arm reaches about 0.76 in distribution, RoPE's "0.37" and ALiBi's 0.54
    # fall below it (not a tie of identical runs, which every arm NoPE gave)
    from empirics import delay_copy as experiment

    original = dict(experiment.SCHEMES)
    experiment.SCHEMES.update(rope=original["none"], none=original["rope"])
    try:
        report = expect_failure(dg_checks.gd_check(fresh=True))
    finally:
        experiment.SCHEMES.clear()
        experiment.SCHEMES.update(original)
    assert "rope in distribution" in report


# --- spatial induction: gradient descent ----------------------------------------------------------

def test_the_spatial_experiment_smoke_reports_paired_statistics():
    """Default run, a few CPU-seconds: the plumbing of the slow check (paired means and
    standard errors, a figure), not its outcome."""
    from empirics.spatial_induction import SPATIAL_INDUCTION

    result = SPATIAL_INDUCTION("smoke", device="cpu", seed=0, steps=10, eval_every=10,
                               eval_batch=8)
    m = result.metrics
    for key in ("kl_gain", "match_excess"):
        assert math.isfinite(m[key]) and result.metric(key, "se") > 0
    assert 0 < m["match_chance"] < 1 and "kl" in result.figures


@pytest.mark.slow
@pytest.mark.mutant("induction-variants.sih-gd-two-layers")
def test_the_models_read_the_other_way_round_fail_the_training_check():
    # the one-layer control read as the two-layer model and back: the gain's interval (about
    # -0.038 +- 0.03 at seed 0) lies wholly below 0. The controls that remove the structure to
    # learn (cells shuffled within each training sequence, layer-1 queries and keys frozen at
    # zero) give a gain near 0 (0.0005, SE 0.006; 0.001, SE 0.012): their intervals contain 0,
    # so they end inconclusive rather than refute, and are recorded in the claim's notes
    report = expect_failure(sih_checks.gd_check(sign=-1.0))
    assert "lies below 0" in report


# --- scaling studies: the trend checks on the published studies ---------------------------------

TREND_MUTANTS = {
    "induction-variants.sih-gather-scaling": ("spatial-induction-scaling",
                                              "two-layer/gather_mass"),
    "induction-variants.dg-nope-ood-scaling": ("delay-copy-scaling", "none/out_of_distribution"),
    "induction-variants.bb-sink-scaling": ("bigram-backcopy-scaling", "softmax+adam/bos_mass"),
}


def trend_report(claim_id: str, load) -> str:
    from theorems.trends import trend_check

    study, quantity = TREND_MUTANTS[claim_id]
    return killed.failed_assertion(trend_check(study, quantity, "up", load=load))


@pytest.mark.mutant("induction-variants.sih-gather-scaling")
def test_the_gather_study_made_to_fall_fails_its_trend_check():
    # the published study is inconclusive (slope -0.0043, interval [-0.017, 0.008]), and so is
    # its reversal, which cannot kill the check: reversed and lowered by the interval's width
    # per doubling, the fall is decided, and the check fails at its assertion
    report = trend_report("induction-variants.sih-gather-scaling",
                          functools.partial(sizes_reversed, falling="two-layer/gather_mass"))
    assert "moves down with steps" in report


@pytest.mark.mutant("induction-variants.dg-nope-ood-scaling")
def test_the_nope_study_reversed_in_steps_fails_its_trend_check():
    # published: slope 0.016 per doubling, interval [0.008, 0.024]; reversed, the same
    # interval below 0
    report = trend_report("induction-variants.dg-nope-ood-scaling", sizes_reversed)
    assert "moves down with steps" in report


@pytest.mark.mutant("induction-variants.bb-sink-scaling")
def test_the_sink_study_made_to_fall_fails_its_trend_check():
    # the published study is inconclusive (slope 0.006, interval [-0.16, 0.18]), and so is its
    # reversal: reversed and lowered by the interval's width per doubling, the fall is decided
    report = trend_report("induction-variants.bb-sink-scaling",
                          functools.partial(sizes_reversed, falling="softmax+adam/bos_mass"))
    assert "moves down with steps" in report


# --- TransformerLens export ----------------------------------------------------------------------

def _transformer_lens():
    """TransformerLens (any major: ``to_transformer_lens`` returns a ``HookedTransformer`` on
    2.x/3.x and a ``TransformerBridge`` on 4.x), or a skip naming the extra (a failure under
    ``THEOREMS_REQUIRE_EXTRAS``)."""
    return required("transformer_lens")


def bb_export_bound(model: bb.ActiveDormantHead, logits: torch.Tensor) -> torch.Tensor:
    r"""Per-entry bound on |ours - TransformerLens's| logits of the active-dormant export.

    The scores are bit-identical: each is a sum in which at most two products are non-zero
    (:math:`\beta \cdot 1` and :math:`2\beta(1 - \mathrm{trig}) \cdot 1`, both exact), summed
    once in either evaluation, and the export's folding of :math:`\sqrt{d_{head}}` into
    :math:`W_Q` and TransformerLens's division by it are exact (:math:`d_{head} = 4^m`). So the
    patterns are the same floats, and so are the values (one non-zero product each) and the
    MLP's output (one-hot times a table). What differs is the order of the sum over the
    :math:`n` keys of :math:`\sum_j p_j v_{jc}`: each evaluation is within
    :math:`\gamma_n \sum_j p_j |v_{jc}| \le \gamma_n (1 + \gamma_n) \max|W_{OV}|` of the exact
    sum (the :math:`p_j` sum to at most :math:`1 + \gamma_n`), so the head outputs differ by
    at most twice that. The logit is one more rounded addition, head + MLP, in both:
    :math:`|\mathrm{fl}(a) - \mathrm{fl}(b)| \le |a - b| + u|a| + u|b|` with
    :math:`|a| \le |L|/(1 - u)`, :math:`|b| \le |a| + |a - b|`.
    """
    n = logits.shape[1]
    u, g = unit_roundoff(logits.dtype), gamma(n, logits.dtype)
    head = 2 * g * (1 + g) * float(model.W_OV.abs().max())
    return head * (1 + u) + 2 * u / (1 - u) * (logits.abs() + head)


def bb_export_roundtrip_check(export_model=None):
    """The active-dormant construction exported to TransformerLens computes the same
    patterns (bit for bit) and logits (within :func:`bb_export_bound`) on sampled tasks,
    with a drained BOS value and with an arbitrary one."""
    from constructions.export import (
        to_transformer_lens,
        transformer_lens_inputs,
        transformer_lens_outputs,
    )
    export_model = export_model or to_transformer_lens

    @settings(max_examples=budget(0.2).max_examples, deadline=None)
    @given(vocab=st.integers(3, 10), triggers=st.integers(1, 3), length=st.integers(2, 12),
           drained=st.booleans(), seed=seeds())
    @example(vocab=3, triggers=1, length=2, drained=True, seed=0)
    # non-trigger queries at i >= 2, where only the sink channel points them at the BOS
    @example(vocab=5, triggers=1, length=8, drained=False, seed=0)
    def run(vocab, triggers, length, drained, seed):
        rng = np.random.default_rng(seed)
        task = bb.BigramBackcopy(bb.dirichlet_bigrams(vocab, 0.5, rng), min(triggers, vocab - 2))
        bos_value = None if drained else torch.from_numpy(rng.normal(size=vocab))
        model = bb.active_dormant_model(task, length, bos_value=bos_value)
        tokens = task.sample(3, length, rng)
        ours = model.attention(tokens)
        with torch.no_grad():
            logits, cache = export_model(model).run_with_cache(
                **transformer_lens_inputs(model, tokens))
        theirs = transformer_lens_outputs(model, logits)
        # same scores, same softmax kernel on rows of the same length (see bb_export_bound)
        assert torch.equal(cache["pattern", 0][:, 0], ours["pattern"]), "patterns differ"
        gap = (theirs - ours["logits"]).abs()
        bound = bb_export_bound(model, ours["logits"])
        assert (gap <= bound).all(), f"logits differ by {gap.max():.3g} > bound"
    return run


@pytest.mark.interop
def test_the_active_dormant_export_round_trips():
    _transformer_lens()
    bb_export_roundtrip_check()()


@pytest.mark.interop
def test_an_export_without_its_sink_channel_fails_the_round_trip():
    _transformer_lens()

    def without_sink(state, config, model):  # the key's BOS flag dropped: no query finds the sink
        state["blocks.0.attn.W_K"][:, :, model.max_len] = 0.0
    expect_failure(bb_export_roundtrip_check(edited_export(without_sink)))


def _softmax_rounding(n: int, largest: float, dtype) -> float:
    r"""Relative error of a computed softmax entry on scores of magnitude :math:`\le` ``largest``
    over :math:`n` keys: the subtraction of the row maximum (:math:`\le 2u\,\mathrm{largest}`
    absolute, so a factor :math:`e^{2u\,\mathrm{largest}}`), the exponential (assumed within
    one ulp, :math:`2u` relative: torch's CPU float64 exp, not an IEEE-guaranteed bound), the
    sum (:math:`\gamma_n`) and the division (:math:`u`)."""
    u = unit_roundoff(dtype)
    return math.exp(2 * u * largest) * (1 + 2 * u) * (1 + gamma(n, dtype)) * (1 + u) - 1


def sih_export_bound(model: sih.SpatialInductionCircuit, n: int) -> float:
    r"""Bound on :math:`\max|p^{ours} - p^{TL}|` for the spatial-induction export on ``n``
    tokens, composed stage by stage against exact arithmetic on the same float weights (both
    evaluations are within it, so their gap is within twice it).

    1. Gather scores :math:`f_p^\top W_h f_q`: ours an einsum, TransformerLens
       :math:`(x W_Q)\cdot(x W_K)` over :math:`D` then :math:`d` terms; either is within
       :math:`\epsilon_1 = \gamma_{D + d + 2F}\,S` of exact, :math:`S = \max|f|^\top|W_h||f|`
       (itself computed to within :math:`\gamma_{2F}`).
    2. Patterns: scores off by :math:`\le\epsilon_1` move each softmax entry by a factor in
       :math:`e^{\pm 2\epsilon_1}`; with the softmax's own rounding,
       :math:`\rho_1 = e^{2\epsilon_1}(1 + \sigma_1) - 1` relative.
    3. Configurations :math:`\sum_q P_{hpq} 1[x_q = a] \in [0, 1]`: within
       :math:`\eta_1 = \rho_1 + \gamma_n(1 + \rho_1)`.
    4. Match scores :math:`\beta\langle\mathrm{next}_p, \mathrm{current}_j\rangle` + flags:
       each configuration block sums to :math:`\le 1` per head, so the perturbation is
       :math:`\le \beta|\nu|(2\eta_1 + k\eta_1^2)`, plus rounding
       :math:`\gamma_{d + |\nu|k + 2}(\beta|\nu|(1 + \eta_1)^2 + \beta + |\mathrm{sink}|)`.
    5. Patterns again (:math:`\rho_2`), and the output :math:`\sum_j P_{pj} v_j`, values in
       :math:`[0, 1]`: within :math:`\eta_2 = \rho_2 + \gamma_n(1 + \rho_2)`. The export's
       residual sums and unembedding add exact zeros only (disjoint blocks).
    """
    dtype = model.features.dtype
    f = model.features[:n].abs()
    F = f.shape[1]
    g2F = gamma(2 * F + 2, dtype)
    S = float(torch.einsum("pf,hfg,qg->hpq", f, model.W_gather.abs(), f).max()) / (1 - g2F)
    layout = model.residual_layout("bound", None)
    D, d = layout.d_model, layout.blocks[0][0].W_Q.shape[2]
    eps1 = gamma(D + d + 2 * F, dtype) * S
    rho1 = math.exp(2 * eps1) * (1 + _softmax_rounding(n, S + eps1, dtype)) - 1
    eta1 = rho1 + gamma(n, dtype) * (1 + rho1)
    k, nu, beta = model.task.n_states, len(model.task.offsets), model.match_beta
    sink = beta * nu + math.log(float(model.alpha.sum())) + beta
    size2 = beta * nu * (1 + eta1) ** 2 + beta + abs(sink)
    eps2 = beta * nu * (2 * eta1 + k * eta1 ** 2) + gamma(d + nu * k + 2, dtype) * size2
    rho2 = math.exp(2 * eps2) * (1 + _softmax_rounding(n, size2 + eps2, dtype)) - 1
    return rho2 + gamma(n, dtype) * (1 + rho2)


def sih_export_roundtrip_check(export_model=None):
    """The spatial-induction circuit exported to TransformerLens gives the same probabilities
    (within twice :func:`sih_export_bound`) on sampled automata, D in {1, 2}."""
    from constructions.export import (
        to_transformer_lens,
        transformer_lens_inputs,
        transformer_lens_outputs,
    )
    export_model = export_model or to_transformer_lens

    @settings(max_examples=budget(0.1).max_examples, deadline=None)
    @given(dim=st.sampled_from([1, 2]), kind=st.sampled_from(["moore", "von-neumann"]),
           side=st.integers(3, 7), horizon=st.integers(2, 4), n_states=st.integers(2, 3),
           alpha=st.floats(0.05, 5.0), seed=seeds())
    @example(dim=1, kind="moore", side=3, horizon=2, n_states=2, alpha=1.0, seed=0)
    # five slabs: the slab three back of the target shares its column and time phase, so only
    # the recency term separates them (what the recency mutant must be caught on)
    @example(dim=1, kind="moore", side=4, horizon=5, n_states=2, alpha=1.0, seed=0)
    def run(dim, kind, side, horizon, n_states, alpha, seed):
        side = min(side, 4) if dim == 2 else side  # keep V = L^D small
        task = sih.CellularAutomaton(dim, side, n_states, sih.neighbourhood(dim, kind))
        rng = np.random.default_rng(seed)
        model = sih.spatial_induction_circuit(task, horizon * task.volume, alpha=alpha)
        tokens = task.flatten(task.sample(task.sample_rules(2, rng, alpha=alpha), horizon, rng))
        ours = model(tokens)
        with torch.no_grad():
            theirs = transformer_lens_outputs(
                model, export_model(model)(**transformer_lens_inputs(model, tokens)))
        gap = float((theirs - ours).abs().max())
        bound = 2 * sih_export_bound(model, tokens.shape[1])
        assert gap <= bound, f"probabilities differ by {gap:.3g} > {bound:.3g}"
    return run


@pytest.mark.interop
def test_the_spatial_induction_export_round_trips():
    _transformer_lens()
    sih_export_roundtrip_check()()


def _drop_recency(state, config, model):
    F = model.features.shape[1]
    start = model.export_blocks()["features"].start
    state["blocks.0.attn.W_Q"][:, start + F - 1, F - 2] = 0.0


# The export with the gather's recency term dropped: the slab 3 back ties.
_without_recency = edited_export(_drop_recency)


@pytest.mark.interop
def test_an_export_without_recency_fails_the_spatial_round_trip():
    _transformer_lens()
    expect_failure(sih_export_roundtrip_check(_without_recency))


@pytest.mark.interop
def test_the_spatial_export_bound_resolves_the_recency_mutant():
    """An anchor for the composed bound, measured against what it must resolve rather than a
    fixed 1e-6: on the round trip's pinned five-slab example the recency mutant moves the
    probabilities by more than twice the bound (the round trip's tolerance), so the bound is
    not vacuous there, and it is positive."""
    _transformer_lens()
    from constructions.export import transformer_lens_inputs, transformer_lens_outputs

    task = sih.CellularAutomaton(1, 4, 2, sih.neighbourhood(1, "moore"))
    rng = np.random.default_rng(0)
    model = sih.spatial_induction_circuit(task, 5 * task.volume, alpha=1.0)
    tokens = task.flatten(task.sample(task.sample_rules(2, rng, alpha=1.0), 5, rng))
    with torch.no_grad():
        theirs = transformer_lens_outputs(
            model, _without_recency(model)(**transformer_lens_inputs(model, tokens)))
    bound = sih_export_bound(model, tokens.shape[1])
    assert 0 < 2 * bound < float((theirs - model(tokens)).abs().max())


def test_the_active_dormant_head_width_is_a_power_of_four():
    assert [bb._power_of_four(n) for n in (1, 2, 4, 5, 16, 17)] == [1, 4, 4, 16, 16, 64]


# --- valid example arguments for tests/test_public_api.py ---------------------------------------

def _bb_task() -> bb.BigramBackcopy:
    return bb.BigramBackcopy(bb.dirichlet_bigrams(4, 1.0, np.random.default_rng(0)), 1)


def _dc_task() -> dc.DelayCopyTask:
    return dc.DelayCopyTask(n_data=4, copy_len=2, distances=(3, 4), length=24, max_duration=2,
                            mean_duration=1.0, skip=0)


def _dc_tokens() -> torch.Tensor:
    return _dc_task().sample(1, np.random.default_rng(0)).tokens


PUBLIC_API_EXAMPLES = {
    "bigram_backcopy.active_dormant_model": lambda: {"task": _bb_task(), "max_len": 4},
    "bigram_backcopy.caricature_clock": lambda: {"a": 1.0, "n": 4, "s2": 0.5},
    "bigram_backcopy.caricature_flow": lambda: {"a": 1.0, "b": 0.5, "n": 4, "s2": 0.5},
    "bigram_backcopy.caricature_loss": lambda: {"a": 1.0, "b": 0.5, "n": 4, "s2": 0.5},
    "bigram_backcopy.dirichlet_bigrams": lambda: {"vocab_size": 3, "concentration": 1.0,
                                                  "generator": np.random.default_rng(0)},
    "bigram_backcopy.stationary": lambda: {"cond": _bb_task().cond},
    "delay_copy.fixed_offset_copier": lambda: {"tokens": _dc_tokens(), "task": _dc_task(),
                                               "distance": 3},
    "delay_copy.induction_copier": lambda: {"tokens": _dc_tokens(), "task": _dc_task()},
    "delay_copy.oracle_copier": lambda: {"tokens": _dc_tokens(), "task": _dc_task()},
    "spatial_induction.dirichlet_parameter": lambda: {"alpha": 1.0, "n_states": 2},
    "spatial_induction.gather_qk": lambda: {"task": ca(), "delta": (1,), "side": "next",
                                            "temps": sih.gather_temperatures(1, 5, 10)},
    "spatial_induction.gather_temperatures": lambda: {"side": 5},
    "spatial_induction.positional_features": lambda: {"task": ca(), "n_positions": 3},
    "spatial_induction.spatial_induction_circuit": lambda: {"task": ca(), "max_positions": 10},
    "spatial_induction.temperatures_for": lambda: {"volume": 5, "side": 5, "positions": 10},
}
PUBLIC_API_ACCEPTED = {
    # a sequence may be empty (no predictions) or longer (another sequence)
    **{(f"delay_copy.{f}", "tokens"): ("empty", "mismatched")
       for f in ("fixed_offset_copier", "induction_copier", "oracle_copier")},
    # gap 0: the paste follows the source directly
    ("delay_copy.induction_accuracy", "gap"): ("zero",),
    ("delay_copy.approximate_induction_accuracy", "gap"): ("zero",),
}
