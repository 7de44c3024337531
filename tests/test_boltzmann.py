"""Mutants and bad input for the Boltzmann-operator claims (theorems/areas/boltzmann/)."""

from __future__ import annotations

import math

import pytest
import torch
from killed import fails_at

from constructions.boltzmann import (
    boltzmann,
    contextual_mapping,
    equivariant_approximator,
    labelled_sequences,
    memorizing_transformer,
    quantizer,
    rank_one_head,
    token_only_ceiling,
)
from theorems.areas.boltzmann import context_ids, memorization
from theorems.areas.boltzmann import operator as operator_checks
from theorems.areas.boltzmann._shared import SATURATED, SPREAD, TWO_POINT
from theorems.evidence import expect_failure
from theorems.numerics import gamma


def hardmax_operator(a, beta=1.0, dim=-1):
    """Hardmax in place of softmax: the largest entry, whatever the temperature (``0 * beta``
    keeps the temperature in the autograd graph, with derivative 0)."""
    a = torch.as_tensor(a)
    return a.amax(dim=dim) + 0 * torch.as_tensor(beta, dtype=a.dtype)


def centring_bug(a, beta=1.0, dim=-1):
    """Subtracts the mean first and forgets to add it back: not shift-equivariant."""
    return boltzmann(a - a.mean(dim=dim, keepdim=True), beta, dim)


def positional_weights(a, beta=1.0, dim=-1):
    """A position-dependent offset: still shift-equivariant, no longer permutation-invariant."""
    return boltzmann(a + 0.5 * torch.arange(a.shape[dim], dtype=a.dtype) / a.shape[dim], beta,
                     dim)


def with_hardmax(module):
    """Swap every attention layer of a built model to hardmax (the construction otherwise
    unchanged)."""
    for sub in module.modules():
        if hasattr(sub, "kind") and hasattr(sub, "W_Q"):
            sub.kind = "hardmax"
    return module




# --- mutants: BZ.1 ---------------------------------------------------------------------------

@pytest.mark.mutant("boltzmann.entropy-decomposition")
def test_hardmax_is_not_lse_minus_entropy():
    fails_at(operator_checks.entropy_check(hardmax_operator), "but LSE - H/beta",
             case=TWO_POINT)


@pytest.mark.mutant("boltzmann.max-bounds")
def test_a_tightened_lower_bound_fails():
    fails_at(operator_checks.max_bounds_check(slack=0.1), r"< max a - 0\.1 ln\(n\)/beta",
             case=TWO_POINT)


@pytest.mark.mutant("boltzmann.max-bounds")
def test_an_operator_above_the_max_fails():
    def raised(a, beta=1.0, dim=-1):
        return boltzmann(a, beta, dim) + 1e-3
    fails_at(operator_checks.max_bounds_check(raised), "> max a", case=SATURATED)


@pytest.mark.mutant("boltzmann.temperature-derivative")
def test_hardmax_has_no_temperature_derivative():
    fails_at(operator_checks.derivative_check(hardmax_operator), r"^d boltz/d beta",
             case=TWO_POINT)


@pytest.mark.mutant("boltzmann.shift-permutation")
@pytest.mark.parametrize("operator, match", [(centring_bug, r"^boltz\(a \+ c\)"),
                                             (positional_weights, r"^boltz\(pi a\)")])
def test_broken_symmetries_are_caught(operator, match):
    fails_at(operator_checks.symmetry_check(operator), match, case=SPREAD, shift=-49.5, seed=0)


@pytest.mark.mutant("boltzmann.coordinatewise-monotone")
def test_refutation_fails_when_the_operator_is_monotone():
    report = expect_failure(operator_checks.monotonicity_refutation(hardmax_operator))
    assert "passed, but it was expected to fail" in report, report


@pytest.mark.mutant("boltzmann.rank-one-head")
def test_a_hardmax_head_is_not_a_boltzmann_operator():
    fails_at(operator_checks.rank_one_check(lambda *a, **k: with_hardmax(rank_one_head(*a, **k))),
             "head output differs", d=3, n=4, seed=1, rho=2.0, out_scale=1.0)


