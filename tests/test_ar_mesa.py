"""Mutants and bad input for the autoregressive mesa-optimization area (Zheng et al. 2024)."""

from __future__ import annotations

import cmath
import dataclasses
import math
from fractions import Fraction

import pytest
import torch
from killed import failed_assertion

from constructions.ar_mesa import (
    ARLinearAttention,
    ar_mesa_layer,
    ar_sequences,
    harmonic_weight,
    limiting_error,
    moments,
    one_step_gd_predictions,
    optimal_ab,
    population_error,
    sample_x1,
    tokens,
)
from constructions.ar_mesa_bounds import (
    layer_roundings,
    loss_identity_error_bound,
    one_step_tolerance,
)
from theorems.areas.ar_mesa.one_step import explicit_step, one_step_check
from theorems.areas.ar_mesa.population_error import population_check
from theorems.areas.ar_mesa.population_optimum import (
    gaussian_numeric_check,
    gaussian_symbolic_check,
    one_hot_check,
)
from theorems.areas.ar_mesa.recovery import recovery_exact_check, recovery_numeric_check
from theorems.areas.ar_mesa.training import trained_check
from theorems.numerics import gamma
from theorems.profiles import without_shrinking


def transposed_key_query(d, a, b, **kwargs):
    """The aI block of W_KQ put at [:d, d:] (its transpose's place): scores x_i^H x_{t-1}."""
    layer = ar_mesa_layer(d, a, b, **kwargs)
    W_KQ = torch.zeros_like(layer.W_KQ)
    W_KQ[:d, d:] = a * torch.eye(d, dtype=W_KQ.dtype)
    return ARLinearAttention(W_KQ, layer.W_PV)


def rotated_values(d, a, b, **kwargs):
    """W_PV times e^{i pi/3}: |y_t| unchanged, E Re<y_t, x_{t+1}> halved."""
    layer = ar_mesa_layer(d, a, b, **kwargs)
    return ARLinearAttention(layer.W_KQ, layer.W_PV * cmath.exp(1j * math.pi / 3))


def current_token_query(d, a, b, **kwargs):
    """W_KQ[:d, :d] = aI added: the scores gain a x_i^H x_t, whose term in y_t has mean 0
    against x_{t+1} (every phase power in it is nonzero) but adds to E|y_t|^2."""
    layer = ar_mesa_layer(d, a, b, **kwargs)
    W_KQ = layer.W_KQ.clone()
    W_KQ[:d, :d] = a * torch.eye(d, dtype=W_KQ.dtype)
    return ARLinearAttention(W_KQ, layer.W_PV)


def ab_off_by_ten_percent(d, a, b, **kwargs):
    return ar_mesa_layer(d, 1.1 * a, b, **kwargs)


def optimum_off_by_ten_percent(m, T):
    return 1.1 * optimal_ab(m, T)


def closed_form_over_t(x, lr):
    """ab/t in place of ab/(t-1) in the closed form of the step."""
    t = torch.arange(1, x.shape[-2] + 1, dtype=torch.float64)
    return explicit_step(x, lr) * ((t - 1).clamp_min(1) / t)[:, None]


@pytest.mark.mutant("ar-mesa.one-gd-step")
def test_a_transposed_key_query_block_is_not_one_gd_step():
    report = failed_assertion(without_shrinking()(one_step_check(build=transposed_key_query)))
    assert "prediction differs from one GD step" in report


class FirstStepCopies(torch.nn.Module):
    """The construction, except that at t = 1 (no context yet) it predicts x_1."""

    def __init__(self, d, a, b):
        super().__init__()
        self.layer = ar_mesa_layer(d, a, b)

    def forward(self, x):
        y = self.layer(x).clone()
        y[..., 0, :] = x[..., 0, :]
        return y


@pytest.mark.mutant("ar-mesa.one-gd-step")
def test_a_first_prediction_copying_x1_is_not_zero():
    report = failed_assertion(without_shrinking()(one_step_check(build=FirstStepCopies)))
    assert "prediction differs from one GD step" in report and "first at t=1" in report


@pytest.mark.mutant("ar-mesa.one-gd-step")
def test_a_closed_form_over_t_is_not_the_gradient_step():
    report = failed_assertion(without_shrinking()(one_step_check(closed_form=closed_form_over_t)))
    assert "the closed form (ab/(t-1))" in report


@pytest.mark.mutant("ar-mesa.population-error")
def test_rotated_values_break_the_conditional_inner_product():
    assert "E Re<y_t, x_(t+1)>" in failed_assertion(population_check(build=rotated_values))


@pytest.mark.mutant("ar-mesa.population-error")
def test_a_current_token_query_breaks_the_conditional_squared_norm():
    report = failed_assertion(population_check(build=current_token_query))
    assert "E |y_t|^2" in report and "E Re<" not in report


