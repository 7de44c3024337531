"""Mutants and bad input for the approximation area (single-layer universality, virtual node,
NTK-attention prefix, DeepNorm, momentum streams, the polynomial method, algebra ranks,
SeqCond Attention)."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from killed import failed_assertion

from constructions.algebra_rank import (
    crt_algorithm,
    f2_rank_exceeds,
    matrix_structure_tensor,
    polynomial_structure_tensor,
    strassen_algorithm,
)
from constructions.deepnorm import deepnorm_constants, deepnorm_formulas, update_budget
from constructions.equivariance import lift_positions
from constructions.momentum_streams import momentum_stream, second_order_stream, tied_attention
from constructions.polynomial_method import multi_indices
from constructions.prefix_attention import (
    NTKAttention,
    kernel_attention,
    ntk_attention,
    prefix_decomposition,
    prefix_summary,
    softmax_attention,
)
from constructions.seqcond import sca_state
from constructions.universality import copy_first_token, random_single_layer
from constructions.virtual_node import (
    VirtualNodeRound,
    apply_feature_map,
    matching_linear_attention,
    virtual_node_round,
)
from empirics.deepnorm import deepnorm_stack
from empirics.universality import target as probe_target
from theorems.areas.approximation import algebra_rank as ar
from theorems.areas.approximation import deepnorm as dn
from theorems.areas.approximation import momentum_streams as ms
from theorems.areas.approximation import polynomial_method as pm
from theorems.areas.approximation import prefix_attention as px
from theorems.areas.approximation import seqcond as sc
from theorems.areas.approximation import universality as ua
from theorems.areas.approximation import virtual_node as vn
from theorems.evidence import expect_failure

# --- universality --------------------------------------------------------------------------


def positioned_layer(d, **kwargs):
    """A random layer that sees positions (the lift): no longer permutation-equivariant."""
    return random_single_layer(d, positions=2.0, **kwargs)


@pytest.mark.mutant("approximation.equivariance-lower-bound")
def test_a_positional_encoding_breaks_equivariance():
    expect_failure(ua.lower_bound_check(build=positioned_layer))


@pytest.mark.mutant("approximation.equivariance-lower-bound")
def test_a_causal_mask_breaks_equivariance():
    expect_failure(ua.lower_bound_check(build=partial(random_single_layer, causal=True)))


@pytest.mark.mutant("approximation.equivariance-lower-bound")
@pytest.mark.parametrize("layer_class", [ua.LayerClass(positions=True),
                                         ua.LayerClass(causal=True)], ids=["positions", "causal"])
def test_the_generic_layer_with_positions_or_a_mask_is_not_equivariant(layer_class):
    report = expect_failure(ua.equivariance_symbolic_check(layer_class))
    assert "the generic layer's difference is" in report


@pytest.mark.mutant("approximation.single-layer-universal")
@pytest.mark.parametrize("layer_class", [ua.LayerClass(positions=True),
                                         ua.LayerClass(causal=True)], ids=["positions", "causal"])
def test_the_refutation_fails_once_the_lemma_fails(layer_class):
    # with positions or a causal mask T(X')_2 = T(X)_1 no longer follows: the lemma step fails
    report = expect_failure(ua.refutation(layer_class))
    assert "does not follow for every layer" in report


@pytest.mark.mutant("approximation.single-layer-universal")
def test_the_refutation_fails_for_a_target_one_layer_computes():
    # g(X) = X is computed exactly by a layer with zero attention and FFN; its targets on the
    # pinned pair agree (g(X)_1 = g(X')_2 = 1), so the exact step must find a common value
    report = expect_failure(ua.refutation(target=lambda x: x))
    assert "within eps = 0.25 of both targets" in report


@pytest.mark.mutant("approximation.positional-copy")
def test_reading_the_wrong_position_breaks_the_copy():
    expect_failure(ua.copy_check(build=partial(copy_first_token, source=1)))


@pytest.mark.training
@pytest.mark.mutant("approximation.trained-positional-probe")
def test_the_probe_without_positions_cannot_beat_the_bound():
    report = expect_failure(ua.probe_check(positions=[False]))
    assert "nope/w32/sup_error" in report and "is not below 0.5" in report


def test_probe_target_rejects_bad_input():
    with pytest.raises(ValueError, match="target must be one of"):
        probe_target("shift", torch.zeros(1, 2, 1))


def test_lift_positions_rejects_bad_input():
    with pytest.raises(TypeError, match="x must be a torch"):
        lift_positions([1.0, 2.0])
    with pytest.raises(ValueError, match="x must have shape"):
        lift_positions(torch.ones(3))
    with pytest.raises(ValueError, match="scale must be finite"):
        lift_positions(torch.ones(2, 3), float("nan"))


def test_single_layer_builders_reject_bad_input():
    with pytest.raises(TypeError, match="d must be an int"):
        random_single_layer(1.5)
    with pytest.raises(ValueError, match="max_len must be given"):
        random_single_layer(2, positions=1.0)
    with pytest.raises(ValueError, match="positions must be finite and > 0"):
        random_single_layer(2, positions=-1.0, max_len=3)
    with pytest.raises(ValueError, match="source must be < max_len"):
        copy_first_token(2, 3, source=3)
    with pytest.raises(ValueError, match="max_len must be >= 2"):
        copy_first_token(2, 1)
    with pytest.raises(ValueError, match="beta must be finite and > 0"):
        copy_first_token(2, 3, beta=0.0)
    model = copy_first_token(2, 3)
    with pytest.raises(ValueError, match="x must have width 2"):
        model(torch.zeros(1, 3, 5))
    with pytest.raises(ValueError, match="x must have 3 tokens"):
        model(torch.zeros(1, 4, 2))
    with pytest.raises(ValueError, match="x must have 3 dims"):
        model(torch.zeros(3, 2))


# --- virtual node --------------------------------------------------------------------------


class MeanNormalisedRound(VirtualNodeRound):
    """The virtual node divides by the node count n instead of phi(q)^T z."""

    def aggregate(self, phi_q, phi_k, v):
        return phi_q @ (phi_k.transpose(-1, -2) @ v) / phi_k.shape[-2]


def mean_normalised_round(d, d_v, r, *, feature_map="exp", seed=0):
    base = virtual_node_round(d, d_v, r, feature_map=feature_map, seed=seed)
    return MeanNormalisedRound(base.W_Q, base.W_K, base.W_V, base.W_phi, feature_map)


@pytest.mark.mutant("approximation.virtual-node-linear-attention")
def test_a_wrong_normaliser_breaks_the_identity():
    expect_failure(vn.edge_free_check(build=mean_normalised_round))


@pytest.mark.mutant("approximation.virtual-node-linear-attention")
def test_local_messages_break_edge_invariance():
    expect_failure(vn.edge_free_check(local_weight=0.5))


@pytest.mark.mutant("approximation.virtual-node-linear-attention")
def test_a_feature_map_that_can_be_negative_lets_the_denominator_vanish():
    report = expect_failure(vn.edge_free_check(feature_maps=("identity",)))
    assert "'seed': -1" in report  # the pinned X = (1, -1), where phi(q)^T z = 0


def test_virtual_node_builders_reject_bad_input():
    with pytest.raises(ValueError, match="feature_map must be one of"):
        virtual_node_round(2, 2, 3, feature_map="relu")
    with pytest.raises(ValueError, match="r must be >= 1"):
        matching_linear_attention(2, 2, 0)
    with pytest.raises(TypeError, match="local_weight must be a real number"):
        virtual_node_round(2, 2, 3, local_weight="0")
    with pytest.raises(ValueError, match="feature_map must be one of"):
        apply_feature_map("tanh", torch.zeros(2), torch.zeros(2, 2))
    model = virtual_node_round(2, 2, 3)
    with pytest.raises(ValueError, match="x must have width 2"):
        model(torch.zeros(1, 4, 3), torch.zeros(1, 4, 4))
    with pytest.raises(ValueError, match="adjacency must have shape"):
        model(torch.zeros(1, 4, 2), torch.zeros(1, 4, 3))
    with pytest.raises(ValueError, match="W_K must have shape"):
        VirtualNodeRound(torch.zeros(2, 2), torch.zeros(3, 2), torch.zeros(2, 2),
                         torch.zeros(2, 3), "exp")


# --- NTK-attention prefix --------------------------------------------------------------------


def count_mixture(q, K_P, V_P, K_X, V_X, scale, multiplicity=1.0):
    """Mixes prefix and input attention by token counts, m/(m+n), instead of Z_P/(Z_P+Z_X)."""
    parts = prefix_decomposition(q, K_P, V_P, K_X, V_X, scale, multiplicity=multiplicity)
    m, n = multiplicity * K_P.shape[1], K_X.shape[1]
    lam = torch.full_like(parts["lam"], m / (m + n))
    return {**parts, "lam": lam, "output": lam * parts["prefix"] + (1 - lam) * parts["input"]}


@pytest.mark.mutant("approximation.prefix-decomposition")
def test_mixing_by_token_counts_breaks_the_decomposition():
    expect_failure(px.decomposition_check(decompose=count_mixture))


@pytest.mark.mutant("approximation.prefix-decomposition")
def test_a_swapped_lambda_breaks_the_symbolic_identity():
    report = expect_failure(px.symbolic_decomposition(lam=lambda zp, zx: zx / (zp + zx)))
    assert "LHS - RHS" in report and "not 0" in report


def summary_without_kappa(K_P, V_P, *, scale, c):
    """The prefix summary missing its d-term: Z only, no partition vector kappa."""
    Z, kappa = prefix_summary(K_P, V_P, scale=scale, c=c)
    return NTKAttention(Z, torch.zeros_like(kappa), scale=scale, c=c)


@pytest.mark.mutant("approximation.prefix-finite-summary")
def test_a_summary_without_its_partition_term_breaks_exactness():
    expect_failure(px.finite_summary_check(build=summary_without_kappa))


def one_copy_decomposition(q, K_P, V_P, K_X, V_X, scale, multiplicity=1.0):
    """Ignores the multiplicity: treats t copies of the block as one."""
    return prefix_decomposition(q, K_P, V_P, K_X, V_X, scale)


@pytest.mark.mutant("approximation.prefix-limit")
def test_ignoring_the_prefix_multiplicity_breaks_the_limit():
    expect_failure(px.limit_check(decompose=one_copy_decomposition))


def test_prefix_functions_reject_bad_input():
    q, K, V = torch.zeros(1, 2, 3), torch.zeros(1, 4, 3), torch.zeros(1, 4, 2)
    with pytest.raises(ValueError, match="K must have shape"):
        softmax_attention(q, torch.zeros(1, 4, 2), V, 1.0)
    with pytest.raises(ValueError, match="V must have shape"):
        softmax_attention(q, K, torch.zeros(1, 5, 2), 1.0)
    with pytest.raises(ValueError, match="K must hold at least one key"):
        softmax_attention(q, torch.zeros(1, 0, 3), torch.zeros(1, 0, 2), 1.0)
    with pytest.raises(ValueError, match="kernel must be one of"):
        kernel_attention(q, K, V, kernel="cos")
    with pytest.raises(ValueError, match="multiplicity must be finite and > 0"):
        prefix_decomposition(q, K, V, K, V, 1.0, multiplicity=0)
    with pytest.raises(ValueError, match="c must be finite and > 0"):
        ntk_attention(torch.zeros(4, 3), torch.zeros(4, 2), c=0.0)
    with pytest.raises(ValueError, match="scale must be finite and > 0"):
        NTKAttention(torch.zeros(13, 2), torch.zeros(13), scale=-1.0)
    with pytest.raises(ValueError, match="kappa must have shape"):
        NTKAttention(torch.zeros(13, 2), torch.zeros(3))
    model = ntk_attention(torch.zeros(4, 3), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="Z must have 7 rows"):
        model(torch.zeros(1, 2, 2), torch.zeros(1, 4, 2), V)
    with pytest.raises(ValueError, match="V must have width 2"):
        model(q, K, torch.zeros(1, 4, 5))


# --- DeepNorm --------------------------------------------------------------------------------


def beta_off_by_sqrt2(kind, n_layers, m_layers=None, *, root=None, number=float):
    """DeepNorm's formulas with beta multiplied by sqrt(2): the budget becomes 2."""
    kwargs = {} if root is None else {"root": root}
    alpha, beta = deepnorm_formulas(kind, n_layers, m_layers, number=number, **kwargs)
    return alpha, beta * (math.sqrt(2) if root is None else root(2, 2))


