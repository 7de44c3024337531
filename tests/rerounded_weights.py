"""Weights re-rounded by one unit roundoff: the soundness harness's equivalent mutant
(tests/test_soundness.py), also used by mutants that must show a construction *needs* a fix
against it (tests/test_cot_and_looping.py)."""

from __future__ import annotations

import torch


def rerounded(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Multiply every floating parameter and buffer of ``module`` by ``1 ± u`` in place (on
    fresh copies, so tensors the builder shares with its caller stay untouched)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for sub in module.modules():
            for store in (sub._parameters, sub._buffers):
                for name, tensor in list(store.items()):
                    if tensor is None or not tensor.is_floating_point():
                        continue
                    u = torch.finfo(tensor.dtype).eps / 2
                    sign = torch.randint(0, 2, tensor.shape, generator=generator) * 2 - 1
                    new = tensor.detach().clone() * (1 + u * sign.to(tensor.dtype))
                    if isinstance(tensor, torch.nn.Parameter):
                        store[name] = torch.nn.Parameter(new, requires_grad=tensor.requires_grad)
                    else:
                        store[name] = new
    return module
