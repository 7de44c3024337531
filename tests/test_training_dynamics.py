"""Mutants and bad input for the training-dynamics area (theorems/areas/training_dynamics)."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from killed import fails_at

from constructions.conditioned_init import (
    attention_jacobian,
    attention_layer,
    condition_number,
    conditioned_init,
    gaussian_init,
)
from constructions.grokking_lazy_rich import (
    QuadraticNet,
    linearised_statistics,
    ntk_regression,
    quadratic_net,
    quadratic_test_loss,
    teacher_task,
)
from constructions.scan_snap import YZModel, count_form, long_sequence_limit, synthetic_classes
from constructions.truth_encoding import (
    TruthProcess,
    bayes_log_probs,
    truth_levels,
    truth_process,
)

# the topic modules, under short names (conditioned_init is also the construction imported above)
from theorems.areas.training_dynamics import conditioned_init as conditioning
from theorems.areas.training_dynamics import grokking_lazy_rich as grokking
from theorems.areas.training_dynamics import scan_snap
from theorems.areas.training_dynamics import truth_encoding as truth
from theorems.evidence import expect_failure
from theorems.numerics import gamma, unit_roundoff


def semi_orthogonal_tolerance(m: int, n: int, stored: float = 0.0) -> float:
    r"""How far a float64 semi-orthogonal factor's computed singular values may be from 1.

    Householder QR gives :math:`\lVert Q^\top Q - I\rVert_2 \le \eta` with
    :math:`\eta = O(mnu)` (Higham, Thm 19.4; the constant is not stated: we take
    :math:`\gamma_{4mn}`, the convention of the other SVD/QR bounds here), so every
    :math:`\sigma_i(Q) \in [\sqrt{1-\eta}, \sqrt{1+\eta}]`, within :math:`\eta` of 1;
    ``svdvals`` is backward stable with a perturbation of norm :math:`\gamma_{4mn}\lVert
    Q\rVert_2 \le \gamma_{4mn}(1+\eta)` (Weyl), which moves each value by at most that.
    ``stored`` is a further perturbation's spectral norm (Weyl again: it adds to both)."""
    eta = gamma(4 * m * n)
    return eta + stored + gamma(4 * m * n) * (1 + eta + stored)


# --- grokking as lazy to rich ---------------------------------------------------------------------


def loss_without_the_factor_two(g, delta):
    """The closed form with 2||Delta||_F^2 replaced by ||Delta||_F^2 (Isserlis miscounted)."""
    d = g.shape[-1]
    sym = (delta + delta.transpose(-1, -2)) / 2
    trace = sym.diagonal(dim1=-2, dim2=-1).sum(-1)
    return (g * g).sum(-1) / d + trace ** 2 / d ** 2 + (sym * sym).sum((-1, -2)) / d ** 2


def regression_without_feature_gradients(net, task):
    """NTK regression with the eps-term of the gradient dropped: the linear kernel's
    weights, which the closed form of the true kernel predictor does not match."""
    broken = QuadraticNet(net.W0, net.alpha, 0.0)
    return ntk_regression(broken, task)


@pytest.mark.mutant("training-dynamics.grokking-test-loss")
def test_a_miscounted_isserlis_term_fails_monte_carlo():
    # the pinned example (Delta = -beta beta^T / 2) fails first, so nothing is shrunk
    report = expect_failure(grokking.monte_carlo_check(loss=loss_without_the_factor_two))
    assert "Failing explicit example" in report


@pytest.mark.mutant("training-dynamics.grokking-test-loss")
def test_a_miscounted_isserlis_term_fails_the_exact_expectation():
    report = expect_failure(grokking.isserlis_check(loss=loss_without_the_factor_two,
                                                    dims=((2, 1),)))
    assert "Isserlis gives" in report


