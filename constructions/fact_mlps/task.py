r"""The fact-storage task: fact sets of keys, values and a fact map, and prompts for the one-layer
fact transformer.
"""

from __future__ import annotations

import torch

from constructions import _validate

# --- the task ---------------------------------------------------------------------------------

def _fact_set(keys, values, facts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate a fact set: keys ``(F, d)``, values ``(|V|, d_v)``, facts ``(F,)`` in ``[0, |V|)``.

    Returns float64 keys and values and long facts. Raises ``ValueError`` naming the argument
    whose shape, range or finiteness is wrong.
    """
    keys = _validate.real_tensor("keys", keys, ndim=2).to(torch.float64)
    values = _validate.real_tensor("values", values, ndim=2).to(torch.float64)
    if keys.shape[0] < 1 or keys.shape[1] < 1:
        raise ValueError(f"keys must have at least one row and one column, got {tuple(keys.shape)}")
    if values.shape[0] < 1 or values.shape[1] < 1:
        raise ValueError(f"values must have at least one row and one column, "
                         f"got {tuple(values.shape)}")
    facts = _validate.token_tensor("facts", facts, vocab_size=values.shape[0], ndim=1)
    if facts.shape[0] != keys.shape[0]:
        raise ValueError(f"facts must have one entry per key ({keys.shape[0]}), "
                         f"got shape {tuple(facts.shape)}")
    return keys, values, facts.to(keys.device)


def _conflicting_keys(keys: torch.Tensor, facts: torch.Tensor) -> tuple[int, int] | None:
    """A pair ``(i, j)`` of identical keys with different facts (an infeasible set), or None."""
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    first: dict[int, int] = {}
    for i, group in enumerate(inverse.tolist()):
        j = first.setdefault(group, i)
        if facts[i] != facts[j]:
            return j, i
    return None


def _storage_margins(model, keys, values, facts) -> torch.Tensor:
    r"""Per-key margins :math:`\mu_i = \langle g(k_i), v_{f(i)} - v_j\rangle` minimised over
    :math:`j \ne f(i)`; ``+inf`` when there is a single value. Positive means stored."""
    if not callable(model):
        raise TypeError(f"model must be callable (an nn.Module), got {type(model).__name__}")
    keys, values, facts = _fact_set(keys, values, facts)
    with torch.no_grad():
        try:
            out = model(keys)
        except (ValueError, RuntimeError) as error:
            raise ValueError(f"model cannot be applied to keys of shape {tuple(keys.shape)}: "
                             f"{error}") from None
        out = out.to(torch.float64)
    if out.shape != (keys.shape[0], values.shape[1]):
        raise ValueError(f"model must map keys {tuple(keys.shape)} to outputs of width "
                         f"{values.shape[1]} (that of values), got shape {tuple(out.shape)}")
    scores = out @ values.T
    correct = scores.gather(1, facts[:, None]).squeeze(1)
    rivals = scores.scatter(1, facts[:, None], float("-inf"))
    return correct - rivals.amax(dim=1)


def recall(model, keys, values, facts) -> tuple[float, float]:
    """``(accuracy, minimum margin)``: the fraction of keys stored and the smallest margin."""
    margins = _storage_margins(model, keys, values, facts)
    return float((margins > 0).double().mean()), float(margins.min())


