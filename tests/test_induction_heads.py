"""Mutants and bad input for the induction-heads area.

Every mutant rebuilds a check of ``theorems.areas.induction_heads`` around a broken construction
(β₁ too small, no recency bias, no BOS sink, a rolled positional embedding), broken
parameters, a broken oracle, or a tightened bound, and asserts with ``expect_failure`` that
the check then fails.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch
from killed import failed_assertion

from constructions import induction_heads as ih
from theorems.areas.induction_heads import exactness, finite_precision, lower_bound
from theorems.evidence import expect_failure
from theorems.profiles import without_shrinking

BUILDERS = {"two_layer": ih.two_layer_induction, "compact": ih.compact_induction}
# beta1 far below the derived value: layer 1 no longer isolates the previous token.
SMALL_BETA1 = {"two_layer": 0.1, "compact": 1.0}


def rolled_positions(build):
    """The builder, with its positional embedding rolled one step (row t <- row t-1)."""
    @functools.wraps(build)
    def make(vocab_size, max_len, **kwargs):
        model = build(vocab_size, max_len, **kwargs)
        with torch.no_grad():
            model.W_pos.copy_(model.W_pos.roll(1, dims=0))
        return model
    return make


def broken(kind: str) -> dict:
    """The four broken constructions of the issue, by name."""
    build = BUILDERS[kind]
    return {"small beta1": functools.partial(build, beta1=SMALL_BETA1[kind]),
            "no recency bias": functools.partial(build, recency=0.0),
            "no BOS sink": functools.partial(build, sink=0.0),
            "rolled positions": rolled_positions(build)}


# --- exactness --------------------------------------------------------------------------------

def fails_at(check, match: str, **case) -> str:
    """The Hypothesis check fails, and on the pinned ``case`` it fails at the assertion whose
    message matches ``match`` (the sentence the mutant breaks)."""
    report = expect_failure(check)
    with pytest.raises(AssertionError, match=match):
        check.hypothesis.inner_test(**case)
    return report


def beta1_one_below(kind: str):
    """The builder with beta1 one e-fold (one 1/g_pos for the circles) below the derivation:
    the argmax survives on short inputs, the layer-1 weight on i-1 drops below alpha (1 - delta)
    by about n e^{-beta1}(e - 1), far above layer1_weight_tolerance."""
    def make(vocab_size, max_len, **kwargs):
        params = finite_precision.parameters_for(kind, vocab_size, max_len)
        beta1 = params.beta1 - 1 / params.position_gap
        return BUILDERS[kind](vocab_size, max_len, beta1=beta1, **kwargs)
    return make


ARGMAX = r"^S=\d+, max_len=\d+: predicted"
LAYER1 = r"^layer-1 weight on i-1 is .* below the guarantee"
LAYER2 = r"^layer-2 weight on the induction key is .* too low"


@pytest.mark.mutant("induction-heads.two-layer-exact", "induction-heads.compact-exact")
@pytest.mark.parametrize("kind", ["two_layer", "compact"])
@pytest.mark.parametrize(("mutant", "sequence"), [
    ("small beta1", [0, 1, 0, 2, 0]), ("no BOS sink", [0, 1, 2]),
    ("rolled positions", [0, 1, 0, 2, 0])])
def test_broken_constructions_miss_the_argmax(kind, mutant, sequence):
    fails_at(exactness.exactness_check(broken(kind)[mutant], kind), ARGMAX,
             case=(3, len(sequence), sequence))


@pytest.mark.mutant("induction-heads.two-layer-exact", "induction-heads.compact-exact")
@pytest.mark.parametrize("kind", ["two_layer", "compact"])
def test_beta1_below_the_derivation_misses_the_layer1_guarantee(kind):
    fails_at(exactness.exactness_check(beta1_one_below(kind), kind), LAYER1,
             case=(3, 5, [0, 1, 0, 2, 0]))


@pytest.mark.mutant("induction-heads.two-layer-exact", "induction-heads.compact-exact")
@pytest.mark.parametrize("kind", ["two_layer", "compact"])
def test_no_recency_bias_splits_the_layer2_weight(kind):
    # both older matches of the last 0 are followed by 1: the argmax stays right, but the
    # weight on the latest one falls below the threshold
    fails_at(exactness.exactness_check(broken(kind)["no recency bias"], kind), LAYER2,
             case=(3, 5, [0, 1, 0, 1, 0]))


@pytest.mark.mutant("induction-heads.two-layer-exact", "induction-heads.compact-exact")
@pytest.mark.parametrize("kind", ["two_layer", "compact"])
@pytest.mark.parametrize("mutant", ["small beta1", "no BOS sink", "rolled positions",
                                    "no recency bias"])
def test_broken_constructions_fail_the_exhaustive_check(kind, mutant):
    report = failed_assertion(exactness.exhaustive_check(broken(kind)[mutant], kind,
                                                         sizes=((3, 5),)))
    assert "S=3, n=5: " in report and "sequences wrong" in report


@pytest.mark.mutant("induction-heads.two-layer-exact", "induction-heads.compact-exact")
@pytest.mark.parametrize(("kind", "mutant", "message"), [
    ("two_layer", "beta1", "layer-1 weight too low"),
    ("compact", "beta1", "layer-1 weight too low"),
    ("two_layer", "recency", "layer-2 weight on the induction key too low"),
    ("compact", "recency", "layer-2 weight on the induction key too low")])
def test_exhaustive_check_fails_at_the_weight_sentences(kind, mutant, message):
    # over {0}^n every target is 0 (or bot first), so the argmax holds and the weights fail
    build = (beta1_one_below(kind) if mutant == "beta1" else broken(kind)["no recency bias"])
    report = failed_assertion(exactness.exhaustive_check(build, kind, sizes=((1, 5),)))
    assert f"S=1, n=5: {message}" in report


@pytest.mark.mutant("induction-heads.compact-exact")
def test_a_growing_width_fails_the_width_check():
    report = failed_assertion(exactness.width_check(ih.two_layer_induction))
    assert "are not the stated ones" in report


@pytest.mark.mutant("induction-heads.two-layer-exact")
def test_a_width_off_by_one_fails_the_two_layer_width_check():
    report = failed_assertion(exactness.width_check(
        ih.two_layer_induction, lambda S, n: 3 * S + n + 4))
    assert "are not the stated ones" in report


# --- margin conditions ------------------------------------------------------------------------

def _with(parameters, **changes):
    """A parameter formula with some fields replaced by functions of (n, params, lib)."""
    def formula(*args, lib=math, **kwargs):
        params = parameters(*args, lib=lib, **kwargs)
        n = args[-1]
        return dataclasses.replace(params, **{k: f(n, params, lib) for k, f in changes.items()})
    return formula


def only_b_tightened(conditions, factor: float):
    """The conditions with (B)'s bound divided by ``factor``: a falsified (B), the others as
    stated. (B) cannot be broken alone by the parameters: (C) and (D) imply it (adding their
    exponents gives (B)'s, for the one-hot and, as rho <= 1, for the circle model)."""
    def run(n, params, *, lib):
        out = conditions(n, params, lib=lib)
        return out | {"B": (out["B"][0], out["B"][1] / factor)}
    return run


def margin_failures(parameters, conditions=ih.two_layer_conditions, **kwargs) -> str:
    return failed_assertion(exactness.margin_numeric_check(parameters, conditions, **kwargs))


@pytest.mark.mutant("induction-heads.two-layer-margins")
def test_beta1_below_the_derivation_fails_the_two_layer_margin_checks():
    small = _with(ih.two_layer_parameters, beta1=lambda n, p, lib: lib.log(n * p.beta2) - 1)
    assert "n exp(-beta1) != 1/(e beta2)" in failed_assertion(
        exactness.two_layer_margin_symbolic_check(small))
    assert "(A) fails at S=None, n=1:" in margin_failures(small)


@pytest.mark.mutant("induction-heads.two-layer-margins")
def test_recency_without_slack_fails_condition_a():
    tight = _with(ih.two_layer_parameters, recency=lambda n, p, lib: lib.log(3 * n))
    assert "(A) could not be proved" in failed_assertion(
        exactness.two_layer_margin_symbolic_check(tight))
    assert "(A) fails at S=None, n=1:" in margin_failures(tight)


@pytest.mark.mutant("induction-heads.two-layer-margins")
def test_a_tightened_b_fails_the_two_layer_numeric_check():
    # (B) at n = 1 is about e^{-21}: a bound 1/3 e^{-30} is false there
    report = margin_failures(ih.two_layer_parameters,
                             only_b_tightened(ih.two_layer_conditions, math.exp(30)))
    assert "(B) fails at S=None, n=1:" in report


@pytest.mark.mutant("induction-heads.two-layer-margins")
def test_a_sink_above_the_match_fails_condition_c():
    high = _with(ih.two_layer_parameters, sink=lambda n, p, lib: 2 * p.beta2)
    assert "(C) could not be proved" in failed_assertion(
        exactness.two_layer_margin_symbolic_check(high))
    assert "(C) fails at S=None, n=1:" in margin_failures(high)


@pytest.mark.mutant("induction-heads.two-layer-margins")
@pytest.mark.parametrize("sink", [lambda n, p, lib: p.sink - 2, lambda n, p, lib: 0 * n],
                         ids=["sink-2", "no-sink"])
def test_a_low_sink_fails_condition_d(sink):
    low = _with(ih.two_layer_parameters, sink=sink)
    assert "(D) could not be proved" in failed_assertion(
        exactness.two_layer_margin_symbolic_check(low))
    assert "(D) fails at S=None, n=1:" in margin_failures(low)


def compact_failures(parameters, conditions=ih.compact_conditions) -> str:
    return margin_failures(parameters, conditions, vocab_sizes=(3,))


@pytest.mark.mutant("induction-heads.compact-margins")
def test_beta1_below_the_derivation_fails_the_compact_margin_checks():
    def small(n, p, lib):
        return (lib.log(n * p.beta2) - 1) / p.position_gap

    mutant = _with(ih.compact_parameters, beta1=small)
    assert "delta * beta2 != 1/e" in failed_assertion(
        exactness.compact_margin_symbolic_check(mutant))
    assert "(A) fails at S=3, n=1:" in compact_failures(mutant)


@pytest.mark.mutant("induction-heads.compact-margins")
@pytest.mark.parametrize("recency", [lambda n, p, lib: p.recency - 2, lambda n, p, lib: 0 * n],
                         ids=["recency-2", "no-recency"])
def test_low_recency_fails_condition_a_prime(recency):
    low = _with(ih.compact_parameters, recency=recency)
    assert "(A') could not be proved" in failed_assertion(
        exactness.compact_margin_symbolic_check(low))
    assert "(A) fails at S=3, n=1:" in compact_failures(low)


@pytest.mark.mutant("induction-heads.compact-margins")
def test_a_tightened_b_prime_fails_the_compact_numeric_check():
    report = compact_failures(ih.compact_parameters,
                              only_b_tightened(ih.compact_conditions, math.exp(30)))
    assert "(B) fails at S=3, n=1:" in report


@pytest.mark.mutant("induction-heads.compact-margins")
def test_a_sink_above_the_match_fails_condition_c_prime():
    high = _with(ih.compact_parameters, sink=lambda n, p, lib: p.sink + p.beta2)
    assert "(C') could not be proved" in failed_assertion(
        exactness.compact_margin_symbolic_check(high))
    assert "(C) fails at S=3, n=1:" in compact_failures(high)


@pytest.mark.mutant("induction-heads.compact-margins")
def test_a_low_sink_fails_condition_d_prime():
    low = _with(ih.compact_parameters, sink=lambda n, p, lib: p.sink - 2)
    assert "(D') could not be proved" in failed_assertion(
        exactness.compact_margin_symbolic_check(low))
    assert "(D) fails at S=3, n=1:" in compact_failures(low)


# --- precision --------------------------------------------------------------------------------

@pytest.mark.mutant("induction-heads.precision")
@pytest.mark.parametrize("kind", ["two_layer", "compact"])
def test_small_beta1_fails_the_precision_checks(kind):
    build = broken(kind)["small beta1"]
    report = failed_assertion(finite_precision.precision_check({kind: build}, {kind: (16,)}))
    assert f"{kind}, n=16: not exact with the predicted p=" in report
    fails_at(finite_precision.emulated_exactness_check(build, kind),
             r"^S=3, max_len=5: wrong with p=", case=(3, 5, [0, 1, 0, 2, 0]))


@pytest.mark.mutant("induction-heads.precision")
def test_a_tightened_precision_bound_fails():
    def tightened(kind, vocab_size, length):
        return math.ceil(math.log2(length))  # "log2 n bits", without constants or log log n

    report = failed_assertion(finite_precision.precision_check(
        lengths={"two_layer": (64,), "compact": (256,)}, bits=tightened))
    assert "two_layer, n=64: not exact with the predicted p=6 bits" in report


def bits_with(kind: str, formula):
    """required_bits_for, with the bits of construction ``kind`` replaced by ``formula(n)``."""
    def bits(which, vocab_size, n):
        if which == kind:
            return formula(n)
        return finite_precision.required_bits_for(which, vocab_size, n)
    return bits


@pytest.mark.mutant("induction-heads.precision")
@pytest.mark.parametrize(("kind", "name", "formula"), [
    ("two_layer", "one-hot", lambda n: 2 * n.bit_length()),   # M ~ n^2: slope 2
    ("compact", "circle", lambda n: n.bit_length()),          # M ~ n: slope 1
    ("compact", "circle", lambda n: n)])                      # linear p
def test_a_wrong_growth_fails_the_logarithmic_check(kind, name, formula):
    report = failed_assertion(finite_precision.logarithmic_bits_check(bits_with(kind, formula)))
    assert f"{name}: p grows by" in report


# --- task, reduction, decomposition, lower bound --------------------------------------------

def earliest_occurrence_targets(tokens: torch.Tensor) -> torch.Tensor:
    """A wrong oracle: the token after the *first* earlier occurrence."""
    flat = tokens.reshape(-1, tokens.shape[-1]).tolist()
    out = []
    for row in flat:
        out.append([row[row.index(t) + 1] if row.index(t) < i else ih.NO_MATCH
                    for i, t in enumerate(row)])
    return torch.tensor(out).reshape(tokens.shape)


def matched_token_oracle(tokens: torch.Tensor) -> torch.Tensor:
    """A wrong oracle: the matched token itself, sigma_{j*}, instead of its successor."""
    previous = ih.previous_occurrence(tokens)
    return torch.where(previous >= 0, tokens.gather(-1, previous.clamp(min=0)), ih.NO_MATCH)


def zero_for_no_match(tokens: torch.Tensor) -> torch.Tensor:
    """A wrong oracle: token 0 where no earlier match exists, instead of bot."""
    return ih.induction_targets(tokens).clamp(min=0)


def bot_as_vocabulary_size(tokens: torch.Tensor) -> torch.Tensor:
    """A wrong encoding: bot = max token + 1 (the model's class S), not -1."""
    targets = ih.induction_targets(tokens)
    return torch.where(targets == ih.NO_MATCH, int(tokens.max()) + 1, targets)


def flattened(tokens: torch.Tensor) -> torch.Tensor:
    """A wrong batch shape: the leading dims flattened into one."""
    return ih.induction_targets(tokens.reshape(-1, tokens.shape[-1]))


ORACLE = r"^oracle \[.*\] != definition"


@pytest.mark.mutant("induction-heads.task")
@pytest.mark.parametrize(("oracle", "sequence"), [
    (earliest_occurrence_targets, [0, 1, 0, 2, 0]), (matched_token_oracle, [0, 1, 0, 2, 0])])
def test_wrong_matches_fail_the_task_check(oracle, sequence):
    fails_at(exactness.task_check(oracle), ORACLE, case=(3, 5, sequence), batch=1)


@pytest.mark.mutant("induction-heads.task")
def test_no_bot_without_a_match_fails_the_task_check():
    fails_at(exactness.task_check(zero_for_no_match), ORACLE, case=(3, 3, [0, 1, 2]), batch=1)


@pytest.mark.mutant("induction-heads.task")
def test_another_bot_fails_the_task_check():
    fails_at(exactness.task_check(bot_as_vocabulary_size), ORACLE, case=(3, 3, [0, 1, 2]),
             batch=1)


@pytest.mark.mutant("induction-heads.task")
def test_a_flattened_batch_fails_the_task_check():
    fails_at(exactness.task_check(flattened), r"^shape \(2, \d+\) != \(2, 1, \d+\)",
             case=(3, 5, [0, 1, 0, 2, 0]), batch=2)


@pytest.mark.mutant("induction-heads.index-reduction")
def test_matched_token_oracle_fails_the_reduction_check():
    fails_at(lower_bound.index_reduction_check(oracle=matched_token_oracle),
             r"^tau_n = 2, but x_2 = 1", case=([0, 1, 0], 2))


def star_on_alices_side(bits, index):
    tokens, alice = ih.index_instance(bits, index)
    tokens[2 * (index - 1)] = 0
    tokens[2 * index - 1] = ih.STAR  # Bob's star moved onto Alice's bit
    return tokens, alice


def alice_on_odd_positions(bits, index):
    tokens, alice = ih.index_instance(bits, index)
    return tokens, alice.roll(1)


@pytest.mark.mutant("induction-heads.index-reduction")
@pytest.mark.parametrize(("instance", "match"), [
    (star_on_alices_side, r"^sigma .* is not the instance"),
    (alice_on_odd_positions, r"^Alice's positions are not the even ones")])
def test_a_wrong_instance_fails_the_reduction_check(instance, match):
    fails_at(lower_bound.index_reduction_check(instance=instance), match, case=([0, 1, 0], 2))


DECOMPOSITION_CASE = {"case": ([1, 1, 0, 1], 3), "heads": 2, "width": 8, "seed": 0}


@pytest.mark.mutant("induction-heads.one-layer-decomposition")
def test_bob_normalising_alone_fails_the_decomposition_check():
    def bob_only(model, tokens, alice, bob):
        return ih.combine_messages(model, tokens, (alice[0], torch.zeros_like(alice[1])), bob)

    fails_at(without_shrinking()(lower_bound.decomposition_check(combine=bob_only)),
             r"^rebuilt output differs by", **DECOMPOSITION_CASE)


@pytest.mark.mutant("induction-heads.one-layer-decomposition")
def test_bob_reading_alices_tokens_fails_the_decomposition_check():
    def from_the_tokens(model, tokens, alice, bob):
        return model(tokens)[-1]  # the whole forward pass: right only if Bob saw her bits

    fails_at(without_shrinking()(lower_bound.decomposition_check(combine=from_the_tokens)),
             r"^rebuilt output differs by", **DECOMPOSITION_CASE)


@pytest.mark.mutant("induction-heads.one-layer-decomposition")
def test_a_message_with_alices_bits_fails_the_decomposition_check():
    def with_bits(model, tokens, owned, *, bos=False):
        numerator, total = ih.one_layer_messages(model, tokens, owned, bos=bos)
        return numerator, torch.cat([total, tokens[owned].to(total.dtype)])  # |A| more numbers

    fails_at(without_shrinking()(lower_bound.decomposition_check(messages=with_bits)),
             r"^Alice sends .* not H\(m\+1\) numbers", **DECOMPOSITION_CASE)


@pytest.mark.mutant("induction-heads.one-layer-lower-bound")
def test_an_oracle_blind_to_the_index_fails_the_counting_check():
    report = failed_assertion(lower_bound.counting_check(oracle=matched_token_oracle))
    assert "n'=1: 1 answer tuples, so fewer than n' bits would do" in report


@pytest.mark.mutant("induction-heads.one-layer-lower-bound")
def test_separation_below_the_crossover_fails():
    report = failed_assertion(lower_bound.separation_check(length=511))
    assert "is not below (n-1)/2 = 255.0" in report


@pytest.mark.mutant("induction-heads.one-layer-lower-bound")
def test_linear_precision_fails_the_counting_check():
    report = failed_assertion(lower_bound.counting_check(circle_bits=lambda n: n))
    assert "two-layer size / one-layer minimum -> 24, not 0" in report


def doctored(monkeypatch, changes: dict) -> None:
    """The smoke experiment cut to 2 steps (cheap), its metrics then set to a clean
    separation (two layers exact with their mechanism, one layer at 0.3 then 0.2) and
    ``changes`` applied on top: each mutant breaks one sentence of the statement alone."""
    import empirics.induction_heads as experiment

    real = experiment.INDUCTION_HEADS

    def run(config, **kwargs):
        result = real(config, **(kwargs | {"steps": 2, "eval_batch": 64}))
        for key in result.metrics:
            _, model, name = key.split("/")
            n = int(key.split("/")[0][1:])
            clean = {"accuracy": 1.0 if model.startswith("2L") else 0.3 - (n - 16) / 160,
                     "layer1_mass": 0.9, "layer2_mass": 0.9}
            if not model.startswith("construction") and name in clean:
                result.metrics[key] = changes.get((n, model[:2], name), clean[name])
        return result

    monkeypatch.setattr(experiment, "INDUCTION_HEADS", run)


@pytest.mark.training
@pytest.mark.mutant("induction-heads.gd-depth-separation")
def test_undertrained_models_fail_the_empirical_check():
    report = failed_assertion(lower_bound.gd_check(steps=2, eval_batch=64))
    assert "n=16: two layers reach only" in report


@pytest.mark.training
@pytest.mark.mutant("induction-heads.gd-depth-separation")
@pytest.mark.parametrize(("change", "message"), [
    ({(16, "2L", "accuracy"): 0.9}, "n=16: two layers reach only 0.900"),
    ({(32, "2L", "layer1_mass"): 0.4}, "n=32: no previous-token head"),
    ({(16, "2L", "layer2_mass"): 0.4}, "n=16: no induction head"),
    ({(16, "1L", "accuracy"): 0.6}, "reaches 0.600 at n=16"),
    ({(32, "1L", "accuracy"): 0.4}, "accuracy grows with n: [0.3, 0.4]")],
    ids=["accuracy", "layer1", "layer2", "one-layer-half", "one-layer-grows"])
def test_doctored_runs_fail_the_empirical_check_at_their_sentence(monkeypatch, change, message):
    doctored(monkeypatch, change)
    assert message in failed_assertion(lower_bound.gd_check())


# --- the model and its emulation ------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["two_layer", "compact"])
def test_rounded_path_with_identity_matches_the_forward(kind):
    model, tokens = BUILDERS[kind](5, 20), finite_precision.stress_batch(5, 20)
    plain, patterns = model.run(tokens)
    emulated, emulated_patterns = model.run(tokens, rounding=lambda t: t)
    # Exact: the emulation runs the same operations in the same order as the plain forward
    # (the same einsum contractions, the same masked softmax, the same residual sums), and
    # the identity rounding changes no number.
    assert torch.equal(plain, emulated)
    for a, b in zip(patterns, emulated_patterns, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(("bits", "dtype"), [(24, torch.float32), (11, torch.float16),
                                             (8, torch.bfloat16)])
def test_round_significand_matches_the_hardware_formats(bits, dtype):
    # float32 inputs: torch converts float64 to the small formats through float32, which
    # rounds twice, while from float32 it rounds once, to nearest even, like the emulation.
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(10_000, generator=generator) * 100
    assert torch.equal(ih.round_significand(x.double(), bits), x.to(dtype).double())


def test_patterns_are_causal_stochastic_and_include_the_bos():
    model = ih.compact_induction(4, 10)
    tokens = torch.tensor([[0, 1, 2, 3, 0, 1]])
    first, second = model.attention_patterns(tokens)
    assert first.shape == second.shape == (1, 1, 7, 7)
    for pattern in (first, second):
        assert torch.allclose(pattern.sum(-1), torch.ones(1, 1, 7, dtype=pattern.dtype))
        assert torch.all(pattern.triu(1) == 0)


def test_one_dimensional_tokens_give_one_dimensional_logits():
    model = ih.two_layer_induction(3, 6)
    assert model(torch.tensor([0, 1, 2, 0])).shape == (4, 4)
    assert model.predict(torch.tensor([[0, 1, 0]])).tolist() == [[-1, -1, 1]]


def test_the_constructions_run_in_float32_on_their_device():
    model = ih.compact_induction(3, 8, dtype=torch.float32, device="cpu")
    assert model(torch.tensor([[0, 1, 2]])).dtype == torch.float32


def test_the_experiment_is_registered_with_both_configs():
    from empirics.experiment import load_all

    experiment = load_all()["induction-heads"]
    assert set(experiment.configs) >= {"smoke", "full"}
    assert experiment.configs["full"]["lengths"] == [16, 32, 64]
    assert experiment.configs["full"]["one_layer_heads"] == [1, 2, 4, 8]


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [ih.two_layer_induction, ih.compact_induction])
@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"vocab_size": 0}, ValueError, "vocab_size"),
    ({"vocab_size": 2.5}, TypeError, "vocab_size"),
    ({"max_len": 0}, ValueError, "max_len"),
    ({"max_len": True}, TypeError, "max_len"),
    ({"dtype": torch.int64}, ValueError, "dtype"),
    ({"dtype": "float64"}, TypeError, "dtype"),
    ({"beta1": -1.0}, ValueError, "beta1"),
    ({"beta2": 0.0}, ValueError, "beta2"),
    ({"recency": -0.5}, ValueError, "recency"),
    ({"sink": math.inf}, ValueError, "sink"),
])
def test_builders_reject_bad_arguments(build, kwargs, error, name):
    arguments = {"vocab_size": 3, "max_len": 5} | kwargs
    with pytest.raises(error, match=name):
        build(arguments.pop("vocab_size"), arguments.pop("max_len"), **arguments)