def ridge_regression(net, task):
    """Kernel ridge regression, (K + I) a = y: a smooth fit that does not interpolate."""
    from constructions.grokking_lazy_rich import ntk_gram

    K = ntk_gram(net, task.X)
    a = torch.linalg.solve(K + torch.eye(K.shape[0], dtype=K.dtype), task.y)
    scale = 1 + net.eps * task.X @ net.W0.T                       # (P, N)
    return net.alpha / net.W0.shape[0] * (scale * a[:, None]).T @ task.X


def statistics_without_the_half(net, delta_W, beta):
    """S with sym(M) = M + M^T (the 1/2 dropped): twice the predictor's quadratic part."""
    g, delta = linearised_statistics(net, delta_W, beta)
    return g, 2 * delta + beta[:, None] * beta[None, :] / 2


@pytest.mark.mutant("training-dynamics.grokking-ntk-level")
def test_the_wrong_kernel_misses_the_ntk_level():
    """The kernel without its eps-term: the weights it gives do not interpolate through the
    network's true gradient features."""
    report = expect_failure(grokking.ntk_level_check(
        regression=regression_without_feature_gradients, cases=grokking.NTK_CASES[:1]))
    assert "misses the targets" in report, report


@pytest.mark.mutant("training-dynamics.grokking-ntk-level")
def test_a_ridge_predictor_does_not_interpolate():
    report = expect_failure(grokking.ntk_level_check(regression=ridge_regression,
                                                     cases=grokking.NTK_CASES[:1]))
    assert "misses the targets" in report, report


@pytest.mark.mutant("training-dynamics.grokking-ntk-level")
def test_a_doubled_quadratic_part_misses_the_kernel_predictors_loss():
    """The statistics sentence alone: the interpolation (through the weights) holds, the
    level computed from (g, 2S) is not the kernel predictor's Monte Carlo loss."""
    report = expect_failure(grokking.ntk_level_check(statistics=statistics_without_the_half,
                                                     cases=grokking.NTK_CASES[:1]))
    assert "exact NTK level" in report, report


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.grokking-alpha-controls-laziness")
def test_frozen_features_do_not_beat_the_ntk_level():
    """Seed 0's run of the claim (4000 steps; the unmutated run passes there), with the
    network moved along its linearisation: alpha = 0.3 ends at about 1.35 x the NTK level.
    (At 600 steps the unmutated network is above that level too, so it would not tell.)"""
    report = expect_failure(grokking.alpha_check({"seeds": 1}, freeze_features=True))
    assert report.startswith("alpha=0.3: test loss ends at"), report


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.grokking-alpha-controls-laziness")
def test_a_ten_times_larger_eps_is_not_lazy_at_alpha_ten():
    """Seed 0's run with eps = 0.2 for 0.02: alpha = 0.3 and 1 still end below the NTK level
    (about 0.005 and 0.045 of it), but at alpha = 10 the network leaves its linearisation by
    about 0.44 (relative), above 0.1: the lazy sentence alone fails."""
    report = expect_failure(grokking.alpha_check({"seeds": 1, "eps": 0.2}))
    assert report.startswith("alpha=10: the network leaves its linearisation"), report


