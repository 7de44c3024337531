r"""Realistic variants of the induction constructions whose ground-truth circuit carries over.

Circuit benchmarks built from compiled models are criticised for their sparse, axis-aligned
weights (InterpBench on tracr). These variants make the weights dense while keeping the
circuit of :mod:`constructions.circuits`, exactly in real arithmetic:

* :func:`spurious_head_variant`: each layer gets a second head with dense random
  :math:`W_Q, W_K, W_V, W_O`, placed *before* the real head (a head permutation: the real
  heads become ``a0.h1`` and ``a1.h1``). The spurious heads write only into extra residual
  coordinates (``junk``) that every real head and the unembedding ignore (dense writes in the
  null space of every reader), so the variant computes the original's function in exact
  arithmetic; in float64 only up to the order of a few sums (see the function).
* :func:`value_gauge_variant`: the gauge :math:`W_V \to W_V B`, :math:`W_O \to B^{-1}W_O` of
  every head's value and output maps, with :math:`B = H_m/\sqrt{m}` the normalised Sylvester
  Hadamard matrix of size :math:`m = 4^k` (the value space zero-padded to width :math:`m`).
  :math:`B` is orthogonal and, since :math:`\sqrt{m} = 2^k`, its entries
  :math:`\pm 2^{-k}` and those of :math:`B^{-1} = B^\top` are exact in binary floating point,
  as are the stored maps (each row of the one-hot :math:`W_V` and column of :math:`W_O` has
  one non-zero entry). Every value and output coordinate is then a dense mixture, and the
  variant computes the same function up to the rounding of those mixtures, bounded in
  :mod:`theorems.areas.circuits`.

Sources: the gauge freedom of attention (:math:`W_QW_K^\top` and :math:`W_VW_O` are what a head
computes) is folklore (e.g. Elhage et al. 2021, "A Mathematical Framework for Transformer
Circuits"); these particular variants are ours.
"""

from __future__ import annotations

import math

import torch

from constructions import _validate
from constructions.induction_heads.model import InductionTransformer
from constructions.layers import Attention

SPURIOUS_HEADS = {"a0.h0": "a0.h1", "a1.h0": "a1.h1"}


