r"""Recursive (weight-shared) decoders and factorised embeddings: the parameter accounting of
Gülbahar, Edman, Fraser (2026), "Squeezing More from Limited Data with Recursive Transformers",
arXiv:2608.26973.

**The model** (:class:`TinyDecoder`). Vocabulary :math:`V`, width :math:`H`, ``n_unique``
distinct pre-LN blocks applied in turn for ``depth`` layers (block :math:`l \bmod n_u` at layer
:math:`l`: ``n_unique = depth`` is the standard model, ``n_unique = 1`` one block looped
``depth`` times). A block is single-head causal attention (:math:`W_Q, W_K, W_V, W_O \in
\mathbb R^{H\times H}`) and a GELU MLP (:math:`W_1 \in \mathbb R^{H\times 4H}`, :math:`W_2 \in
\mathbb R^{4H\times H}`): :math:`12H^2` weights. No biases, and LayerNorms without affine
parameters, so that the count is exactly the weights the accounting counts. The embedding is
tied to the head.

**Factorised embeddings** (the paper's §3.1 [V]): :math:`\mathrm{Embed}_{FE}(x) =
W_{emb}[x]\,W_{proj}` with :math:`W_{emb} \in \mathbb R^{V\times E}`, :math:`W_{proj} \in
\mathbb R^{E\times H}`, and the head :math:`h \mapsto hW_{proj}^\top W_{emb}^\top` (tied, ours
[D]): :math:`E(V + H)` weights instead of :math:`VH`. With :math:`E = H` and
:math:`W_{proj} = I` the maps are the standard ones, also in floating point (each entry is one
product by 1 plus products by 0, all exact).

**The accounting** (:func:`parameter_formula`, ours [D]): :math:`VH + 12n_uH^2` weights
(:math:`E(V + H) + 12n_uH^2` factorised), so a 12-layer standard model spends the share
:math:`VH/(VH + 12\cdot 12H^2) = V/(V + 144H)` on its vocabulary map, and a model looping one
block 12 times :math:`V/(V + 12H)`.
"""

from __future__ import annotations

from fractions import Fraction

import torch
from torch import nn
from torch.nn import functional

from constructions import _validate

WEIGHTS_PER_BLOCK = 12  # times H^2: four H x H attention maps and an H x 4H x H MLP


class FactorisedEmbedding(nn.Module):
    r"""The tied factorised vocabulary map: ``embed(tokens)`` :math:`= W_{emb}[x]W_{proj}`,
    ``unembed(h)`` :math:`= (hW_{proj}^\top)W_{emb}^\top`."""

    def __init__(self, W_emb: torch.Tensor, W_proj: torch.Tensor):
        super().__init__()
        W_emb = _validate.nonempty("W_emb", _validate.real_tensor("W_emb", W_emb, ndim=2))
        W_proj = _validate.nonempty("W_proj", _validate.real_tensor("W_proj", W_proj, ndim=2))
        _validate.matching("W_proj", W_proj, W_emb.shape[1], dim=0, to="W_emb's columns")
        self.W_emb = nn.Parameter(W_emb.clone())
        self.W_proj = nn.Parameter(W_proj.to(W_emb.dtype).clone())

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = _validate.token_tensor("tokens", tokens, vocab_size=self.W_emb.shape[0])
        return self.W_emb[tokens] @ self.W_proj

    def project(self, h: torch.Tensor) -> torch.Tensor:
        """The head's first step :math:`hW_{proj}^\\top`, shape ``(..., E)``."""
        h = _validate.real_tensor("h", h)
        _validate.matching("h", h, self.W_proj.shape[1], to="W_proj's columns")
        return h.to(self.W_proj.dtype) @ self.W_proj.T

    def unembed(self, h: torch.Tensor) -> torch.Tensor:
        return self.project(h) @ self.W_emb.T


def factorised_embedding(vocab_size: int, d_model: int, d_embed: int, *, seed: int = 0,
                         identity_projection: bool = False,
                         dtype: torch.dtype = torch.float64) -> FactorisedEmbedding:
    """Gaussian :math:`W_{emb}` (``vocab_size`` x ``d_embed``, std 1) and :math:`W_{proj}`
    (``d_embed`` x ``d_model``, std :math:`E^{-1/2}`), or :math:`W_{proj} = I` with
    ``identity_projection`` (which needs ``d_embed == d_model``)."""
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    d_model = _validate.positive_int("d_model", d_model)
    d_embed = _validate.positive_int("d_embed", d_embed)
    dtype = _validate.float_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    W_emb = torch.randn(vocab_size, d_embed, generator=generator, dtype=dtype)
    if _validate.boolean("identity_projection", identity_projection):
        if d_embed != d_model:
            raise ValueError(f"d_embed must equal d_model ({d_model}) for an identity "
                             f"projection, got {d_embed}")
        W_proj = torch.eye(d_model, dtype=dtype)
    else:
        W_proj = torch.randn(d_embed, d_model, generator=generator, dtype=dtype) / d_embed**0.5
    return FactorisedEmbedding(W_emb, W_proj)