@pytest.mark.parametrize("build", [ih.two_layer_induction, ih.compact_induction])
@pytest.mark.parametrize(("tokens", "error", "match"), [
    (torch.tensor([[0, 3]]), ValueError, r"tokens must lie in \[0, 3\)"),
    (torch.tensor([[-1, 0]]), ValueError, "tokens must lie"),
    (torch.zeros(1, 6, dtype=torch.long), ValueError, "tokens has length 6 > max_len=5"),
    (torch.zeros(1, 2), TypeError, "tokens must have an integer dtype"),
    (torch.zeros(1, 1, 2, dtype=torch.long), ValueError, "tokens must have 1 or 2 dims"),
    ([0, 1], TypeError, "tokens must be a torch.Tensor"),
])
def test_models_reject_bad_tokens(build, tokens, error, match):
    with pytest.raises(error, match=match):
        build(3, 5)(tokens)


@pytest.mark.parametrize(("tokens", "error", "match"), [
    (torch.tensor([0.0, 1.0]), TypeError, "integer dtype"),
    (torch.tensor([0, -2]), ValueError, "tokens must be >= 0"),
    (torch.tensor(3), ValueError, "scalar"),
    ([0, 1], TypeError, "torch.Tensor"),
])
def test_oracle_rejects_bad_tokens(tokens, error, match):
    with pytest.raises(error, match=match):
        ih.induction_targets(tokens)


