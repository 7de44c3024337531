"""The shared primitives in constructions/layers.py, against direct computations."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from constructions.layers import MLP, Attention, L2Norm, LayerNorm, Looped, Residual, hardmax
from theorems.numerics import gamma
from theorems.strategies import gaussian_matrices, seeds


def naive_attention(x, W_Q, W_K, W_V, W_O, kind, causal, scale=1.0, normalizer=None):
    """Loops over heads, queries and keys: the definition, written out."""
    B, n, _ = x.shape
    out = torch.zeros(B, n, W_O.shape[-1], dtype=x.dtype)
    for h in range(W_Q.shape[0]):
        for b in range(B):
            for i in range(n):
                keys = range(i + 1) if causal else range(n)
                s = torch.stack([scale * (x[b, i] @ W_Q[h]) @ (x[b, j] @ W_K[h]) for j in keys])
                if kind == "softmax":
                    a = s.softmax(0)
                elif kind == "hardmax":
                    a = (s == s.max()).to(x.dtype)
                    a = a / a.sum()
                else:
                    a = s if normalizer is None else s / normalizer
                for a_j, j in zip(a, keys, strict=True):
                    out[b, i] += a_j * (x[b, j] @ W_V[h] @ W_O[h])
    return out


@given(seed=seeds(), kind=st.sampled_from(["softmax", "hardmax", "linear"]),
       causal=st.booleans(), heads=st.integers(1, 3), n=st.integers(1, 5))
def test_attention_matches_its_definition(seed, kind, causal, heads, n):
    g = torch.Generator().manual_seed(seed)
    d, dk, dv, do = 4, 3, 2, 5
    W_Q, W_K = torch.randn(heads, d, dk, generator=g), torch.randn(heads, d, dk, generator=g)
    W_V, W_O = torch.randn(heads, d, dv, generator=g), torch.randn(heads, dv, do, generator=g)
    x = torch.randn(2, n, d, generator=g)
    if kind == "hardmax":  # integer weights and inputs make ties exact and frequent
        W_Q, W_K, x = W_Q.round(), W_K.round(), x.round()
    ws = [w.double() for w in (W_Q, W_K, W_V, W_O)]
    x = x.double()
    layer = Attention(*ws, kind=kind, causal=causal, scale=0.5,
                      linear_normalizer=float(n) if kind == "linear" else None)
    expected = naive_attention(x, *ws, kind, causal, 0.5, float(n))
    out, pattern = layer(x, return_pattern=True)
    scale = float(naive_attention(x.abs(), *[w.abs() for w in ws], "linear", causal, 0.5).max())
    assert torch.allclose(out, expected, rtol=0, atol=gamma(4 * d * n) * max(scale, 1.0) * 8)
    if kind != "linear":
        assert torch.allclose(pattern.sum(-1), torch.ones_like(pattern.sum(-1)))
    if causal:
        assert (pattern.triu(1) == 0).all()


def test_single_head_weights_may_be_matrices():
    eye = torch.eye(3, dtype=torch.float64)
    layer = Attention(eye, eye, eye, eye)
    assert layer.n_heads == 1 and layer.d_model == 3


def test_hardmax_splits_ties_evenly():
    pattern = hardmax(torch.tensor([[1.0, 3.0, 3.0, 0.0]]))
    assert pattern.tolist() == [[0.0, 0.5, 0.5, 0.0]]


@given(x=gaussian_matrices(3, 6, scale=5.0))
def test_layer_norm_matches_torch(x):
    expected = torch.nn.functional.layer_norm(x, (6,), eps=1e-5)
    assert torch.allclose(LayerNorm(eps=1e-5)(x), expected, atol=1e-12)


def test_l2_norm_and_residual_and_looping():
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    assert torch.allclose(L2Norm(scale=2.0)(x), torch.tensor([[1.2, 1.6]], dtype=torch.float64))
    doubling = Residual(torch.nn.Identity())
    looped = Looped(doubling, loops=3)
    assert [float(s[0, 0]) for s in looped.iterates(x)] == [3.0, 6.0, 12.0, 24.0]
    assert torch.equal(looped(x, loops=1), 2 * x)


def test_mlp_is_relu_affine():
    W_in = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    mlp = MLP(W_in, torch.zeros(2, dtype=torch.float64), torch.ones(2, 1, dtype=torch.float64),
              torch.zeros(1, dtype=torch.float64))
    assert mlp(torch.tensor([[2.0], [-3.0]], dtype=torch.float64)).tolist() == [[2.0], [3.0]]


@pytest.mark.parametrize("call, error, name", [
    (lambda: Attention(torch.ones(2, 3), torch.ones(4, 3), torch.ones(2, 3), torch.ones(3, 2)),
     ValueError, "W_K"),
    (lambda: Attention(torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 2)),
     ValueError, "W_O"),
    (lambda: Attention(*[torch.ones(2, 2)] * 4, kind="sparsemax"), ValueError, "kind"),
    (lambda: Attention(*[torch.ones(2, 2)] * 4, causal=1), TypeError, "causal"),
    (lambda: Attention(*[torch.ones(2, 2)] * 4)(torch.ones(1, 3, 3)), ValueError, "x"),
    (lambda: Attention(*[torch.ones(2, 2)] * 4)(torch.ones(3, 2)), ValueError, "x"),
    (lambda: Attention(*[torch.full((2, 2), float("nan"))] * 4), ValueError, "W_Q"),
    (lambda: MLP(torch.ones(2, 3), torch.ones(2), torch.ones(3, 1), torch.ones(1)),
     ValueError, "b_in"),
    (lambda: MLP(torch.ones(2, 3), torch.ones(3), torch.ones(3, 1), torch.ones(1),
                 activation="swish"), ValueError, "activation"),
    (lambda: LayerNorm(eps=-1.0), ValueError, "eps"),
    (lambda: L2Norm(scale=0.0), ValueError, "scale"),
    (lambda: Looped(torch.nn.Identity(), loops=0), ValueError, "loops"),
    (lambda: Looped(lambda x: x), TypeError, "block"),
])
def test_bad_input_names_the_parameter(call, error, name):
    with pytest.raises(error, match=rf"^{name}\b"):
        call()