def test_the_closed_form_vanishes_at_the_rank_one_solution():
    """N/2 row pairs (u, u) -> (u + v, u - v) keep m and add (N/2) 2vv^T/N = vv^T to C; with
    v = beta / sqrt(alpha eps) that is beta beta^T/(alpha eps): zero test loss."""
    alpha, eps, width = 2.0, 0.5, 4
    u = torch.randn(width // 2, 3, generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64)
    beta = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    v = beta / (alpha * eps) ** 0.5
    net = QuadraticNet(torch.cat([u, u]), alpha, eps)
    assert float(net.test_loss(beta)) > 1.0            # unmoved: the target is not fitted
    with torch.no_grad():
        net.W.copy_(torch.cat([u + v, u - v]))
    assert float(net.test_loss(beta)) <= 1e-12           # a few dozen roundings of O(10) terms


# --- scan and snap -----------------------------------------------------------------------------

def limit_ignoring_the_context_distribution(Z, query, probs):
    """The limit with P(l|n) replaced by the uniform distribution over its support."""
    support = (probs > 0).to(probs)
    return long_sequence_limit(Z, query, support / support.sum())


def shift_column(Z, row, constant):
    """A false gauge: a constant added to a column (one key for every query)."""
    out = Z.clone()
    out[:, row] += constant
    return out


PINNED_YZ = (torch.zeros(2, 2, dtype=torch.float64), torch.tensor([[0, 1, 1, 0]]))


@pytest.mark.mutant("training-dynamics.scan-snap-long-sequence-limit")
def test_a_residual_breaks_the_count_form():
    fails_at(scan_snap.count_check(build=partial(YZModel, residual=True)),
             "differs from the count form", case=PINNED_YZ)


@pytest.mark.mutant("training-dynamics.scan-snap-long-sequence-limit")
def test_the_wrong_limit_does_not_decay():
    report = expect_failure(scan_snap.rate_check(limit=limit_ignoring_the_context_distribution,
                                                 lengths=(64, 256, 1024, 4096),
                                                 sequences=300))
    assert "not T^-1" in report, report


@pytest.mark.mutant("training-dynamics.scan-snap-row-gauge")
def test_a_column_shift_is_not_a_gauge():
    fails_at(scan_snap.gauge_check(shift=shift_column), "moved an attention weight",
             case=PINNED_YZ, row=0, constant=1.0)


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.scan-snap-dynamics")
def test_frozen_attention_does_not_scan():
    report = expect_failure(scan_snap.dynamics_check({"steps": 200, "seeds": 1},
                                                     lr_z_scale=0.0))
    assert "(a)" in report and "distinct mass ends at 0.5000" in report


#: One stream, the fastest rate, 300 steps: enough for (a), (b) and (c) to hold unmutated.
SHORT = {"lr_z_ratios": [0.2], "seeds": 1, "steps": 300}


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.scan-snap-dynamics")
def test_a_z_update_that_ranks_backwards_fails_the_order():
    # the reversed gradient still raises the distinct mass: only (b) can kill it
    report = expect_failure(scan_snap.dynamics_check(SHORT, reverse_distinct=True))
    assert report.startswith("(b)"), report


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.scan-snap-dynamics")
def test_a_runaway_token_fails_no_winner_takes_all():
    # the most probable distinct token's logit drifts up: (a) and (b) still hold
    report = expect_failure(scan_snap.dynamics_check(SHORT, winner_drift=0.05))
    assert report.startswith("(c)"), report


def test_the_synthetic_classes_follow_the_catalogue():
    classes = synthetic_classes()
    assert classes.vocab_size == 22 and classes.query_of == (4, 5, 4, 5)
    assert torch.allclose(classes.probs.sum(-1), torch.ones(4, dtype=torch.float64))
    for n, distinct in enumerate(classes.distinct):
        assert classes.probs[n, list(distinct)].tolist() == pytest.approx([0.25, 0.15, 0.1])
        others = [d for m, ds in enumerate(classes.distinct) if m != n for d in ds]
        assert float(classes.probs[n, others].sum()) == 0.0
    tokens, targets = classes.sample(8, 5, torch.Generator().manual_seed(0))
    assert tokens.shape == (8, 5) and targets.shape == (8,)
    assert all(int(tokens[b, -1]) == classes.query_of[int(targets[b])] for b in range(8))
    # the long-sequence limit at zero init is p itself, normalised
    p = classes.probs[0]
    assert torch.allclose(long_sequence_limit(torch.zeros(22, 22, dtype=torch.float64), 4, p),
                          p / p.norm())


# --- linear truth encodings ----------------------------------------------------------------------

def levels_of_the_second_token_only(rho, n):
    """L_truth without averaging over the two attribute tokens."""
    L0, Lmem, Ltruth = truth_levels(rho, n)
    return L0, Lmem, 2 * Ltruth - Lmem


def levels_with_swapped_plateaus(rho, n):
    L0, Lmem, Ltruth = truth_levels(rho, n)
    return L0, Ltruth, Lmem


def process_with_false_attributes_never_true(n_subjects, n_attributes, rho, *, seed=0):
    """A different process: false attributes uniform over A minus {g(s)} (what the catalogue
    says to recompute for); the closed forms of the assumed process no longer hold."""
    base = truth_process(n_subjects, n_attributes, rho, seed=seed)

    class Shifted(TruthProcess):
        def sample(self, batch, generator):
            rows, true = TruthProcess.sample(self, batch, generator)
            for col, subj in ((1, 0), (3, 2)):
                hit = (~true) & (rows[:, col] == self.truth[rows[:, subj]])
                rows[hit, col] = (rows[hit, col] + 1) % self.n_attributes
            return rows, true

    return Shifted(base.n_subjects, base.n_attributes, base.rho, base.truth)


def levels_in_bits(rho, n):
    """L_0 in bits (log2 |A|): the other two levels unchanged."""
    L0, Lmem, Ltruth = truth_levels(rho, n)
    return L0 / math.log(2), Lmem, Ltruth


def levels_with_a_memoriser_that_ignores_lucky_draws(rho, n):
    """H_mix with q replaced by rho: a false draw that hits g(s) forgotten."""
    L0, _, Ltruth = truth_levels(rho, n)
    return L0, -rho * math.log(rho) - (1 - rho) * math.log((1 - rho) / n), Ltruth


@pytest.mark.mutant("training-dynamics.truth-loss-levels")
def test_a_uniform_level_in_bits_is_not_log_a():
    report = expect_failure(truth.levels_check(levels=levels_in_bits, cases=((0.5, 5),),
                                               samples=20_000))
    assert "is not log|A|" in report, report


@pytest.mark.mutant("training-dynamics.truth-loss-levels")
def test_a_memoriser_level_without_lucky_draws_misses_its_predictor():
    """(ii) alone: at rho = 1/2, |A| = 5 the mutant's 1.498 against the memoriser's 1.228."""
    report = expect_failure(truth.levels_check(
        levels=levels_with_a_memoriser_that_ignores_lucky_draws, cases=((0.5, 5),),
        samples=20_000))
    assert "L_mem closed form" in report, report


@pytest.mark.mutant("training-dynamics.truth-loss-levels")
def test_an_unaveraged_truth_level_misses_its_predictor():
    report = expect_failure(truth.levels_check(levels=levels_of_the_second_token_only,
                                               cases=((0.5, 50),), samples=20_000))
    assert "L_truth closed form" in report, report


@pytest.mark.mutant("training-dynamics.truth-loss-levels")
def test_a_different_false_attribute_law_breaks_the_levels():
    report = expect_failure(truth.levels_check(
        process=process_with_false_attributes_never_true, cases=((0.5, 5),), samples=50_000))
    assert "L_mem closed form" in report, report


@pytest.mark.slow
@pytest.mark.mutant("training-dynamics.truth-two-phases")
def test_without_truth_co_occurrence_the_truth_level_is_not_reached():
    """The two facts' truths drawn independently: the a' token can only reach L_mem."""
    report = expect_failure(truth.phases_check({"co_occurrence": False}))
    assert "Bayes level" in report


@pytest.mark.training
@pytest.mark.mutant("training-dynamics.truth-two-phases")
def test_a_hundred_steps_do_not_reach_the_memorisation_level():
    """The end levels, cut to 100 of the 2000 steps: the a-token loss is still far above
    L_mem (it starts at about log|A| = 3.9, L_mem = 2.6)."""
    report = expect_failure(truth.phases_check({"steps": 100}))
    assert report.startswith("the a-token loss ends"), report


@pytest.mark.slow
@pytest.mark.mutant("training-dynamics.truth-two-phases")
def test_a_bayes_accuracy_without_the_false_branch_misses_the_probe():
    """q max(pi, 1 - pi) alone (0.50 here, the (1 - q) of certain falsehood dropped): the
    trained probe's interval (about 0.99) lies far above that band."""
    report = expect_failure(truth.phases_check(
        bayes_accuracy=lambda rho, n: truth.bayes_truth_accuracy(rho, n) - (1 - rho) * (1 - 1 / n)))
    assert "the truth probe accuracy" in report


@pytest.mark.mutant("training-dynamics.truth-loss-levels")
def test_swapped_plateaus_are_out_of_order():
    assert "out of order" in expect_failure(truth.ordering_check(
        levels=levels_with_swapped_plateaus))


# --- conditioned initialisation -------------------------------------------------------------

def value_path_through_tanh(X, W_Q, W_K, W_V):
    """A layer whose output is not linear in W_V: the Jacobian then depends on W_V."""
    return attention_layer(X, W_Q, W_K, torch.tanh(W_V))


def inverse_condition_number(J):
    """sigma_min / sigma_max: the measurement the refutation relies on, inverted."""
    return 1 / condition_number(J)


def value_path_flat_at_the_identity(X, W_Q, W_K, W_V):
    """Y = AX (W_V + (W_V - I)^2) (entrywise square): its W_V-Jacobian is exactly AX ⊗ I at
    W_V = I (the derivative 1 + 2(W_V - I) is 1 there) and not at any other W_V."""
    eye = torch.eye(*W_V.shape, dtype=W_V.dtype)
    return attention_layer(X, W_Q, W_K, W_V + (W_V - eye) ** 2)


#: the check's pinned example: X = diag(1, 2), W_Q = W_K = W_V = I, the other W_V = 2I
PINNED_LAYER = (torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64),
                *(torch.eye(2, dtype=torch.float64),) * 3, 2 * torch.eye(2, dtype=torch.float64))