@pytest.mark.mutant("approximation.deepnorm-budget")
def test_beta_off_by_sqrt2_breaks_the_symbolic_budget():
    report = expect_failure(dn.budget_symbolic_check(formulas=beta_off_by_sqrt2))
    assert "L (v^2 + w^2) / alpha^2 = 2, not 1" in report


@pytest.mark.mutant("approximation.deepnorm-budget")
def test_beta_off_by_sqrt2_breaks_the_float_budget():
    report = expect_failure(dn.budget_float_check(formulas=beta_off_by_sqrt2,
                                                  depths=range(1, 4)))
    assert "|budget - 1| = 1 exceeds gamma_16" in report


@pytest.mark.training
@pytest.mark.mutant("approximation.deepnorm-update-flat")
def test_a_depth_independent_beta_lets_the_update_grow():
    # alpha = (2N)^{1/4} with beta fixed at 0.5: the budget grows as sqrt(2N); the DeepNorm
    # slope is about 0.51 (SE 0.02), its interval wholly above the band's upper end 0.2
    report = expect_failure(dn.update_check(beta=0.5))
    assert "DeepNorm: step 1's update has log-log slope" in report


@pytest.mark.training
@pytest.mark.mutant("approximation.deepnorm-update-flat")
def test_a_flat_architecture_in_place_of_post_ln_does_not_grow():
    # DeepNorm held to Post-LN's growth: its slope (about -0.05, SE 0.02) lies wholly below 0.5
    report = expect_failure(dn.update_check(contrast="deepnorm"))
    assert "deepnorm: step 1's update has slope" in report