# --- mutants: BZ.2, BZ.3, ordered reading ------------------------------------------------------

@pytest.mark.mutant("boltzmann.lemma1-separation")
def test_lemma1_bound_tightened_beyond_the_worst_case_fails():
    # the worst observed gap is ~706 delta' (n = 2), so 10^4 delta' is beyond the truth
    fails_at(context_ids.lemma1_check(log_bound=lambda n, r: context_ids.lemma_log_bound(n, r)
                                      + math.log(1e4)), "is not above", case=context_ids.WORST_PAIR)


@pytest.mark.mutant("boltzmann.lemma1-separation")
def test_lemma1_fails_for_hardmax():
    fails_at(context_ids.lemma1_check(op=context_ids.arb_max), "is not above",
             case=context_ids.WORST_PAIR)


@pytest.mark.mutant("boltzmann.lemma1-separation")
def test_an_operator_beyond_the_radius_fails():
    """1.5 boltz: gaps grow (still above delta'), but boltz of the pair's first vector, whose
    largest entry is r, goes to about 1.5 r."""
    fails_at(context_ids.lemma1_check(op=lambda values: 1.5 * context_ids.arb_boltz(values)),
             r"\|boltz\(a\)\| > r", case=context_ids.WORST_PAIR)


@pytest.mark.mutant("boltzmann.lemma1-separation")
def test_worst_case_search_detects_a_tightened_bound():
    rows = context_ids.worst_case_ratios(
        log_bound=lambda n, r: context_ids.lemma_log_bound(n, r) + math.log(1e4), max_n=2)
    assert rows[0][1] < 1


def rho_too_small(vocabulary, n):
    return contextual_mapping(vocabulary, n, rho=contextual_mapping(vocabulary, n).rho / 10)


def non_separating_w(vocabulary, n):
    """w orthogonal to the difference of the first two tokens: they project alike."""
    good = contextual_mapping(vocabulary, n)
    diff = vocabulary[1] - vocabulary[0]
    w = good.w - (good.w @ diff) / (diff @ diff) * diff
    return contextual_mapping(vocabulary, n, w=w, rho=good.rho)


@pytest.mark.mutant("boltzmann.contextual-mapping")
@pytest.mark.parametrize("build", [rho_too_small, non_separating_w])
def test_contextual_mapping_breaks_with_small_rho_or_bad_w(build):
    fails_at(context_ids.contextual_mapping_check(build), "score gaps",
             case=(context_ids.CATALOGUE_VOCABULARY, 2))


@pytest.mark.mutant("boltzmann.ordered-separation")
def test_ordered_refutation_fails_once_positions_are_encoded():
    report = expect_failure(context_ids.ordered_refutation(lift_positions=True))
    assert "passed, but it was expected to fail" in report, report


# --- mutants: BZ.4, BZ.5, BZ.6, GD ------------------------------------------------------------

@pytest.mark.mutant("boltzmann.hardmax-not-contextual")
def test_softmax_separates_the_hardmax_witness():
    fails_at(memorization.hardmax_check(kind="softmax"), "the softmax layer separates",
             seed=0, d=2, d_k=1)


@pytest.mark.mutant("boltzmann.hardmax-not-contextual")
def test_a_hardmax_comparison_does_not_separate_the_witness():
    fails_at(memorization.hardmax_check(comparison="hardmax"), "softmax does not separate",
             seed=0, d=2, d_k=1)


@pytest.mark.mutant("boltzmann.memorization")
def test_memorizer_with_hardmax_attention_misses_labels():
    fails_at(memorization.memorization_check(
        lambda inputs, labels: with_hardmax(memorizing_transformer(inputs, labels))),
        "labels missed", data=labelled_sequences(*memorization.GD_DATA))