@pytest.mark.mutant("training-dynamics.conditioned-init-value-jacobian")
def test_a_nonlinear_value_path_is_not_a_kronecker_product():
    fails_at(conditioning.value_jacobian_check(layer=value_path_through_tanh),
             "J_V differs from AX ⊗ I", case=PINNED_LAYER)


@pytest.mark.mutant("training-dynamics.conditioned-init-value-jacobian")
def test_a_value_path_flat_only_at_the_identity_depends_on_w_v():
    """Kronecker at the first W_V, so only the sentence 'do not depend on W_V' breaks."""
    fails_at(conditioning.value_jacobian_check(layer=value_path_flat_at_the_identity),
             "J_V at another W_V differs", case=PINNED_LAYER)


@pytest.mark.mutant("training-dynamics.conditioned-init-condition-number")
def test_an_inverted_condition_number_is_caught():
    """The measurement: sigma_min / sigma_max reverses the order of the medians, and the
    interval then decides the other way (it does not merely fail to decide)."""
    report = expect_failure(conditioning.kappa_check(kappa=inverse_condition_number))
    assert "is above the Gaussian one" in report


def not_semi_orthogonal(d, d_k, d_v, *, seed=0):
    """The scheme with W_Q, W_K scaled by 3: every singular value 3, not 1."""
    W_Q, W_K, W_V = conditioned_init(d, d_k, d_v, seed=seed)
    return 3 * W_Q, 3 * W_K, W_V


