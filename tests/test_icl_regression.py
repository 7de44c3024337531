"""Mutants and bad input for the in-context regression claims (theorems/areas/icl_regression/).

The mutants are the four the area's issue names: the step size off by 10%, the
preconditioner transposed, the query mask dropped, and the (n+1)/n normalisation replaced by
1; plus, where a check rests on something else, the mutant that breaks that (Adam instead of
gradient descent for the conservation law).
"""

import copy
from functools import partial

import pytest
import torch
from killed import fails_at

from constructions.icl_regression import (
    cot_prompt,
    gd_prediction,
    lsa,
    multi_step_gd,
    multi_step_layer,
    nonlinear_optimal_step,
    one_step_gd,
    optimal_loss,
    optimal_preconditioner,
    pair_coefficients,
    pair_features,
    population_loss,
    prompt,
    sample_prompts,
    second_moment,
    spd_matrix,
    von_oswald,
)
from empirics.experiment import load_all
from empirics.icl_regression import ZFB_EXPERIMENT
from theorems.areas.icl_regression import (
    multi_step,
    multi_step_learning,
    one_step,
    von_oswald_step,
    zhang_frei_bartlett,
)
from theorems.areas.icl_regression._shared import z_score
from theorems.certificates import (
    frobenius_upper,
    least_squares_distance,
    sigma_min_lower_bound,
)
from theorems.evidence import expect_failure
from theorems.numerics import gamma

# --- the mutant constructions --------------------------------------------------------------


def step_off(build, factor: float = 1.1):
    """``build`` with its step size ``eta`` (second argument) multiplied by ``factor``."""
    def mutant(d, eta, *args, **kwargs):
        return build(d, factor * eta, *args, **kwargs)
    return mutant


def transposed_one_step(d, eta, *, preconditioner=None, **kwargs):
    return one_step_gd(d, eta, preconditioner=None if preconditioner is None
                       else preconditioner.T, **kwargs)


def unmasked_lsa(W_PV, W_KQ, *, mask_query=True, **kwargs):
    return lsa(W_PV, W_KQ, mask_query=False, **kwargs)


def unmasked_von_oswald(d, eta, W0=None, *, mask_query=True, **kwargs):
    return von_oswald(d, eta, W0, mask_query=False, **kwargs)


def always_masked_von_oswald(d, eta, W0=None, *, mask_query=True, **kwargs):
    return von_oswald(d, eta, W0, mask_query=True, **kwargs)


def scaled_preconditioner(n, sigma2, Sigma, Omega=None):
    return 1.1 * optimal_preconditioner(n, sigma2, Sigma, Omega)


def n_instead_of_n_plus_one(n, sigma2, Sigma, Omega=None):
    """A* with H = ΣΩΣ + ((tr ΩΣ + σ²)/n) Σ: the (n+1)/n factor replaced by 1."""
    Sigma = torch.as_tensor(Sigma, dtype=torch.float64)
    Omega = torch.eye(Sigma.shape[0], dtype=torch.float64) if Omega is None else \
        torch.as_tensor(Omega, dtype=torch.float64)
    H = Sigma @ Omega @ Sigma + (torch.trace(Omega @ Sigma) + sigma2) / n * Sigma
    return torch.linalg.solve(H, Sigma @ Omega).T


def loss_of(preconditioner):
    def loss(n, sigma2, Sigma, Omega=None):
        Omega = torch.eye(Sigma.shape[0], dtype=torch.float64) if Omega is None else Omega
        A = preconditioner(n, sigma2, Sigma, Omega)
        return float(sigma2 + torch.trace(Sigma @ Omega) - torch.trace(Sigma @ A @ Sigma @ Omega))
    return loss


