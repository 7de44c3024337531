r"""Dyck languages for protoreasoning (Valle & Reid 2026, arXiv:2608.04980; abstract only).

Tokens: with k bracket types, ``0..k-1`` open and ``k..2k-1`` close (type ``j`` closes with
``k + j``). The oracle reports membership, the depth after each token
(:math:`\#\text{open} - \#\text{close}` of the prefix) and the stack trace (the type on top of
the stack after each token, ``EMPTY`` when it is empty, ``ERROR`` from the first mismatch or
underflow on).

The trace format (the depth after each token) and the one-layer depth transformer are this
project's: the paper's trace format is not known (only its abstract was read).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_with_axes
from constructions.layers import HookPoint

EMPTY, ERROR = -1, -2


def bracket_alphabet(brackets: object) -> tuple[str, str]:
    """Validate an alphabet like ``"()[]"`` (open, close pairs) -> (opens, closes)."""
    if not isinstance(brackets, str):
        raise TypeError(f"brackets must be a str of open/close pairs, got "
                        f"{type(brackets).__name__}")
    if len(brackets) < 2 or len(brackets) % 2:
        raise ValueError(f"brackets must hold open/close pairs (even length >= 2), got "
                         f"{brackets!r}: unbalanced")
    if len(set(brackets)) != len(brackets):
        raise ValueError(f"brackets must not repeat a character, got {brackets!r}")
    return brackets[0::2], brackets[1::2]


def encode(text: str, brackets: str = "()[]") -> torch.Tensor:
    """A bracket string -> token ids (opens ``0..k-1``, closes ``k..2k-1``)."""
    opens, closes = bracket_alphabet(brackets)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    ids = {c: i for i, c in enumerate(opens + closes)}
    bad = sorted(set(text) - set(ids))
    if bad:
        raise ValueError(f"text holds characters outside the alphabet {brackets!r}: {bad}")
    return torch.tensor([ids[c] for c in text], dtype=torch.long)


def decode(tokens: torch.Tensor, brackets: str = "()[]") -> str:
    opens, closes = bracket_alphabet(brackets)
    tokens = _validate.token_tensor("tokens", tokens, vocab_size=2 * len(opens))
    return "".join((opens + closes)[int(t)] for t in tokens.reshape(-1))


@dataclass(frozen=True)
class DyckTrace:
    """The oracle's answer for one string: membership, depths and stack tops per token."""

    member: bool
    depths: tuple[int, ...]
    stack_tops: tuple[int, ...]

    @property
    def max_depth(self) -> int:
        return max((0, *self.depths))


def _tokens(tokens: object, k: int) -> list[int]:
    k = _validate.positive_int("k", k)
    if isinstance(tokens, torch.Tensor):
        if tokens.ndim == 0:
            raise ValueError("tokens must be a sequence of token ids, got a 0-d tensor")
        if tokens.numel() == 0:
            return []
        tokens = _validate.token_tensor("tokens", tokens.reshape(-1), vocab_size=2 * k)
        return [int(t) for t in tokens]
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__iter__"):
        raise TypeError(f"tokens must be a sequence of ints, got {type(tokens).__name__}")
    out = list(tokens)
    for t in out:
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError(f"tokens must hold ints, got {type(t).__name__}")
        if not 0 <= t < 2 * k:
            raise ValueError(f"tokens must lie in 0..{2 * k - 1} for k = {k}, got {t}")
    return out


def dyck_oracle(tokens, k: int = 2) -> DyckTrace:
    """Membership, depth and stack trace by a stack machine (the specification)."""
    tokens = _tokens(tokens, k)
    stack: list[int] = []
    depth, failed, depths, tops = 0, False, [], []
    for t in tokens:
        depth += 1 if t < k else -1
        if not failed:
            if t < k:
                stack.append(t)
            elif stack and stack[-1] == t - k:
                stack.pop()
            else:
                failed = True
        depths.append(depth)
        tops.append(ERROR if failed else (stack[-1] if stack else EMPTY))
    return DyckTrace(member=not failed and not stack, depths=tuple(depths),
                     stack_tops=tuple(tops))