@pytest.mark.mutant("ar-mesa.population-error")
def test_kappa_over_t_breaks_the_unconditional_error():
    report = failed_assertion(population_check(
        error_formula=lambda m, t, ab: population_error(m, t + 1, ab)))  # kappa/t
    assert "eps_t(c) = mu_2" in report and "E |y_t|^2" not in report


@pytest.mark.mutant("ar-mesa.one-hot-optimum")
def test_ab_off_by_ten_percent_breaks_the_one_hot_error():
    report = failed_assertion(without_shrinking()(one_hot_check(build=ab_off_by_ten_percent)))
    assert "expected (1 - ab s^2)^2 s^2" in report


@pytest.mark.mutant("ar-mesa.one-hot-optimum")
def test_an_optimum_off_by_ten_percent_is_not_one_over_s_squared():
    report = failed_assertion(without_shrinking()(one_hot_check(
        optimum=optimum_off_by_ten_percent)))
    assert "!= 1/s^2" in report


@pytest.mark.mutant("ar-mesa.gaussian-optimum")
def test_an_optimum_off_by_ten_percent_fails_both_gaussian_checks():
    report = failed_assertion(gaussian_symbolic_check(optimum=optimum_off_by_ten_percent))
    assert "does not minimise the loss" in report
    assert "SE from" in failed_assertion(gaussian_numeric_check(
        optimum=optimum_off_by_ten_percent))


@pytest.mark.mutant("ar-mesa.gaussian-optimum")
def test_a_sixth_moment_of_fourteen_breaks_the_gaussian_moments():
    def table(kind, d, scale=1.0):  # mu_6 = 14 d s^6 in place of 15 d s^6
        return dataclasses.replace(moments(kind, d, scale), m6=14 * d * scale**6)

    assert "Gaussian moments wrong" in failed_assertion(gaussian_symbolic_check(table=table))


@pytest.mark.mutant("ar-mesa.recovery-criterion")
def test_a_wrong_limit_or_a_wrong_step_breaks_the_limit_of_the_error():
    # mu_4/mu_6 in place of mu_4^2/mu_6: the Cauchy-Schwarz gap with the wrong power
    report = failed_assertion(without_shrinking()(recovery_exact_check(
        error=lambda m: m.m2 - m.m4 / m.m6)))
    assert "eps_t does not tend to eps_inf" in report
    # the layer at 1.1 ab: its error at finite t is off the formula at ab = mu_4/mu_6
    report = failed_assertion(recovery_numeric_check(build=ab_off_by_ten_percent))
    assert "SE off its formula" in report


@pytest.mark.mutant("ar-mesa.recovery-criterion")
def test_one_level_per_coordinate_is_not_the_criterion():
    def per_coordinate(points):  # each coordinate its own level: (1, 2) would qualify
        return all(len({p[j] for p in points if p[j]}) <= 1 for j in range(len(points[0])))

    report = failed_assertion(without_shrinking()(recovery_exact_check(
        criterion=per_coordinate)))
    assert "levels [Fraction(1, 1), Fraction(2, 1)]: limiting error" in report


@pytest.mark.mutant("ar-mesa.recovery-criterion")
def test_a_limiting_step_of_mu4_over_mu2_is_not_one_over_c():
    report = failed_assertion(without_shrinking()(recovery_exact_check(
        step=lambda m: m.m4 / m.m2)))
    assert "not ab = 1/c" in report


@pytest.mark.mutant("ar-mesa.recovery-criterion")
def test_a_vanishing_gaussian_limit_is_not_bounded_away_from_zero():
    report = failed_assertion(recovery_numeric_check(error=lambda m: 0 * m.m2))
    assert "plateau at a positive level" in report


@pytest.mark.mutant("ar-mesa.recovery-criterion")
def test_a_doubled_limit_is_not_two_d_s_squared_over_five():
    report = failed_assertion(recovery_numeric_check(error=lambda m: 2 * limiting_error(m)))
    assert "Gaussian limit is not 2d s^2/5" in report


@torch.no_grad()
def transposed_reader(model):
    """ab read from the transposed block W_KQ[:d, d:] (zero in the construction)."""
    d = model.d
    product = model.W_KQ[:d, d:].diagonal() * model.W_PV[:, :d].diagonal()
    return float(product.real.mean()), *model.off_structure_mass()


@torch.no_grad()
def misplaced_structure_reader(model):
    """ab as read_trained, but the mass measured with W_KQ's rows rolled by d: its diagonal
    block is then the one the construction leaves zero, and the trained one counts as off."""
    rolled = ARLinearAttention(model.W_KQ.roll(model.d, 0), model.W_PV)
    return model.ab, *rolled.off_structure_mass()