def risk_with_M_not_M_plus_one(Gamma, M, sigma2, Sigma, Omega=None):
    """population_loss with H = ΣΩΣ + ... (the prompt-length normalisation off by one)."""
    Omega = torch.eye(Sigma.shape[0], dtype=torch.float64) if Omega is None else Omega
    H = Sigma @ Omega @ Sigma + (torch.trace(Omega @ Sigma) + sigma2) / M * Sigma
    cross = torch.trace(Sigma @ Gamma @ Sigma @ Omega)
    return float(sigma2 + torch.trace(Sigma @ Omega) - 2 * cross
                 + torch.trace(Gamma.T @ Sigma @ Gamma @ H))


LINEAR_MUTANTS = {"eta off by 10%": scaled_preconditioner,
                  "n+1 replaced by n": n_instead_of_n_plus_one}


def pinned_gd_case():
    """Two seeded prompts, d = 2, n = 3, eta = 0.5 and a dense non-symmetric P."""
    generator = torch.Generator().manual_seed(0)
    X, y, x_query = (torch.randn(*shape, generator=generator, dtype=torch.float64)
                     for shape in ((2, 3, 2), (2, 3), (2, 2)))
    return X, y, x_query, 0.5, torch.randn(2, 2, generator=generator, dtype=torch.float64)




# --- mutants ---------------------------------------------------------------------------------

def pinned_batch():
    """Two seeded prompts, d = 2, n = 3 (a regression_batches value)."""
    generator = torch.Generator().manual_seed(0)
    X, y, x_query = (torch.randn(*shape, generator=generator, dtype=torch.float64)
                     for shape in ((2, 3, 2), (2, 3), (2, 2)))
    return X, y, x_query, generator


@pytest.mark.mutant("icl-regression.effective-predictor")
def test_dropping_the_query_mask_breaks_the_effective_predictor():
    fails_at(one_step.effective_predictor_check(unmasked_lsa), "^predict differs",
             batch=pinned_batch(), mask=True, weight_scale=1.0)


def misread_lifted_coefficients(W_PV, W_KQ, **kwargs):
    """The layer is right; its lifted coefficients are 10% too large (phi^T theta is wrong)."""
    model = lsa(W_PV, W_KQ, **kwargs)
    right = model.lifted_coefficients
    model.lifted_coefficients = lambda: 1.1 * right()
    return model


@pytest.mark.mutant("icl-regression.effective-predictor")
def test_wrong_lifted_coefficients_break_the_lifted_form():
    fails_at(one_step.effective_predictor_check(misread_lifted_coefficients),
             "^lifted features differs", batch=pinned_batch(), mask=False, weight_scale=1.0)


@pytest.mark.mutant("icl-regression.one-step-gd")
@pytest.mark.parametrize("build", [step_off(one_step_gd), transposed_one_step],
                         ids=["eta off by 10%", "preconditioner transposed"])
def test_broken_one_step_constructions_are_not_gd(build):
    # off by far more than 1e-10: the first assertion (the float64 sentence) already fails
    fails_at(one_step.one_step_check(build), "not below 1e-10", case=pinned_gd_case())


@pytest.mark.mutant("icl-regression.one-step-gd")
def test_a_step_off_by_one_part_in_1e12_is_not_gd():
    """Breaks the exact identity alone: the prediction moves by 1e-12 |y_hat|, at most 1e-12 of
    the absolute-value evaluation (inside the float64 sentence's 1e-10), but far beyond the
    derived rounding bound 2 gamma_K < 1e-14 of it (the pinned prompts: |y_hat| is over 10% of
    the absolute-value evaluation)."""
    fails_at(one_step.one_step_check(step_off(one_step_gd, 1 + 1e-12)),
             "LSA and one GD step differ by", case=pinned_gd_case())


@pytest.mark.mutant("icl-regression.one-step-gd")
def test_a_step_off_by_one_part_in_1e6_breaks_the_float64_sentence():
    fails_at(one_step.one_step_check(step_off(one_step_gd, 1 + 1e-6)), "not below 1e-10",
             case=pinned_gd_case())


