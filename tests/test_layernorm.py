"""Mutants and bad input for the LayerNorm-geometry claims (theorems/areas/layernorm.py)."""

from functools import partial

import pytest
import torch

from constructions.layernorm import layer_norm, majority_head, selectability_margin
from theorems.areas.layernorm import (
    decomposition_check,
    majority_pattern_tolerance,
    midpoint_refutation,
    selectable_after_norm_check,
    two_dimensions_check,
    uniform_attention_check,
)
from theorems.evidence import expect_failure
from theorems.numerics import gamma


def unbiased_layer_norm(x):
    """The classic bug: the sample (n - 1) standard deviation, so |LN(x)|^2 = d - 1."""
    centred = x - x.mean(-1, keepdim=True)
    return centred / centred.std(-1, keepdim=True)


def rms_norm(x):
    """No centring: RMSNorm is not a projection onto 1-perp."""
    return x / x.pow(2).mean(-1, keepdim=True).sqrt()


def centring_only(x):
    """Projection without the scaling: keys keep unequal norms."""
    return x - x.mean(-1, keepdim=True)


@pytest.mark.mutant("layernorm.projection-decomposition")
@pytest.mark.parametrize("norm", [unbiased_layer_norm, rms_norm])
def test_wrong_normalisations_break_the_decomposition(norm):
    expect_failure(decomposition_check(norm))


@pytest.mark.mutant("layernorm.two-dimensions")
def test_rms_norm_is_not_a_sign_in_two_dimensions():
    expect_failure(two_dimensions_check(rms_norm))


@pytest.mark.mutant("layernorm.uniform-attention")
def test_without_layer_norm_attention_is_not_uniform():
    expect_failure(uniform_attention_check(partial(majority_head, normalize=False)))


def rolled_values(vocab_size, d, **kwargs):
    """Values e_{t+1 mod V} instead of the one-hot e_t: attention stays uniform and the output
    is still the mean of the values, but it is the frequency vector shifted by one token."""
    model = majority_head(vocab_size, d, **kwargs)
    with torch.no_grad():
        model.attention.W_O.copy_(model.attention.W_O.roll(1, dims=-1))
    return model


@pytest.mark.mutant("layernorm.uniform-attention")
def test_rolled_values_break_the_majority():
    check = uniform_attention_check(rolled_values)
    expect_failure(check)
    # the reason: on a one-token sequence the pattern and the mean are exact, the argmax is not
    with pytest.raises(AssertionError, match="wrong majority"):
        check.hypothesis.inner_test(case=(2, 3, 0, torch.tensor([[0]])))


@pytest.mark.mutant("layernorm.keys-selectable")
def test_without_scaling_a_midpoint_key_survives():
    expect_failure(selectable_after_norm_check(centring_only))


@pytest.mark.mutant("layernorm.unnormalised-keys-selectable")
def test_refutation_fails_with_an_oracle_that_selects_everything():
    expect_failure(midpoint_refutation(margin=lambda keys, index: 1.0))


def test_majority_head_example_from_the_readme():
    out, pattern = majority_head(vocab_size=3, d=8)(torch.tensor([[2, 0, 2, 1, 2, 0]]),
                                                    return_pattern=True)
    model, tokens = majority_head(vocab_size=3, d=8), torch.tensor([[2, 0, 2, 1, 2, 0]])
    pattern_tol = majority_pattern_tolerance(model, tokens)   # the area's derived bound
    assert float((pattern - 1 / 6).abs().max()) <= pattern_tol
    # out = sum_j p_j v_j, v = LN(e) W_V W_O: weights off by pattern_tol (times 6 values of
    # size <= magnitude); the model's value chain and 6-term sum err by gamma_{d+V+6} on the
    # absolute evaluation (d = 8, V = 3). The values are one-hot only up to the pseudo-
    # inverse's residual, which is not a fixed-order rounding: measured here, plus the
    # rounding of measuring it (gamma_{d+V}); magnitude itself carries (1 + gamma_{d+V}).
    att = model.attention
    values = model.keys(tokens)[0] @ att.W_V[0] @ att.W_O[0]                     # (6, 3)
    magnitude = float((model.keys(tokens)[0].abs() @ att.W_V[0].abs() @ att.W_O[0].abs()).max())
    solve_err = float((values - torch.nn.functional.one_hot(tokens[0], 3).to(values)).abs().max())
    magnitude *= 1 + gamma(8 + 3)
    tol = (6 * pattern_tol + gamma(8 + 3 + 6) + gamma(8 + 3)) * magnitude + solve_err
    assert float((out[0, 0] - torch.tensor([2, 1, 3], dtype=out.dtype) / 6).abs().max()) <= tol


@pytest.mark.parametrize("call, error, name", [
    (lambda: majority_head(1, 8), ValueError, "vocab_size"),
    (lambda: majority_head(8, 8), ValueError, "vocab_size"),
    (lambda: majority_head(3, 2.5), TypeError, "d"),
    (lambda: majority_head(3, 8, dtype=torch.int64), ValueError, "dtype"),
    (lambda: majority_head(3, 8)(torch.tensor([[0, 3]])), ValueError, "tokens"),
    (lambda: majority_head(3, 8)(torch.tensor([[0.0, 1.0]])), TypeError, "tokens"),
    (lambda: layer_norm(torch.ones(4, 1)), ValueError, "x"),
    (lambda: layer_norm([1.0, 2.0]), TypeError, "x"),
    (lambda: selectability_margin(torch.eye(3), 3), ValueError, "index"),
    (lambda: selectability_margin(torch.ones(3), 0), ValueError, "keys"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()