@pytest.mark.mutant("training-dynamics.conditioned-init-condition-number")
def test_a_scheme_that_is_not_semi_orthogonal_is_caught():
    """The scheme sentence: W_Q, W_K with singular values 3 sharpen the softmax, and the
    median condition number rises far above the Gaussian one."""
    report = expect_failure(conditioning.kappa_check(
        schemes=(gaussian_init, not_semi_orthogonal)))
    assert "is above the Gaussian one" in report


def assert_independent_streams(trial_streams, trials=conditioning.TRIALS):
    """X and the weights of every trial come from distinct streams, and the Gaussian W_Q is
    not a copy of X: one torch seed for both made sqrt(d) W_Q[:n] equal X exactly."""
    per_trial, _ = trial_streams(trials)
    for data, gaussian, _ in per_trial:
        X = conditioning.trial_inputs(data)
        W_Q = gaussian_init(conditioning.SIZE, conditioning.SIZE, conditioning.SIZE,
                            seed=conditioning.torch_seed(gaussian))[0]
        rows = (conditioning.SIZE ** 0.5 * W_Q[: conditioning.TOKENS]).flatten()
        # independent draws: the sample correlation of 96 pairs has standard deviation
        # about 1/sqrt(96) ~ 0.1, so 0.5 is five of them; a shared stream gives 1
        correlation = torch.corrcoef(torch.stack([X.flatten(), rows]))[0, 1]
        assert abs(float(correlation)) < 0.5, f"X and W_Q are correlated ({correlation:.3g})"
    seeds = [conditioning.torch_seed(s) for trial in per_trial for s in trial]
    assert len(set(seeds)) == len(seeds), "two streams share a seed"


