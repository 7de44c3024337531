"""A small trainable decoder for the induction-variants experiments, nanoGPT-style.

Options the three papers need: positional scheme (``"learned"`` absolute, ``"rope"``,
``"alibi"``, ``"none"``), attention (``"softmax"``, or ``"relu"``: weights
:math:`\\mathrm{relu}(s_{ij})/i` over the :math:`i` visible keys, as in the Active-Dormant
code's ``attn_use_relu``), heads per layer, an optional ReLU MLP and pre-LayerNorm.
:meth:`TinyGPT.attention_patterns` returns every layer's (B, H, n, n) weights and
:meth:`TinyGPT.values` the value vectors of each layer, so experiments can measure attention
mass and value norms without reaching into internals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

POSITIONAL = ("learned", "rope", "alibi", "none")
ATTENTION = ("softmax", "relu")


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    max_len: int
    d_model: int = 64
    heads: tuple[int, ...] = (4, 4)   # heads per layer; len(heads) is the depth
    mlp: int = 0                      # hidden width of each layer's MLP; 0: attention only
    positional: str = "learned"
    attention: str = "softmax"
    layer_norm: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {POSITIONAL}, got {self.positional!r}")
        if self.attention not in ATTENTION:
            raise ValueError(f"attention must be one of {ATTENTION}, got {self.attention!r}")
        if not self.heads or any(self.d_model % h for h in self.heads):
            raise ValueError(f"every entry of heads must divide d_model={self.d_model}")


def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of (B, H, n, d) queries or keys (d even), base 10000."""
    d = x.shape[-1]
    freqs = 10000 ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)
    angles = positions[:, None].to(x.dtype) * freqs                     # (n, d/2)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


class Block(nn.Module):
    def __init__(self, config: GPTConfig, n_heads: int) -> None:
        super().__init__()
        self.config, self.n_heads = config, n_heads
        d = config.d_model
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.ln1 = nn.LayerNorm(d) if config.layer_norm else nn.Identity()
        self.ln2 = nn.LayerNorm(d) if config.layer_norm and config.mlp else nn.Identity()
        self.mlp = (nn.Sequential(nn.Linear(d, config.mlp), nn.ReLU(), nn.Linear(config.mlp, d))
                    if config.mlp else None)
        self.drop = nn.Dropout(config.dropout)
        slopes = 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)  # ALiBi's geometric set
        self.register_buffer("slopes", slopes, persistent=False)

    def attend(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(output (B, n, d), pattern (B, H, n, n), values (B, H, n, d_head))."""
        B, n, d = x.shape
        H = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).view(B, n, 3, H, d // H).permute(2, 0, 3, 1, 4)
        positions = torch.arange(n, device=x.device)
        if self.config.positional == "rope":
            q, k = rotate(q, positions), rotate(k, positions)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // H)               # (B, H, n, n)
        if self.config.positional == "alibi":
            distance = (positions[:, None] - positions[None, :]).to(x.dtype)
            scores = scores - self.slopes.to(x.dtype)[:, None, None] * distance
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        if self.config.attention == "softmax":
            pattern = scores.masked_fill(~causal, -math.inf).softmax(-1)
        else:  # relu(s_ij) / i over the i visible keys
            pattern = torch.relu(scores).masked_fill(~causal, 0.0) / (positions + 1)[:, None]
        heads = self.drop(pattern) @ v                                      # (B, H, n, d_head)
        return self.out(heads.transpose(1, 2).reshape(B, n, d)), pattern, v

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        update, pattern, v = self.attend(x)
        x = x + update
        if self.mlp is not None:
            x = x + self.drop(self.mlp(self.ln2(x)))
        return x, pattern, v


class TinyGPT(nn.Module):
    """Token (and optionally learned positional) embedding, blocks, final LN, unembedding."""

    def __init__(self, config: GPTConfig, *, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.pos = (nn.Embedding(config.max_len, config.d_model)
                    if config.positional == "learned" else None)
        self.blocks = nn.ModuleList(Block(config, h) for h in config.heads)
        self.ln = nn.LayerNorm(config.d_model) if config.layer_norm else nn.Identity()
        self.unembed = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def run(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list, list, list]:
        """(logits (B, n, V), patterns, values, residual streams before each block)."""
        x = self.embed(tokens)                                              # (B, n, d)
        if self.pos is not None:
            x = x + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        patterns, values, streams = [], [], []
        for block in self.blocks:
            streams.append(x)
            x, pattern, v = block(x)
            patterns.append(pattern)
            values.append(v)
        return self.unembed(self.ln(x)), patterns, values, streams

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.run(tokens)[0]

    def attention_patterns(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        return self.run(tokens)[1]

    def values(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        return self.run(tokens)[2]
