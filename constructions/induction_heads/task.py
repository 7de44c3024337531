r"""The induction-heads task as an oracle: previous occurrences, targets and keys.
"""

from __future__ import annotations

import torch

from constructions._roles import oracle
from constructions.induction_heads._shared import NO_MATCH

# --- the task -----------------------------------------------------------------------------

def _as_tokens(tokens: object) -> torch.Tensor:
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a torch.Tensor of token ids, got {type(tokens).__name__}")
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must have an integer dtype, got {tokens.dtype}")
    if tokens.ndim < 1:
        raise ValueError("tokens must have shape (..., n), got a scalar")
    if tokens.numel() and tokens.min() < 0:
        raise ValueError(f"tokens must be >= 0, got {int(tokens.min())}")
    return tokens.long()


def previous_occurrence(tokens: torch.Tensor) -> torch.Tensor:
    r""":math:`j^\star_i = \max\{j < i : \sigma_j = \sigma_i\}` (0-indexed), or -1 if none.

    ``tokens`` is an integer tensor of shape ``(..., n)``; the result has the same shape.
    """
    tokens = _as_tokens(tokens)
    n = tokens.shape[-1]
    earlier = torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril(-1)  # j < i
    equal = (tokens.unsqueeze(-1) == tokens.unsqueeze(-2)) & earlier
    index = torch.arange(n, device=tokens.device).expand_as(equal)
    return torch.where(equal, index, -1).amax(dim=-1) if n else tokens.clone()


@oracle
def induction_targets(tokens: torch.Tensor) -> torch.Tensor:
    r"""The induction-heads task: :math:`\tau_i = \sigma_{j^\star+1}`, or ``-1`` for :math:`\bot`.

    ``tokens``: integer tensor of shape ``(..., n)`` with values in ``[0, vocab_size)``.
    Returns a LongTensor of the same shape. Since :math:`j^\star < i`, the target is a token
    at a position :math:`\le i`, so the task is causal.
    """
    tokens = _as_tokens(tokens)
    previous = previous_occurrence(tokens)
    following = tokens.gather(-1, (previous + 1).clamp(max=max(tokens.shape[-1] - 1, 0)))
    return torch.where(previous >= 0, following, NO_MATCH)


def induction_keys(tokens: torch.Tensor) -> torch.Tensor:
    r"""The model position an exact induction head must attend to, per query position.

    With the BOS at model position 0 and :math:`\sigma_t` (1-indexed) at position :math:`t`,
    the key holding :math:`\tau_i` is :math:`j^\star + 1`, and BOS (0) when there is no earlier
    occurrence. Returned for the real tokens only: shape ``(..., n)``, values in ``[0, n]``.
    """
    previous = previous_occurrence(tokens)  # 0-indexed j*, at model position j* + 1
    return torch.where(previous >= 0, previous + 2, 0)


