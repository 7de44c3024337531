"""Mutants (every power-method check fails on a broken construction) and bad-input tests."""

from __future__ import annotations

import math

import killed
import numpy as np
import pytest
import torch

import empirics.power_method as pm_empirics
from constructions.power_method import (
    frame_data,
    from_block_weights,
    looped_power_transformer,
    normalize_columns,
    power_iteration,
    principal_subspace,
    residual_cancelling_layer,
    sample_data,
)
from theorems.areas.power_method import looped_model, training
from theorems.areas.power_method._shared import PLAIN_A, PLAIN_X, iteration_error_bound
from theorems.evidence import expect_failure
from theorems.numerics import gamma
from theorems.trends import sizes_reversed, trend_check

# --- the four broken constructions ---------------------------------------------------------------


def without_normalization(d, rho, *, normalize=True, **kwargs):
    """The normalisation removed, whatever the caller asks for."""
    return looped_power_transformer(d, rho, normalize=False, **kwargs)


def wrong_sign(d, rho, **kwargs):
    """rho with the wrong sign."""
    return looped_power_transformer(d, -rho, **kwargs)


def transposed(d, rho, *, normalize=True, **kwargs):
    """V and W transposed (the row/column layout confused)."""
    model = looped_power_transformer(d, rho, normalize=normalize, **kwargs)
    return from_block_weights(model.W.T, model.V.T, normalize=normalize)


def cancelling_wrong_sign(d, rho, **kwargs):
    return residual_cancelling_layer(d, -rho, **kwargs)


def _with_blocks(model, normalize=True, **blocks):
    """``model``'s W and V with the named (d x d) blocks set to 0.05 I: ``W21``, ``V11``..."""
    W, V = model.W.clone(), model.V.clone()
    d = W.shape[0] // 2
    for name, value in blocks.items():
        i, j = (int(c) - 1 for c in name[1:])
        (W if name[0] == "W" else V)[i * d:(i + 1) * d, j * d:(j + 1) * d] = (
            value * torch.eye(d, dtype=W.dtype))
    return from_block_weights(W, V, normalize=normalize)


def moves_the_data(d, rho, *, normalize=True, **kwargs):
    """W21 = V12 = 0.05 I: the data columns' top block gains 0.05^2 a a^T X, the query
    column keeps a + rho S a (one loop), the off-diagonal blocks stay zero."""
    return _with_blocks(looped_power_transformer(d, rho, normalize=normalize), normalize,
                        W21=0.05, V12=0.05)


def fills_an_off_block(d, rho, *, normalize=True, **kwargs):
    """V11 = 0.05 I: the query column's top block gains 0.05 w S a; the data columns stay."""
    return _with_blocks(looped_power_transformer(d, rho, normalize=normalize), normalize,
                        V11=0.05)


def a_tenth_of_the_shift(d, rho, **kwargs):
    """The looped model with shift rho/10: a right power method, the wrong rho."""
    return looped_power_transformer(d, rho / 10, **kwargs)


def double_shift(d, rho, **kwargs):
    """Shift 2 rho: within 2|p|/|u| of the limit, but rho |y - y_inf| tends to C/2."""
    return looped_power_transformer(d, 2 * rho, **kwargs)


def flipped_only_with_normalization(d, rho, *, normalize=True, **kwargs):
    """Right without N, the shift's sign flipped with N."""
    return looped_power_transformer(d, -rho if normalize else rho, normalize=normalize,
                                    **kwargs)


def cancelling_moving_the_data(d, rho, **kwargs):
    """The cancelling layer with W21 = 0.05 I: the query still leaves as rho S a, but the
    data columns' bottom block gains -0.05 a a^T X."""
    return _with_blocks(residual_cancelling_layer(d, rho), False, W21=0.05)


killed_at = killed.fails_at


PLAIN = (PLAIN_X, PLAIN_A, 2, 10.0)


# --- mutants: PM.1 -------------------------------------------------------------------------------


@pytest.mark.mutant("power-method.looped-shifted-power")
@pytest.mark.parametrize(("build", "match"), [
    (wrong_sign, r"^loop 1: \|y_k - \(I \+ rho S\)\^k a"),
    (transposed, r"^data columns moved"),
    (moves_the_data, r"^data columns moved"),
    (fills_an_off_block, r"^an off-diagonal block became"),
    (without_normalization, r"^an output is not a unit vector"),
], ids=["wrong-sign", "transposed", "moves-data", "off-block", "unnormalized"])
def test_broken_constructions_are_not_shifted_power_iteration(build, match):
    killed_at(looped_model.shifted_power_check(build=build), match, case=PLAIN)