@pytest.mark.mutant("boltzmann.memorization-parameters")
def test_halved_parameter_bound_fails():
    report = expect_failure(memorization.parameter_check(bound_scale=0.5))
    assert report.startswith("N=") and "parameters >" in report, report


@pytest.mark.mutant("boltzmann.universal-approximation")
def test_approximator_with_hardmax_attention_fails():
    report = expect_failure(memorization.approximation_check(
        build=lambda *a, **k: with_hardmax(equivariant_approximator(*a, **k)), grids=(4,),
        samples=500))
    assert report.startswith("grid 4: error") and "off the ramps exceeds" in report, report


@pytest.mark.training
@pytest.mark.mutant("boltzmann.gd-memorization")
def test_without_values_gd_stays_at_the_token_only_ceiling():
    # a zero value direction makes the model tokenwise, so it cannot beat the ceiling however
    # long it trains; after 10 steps it is strictly below it in every run, so the sign-test
    # interval of the median margin lies below 0 (at 50 steps every run sits exactly on the
    # ceiling: the interval [0, 0] decides nothing, and the check ends inconclusive)
    report = expect_failure(memorization.gd_check(values=False, steps=10))
    assert report.startswith("the median run does not beat the token-only ceiling"), report


# --- the constructions on their own -----------------------------------------------------------

def test_boltzmann_is_stable_up_to_beta_a_of_1e4():
    a = torch.tensor([[1e4, -1e4, 9999.0], [-1e4, -1e4, -1e4]], dtype=torch.float64)
    for beta in (1.0, -1.0, 0.0):
        out = boltzmann(a, beta)
        assert torch.isfinite(out).all()
        assert bool((out <= a.amax(-1)).all() and (out >= a.amin(-1)).all())
    # Exact: weights w = fl(1/3) (float32), anchor 1; 0 + w + 2w rounds 3w = 1 + 3e-8 to 1 in
    # any order (below half an ulp of 1), and 1 + 1 = 2.
    assert boltzmann(torch.tensor([1.0, 2.0, 3.0]), 0.0) == 2.0
    # Exact: beta = 0 gives weights exp(0)/2 = 1/2 and anchor 0, so 0 + 1/2; beta = 1e4 gives
    # exp(-1e4) = 0 (underflow), weights (0, 1), anchor 1, so 1 + (-1)(0) + 0(1) = 1.
    assert torch.equal(boltzmann(torch.tensor([[0.0, 1.0], [0.0, 1.0]]),
                                 torch.tensor([0.0, 1e4])), torch.tensor([0.5, 1.0]))
    assert boltzmann(torch.ones(3, 4, dtype=torch.float32), 2.0, dim=0).dtype == torch.float32


def test_contextual_mapping_exposes_its_constants():
    model = contextual_mapping(context_ids.CATALOGUE_VOCABULARY, 2)
    # rho = T/(c_w^2 eps r_min) and score_gap = rho c_w^2 eps r_min, left to right in float64:
    # 3 roundings in the denominator, 1 in the division, 3 in the product, c_w**2 (libm pow,
    # within 1 ulp) twice more: score_gap >= T (1 - gamma_9); T, eps and r_min are the same
    # expressions on the same float64 vocabulary in the builder and the model (same bits).
    assert model.score_gap >= model.lemma_threshold * (1 - gamma(9))
    assert model.c_w >= model.theorem_c
    assert model.rho < model.theorem_rho and model.log_delta > model.theorem_log_delta
    # the catalogue: with the paper's constant the exponent is about -3.4e4
    assert 3.3e4 < 2 * model.theorem_rho * model.r_max**2 < 3.5e4
    assert model.r == pytest.approx(2.125)
    # Exact: the builder forms W_O as the same float64 product out_scale * u, with
    # out_scale = eps / (4 r_max) evaluated by the same expression.
    assert torch.equal(model.W_O, model.eps / (4 * model.r_max) * model.u[None, :])
    assert "log10_delta" in repr(model)
    x = model.vocabulary[torch.tensor([[0, 1], [2, 3]])]
    assert model(x).shape == (2, 2, 2)
    assert model.pattern(x).shape == (2, 2, 2)
    assert model.boltzmann_values(x).shape == (2, 2)
    low = contextual_mapping(context_ids.CATALOGUE_VOCABULARY, 2, dtype=torch.float32)
    assert low(x.float()).dtype == torch.float32


