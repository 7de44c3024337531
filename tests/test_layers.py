"""The shared primitives in constructions/layers.py, against direct computations."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from constructions.layers import MLP, Attention, L2Norm, LayerNorm, Looped, Residual, hardmax
from theorems.areas.layernorm import layer_norm_tolerance
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


def attention_difference_bound(x, ws, kind, causal, scale, normalizer):
    r"""Entrywise bound on |Attention(x) - naive_attention(x)|: each side's forward error
    against the exact value, twice.

    Scores: :math:`q = xW_Q` (d terms), then a :math:`d_k`-term dot and the exact product by
    ``scale`` = 1/2: :math:`|\hat s_{ij} - s_{ij}| \le \Delta_{ij} = \gamma_{d+d_k}\,
    \mathrm{scale}\,(|x_i||W_Q|)(|x_j||W_K|)^\top`. Values are two products (layer:
    :math:`xW_V`, then :math:`W_O` after the key sum; naive: :math:`x_jW_VW_O`), weighted and
    summed over :math:`\le n` keys and :math:`H` heads (layer: :math:`n` then :math:`Hd_v`
    terms; naive: :math:`Hn` accumulations), so every value term carries at most
    :math:`K' = d + d_v + 1 + n + Hn + Hd_v` roundings on either side.

    - linear: the output is a polynomial in the inputs evaluated by sums and products (and one
      division by the normaliser), at most :math:`K = 2d + d_k + 1 + K'` roundings per term:
      the error is :math:`\le \gamma_K` times the same evaluation on absolute values
      (Higham 2002, Sec. 3.1), :math:`A`, itself computed here with :math:`\le K` roundings.
    - softmax: scores off by :math:`\Delta' = \Delta + 2u\max|\hat s|` (the max shift's
      subtraction) move each weight by a relative :math:`e^{2\Delta'} - 1`; exp (within
      1 ulp, 2u), the :math:`n`-term sum and the reciprocal/product add :math:`\gamma_{n+4}`:
      :math:`|\hat p - p| \le \rho\,p`, :math:`\rho = (e^{2\Delta'} - 1)(1 + \gamma_{n+4})
      + \gamma_{n+4}`; weights sum to 1, so the error is :math:`\le (\rho + \gamma_{K'}(1 +
      \rho))\sum_h\max_j|x_j||W_V^h||W_O^h|`.
    - hardmax: integer inputs and query/key weights make every score an exact small integer
      multiple of 1/2, so the ties are exact and each weight is 1/k rounded once:
      :math:`\rho = u`.
    """
    W_Q, W_K, W_V, W_O = ws
    d, dk, dv, heads, n = W_Q.shape[1], W_Q.shape[2], W_V.shape[2], W_Q.shape[0], x.shape[1]
    k_values = d + dv + 1 + n + heads * n + heads * dv
    if kind == "linear":
        k_all = 2 * d + dk + 1 + k_values
        absolute = naive_attention(x.abs(), *[w.abs() for w in ws], "linear", causal, scale,
                                   normalizer)
        return 2 * gamma(k_all) * (1 + gamma(k_all)) * absolute
    u = torch.finfo(torch.float64).eps / 2
    if kind == "hardmax":
        rho = u
    else:
        qa = torch.einsum("bnd,hdk->bhnk", x.abs(), W_Q.abs())
        ka = torch.einsum("bnd,hdk->bhnk", x.abs(), W_K.abs())
        # the magnitudes are computed with d + dk roundings themselves: (1 + gamma) covers them
        delta = float((gamma(d + dk) * (1 + gamma(d + dk)) * scale * qa @ ka.transpose(-1, -2)
                       ).max())
        s_max = float((scale * qa @ ka.transpose(-1, -2)).max()) * (1 + gamma(d + dk))
        delta += 2 * u * (s_max + delta)
        rho = math.expm1(2 * delta) * (1 + gamma(n + 4)) + gamma(n + 4)
    v_max = torch.einsum("bnd,hdv,hvo->bhno", x.abs(), W_V.abs(), W_O.abs()).amax(2).sum(1)
    return 2 * (rho + gamma(k_values) * (1 + rho)) * (1 + gamma(d + dv + heads)) * v_max[:, None]


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
    normalizer = float(n) if kind == "linear" else None
    layer = Attention(*ws, kind=kind, causal=causal, scale=0.5, linear_normalizer=normalizer)
    expected = naive_attention(x, *ws, kind, causal, 0.5, normalizer)
    out, pattern = layer(x, return_pattern=True)
    tol = attention_difference_bound(x, ws, kind, causal, 0.5, normalizer)
    assert bool(((out - expected).abs() <= tol).all()), float((out - expected).abs().max())
    if kind != "linear":
        # each row: n weights off by a relative gamma_{n+4} from ones that sum to 1 (the
        # exp values are normalised by their own computed sum; hardmax: 1/k rounded once),
        # summed here with n - 1 more roundings
        rows = pattern.sum(-1)
        assert bool(((rows - 1).abs() <= gamma(2 * n + 3)).all()), float((rows - 1).abs().max())
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
    # Two correct evaluations of one formula differ per row by layer_norm_tolerance (mean
    # error gamma_d |x|_inf amplified by kappa = |x|_inf/sigma, variance and square root a
    # relative gamma_{d+2} on entries <= sqrt(d), both sides). With eps > 0 the divisor
    # sqrt(sigma^2 + eps) >= sigma amplifies less and adds one rounding (+ eps), which
    # gamma_{2d+4} still covers.
    tol = torch.tensor([layer_norm_tolerance(row) for row in x], dtype=x.dtype)[:, None]
    assert bool(((LayerNorm(eps=1e-5)(x) - expected).abs() <= tol).all())


def test_l2_norm_and_residual_and_looping():
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    # Exact: |(3, 4)| = sqrt(9 + 16) = 5 (also by a scaled norm: 4 sqrt(1 + 0.75^2) = 4 * 1.25),
    # 2x = (6, 8), and one correctly rounded division gives the doubles nearest 1.2 and 1.6.
    assert torch.equal(L2Norm(scale=2.0)(x), torch.tensor([[1.2, 1.6]], dtype=torch.float64))
    doubling = Residual(torch.nn.Identity())
    looped = Looped(doubling, loops=3)
    assert [float(s[0, 0]) for s in looped.iterates(x)] == [3.0, 6.0, 12.0, 24.0]
    # Exact: Identity then x + x, the same one addition as 2 * x.
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