@pytest.mark.mutant("icl-regression.isotropic-optimum")
@pytest.mark.parametrize("preconditioner", LINEAR_MUTANTS.values(), ids=LINEAR_MUTANTS.keys())
def test_wrong_isotropic_optimum_is_caught_by_the_convex_fit(preconditioner):
    closed_form = partial(one_step.linear_closed_form, preconditioner=preconditioner,
                          loss=loss_of(preconditioner))
    expect_failure(one_step.convex_optimum_check("isotropic", closed_form))


@pytest.mark.training
@pytest.mark.mutant("icl-regression.isotropic-optimum")
@pytest.mark.parametrize("preconditioner", LINEAR_MUTANTS.values(), ids=LINEAR_MUTANTS.keys())
def test_wrong_isotropic_optimum_is_caught_by_the_trained_lsa(preconditioner):
    report = expect_failure(one_step.trained_optimum_check(
        "isotropic", partial(one_step.linear_closed_form, preconditioner=preconditioner)))
    assert report.startswith("the trained LSA is"), report


@pytest.mark.mutant("icl-regression.isotropic-optimum")
def test_wrong_normalisation_misses_the_printed_numbers():
    report = expect_failure(one_step.isotropic_numbers_check(
        n_instead_of_n_plus_one, loss_of(n_instead_of_n_plus_one)))
    assert report.startswith("A* is not eta* I"), report


@pytest.mark.mutant("icl-regression.isotropic-optimum")
def test_a_misquoted_catalogue_value_is_caught():
    # 1.175 is 8 catalogue standard errors from the exact 1.1658; everything else is right
    report = expect_failure(one_step.isotropic_numbers_check(catalogue=(1.175, 1.169)))
    assert report.startswith("loss at 0.9 eta*") and "printed 1.175" in report, report


@pytest.mark.mutant("icl-regression.preconditioned-optimum")
@pytest.mark.parametrize("preconditioner", LINEAR_MUTANTS.values(), ids=LINEAR_MUTANTS.keys())
def test_wrong_preconditioner_is_caught_by_the_fit_and_the_stationarity(preconditioner):
    closed_form = partial(one_step.linear_closed_form, preconditioner=preconditioner)
    expect_failure(one_step.convex_optimum_check("preconditioned", closed_form))
    expect_failure(one_step.closed_form_property_check(preconditioner))


@pytest.mark.training
@pytest.mark.mutant("icl-regression.preconditioned-optimum")
@pytest.mark.parametrize("preconditioner", LINEAR_MUTANTS.values(), ids=LINEAR_MUTANTS.keys())
def test_wrong_preconditioner_is_caught_by_the_trained_lsa(preconditioner):
    closed_form = partial(one_step.linear_closed_form, preconditioner=preconditioner)
    report = expect_failure(one_step.trained_optimum_check("preconditioned", closed_form))
    assert report.startswith("the trained LSA is"), report


def test_the_preconditioner_is_symmetric_so_transposition_is_invisible():
    """Why the transposition mutant targets one_step_gd and not A*: A* = A*^T exactly."""
    Sigma = torch.tensor([[2.0, 0.6, 0.0], [0.6, 1.0, 0.3], [0.0, 0.3, 0.5]], dtype=torch.float64)
    Omega = torch.tensor([[0.5, 0.0, 0.2], [0.0, 1.0, -0.4], [0.2, -0.4, 1.5]],
                         dtype=torch.float64)
    assert not torch.allclose(Sigma @ Omega, Omega @ Sigma)  # ΩΣ is not symmetric ...
    A = optimal_preconditioner(10, 0.25, Sigma, Omega)
    # ... but A* = ΩΣH⁻¹ is: the solve is backward stable, so A is within
    # gamma_{16d+16} kappa(H) |A| of the exact (symmetric) A* (closed_form_property_check's
    # bound, with its kappa), and A - A^T within twice that
    H = second_moment(10, 0.25, Sigma, Omega)
    kappa = float(torch.linalg.cond(H) + torch.linalg.cond(A) * torch.linalg.cond(Omega))
    tol = 2 * gamma(16 * 3 + 16) * kappa * float(torch.linalg.matrix_norm(A, ord=2))
    assert float(torch.linalg.matrix_norm(A - A.T, ord=2)) <= tol


