"""Gauge-invariant comparisons between a trained model and a construction.

Raw weights are not comparable: a trained model may differ from a construction by any
reparametrisation that leaves its function unchanged (a rescaling of W_Q against W_K, a
rotation of the residual stream, a sign flip shared by two factors). Every helper here
compares quantities that such gauges leave fixed: effective maps, attention patterns,
outputs on held-out inputs, recall.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two effective maps (or any tensors), flattened."""
    a, b = a.detach().flatten().double(), b.detach().flatten().double()
    return float(a @ b / (a.norm() * b.norm()))


def relative_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """``|a - b| / |b|`` in the Frobenius norm: how far ``a`` is from the reference ``b``."""
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


def attention_mass(pattern: torch.Tensor, expected: torch.Tensor) -> float:
    """Mean attention weight that queries put on their expected key.

    ``pattern`` is ``(..., n_queries, n_keys)`` and ``expected`` is ``(..., n_queries)``
    holding the expected key index per query, or ``-1`` for queries to ignore.
    """
    keep = expected >= 0
    if not keep.any():
        return float("nan")
    picked = pattern.detach().gather(-1, expected.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    return float(picked[keep].double().mean())


@torch.no_grad()
def function_distance(model: Callable, reference: Callable, inputs) -> float:
    """RMS of ``model(x) - reference(x)`` over held-out inputs, relative to RMS ``reference(x)``."""
    out, ref = model(inputs).double(), reference(inputs).double()
    return float((out - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt())


def recall_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Fraction of positions whose argmax equals the target; targets of ``-1`` are ignored."""
    keep = targets >= 0
    if not keep.any():
        return float("nan")
    return float((logits.detach().argmax(-1)[keep] == targets[keep]).double().mean())