@pytest.mark.mutant("power-method.looped-shifted-power")
@pytest.mark.parametrize("build", [wrong_sign, transposed])
def test_broken_constructions_break_one_more_loop(build):
    killed_at(looped_model.extra_loop_check(build=build), r"^loop 2 is not 1 more power step",
              case=(PLAIN_X, PLAIN_A, 1, 10.0), extra=2)


@pytest.mark.mutant("power-method.unshifted-limit")
@pytest.mark.parametrize("build", [without_normalization, wrong_sign])
def test_broken_constructions_miss_the_unshifted_limit(build):
    killed_at(looped_model.unshifted_limit_check(build=build), r"exceeds 2\|p\|/\|u\|",
              case=(PLAIN_X, PLAIN_A, 3, 1e3))


@pytest.mark.mutant("power-method.unshifted-limit")
def test_a_doubled_shift_misses_the_rate_constant():
    """Within the 2|p|/|u| bound (the distance halves), but rho |y - y_inf| tends to C/2."""
    killed_at(looped_model.unshifted_limit_check(build=double_shift),
              r"is not within the O\(1/rho\) slack", case=(PLAIN_X, PLAIN_A, 3, 1e3))


@pytest.mark.mutant("power-method.unshifted-limit")
def test_wrong_sign_breaks_the_convergence_sweep():
    report = expect_failure(looped_model.limit_sweep_check(build=wrong_sign, rhos=(1e2, 1e3)))
    assert "bound broken at rho=100" in report


# --- mutants: PM.4 -------------------------------------------------------------------------------


@pytest.mark.mutant("power-method.iteration-bounds")
@pytest.mark.parametrize("shifts", [{"upper_shift": 1}, {"lower_shift": -1}])
def test_bound_exponent_off_by_one_fails(shifts):
    killed_at(looped_model.iteration_bounds_check(**shifts), r"^power method: sin\(phi_L\)",
              case=looped_model._ALIGNED_CASE, log_rho=2.0)


@pytest.mark.mutant("power-method.iteration-bounds")
def test_a_looped_model_with_a_tenth_of_the_shift_breaks_the_finite_rho_bounds():
    """The power method is right; the looped model contracts at (1 + rho lambda_2/10)/(1 +
    rho lambda_1/10), slower than the bound's (1 + rho lambda_2)/(1 + rho lambda_1)."""
    killed_at(looped_model.iteration_bounds_check(build=a_tenth_of_the_shift),
              r"^looped model \(rho=100\): sin\(phi_L\)",
              case=looped_model._ALIGNED_CASE, log_rho=2.0)


@pytest.mark.mutant("power-method.iteration-bounds")
def test_wrong_sign_breaks_the_bounds_figure():
    report = expect_failure(looped_model.bounds_figure_check(build=wrong_sign))
    assert report.startswith("bound broken at L=")


# --- mutants: PM.3 -------------------------------------------------------------------------------


@pytest.mark.mutant("power-method.no-ln-rate-gap")
def test_a_rate_with_a_doubled_shift_breaks_the_closed_form_gap():
    """R(gamma) = (1 + 2 gamma lambda_2)/(1 + 2 gamma lambda_1): its gap to lambda_2/lambda_1 is
    (lambda_1 - lambda_2)/(lambda_1 (1 + 2 gamma lambda_1)), not the claim's."""
    report = expect_failure(training.rate_gap_identity_check(
        rate=lambda g, l1, l2: (1 + 2 * g * l2) / (1 + 2 * g * l1)))
    assert report.startswith("R - lambda2/lambda1 != ")


@pytest.mark.mutant("power-method.no-ln-rate-gap")
@pytest.mark.parametrize("build", [wrong_sign, transposed])
def test_broken_layers_do_not_contract_at_r_gamma(build):
    killed_at(training.rate_gap_check(build=build), r"^measured rate differs from R\(gamma\)",
              d=4, seed=3, log_gamma=0.0)


@pytest.mark.mutant("power-method.no-ln-expressivity")
@pytest.mark.parametrize("build", [wrong_sign, transposed])
def test_broken_constructions_are_not_rescaled_power_iteration(build):
    killed_at(training.rescaling_check(build=build), r"^without N the output is not",
              case=(PLAIN_X, PLAIN_A, 2, 3.0))