@pytest.mark.training
@pytest.mark.mutant("icl-regression.zfb-conserved-quantity")
def test_a_wrong_optimum_misses_the_gradient_flow_endpoint():
    report = expect_failure(zhang_frei_bartlett.zfb_conservation_check(scaled_preconditioner))
    assert report.startswith("gradient flow ended"), report


@pytest.mark.training
@pytest.mark.mutant("icl-regression.zfb-conserved-quantity")
def test_adam_does_not_conserve_the_balance():
    report = expect_failure(zhang_frei_bartlett.zfb_conservation_check(
        trajectory=lambda: ZFB_EXPERIMENT("smoke", device="cpu", optimizer="adam", steps=40)))
    assert report == "the discrete conservation law fails", report


@pytest.mark.training
@pytest.mark.mutant("icl-regression.zfb-conserved-quantity")
def test_unbalanced_inner_products_are_caught():
    """The recorded <W_PV, grad_PV> raised by 0.1%, as a loss with a term outside y_hat (weight
    decay on W_PV, say) would: the first assertion, the infinitesimal law, must catch it."""
    def tampered():
        result = copy.deepcopy(zhang_frei_bartlett.trained_zfb())
        for row in result.tables["trajectory"]["rows"]:
            row[4] *= 1.001
        return result
    report = expect_failure(zhang_frei_bartlett.zfb_conservation_check(trajectory=tampered))
    assert report.startswith("<W_PV, g_PV> != <W_KQ, g_KQ>"), report


@pytest.mark.mutant("icl-regression.zfb-prompt-length-risk")
def test_off_by_one_prompt_length_risk_is_caught():
    report = expect_failure(zhang_frei_bartlett.prompt_length_risk_check(
        risk_with_M_not_M_plus_one))
    assert report.startswith("M=1: Monte Carlo risk"), report


def von_oswald_case(mask: bool, W0: float):
    X, y, x_query, _ = pinned_batch()
    return X, y, x_query, 0.5, torch.full((1, 2), W0, dtype=torch.float64), mask


@pytest.mark.mutant("icl-regression.von-oswald-gd-step")
def test_dropping_the_query_mask_makes_von_oswald_leak():
    fails_at(von_oswald_step.von_oswald_check(unmasked_von_oswald),
             r"labels differ .*mask_query=True", case=von_oswald_case(True, 1.0))


def short_step_when_unmasked(d, eta, W0=None, *, mask_query=True, **kwargs):
    """Right when masked; unmasked, a step 10% short (as if normalised by about n + 1)."""
    return von_oswald(d, eta if mask_query else 0.9 * eta, W0, mask_query=mask_query, **kwargs)


@pytest.mark.mutant("icl-regression.von-oswald-gd-step")
def test_a_wrong_unmasked_layer_breaks_the_w0_zero_sentence():
    fails_at(von_oswald_step.von_oswald_check(short_step_when_unmasked),
             r"labels differ .*mask_query=False", case=von_oswald_case(False, 0.0))


@pytest.mark.mutant("icl-regression.von-oswald-unmasked-any-w0")
def test_leak_refutation_fails_when_the_mask_cannot_be_dropped():
    report = expect_failure(von_oswald_step.leak_refutation(always_masked_von_oswald))
    assert "passed, but it was expected to fail" in report, report


def nonlinear_step_off_by_ten_percent(n, g2, f2x2):
    return 1.1 * nonlinear_optimal_step(n, g2, f2x2)


@pytest.mark.mutant("icl-regression.nonlinear-step")
def test_wrong_nonlinear_step_is_caught_by_the_fit():
    closed_form = partial(one_step.sine_closed_form, step=nonlinear_step_off_by_ten_percent)
    expect_failure(one_step.convex_optimum_check("sine", closed_form))