def test_the_condition_number_trials_draw_inputs_and_weights_independently():
    assert_independent_streams(conditioning.trial_streams)


def test_the_stream_test_catches_a_shared_seed():
    """The design the check replaced: trial t drew X and the weights from seed t."""
    import numpy as np

    def coupled(trials):
        shared = [(np.random.SeedSequence(t),) * 3 for t in range(trials)]
        return shared, np.random.SeedSequence(0)

    with pytest.raises(AssertionError, match="X and W_Q are correlated"):
        assert_independent_streams(coupled, trials=3)

    def conditioned_like_data(trials):  # X independent of W_Q, but a stream reused
        per_trial, rest = conditioning.trial_streams(trials)
        return [(x, g, x) for x, g, _ in per_trial], rest

    with pytest.raises(AssertionError, match="share a seed"):
        assert_independent_streams(conditioned_like_data, trials=3)


@pytest.mark.slow
@pytest.mark.mutant("training-dynamics.conditioned-init-trains-faster")
def test_a_measurement_crediting_half_the_steps_breaks_the_refutation():
    """The refutation relies on the measured steps: credit the conditioned arm with half of
    them and the claim as stated passes, so the refutation must fail."""
    real = conditioning._speed_result()

    def rigged():
        for key in [k for k in real.metrics if k.startswith("conditioned/steps")]:
            real.metrics[key] = real.metrics[key] / 2
        return real

    report = expect_failure(conditioning.speed_refutation_check(result_of=rigged))
    assert "expected to fail" in report