def test_deepnorm_constants_reject_bad_input():
    with pytest.raises(ValueError, match="kind must be one of"):
        deepnorm_constants("transformer", 4)
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        deepnorm_constants("decoder", 0)
    with pytest.raises(TypeError, match="n_layers must be an int"):
        deepnorm_constants("decoder", 4.0)
    with pytest.raises(ValueError, match="m_layers must be given"):
        deepnorm_constants("encoder-decoder/decoder", 6)
    with pytest.raises(ValueError, match=r"kind must be one of .* for a budget"):
        update_budget("encoder-decoder/encoder", 6, 6)
    with pytest.raises(ValueError, match="arch must be one of"):
        deepnorm_stack("sandwich", 2, 8)
    with pytest.raises(ValueError, match="d must be >= 2"):
        deepnorm_stack("post", 2, 1)
    with pytest.raises(ValueError, match="beta must be finite and > 0"):
        deepnorm_stack("deepnorm", 2, 8, beta=-1.0)


def test_deepnorm_constants_match_the_code():
    # torchscale: decoder-only alpha = (2N)^0.25, init_scale = (8N)^0.25; encoder-decoder
    # decoder (3M)^0.25, (12M)^0.25; its encoder 0.81 (N^4 M)^0.0625, (N^4 M)^0.0625 / 1.15.
    # The code's operations (math.pow, then 1/init_scale) on the same floats as ours (x ** k
    # calls the same C pow), so the results are bit-identical.
    assert deepnorm_constants("decoder", 6) == (math.pow(12, 0.25), 1 / math.pow(48, 0.25))
    assert deepnorm_constants("encoder-decoder/decoder", 12, 6) == (
        math.pow(18, 0.25), 1 / math.pow(72, 0.25))
    scale = math.pow(12**4 * 6, 0.0625)
    assert deepnorm_constants("encoder-decoder/encoder", 12, 6) == (0.81 * scale,
                                                                    1 / (scale / 1.15))