@pytest.mark.training
@pytest.mark.mutant("ar-mesa.trained-optimum")
def test_reading_the_transposed_block_of_the_trained_weights_fails():
    report = failed_assertion(trained_check(reader=transposed_reader,
                                            overrides={"starts": ["one-hot"]}))
    assert "one-hot: trained ab" in report


@pytest.mark.training
@pytest.mark.mutant("ar-mesa.trained-optimum")
def test_mass_against_a_misplaced_structure_fails():
    report = failed_assertion(trained_check(reader=misplaced_structure_reader,
                                            overrides={"starts": ["one-hot"]}))
    assert "one-hot: off-structure mass" in report


@pytest.mark.training
@pytest.mark.mutant("ar-mesa.trained-optimum")
def test_the_transposed_block_fails_the_gaussian_allowance():
    report = failed_assertion(trained_check(reader=transposed_reader,
                                            overrides={"starts": ["gaussian"]}))
    assert "gaussian: trained ab" in report


@pytest.mark.training
@pytest.mark.mutant("ar-mesa.trained-optimum")
def test_the_full_configuration_allows_no_sampling_error_and_asserts_the_mass():
    smoke_sizes = {"eval_sequences": 400, "steps": 300, "chunk": 500}
    # at the smoke's m = 1000 the Gaussian run misses ab*_T by about 10%: no allowance here
    report = failed_assertion(trained_check("full", overrides={
        "starts": ["gaussian"], "sequences": {"gaussian": 1000}, **smoke_sizes}))
    assert "gaussian: trained ab" in report
    report = failed_assertion(trained_check("full", reader=misplaced_structure_reader, overrides={
        "starts": ["one-hot"], "sequences": {"one-hot": 400}, **smoke_sizes}))
    assert "one-hot: off-structure mass" in report


# --- the construction's other views agree with its forward pass ---------------------------------

def test_attention_scores_and_mesa_weights_reproduce_the_forward_pass():
    generator = torch.Generator().manual_seed(0)
    x = ar_sequences(sample_x1("gaussian", 2, 3, generator=generator), 9, generator=generator)
    layer = ar_mesa_layer(3, 0.7, -1.3)
    y = layer(x)
    by_attention = layer.attention_scores(x) @ (tokens(x) @ layer.W_PV.T)
    by_weights = torch.einsum("btde,bte->btd", layer.mesa_weights(x), x)
    # each view reassociates the same products (scores then values, or the mesa map then x_t):
    # each within gamma_{k1} of the absolute-value computation (layer_roundings), both sides
    tolerance = 2 * gamma(layer_roundings(9, 3)) * float(
        ar_mesa_layer(3, 0.7, 1.3)(x.abs()).abs().max())
    assert float((by_attention - y).abs().max()) <= tolerance
    assert float((by_weights - y).abs().max()) <= tolerance
    # x_0 = 0: nothing to predict yet; exact, every product at t = 1 has the factor x_0 = 0
    assert torch.equal(y[:, 0], torch.zeros_like(y[:, 0]))


def test_only_the_product_ab_matters_and_the_read_out_is_gauge_invariant():
    generator = torch.Generator().manual_seed(1)
    x = ar_sequences(sample_x1("one-hot", 3, 4, generator=generator), 7, generator=generator)
    first, second = ar_mesa_layer(4, 2.0, 0.25), ar_mesa_layer(4, 0.5, 1.0)
    assert first.ab == second.ab == 0.5
    # bit-identical: a and b are powers of two, so every intermediate of one layer is the
    # other's times a power of two (exact in binary floating point, far from under/overflow)
    # and the same operations run in the same order
    assert torch.equal(first(x), second(x))
    assert first.off_structure_mass() == (0.0, 0.0)  # exact zeros are stored, not computed
    error = (one_step_gd_predictions(x, 0.5) - first(x)).abs()
    assert bool((error <= one_step_tolerance(x, 2.0, 0.25)).all())