@pytest.mark.mutant("power-method.no-ln-expressivity")
def test_normalization_that_changes_the_direction_is_caught():
    """Without N the model is right; with N its shift has the wrong sign."""
    killed_at(training.rescaling_check(build=flipped_only_with_normalization),
              r"^N changes more than the query's scale", case=(PLAIN_X, PLAIN_A, 2, 3.0))


@pytest.mark.mutant("power-method.no-ln-expressivity")
def test_wrong_sign_cancelling_layer_is_caught():
    killed_at(training.cancellation_check(build=cancelling_wrong_sign),
              r"^the layer does not output rho S a", case=(PLAIN_X, PLAIN_A, 1, 3.0))


@pytest.mark.mutant("power-method.no-ln-expressivity")
def test_a_cancelling_layer_that_moves_the_data_is_caught():
    killed_at(training.cancellation_check(build=cancelling_moving_the_data),
              r"^the data columns moved", case=(PLAIN_X, PLAIN_A, 1, 3.0))


@pytest.fixture
def no_normalization_in_experiments(monkeypatch):
    """Every model the experiments build loses its normalisation."""
    original = pm_empirics.from_block_weights

    def broken(W, V, *, normalize=True):
        return original(W, V, normalize=False)

    monkeypatch.setattr(pm_empirics, "from_block_weights", broken)


@pytest.mark.training
@pytest.mark.mutant("power-method.layerwise-ln-vs-none")
def test_layerwise_check_fails_without_normalization(no_normalization_in_experiments):
    report = expect_failure(training.layerwise_check(steps=100, eval_every=20, mc_size=2000))
    assert "with N the loss does not fall below the plateau" in report


@pytest.mark.training
@pytest.mark.mutant("power-method.layerwise-ln-vs-none")
def test_layerwise_check_fails_off_the_block_manifold(monkeypatch):
    """Query blocks W22 = V22 = 0.05 in the start: the layer is off the manifold from step 0,
    and its residue could lower the loss by more than the claim's 1%."""
    original = pm_empirics.block_weights
    monkeypatch.setattr(pm_empirics, "block_weights", lambda d, w, v, **kw: original(
        d, w, v, w22=0.05, v22=0.05, **kw))
    text = expect_failure(training.layerwise_check(steps=40, eval_every=20, mc_size=2000))
    assert "left the block manifold" in text


@pytest.mark.mutant("power-method.layerwise-scaling")
def test_the_rate_gap_trend_fails_with_the_sizes_reversed():
    message = killed.failed_assertion(trend_check(
        "power-method-layerwise-scaling", "ln/rate_gap", "down", load=sizes_reversed))
    assert "moves up" in message


@pytest.mark.training
@pytest.mark.mutant("power-method.gd-learns-power-method")
def test_gd_check_fails_without_normalization(no_normalization_in_experiments):
    # lr 1.0 diverges without normalisation (see the smoke config), so use the control's lr
    report = expect_failure(training.gd_check(lr=0.1, control=False, steps=200))
    assert "the iterates left the block manifold" in report


@pytest.mark.training
@pytest.mark.mutant("power-method.gd-learns-power-method")
def test_gd_check_fails_from_a_start_still_in_the_transient():
    """w_0 = 3: w_t^4 = w_0^4 + K t stays dominated by w_0^4 over 500 steps, so the late slope of
    w_t is far below 1/4 (the measured form of Theta(t^{1/4}))."""
    report = expect_failure(training.gd_check(control=False, init=3.0))
    assert "late log-log slope of w_t" in report


@pytest.mark.training
@pytest.mark.mutant("power-method.gd-learns-power-method")
def test_gd_check_fails_against_the_wrong_limit(monkeypatch):
    """L_infinity and the cosine measured against L + 1 power steps, not L."""
    original = pm_empirics.heldout_set
    monkeypatch.setattr(pm_empirics, "heldout_set", lambda config, *args, **kwargs: original(
        {**config, "loops": config["loops"] + 1}, *args, **kwargs))
    report = expect_failure(training.gd_check(control=False))
    assert "late log-log slope of the excess loss" in report


