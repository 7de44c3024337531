"""Mutants and bad input for the cot-and-looping area (theorems/areas/cot_and_looping/)."""

from fractions import Fraction
from functools import partial

import killed
import numpy as np
import pytest
import torch
from rerounded_weights import rerounded

from constructions import cot2, dyck, icdl, recursive_transformer
from theorems.areas.cot_and_looping import cot2 as cot2_checks
from theorems.areas.cot_and_looping import cot2_definitions, cot2_sampled
from theorems.areas.cot_and_looping import dyck as dyck_checks
from theorems.areas.cot_and_looping import icdl as icdl_checks
from theorems.areas.cot_and_looping import recursive_transformer as recursive_checks
from theorems.evidence import expect_failure
from theorems.trends import sizes_reversed, trend_check, trend_refutation

fails_at = partial(killed.fails_at, literal=True)  # messages as plain text


# --- CoT2 ---------------------------------------------------------------------------------------


def min_signed_sum(digits):
    """Forgets the non-negativity: the most negative signed sum."""
    return -sum(digits)


def beam_ties_minus_first(digits, num_beams=8):
    """Beam with the tie-break reversed and the negative paths kept: not the code's targets."""
    S, paths, K = cot2._beam(digits, num_beams, key=lambda p: (abs(p[0]), p[0], p[1]))
    kept = paths[:K]
    return torch.from_numpy(cot2._counts(np.stack([p[2] for p in kept]), S) / len(kept))


@pytest.mark.mutant("cot-and-looping.cot2-task")
def test_wrong_label_breaks_the_task():
    fails_at(cot2_checks.task_check(label=min_signed_sum), "!= brute force", digits=(1, 2),
             num_beams=1)
    report = expect_failure(cot2_checks.task_exhaustive_check(label=min_signed_sum))
    assert "labels differ from brute force" in report


@pytest.mark.mutant("cot-and-looping.cot2-task")
def test_beam_keeping_negative_paths_breaks_the_task():
    fails_at(cot2_checks.task_check(beam=beam_ties_minus_first),
             "final read-out is not the label", digits=(1,), num_beams=1)


def beam_plus_first(digits, num_beams=8):
    """The code's beam with its tie-break reversed (+1 before -1): still K non-negative paths,
    still a read-out of the label, but other prefixes kept."""
    S, paths, K = cot2._beam(digits, num_beams, key=lambda p: (p[0], tuple(-g for g in p[1])))
    kept = [p for p in paths if p[0] >= 0][:K]
    return torch.from_numpy(cot2._counts(np.stack([p[2] for p in kept]), S) / len(kept))


@pytest.mark.mutant("cot-and-looping.cot2-task")
def test_a_reversed_tie_break_is_not_the_beam_definition():
    fails_at(cot2_definitions.targets_definition_check(beam=beam_plus_first),
             "beam targets of", digits=(1, 1), num_beams=1)


@pytest.mark.mutant("cot-and-looping.cot2-task")
def test_a_beam_one_short_is_not_uniform():
    # K capped at 2^m - 1: a probability vector still, and the beam read-out is untouched
    fails_at(cot2_checks.task_check(
        minabs=lambda d, K: cot2.beam_minabs_targets(d, min(K, 2 ** len(d) - 1))),
             "beam_minabs with K = 2^m differs from uniform", digits=(1,), num_beams=1)


def same_sign_shift(a, v, **kw):
    """The wrong shift sign in M_a: (S_{+a} + S_{+a})/2."""
    if a == 0:
        return torch.eye(v, dtype=torch.float64)
    return torch.diag(torch.ones(v - a, dtype=torch.float64), -a)


def undivided(a, v, **kw):
    """The dropped 1/2: S_{+a} + S_{-a}."""
    return 2 * cot2.shift_average_matrix(a, v)


@pytest.mark.mutant("cot-and-looping.uniform-targets-linear")
@pytest.mark.parametrize("transition", [same_sign_shift, undivided])
def test_broken_transition_breaks_the_recursion(transition):
    fails_at(cot2_checks.symbolic_check(partial(cot2.uniform_recursion, transition=transition)),
             "generating function says", digits=(1,))
    report = expect_failure(cot2_checks.exhaustive_linear_check(transition))
    assert "recursion != code's targets" in report


def off_by_one_pointer(m, **kw):
    """Attention pointing one digit off: thought t attends digit t + 2 (t + 1 at the end)."""
    model = cot2.cot2_layer(m, **kw)
    model.W_Q.copy_(torch.roll(model.W_Q, 1, dims=0))
    return model


