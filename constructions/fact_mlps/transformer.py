r"""A one-layer fact transformer whose MLP can be swapped (FM.5).
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions.layers import MLP, Attention, fixed, resolve

# --- a one-layer fact transformer (FM.5) --------------------------------------------------------

class FactTransformer(nn.Module):
    r"""Embedding, one hardmax attention head, a swappable MLP, and a value unembedding.

    The residual stream has width :math:`2d + 2 + d_v`, in blocks
    ``[token key (d) | subject flag | one | moved key (d) | MLP out (d_v)]``. Subject tokens
    embed as :math:`(k_s, 1, 1, 0, 0)`, other tokens as :math:`(e, 0, 1, 0, 0)`. The head
    scores every key by its subject flag (query = the "one" coordinate), so with exactly one
    subject in the prompt every position at or after it attends to it alone, and copies its
    key into the "moved key" block. The MLP reads that block and writes its output
    :math:`g(k_s)` into the last block, and the logits at the last position are
    :math:`\langle v_j, g(k_s)\rangle`: the model answers :math:`\arg\max_j` of the fact store.
    Attention and everything upstream of the MLP do not involve the MLP, so
    :meth:`swap_mlp` changes the answers and nothing else.
    """

    def __init__(self, embeddings: torch.Tensor, attention: Attention, mlp: nn.Module,
                 values: torch.Tensor, num_subjects: int) -> None:
        super().__init__()
        self.embeddings = fixed(embeddings)
        self.attention = attention
        self.values = fixed(values)
        self.num_subjects = num_subjects
        self.d = (embeddings.shape[1] - 2 - values.shape[1]) // 2
        self.mlp = self._checked(mlp)

    @property
    def vocab_size(self) -> int:
        return self.embeddings.shape[0]

    @property
    def query_token(self) -> int:
        """The relation token that ends every prompt."""
        return self.vocab_size - 1

    def _checked(self, mlp: nn.Module) -> nn.Module:
        if not isinstance(mlp, nn.Module):
            raise TypeError(f"mlp must be an nn.Module, got {type(mlp).__name__}")
        probe = torch.zeros(1, self.d, dtype=self.embeddings.dtype,
                            device=self.embeddings.device)
        with torch.no_grad():
            try:
                shape = tuple(mlp(probe).shape)
            except (ValueError, RuntimeError) as error:
                raise ValueError(f"mlp must map width {self.d} to width {self.values.shape[1]} "
                                 f"(those of keys and values): {error}") from None
        if shape != (1, self.values.shape[1]):
            raise ValueError(f"mlp must map width {self.d} to width {self.values.shape[1]} "
                             f"(those of keys and values), "
                             f"got output shape {shape} for input shape (1, {self.d})")
        return mlp

    def swap_mlp(self, mlp: nn.Module) -> nn.Module:
        """Replace the MLP in place and return the previous one (to swap back)."""
        previous, self.mlp = self.mlp, self._checked(mlp)
        return previous

    def residual(self, tokens: torch.Tensor) -> torch.Tensor:
        """The residual stream after attention and before the MLP, ``(B, n, width)``."""
        tokens = _validate.token_tensor("tokens", tokens, vocab_size=self.vocab_size, ndim=2)
        x = self.embeddings[tokens]
        return x + self.attention(x)

    def attention_pattern(self, tokens: torch.Tensor) -> torch.Tensor:
        """Attention weights ``(B, n, n)`` of the single head; rows are queries."""
        tokens = _validate.token_tensor("tokens", tokens, vocab_size=self.vocab_size, ndim=2)
        return self.attention(self.embeddings[tokens], return_pattern=True)[1][:, 0]

    def mlp_input(self, tokens: torch.Tensor) -> torch.Tensor:
        """What the MLP reads at the last position: the moved subject key, ``(B, d)``."""
        d = self.d
        return self.residual(tokens)[:, -1, d + 2:2 * d + 2]

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        features = []
        if self.attention.kind == "hardmax":
            features.append("hardmax (average-hard) attention")
        if not (isinstance(self.mlp, MLP) and self.mlp.activation in ("relu", "gelu")):
            features.append("a fact-store MLP other than a ReLU/GELU MLP (linear, gated or "
                            "encoder-decoder)")
        return features

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits over the values at the last position, ``(B, |V|)``."""
        d = self.d
        h = self.residual(tokens)[:, -1]
        out = h[:, 2 * d + 2:] + self.mlp(h[:, d + 2:2 * d + 2]).to(h.dtype)
        return out @ self.values.T

    def answer(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.forward(tokens).argmax(-1)


def fact_transformer(keys, values, mlp: nn.Module, *, num_fillers: int = 2, seed: int = 0,
                     dtype: torch.dtype = torch.float64, device=None) -> FactTransformer:
    """A one-layer transformer over subjects ``0..F-1``, ``num_fillers`` filler tokens and a
    final query token, with ``mlp`` (width d to d_v) as its fact store (see
    :class:`FactTransformer`). Prompts are built by :func:`fact_prompts`."""
    keys = _validate.real_tensor("keys", keys, ndim=2).to(torch.float64)
    values = _validate.real_tensor("values", values, ndim=2).to(torch.float64)
    num_fillers = _validate.positive_int("num_fillers", num_fillers, minimum=0)
    seed = _validate.seed("seed", seed)
    kw = resolve(dtype, device)
    F, d = keys.shape
    d_v = values.shape[1]
    width = 2 * d + 2 + d_v
    generator = torch.Generator().manual_seed(seed)
    others = torch.randn(num_fillers + 1, d, generator=generator, dtype=torch.float64)
    embeddings = torch.zeros(F + num_fillers + 1, width, dtype=torch.float64)
    embeddings[:F, :d] = keys
    embeddings[F:, :d] = others
    embeddings[:F, d] = 1.0           # subject flag
    embeddings[:, d + 1] = 1.0        # constant coordinate: every query scores the flag
    W_Q = torch.zeros(width, 1, dtype=torch.float64)
    W_Q[d + 1, 0] = 1.0
    W_K = torch.zeros(width, 1, dtype=torch.float64)
    W_K[d, 0] = 1.0
    W_V = torch.zeros(width, d, dtype=torch.float64)
    W_V[:d] = torch.eye(d, dtype=torch.float64)
    W_O = torch.zeros(d, width, dtype=torch.float64)
    W_O[:, d + 2:2 * d + 2] = torch.eye(d, dtype=torch.float64)
    attention = Attention(*(w.to(**kw) for w in (W_Q, W_K, W_V, W_O)), kind="hardmax",
                          causal=True)
    return FactTransformer(embeddings.to(**kw), attention, mlp, values.to(**kw), F)


def fact_prompts(subjects: torch.Tensor, positions: torch.Tensor, *, num_subjects: int,
                 num_fillers: int, length: int) -> torch.Tensor:
    """Prompts of ``length`` tokens: fillers, with subject ``subjects[b]`` at ``positions[b]``
    (before the last position) and the query token last. The oracle answer is
    ``facts[subjects[b]]``."""
    num_subjects = _validate.positive_int("num_subjects", num_subjects)
    subjects = _validate.token_tensor("subjects", subjects, vocab_size=num_subjects, ndim=1)
    length = _validate.positive_int("length", length, minimum=2)
    num_fillers = _validate.positive_int("num_fillers", num_fillers, minimum=0)
    positions = _validate.token_tensor("positions", positions, vocab_size=length - 1, ndim=1)
    if positions.shape != subjects.shape:
        raise ValueError(f"positions must match subjects' shape {tuple(subjects.shape)}")
    batch = subjects.shape[0]
    fillers = num_subjects + torch.arange(length).remainder(max(num_fillers, 1))
    tokens = fillers.expand(batch, length).clone()
    tokens[:, -1] = num_subjects + num_fillers
    tokens[torch.arange(batch), positions] = subjects
    return tokens


