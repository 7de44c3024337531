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

from constructions import induction_heads as ih
from theorems.areas.induction_heads import exactness, lower_bound
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

@pytest.mark.mutant("induction-heads.two-layer-exact", "induction-heads.compact-exact")
@pytest.mark.parametrize("kind", ["two_layer", "compact"])
@pytest.mark.parametrize("mutant", ["small beta1", "no recency bias", "no BOS sink",
                                    "rolled positions"])
def test_broken_constructions_fail_the_property_check(kind, mutant):
    report = expect_failure(exactness.exactness_check(broken(kind)[mutant], kind))
    assert "Falsifying" in report or "Failing" in report


@pytest.mark.mutant("induction-heads.two-layer-exact", "induction-heads.compact-exact")
@pytest.mark.parametrize("kind", ["two_layer", "compact"])
@pytest.mark.parametrize("mutant", ["small beta1", "no recency bias", "no BOS sink",
                                    "rolled positions"])
def test_broken_constructions_fail_the_exhaustive_check(kind, mutant):
    expect_failure(exactness.exhaustive_check(broken(kind)[mutant], kind, sizes=((3, 5),)))


@pytest.mark.mutant("induction-heads.compact-exact")
def test_a_growing_width_fails_the_width_check():
    expect_failure(exactness.width_check(ih.two_layer_induction))


# --- margin conditions ------------------------------------------------------------------------

def _with(parameters, **changes):
    """A parameter formula with some fields replaced by functions of (n, params, lib)."""
    def formula(*args, lib=math, **kwargs):
        params = parameters(*args, lib=lib, **kwargs)
        n = args[-1]
        return dataclasses.replace(params, **{k: f(n, params, lib) for k, f in changes.items()})
    return formula


@pytest.mark.mutant("induction-heads.two-layer-margins")
def test_beta1_below_the_derivation_fails_the_two_layer_margin_checks():
    small = _with(ih.two_layer_parameters, beta1=lambda n, p, lib: lib.log(n * p.beta2) - 1)
    expect_failure(exactness.two_layer_margin_symbolic_check(small))
    expect_failure(exactness.margin_numeric_check(small))


@pytest.mark.mutant("induction-heads.two-layer-margins")
def test_recency_without_slack_fails_the_two_layer_symbolic_check():
    tight = _with(ih.two_layer_parameters, recency=lambda n, p, lib: lib.log(3 * n))
    expect_failure(exactness.two_layer_margin_symbolic_check(tight))


@pytest.mark.mutant("induction-heads.two-layer-margins")
def test_no_sink_fails_the_two_layer_numeric_check():
    expect_failure(exactness.margin_numeric_check(
        _with(ih.two_layer_parameters, sink=lambda n, p, lib: 0 * n)))


@pytest.mark.mutant("induction-heads.compact-margins")
def test_beta1_below_the_derivation_fails_the_compact_margin_checks():
    def small(n, p, lib):
        return (lib.log(n * p.beta2) - 1) / p.position_gap

    mutant = _with(ih.compact_parameters, beta1=small)
    expect_failure(exactness.compact_margin_symbolic_check(mutant))
    expect_failure(exactness.margin_numeric_check(mutant, ih.compact_conditions, vocab_sizes=(3,)))


@pytest.mark.mutant("induction-heads.compact-margins")
def test_no_recency_fails_the_compact_numeric_check():
    expect_failure(exactness.margin_numeric_check(
        _with(ih.compact_parameters, recency=lambda n, p, lib: 0 * n), ih.compact_conditions,
        vocab_sizes=(3,)))


# --- precision --------------------------------------------------------------------------------

@pytest.mark.mutant("induction-heads.precision")
@pytest.mark.parametrize("kind", ["two_layer", "compact"])
def test_small_beta1_fails_the_precision_checks(kind):
    build = broken(kind)["small beta1"]
    expect_failure(exactness.precision_check({kind: build}, {kind: (16,)}))
    expect_failure(exactness.emulated_exactness_check(build, kind))


@pytest.mark.mutant("induction-heads.precision")
def test_a_tightened_precision_bound_fails():
    def tightened(kind, vocab_size, length):
        return math.ceil(math.log2(length))  # "log2 n bits", without constants or log log n

    expect_failure(exactness.precision_check(lengths={"two_layer": (64,), "compact": (256,)},
                                          bits=tightened))


@pytest.mark.mutant("induction-heads.precision")
def test_linear_precision_fails_the_logarithmic_check():
    expect_failure(exactness.logarithmic_bits_check(lambda kind, vocab_size, n: n))


# --- task, reduction, decomposition, lower bound --------------------------------------------

def earliest_occurrence_targets(tokens: torch.Tensor) -> torch.Tensor:
    """A wrong oracle: the token after the *first* earlier occurrence."""
    flat = tokens.reshape(-1, tokens.shape[-1]).tolist()
    out = []
    for row in flat:
        out.append([row[row.index(t) + 1] if row.index(t) < i else ih.NO_MATCH
                    for i, t in enumerate(row)])
    return torch.tensor(out).reshape(tokens.shape)


@pytest.mark.mutant("induction-heads.task")
def test_first_occurrence_oracle_fails_the_task_check():
    expect_failure(exactness.task_check(earliest_occurrence_targets))


def matched_token_oracle(tokens: torch.Tensor) -> torch.Tensor:
    """A wrong oracle: the matched token itself, sigma_{j*}, instead of its successor."""
    previous = ih.previous_occurrence(tokens)
    return torch.where(previous >= 0, tokens.gather(-1, previous.clamp(min=0)), ih.NO_MATCH)


@pytest.mark.mutant("induction-heads.index-reduction")
def test_matched_token_oracle_fails_the_reduction_check():
    expect_failure(lower_bound.index_reduction_check(oracle=matched_token_oracle))


@pytest.mark.mutant("induction-heads.index-reduction")
def test_star_on_alices_side_fails_the_reduction_check():
    def shifted(bits, index):
        tokens, alice = ih.index_instance(bits, index)
        tokens[2 * (index - 1)] = 0
        tokens[2 * index - 1] = ih.STAR  # Bob's star moved onto Alice's bit
        return tokens, alice

    expect_failure(lower_bound.index_reduction_check(instance=shifted))


@pytest.mark.mutant("induction-heads.one-layer-decomposition")
def test_bob_normalising_alone_fails_the_decomposition_check():
    def bob_only(model, tokens, alice, bob):
        return ih.combine_messages(model, tokens, (alice[0], torch.zeros_like(alice[1])), bob)

    expect_failure(without_shrinking()(lower_bound.decomposition_check(combine=bob_only)))


@pytest.mark.mutant("induction-heads.one-layer-lower-bound")
def test_separation_below_the_crossover_fails():
    expect_failure(lower_bound.separation_check(length=511))


@pytest.mark.mutant("induction-heads.one-layer-lower-bound")
def test_linear_precision_fails_the_counting_check():
    expect_failure(lower_bound.counting_check(circle_bits=lambda n: n))


@pytest.mark.training
@pytest.mark.mutant("induction-heads.gd-depth-separation")
def test_undertrained_models_fail_the_empirical_check():
    expect_failure(lower_bound.gd_check(steps=2, eval_batch=64))


# --- the model and its emulation ------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["two_layer", "compact"])
def test_rounded_path_with_identity_matches_the_forward(kind):
    model, tokens = BUILDERS[kind](5, 20), exactness.stress_batch(5, 20)
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