def random_dyck(num_pairs: int, k: int = 2, max_depth: int | None = None, *,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """A random Dyck word with ``num_pairs`` pairs, depth at most ``max_depth``.

    Left to right: open (uniform type) with probability ½ when both moves keep the word
    completable within the depth bound, otherwise the forced move; a close matches the top.
    """
    n = _validate.positive_int("num_pairs", num_pairs, minimum=0)
    k = _validate.positive_int("k", k)
    max_depth = n if max_depth is None else _validate.positive_int("max_depth", max_depth)
    if n > 0 and max_depth < 1:
        raise ValueError("max_depth must be >= 1 for a non-empty word")
    stack: list[int] = []
    out = []
    for position in range(2 * n):
        remaining = 2 * n - position - 1
        can_open = len(stack) < max_depth and len(stack) + 1 <= remaining
        can_close = bool(stack)
        coin = torch.rand((), generator=generator).item() < 0.5
        if can_open and (not can_close or coin):
            t = int(torch.randint(k, (), generator=generator))
            stack.append(t)
            out.append(t)
        else:
            out.append(k + stack.pop())
    return torch.tensor(out, dtype=torch.long)


# --- the depth trace, emitted by one attention layer ----------------------------------------------

class DepthTraceHead(nn.Module):
    r"""One causal attention layer with constant scores and a linear read-out that emits the
    depth trace (this project's construction, the standard RASP argument).

    Input: BOS then brackets. The residual stream has two coordinates, ``bos`` (1 on BOS) and
    ``sign`` (+1 open, -1 close). Constant scores give uniform weights :math:`1/(i+1)` over
    positions :math:`0..i`, so the head returns :math:`x_i = d_i/(i+1)` (values ``sign``) and
    :math:`y_i = 1/(i+1)` (values ``bos``). The read-out
    :math:`\ell_c = 2c\,x_i - c^2 y_i = (d_i^2 - (c - d_i)^2)/(i+1)` over candidate depths
    :math:`c \in [-n, n]` has its unique maximum at :math:`c = d_i`, with margin
    :math:`1/(i+1)` to every other candidate.

    Hook points (TransformerLens names and layout, one head): ``hook_embed`` the residual
    stream ``(b, n+1, 2)``; ``hook_q``, ``hook_k`` ``(b, n+1, 1, 1)``; ``hook_attn_scores``
    and ``hook_pattern`` ``(b, 1, n+1, n+1)``; ``hook_z`` the mixed stream (the values are the
    stream itself) ``(b, n+1, 1, 2)``.
    """

    def __init__(self, k: int, max_len: int, dtype, device):
        super().__init__()
        self.k, self.max_len = k, max_len
        kw = {"dtype": dtype, "device": device}
        embed = torch.zeros(2 * k + 1, 2, **kw)        # rows: opens, closes, BOS
        embed[:k, 1], embed[k:2 * k, 1], embed[2 * k, 0] = 1.0, -1.0, 1.0
        # The candidate depths are integers: the decode table stays an integer tensor, so the
        # emitted depth is exact integer arithmetic (argmax - max_len), not a float table cast
        # by ``.long()``, which truncates: a table entry 1 stored as 1 - u would emit 0.
        depths = torch.arange(-max_len, max_len + 1, device=device)
        readout = torch.stack([-depths**2, 2 * depths], 1).to(dtype)   # (2n+1, 2): on (y, x)
        self.register_buffer("embed", embed)
        self.register_buffer("W_Q", torch.zeros(1, 2, **kw))
        self.register_buffer("W_K", torch.zeros(1, 2, **kw))
        self.register_buffer("readout", readout)
        self.register_buffer("depths", depths)                     # (2n+1,) long
        self.hook_embed, self.hook_q, self.hook_k = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_scores, self.hook_pattern, self.hook_z = (HookPoint(), HookPoint(),
                                                                 HookPoint())

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Depth logits (batch, n, 2 max_len + 1) for brackets (batch, n), BOS prepended."""
        tokens = _validate.token_tensor("tokens", tokens, vocab_size=2 * self.k)
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.shape[-1] > self.max_len:
            raise ValueError(f"tokens must have length <= max_len = {self.max_len}, got "
                             f"{tokens.shape[-1]}")
        bos = torch.full((tokens.shape[0], 1), 2 * self.k, dtype=torch.long,
                         device=tokens.device)
        h = self.hook_embed(self.embed[torch.cat([bos, tokens], 1)])  # (b, n+1, 2)
        n1 = h.shape[1]
        q = hook_with_axes(self.hook_q, h @ self.W_Q.T, 2)               # (b, n+1, 1)
        k = hook_with_axes(self.hook_k, h @ self.W_K.T, 2)
        scores = hook_with_axes(self.hook_attn_scores, q @ k.transpose(1, 2), 1)  # zeros
        mask = torch.ones(n1, n1, dtype=torch.bool, device=h.device).tril()
        weights = hook_with_axes(self.hook_pattern,
                             torch.softmax(scores.masked_fill(~mask, float("-inf")), -1), 1)
        mixed = hook_with_axes(self.hook_z, weights @ h, 2)              # (b, n+1, 2): (y, x)
        return (mixed @ self.readout.T)[:, 1:]                       # drop BOS

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """The emitted depth trace (batch, n)."""
        return self.depths[self.logits(tokens).argmax(-1)]               # (b, n) long


def depth_trace_head(k: int = 2, max_len: int = 64, *, dtype: torch.dtype = torch.float64,
                     device: str | torch.device = "cpu") -> DepthTraceHead:
    """The one-layer depth-trace transformer for k bracket types and inputs up to max_len."""
    k = _validate.positive_int("k", k)
    max_len = _validate.positive_int("max_len", max_len)
    dtype = _validate.float_dtype("dtype", dtype)
    return DepthTraceHead(k, max_len, dtype, _validate.device("device", device))


def trace_by_locality(tokens, trace: tuple[int, ...], k: int = 2) -> list[int]:
    """Rebuild a member's stack-top trace from local lookups only (catalogue PR.2).

    Push of type j: the new top is j. Pop at position i of the bracket opened at position o:
    the top is the trace token just before o (``EMPTY`` if o = 0). Reads only the current
    token, the matching position and one earlier trace token.
    """
    tokens = _tokens(tokens, k)
    if not isinstance(trace, (tuple, list)) or len(trace) != len(tokens):
        raise TypeError(f"trace must be a tuple of {len(tokens)} stack tops (one per token), "
                        f"got {type(trace).__name__}"
                        + (f" of length {len(trace)}" if isinstance(trace, (tuple, list)) else ""))
    out, opened = [], []
    for i, t in enumerate(tokens):
        if t < k:
            opened.append(i)
            out.append(t)
        else:
            o = opened.pop()
            out.append(trace[o - 1] if o > 0 else EMPTY)
    return out
