r"""The two corruptions of an induction prompt, and the metric the induction circuits are
defined for.

:func:`resample_next_token` changes *what* the induction head copies (the token after the
latest earlier occurrence of the final token), :func:`resample_earlier_occurrence` *where* it
attends (the one earlier occurrence itself); :func:`logit_difference` is the final-position
logit difference between the clean and the corrupted target.
"""

from __future__ import annotations

import torch

from constructions import _validate
from constructions.induction_heads.task import induction_targets, previous_occurrence


def _prompt_batch(tokens: object, vocab_size: object) -> tuple[torch.Tensor, torch.Tensor,
                                                                 torch.Tensor]:
    """(tokens as given, as a (B, n) batch, the final token's latest earlier occurrence)."""
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    tokens = _validate.token_tensor("tokens", tokens, vocab_size=vocab_size)
    batch = tokens if tokens.ndim == 2 else tokens.unsqueeze(0)
    if batch.shape[-1] < 3 or batch.shape[0] == 0:
        raise ValueError(f"tokens must hold at least one prompt of length >= 3, got shape "
                         f"{tuple(tokens.shape)}")
    return tokens, batch, previous_occurrence(batch)[:, -1]                  # (B,)


def _replacements(replacement: object, previous: torch.Tensor, vocab_size: int
                  ) -> torch.Tensor:
    """``replacement`` (an int or a (B,) tensor) as a (B,) tensor of tokens."""
    if isinstance(replacement, int) and not isinstance(replacement, bool):
        replacement = torch.full_like(previous, replacement)
    replacement = _validate.token_tensor("replacement", replacement, vocab_size=vocab_size,
                                         ndim=1)
    if replacement.shape != previous.shape:
        raise ValueError(f"replacement must have shape {tuple(previous.shape)}, "
                         f"got {tuple(replacement.shape)}")
    return replacement


def resample_next_token(tokens: torch.Tensor, replacement: torch.Tensor | int,
                        vocab_size: int) -> torch.Tensor:
    r"""The corrupted prompt: the token after the latest earlier occurrence of the final token
    replaced by ``replacement``.

    ``tokens`` ``(B, n)`` or ``(n,)``: at the final position :math:`i`, let :math:`j^\star` be
    the latest earlier occurrence of :math:`\sigma_i`; it must exist with
    :math:`j^\star + 1 < i`, so that the replaced token is not the current one.
    ``replacement`` (an int or a ``(B,)`` tensor) must differ from the old token
    :math:`\tau_i` and from :math:`\sigma_i`; then the corrupted target is ``replacement``.
    """
    tokens, batch, previous = _prompt_batch(tokens, vocab_size)
    n = batch.shape[-1]
    if bool(((previous < 0) | (previous + 1 >= n - 1)).any()):
        raise ValueError("tokens must have, at the final position, an earlier occurrence "
                         "j* of the final token with j* + 1 < n - 1")
    replacement = _replacements(replacement, previous, vocab_size)
    rows = torch.arange(batch.shape[0])
    old = batch[rows, previous + 1]
    if bool(((replacement == old) | (replacement == batch[:, -1])).any()):
        raise ValueError("replacement must differ from the replaced token and the final token")
    corrupted = batch.clone()
    corrupted[rows, previous + 1] = replacement
    return corrupted if tokens.ndim == 2 else corrupted[0]


def resample_earlier_occurrence(tokens: torch.Tensor, replacement: torch.Tensor | int,
                                vocab_size: int) -> torch.Tensor:
    r"""The corrupted prompt: the one earlier occurrence of the final token replaced by
    ``replacement``.

    ``tokens`` ``(B, n)`` or ``(n,)``: the final token :math:`a = \sigma_i` must occur exactly
    once before position :math:`i`, at :math:`j^\star` with :math:`j^\star + 1 < i`, so that
    the copied token :math:`\tau = \sigma_{j^\star+1}` is not :math:`a`. ``replacement``
    (an int or a ``(B,)`` tensor) :math:`a'` must differ from :math:`a` and :math:`\tau`.
    The corrupted prompt has no earlier occurrence of :math:`a`: its target is :math:`\bot`.
    """
    tokens, batch, previous = _prompt_batch(tokens, vocab_size)
    n = batch.shape[-1]
    count = (batch[:, :-1] == batch[:, -1:]).sum(-1)                     # (B,)
    if bool(((count != 1) | (previous + 1 >= n - 1)).any()):
        raise ValueError("tokens must have, before the final position, exactly one "
                         "occurrence j* of the final token, with j* + 1 < n - 1")
    replacement = _replacements(replacement, previous, vocab_size)
    rows = torch.arange(batch.shape[0])
    copied = batch[rows, previous + 1]
    if bool(((replacement == copied) | (replacement == batch[:, -1])).any()):
        raise ValueError("replacement must differ from the final token and the token after "
                         "its earlier occurrence")
    corrupted = batch.clone()
    corrupted[rows, previous] = replacement
    return corrupted if tokens.ndim == 2 else corrupted[0]


def logit_difference(logits: torch.Tensor, clean: torch.Tensor, corrupted: torch.Tensor
                     ) -> torch.Tensor:
    r"""The metric :math:`\ell_{i,\tau} - \ell_{i,\tau'}` at the final position :math:`i`.

    ``logits`` ``(B, n, C)`` with :math:`C = S + 1` classes (the last one :math:`\bot`);
    ``clean``, ``corrupted`` ``(B, n)`` prompts over :math:`S` tokens, whose final oracle
    targets (:func:`~constructions.induction_heads.induction_targets`) are :math:`\tau` and
    :math:`\tau'`; a final position with no earlier occurrence has target :math:`\bot`, the
    class :math:`S` (the constructions' "no match" output). Returns ``(B,)``.
    """
    logits = _validate.real_tensor("logits", logits, ndim=3)
    if logits.shape[0] == 0 or logits.shape[1] == 0 or logits.shape[2] < 2:
        raise ValueError(f"logits must have shape (B, n, C) with B, n >= 1 and C >= 2, got "
                         f"{tuple(logits.shape)}")
    classes = logits.shape[-1]
    targets = []
    for name, prompt in (("clean", clean), ("corrupted", corrupted)):
        prompt = _validate.token_tensor(name, prompt, vocab_size=classes - 1, ndim=2)
        if prompt.shape != logits.shape[:2]:
            raise ValueError(f"{name} must have the shape (B, n) = {tuple(logits.shape[:2])} of "
                             f"logits, got {tuple(prompt.shape)}")
        target = induction_targets(prompt.to(logits.device))[:, -1]
        targets.append(torch.where(target < 0, classes - 1, target).unsqueeze(-1))
    final = logits[:, -1]                                                # (B, C)
    return (final.gather(-1, targets[0]) - final.gather(-1, targets[1])).squeeze(-1)


# --- edge patching on the native hook points ------------------------------------------------
