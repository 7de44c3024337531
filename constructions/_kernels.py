"""Unchecked tensor helpers shared by several construction modules: the views through which
a hook point sees a tensor in TransformerLens's layout, and the LayerNorm with no epsilon.

Not user API (the module is private, like ``_validate``): the callers have validated their
arguments, and these run inside every forward pass, so they check nothing themselves.
"""

from __future__ import annotations

import torch
from torch import nn


def hook_transposed(hook: nn.Module, x: torch.Tensor, dim0: int, dim1: int) -> torch.Tensor:
    """``x`` passed through ``hook`` as the view with dims ``dim0`` and ``dim1`` swapped (the
    hook's layout), and swapped back: with an identity hook, ``x``'s values and strides."""
    return hook(x.transpose(dim0, dim1)).transpose(dim0, dim1)


def hook_with_axes(hook: nn.Module, x: torch.Tensor, dim: int, count: int = 1) -> torch.Tensor:
    """``x`` passed through ``hook`` with ``count`` singleton axes inserted at ``dim`` (the
    head or position axis TransformerLens has and a one-head or one-query construction lacks),
    and removed again: with an identity hook, ``x``'s values and strides."""
    for _ in range(count):
        x = x.unsqueeze(dim)
    x = hook(x)
    for _ in range(count):
        x = x.squeeze(dim)
    return x


def layer_norm_without_eps(x: torch.Tensor) -> torch.Tensor:
    r"""LayerNorm with no gain, bias or :math:`\varepsilon`: :math:`(x - \bar x)/\sigma(x)`
    over the last axis."""
    return nn.functional.layer_norm(x, (x.shape[-1],), eps=0.0)