class Block(nn.Module):
    """A pre-LN block without biases or norm parameters: causal single-head attention and a
    GELU MLP of width 4H."""

    def __init__(self, d_model: int, generator: torch.Generator, dtype: torch.dtype):
        super().__init__()
        H = d_model

        def weight(rows, cols):
            return nn.Parameter(torch.randn(rows, cols, generator=generator, dtype=dtype)
                                / rows**0.5)

        self.W_Q, self.W_K, self.W_V, self.W_O = (weight(H, H) for _ in range(4))
        self.W_1, self.W_2 = weight(H, 4 * H), weight(4 * H, H)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        H, n = h.shape[-1], h.shape[-2]
        x = functional.layer_norm(h, (H,))
        scores = (x @ self.W_Q) @ (x @ self.W_K).transpose(-1, -2) / H**0.5
        future = torch.ones(n, n, dtype=torch.bool, device=h.device).triu(1)
        pattern = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        h = h + (pattern @ (x @ self.W_V)) @ self.W_O
        return h + functional.gelu(functional.layer_norm(h, (H,)) @ self.W_1) @ self.W_2


class TinyDecoder(nn.Module):
    """``depth`` layers cycling through ``n_unique`` blocks, between a tied vocabulary map
    (standard :math:`W_E`, or a :class:`FactorisedEmbedding`) and a final LayerNorm."""

    def __init__(self, vocabulary: nn.Module | torch.Tensor, blocks: list[Block], depth: int):
        super().__init__()
        if isinstance(vocabulary, FactorisedEmbedding):
            self.vocabulary = vocabulary
        else:
            W_E = _validate.nonempty("vocabulary", _validate.real_tensor(
                "vocabulary", vocabulary, ndim=2))
            self.vocabulary = None
            self.W_E = nn.Parameter(W_E.clone())
        self.blocks = nn.ModuleList(blocks)
        self.depth = _validate.positive_int("depth", depth)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.vocabulary is not None:
            return self.vocabulary.embed(tokens)
        return self.W_E[_validate.token_tensor("tokens", tokens, vocab_size=self.W_E.shape[0])]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in range(self.depth):
            h = self.blocks[layer % len(self.blocks)](h)
        h = functional.layer_norm(h, (h.shape[-1],))
        if self.vocabulary is not None:
            return self.vocabulary.unembed(h)
        return h @ self.W_E.T


def tiny_decoder(vocab_size: int, d_model: int, n_unique: int, depth: int, *,
                 d_embed: int | None = None, seed: int = 0,
                 dtype: torch.dtype = torch.float64) -> TinyDecoder:
    """A :class:`TinyDecoder` with ``n_unique`` distinct blocks (``depth`` a multiple of it)
    and a standard embedding, or a factorised one of width ``d_embed``."""
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    d_model = _validate.positive_int("d_model", d_model)
    n_unique = _validate.positive_int("n_unique", n_unique)
    depth = _validate.positive_int("depth", depth)
    if depth % n_unique:
        raise ValueError(f"depth must be a multiple of n_unique ({n_unique}), got {depth}")
    dtype = _validate.float_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    if d_embed is None:
        vocabulary = torch.randn(vocab_size, d_model, generator=generator, dtype=dtype)
    else:
        vocabulary = factorised_embedding(vocab_size, d_model, d_embed, dtype=dtype,
                                          seed=int(torch.randint(2**31, (1,),
                                                                 generator=generator)))
    blocks = [Block(d_model, generator, dtype) for _ in range(n_unique)]
    return TinyDecoder(vocabulary, blocks, depth)


def parameter_count(model: nn.Module) -> int:
    """The number of trainable weights of ``model`` (each shared tensor counted once)."""
    model = _validate.instance("model", model, nn.Module)
    return sum(p.numel() for p in model.parameters())


def embedding_parameters(model: TinyDecoder) -> int:
    """The weights of ``model``'s vocabulary map (:math:`VH`, or :math:`E(V + H)`)."""
    model = _validate.instance("model", model, TinyDecoder)
    return parameter_count(model.vocabulary) if model.vocabulary is not None \
        else model.W_E.numel()


def parameter_formula(vocab_size, d_model, n_unique, d_embed=None) -> tuple:
    r"""``(embedding, total)`` weights: :math:`(VH, VH + 12n_uH^2)`, or with ``d_embed``
    :math:`E`, :math:`(E(V + H), E(V + H) + 12n_uH^2)`. Counts may be SymPy symbols."""
    V = _validate.count("vocab_size", vocab_size)
    H = _validate.count("d_model", d_model)
    n_u = _validate.count("n_unique", n_unique)
    embedding = V * H if d_embed is None else _validate.count("d_embed", d_embed) * (V + H)
    return embedding, embedding + WEIGHTS_PER_BLOCK * n_u * H**2


def embedding_share(vocab_size, d_model, n_unique, d_embed=None):
    """The share of the weights in the vocabulary map, from :func:`parameter_formula`: a
    ``Fraction`` for integer counts, a SymPy expression for symbolic ones."""
    embedding, total = parameter_formula(vocab_size, d_model, n_unique, d_embed)
    if isinstance(embedding, int) and isinstance(total, int):
        return Fraction(embedding, total)
    return embedding / total