# --- valid example arguments for tests/test_public_api.py ---------------------------------------

def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _qkv_example(**extra) -> dict:
    return {"q": _rand(1, 2, 3), "K": _rand(1, 4, 3, seed=1), "V": _rand(1, 4, 2, seed=2),
            **extra}


def _prefix_example() -> dict:
    return {"K_P": _rand(3, 2), "V_P": _rand(3, 2, seed=1)}


def _phi_example() -> dict:
    return {"phi_q": _rand(1, 3, 2).exp(), "phi_k": _rand(1, 3, 2, seed=1).exp(),
            "v": _rand(1, 3, 2, seed=2)}


PUBLIC_API_EXAMPLES = {
    "deepnorm.deepnorm_constants": lambda: {"kind": "encoder", "n_layers": 4},
    "deepnorm.deepnorm_formulas": lambda: {"kind": "encoder", "n_layers": 4},
    "deepnorm.update_budget": lambda: {"kind": "encoder", "n_layers": 4},
    "equivariance.lift_positions": lambda: {"x": _rand(1, 3, 2)},
    "prefix_attention.kernel_attention": _qkv_example,
    "prefix_attention.ntk_attention": _prefix_example,
    "prefix_attention.prefix_decomposition": lambda: {
        "q": _rand(1, 2, 3), "K_P": _rand(1, 2, 3, seed=1), "V_P": _rand(1, 2, 2, seed=2),
        "K_X": _rand(1, 4, 3, seed=3), "V_X": _rand(1, 4, 2, seed=4), "scale": 0.5},
    "prefix_attention.prefix_summary": _prefix_example,
    "prefix_attention.softmax_attention": lambda: _qkv_example(scale=0.5),
    "universality.copy_first_target": lambda: {"x": _rand(1, 3, 2)},
    "virtual_node.apply_feature_map": lambda: {"kind": "exp", "y": _rand(1, 3, 2),
                                               "W_phi": _rand(2, 4, seed=1)},
    "virtual_node.linear_attention": _phi_example,
    "virtual_node.virtual_node_aggregate": _phi_example,
}
PUBLIC_API_EXAMPLES["deepnorm.sublayers"] = lambda: {"kind": "encoder", "n_layers": 4}
PUBLIC_API_ACCEPTED = {
    # a width (d_v, r, d, or the token dim) is free: one longer is as valid
    **{(f, p): ("mismatched",) for f, p in [
        ("prefix_attention.kernel_attention", "V"), ("prefix_attention.softmax_attention", "V"),
        ("prefix_attention.ntk_attention", "K_P"), ("prefix_attention.ntk_attention", "V_P"),
        ("prefix_attention.prefix_summary", "K_P"), ("prefix_attention.prefix_summary", "V_P"),
        ("virtual_node.apply_feature_map", "W_phi"), ("virtual_node.linear_attention", "v"),
        ("virtual_node.virtual_node_aggregate", "v"), ("equivariance.lift_positions", "x"),
        ("universality.copy_first_target", "x")]},
    ("universality.copy_first_token", "source"): ("zero",),  # position 0: the first token
    ("universality.random_single_layer", "scratch"): ("zero",),  # no scratch coordinates
    ("universality.random_single_layer", "seed"): ("zero",),  # the seed 0
    ("virtual_node.virtual_node_round", "seed"): ("zero",),
    ("virtual_node.matching_linear_attention", "seed"): ("zero",),
}