def test_memorizer_on_user_data_with_real_labels():
    inputs, labels = labelled_sequences(30, 3, 4, 10, 3, seed=5)
    targets = labels.double() * 0.37 - 1.0
    model = memorizing_transformer(inputs, targets)
    # The FFN is flat at each context id, so the only error is its own rounding on the
    # computed ids: memorization.ffn_output_error, gamma_{H+d+3} on the absolute evaluation.
    tol = memorization.ffn_output_error(model.ffn, model.mixed(inputs))[..., 0]
    assert bool(((model(inputs) - targets).abs() <= tol).all())
    report = model.parameter_report()
    assert report["parameters"] == model.parameter_count() <= report["bound_s=nN"]
    assert "bound 4(s+d)+d(2nN+d)" in repr(model)


def test_token_only_ceiling_counts_the_majority_label_per_token():
    tokens = torch.eye(3, dtype=torch.float64)
    inputs = tokens[torch.tensor([[0, 1], [0, 2], [1, 2]])]
    labels = torch.tensor([[1, 0], [1, 1], [0, 0]])
    # token 0: labels (1, 1); token 1: (0, 0); token 2: (1, 0) -> 5 of 6
    assert token_only_ceiling(inputs, labels) == pytest.approx(5 / 6)


def test_quantizer_sends_cells_to_their_centres():
    q = quantizer(4, 2)
    x = torch.tensor([[[0.1, 0.9], [0.3, 0.6]]], dtype=torch.float64)
    # The exact output is the cell centre (every weight and bias is a dyadic rational and no
    # input is within a ramp). Pre-activations 256x + b: 256x exact (a power of 2), + b one
    # rounding; ReLU 1-Lipschitz; the read-out multiplies by +-1/4 (exact) and sums H + 1
    # terms: |err| <= gamma_{H+2} (|W_out|^T |pre| + |b_out|).
    pre = x @ q.W_in + q.b_in
    tol = gamma(q.W_in.shape[1] + 2) * (pre.abs() @ q.W_out.abs() + q.b_out.abs())
    centres = torch.tensor([[[0.125, 0.875], [0.375, 0.625]]], dtype=torch.float64)
    assert bool(((q(x) - centres).abs() <= tol).all())


# --- bad input ------------------------------------------------------------------------------

def test_boltzmann_rejects_bad_input():
    with pytest.raises(TypeError, match="a must be"):
        boltzmann([1.0, 2.0])
    with pytest.raises(ValueError, match="at least one dimension"):
        boltzmann(torch.tensor(1.0))
    with pytest.raises(ValueError, match="dim must be"):
        boltzmann(torch.ones(3), dim=1)
    with pytest.raises(ValueError, match="beta must be finite"):
        boltzmann(torch.ones(3), float("nan"))
    with pytest.raises(ValueError, match="does not broadcast"):
        boltzmann(torch.ones(2, 3), torch.ones(3))
    with pytest.raises(ValueError, match="overflows"):
        boltzmann(torch.tensor([1e300, 1.0], dtype=torch.float64), 1e10)
    with pytest.raises(ValueError, match="a must be finite"):
        boltzmann(torch.tensor([1.0, float("inf")]))