def test_oracle_handles_empty_and_batched_input():
    assert ih.induction_targets(torch.zeros(2, 0, dtype=torch.long)).shape == (2, 0)
    batch = torch.tensor([[[0, 1, 0, 1]], [[2, 2, 2, 2]]])
    assert ih.induction_targets(batch).tolist() == [[[-1, -1, 1, 0]], [[-1, 2, 2, 2]]]


@pytest.mark.parametrize(("bits", "index", "match"), [
    ([], 1, "bits"), ([0, 2], 1, "bits"), ([0, 1], 0, "index"), ([0, 1], 3, "index"),
    ([0, 1], True, "index"),
])
def test_index_instance_rejects_bad_arguments(bits, index, match):
    with pytest.raises(ValueError, match=match):
        ih.index_instance(bits, index)


def test_messages_need_a_one_layer_model():
    tokens, alice = ih.index_instance([0, 1], 1)
    with pytest.raises(ValueError, match="one-layer"):
        ih.one_layer_messages(ih.two_layer_induction(3, 5), tokens, alice)


@pytest.mark.parametrize("bits", [0, -3, 2.0])
def test_round_significand_rejects_bad_bits(bits):
    with pytest.raises((ValueError, TypeError), match="bits"):
        ih.round_significand(torch.ones(2, dtype=torch.float64), bits)


def test_guarantees_reject_an_unknown_kind():
    with pytest.raises(ValueError, match="model_kind"):
        ih.guarantees("three_layer", 3, 5)
