r"""Scan and Snap: the Y/Z one-layer model (Tian, Wang, Chen, Du 2023, arXiv:2305.16380).

The model is ``Model2`` of the authors' code (facebookresearch/luckmatters,
``ssl/real-dataset/decoder_only.py``, the synthetic-data experiment; its ``K1`` is ``Y`` and
its ``K2`` is ``Z``): one-hot tokens :math:`X\in\{0,1\}^{T\times M}`, no positional encoding,
the last token (the query) attends to the :math:`T - 1` context tokens before it
(``attn_include_base_token=False``) with logits :math:`Z[\text{query}, l]` for key :math:`l`,
a softmax, ``combined = attn X`` (plus the query's one-hot with ``residual``), divided by its
norm with ``normalize``, and output logits ``combined Y^T``; ``Y, Z`` are :math:`M\times M`,
zero-initialised with ``zero_init``. (``YZBlock`` in ``decoder_wiki_yz.py``, the WikiText
model, differs: it computes every causal position, factorises ``Y`` and ``Z`` through an
embedding, and with ``residual`` also adds ``combined`` to the output logits.)

Two exact facts (catalogue SS.2, ours):

* **counts and the long-sequence limit.** The query's attention output depends on the
  context only through the token counts :math:`c_l`: it is :math:`u/\lVert u\rVert`,
  :math:`u_l = c_l e^{Z[m, l]}`; as :math:`T\to\infty` with context tokens i.i.d. from
  :math:`P(\cdot\mid n)` it tends to :math:`f_n = u_n/\lVert u_n\rVert`,
  :math:`u_n = \sum_l P(l\mid n)e^{Z[m,l]}e_l`, with error :math:`O(T^{-1/2})`.
* **the row gauge.** Adding a constant to a row of :math:`Z` multiplies every softmax
  numerator of that query by the same factor, so every attention pattern is unchanged.

The synthetic classes are the catalogue's (SS.3, from a secondary review [S]): next tokens
``n`` map two-to-one to query tokens ``m``; each ``n`` has three distinct tokens with
:math:`P(l\mid n)\propto(0.5, 0.3, 0.2)` and shares four common tokens, each group with mass
0.5. The roles need :math:`4 + 2 + 12 + 4 = 22` token ids, so the vocabulary is 22, not the
catalogue's 20.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from constructions._roles import oracle
from constructions._validate import float_dtype, positive_int, real_tensor, token_tensor


class YZModel(nn.Module):
    """``Model2`` of the module docstring: ``forward(tokens)`` returns the next-token logits
    ``(B, M)``; :meth:`attention` the query's attention over the context ``(B, T-1)``."""

    def __init__(self, vocab_size: int, *, normalize: bool = True, residual: bool = False,
                 zero_init: bool = True, seed: int = 0, dtype: torch.dtype = torch.float64,
                 device: torch.device | str = "cpu") -> None:
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size, minimum=2)
        for name, flag in (("normalize", normalize), ("residual", residual),
                           ("zero_init", zero_init)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
        self.normalize, self.residual = normalize, residual
        dtype = float_dtype("dtype", dtype)
        generator = torch.Generator().manual_seed(positive_int("seed", seed, minimum=0))
        shape = (vocab_size, vocab_size)
        init = (torch.zeros(shape, dtype=dtype) if zero_init
                else torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
                / vocab_size ** 0.5)
        self.Y = nn.Parameter(init.clone().to(device))
        self.Z = nn.Parameter(init.clone().to(device))

    def _split(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = token_tensor("tokens", tokens, vocab_size=self.vocab_size, ndim=2)
        if tokens.shape[1] < 2:
            raise ValueError(f"tokens must hold a context and a query (length >= 2), got "
                             f"length {tokens.shape[1]}")
        return tokens[:, :-1].to(self.Z.device), tokens[:, -1].to(self.Z.device)

    def attention(self, tokens: torch.Tensor) -> torch.Tensor:
        """Softmax over the context of the logits ``Z[query, key]``: ``(B, T-1)``."""
        context, query = self._split(tokens)
        logits = self.Z[query[:, None], context]             # (B, T-1): x_q^T Z x_k, one-hot
        return torch.softmax(logits, dim=-1)

    def combined(self, tokens: torch.Tensor) -> torch.Tensor:
        """``attn X`` (``+ x_query`` with ``residual``), normalised with ``normalize``."""
        context, query = self._split(tokens)
        attn = torch.softmax(self.Z[query[:, None], context], dim=-1)   # (B, T-1)
        out = torch.zeros(context.shape[0], self.vocab_size, dtype=attn.dtype,
                          device=attn.device)
        out = out.scatter_add(1, context, attn)              # (B, M): attn @ one_hot(context)
        if self.residual:
            out = out + nn.functional.one_hot(query, self.vocab_size).to(out)
        if self.normalize:
            out = out / out.norm(dim=-1, keepdim=True)
        return out

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.combined(tokens) @ self.Y.T              # (B, M)


def count_form(Z: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    r"""The attention output from the counts alone: :math:`u/\lVert u\rVert`,
    :math:`u_l = c_l e^{Z[m,l]}` (no residual, normalised): ``(B, M)``."""
    Z = real_tensor("Z", Z, ndim=2)
    if Z.shape[0] != Z.shape[1] or Z.shape[0] == 0:
        raise ValueError(f"Z must be a non-empty square matrix, got {tuple(Z.shape)}")
    tokens = token_tensor("tokens", tokens, vocab_size=Z.shape[0], ndim=2)
    if tokens.shape[1] == 0:
        raise ValueError("tokens must hold at least the query token, got length 0")
    counts = torch.zeros(tokens.shape[0], Z.shape[0], dtype=Z.dtype)
    counts = counts.scatter_add(1, tokens[:, :-1], torch.ones_like(tokens[:, :-1], dtype=Z.dtype))
    u = counts * torch.exp(Z[tokens[:, -1]] - Z[tokens[:, -1]].max(-1, keepdim=True).values)
    return u / u.norm(dim=-1, keepdim=True)


def long_sequence_limit(Z: torch.Tensor, query: int, probs: torch.Tensor) -> torch.Tensor:
    r""":math:`f = u/\lVert u\rVert`, :math:`u_l = P(l)e^{Z[m, l]}`: the normalised attention
    output of query ``m`` as the context length tends to infinity (context i.i.d. ``probs``)."""
    Z = real_tensor("Z", Z, ndim=2)
    if Z.shape[0] != Z.shape[1]:
        raise ValueError(f"Z must be square, got {tuple(Z.shape)}")
    if isinstance(query, bool) or not isinstance(query, int) or not 0 <= query < Z.shape[0]:
        raise ValueError(f"query must be a token id in [0, {Z.shape[0]}), got {query!r}")
    probs = real_tensor("probs", probs, shape=(Z.shape[0],)).to(Z)
    if bool((probs < 0).any()) or abs(float(probs.sum()) - 1) > 1e-9:
        raise ValueError("probs must be a probability vector over the vocabulary")
    u = probs * torch.exp(Z[query] - Z[query].max())
    return u / u.norm()


@dataclass(frozen=True)
class SyntheticClasses:
    """Next tokens ``next_tokens``, their query tokens ``query_of[n]``, and ``probs[n]`` the
    context distribution :math:`P(\\cdot\\mid n)` over the vocabulary ``(K, M)``; ``distinct[n]``
    lists n's distinct tokens in decreasing probability, ``common`` the shared ones."""

    vocab_size: int
    next_tokens: tuple[int, ...]
    query_of: tuple[int, ...]
    distinct: tuple[tuple[int, ...], ...]
    common: tuple[int, ...]
    probs: torch.Tensor

    def sample(self, batch: int, length: int, generator: torch.Generator
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch`` sequences of ``length`` tokens (context, then the query) and their next
        tokens: ``(tokens (B, T), targets (B,))``; classes uniform."""
        batch, length = positive_int("batch", batch), positive_int("length", length, minimum=2)
        cls = torch.randint(len(self.next_tokens), (batch,), generator=generator)
        # inverse-CDF sampling (much cheaper than torch.multinomial for many short rows)
        cdf = self.probs.cumsum(-1)[cls]                              # (B, M)
        uniform = torch.rand(batch, length - 1, generator=generator, dtype=cdf.dtype)
        context = torch.searchsorted(cdf, uniform * cdf[:, -1:], right=True).clamp_max(
            self.vocab_size - 1)
        query = torch.tensor(self.query_of)[cls]
        return (torch.cat([context, query[:, None]], 1),
                torch.tensor(self.next_tokens)[cls])


@oracle
def synthetic_classes(n_next: int = 4, n_query: int = 2,
                      distinct_weights: tuple[float, ...] = (0.5, 0.3, 0.2),
                      n_common: int = 4, distinct_mass: float = 0.5) -> SyntheticClasses:
    """The catalogue's SS.3 classes; ``n_next`` must be a multiple of ``n_query``."""
    n_next, n_query = positive_int("n_next", n_next), positive_int("n_query", n_query)
    n_common = positive_int("n_common", n_common)
    if n_next % n_query:
        raise ValueError(f"n_next must be a multiple of n_query, got {n_next} and {n_query}")
    if not isinstance(distinct_weights, (tuple, list)) or not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) for w in distinct_weights):
        raise TypeError(f"distinct_weights must be a tuple of numbers, got "
                        f"{distinct_weights!r}")
    weights = torch.tensor(distinct_weights, dtype=torch.float64)
    if weights.ndim != 1 or len(weights) < 1 or bool((weights <= 0).any()):
        raise ValueError("distinct_weights must be positive numbers")
    if not isinstance(distinct_mass, (int, float)) or not 0 < distinct_mass < 1:
        raise ValueError(f"distinct_mass must lie in (0, 1), got {distinct_mass!r}")
    k = len(weights)
    next_tokens = tuple(range(n_next))
    query_of = tuple(n_next + n % n_query for n in range(n_next))
    first = n_next + n_query
    distinct = tuple(tuple(first + n * k + j for j in range(k)) for n in range(n_next))
    common = tuple(first + n_next * k + j for j in range(n_common))
    vocab = first + n_next * k + n_common
    probs = torch.zeros(n_next, vocab, dtype=torch.float64)
    for n in range(n_next):
        probs[n, list(distinct[n])] = distinct_mass * weights / weights.sum()
        probs[n, list(common)] = (1 - distinct_mass) / n_common
    return SyntheticClasses(vocab, next_tokens, query_of, distinct, common, probs)
