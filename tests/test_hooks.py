"""Hook points (``constructions/layers.py``): named identity submodules at every intermediate a
circuit tool reads or patches, reached by ``register_forward_hook`` and by nnsight.

The hook points return their input itself, so attaching them changes no output by a bit; the
one rewritten operation, the attention output, is split into the two contractions that
``torch.einsum`` already made (``test_attention_is_bit_identical_to_the_fused_contraction``).
The nnsight tests read, ablate and patch through the hook points and assert what the
construction's own math predicts. They need nnsight (the ``interop`` extra), and skip without
it, saying so (under ``THEOREMS_REQUIRE_EXTRAS`` they fail instead).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from interop_support import required
from torch import nn

from constructions import bigram_backcopy as bb
from constructions import boltzmann as bz
from constructions import fact_codes as fc
from constructions import spatial_induction as sih
from constructions.ar_mesa import ar_mesa_layer, context_gram, tokens
from constructions.bilinear import bilinear_layer
from constructions.cot2 import CoT2Layer, cot2_layer
from constructions.dyck import depth_trace_head
from constructions.fact_mlps import encoder_decoder_mlp, linear_associative_memory
from constructions.fact_shared_route import shared_route_mlp
from constructions.grokking_lazy_rich import quadratic_net
from constructions.hopfield import hopfield_update
from constructions.icdl import ReluAttention, icdl_transformer
from constructions.icl_logistic import looped_ngd, softmax_update
from constructions.icl_regression import cot_prompt, multi_step_gd, von_oswald
from constructions.icl_regression.lifted import key_moment_unchecked
from constructions.induction_heads import compact_induction, two_layer_induction
from constructions.layernorm import majority_head
from constructions.layers import MLP, Attention, HookPoint, Residual
from constructions.power_method import looped_power_transformer, normalize_columns
from constructions.prefix_attention import NTKAttention, ntk_attention
from constructions.prenorm_gradients import mean_field_transformer
from constructions.virtual_node import (
    apply_feature_map,
    linear_attention,
    matching_linear_attention,
    virtual_node_aggregate,
    virtual_node_round,
)
from theorems.evidence import expect_failure
from theorems.profiles import budget, without_shrinking
from theorems.strategies import seeds

F64 = torch.float64


def _gaussian(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def fused_attention(layer: Attention, x: torch.Tensor) -> torch.Tensor:
    """The attention output as it was computed before the hook points: one fused
    ``einsum("bhij,bhjv,hvo->bio")``."""
    pattern = layer.pattern(x)
    values = torch.einsum("bnd,hdv->bhnv", x, layer.W_V)
    return torch.einsum("bhij,bhjv,hvo->bio", pattern, values, layer.W_O)


def hooked_attention_check(attention=Attention, config=None):
    """``Attention(x)`` equals the fused contraction bit for bit, for every kind and mask."""
    @(config or budget(0.5))
    @given(heads=st.integers(1, 3), d=st.integers(1, 6), k=st.integers(1, 4),
           v=st.integers(1, 4), out=st.integers(1, 5), n=st.integers(1, 7),
           batch=st.integers(1, 3), kind=st.sampled_from(["softmax", "hardmax", "linear"]),
           causal=st.booleans(), seed=seeds())
    def run(heads, d, k, v, out, n, batch, kind, causal, seed):
        layer = attention(_gaussian(seed, heads, d, k), _gaussian(seed + 1, heads, d, k),
                          _gaussian(seed + 2, heads, d, v), _gaussian(seed + 3, heads, v, out),
                          kind=kind, causal=causal, scale=1 / math.sqrt(k))
        x = _gaussian(seed + 4, batch, n, d)
        with torch.no_grad():
            theirs, ours = layer(x), fused_attention(layer, x)
        # bit for bit (NaN-free: finite Gaussian weights): the same two pairwise contractions
        # in the same order, and identity hook points between them
        assert torch.equal(theirs, ours), float((theirs - ours).abs().max())
    return run


@pytest.mark.skipif(torch.backends.opt_einsum.is_available() and torch.backends.opt_einsum.enabled,
                    reason="with opt_einsum, torch.einsum may contract in another order")
def test_attention_is_bit_identical_to_the_fused_contraction():
    hooked_attention_check()()


class ValueFirst(Attention):
    """Mutant: contracts the values with W_O before the pattern (another summation order)."""

    def forward(self, x, *, return_pattern=False):
        pattern = self.pattern(x)
        vo = torch.einsum("bnd,hdv,hvo->bhno", x, self.W_V, self.W_O)
        return torch.einsum("bhij,bhjo->bio", pattern, vo)


def test_another_summation_order_fails_the_bit_identity():
    expect_failure(hooked_attention_check(ValueFirst, config=without_shrinking(
        max_examples=budget(0.5).max_examples)))


# --- every hook point is an identity on every construction ---------------------------------------

def _constructions() -> dict[str, tuple[nn.Module, Callable[[nn.Module], torch.Tensor]]]:
    """Constructions with hook points, each with a call on an example input."""
    tokens = torch.tensor([[0, 1, 2, 0, 1], [2, 2, 1, 0, 0]])
    memorizer = bz.memorizing_transformer(*bz.labelled_sequences(8, 3, 4, 10, 2))
    X = normalize_columns(_gaussian(0, 2, 3, 4))
    a = _gaussian(1, 2, 3)
    mlp = MLP(_gaussian(5, 4, 6), _gaussian(6, 6), _gaussian(7, 6, 4), _gaussian(8, 4))

    def on(x):
        return lambda model: model(x)
    X_gd, w_gd = _gaussian(10, 2, 5, 3), _gaussian(11, 2, 3)
    X_ngd = _gaussian(12, 2, 6, 3)
    y_ngd = torch.where(X_ngd[..., 0] >= 0, 1.0, -1.0).to(F64)
    facts = {"keys": _gaussian(13, 4, 3), "values": torch.eye(3, dtype=F64),
             "facts": torch.tensor([0, 1, 2, 0])}
    bigram = bb.BigramBackcopy(bb.dirichlet_bigrams(6, 1.0, np.random.default_rng(0)), 2)
    bigram_tokens = bigram.sample(2, 7, np.random.default_rng(1))
    adjacency = (_gaussian(22, 2, 5, 5) > 0).to(F64)
    icdl_problem = (_gaussian(23, 3, 2), _gaussian(24, 3), _gaussian(25, 2, 2), _gaussian(26, 2))
    ntk = (_gaussian(28, 2, 3, 3), _gaussian(29, 2, 4, 3), _gaussian(30, 2, 4, 2))
    fact_keys, fact_values = _gaussian(31, 12, 4), torch.eye(3, dtype=F64)
    fact_ids = torch.arange(12) % 3
    automaton = sih.CellularAutomaton(dim=1, side=5, n_states=2, offsets=sih.neighbourhood(1))
    cells = automaton.flatten(automaton.sample(automaton.sample_rules(
        2, np.random.default_rng(0)), 3, np.random.default_rng(1)))[:, :13]
    return {
        "ntk_attention_poly2": (ntk_attention(_gaussian(32, 5, 3), _gaussian(33, 5, 2),
                                              scale=0.5, c=1.5), lambda model: model(*ntk)),
        "ntk_attention_exp": (NTKAttention(_gaussian(34, 3, 2), _gaussian(35, 3), kernel="exp",
                                           scale=0.5), lambda model: model(*ntk)),
        "multi_bucket_mlp": (fc.multi_bucket_mlp(fact_keys, fact_values, fact_ids),
                             on(fact_keys)),
        "scalar_code_mlp": (fc.scalar_code_mlp(fact_keys, fact_values, fact_ids),
                            on(fact_keys)),
        "shared_route_mlp": (shared_route_mlp(fact_keys, fact_values, fact_ids,
                                              cells=(fact_values, fact_values)), on(fact_keys)),
        "spatial_induction": (sih.spatial_induction_circuit(automaton, 15), on(cells)),
        "cot2": (cot2_layer(3), lambda model: torch.cat(
            [t.reshape(-1) for t in model.rollout((3, 1, 2))])),
        "icdl_transformer": (icdl_transformer(3, 2, 2, 1, 0.1), lambda model: torch.cat(
            [t.reshape(-1) for t in model(*icdl_problem)])),
        "quadratic_net": (quadratic_net(4, 6, seed=1), on(_gaussian(27, 3, 4))),
        "depth_trace_head": (depth_trace_head(2, 8), on(torch.tensor([[0, 1, 3, 2, 2, 0]]))),
        "active_dormant_head": (bb.active_dormant_model(bigram, 8), on(bigram_tokens)),
        "linear_attention": (matching_linear_attention(4, 3, 5), on(_gaussian(20, 2, 5, 4))),
        "virtual_node_round": (virtual_node_round(4, 3, 5, local_weight=0.5),
                               lambda model: model(_gaussian(21, 2, 5, 4), adjacency)),
        "ar_linear_attention": (ar_mesa_layer(3, 0.7, -1.3), on(_gaussian(14, 2, 6, 3))),
        "linear_self_attention": (von_oswald(3, 0.4, _gaussian(15, 1, 3)),
                                  on(_gaussian(16, 2, 4, 7))),
        "multi_step_gd_loop": (multi_step_gd(3, 0.3, 3),
                               on(cot_prompt(X_gd, torch.einsum("bnd,bd->bn", X_gd, w_gd)))),
        "multi_step_gd_cot": (multi_step_gd(3, 0.3, 3, mode="cot"),
                              on(cot_prompt(X_gd, torch.einsum("bnd,bd->bn", X_gd, w_gd)))),
        "looped_ngd": (looped_ngd(0.5, loops=3), lambda model: model(X_ngd, y_ngd)),
        "looped_ngd_unnormalized": (looped_ngd(0.5, loops=2, normalize=False),
                                    lambda model: model(X_ngd, y_ngd)),
        "hopfield": (hopfield_update(_gaussian(17, 4, 6), 2.0), on(_gaussian(18, 3, 4))),
        "hopfield_residual": (hopfield_update(_gaussian(17, 4, 6), 2.0, residual=True),
                              on(_gaussian(18, 3, 4))),
        "bilinear": (bilinear_layer(4, 5, 3, seed=1), on(_gaussian(19, 2, 3, 4))),
        "gated_encoder_decoder": (encoder_decoder_mlp(**facts), on(facts["keys"])),
        "linear_associative_memory": (linear_associative_memory(**facts), on(facts["keys"])),
        "two_layer_induction": (two_layer_induction(3, 6), on(tokens)),
        "compact_induction": (compact_induction(3, 6), on(tokens)),
        "majority_head": (majority_head(3, 8), on(tokens)),
        "rank_one_head": (bz.rank_one_head(_gaussian(0, 4), rho=2.0), on(_gaussian(1, 2, 5, 4))),
        "memorizing_transformer": (memorizer, on(_gaussian(2, 3, 3, 4))),
        "mean_field_pre": (mean_field_transformer("pre", 2, 4), on(_gaussian(3, 1, 5, 4))),
        "mean_field_post": (mean_field_transformer("post", 2, 4), on(_gaussian(4, 1, 5, 4))),
        "looped_power_transformer": (looped_power_transformer(3, 0.5),
                                     lambda model: model(X, a, 3)),
        "mlp_residual": (Residual(mlp), on(_gaussian(9, 2, 3, 4))),
    }


CONSTRUCTIONS = _constructions()


@pytest.mark.parametrize("name", sorted(CONSTRUCTIONS))
def test_forward_hooks_on_every_hook_point_change_no_bit(name):
    model, call = CONSTRUCTIONS[name]
    points = {n: m for n, m in model.named_modules() if isinstance(m, HookPoint)}
    assert points, f"{name} has no hook points"
    with torch.no_grad():
        before = call(model)
        seen = []
        handles = [m.register_forward_hook(lambda m, i, o, n=n: seen.append(n) or o)
                   for n, m in points.items()]
        try:
            after = call(model)
        finally:
            for handle in handles:
                handle.remove()
    # the hooks return the tensor they are given: the same operations on the same values
    assert torch.equal(before, after)
    # every hook point fires, but per-head results where they are switched off (as in
    # TransformerLens, use_attn_result defaults to False)
    off = {f"{n}.hook_result" if n else "hook_result" for n, m in model.named_modules()
           if isinstance(m, Attention) and not m.use_attn_result}
    assert set(points) - off <= set(seen), f"{name}: {sorted(set(points) - off - set(seen))}"


def _old_forwards() -> dict[str, Callable[[nn.Module], torch.Tensor]]:
    """The forwards of the constructions that gained hook points, as they were written before
    (the same operations in the same order, without hook points)."""
    def lsa(layer, Z, n=None):
        n = Z.shape[-1] - 1 if n is None else n
        return Z + layer.W_PV @ key_moment_unchecked(Z, n, layer.mask_query) @ layer.W_KQ @ Z

    def multi_step(model, Z):
        n = Z.shape[-1] - 1
        for _ in range(model.steps):
            out = lsa(model.layer, Z, n)
            Z = out if model.mode == "loop" else torch.cat([Z, out[..., -1:]], dim=-1)
        return Z

    def ngd(model, X, y):
        Z = y.unsqueeze(-1) * X
        w = torch.zeros(Z.shape[0], Z.shape[-1], dtype=F64)
        for _ in range(model.loops):
            w = softmax_update(w, Z, *model.weights(Z.shape[-1]), normalize=model.normalize)[0]
        return w

    def hopfield(model, xi):
        update = (model.beta * xi @ model.patterns).softmax(dim=-1) @ model.patterns.T
        return xi + update if model.residual else update

    def encoder_decoder(model, k):
        hidden = torch.sigmoid(k @ model.gate.T) * (k @ model.up.T)
        return hidden @ model.down.T @ model.decoder

    def depth_trace(model, tokens):
        bos = torch.full((tokens.shape[0], 1), 2 * model.k, dtype=torch.long)
        h = model.embed[torch.cat([bos, tokens], 1)]
        scores = (h @ model.W_Q.T) @ (h @ model.W_K.T).transpose(1, 2)
        mask = torch.ones(h.shape[1], h.shape[1], dtype=torch.bool).tril()
        mixed = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ h
        return model.depths[(mixed @ model.readout.T)[:, 1:].argmax(-1)].long()

    def active_dormant(model, tokens):
        B, n = tokens.shape
        onehot = nn.functional.one_hot(tokens, model.task.vocab_size + 1).to(F64)
        scores = model.W_pos[:n, :n].expand(B, n, n).clone()
        scores[:, :, 0] += model.W_sink[tokens]
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        pattern = scores.masked_fill(~causal, -math.inf).softmax(-1)
        return pattern @ (onehot @ model.W_OV) + torch.relu(onehot) @ model.W_mlp

    def features(model, x):
        return (apply_feature_map(model.feature_map, x @ model.W_Q, model.W_phi),
                apply_feature_map(model.feature_map, x @ model.W_K, model.W_phi), x @ model.W_V)

    def round_(model, x, adjacency):
        phi_q, phi_k, v = features(model, x)
        return virtual_node_aggregate(phi_q, phi_k, v) + model.local_weight * (adjacency @ v)

    def icdl(model, X, y, W1, w2):
        H = model.embed(X, y, W1, w2)
        for layer in model.layers:
            if isinstance(layer, ReluAttention):
                q = torch.einsum("hkD,tD->htk", layer.W_Q, H)
                k = torch.einsum("hkD,tD->htk", layer.W_K, H)
                v = torch.einsum("hED,tD->htE", layer.W_OV, H)
                H = H + (torch.relu(q @ k.transpose(1, 2)) @ v).sum(0)
            else:
                H = H + torch.relu(H @ layer.W_in.T + layer.b_in) @ layer.W_out.T
        return model.read_weights(H)

    def quadratic(model, x):
        z = x @ model.W.T
        return model.alpha * (z + model.eps / 2 * z ** 2).mean(-1)

    def ntk(model, q, K, V):
        scores = model.scale * q @ K.transpose(-1, -2)
        weights = ((scores - scores.amax(dim=-1, keepdim=True)).exp() if model.kernel == "exp"
                   else (model.c + scores) ** 2)
        phi_q = model.phi(q)
        prefix_num, prefix_den = phi_q @ model.Z, phi_q @ model.kappa[:, None]
        if model.kernel == "exp":
            prefix_den = phi_q @ model.kappa.abs()[:, None]
            scores = model.scale * q @ K.transpose(-1, -2)
            unshift = (-scores.amax(dim=-1, keepdim=True)).exp()
            prefix_num, prefix_den = prefix_num * unshift, prefix_den * unshift
        numerator = weights @ V + prefix_num
        return numerator / (weights.sum(dim=-1, keepdim=True) + prefix_den)

    def encoder(model, k):
        gates = torch.relu(k @ model.route.T - model.threshold)
        return torch.einsum("nb,nbm->nm", gates, torch.einsum("bmd,nd->nbm", model.up, k))

    def decoder(model, z):
        if isinstance(model, fc.LinearDecoder):
            return z @ model.projection
        ramps = torch.relu(z[:, :1] - model.knots)
        return (model.offset + ramps @ model.slopes) @ model.projection

    def spatial(model, tokens):
        B, n = tokens.shape
        k, nu = model.task.n_states, len(model.task.offsets)
        f = model.features[:n]
        scores = torch.einsum("pf,hfg,qg->hpq", f, model.W_gather, f)
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        gather = scores.masked_fill(~causal, -math.inf).softmax(-1)
        onehot = nn.functional.one_hot(tokens, k + 1)[..., :k].to(f.dtype)
        configs = torch.einsum("hpq,bqk->bphk", gather, onehot)
        nxt, cur = configs[:, :, :nu], configs[:, :, nu:]
        beta = model.match_beta
        sink = beta * nu + math.log(float(model.alpha.sum())) + beta
        cold = (1 - model.warm[:n]).expand(B, n)
        key_flags = torch.stack([cold, (tokens == k).to(f.dtype)], -1)
        match = beta * torch.einsum("bphk,bqhk->bpq", nxt, cur)
        match = match + (key_flags @ torch.tensor([-beta, sink], dtype=F64))[:, None, :]
        match = match.masked_fill(~causal, -math.inf).softmax(-1)
        values = onehot.clone()
        values[:, 0] = model.bos_value
        return match @ values

    return {
        "ntk_attention_poly2": ntk, "ntk_attention_exp": ntk,
        "multi_bucket_mlp": lambda m, k: decoder(m.decoder, encoder(m.encoder, k)),
        "scalar_code_mlp": lambda m, k: decoder(m.decoder, encoder(m.encoder, k)),
        "spatial_induction": spatial,
        "icdl_transformer": icdl, "quadratic_net": quadratic,
        "depth_trace_head": depth_trace, "active_dormant_head": active_dormant,
        "linear_attention": lambda m, x: linear_attention(*features(m, x)),
        "virtual_node_round": round_,
        "ar_linear_attention": lambda m, x: torch.einsum(
            "...tab,...tb->...ta", context_gram(x.to(m.W_KQ.dtype)),
            tokens(x.to(m.W_KQ.dtype)) @ m.W_KQ.T) @ m.W_PV.T,
        "linear_self_attention": lsa,
        "multi_step_gd_loop": multi_step, "multi_step_gd_cot": multi_step,
        "looped_ngd": ngd, "looped_ngd_unnormalized": ngd,
        "hopfield": hopfield, "hopfield_residual": hopfield,
        "bilinear": lambda m, x: ((x @ m.W1.T) * (x @ m.W2.T)) @ m.W_O.T,
        "gated_encoder_decoder": encoder_decoder,
        "linear_associative_memory": lambda m, k: k @ m.W.T,
    }


OLD_FORWARDS = _old_forwards()


@pytest.mark.parametrize("name", sorted(OLD_FORWARDS))
def test_hook_points_left_the_forward_bit_identical(name):
    """Each forward that gained hook points equals the forward as it was written before, bit
    for bit: the hook points are identities on views, and every operation is the one it was,
    on the same operands in the same order."""
    model, call = CONSTRUCTIONS[name]
    seen = []

    def old(model, *args):
        seen.append(args)
        return OLD_FORWARDS[name](model, *args)
    with torch.no_grad():
        ours = call(model)
        theirs = call(_Recorder(model, old))
    assert seen and torch.equal(ours, theirs), name


class _Recorder:
    """Calls ``old(model, *args)`` where the test calls ``model(*args)``."""

    def __init__(self, model, old):
        self.model, self.old = model, old

    def __call__(self, *args):
        return self.old(self.model, *args)


class _OldStepCoT2(CoT2Layer):
    """CoT2Layer with :meth:`step` as it was written before its hook points."""

    def step(self, context):
        q = self.W_Q @ context[-1]
        k = context @ self.W_K.T
        attention = torch.softmax(k @ q, dim=0)
        h = context[-1] + self.W_OV @ (attention @ context)
        alpha, c = h[self.blocks["sum"]], h[self.blocks["fetched"]]
        z = self.experts @ alpha
        phi = torch.clamp(torch.log(z), min=-self.clamp)
        gate = torch.relu(-phi - self.clamp * (1 - c)[:, None])
        return -gate.sum(0), attention


@pytest.mark.parametrize("digits", [(3, 1, 2), (0, 9, 9), (5, 5, 0)])
def test_cot2_hook_points_left_the_rollout_bit_identical(digits):
    """CoT2's rollout, and so its label, equals the rollout through the old step bit for bit
    (the hook points are identities on views of the very tensors the old step computed)."""
    model = cot2_layer(3)
    old = cot2_layer(3)
    old.__class__ = _OldStepCoT2
    with torch.no_grad():
        ours, theirs = model.rollout(digits), old.rollout(digits)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    assert model(digits) == old(digits)


class OneUlpOff(nn.Module):
    """Mutant of the old-forward comparison: the LSA forward with one output entry moved to the
    next float up, the least change a forward can make. (It replaces a mutant that multiplied
    the update right to left, whose output differs only where a machine's kernels happen to
    round the two orders differently.)"""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, Z):
        out = self.layer(Z).clone()
        out.view(-1)[0] = torch.nextafter(out.view(-1)[0], out.new_tensor(math.inf))
        return out


def test_a_one_ulp_change_fails_the_old_forward_comparison():
    model, call = CONSTRUCTIONS["linear_self_attention"]
    with torch.no_grad():
        assert not torch.equal(call(OneUlpOff(model)),
                               call(_Recorder(model, OLD_FORWARDS["linear_self_attention"])))


def test_the_hook_points_follow_transformer_lens_names():
    names = {n for n, _ in two_layer_induction(3, 6).named_modules()}
    for hook in ("hook_q", "hook_k", "hook_v", "hook_attn_scores", "hook_pattern", "hook_z",
                 "hook_result"):
        assert f"layers.0.{hook}" in names
    assert {"hook_resid_pre.1", "hook_resid_post.1"} <= names
    mlp_names = {n for n, _ in CONSTRUCTIONS["mlp_residual"][0].named_modules()}
    assert {"hook_resid_pre", "hook_resid_post", "block.hook_mlp_in", "block.hook_post",
            "block.hook_mlp_out"} <= mlp_names


def test_per_head_results_sum_to_the_output():
    """``use_attn_result``: hook_result holds the per-head outputs, whose sum is the output
    up to the reordered sum: per entry, two float64 sums of H d_v products each, within
    gamma_{H d_v} sum |z||W_O| of the exact value, so within twice that of each other."""
    from theorems.numerics import gamma

    layer = Attention(_gaussian(0, 3, 4, 2), _gaussian(1, 3, 4, 2), _gaussian(2, 3, 4, 2),
                      _gaussian(3, 3, 2, 5))
    x = _gaussian(4, 2, 6, 4)
    with torch.no_grad():
        fused = layer(x)
        layer.use_attn_result = True
        results = []
        handle = layer.hook_result.register_forward_hook(lambda m, i, o: results.append(o))
        split = layer(x)
        handle.remove()
        values = torch.einsum("bnd,hdv->bhnv", x, layer.W_V)
        z = torch.einsum("bhij,bhjv->bhiv", layer.pattern(x), values)
        bound = 2 * gamma(3 * 2) * torch.einsum("bhiv,hvo->bio", z.abs(), layer.W_O.abs())
    assert results[0].shape == (2, 6, 3, 5)
    assert bool(((split - fused).abs() <= bound).all())


# --- nnsight: read a pattern, ablate a head, patch an activation ---------------------------------

@pytest.fixture(scope="module")
def nnsight():
    """nnsight (the ``interop`` extra), or a skip saying so (a failure under
    ``THEOREMS_REQUIRE_EXTRAS``)."""
    return required("nnsight")


def test_nnsight_reads_the_previous_token_pattern(nnsight):
    """Layer 1 of the two-layer induction construction attends from every position t >= 1 to
    t - 1 (and from the BOS to itself): the argmax of its pattern is max(t - 1, 0)."""
    model = two_layer_induction(vocab_size=4, max_len=8)
    tokens = torch.tensor([[0, 1, 2, 3, 0, 1, 2], [3, 3, 1, 0, 2, 2, 1]])
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(tokens):
        pattern = wrapped.layers[0].hook_pattern.output.save()
    expected = (torch.arange(8) - 1).clamp(min=0)
    assert pattern.shape == (2, 1, 8, 8)
    assert torch.equal(pattern[:, 0].argmax(-1), expected.expand(2, 8))


def test_nnsight_ablating_the_majority_head_zeroes_its_output(nnsight):
    """The majority head's output is its one head's z times W_O, with no residual and no
    bias: with z ablated to zero every output is exactly zero (0 times anything finite)."""
    model = majority_head(3, 8, normalize=False)
    tokens = torch.tensor([[0, 1, 1, 2], [2, 2, 2, 0]])
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(tokens):
        z = wrapped.attention.hook_z.output
        wrapped.attention.hook_z.output = torch.zeros_like(z)
        out = wrapped.output.save()
    assert out.shape == (2, 4, 3) and not out.any()
    assert model(tokens).abs().sum() > 0  # and the head does write something unablated


def test_nnsight_patching_a_one_hot_pattern_copies_the_first_value(nnsight):
    """Patching the rank-one head's pattern to attend only to key 0 makes every position's
    output v_0 W_O: z_i = 1 v_0 + sum of exact zeros = v_0, and then the same contraction
    with W_O as in forward, so bit for bit."""
    model = bz.rank_one_head(_gaussian(0, 4), rho=2.0)
    x = _gaussian(1, 2, 5, 4)
    one_hot = torch.zeros(2, 1, 5, 5, dtype=F64)
    one_hot[..., 0] = 1.0
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(x):
        wrapped.hook_pattern.output = one_hot
        values = wrapped.hook_v.output.save()
        out = wrapped.output.save()
    assert values.shape == (2, 5, 1, model.W_V.shape[-1])  # TransformerLens's (B, n, H, d_v)
    # v_0 at every query position, in the (B, H, n, d_v) layout forward contracts
    first = values.transpose(1, 2)[:, :, :1].expand(-1, -1, 5, -1).contiguous()
    expected = torch.einsum("bhiv,hvo->bio", first, model.W_O)
    assert torch.equal(out, expected)
    assert not torch.equal(out, model(x))  # the patch changed the output


def test_nnsight_ablating_linear_attention_leaves_the_residual(nnsight):
    r"""The LSA layer is :math:`f(Z) = Z + \mathrm{update}`: with ``hook_attn_out`` ablated to
    zero the output is ``Z`` itself, bit for bit (x + 0 = x). The complex AR layer has no
    residual: with ``hook_z`` ablated its output is exactly 0 (0 times W_PV)."""
    lsa_model = von_oswald(3, 0.4, _gaussian(15, 1, 3))
    Z = _gaussian(16, 2, 4, 7)
    wrapped = nnsight.NNsight(lsa_model)
    with wrapped.trace(Z):
        update = wrapped.hook_attn_out.output
        wrapped.hook_attn_out.output = torch.zeros_like(update)
        out = wrapped.output.save()
    assert torch.equal(out, Z) and not torch.equal(lsa_model(Z), Z)

    ar = ar_mesa_layer(3, 0.7, -1.3)
    x = _gaussian(14, 2, 6, 3)
    wrapped = nnsight.NNsight(ar)
    with wrapped.trace(x):
        z = wrapped.hook_z.output.save()
        wrapped.hook_z.output = torch.zeros_like(z)
        out = wrapped.output.save()
    assert z.shape == (2, 6, 1, 6)  # (B, T, head, 2d)
    assert out.shape == (2, 6, 3) and not out.any() and ar(x).abs().sum() > 0


def _gd(X: list, y: list, w: list, eta: Fraction, steps: int) -> list:
    """Exact GD on (1/2n)|y - Xw|^2: w <- w + (eta/n) X^T (y - X w), in rationals."""
    n = len(X)
    for _ in range(steps):
        residual = [y[i] - sum(X[i][j] * w[j] for j in range(len(w))) for i in range(n)]
        w = [w[j] + eta / n * sum(X[i][j] * residual[i] for i in range(n))
             for j in range(len(w))]
    return w


def test_nnsight_patching_a_gd_step_restarts_gd_from_the_patch(nnsight):
    """Patching ``blocks.0.hook_resid_post`` of the looped GD construction with a state whose
    iterate is w' makes the output the GD iterate two steps on from w'. The data are small
    integers, w' has denominators 4, eta = 1/4 and n = 4: the key moment is integers / 4, W_PV G
    W_KQ integers / 16, and each step multiplies the iterate's denominator by 16, so every
    intermediate is a dyadic rational with denominator at most 2^10 and magnitude far below
    2^40, a float64 number. The arithmetic is exact, and the output equals the rational GD
    iterate bit for bit."""
    X = [[1, 0, -1], [0, 2, 1], [-1, 1, 0], [2, -1, 1]]
    y = [1, -2, 0, 3]
    w_patch = [Fraction(1, 2), -1, Fraction(3, 4)]
    eta = Fraction(1, 4)
    model = multi_step_gd(3, float(eta), 3)
    Z = cot_prompt(torch.tensor([X], dtype=F64), torch.tensor([y], dtype=F64))
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(Z):
        post = wrapped.blocks[0].hook_resid_post.output                # (B, N, D)
        patched = post.clone()
        patched[:, -1, 4:7] = torch.tensor([float(v) for v in w_patch], dtype=F64)
        wrapped.blocks[0].hook_resid_post.output = patched
        out = wrapped.output.save()
    expected = torch.tensor([float(v) for v in _gd(X, y, w_patch, eta, 2)], dtype=F64)
    assert torch.equal(out[0, 4:7, -1], expected)
    clean = torch.tensor([float(v) for v in _gd(X, y, [0, 0, 0], eta, 3)], dtype=F64)
    assert torch.equal(model.estimate(Z)[0], clean) and not torch.equal(clean, expected)


def test_nnsight_a_one_hot_pattern_reads_out_one_example_or_pattern(nnsight):
    """Attention that puts all its weight on one key returns that key's value exactly (one
    product by 1, the rest by exact zeros). Looped NGD from w_0 = 0: patching loop 0's pattern
    onto example j makes w_1 = eta y_j x_j. Hopfield: patching the pattern onto stored pattern
    j makes the update the column X[:, j]."""
    model = looped_ngd(0.5, loops=2)
    X, y = _gaussian(12, 2, 6, 3), torch.tensor([[1.0, -1, 1, 1, -1, 1]] * 2, dtype=F64)
    one_hot = torch.zeros(2, 1, 1, 6, dtype=F64)
    one_hot[..., 4] = 1.0
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(X, y):
        uniform = wrapped.blocks[0].attn.hook_pattern.output.save()
        wrapped.blocks[0].attn.hook_pattern.output = one_hot
        w_1 = wrapped.blocks[0].hook_resid_post.output.save()
    # w_0 = 0: every score is exactly 0, so the pattern is uniform, 1/6 correctly rounded
    assert torch.equal(uniform, torch.full((2, 1, 1, 6), 1 / 6, dtype=F64))
    assert torch.equal(w_1, (0.5 * (y[:, 4:5, None] * X[:, 4:5])))   # (B, 1, d)

    hopfield = hopfield_update(_gaussian(17, 4, 6), 2.0)
    xi = _gaussian(18, 3, 4)
    wrapped = nnsight.NNsight(hopfield)
    with wrapped.trace(xi):
        scores = wrapped.hook_attn_scores.output
        one_hot = torch.zeros_like(scores)
        one_hot[:, 2] = 1.0
        wrapped.hook_pattern.output = one_hot
        out = wrapped.output.save()
    assert torch.equal(out, hopfield.patterns[:, 2].expand(3, -1))


def test_nnsight_silencing_the_input_keys_leaves_the_prefix_attention(nnsight):
    r"""NTK-Attention with the polynomial kernel weighs input key j by :math:`(c + s_j)^2`:
    patching every score to :math:`-c` makes every weight :math:`(c - c)^2 = 0` exactly, so the
    numerator is :math:`0 + \varphi(q)^\top Z` and the denominator :math:`0 +
    \varphi(q)^\top\kappa` (adding exact zeros), and the output is the prefix's own attention
    :math:`\varphi(q)^\top Z/\varphi(q)^\top\kappa`, computed by the same products: bit for bit."""
    model = ntk_attention(_gaussian(32, 5, 3), _gaussian(33, 5, 2), scale=0.5, c=1.5)
    q, K, V = _gaussian(28, 2, 3, 3), _gaussian(29, 2, 4, 3), _gaussian(30, 2, 4, 2)
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(q, K, V):
        scores = wrapped.hook_attn_scores.output
        wrapped.hook_attn_scores.output = torch.full_like(scores, -model.c)
        out = wrapped.output.save()
    phi_q = model.phi(q)
    expected = (phi_q @ model.Z) / (phi_q @ model.kappa[:, None])
    assert torch.equal(out, expected) and not torch.equal(model(q, K, V), expected)


def test_nnsight_switching_a_gadget_off_deletes_it(nnsight):
    r"""The bucketed code is :math:`z = \sum_\beta \mathrm{ReLU}(\mathrm{pre}_\beta) L_\beta k`.
    Patching gadget 0's ``hook_pre`` to -1 makes its gate exactly 0; zeroing its map
    :math:`L_0` (test_fact_frontier's dropped-bucket mutant) makes its term :math:`L_0k`
    exactly 0. Either way the contraction over gadgets adds the same products in the same
    order, gadget 0's being a zero (of either sign, which ``torch.equal`` does not tell
    apart), so the two outputs agree bit for bit (and differ from the intact model's)."""
    keys, values, facts = _gaussian(31, 12, 4), torch.eye(3, dtype=F64), torch.arange(12) % 3
    model = fc.multi_bucket_mlp(keys, values, facts)
    wrapped = nnsight.NNsight(model)
    with wrapped.trace(keys):
        pre = wrapped.encoder.hook_pre.output
        patched = pre.clone()
        patched[:, 0] = -1.0
        wrapped.encoder.hook_pre.output = patched
        out = wrapped.output.save()
    dropped = fc.multi_bucket_mlp(keys, values, facts)
    with torch.no_grad():
        dropped.encoder.up[0] = 0
        assert torch.equal(out, dropped(keys))
        assert not torch.equal(out, model(keys))


def test_a_per_sequence_gather_pattern_gathers_the_chosen_tokens():
    """The gather pattern reads positions only, so its hook sees a batch axis of 1; a patch
    may return one pattern per sequence. With one-hot patterns (sequence 0: every head on the
    previous cell, sequence 1: on the cell itself) each gathered configuration is the chosen
    key's one-hot token exactly (one product by 1, the rest by exact zeros)."""
    model = CONSTRUCTIONS["spatial_induction"][0]
    tokens = torch.tensor([[2, 0, 1, 1, 0, 1, 0], [2, 1, 1, 0, 0, 1, 1]])
    B, n, heads = 2, tokens.shape[1], model.W_gather.shape[0]
    chosen = torch.stack([(torch.arange(n) - 1).clamp(min=0), torch.arange(n)])   # (B, n)
    patch = nn.functional.one_hot(chosen, n).to(F64)[:, None].expand(B, heads, n, n)
    gathered = []
    attn = model.blocks[0].attn
    handles = [attn.hook_pattern.register_forward_hook(lambda m, i, o: patch),
               attn.hook_z.register_forward_hook(lambda m, i, o: gathered.append(o))]
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    onehot = nn.functional.one_hot(tokens, 3)[..., :2].to(F64)        # the BOS's value is 0
    expected = onehot[torch.arange(B)[:, None], chosen][:, :, None].expand(B, n, heads, 2)
    assert gathered[0].shape == (B, n, heads, 2) and torch.equal(gathered[0], expected)