@pytest.mark.training
@pytest.mark.mutant("power-method.gd-learns-power-method")
def test_gd_check_fails_on_a_run_too_short_for_the_late_regime():
    """60 steps: the slopes pass, but the output has not yet come five times nearer the
    power method."""
    report = expect_failure(training.gd_check(control=False, steps=60))
    assert "the output is not converging to the power method" in report


@pytest.mark.training
@pytest.mark.mutant("power-method.gd-learns-power-method")
def test_gd_check_fails_from_transposed_init(monkeypatch):
    original = pm_empirics.from_block_weights
    monkeypatch.setattr(pm_empirics, "from_block_weights",
                        lambda W, V, *, normalize=True: original(W.T, V.T, normalize=normalize))
    report = expect_failure(training.gd_check(control=False, steps=40))
    assert "a block outside W12, V21 moved" in report


# --- the experiments' helpers --------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3, 5, 8])
def test_symmetry_orbit_averages_every_matrix_to_a_multiple_of_identity(d):
    orbit = pm_empirics.symmetry_orbit(d)
    G = torch.randn(d, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64)
    moved = orbit @ G @ orbit.mT      # exact: signed permutations move entries, zeros add 0
    average = moved.mean(0)
    expected = torch.trace(G) / d * torch.eye(d, dtype=torch.float64)
    # the mean of N = len(orbit) exact terms (gamma_N of the mean of their magnitudes) and
    # the trace's d-term sum and division (gamma_d of sum |G_ii| / d)
    tol = gamma(len(orbit)) * moved.abs().mean(0) + gamma(d) * G.diagonal().abs().sum() / d
    assert bool(((average - expected).abs() <= tol).all())
    # exact: entries of products of signed permutations are sums of one +-1 and zeros
    assert torch.equal(orbit @ orbit.mT, torch.eye(d, dtype=torch.float64).expand_as(orbit))


def _effective_shift_ball(f, a, X, rounding: bool = True):
    r"""``effective_shift``'s formula on arb balls ``f``, ``a`` (lists) and ``X`` (float rows).

    ``rounding=True``: a running error analysis by ball arithmetic, a ball containing every
    float64 result of ``effective_shift(f', a, X @ X.mT)`` for every ``f'`` in the balls
    ``f``: each operation (and the ``X @ X.mT`` that feeds it) is evaluated exactly on balls
    and then widened by its rounding, :math:`u` of the result for a scalar operation,
    :math:`\gamma_k\sum_i|x_i||y_i|` for a k-term dot product or sum (any summation order).
    ``rounding=False``: the exact value of the formula."""
    from flint import arb

    def widen(x, r):
        return x + arb(0, r) if rounding else x

    def fl(x):                       # one rounded scalar operation
        return widen(x, float(abs(x).upper()) * gamma(1))

    def dot(x, y):                   # a k-term float dot product or sum of products
        exact = sum((xi * yi for xi, yi in zip(x, y, strict=True)), arb(0))
        size = sum(float(abs(xi).upper()) * float(abs(yi).upper())
                   for xi, yi in zip(x, y, strict=True))
        return widen(exact, gamma(len(x)) * size)

    d = len(X)
    Xa = [[arb(float(v)) for v in row] for row in X]
    S = [[dot(Xa[i], Xa[j]) for j in range(d)] for i in range(d)]
    Sa = [dot(S[i], a) for i in range(d)]
    q = dot(a, Sa)
    u = [fl(Sa[i] - fl(q * a[i])) for i in range(d)]
    fu, fa, uu = dot(f, u), dot(f, a), dot(u, u)
    alpha = fl(fa - fl(fl(fu * q) / uu))
    return fl(fu / fl(uu * alpha))


def _shifted(a, X, rho, normalize: bool):
    """The exact ``a + rho X X^T a`` (normalised if asked) on arb balls."""
    from flint import arb

    d, n = len(X), len(X[0])
    Sa = [sum((sum((arb(X[i][k]) * arb(X[j][k]) for k in range(n)), arb(0)) * a[j]
               for j in range(d)), arb(0)) for i in range(d)]
    f = [a[i] + arb(rho) * Sa[i] for i in range(d)]
    if normalize:
        norm = sum((v * v for v in f), arb(0)).sqrt()
        f = [v / norm for v in f]
    return f