@pytest.mark.mutant("icl-regression.nonlinear-step")
def test_wrong_nonlinear_step_misses_the_printed_number():
    report = expect_failure(one_step.nonlinear_number_check(nonlinear_step_off_by_ten_percent))
    assert "printed 0.6004" in report, report


@pytest.mark.training
@pytest.mark.mutant("icl-regression.nonlinear-step")
def test_wrong_nonlinear_step_is_caught_by_the_trained_lsa():
    closed_form = partial(one_step.sine_closed_form, step=nonlinear_step_off_by_ten_percent)
    report = expect_failure(one_step.trained_optimum_check("sine", closed_form))
    assert report.startswith("the trained LSA is"), report


def multi_step_case(mode: str):
    X, y, _, _ = pinned_batch()
    return X, y, 0.5, 3, mode


@pytest.mark.mutant("icl-regression.multi-step-exact")
@pytest.mark.parametrize("mode", ["loop", "cot"])
def test_wrong_step_size_breaks_multi_step_exactness(mode):
    fails_at(multi_step.multi_step_check(step_off(multi_step_gd)), f"^{mode}: iterate",
             case=multi_step_case(mode))


def context_writing_gd(d, eta, steps, **kwargs):
    """W_KQ[y, y] = 1 as well: a thought (y = 0) updates as before, bit for bit, but every
    context column gets eta G[x, y] y_j in its w rows."""
    model = multi_step_gd(d, eta, steps, **kwargs)
    with torch.no_grad():
        model.layer.W_KQ[d, d] = 1.0
    return model


@pytest.mark.mutant("icl-regression.multi-step-exact")
def test_a_layer_that_writes_into_the_context_is_caught():
    fails_at(multi_step.multi_step_check(context_writing_gd), "the context columns changed",
             case=multi_step_case("loop"))


@pytest.mark.mutant("icl-regression.cot-error-table")
def test_wrong_step_size_breaks_the_error_table():
    report = expect_failure(multi_step.cot_construction_check(step_off(multi_step_gd)))
    assert report == "k=1: CoT error differs from the formula", report


@pytest.mark.mutant("icl-regression.cot-error-table")
def test_a_table_printed_to_the_resolved_digits_is_not_refuted():
    # an entry above the exact lower bound is not refuted by it
    report = expect_failure(multi_step.cot_table_refutation(
        {**multi_step.COT_PRINTED, 100: 1e60}))
    assert "passed, but it was expected to fail" in report, report


@pytest.mark.mutant("icl-regression.cot-error-decreases-every-eta")
def test_divergence_refutation_fails_with_a_smaller_step():
    # eta 0.45 < 2 / 4.2: the pinned prompt then converges, so nothing refutes the claim
    report = expect_failure(multi_step.divergence_refutation(step_off(multi_step_gd, 0.9)))
    assert "passed, but it was expected to fail" in report, report


@pytest.mark.mutant("icl-regression.no-cot-optimum")
def test_wrong_normalisation_misses_the_no_cot_optimum():
    report = expect_failure(multi_step_learning.no_cot_check(n_instead_of_n_plus_one,
                                                    loss_of(n_instead_of_n_plus_one)))
    assert report.startswith("the best linear-in-G estimate differs"), report


@pytest.mark.mutant("icl-regression.no-cot-optimum")
def test_a_wrong_no_cot_error_misses_the_monte_carlo():
    """The optimum right, its error 5% too large: d(d+1)/(n+d+1) is what fails."""
    def loss(n, sigma2, Sigma, Omega=None):
        return 1.05 * optimal_loss(n, sigma2, Sigma, Omega)
    report = expect_failure(multi_step_learning.no_cot_check(loss=loss))
    assert report.startswith("Monte Carlo"), report


@pytest.mark.training
@pytest.mark.mutant("icl-regression.cot-trained-products")
def test_trained_cot_does_not_match_a_wrong_step():
    report = expect_failure(multi_step_learning.cot_products_check(step_off(multi_step_layer)))
    assert report.startswith("the trained update map is"), report