def hadamard(size: int, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    r"""The normalised Sylvester Hadamard matrix :math:`H_m/\sqrt{m}`, ``(m, m)``, for
    :math:`m = 4^k`: orthogonal, with entries :math:`\pm 2^{-k}`, exact in floating point."""
    size = _validate.positive_int("size", size)
    dtype = _validate.float_dtype("dtype", dtype)
    k = round(math.log(size, 4))
    if 4**k != size:
        raise ValueError(f"size must be a power of 4, got {size}")
    H = torch.ones(1, 1, dtype=dtype)
    for _ in range(2 * k):
        H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
    return H / 2**k  # a power of two: exact


def _check_model(model: object) -> InductionTransformer:
    _validate.instance("model", model, InductionTransformer)
    if any(layer.n_heads != 1 for layer in model.layers):
        raise ValueError("model must have one head per layer (an induction construction)")
    return model


def spurious_head_variant(model: InductionTransformer, *, junk: int = 4, seed: int = 0,
                          scale: float = 0.5) -> InductionTransformer:
    r"""``model`` with a dense spurious head before the real one in every layer.

    The residual stream gets ``junk`` extra coordinates. Spurious head :math:`s` of layer
    :math:`\ell`: :math:`W_Q, W_K, W_V` dense :math:`\mathcal N(0, \mathrm{scale}^2)` over the
    whole (widened) stream, :math:`W_O` dense into the junk coordinates only. The real heads,
    embeddings and unembedding are the original's, zero on the junk coordinates.

    *Same function.* Every matrix product a real head or the unembedding forms sums the
    original's products plus products with an exact zero weight (junk rows), and the layer
    output sums the real head's term with the spurious head's, which is an exact 0 on the
    original coordinates. So in exact arithmetic logits, patterns and every edge patch of the
    real heads are the original's, and the circuit is the original's with the heads renamed
    by :data:`SPURIOUS_HEADS`. *Not necessarily bit for bit* (an earlier version of this
    docstring said it was): a head's value sum :math:`\sum_j A_{ij}v_j` has several non-zero
    terms whenever a token repeats, and the kernels that batch two heads may sum them in
    another order than the one-head kernel; measured on one machine, 11 of 900 random prompts
    (``S`` 3..8, ``n`` 3..12) differed by an ulp, e.g. ``S = 4``, ``n = 8``, the all-zero
    prompt, by 2.4e-56 on a logit near 1e-40 (on another machine none did: it depends on the
    kernels). The checks bound the difference with the running forward-error bound of
    :mod:`theorems.areas.circuits._tracked`. Edge patching *within* the variant is bit-exact
    where the original's is (both runs have the same shapes, hence the same kernels).
    """
    model = _check_model(model)
    junk = _validate.positive_int("junk", junk)
    seed = _validate.seed("seed", seed)
    scale = _validate.positive_float("scale", scale)
    d, kw = model.d_model, {"dtype": model.W_E.dtype, "device": model.W_E.device}
    D = d + junk
    generator = torch.Generator().manual_seed(seed)

    def widened(W: torch.Tensor) -> torch.Tensor:  # (d, k) -> (D, k): zero junk rows
        return torch.cat([W, W.new_zeros(junk, W.shape[1])], 0)

    def dense(*shape: int) -> torch.Tensor:
        return (scale * torch.randn(*shape, generator=generator, dtype=torch.float64)).to(**kw)

    layers = []
    for layer in model.layers:
        W_Q, W_K, W_V, W_O = (w[0] for w in (layer.W_Q, layer.W_K, layer.W_V, layer.W_O))
        d_k, d_v = W_Q.shape[1], W_V.shape[1]
        spurious_O = torch.cat([W_O.new_zeros(d_v, d), dense(d_v, junk)], 1)   # (d_v, D)
        real_O = torch.cat([W_O, W_O.new_zeros(d_v, junk)], 1)
        layers.append(Attention(torch.stack([dense(D, d_k), widened(W_Q)]),
                                torch.stack([dense(D, d_k), widened(W_K)]),
                                torch.stack([dense(D, d_v), widened(W_V)]),
                                torch.stack([spurious_O, real_O]), causal=True,
                                scale=layer.scale))
    pad = model.W_E.new_zeros
    return InductionTransformer(torch.cat([model.W_E, pad(model.W_E.shape[0], junk)], 1),
                                torch.cat([model.W_pos, pad(model.W_pos.shape[0], junk)], 1),
                                layers, widened(model.W_U))


def gauge_width(model: InductionTransformer) -> int:
    """The Hadamard size :math:`m = 4^k` that :func:`value_gauge_variant` pads the value
    spaces of ``model`` to: the least power of 4 at least every head's value width."""
    model = _check_model(model)
    width = max(layer.W_V.shape[2] for layer in model.layers)
    return 4 ** max(1, math.ceil(math.log(width, 4) - 1e-12))


def value_gauge_variant(model: InductionTransformer) -> InductionTransformer:
    r"""``model`` with every head's value space rotated: :math:`W_V \to [W_V, 0]B`,
    :math:`W_O \to B^\top[W_O; 0]`, :math:`B` = :func:`hadamard` (:func:`gauge_width`).

    In real arithmetic :math:`W_V B B^\top W_O = W_V W_O`, so the function and every edge's
    map are the original's and the circuit is unchanged. In float64 the stored maps are exact
    (see the module docstring); the values :math:`x W_V B` are exact too (one non-zero term
    per entry), but each head output coordinate now sums :math:`m` non-zero terms, which is
    where the variant's rounding differs from the original's.
    """
    model = _check_model(model)
    m = gauge_width(model)
    B = hadamard(m, dtype=model.W_E.dtype).to(model.W_E.device)
    layers = []
    for layer in model.layers:
        W_V, W_O = layer.W_V[0], layer.W_O[0]
        d_v = W_V.shape[1]
        padded_V = torch.cat([W_V, W_V.new_zeros(W_V.shape[0], m - d_v)], 1)    # (d, m)
        padded_O = torch.cat([W_O, W_O.new_zeros(m - d_v, W_O.shape[1])], 0)    # (m, d)
        layers.append(Attention(layer.W_Q.clone(), layer.W_K.clone(), padded_V @ B,
                                B.T @ padded_O, causal=True, scale=layer.scale))
    return InductionTransformer(model.W_E.clone(), model.W_pos.clone(), layers,
                                model.W_U.clone())