def test_contextual_mapping_rejects_unseparated_vocabularies():
    vocabulary = context_ids.CATALOGUE_VOCABULARY
    with pytest.raises(ValueError, match="row 1 is the zero vector"):
        contextual_mapping(torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]), 2)
    with pytest.raises(ValueError, match="rows 0 and 2 are equal"):
        contextual_mapping(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]), 2)
    with pytest.raises(ValueError, match="seq_len must be <= the vocabulary size 4"):
        contextual_mapping(vocabulary, 5)
    with pytest.raises(ValueError, match="seq_len must be >= 2"):
        contextual_mapping(vocabulary, 1)
    with pytest.raises(ValueError, match="vocabulary must have 2 dims"):
        contextual_mapping(torch.ones(3), 2)
    with pytest.raises(ValueError, match="w must be a nonzero vector"):
        contextual_mapping(vocabulary, 2, w=torch.zeros(2))
    with pytest.raises(ValueError, match="w must have shape"):
        contextual_mapping(vocabulary, 2, w=torch.ones(3))
    with pytest.raises(ValueError, match="w does not separate"):
        contextual_mapping(vocabulary, 2, w=torch.tensor([0.0, 1.0]))  # (1,0), (1.5,0) collide
    with pytest.raises(ValueError, match="rho must be finite and > 0"):
        contextual_mapping(vocabulary, 2, rho=-1.0)
    with pytest.raises(TypeError, match=r"dtype must be a torch\.dtype"):
        contextual_mapping(vocabulary, 2, dtype="float64")


def test_memorizer_names_the_offending_entries():
    inputs, labels = labelled_sequences(6, 3, 2, 8, 2, seed=1)
    conflicting = labels.clone()
    inputs = torch.cat([inputs, inputs[2:3, [2, 0, 1]]])  # a permuted copy of sequence 2
    conflicting = torch.cat([labels, labels[2:3, [2, 0, 1]]])
    conflicting[6, 1] = 1 - conflicting[6, 1]  # ... whose label for token inputs[2, 0] flips
    with pytest.raises(ValueError, match=r"inputs\[2\] position 0 and inputs\[6\] position 1"):
        memorizing_transformer(inputs, conflicting)
    repeated = inputs.clone()
    repeated[4, 2] = repeated[4, 0]
    with pytest.raises(ValueError, match=r"inputs\[4\] repeats a token at positions 0 and 2"):
        memorizing_transformer(repeated, torch.zeros(7, 3))
    zero = inputs.clone()
    zero[3, 1] = 0.0
    with pytest.raises(ValueError, match=r"inputs\[3, 1\] is the zero vector"):
        memorizing_transformer(zero, torch.zeros(7, 3))
    with pytest.raises(ValueError, match="labels must have shape"):
        memorizing_transformer(inputs, torch.zeros(7, 2))
    with pytest.raises(ValueError, match="inputs must have 3 dims"):
        memorizing_transformer(inputs[0], torch.zeros(3))
    with pytest.raises(TypeError, match="allow_duplicates must be a bool"):
        memorizing_transformer(inputs, torch.zeros(7, 3), allow_duplicates=1)
    nan = inputs.clone()
    nan[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="inputs must be finite"):
        memorizing_transformer(nan, torch.zeros(7, 3))


def test_approximator_and_data_builders_reject_bad_input():
    with pytest.raises(ValueError, match="grid must be >= 1"):
        quantizer(0, 1)
    with pytest.raises(ValueError, match="ramp must be < 1/grid"):
        quantizer(4, 1, ramp=0.5)
    with pytest.raises(TypeError, match="f must be callable"):
        equivariant_approximator(3.0, 2, 1, 4)
    with pytest.raises(ValueError, match=r"f must map a \(B, 2, 1\) tensor to shape \(B, 2\)"):
        equivariant_approximator(lambda X: X.sum(-1).sum(-1), 2, 1, 4)
    with pytest.raises(ValueError, match="more than max_sequences=10"):
        equivariant_approximator(memorization.equivariant_target, 2, 1, 8, max_sequences=10)
    with pytest.raises(ValueError, match="inconsistent labels"):
        equivariant_approximator(lambda X: X[..., 0] * torch.arange(2.0), 2, 1, 4)
    with pytest.raises(ValueError, match="seq_len must be <= vocab_size=3"):
        labelled_sequences(5, 4, 2, 3, 2)
