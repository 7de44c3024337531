r"""Positional lifting: the one way, shared by the areas, to make a permutation-equivariant
layer order-aware.

Softmax self-attention, residuals and token-wise maps are permutation-equivariant: with
:math:`P_\sigma` permuting the rows of :math:`X`, :math:`T(P_\sigma X) = P_\sigma T(X)`. Appending
a one-hot position to every token, :math:`x_k \mapsto x_k \oplus s\,e_k`, breaks that symmetry,
since the lifted sequence of a permuted input is no longer a permutation of the lifted input.
Two refutations use it (that a permutation-equivariant layer cannot separate ordered inputs,
and that a single layer without positions is not universal): as the mutant that they must not
survive, and as the corrected hypothesis.
"""

from __future__ import annotations

import torch

from constructions import _validate


def lift_positions(x, scale: float = 2.0) -> torch.Tensor:
    r"""Append :math:`s\,e_k` to token :math:`k`: ``(..., n, d)`` to ``(..., n, d + n)``.

    ``x`` holds sequences of ``n`` tokens along its second-to-last dimension; ``scale`` is
    :math:`s`.
    """
    x = _validate.real_tensor("x", x)
    if x.ndim >= 2:
        _validate.nonempty("x", x)
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., n, d), got {tuple(x.shape)}")
    scale = _validate.finite_float("scale", scale)
    n = x.shape[-2]
    positions = scale * torch.eye(n, dtype=x.dtype, device=x.device)
    return torch.cat([x, positions.expand(*x.shape[:-1], n)], dim=-1)