@pytest.mark.mutant("cot-and-looping.cot2-one-layer")
@pytest.mark.parametrize("build", [partial(cot2.cot2_layer, transition=same_sign_shift),
                                   off_by_one_pointer])
def test_broken_construction_breaks_the_rollout(build):
    fails_at(cot2_checks.one_layer_check(build=build), "|alpha - M_a alpha_prev|_1",
             digits=(1, 2))


@pytest.mark.mutant("cot-and-looping.cot2-one-layer")
def test_a_weak_attention_breaks_the_leak_bound():
    # beta = 2: rho_t is large, but the check still uses the beta = 40 bound
    fails_at(cot2_checks.one_layer_check(
        build=partial(cot2.cot2_layer), bound=lambda m, t, b, B: cot2.step_leak_bound(
            m, t, 40.0, B), beta=2.0), "|alpha - M_a alpha_prev|_1", digits=(1, 2))


@pytest.mark.mutant("cot-and-looping.cot2-one-layer")
def test_a_halved_clamp_allowance_breaks_the_leak_bound():
    # one digit: 17 of v = 19 entries clamped, leak 2 * 17 e^-B > half of 2 * 18 e^-B
    fails_at(cot2_checks.one_layer_check(
        bound=lambda m, t, b, B: cot2.step_leak_bound(m, t, b, B) / 2),
             "|alpha - M_a alpha_prev|_1", digits=(5,))


@pytest.mark.mutant("cot-and-looping.cot2-one-layer")
@pytest.mark.parametrize("build", [
    off_by_one_pointer, lambda m, beta, clamp: cot2.cot2_layer(m, beta=2.0, clamp=clamp)])
def test_a_misdirected_or_weak_attention_leaks_past_rho(build):
    # attention a digit off, or at beta = 2 while the check's rho_t is the one of beta = 40
    fails_at(cot2_definitions.attention_check(build=build), "exceeds rho_t", digits=(1, 2))