# --- the slice-symmetry trap, and the construction's API ------------------------------------

def test_all_pairs_least_squares_splits_gamma_between_the_two_slices():
    """The trap of the catalogue: with features G_ab x_c over *all* (a, b), the minimum-norm
    fit puts Γ/2 on each of the slices (y, x) and (x, y); the unordered pairs do not.

    Every comparison rests on a certificate computed from the returned solutions, not on the
    solver's nominal accuracy (derivation at each step)."""
    generator = torch.Generator().manual_seed(0)
    d, n, Gamma = 2, 6, torch.tensor([[0.7, 0.2], [-0.1, 0.4]], dtype=torch.float64)
    prompts = sample_prompts(400, n, d, sigma2=0.1, generator=generator)
    Z = prompts.Z
    model = one_step_gd(d, 1.0, preconditioner=Gamma)
    y_hat = model.predict(Z)
    G = Z[..., :-1] @ Z[..., :-1].transpose(-1, -2) / n
    # symmetrized so the (a, b) and (b, a) columns below are bit-identical (fl(p + q) =
    # fl(q + p), and halving is exact): all_pairs = unique Q exactly, Q summing the two
    # ordered copies of each pair
    G = (G + G.transpose(-1, -2)) / 2
    x_q = Z[:, None, :-1, -1]
    all_pairs = (G.unsqueeze(-1) * x_q[:, None]).flatten(1)
    unique = (pair_features(G).unsqueeze(-1) * x_q).flatten(1)
    b = y_hat.unsqueeze(-1)
    # θ = lifted_coefficients is Γ bit for bit: W_PV = e_y and W_KQ = -Γ^T, so each product
    # has a factor 0 or ±1, each sum at most one nonzero term, and the halvings are exact
    theta_true = model.lifted_coefficients()
    assert torch.equal(theta_true.reshape(-1, d)[[2, 4]].T, Gamma)   # the (x_b, y) pairs
    # the data misfit |b - A θ| of the computed features A against the exact identity
    # y = A_exact θ: ŷ is n + 1 + 3D roundings of |W_PV[-1]||G_abs||W_KQ||x_q| from its exact
    # value; each feature (n-term sum, /n, symmetrized mean, times x_c) n + 3 roundings of the
    # same product on |Z|; the absolute chains, computed in float with K roundings, are within
    # 1/(1 - γ_K) <= 1 + γ_2K of their exact values
    D, absZ = d + 1, Z[..., :-1].abs()
    G_abs = absZ @ absZ.transpose(-1, -2) / n
    pred_abs = torch.einsum("bk,bk->b", (model.W_PV[-1].abs() @ G_abs) @ model.W_KQ.abs(),
                            Z[..., -1].abs())
    A_abs = (pair_features(G_abs).unsqueeze(-1) * x_q.abs()).flatten(1)
    K = n + 1 + 3 * D
    misfit = (gamma(K) * pred_abs + gamma(n + 3) * (A_abs @ theta_true.abs())) * (
        1 + gamma(2 * K))
    sigma = sigma_min_lower_bound(unique)
    assert sigma > 0, "the unique-pair features are not certified full column rank"
    data_error = frobenius_upper(misfit) / sigma    # |θ_LS - θ| <= |A^+ (b - A θ)|

    def distance(v):    # |v - Γ's coefficients|, v any returned coefficient vector
        return least_squares_distance(unique, b, v.unsqueeze(-1), sigma) + data_error

    T = torch.linalg.lstsq(all_pairs, b, driver="gelsd").solution.reshape(d + 1, d + 1, d)
    # A_all T = A_unique (Q T) exactly, so Q T (pair_coefficients: one rounded sum per entry,
    # which the certificate evaluates as returned) is a least-squares solution of the unique
    # system; its (x_b, y) entries are the two slices' sum
    coefficients = pair_coefficients(T).flatten()
    radius = distance(coefficients)
    both = T[d, :d, :].T + T[:d, d, :].T    # bit for bit those entries of Q T (fl(p+q) = fl(q+p))
    assert float((both - Gamma).abs().max()) <= radius
    # the minimum-norm solution with that Q-image is T's projection on range(Q^T), the
    # symmetrized T: its (y, x) slice is half the sum (the halving exact), Γ/2 within half the
    # radius. T's own antisymmetric part (in the null space of A_all) is the solver's
    # minimum-norm tie-break, not part of the claim: it is not asserted.
    half = ((T + T.transpose(0, 1)) / 2)[d, :d, :].T
    assert float((half - Gamma / 2).abs().max()) <= radius / 2
    theta = torch.linalg.lstsq(unique, b, driver="gelsd").solution.squeeze(-1)
    assert float((theta - theta_true).norm()) <= distance(theta)


