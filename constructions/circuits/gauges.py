r"""Gauge variants of the induction constructions: dense weights, the same function, the same
circuit.

The function an attention-only, LayerNorm-free transformer computes is unchanged by three
gauges (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits": a head
computes :math:`W_QW_K^\top` and :math:`W_VW_O`, and the residual stream has no privileged
basis without normalisation):

* :func:`rotation_variant`: an orthogonal :math:`R` of the residual stream,
  :math:`W_E \to W_ER`, :math:`W_{pos} \to W_{pos}R`, every read :math:`W_Q, W_K, W_V \to
  R^\top W`, every write :math:`W_O \to W_OR`, :math:`W_U \to R^\top W_U`: then every residual
  vector is :math:`xR` and every read :math:`xRR^\top W = xW`. :math:`R` is the Q factor of a
  seeded Gaussian matrix (:func:`random_rotation`), dense and orthogonal only to rounding, and
  every stored product rounds: the variant is *not* exact in floating point. Its forward error
  is bounded in :mod:`theorems.areas.circuits.gauges`.
* :func:`reparametrised_variant`: every head's :math:`W_Q \to [W_Q, 0]A`, :math:`W_K \to
  [W_K, 0]A^{-\top}` (scores :math:`qA A^{-1}k^\top = qk^\top`) and :math:`W_V \to [W_V, 0]B`,
  :math:`W_O \to B^{-1}[W_O; 0]`, with the *non-orthogonal* :math:`A = B = DH` of
  :func:`dyadic_gauge` (:math:`H` the normalised Sylvester Hadamard matrix, :math:`D` a
  diagonal of :math:`2^{-1}, 1, 2`). Every entry of :math:`A`, :math:`A^{-\top} = D^{-1}H` and
  :math:`B^{-1} = HD^{-1}` is a signed power of two, so each stored product whose entries have
  one non-zero term (every map of the one-hot construction) is exact; the compact one's
  rotation :math:`W^1_Q` has two terms per entry, which round.
* :func:`permute_heads`: the heads of a layer reordered (the function sums the heads). On the
  spurious-head variant (:func:`~constructions.circuits.spurious_head_variant`) this
  is exact in real arithmetic but not necessarily bit-exact in float64, see
  :func:`permute_heads`.

Each keeps the circuits of :mod:`constructions.circuits` (relabelled for a permutation).
These particular variants are ours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from constructions import _validate
from constructions.circuits.variants import SPURIOUS_HEADS, hadamard, spurious_head_variant
from constructions.induction_heads.model import InductionTransformer
from constructions.layers import Attention


def random_rotation(size: int, seed: int = 0, *, dtype: torch.dtype = torch.float64
                    ) -> torch.Tensor:
    r"""A dense random orthogonal matrix ``(size, size)``: the Q factor of the QR
    decomposition of a standard Gaussian matrix (drawn and factored in float64 with
    ``torch.Generator().manual_seed(seed)``), columns' signs fixed so that :math:`R` has a
    positive diagonal, which makes it Haar-distributed (Mezzadri 2007). Orthogonal only to
    rounding: :math:`\|R^\top R - I\|` is of order :math:`u\sqrt{size}`."""
    size = _validate.positive_int("size", size)
    seed = _validate.seed("seed", seed)
    dtype = _validate.float_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(size, size, generator=generator, dtype=torch.float64)
    Q, R = torch.linalg.qr(gaussian)
    signs = torch.where(R.diagonal() < 0, -1.0, 1.0).to(torch.float64)
    return (Q * signs).to(dtype)  # a sign flip of a column is exact


def _check(model: object) -> InductionTransformer:
    _validate.instance("model", model, InductionTransformer)
    return model


def rotation_variant(model: InductionTransformer, *, seed: int = 0) -> InductionTransformer:
    r"""``model`` with its residual stream rotated by :math:`R` = :func:`random_rotation`
    ``(d_model, seed)``: :math:`W_ER`, :math:`W_{pos}R`, :math:`R^\top W_{Q,K,V}`, :math:`W_OR`,
    :math:`R^\top W_U` (each product formed once, in ``model``'s dtype).

    In exact arithmetic with an exactly orthogonal :math:`R` the variant computes ``model``'s
    function and every edge carries the same map (a node's output :math:`o` becomes
    :math:`oR` and every read :math:`oRR^\top W = oW`), so the circuits are unchanged. Every
    weight is dense (a Gaussian's Q factor has no zero entry almost surely), nothing is
    axis-aligned. In floating point it is within the bound of
    :mod:`theorems.areas.circuits.gauges`.
    """
    model = _check(model)
    seed = _validate.seed("seed", seed)
    R = random_rotation(model.d_model, seed, dtype=model.W_E.dtype).to(model.W_E.device)

    def read(W: torch.Tensor) -> torch.Tensor:   # (H, d, k) -> R^T W per head
        return torch.stack([R.T @ w for w in W])

    layers = [Attention(read(layer.W_Q), read(layer.W_K), read(layer.W_V),
                        torch.stack([w @ R for w in layer.W_O]), causal=True,
                        scale=layer.scale) for layer in model.layers]
    return InductionTransformer(model.W_E @ R, model.W_pos @ R, layers, R.T @ model.W_U)


def dyadic_gauge(size: int, *, dtype: torch.dtype = torch.float64
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(G, G_inv)``: the dense, non-orthogonal :math:`G = DH` and its inverse
    :math:`G^{-1} = HD^{-1}`, ``(m, m)`` with :math:`m` = ``size`` a power of 4.

    :math:`H` = :func:`~constructions.circuits.hadamard` (symmetric, :math:`H^2 = I`,
    entries :math:`\pm 2^{-k}`), :math:`D = \mathrm{diag}(2^{(i \bmod 3) - 1})`. Every entry of
    :math:`G`, :math:`G^{-1}` and :math:`G^{-\top} = D^{-1}H` is a signed power of two, and
    each is formed by one product per entry: exact. :math:`G^\top G = HD^2H \ne I` for
    :math:`m \ge 4`: the gauge is not a rotation (its condition number is 4).
    """
    size = _validate.positive_int("size", size)
    dtype = _validate.float_dtype("dtype", dtype)
    H = hadamard(size, dtype=dtype)
    d = 2.0 ** (torch.arange(size) % 3 - 1).to(dtype)
    return d.unsqueeze(1) * H, H / d.unsqueeze(0)   # D H and H D^{-1}: one product an entry


def gauge_size(width: int) -> int:
    """The least power of 4 that is at least ``width`` (and at least 4)."""
    width = _validate.positive_int("width", width)
    return 4 ** max(1, math.ceil(math.log(width, 4) - 1e-12))


def reparametrised_variant(model: InductionTransformer) -> InductionTransformer:
    r"""``model`` with every head's query/key and value/output maps reparametrised by the
    dyadic gauge :math:`G` = :func:`dyadic_gauge` (query/key width and value width each padded
    with zeros to :func:`gauge_size`): :math:`W_Q \to [W_Q, 0]G`, :math:`W_K \to [W_K, 0]
    G^{-\top}`, :math:`W_V \to [W_V, 0]G`, :math:`W_O \to G^{-1}[W_O; 0]`.

    In exact arithmetic :math:`W_QGG^{-1}W_K^\top = W_QW_K^\top` and :math:`W_VGG^{-1}W_O =
    W_VW_O`: the same function, every edge the same map, the same circuits. Every non-zero
    row of a head's maps becomes dense in the head's coordinates. The stored maps are exact
    where each entry has one non-zero term (see the module docstring); the forward pass is
    not (queries, keys, scores and outputs now sum many non-zero terms).
    """
    model = _check(model)
    kw = {"dtype": model.W_E.dtype, "device": model.W_E.device}
    layers = []
    for layer in model.layers:
        m_qk, m_v = gauge_size(layer.W_Q.shape[2]), gauge_size(layer.W_V.shape[2])
        A, A_inv = (g.to(**kw) for g in dyadic_gauge(m_qk, dtype=kw["dtype"]))
        B, B_inv = (g.to(**kw) for g in dyadic_gauge(m_v, dtype=kw["dtype"]))

        def pad(W: torch.Tensor, m: int) -> torch.Tensor:     # (H, d, k) -> (H, d, m)
            return torch.cat([W, W.new_zeros(*W.shape[:2], m - W.shape[2])], 2)

        W_O = layer.W_O
        padded_O = torch.cat([W_O, W_O.new_zeros(W_O.shape[0], m_v - W_O.shape[1],
                                                 W_O.shape[2])], 1)
        layers.append(Attention(pad(layer.W_Q, m_qk) @ A, pad(layer.W_K, m_qk) @ A_inv.T,
                                pad(layer.W_V, m_v) @ B, B_inv @ padded_O, causal=True,
                                scale=layer.scale))
    return InductionTransformer(model.W_E.clone(), model.W_pos.clone(), layers,
                                model.W_U.clone())


def permute_heads(model: InductionTransformer, permutations: Sequence[Sequence[int]]
                  ) -> InductionTransformer:
    r"""``model`` with the heads of layer :math:`\ell` reordered: new head :math:`h` is old
    head ``permutations[l][h]`` (so old node ``a{l}.h{p[h]}`` is renamed ``a{l}.h{h}``,
    :func:`head_renaming`).

    A layer's output is the sum of its heads' outputs, so in exact arithmetic the function is
    unchanged. *Not necessarily bit-exact in float64*, even on the spurious-head variant of
    the one-hot construction, where each output coordinate of the layer sums one non-zero term
    and exact zeros (order-free): the heads' batched value sums :math:`\sum_j A_{ij}v_j`
    (several non-zero terms when a token repeats) need not be summed in the same order for a
    head in another batch position; measured on one machine, 5 of 900 random prompts differed
    from the unpermuted variant by an ulp (on another machine none did: it depends on the
    kernels). The checks bound it with the running forward-error bound of
    :mod:`theorems.areas.circuits._tracked`.
    """
    model = _check(model)
    if not isinstance(permutations, Sequence) or len(permutations) != len(model.layers):
        raise ValueError(f"permutations must hold one permutation per layer "
                         f"({len(model.layers)}), got {permutations!r}")
    layers = []
    for layer, perm in zip(model.layers, permutations, strict=True):
        perm = list(perm) if isinstance(perm, Sequence) else perm
        if (not isinstance(perm, list) or sorted(perm) != list(range(layer.n_heads))
                or not all(isinstance(p, int) and not isinstance(p, bool) for p in perm)):
            raise ValueError(f"permutations must hold permutations of range({layer.n_heads}), "
                             f"got {perm!r}")
        index = torch.tensor(perm, device=layer.W_Q.device)
        layers.append(Attention(*(w[index].clone() for w in (layer.W_Q, layer.W_K, layer.W_V,
                                                             layer.W_O)),
                                causal=True, scale=layer.scale))
    return InductionTransformer(model.W_E.clone(), model.W_pos.clone(), layers,
                                model.W_U.clone())


def head_renaming(permutations: Sequence[Sequence[int]]) -> dict[str, str]:
    """The node renaming of :func:`permute_heads`: ``a{l}.h{p[h]}`` -> ``a{l}.h{h}``."""
    if not isinstance(permutations, Sequence) or not permutations:
        raise ValueError(f"permutations must be a non-empty sequence of permutations, got "
                         f"{permutations!r}")
    renaming = {}
    for layer, perm in enumerate(permutations):
        if not isinstance(perm, Sequence) or sorted(perm) != list(range(len(perm))):
            raise ValueError(f"permutations must hold permutations, got {perm!r}")
        renaming.update({f"a{layer}.h{old}": f"a{layer}.h{new}" for new, old in enumerate(perm)})
    return renaming


# The head permutation of the permuted variant: layer 0 kept, layer 1's two heads swapped, so
# that the real heads sit at a0.h1 and a1.h0 (original a0.h0 -> a0.h1, a1.h0 -> a1.h0).
PERMUTATION = ((0, 1), (1, 0))
PERMUTED_HEADS = {old: head_renaming(PERMUTATION)[new] for old, new in SPURIOUS_HEADS.items()}


def permuted_variant(model: InductionTransformer) -> InductionTransformer:
    """The spurious-head variant of ``model`` with the heads of layer 1 swapped
    (:data:`PERMUTATION`); its circuit is the original's renamed by :data:`PERMUTED_HEADS`."""
    return permute_heads(spurious_head_variant(model), PERMUTATION)
