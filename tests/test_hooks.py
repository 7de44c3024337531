"""Hook points (``constructions/layers.py``): named identity submodules at every intermediate a
circuit tool reads or patches, reached by ``register_forward_hook`` and by nnsight.

The hook points return their input itself, so attaching them changes no output by a bit; the
one rewritten operation, the attention output, is split into the two contractions that
``torch.einsum`` already made (``test_attention_is_bit_identical_to_the_fused_contraction``).
The nnsight tests read, ablate and patch through the hook points and assert what the
construction's own math predicts. They need nnsight (``pip install nnsight``), and skip
without it, saying so.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from constructions import boltzmann as bz
from constructions.induction_heads import compact_induction, two_layer_induction
from constructions.layernorm_geometry import majority_head
from constructions.layers import MLP, Attention, HookPoint, Residual
from constructions.mean_field import mean_field_transformer
from constructions.power_method import looped_power_transformer, normalize_columns
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
    return {
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
    assert seen, f"{name}: no hook point fired"


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
    return pytest.importorskip("nnsight", reason="the nnsight tests need pip install nnsight")


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