def test_conditioning_overwrites_only_the_attention_weights():
    from empirics.conditioned_init import condition
    from empirics.induction_heads import attention_only

    model = attention_only(8, 6, d_model=8, n_layers=2, n_heads=2, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    condition(model, 0)
    after = model.state_dict()
    changed = sorted(k for k in before if not torch.equal(before[k], after[k]))
    assert all(k.split(".")[-1] in ("W_Q", "W_K", "W_V") for k in changed) and changed
    for layer in model.layers:
        for h in range(2):
            W = layer.W_Q[h].double()          # exact: float32 -> float64 widens
            s = torch.linalg.svdvals(W)
            # Q from a float64 QR, rounded to float32 storage: W = Q + E, |E_ij| <= u32 |Q_ij|,
            # so by Weyl |s_i - s_i(Q)| <= |E|_2 <= u32 |Q|_F <= u32 sqrt(k (1 + eta))
            # (k = min(m, n) columns), and |s_i(Q) - 1| <= eta; plus svdvals' own float64
            # error (the sum is semi_orthogonal_tolerance's bound)
            u32 = unit_roundoff(torch.float32)
            tol = semi_orthogonal_tolerance(*W.shape, stored=u32 * (min(W.shape) * 1.01) ** 0.5)
            assert float((s - 1).abs().max()) <= tol   # float32 storage
        assert torch.equal(torch.cat(list(layer.W_V.detach()), 1), torch.eye(8))


def test_the_schemes_have_the_summarised_spectra():
    W_Q, W_K, W_V = conditioned_init(12, 5, 7, seed=3)
    for W in (W_Q, W_K):
        s = torch.linalg.svdvals(W)
        # semi-orthogonal: every sigma is 1, within the QR's and svdvals' rounding
        assert float((s - 1).abs().max()) <= semi_orthogonal_tolerance(*W.shape)
    assert torch.equal(W_V, torch.eye(12, 7, dtype=torch.float64))
    G = gaussian_init(12, 5, 7, seed=3)
    assert [tuple(w.shape) for w in G] == [(12, 5), (12, 5), (12, 7)]
    blocks = attention_jacobian(torch.randn(4, 12, dtype=torch.float64), *G)
    assert {k: tuple(v.shape) for k, v in blocks.items()} == {
        "W_Q": (28, 60), "W_K": (28, 60), "W_V": (28, 84)}


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, match", [
    (lambda: quadratic_test_loss(torch.zeros(3), torch.zeros(2, 2)), ValueError, "delta"),
    (lambda: quadratic_test_loss([1.0], torch.zeros(1, 1)), TypeError, "g"),
    (lambda: teacher_task(0), ValueError, "dim"),
    (lambda: teacher_task(3, 2.5), TypeError, "train_size"),
    (lambda: quadratic_net(3, 2, alpha=-1.0), ValueError, "alpha"),
    (lambda: quadratic_net(3, 2, eps=float("nan")), ValueError, "eps"),
    (lambda: quadratic_net(3, 2, dtype=torch.int64), ValueError, "dtype"),
    (lambda: QuadraticNet(torch.zeros(3), 1.0, 0.1), ValueError, "W0"),
    (lambda: quadratic_net(3, 2)(torch.zeros(4, 5)), ValueError, "x"),
    (lambda: ntk_regression("net", teacher_task(3, 2)), TypeError, "net"),
    (lambda: ntk_regression(quadratic_net(3, 2), "task"), TypeError, "task"),
    (lambda: ntk_regression(quadratic_net(4, 2), teacher_task(3, 2)), ValueError, "D"),
    (lambda: YZModel(1), ValueError, "vocab_size"),
    (lambda: YZModel(4, normalize=1), TypeError, "normalize"),
    (lambda: YZModel(4)(torch.tensor([[0, 1, 9]])), ValueError, "tokens"),
    (lambda: YZModel(4)(torch.tensor([[0.0, 1.0]])), TypeError, "tokens"),
    (lambda: YZModel(4)(torch.tensor([[0]])), ValueError, "length"),
    (lambda: count_form(torch.zeros(3, 3), torch.tensor([[0, 5]])), ValueError, "tokens"),
    (lambda: long_sequence_limit(torch.zeros(3, 3), 3, torch.ones(3) / 3), ValueError, "query"),
    (lambda: long_sequence_limit(torch.zeros(3, 3), 0, torch.ones(3)), ValueError, "probs"),
    (lambda: long_sequence_limit(torch.zeros(3, 2), 0, torch.ones(3) / 3), ValueError, "Z"),
    (lambda: synthetic_classes(n_next=3, n_query=2), ValueError, "n_next"),
    (lambda: synthetic_classes(distinct_mass=1.0), ValueError, "distinct_mass"),
    (lambda: synthetic_classes(distinct_weights=(0.5, -0.1)), ValueError, "distinct_weights"),
    (lambda: synthetic_classes().sample(0, 5, torch.Generator()), ValueError, "batch"),
    (lambda: truth_levels(1.0, 50), ValueError, "rho"),
    (lambda: truth_levels("0.5", 50), TypeError, "rho"),
    (lambda: truth_levels(0.5, 1), ValueError, "n_attributes"),
    (lambda: truth_process(0), ValueError, "n_subjects"),
    (lambda: bayes_log_probs("process", torch.zeros(1, 4)), TypeError, "process"),
    (lambda: attention_layer(torch.zeros(3), torch.zeros(3, 2), torch.zeros(3, 2),
                             torch.zeros(3, 2)), ValueError, "X"),
    (lambda: attention_layer(torch.zeros(2, 3), torch.zeros(3, 2), torch.zeros(3, 4),
                             torch.zeros(3, 2)), ValueError, "W_K"),
    (lambda: attention_layer(torch.zeros(2, 3), torch.zeros(3, 2), torch.zeros(3, 2),
                             torch.zeros(4, 2)), ValueError, "W_V"),
    (lambda: conditioned_init(0, 2, 2), ValueError, "d"),
    (lambda: gaussian_init(3, 2, 2, dtype=torch.int32), ValueError, "dtype"),
    (lambda: condition_number(torch.zeros(3)), ValueError, "J"),
])
def test_bad_input_is_rejected_with_the_parameter_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- valid example arguments for tests/test_public_api.py ---------------------------------------