def test_pair_coefficients_double_the_off_diagonal():
    T = torch.arange(8, dtype=torch.float64).reshape(2, 2, 2)
    T = (T + T.transpose(0, 1)) / 2
    assert pair_coefficients(T).tolist() == [T[0, 0].tolist(), (2 * T[0, 1]).tolist(),
                                             T[1, 1].tolist()]


def test_prompt_layout_and_sign_convention():
    X = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    y = torch.tensor([5.0, 6.0], dtype=torch.float64)
    Z = prompt(X, y, torch.tensor([7.0, 8.0], dtype=torch.float64))
    assert Z.tolist() == [[1.0, 3.0, 7.0], [2.0, 4.0, 8.0], [5.0, 6.0, 0.0]]
    model = one_step_gd(2, 0.5)
    # each side within gamma_K, K = n + 2(d + 1) + 4, of eta |x_q|^T (|y||X|/n): one_step_check
    n, d = 2, 2
    absolute = 0.5 * float(Z[:-1, -1].abs() @ (y.abs() @ X.abs()) / n)
    tol = 2 * gamma(n + 2 * (d + 1) + 4) * absolute
    assert abs(float(model.predict(Z) - gd_prediction(X, y, Z[:-1, -1], 0.5))) <= tol
    # ŷ = -f(Z)[d+1, n+1]: the same products, the full forward possibly blocked otherwise
    assert abs(float(model.predict(Z) + model(Z)[-1, -1])) <= tol


def test_second_moment_matches_monte_carlo():
    generator = torch.Generator().manual_seed(1)
    Sigma = torch.tensor([[1.5, 0.3], [0.3, 0.7]], dtype=torch.float64)
    p = sample_prompts(200_000, 4, 2, sigma2=0.3, Sigma=Sigma, generator=generator)
    s = torch.einsum("bn,bnd->bd", p.y, p.X) / 4
    H = second_moment(4, 0.3, Sigma, torch.eye(2, dtype=torch.float64))
    # each entry of s s^T against its own sample standard error, at the area's family-wise
    # false-alarm rate over the 4 entries (float64 rounding, ~1e-16 relative, is negligible)
    outer = s[:, :, None] * s[:, None, :]
    se = outer.std(dim=0) / len(s) ** 0.5
    assert ((outer.mean(dim=0) - H).abs() <= z_score(4) * se).all()


def test_antithetic_prompts_mirror_the_labels():
    p = sample_prompts(4, 3, 2, sigma2=0.5, antithetic=True,
                       generator=torch.Generator().manual_seed(2))
    assert torch.equal(p.X[:2], p.X[2:]) and torch.equal(p.y[:2], -p.y[2:])


def test_experiments_are_registered_with_smoke_and_full_configs():
    experiments = load_all()
    for name in ("icl-regression-lsa", "icl-regression-zfb", "icl-regression-cot"):
        assert set(experiments[name].configs) >= {"smoke", "full"}