@pytest.mark.mutant("cot-and-looping.cot2-one-layer")
def test_the_complement_is_not_the_subset_sum_mapping():
    # (sum a - s)/2 is the sum of the digits signed -1: the wrong side of the bijection
    report = expect_failure(cot2_checks.subset_sum_mapping_check(
        to_subset=lambda total, s: (total - s) // 2))
    assert "but the subset sums to" in report


@pytest.mark.mutant("cot-and-looping.cot2-catalogue-leak-bound")
def test_the_refutation_needs_the_factor_two():
    # with the sound bound in its place, the as-stated check passes and the refutation fails
    report = expect_failure(cot2_checks.catalogue_refutation(
        bound=lambda m, t, b, B: cot2.step_leak_bound(m, t, b, B)
        + cot2_checks.float_tolerance(m, t, B)))
    assert "passed, but it was expected to fail" in report


def summed_tokens(alpha, E, K, n, *, generator=None):
    """Sums the K embeddings instead of averaging them."""
    return K * cot2.mts_tokens(alpha, E, K, n, generator=generator)


def one_token(alpha, E, K, n, *, generator=None):
    """Ignores K: discrete CoT, covariance K times too large."""
    return cot2.mts_tokens(alpha, E, 1, n, generator=generator)


@pytest.mark.mutant("cot-and-looping.mts-moments")
@pytest.mark.parametrize("sampler, message", [(summed_tokens, "MTS mean off"),
                                              (one_token, "MTS covariance off")])
def test_broken_sampler_breaks_the_moments(sampler, message):
    fails_at(cot2_checks.monte_carlo_check(sampler), message, v=3, d=2, K=4, seed=0)


@pytest.mark.mutant("cot-and-looping.mts-moments")
def test_covariance_without_one_over_k_breaks_the_identity():
    def moments(alpha, E, K):
        mean, cov = cot2.mts_moments(alpha, E, K)
        return mean, cov * K
    report = expect_failure(cot2_checks.exact_moments_check(moments))
    assert "Cov[" in report and "!= exact" in report


@pytest.mark.parametrize("digits, error", [
    ((), ValueError), ((1, 10), ValueError), ((-1,), ValueError), ((1.5,), TypeError),
    ("12", TypeError), (torch.tensor([1.0, 2.0]), TypeError)])
def test_bad_digits(digits, error):
    with pytest.raises(error, match="digits"):
        cot2.mnns_label(digits)
    with pytest.raises(error, match="digits"):
        cot2.uniform_targets(digits)


def test_bad_construction_arguments():
    with pytest.raises(ValueError, match="m"):
        cot2.cot2_layer(0)
    with pytest.raises(TypeError, match="m"):
        cot2.cot2_layer(2.0)
    with pytest.raises(ValueError, match="beta"):
        cot2.cot2_layer(2, beta=-1.0)
    with pytest.raises(ValueError, match="clamp"):
        cot2.cot2_layer(2, clamp=float("inf"))
    with pytest.raises(TypeError, match="transition"):
        cot2.cot2_layer(2, transition=3)
    with pytest.raises(ValueError, match="digits"):
        cot2.cot2_layer(2).rollout((1, 2, 3))
    with pytest.raises(ValueError, match="num_beams"):
        cot2.beam_targets((1, 2), 0)


def test_bad_mts_arguments():
    alpha, E = torch.tensor([0.5, 0.5], dtype=torch.float64), torch.eye(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="alpha"):
        cot2.mts_tokens(torch.tensor([0.5, 0.6]), E, 2, 10)
    with pytest.raises(ValueError, match="embeddings"):
        cot2.mts_tokens(alpha, torch.eye(3), 2, 10)
    with pytest.raises(ValueError, match="num_tokens"):
        cot2.mts_tokens(alpha, E, 0, 10)
    with pytest.raises(TypeError, match="num_samples"):
        cot2.mts_tokens(alpha, E, 1, 1.5)


@pytest.mark.mutant("cot-and-looping.superposition-decoding")
def test_a_dimension_below_the_bound_fails():
    from constructions.fact_mlps import jl_code_dim
    report = expect_failure(cot2_sampled.superposition_check(
        bound=lambda v, g: jl_code_dim(v, g) // 32))
    assert "recovery probability below 1/2" in report


@pytest.mark.mutant("cot-and-looping.superposition-decoding")
def test_a_dimension_quadratic_in_k_is_not_linear_growth():
    # the JL dimension times K beyond K = 8 (the draws' largest K): the probability sentence
    # still holds where it is sampled, the O(K log v) growth does not
    from constructions.fact_mlps import jl_code_dim

    def quadratic(v, g):
        K = round(2 / g**2)
        return jl_code_dim(v, g) * (K if K > 8 else 1)
    report = expect_failure(cot2_sampled.superposition_check(bound=quadratic))
    assert "is not O(K log v)" in report


def first_token_only(embeddings, sets):
    """Decodes the first path's embedding instead of the superposition (discrete CoT)."""
    x = torch.gather(embeddings, 1, sets[..., :1].expand(-1, -1, embeddings.shape[2]))
    scores = x @ embeddings.transpose(1, 2)                         # (draws, n, v)
    inside = torch.zeros_like(scores, dtype=torch.bool).scatter_(2, sets, True)
    low = scores.masked_fill(~inside, float("inf")).amin(2)
    return low > scores.masked_fill(inside, float("-inf")).amax(2)


@pytest.mark.mutant("cot-and-looping.superposition-decoding")
def test_decoding_a_single_path_fails():
    report = expect_failure(cot2_sampled.superposition_check(recovered=first_token_only))
    assert "recovery probability below 1/2" in report


def cosine_decoding(embeddings, sets):
    """Scores by cosine, <x, E_j>/|E_j|: at K = 1 not fact-mlps' criterion <E_i, E_j>."""
    unit = embeddings / embeddings.norm(dim=2, keepdim=True)
    x = torch.gather(embeddings[:, None].expand(-1, sets.shape[1], -1, -1), 2,
                     sets[..., None].expand(-1, -1, -1, embeddings.shape[2])).mean(2)
    scores = x @ unit.transpose(1, 2)                               # (draws, n, v)
    inside = torch.zeros_like(scores, dtype=torch.bool).scatter_(2, sets, True)
    low = scores.masked_fill(~inside, float("inf")).amin(2)
    return low > scores.masked_fill(inside, float("-inf")).amax(2)


@pytest.mark.mutant("cot-and-looping.superposition-decoding")
def test_cosine_decoding_is_not_the_fact_mlps_criterion():
    report = expect_failure(cot2_sampled.superposition_check(recovered=cosine_decoding))
    assert "K = 1 rate" in report


def test_bad_superposition_input():
    with pytest.raises(ValueError, match="d"):
        cot2.gaussian_embeddings(5, 0, 2, 0)
    with pytest.raises(ValueError, match="vocab_size"):
        cot2.gaussian_embeddings(0, 3, 2, 0)
    E = cot2.gaussian_embeddings(5, 3, 2, 0)
    with pytest.raises(ValueError, match="sets"):
        cot2.superposition_recovered(E, torch.full((2, 1, 2), 7))
    with pytest.raises(ValueError, match="sets"):
        cot2.superposition_recovered(E, torch.zeros(3, 1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="embeddings"):
        cot2.superposition_recovered(E[0], torch.zeros(2, 1, 2, dtype=torch.long))


def uniform_knot_log(z, m, pieces):
    """The interpolant at uniform knots: the first piece spans most of the log's curvature."""
    knots = torch.linspace(2.0**-m, 1.0, pieces + 1, dtype=torch.float64)
    return torch.from_numpy(np.interp(z.numpy(), knots.numpy(), torch.log(knots).numpy()))


@pytest.mark.mutant("cot-and-looping.relu-log")
def test_uniform_knots_break_the_log_bound():
    report = expect_failure(cot2_checks.relu_log_check(uniform_knot_log))
    assert "> bound" in report


def test_bad_relu_log_input():
    with pytest.raises(ValueError, match="pieces"):
        cot2.relu_log(torch.ones(2), 3, 0)
    with pytest.raises(TypeError, match="z"):
        cot2.relu_log([0.5], 3, 2)


# --- Dyck ---------------------------------------------------------------------------------------


def typeless_oracle(tokens, k=2):
    """Forgets the bracket types: Dyck-k read as Dyck-1."""
    tokens = list(tokens)
    trace = dyck.dyck_oracle([0 if t < k else 1 for t in tokens], 1)
    tops = tuple(dyck.ERROR if s == dyck.ERROR else (dyck.EMPTY if s == dyck.EMPTY else
                 next(t for t in reversed(tokens[:i + 1]) if t < k))
                 for i, s in enumerate(trace.stack_tops))
    return dyck.DyckTrace(trace.member, trace.depths, tops)


@pytest.mark.mutant("cot-and-looping.dyck-oracle")
def test_typeless_oracle_breaks_the_oracle():
    report = expect_failure(dyck_checks.oracle_exhaustive_check(typeless_oracle))
    assert "membership of" in report


@pytest.mark.mutant("cot-and-looping.dyck-oracle")
def test_an_unbounded_generator_breaks_the_depth_bound():
    fails_at(dyck_checks.generator_check(
        lambda n, k, bound, generator=None: dyck.random_dyck(n, k, None, generator=generator)),
             "> bound", n=8, k=2, bound=1, seed=0)


def no_bos_head(k, max_len):
    """Drops the BOS head's value: y_i = 0, so the read-out maximises 2c x_i (the edge)."""
    model = dyck.depth_trace_head(k, max_len)
    model.embed[2 * k, 0] = 0.0
    return model


def flipped_sign_head(k, max_len):
    """Counts closes as +1: the negated depth."""
    model = dyck.depth_trace_head(k, max_len)
    model.embed[:, 1] *= -1
    return model


@pytest.mark.mutant("cot-and-looping.dyck-depth-head")
@pytest.mark.parametrize("build", [no_bos_head, flipped_sign_head])
def test_broken_head_breaks_the_depth_trace(build):
    report = expect_failure(dyck_checks.depth_head_check(build))
    assert "head output is not (1, d_i)/(i+1)" in report
    fails_at(dyck_checks.depth_head_property_check(build), "emitted depths differ", k=1, n=4,
             seed=0)


def doubled_readout(k, max_len):
    """The read-out 2(2c x - c^2 y): the same argmax and a wider gap, but not the logits."""
    model = dyck.depth_trace_head(k, max_len)
    model.readout *= 2
    return model


@pytest.mark.mutant("cot-and-looping.dyck-depth-head")
def test_a_doubled_readout_is_not_the_stated_logits():
    report = expect_failure(dyck_checks.depth_head_check(doubled_readout))
    assert "read-out logits are not" in report


def shifted_decode(k, max_len):
    """Right logits, decoded one depth too high: the argmax read off the wrong table."""
    model = dyck.depth_trace_head(k, max_len)
    model.depths += 1
    return model


@pytest.mark.mutant("cot-and-looping.dyck-depth-head")
def test_a_shifted_decode_table_misses_the_depth():
    report = expect_failure(dyck_checks.depth_head_check(shifted_decode))
    assert "emitted depths differ at length" in report
    fails_at(dyck_checks.depth_head_property_check(shifted_decode),
             "emitted depths differ from the oracle", k=1, n=4, seed=0)


def rule_reading_the_open(tokens, trace, k=2):
    """Reads the trace token at the matching open instead of the one before it."""
    out, opened = [], []
    for t in tokens.tolist():
        if t < k:
            opened.append(len(out))
            out.append(t)
        else:
            out.append(trace[opened.pop()])
    return out


@pytest.mark.mutant("cot-and-looping.dyck-trace-locality")
def test_reading_the_wrong_trace_token_breaks_locality():
    fails_at(dyck_checks.locality_check(rule_reading_the_open),
             "local rule misses a trace token", n=3, k=2, bound=3, seed=1)


@pytest.mark.parametrize("brackets", ["(", "(()", "((", "", "()("])
def test_unbalanced_bracket_alphabets(brackets):
    with pytest.raises(ValueError, match="brackets"):
        dyck.bracket_alphabet(brackets)
    with pytest.raises(ValueError, match="brackets"):
        dyck.encode("()", brackets)


def test_bad_dyck_input():
    with pytest.raises(TypeError, match="brackets"):
        dyck.bracket_alphabet(["(", ")"])
    with pytest.raises(ValueError, match="text"):
        dyck.encode("(x)", "()")
    with pytest.raises(ValueError, match="tokens"):
        dyck.dyck_oracle([0, 4], k=2)
    with pytest.raises(TypeError, match="tokens"):
        dyck.dyck_oracle([0.0], k=1)
    with pytest.raises(ValueError, match="k"):
        dyck.dyck_oracle([0], k=0)
    with pytest.raises(ValueError, match="num_pairs"):
        dyck.random_dyck(-1)
    with pytest.raises(ValueError, match="max_depth"):
        dyck.random_dyck(3, 2, 0)
    with pytest.raises(ValueError, match="tokens"):
        dyck.depth_trace_head(1, 4)(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(TypeError, match="tokens"):
        dyck.depth_trace_head(1, 4)(torch.zeros(1, 3))
    assert dyck.decode(dyck.encode("([])")) == "([])"


# --- in-context deep learning -------------------------------------------------------------------


def without_second_pass(n, d, H, L, eta, **kw):
    """Drops layer 8 of every block (the second clearing pass): one layer short of 8L."""
    model = icdl.icdl_transformer(n, d, H, L, eta, **kw)
    kept = [layer for i, layer in enumerate(model.layers) if i % 8 != 7]
    return icdl.ICDLTransformer(kept, model.blocks, n, d, H, L)


def without_cleanup(n, d, H, L, eta, **kw):
    """No clearing of the scratch slots at all (layer 7's first pass off, layer 8 dropped):
    stale scratch slots corrupt the next step."""
    model = without_second_pass(n, d, H, L, eta, **kw)
    b = model.blocks
    for i in range(6, len(model.layers), 7):
        for name in ("h", "t", "f", "r", "sbar", "g", "delta"):
            model.layers[i].W_out[b[name]] = 0.0
    return model


def single_pass_rerounded(n, d, H, L, eta, **kw):
    """The construction as it was before issue 14's fix, one clearing pass, with every weight
    multiplied by 1 +- u (the soundness harness's ``rerounded``, seed 0): the pass leaves
    gamma_4-sized residues, which the gate's M = 2^20 amplifies past the bound (which counts
    two passes, gamma_4^2)."""
    return rerounded(without_second_pass(n, d, H, L, eta, **kw))


def without_gate(n, d, H, L, eta, **kw):
    """M = 0 in layer 5: inactive units pass their gradient through (no relu')."""
    return icdl.icdl_transformer(n, d, H, L, eta, **{**kw, "big": 2.0**-60})


def ascent(n, d, H, L, eta, **kw):
    """The update's sign flipped: gradient ascent."""
    model = icdl.icdl_transformer(n, d, H, L, eta, **kw)
    for i in range(6, len(model.layers), 8):
        b = model.blocks
        for name in ("W1", "w2"):
            model.layers[i].W_out[b[name]] *= -1
    return model


@pytest.mark.mutant("cot-and-looping.icdl-two-layer-gd")
@pytest.mark.parametrize("build", [without_gate, ascent])
def test_broken_gd_transformer_leaves_gd(build):
    # wrong in exact arithmetic: no relu' gate, or the update's sign flipped
    fails_at(icdl_checks.gd_check(build), "exceeds the rounding bound",
             problem=(8, 2, 2, 2, 0.1, 0))


@pytest.mark.mutant("cot-and-looping.icdl-two-layer-gd")
@pytest.mark.parametrize("build", [without_cleanup, single_pass_rerounded])
def test_stale_scratch_slots_leave_the_float_bound(build):
    # the scratch slots not cleared, or cleared once with weights off by u: residues carried
    # into the next block exceed the float64 statement's two-pass allowance (issue 14's case)
    fails_at(icdl_checks.gd_check(build), "exceeds the rounding bound",
             problem=(8, 3, 3, 2, 0.5, 278))


@pytest.mark.mutant("cot-and-looping.icdl-two-layer-gd")
def test_a_wide_gap_is_not_needed_to_fail():
    # a construction whose gap is tiny compared with the probe still gives GD: the check fails
    report = expect_failure(icdl_checks.gap_needed_check(
        lambda n, d, H, L, eta, gap: icdl.icdl_transformer(n, d, H, L, eta, gap=gap / 2**10)))
    assert "still gave the GD step" in report


@pytest.mark.mutant("cot-and-looping.icdl-layer-count")
def test_dropping_a_layer_breaks_the_count():
    fails_at(icdl_checks.layer_count_check(
        lambda n, d, H, L, eta: without_second_pass(n, d, H, L, eta)),
             "the formula gives (2N + 4)L", n=1, d=1, H=1, L=1)


def test_bad_icdl_input():
    X, y = torch.zeros(3, 2, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    W1, w2 = torch.ones(2, 2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="depth"):
        icdl.icdl_transformer(3, 2, 2, 1, 0.1, depth=3)
    with pytest.raises(ValueError, match="eta"):
        icdl.icdl_transformer(3, 2, 2, 1, -0.1)
    with pytest.raises(TypeError, match="steps"):
        icdl.icdl_transformer(3, 2, 2, 1.0, 0.1)
    with pytest.raises(ValueError, match="y"):
        icdl.gd_step_reference(X, torch.zeros(4), W1, w2, 0.1)
    with pytest.raises(ValueError, match="W1"):
        icdl.gd_step_reference(X, y, torch.ones(2, 3), w2, 0.1)
    with pytest.raises(ValueError, match="X"):
        icdl.icdl_transformer(4, 2, 2, 1, 0.1)(X, y, W1, w2)
    with pytest.raises(ValueError, match="steps"):
        icdl.layer_count(2, 0)


# --- the empirical claims ----------------------------------------------------------------------


class SwappedArms:
    """A run with its two arms' names exchanged: SFT's accuracy read as CSFT's."""

    def __init__(self, result):
        self.result, self.config = result, result.config
        self.tables, self.figures = result.tables, result.figures

    def metric(self, mode, *rest):
        return self.result.metric({"sft": "csft", "csft": "sft"}.get(mode, mode), *rest)


@pytest.mark.training
@pytest.mark.mutant("cot-and-looping.cot2-csft")
def test_swapped_arms_do_not_beat_sft():
    # the same six seeds' runs (cached), CSFT and SFT exchanged: the gains' interval lies below 0
    report = expect_failure(cot2_sampled.csft_seeds_check(lambda: tuple(
        SwappedArms(r) for r in cot2_sampled.csft_seed_results())))
    assert "CSFT does not beat SFT" in report


@pytest.mark.training
@pytest.mark.mutant("cot-and-looping.dyck-trace-content")
def test_a_shuffled_trace_is_not_learned_as_the_trace():
    # the trace arm's content shuffled within each training string: it is the control
    report = expect_failure(dyck_checks.trace_content_check(
        lambda: dyck_checks.trace_seed_results(arms=("trace", "shuffled"), shuffle_trace=True)))
    assert "no content learned beyond the token statistics" in report


@pytest.mark.mutant("cot-and-looping.dyck-trace-scaling")
def test_a_falling_dyck_study_does_not_rise():
    # the published interval holds 0, so the reversal alone stays undecided: it falls too
    load = partial(sizes_reversed, falling=dyck_checks.TRACE_LEAD)
    report = killed.failed_assertion(trend_check(
        "dyck-protoreasoning-scaling", dyck_checks.TRACE_LEAD, "up", load=load))
    assert "moves down with steps" in report


@pytest.mark.mutant("cot-and-looping.cot2-csft-scaling")
def test_a_falling_csft_study_at_d16_does_not_rise():
    # the published d = 16 interval holds 0, so the reversal alone stays undecided: it falls too
    quantity = "csft - sft/d=16/val accuracy"
    report = killed.failed_assertion(trend_check(
        cot2_sampled.CSFT_STUDY, quantity, "up",
        load=partial(sizes_reversed, falling=quantity)))
    assert "moves down with steps" in report


@pytest.mark.mutant("cot-and-looping.cot2-csft-scaling")
def test_a_reversed_csft_study_at_d32_is_not_a_refutation():
    # reversed, the d = 32 lead rises (a decided interval): the claim as stated then holds
    report = killed.failed_assertion(trend_refutation(
        cot2_sampled.CSFT_STUDY, "csft - sft/d=32/val accuracy", "up", load=sizes_reversed))
    assert "expected to fail" in report


# --- valid example arguments for tests/test_public_api.py ---------------------------------------

def _icdl_problem(**extra) -> dict:
    gen = torch.Generator().manual_seed(0)
    return {"X": torch.randn(3, 2, generator=gen, dtype=torch.float64),
            "y": torch.randn(3, generator=gen, dtype=torch.float64),
            "W1": torch.randn(4, 2, generator=gen, dtype=torch.float64),
            "w2": torch.randn(4, generator=gen, dtype=torch.float64), **extra}


def _alpha() -> torch.Tensor:
    return torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)


PUBLIC_API_EXAMPLES = {
    "cot2.beam_minabs_targets": lambda: {"digits": (3, 1)},
    "cot2.beam_targets": lambda: {"digits": (3, 1)},
    "cot2.csft_kl": lambda: {"target": _alpha(), "logits": torch.zeros(3, dtype=torch.float64)},
    "cot2.digit_tuple": lambda: {"digits": (3, 1)},
    "cot2.label_from_distribution": lambda: {"alpha": _alpha()},
    "cot2.mnns_label": lambda: {"digits": (3, 1)},
    "cot2.mts_moments": lambda: {"alpha": _alpha(), "embeddings": torch.eye(3).double()},
    "cot2.mts_tokens": lambda: {"alpha": _alpha(), "embeddings": torch.eye(3).double()},
    "cot2.relu_log": lambda: {"z": torch.tensor([0.5, 0.75], dtype=torch.float64)},
    "cot2.superposition_recovered": lambda: {"embeddings": torch.eye(3).double()[None],
                                             "sets": torch.tensor([[[0, 1]]])},
    "cot2.uniform_recursion": lambda: {"digits": (3, 1)},
    "cot2.uniform_targets": lambda: {"digits": (3, 1)},
    "dyck.bracket_alphabet": lambda: {"brackets": "()[]"},
    "dyck.decode": lambda: {"tokens": torch.tensor([0, 2, 1, 3])},
    "dyck.dyck_oracle": lambda: {"tokens": torch.tensor([0, 2, 1, 3])},
    "dyck.encode": lambda: {"text": "()[]"},
    "dyck.trace_by_locality": lambda: {"tokens": torch.tensor([0, 2, 1, 3]),
                                       "trace": (0, -1, 1, -1)},
    "icdl.gd_reference": lambda: _icdl_problem(eta=0.1, steps=2),
    "icdl.gd_step_reference": lambda: _icdl_problem(eta=0.1),
    "icdl.two_layer_net": lambda: {k: v for k, v in _icdl_problem().items() if k != "y"},
}
PUBLIC_API_ACCEPTED = {
    # a width (the embedding dim d, the set size K <= v) is free: one longer is as valid
    ("cot2.mts_moments", "embeddings"): ("mismatched",),
    ("cot2.mts_tokens", "embeddings"): ("mismatched",),
    ("cot2.superposition_recovered", "embeddings"): ("mismatched",),
    ("cot2.superposition_recovered", "sets"): ("mismatched",),
    # relu_log is elementwise: any shape of z, a single number or none at all
    ("cot2.relu_log", "z"): ("empty", "0-d", "mismatched"),
    ("cot2.digit_tuple", "name"): ("unknown",),  # any string names the digits in messages
    ("cot2.shift_average_matrix", "a"): ("zero",),  # the digit 0: the identity
    ("cot2.attention_leak", "t"): ("zero",),  # step 0
    ("cot2.step_leak_bound", "t"): ("zero",),
    # a bracket word may be empty (a Dyck member) or longer (another word)
    **{(f, "tokens"): ("empty", "mismatched")
       for f in ("dyck.decode", "dyck.dyck_oracle", "dyck.trace_by_locality")},
    ("dyck.random_dyck", "num_pairs"): ("zero",),  # the empty word
}


# --- recursive transformers under a data budget (Gülbahar, Edman, Fraser 2026) -----------------

def decoder_with_biases(vocab_size, d_model, n_unique, depth, **kwargs):
    """Every block with an MLP bias: 4H more weights a block than the accounting counts."""
    model = recursive_transformer.tiny_decoder(vocab_size, d_model, n_unique, depth, **kwargs)
    for block in model.blocks:
        block.b_1 = torch.nn.Parameter(torch.zeros(4 * d_model, dtype=torch.float64))
    return model


def untied_share(vocab_size, d_model, n_unique, d_embed=None):
    """The share with an untied head counted: 2VH / (2VH + 12 n_u H^2)."""
    embedding = 2 * vocab_size * d_model
    return Fraction(embedding, embedding + 12 * n_unique * d_model**2)


def decoder_with_untied_factorised_head(vocab_size, d_model, n_unique, depth, **kwargs):
    """The factorised head with a projection of its own: E(V + 2H) vocabulary weights."""
    model = recursive_transformer.tiny_decoder(vocab_size, d_model, n_unique, depth, **kwargs)
    if model.vocabulary is not None:
        model.vocabulary.W_head = torch.nn.Parameter(torch.zeros_like(model.vocabulary.W_proj))
    return model


def anti_diagonal_projection(vocab_size, d_model, d_embed, **kwargs):
    """W_proj = the reversal permutation where the identity was asked for."""
    vocabulary = recursive_transformer.factorised_embedding(vocab_size, d_model, d_embed,
                                                            **kwargs)
    with torch.no_grad():
        vocabulary.W_proj.copy_(vocabulary.W_proj.flip(0))
    return vocabulary


class DoubledHead(recursive_transformer.FactorisedEmbedding):
    """A head whose projection is 2 W_proj^T: no longer the embedding's transpose."""

    def project(self, h):
        return 2 * super().project(h)


def doubled_head(vocab_size, d_model, d_embed, **kwargs):
    vocabulary = recursive_transformer.factorised_embedding(vocab_size, d_model, d_embed,
                                                            **kwargs)
    return DoubledHead(vocabulary.W_emb.detach(), vocabulary.W_proj.detach())


@pytest.mark.mutant("cot-and-looping.recursive-parameter-accounting")
def test_biases_break_the_weight_count():
    assert "not VH + 12 n_u H^2" in killed.failed_assertion(
        recursive_checks.weight_count_check(build=decoder_with_biases))


@pytest.mark.mutant("cot-and-looping.recursive-parameter-accounting")
def test_an_untied_head_breaks_the_share():
    assert "closed form" in killed.failed_assertion(
        recursive_checks.share_check(share=untied_share))


@pytest.mark.mutant("cot-and-looping.recursive-parameter-accounting")
def test_an_untied_factorised_head_breaks_its_count():
    assert "not E(V + H)" in killed.failed_assertion(
        recursive_checks.factorised_count_check(build=decoder_with_untied_factorised_head))


@pytest.mark.mutant("cot-and-looping.factorised-embedding-recovers-standard")
def test_a_permuted_projection_is_not_the_standard_embedding():
    fails_at(recursive_checks.identity_projection_check(build=anti_diagonal_projection),
             "with W_proj = I is not W_emb[x]", case={"V": 5, "H": 4, "E": 4, "seed": 0})


@pytest.mark.mutant("cot-and-looping.factorised-embedding-recovers-standard")
def test_a_head_with_its_own_scale_is_not_the_standard_head():
    fails_at(recursive_checks.factorised_as_standard_check(build=doubled_head),
             "the factorised head differs", case={"V": 40, "H": 12, "E": 3, "seed": 1})


def test_recursive_builders_reject_bad_input():
    with pytest.raises(ValueError, match=r"^depth must be a multiple of n_unique"):
        recursive_transformer.tiny_decoder(5, 4, 3, 4)
    with pytest.raises(ValueError, match=r"^d_embed must equal d_model"):
        recursive_transformer.factorised_embedding(5, 4, 3, identity_projection=True)


def _decoder() -> dict:
    return {"model": recursive_transformer.tiny_decoder(5, 4, 1, 2)}


PUBLIC_API_EXAMPLES.update({
    "recursive_transformer.factorised_embedding": lambda: {"vocab_size": 5, "d_model": 3,
                                                           "d_embed": 2},
    "recursive_transformer.tiny_decoder": lambda: {"vocab_size": 5, "d_model": 4,
                                                   "n_unique": 1, "depth": 2},
    "recursive_transformer.parameter_count": _decoder,
    "recursive_transformer.embedding_parameters": _decoder,
    "recursive_transformer.parameter_formula": lambda: {"vocab_size": 5, "d_model": 4,
                                                        "n_unique": 2, "d_embed": 3},
    "recursive_transformer.embedding_share": lambda: {"vocab_size": 5, "d_model": 4,
                                                      "n_unique": 2, "d_embed": 3},
})