def _small_net():
    from constructions.grokking_lazy_rich import quadratic_net

    return quadratic_net(3, 4)


def _small_task():
    from constructions.grokking_lazy_rich import teacher_task

    return teacher_task(3, 5)


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _attention_example() -> dict:
    return {"X": _rand(3, 2), "W_Q": _rand(2, 2, seed=1), "W_K": _rand(2, 2, seed=2),
            "W_V": _rand(2, 2, seed=3)}


PUBLIC_API_EXAMPLES = {
    "conditioned_init.attention_jacobian": _attention_example,
    "conditioned_init.attention_layer": _attention_example,
    "conditioned_init.attention_matrix": lambda: {k: v for k, v in _attention_example().items()
                                                  if k != "W_V"},
    "conditioned_init.condition_number": lambda: {"J": _rand(3, 2)},
    "grokking_lazy_rich.linearised_statistics": lambda: {
        "net": _small_net(), "delta_W": _rand(4, 3), "beta": _rand(3, seed=1)},
    "grokking_lazy_rich.network_statistics": lambda: {
        "W": _rand(4, 3), "W0": _rand(4, 3, seed=1), "beta": _rand(3, seed=2)},
    "grokking_lazy_rich.ntk_gram": lambda: {"net": _small_net(), "X": _rand(2, 3)},
    "grokking_lazy_rich.ntk_level": lambda: {"net": _small_net(), "task": _small_task()},
    "grokking_lazy_rich.ntk_regression": lambda: {"net": _small_net(), "task": _small_task()},
    "grokking_lazy_rich.quadratic_test_loss": lambda: {"g": _rand(3), "delta": _rand(3, 3)},
    "grokking_lazy_rich.rank_one_alignment": lambda: {"net": _small_net(),
                                                      "beta": _rand(3, seed=1)},
    "scan_snap.count_form": lambda: {"Z": _rand(3, 3), "tokens": torch.tensor([[0, 1, 2]])},
    "scan_snap.long_sequence_limit": lambda: {
        "Z": _rand(3, 3), "query": 1, "probs": torch.full((3,), 1 / 3, dtype=torch.float64)},
    "truth_encoding.bayes_log_probs": lambda: {
        "process": _truth_process(), "rows": torch.tensor([[0, 1, 1, 0]])},
}


def _truth_process():
    from constructions.truth_encoding import truth_process

    return truth_process(3, 2)
PUBLIC_API_ACCEPTED = {
    # a width (d_v, or the number of rows of a matrix whose condition number is asked) is free
    ("conditioned_init.attention_layer", "W_V"): ("mismatched",),
    ("conditioned_init.attention_jacobian", "W_V"): ("mismatched",),
    ("conditioned_init.condition_number", "J"): ("mismatched",),
    ("scan_snap.count_form", "tokens"): ("mismatched",),  # a longer context
    ("scan_snap.long_sequence_limit", "query"): ("zero",),  # token 0 is a query too
}