def test_moments_match_sampling_and_the_exact_optimum():
    assert harmonic_weight(3) == Fraction(1)
    assert harmonic_weight(4) == Fraction(3, 4)
    # exact: 4/16/64 and a zero cross term, every operation on powers of two
    assert optimal_ab(moments("one-hot", 5, 2.0), 50) == 0.25
    # ones: |x_j|^2 = s^2 for every j, so ab* = 1/(s^2 (1 + (d-1) h_T))
    m = moments("ones", 3, 1.0)
    # the moments 3, 3, 3, 6 are exact; h_T's conversion, a product, a sum and a division on
    # one side, three roundings on the other: gamma_7 relative
    assert math.isclose(optimal_ab(m, 30), 1 / (1 + 2 * float(harmonic_weight(30))),
                        rel_tol=gamma(7), abs_tol=0.0)
    x1 = sample_x1("one-hot", 64, 4, scale=3.0, generator=torch.Generator().manual_seed(2))
    assert torch.equal((x1.abs() > 0).sum(-1), torch.ones(64, dtype=torch.long))  # integers
    # |+-3 + 0i| (< 1 ulp: 2u relative) plus three exact zeros
    assert float((x1.abs().sum(-1) - 3.0).abs().max()) <= gamma(2) * 3.0


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, match", [
    (lambda: ar_mesa_layer(0, 1.0, 1.0), ValueError, "d must"),
    (lambda: ar_mesa_layer(2.5, 1.0, 1.0), TypeError, "d must"),
    (lambda: ar_mesa_layer(2, float("nan"), 1.0), ValueError, "a must"),
    (lambda: ar_mesa_layer(2, 1.0, "b"), TypeError, "b must"),
    (lambda: ar_mesa_layer(2, 1.0, 1.0, dtype=torch.float16), ValueError, "dtype"),
    (lambda: ar_mesa_layer(2, 1.0, 1.0, dtype="float64"), TypeError, "dtype"),
    (lambda: ARLinearAttention(torch.zeros(3, 3), torch.zeros(1, 3)), ValueError, "W_KQ"),
    (lambda: ARLinearAttention(torch.zeros(4, 4), torch.zeros(2, 3)), ValueError, "W_PV"),
    (lambda: ARLinearAttention([[0.0]], torch.zeros(1, 2)), TypeError, "W_KQ"),
    (lambda: ar_mesa_layer(2, 1.0, 1.0)(torch.zeros(5, 3)), ValueError, "width"),
    (lambda: ar_mesa_layer(2, 1.0, 1.0)(torch.zeros(5)), ValueError, "x must"),
    (lambda: ar_mesa_layer(1, 1.0, 1.0)(torch.tensor([[float("inf")]])), ValueError, "finite"),
    (lambda: ar_mesa_layer(1, 1.0, 1.0)(torch.tensor([[True]])), TypeError, "x must"),
    (lambda: sample_x1("uniform", 2, 2), ValueError, "kind"),
    (lambda: sample_x1("gaussian", 0, 2), ValueError, "batch"),
    (lambda: sample_x1("gaussian", 2, 2, scale=-1.0), ValueError, "scale"),
    (lambda: ar_sequences(torch.ones(2, 3), 0), ValueError, "T must"),
    (lambda: ar_sequences(torch.ones(2, 3), 4, theta=torch.zeros(2, 2)), ValueError, "theta"),
    (lambda: ar_sequences(torch.ones(3), 4), ValueError, "x1"),
    (lambda: moments("cauchy", 2), ValueError, "kind"),
    (lambda: harmonic_weight(2), ValueError, "T must"),
    (lambda: one_step_gd_predictions(torch.ones(3), 1.0), ValueError, "x must"),
    (lambda: one_step_gd_predictions(torch.ones(2, 3), float("inf")), ValueError, "lr"),
])
def test_bad_input_is_rejected_with_the_parameter_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_loss_identity_bound_covers_the_two_evaluations():
    from empirics.ar_mesa import direct_loss, statistics_loss, token_statistics

    x = ar_sequences(sample_x1("gaussian", 6, 2, generator=torch.Generator().manual_seed(1)), 8,
                     generator=torch.Generator().manual_seed(2))
    model = ar_mesa_layer(2, 0.7, 0.3)
    statistics = token_statistics(x, 4)
    gap = abs(float(statistics_loss(model, statistics) - direct_loss(model, x, 4)))
    assert gap / float(statistics[0]) <= loss_identity_error_bound(model, x, 4)
    with pytest.raises(ValueError, match="x must"):
        loss_identity_error_bound(model, x[..., :1], 4)


# --- valid example arguments for tests/test_public_api.py ---------------------------------------

PUBLIC_API_EXAMPLES = {
    "ar_mesa_bounds.layer_roundings": lambda: {"T": 5, "d": 2},
    "ar_mesa_bounds.sequence_roundings": lambda: {"T": 5},
    "ar_mesa_bounds.residual_roundings": lambda: {"T": 5, "d": 2},
    "ar_mesa_bounds.one_step_tolerance": lambda: {
        "x": ar_sequences(torch.ones(2, 2, dtype=torch.complex128), 4), "a": 1.0, "b": 0.5},
    "ar_mesa_bounds.loss_identity_error_bound": lambda: {
        "model": ar_mesa_layer(2, 1.0, 0.5),
        "x": ar_sequences(torch.ones(2, 2, dtype=torch.complex128), 4), "chunk": 1},
}
PUBLIC_API_ACCEPTED = {
    # any width d is valid: a sequence with one more coordinate is as valid
    ("ar_mesa_bounds.one_step_tolerance", "x"): ("mismatched",),
}
