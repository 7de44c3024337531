"""Gauge-invariant comparisons between a trained model and a construction.

Raw weights are not comparable: a trained model may differ from a construction by any
reparametrisation that leaves its function unchanged (a rescaling of W_Q against W_K, a
rotation of the residual stream, a sign flip shared by two factors). Every helper here
compares quantities that such gauges leave fixed: effective maps, attention patterns,
outputs on held-out inputs, recall.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
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


def effective_map(*factors: torch.Tensor) -> torch.Tensor:
    """The product ``factors[0] @ factors[1] @ ...``: the gauge-invariant map a chain of
    weights computes (e.g. ``W_Q @ W_K.T`` for scores, ``W_V @ W_O`` for the OV circuit)."""
    if not factors:
        raise ValueError("effective_map needs at least one factor")
    out = factors[0].detach().double()
    for factor in factors[1:]:
        out = out @ factor.detach().double()
    return out


def line_angle(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r"""Angle in degrees between the *lines* through ``u`` and ``v``, in ``[0, 90]``.

    Batched over the leading dims of ``u`` (last dim is the vector). It is
    :math:`\arccos(|\cos\theta|)`, so it ignores sign, which a gauge may flip; it equals the
    authors' ``90 - |acos(cos) - 90|`` of Brody et al. (2023). A zero vector has no line and
    gives NaN.
    """
    u, v = u.detach().double(), v.detach().double().to(u.device)
    cos = (u @ v) / (u.norm(dim=-1) * v.norm())
    return torch.rad2deg(torch.acos(cos.abs().clamp(max=1.0)))


def pattern_distance(pattern: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean total-variation distance between attention rows, in ``[0, 1]``.

    ``pattern`` and ``reference`` are ``(..., n_queries, n_keys)`` with rows summing to 1
    (e.g. a trained head and the construction's head on the same inputs). 0 means identical
    patterns; 1 means disjoint supports.
    """
    if pattern.shape != reference.shape:
        raise ValueError(f"pattern and reference must have the same shape, got "
                         f"{tuple(pattern.shape)} and {tuple(reference.shape)}")
    difference = pattern.detach().double() - reference.detach().double().to(pattern.device)
    return float(0.5 * difference.abs().sum(-1).mean())


def loglog_slope(x: Sequence[float], y: Sequence[float],
                 sem: Sequence[float] | None = None) -> dict[str, float]:
    r"""The least-squares slope of :math:`\log y` on :math:`\log x`, with its standard error.

    The slope is :math:`\hat s = \sum_k c_k \log y_k` with
    :math:`c_k = (\log x_k - \overline{\log x})/S_{xx}`. Its standard error is

    * with ``sem`` (each :math:`y_k` a mean with standard error :math:`\sigma_k`), the delta
      method: :math:`\mathrm{Var}\log y_k \approx (\sigma_k/y_k)^2`, so
      :math:`\mathrm{SE} = \sqrt{\sum_k c_k^2 (\sigma_k/y_k)^2}`;
    * without, from the residuals: :math:`\sqrt{\mathrm{RSS}/((n-2) S_{xx})}` (infinite for
      two points).

    Returns ``{"slope", "se", "intercept", "n"}``.
    """
    lx = np.log(np.asarray(x, dtype=float))
    ly = np.log(np.asarray(y, dtype=float))
    n = len(lx)
    centred = lx - lx.mean()
    sxx = float(np.sum(centred**2))
    c = centred / sxx
    slope = float(c @ ly)
    intercept = float(ly.mean() - slope * lx.mean())
    if sem is not None:
        relative = np.asarray(sem, dtype=float) / np.exp(ly)
        se = float(np.sqrt(np.sum(c**2 * relative**2)))
    else:
        residual = ly - (slope * lx + intercept)
        se = math.sqrt(float(np.sum(residual**2)) / (n - 2) / sxx) if n > 2 else math.inf
    return {"slope": slope, "se": se, "intercept": intercept, "n": n}