@pytest.mark.parametrize("call, error, name", [
    (lambda: prompt(torch.ones(3, 2), torch.ones(4), torch.ones(2)), ValueError, "y"),
    (lambda: prompt(torch.ones(3, 2), torch.ones(3), torch.ones(3)), ValueError, "x_query"),
    (lambda: prompt(torch.ones(0, 2), torch.ones(0), torch.ones(2)), ValueError, "X"),
    (lambda: prompt([[1.0]], torch.ones(1), torch.ones(1)), TypeError, "X"),
    (lambda: optimal_preconditioner(0, 0.1, torch.eye(2)), ValueError, "n"),
    (lambda: optimal_preconditioner(5, -0.1, torch.eye(2)), ValueError, "sigma2"),
    (lambda: optimal_preconditioner(5, 0.1, torch.tensor([[1.0, 2.0], [2.0, 1.0]])),
     ValueError, "Sigma"),
    (lambda: optimal_preconditioner(5, 0.1, torch.tensor([[1.0, 0.5], [0.0, 1.0]])),
     ValueError, "Sigma"),
    (lambda: optimal_preconditioner(5, 0.1, torch.ones(2, 3)), ValueError, "Sigma"),
    (lambda: optimal_preconditioner(5, 0.1, torch.eye(2), torch.eye(3)), ValueError, "Omega"),
    (lambda: population_loss(torch.eye(3), 5, 0.1, torch.eye(2)), ValueError, "Gamma"),
    (lambda: spd_matrix("Sigma", -torch.eye(2)), ValueError, "Sigma"),
    (lambda: lsa(torch.ones(3, 2), torch.ones(3, 2)), ValueError, "W_PV"),
    (lambda: lsa(torch.ones(3, 3), torch.ones(2, 2)), ValueError, "W_KQ"),
    (lambda: lsa(torch.ones(3, 3), torch.ones(3, 3), mask_query=1), TypeError, "mask_query"),
    (lambda: one_step_gd(2, 0.5).predict(torch.ones(4, 3)), ValueError, "Z"),
    (lambda: one_step_gd(2, 0.5).predict(torch.ones(3, 1)), ValueError, "n_context"),
    (lambda: one_step_gd(2, 0.5, preconditioner=torch.eye(3)), ValueError, "preconditioner"),
    (lambda: one_step_gd(0, 0.5), ValueError, "d"),
    (lambda: one_step_gd(2, float("nan")), ValueError, "eta"),
    (lambda: von_oswald(2, 0.5, torch.ones(2)), ValueError, "W0"),
    (lambda: multi_step_gd(2, 0.5, 0), ValueError, "steps"),
    (lambda: multi_step_gd(2, 0.5, 3, mode="unroll"), ValueError, "mode"),
    (lambda: multi_step_gd(2, 0.5, 3)(torch.ones(5, 4)), ValueError, "Z"),
    (lambda: cot_prompt(torch.ones(3, 2), torch.ones(3), torch.ones(1, 3)), ValueError,
     "iterates"),
    (lambda: sample_prompts(3, 2, 2, antithetic=True), ValueError, "batch"),
    (lambda: sample_prompts(4, 2, 2, response="cubic"), ValueError, "response"),
    (lambda: sample_prompts(4, 0, 2), ValueError, "n"),
    (lambda: nonlinear_optimal_step(5, 0.0, 1.0), ValueError, "g2"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()


@pytest.mark.training
@pytest.mark.mutant("icl-regression.zfb-conserved-quantity")
def test_float_asymmetric_statistics_let_the_odd_blocks_grow(monkeypatch):
    """Without the exact zeros of the antithetic sums, their rounding feeds the odd weights."""
    import empirics.icl_regression.sufficient_statistics as icl_statistics

    monkeypatch.setattr(icl_statistics, "_mirror_symmetric", lambda gram, cross, d: (gram, cross))
    # its own prompt count: the cached statistics of the real run are neither used nor replaced
    text = expect_failure(zhang_frei_bartlett.zfb_conservation_check(
        trajectory=lambda: ZFB_EXPERIMENT("smoke", device="cpu", steps=40, prompts=20_000)))
    assert "odd blocks" in text