# --- momentum streams (Gai, Huang, Wu 2026) -----------------------------------------------------

def values_twice_the_keys(x, keys, beta):
    """Attention whose values are 2 k_i, not k_i: twice the gradient, so not it."""
    return 2 * tied_attention(x, keys, beta)


def untied_mlp(x, W, b):
    """Output weights W^T with W's rows reversed: not the transpose of the input weights."""
    return torch.relu(x @ W.T + b) @ W.flip(0)


def damped_force_stream(x0, layers, mu):
    """v_{l+1} = mu (v_l + F_l(x_l)): the force damped with the velocity, not heavy ball."""
    states, velocity = [x0], 0 * x0
    for layer in layers:
        velocity = mu * (velocity + layer(states[-1]))
        states.append(states[-1] + velocity)
    return states


@pytest.mark.mutant("approximation.tied-sublayers-are-gradients")
def test_values_unlike_the_keys_are_not_the_energy_gradient():
    expect_failure(ms.attention_gradient_check(attention=values_twice_the_keys))


@pytest.mark.mutant("approximation.tied-sublayers-are-gradients")
def test_an_untied_mlp_is_not_the_energy_gradient():
    expect_failure(ms.mlp_gradient_check(mlp=untied_mlp))


@pytest.mark.mutant("approximation.momentum-stream-filter")
def test_a_damped_force_is_not_the_second_order_recursion():
    expect_failure(ms.two_forms_check(stream=damped_force_stream))


@pytest.mark.mutant("approximation.momentum-stream-filter")
def test_weights_without_the_geometric_sum_do_not_filter():
    expect_failure(ms.filter_check(
        weights=lambda n_layers, mu: [mu ** (n_layers - 1 - l) for l in range(n_layers)]))


def test_momentum_streams_reject_bad_layers():
    with pytest.raises(TypeError, match=r"^layers\[1\] must be callable"):
        momentum_stream(torch.zeros(2), [lambda x: x, 3], 0.5)
    with pytest.raises(ValueError, match=r"^layers\[0\] must return a tensor of the state's"):
        second_order_stream(torch.zeros(2), [lambda x: x[:1]], 0.5)