def test_effective_shift_reads_gamma_off_the_function():
    from flint import arb, ctx

    X, a = sample_data(16, 5, 9, generator=torch.Generator().manual_seed(0))
    n, d = 9, 5
    for normalize in (True, False):
        f = looped_power_transformer(5, 0.7, normalize=normalize)(X, a, 1)
        gammas = pm_empirics.effective_shift(f, a, X @ X.mT)
        # the model's own error against the exact a + 0.7 S a (per entry, by its norm): one
        # step's gamma_m || |a| + rho |X|(|X|^T |a|) || (m = n + 2d + 8, the area's bound;
        # rho = wv from two square roots included), and, normalised, twice
        # iteration_error_bound (the area's first-order direction bound, factor 2 for
        # second order)
        absX = X.abs()
        c = (a.abs() + 0.7 * (absX @ (absX.mT @ a.abs().unsqueeze(-1))).squeeze(-1)).norm(dim=-1)
        radius = (2 * iteration_error_bound(X, a, 1, 0.7) if normalize
                  else gamma(n + 2 * d + 8) * c)
        with ctx.workprec(128):
            for b in range(16):
                rows = X[b].tolist()
                stored = [arb(float(v)) for v in a[b].tolist()]
                ideal = [v + arb(0, float(radius[b]))
                         for v in _shifted(stored, rows, 0.7, normalize)]
                ball = _effective_shift_ball(ideal, stored, rows)
                # the float result lies in the rounding enclosure (the stored a is the
                # model's and effective_shift's input)
                assert ball.contains(arb(float(gammas[b]))), (b, ball, float(gammas[b]))
                # and the formula is exact: for an exactly unit a it returns the shift 0.7
                norm = sum((v * v for v in stored), arb(0)).sqrt()
                unit = [v / norm for v in stored]
                exact = _effective_shift_ball(_shifted(unit, rows, 0.7, normalize), unit, rows,
                                              rounding=False)
                assert exact.contains(arb(0.7)) and float(exact.rad()) < 1e-30, exact


# --- the reference model on user data ------------------------------------------------------------


def test_reference_model_runs_on_numpy_matrices():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 4, 7))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    a = rng.standard_normal((2, 4))
    model = looped_power_transformer(4, 5.0)
    y, iterates = model(X, a, 3, return_iterates=True)
    assert y.shape == (2, 4) and iterates.shape == (2, 4, 4)
    expected = power_iteration(torch.from_numpy(X @ X.transpose(0, 2, 1)), torch.from_numpy(a), 3,
                               shift=5.0)[:, -1]
    # the area's tolerance: model and reference each within the first-order iteration bound,
    # twice for second order (theorems.areas.power_method docstring)
    X_t, a_t = torch.from_numpy(X), torch.from_numpy(a)
    tol = 4 * iteration_error_bound(X_t, a_t / a_t.norm(dim=-1, keepdim=True), 3, 5.0)
    assert bool(((y - expected).norm(dim=-1) <= tol).all())


def test_frame_data_has_the_promised_spectrum():
    X = frame_data(6, 2, 4, 3, generator=torch.Generator().manual_seed(1))
    values, _, r = principal_subspace(X @ X.T)
    # lambda_1 = copies = 4 for exactly orthonormal QR factors; computed ones are orthonormal
    # within eps_Q = gamma_{4d^2} (the O(d^2 u) constant eigvector_tolerance assumes): each of
    # the 4 frames moves S by 2 eps_Q + gamma_r, the range projector by eps_Q, the tail (3 unit
    # columns) couples by eps_Q each; forming S (n = 11 unit columns) gamma_n n; eigh
    # gamma_{4d^2} |S| with |S| <= n
    d, r, copies, rest, n = 6, 2, 4, 3, 11
    eps_Q = gamma(4 * d * d)
    tol = copies * (3 * eps_Q + gamma(r)) + rest * eps_Q + gamma(n) * n + eps_Q * n
    assert r == 2 and abs(float(values[0]) - 4.0) <= tol
    assert float(values[2]) < 4.0 - 0.5
    # frame columns are unit within 2 eps_Q, the tail's normalised within gamma_{2d+4}
    assert float((X.norm(dim=0) - 1).abs().max()) <= 2 * eps_Q + gamma(2 * d + 4)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"d": 1, "rho": 1.0}, ValueError, "d"),
    ({"d": 2.0, "rho": 1.0}, TypeError, "d"),
    ({"d": True, "rho": 1.0}, TypeError, "d"),
    ({"d": 3, "rho": math.nan}, ValueError, "rho"),
    ({"d": 3, "rho": "1"}, TypeError, "rho"),
    ({"d": 3, "rho": 1.0, "dtype": torch.int64}, ValueError, "dtype"),
    ({"d": 3, "rho": 1.0, "normalize": "yes"}, TypeError, "normalize"),
])
def test_builder_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        looped_power_transformer(**kwargs)


def test_cancelling_layer_rejects_bad_arguments():
    with pytest.raises(ValueError, match="d"):
        residual_cancelling_layer(1, 1.0)
    with pytest.raises(ValueError, match="rho"):
        residual_cancelling_layer(3, math.inf)


def _data(B=2, d=3, n=5):
    return sample_data(B, d, n, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(("make", "error", "name"), [
    (lambda X, a: (X[0], a, 2), ValueError, "X"),
    (lambda X, a: (torch.cat([X, X[:, :1]], 1), a, 2), ValueError, "X"),
    (lambda X, a: (X, a[:1], 2), ValueError, "a"),
    (lambda X, a: (X, a[:, :2], 2), ValueError, "a"),
    (lambda X, a: (X, a, 0), ValueError, "loops"),
    (lambda X, a: (X, a, 1.5), TypeError, "loops"),
    (lambda X, a: (2 * X, a, 1), ValueError, "unit-norm"),
    (lambda X, a: (X, torch.zeros_like(a), 1), ValueError, "a"),
    (lambda X, a: (X.masked_fill(X > 0.5, math.nan), a, 1), ValueError, "X"),
    (lambda X, a: ("X", a, 1), TypeError, "X"),
])
def test_forward_rejects_bad_input(make, error, name):
    X, a = _data()
    model = looped_power_transformer(3, 2.0)
    with pytest.raises(error, match=name):
        model(*make(X, a))


def test_unnormalized_model_accepts_any_columns():
    X, a = _data()
    y = looped_power_transformer(3, 2.0, normalize=False)(2 * X, a, 1)
    S = 4 * X @ X.mT
    # one unnormalised power step on 2X, model and reference each within gamma_m of the step
    # on absolute values, m = n + 2d + 8 (rescaling_check's bound with one loop)
    c = a.abs() + 2.0 * (4 * X.abs() @ (X.abs().mT @ a.abs().unsqueeze(-1))).squeeze(-1)
    tol = 2 * gamma(X.shape[2] + 2 * X.shape[1] + 8) * c
    assert bool(((y - (a + 2.0 * (S @ a.unsqueeze(-1)).squeeze(-1))).abs() <= tol).all())


def test_float32_input_normalised_in_float32_is_accepted():
    X, a = _data()
    X32 = normalize_columns(X.float())
    y = looped_power_transformer(3, 2.0)(X32, a, 2)
    assert y.dtype == torch.float64


@pytest.mark.parametrize(("call", "error", "name"), [
    (lambda S, a: power_iteration(S[:, :2], a, 2), ValueError, "S"),
    (lambda S, a: power_iteration(S, a[:2], 2), ValueError, "a"),
    (lambda S, a: power_iteration(S, a, -1), ValueError, "steps"),
    (lambda S, a: power_iteration(S, 0 * a, 1), ValueError, "a"),
    (lambda S, a: power_iteration(S, a, 1, shift=math.inf), ValueError, "shift"),
    (lambda S, a: power_iteration(S.expand(2, 3, 3), a, 1), ValueError, "a"),
    (lambda S, a: frame_data(3, 3, 2, 1), ValueError, "r"),
    (lambda S, a: frame_data(4, 1, 2, 2), ValueError, "rest"),
    (lambda S, a: principal_subspace(S[:2]), ValueError, "S"),
    (lambda S, a: sample_data(2, 3, 4, dtype=torch.int32), ValueError, "dtype"),
    (lambda S, a: sample_data(2, 1, 4), ValueError, "d"),
    (lambda S, a: normalize_columns(torch.zeros(3, 2)), ValueError, "X"),
    (lambda S, a: from_block_weights(torch.eye(5), torch.eye(5)), ValueError, "W"),
    (lambda S, a: from_block_weights(torch.eye(4), torch.eye(6)), ValueError, "V"),
])
def test_helpers_reject_bad_input(call, error, name):
    X, a = _data(B=1)
    with pytest.raises(error, match=name):
        call(X[0] @ X[0].T, a[0])