def _stream_example() -> dict:
    return {"x0": _rand(2, 3), "layers": [lambda x: 0.5 * x, lambda x: -x], "mu": 0.5}


PUBLIC_API_EXAMPLES.update({
    "momentum_streams.tied_attention": lambda: {"x": _rand(2, 3), "keys": _rand(4, 3, seed=1),
                                                "beta": 2.0},
    "momentum_streams.hopfield_energy": lambda: {"x": _rand(2, 3), "keys": _rand(4, 3, seed=1),
                                                 "beta": 2.0},
    "momentum_streams.tied_mlp": lambda: {"x": _rand(2, 3), "W": _rand(4, 3, seed=1),
                                          "b": _rand(4, seed=2)},
    "momentum_streams.mlp_energy": lambda: {"x": _rand(2, 3), "W": _rand(4, 3, seed=1),
                                            "b": _rand(4, seed=2)},
    "momentum_streams.momentum_stream": _stream_example,
    "momentum_streams.second_order_stream": _stream_example,
    "momentum_streams.filter_weights": lambda: {"n_layers": 3, "mu": 0.5},
})
PUBLIC_API_ACCEPTED.update({
    # the layers act elementwise here, so a state of any shape (a scalar, a wider one) is valid
    **{(f"momentum_streams.{f}", "x0"): ("0-d", "mismatched")
       for f in ("momentum_stream", "second_order_stream")},
})


# --- the polynomial method (Liang, Sha, Shi, Song, Zhou 2024) ------------------------------------

def factors_without_the_multinomial(Q, K, degree):
    """U scaled by g!/|alpha|! instead of g!/alpha!: the multinomial coefficients dropped."""
    indices = multi_indices(Q.shape[1], degree)
    powers = torch.tensor(indices, dtype=torch.int64)
    scale = torch.tensor([math.factorial(degree) // math.factorial(sum(a)) for a in indices])
    monomials = [torch.prod(X[:, None, :] ** powers[None], dim=-1) for X in (Q, K)]
    return monomials[0] * scale, monomials[1]


@pytest.mark.mutant("approximation.taylor-attention-low-rank")
def test_features_without_multinomial_weights_do_not_factor_the_truncation():
    report = failed_assertion(pm.factorisation_check(factors=factors_without_the_multinomial))
    assert "the factorisation is wrong" in report


@pytest.mark.mutant("approximation.taylor-attention-low-rank")
def test_the_remainder_bound_without_its_exponential_fails():
    expect_failure(pm.truncation_error_check(
        bound=lambda B, degree: B ** (degree + 1) / math.factorial(degree + 1)))


PUBLIC_API_EXAMPLES.update({
    "polynomial_method.multi_indices": lambda: {"d": 2, "degree": 3},
    "polynomial_method.taylor_factors": lambda: {"Q": _rand(3, 2), "K": _rand(4, 2, seed=1),
                                                 "degree": 2},
    "polynomial_method.integer_taylor_factors": lambda: {
        "Q": torch.tensor([[1, -2], [0, 3]]), "K": torch.tensor([[2, 1], [-1, 1]]),
        "degree": 2},
    "polynomial_method.integer_taylor_matrix": lambda: {
        "Q": torch.tensor([[1, -2], [0, 3]]), "K": torch.tensor([[2, 1], [-1, 1]]),
        "degree": 2},
    "polynomial_method.taylor_error_bound": lambda: {"B": 1.5, "degree": 2},
})
PUBLIC_API_ACCEPTED.update({
    # degree 0 is the constant truncation P_0 = 1 (one feature)
    **{(f"polynomial_method.{f}", "degree"): ("zero",)
       for f in ("multi_indices", "taylor_factors", "integer_taylor_factors",
                 "integer_taylor_matrix", "taylor_error_bound")},
})


# --- the associative-algebra product: Alder-Strassen ---------------------------------------------

def strassen_with_a_sign_flipped():
    """Strassen's products with the first output's sign flipped in product 7."""
    triples = strassen_algorithm()
    u, v, w = triples[-1]
    triples[-1] = (u, v, [-w[0], *w[1:]])
    return triples


@pytest.mark.mutant("approximation.algebra-minimal-rank")
def test_ignoring_multiplicities_breaks_the_algebra_algorithm():
    report = failed_assertion(ar.crt_check(
        algorithm=lambda factors: crt_algorithm([(p, 1) for p, _ in factors])))
    assert "not 2n - t" in report


@pytest.mark.mutant("approximation.algebra-minimal-rank")
def test_a_sign_error_breaks_strassen():
    report = failed_assertion(ar.strassen_check(algorithm=strassen_with_a_sign_flipped))
    assert "does not compute the 2 x 2 matrix product" in report


@pytest.mark.mutant("approximation.algebra-minimal-rank")
def test_an_overreaching_search_finds_ranks_below_the_bound():
    report = failed_assertion(ar.f2_bound_check(
        exceeds=lambda T, r: f2_rank_exceeds(T, min(r + 1, 4))))
    assert "below the Alder-Strassen bound" in report


def test_algebra_constructions_reject_bad_input():
    with pytest.raises(ValueError, match=r"^f must be monic"):
        polynomial_structure_tensor([1, 2])
    with pytest.raises(ValueError, match=r"^factors must be pairwise coprime"):
        crt_algorithm([((1, 1), 1), ((1, 1), 1)])
    with pytest.raises(ValueError, match=r"^T must have side n <= 3"):
        f2_rank_exceeds(matrix_structure_tensor(2), 2)


PUBLIC_API_EXAMPLES.update({
    "algebra_rank.polynomial_structure_tensor": lambda: {"f": [1, 0, 1]},
    "algebra_rank.crt_algorithm": lambda: {"factors": [((1, 1), 1), ((-1, 1), 2)]},
    "algebra_rank.matrix_structure_tensor": lambda: {"m": 2},
    "algebra_rank.tensor_of": lambda: {"algorithm": strassen_algorithm(), "n": 4},
    "algebra_rank.f2_rank_exceeds": lambda: {"T": polynomial_structure_tensor([0, 0, 1]),
                                             "r": 2},
})
PUBLIC_API_ACCEPTED.update({
    ("algebra_rank.f2_rank_exceeds", "r"): ("zero",),  # rank above 0: the tensor is nonzero
})


@pytest.mark.mutant("approximation.algebra-minimal-rank")
def test_a_search_that_never_reaches_misses_the_exact_ranks():
    report = failed_assertion(ar.f2_bound_check(exceeds=lambda T, r: True))
    assert "rank above the bound" in report


# --- SeqCond Attention (Nautile-370M) ------------------------------------------------------------

def unnormalised_state(keys, weights, thetas, phase_scale=1.0):
    """The summary without its division by sum_j p_j: sum_j p_j k_j e^{i theta u_j}."""
    return sca_state(keys, weights, thetas, phase_scale) * weights.cumsum(0)[:, None]


@pytest.mark.mutant("approximation.seqcond-prefix-retrieval")
def test_an_unnormalised_summary_retrieves_the_wrong_value():
    report = failed_assertion(sc.retrieval_check(state=unnormalised_state))
    assert "not p k / sum p" in report


@pytest.mark.mutant("approximation.seqcond-prefix-retrieval")
def test_three_points_can_isolate_one_of_three_keys():
    report = failed_assertion(sc.isolation_check(num_thetas=3))
    assert "a readout can isolate key" in report


def _sca_example() -> dict:
    return {"keys": torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64),
            "weights": torch.tensor([1.0, 0.1, 3.0], dtype=torch.float64),
            "thetas": torch.tensor([1.0, 3.0], dtype=torch.float64)}


PUBLIC_API_EXAMPLES.update({
    "seqcond.sca_phases": lambda: {"keys": _rand(3)},
    "seqcond.spectral_matrix": lambda: {"phases": torch.tensor([-0.5, 0.2], dtype=torch.float64),
                                        "thetas": torch.tensor([1.0, 3.0],
                                                               dtype=torch.float64)},
    "seqcond.sca_state": _sca_example,
    "seqcond.sca_readout": lambda: {
        "state": sca_state(**_sca_example()),
        "coefficients": torch.tensor([1.0 + 1.0j, -0.5j], dtype=torch.complex128)},
})
PUBLIC_API_ACCEPTED.update({
    # the number of tokens t and of spectral points M are free: one more is as valid
    ("seqcond.sca_phases", "keys"): ("mismatched",),
    ("seqcond.spectral_matrix", "phases"): ("mismatched",),
    ("seqcond.spectral_matrix", "thetas"): ("mismatched",),
    ("seqcond.sca_state", "thetas"): ("mismatched",),
})
