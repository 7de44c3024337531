"""Argument validation shared by every public builder.

Each helper raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad
value) with a message that starts with the parameter's name, so a user never meets a shape
error from deep inside torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    """Return ``value`` if it is an int (not a bool) that is at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def positive_float(name: str, value: object, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is a finite real number > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value}")
    return value


def finite_float(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def float_dtype(name: str, dtype: object) -> torch.dtype:
    """Return ``dtype`` if it is a floating torch dtype."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {type(dtype).__name__}")
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be a floating dtype {FLOAT_DTYPES}, got {dtype}")
    return dtype


def real_tensor(
    name: str,
    value: object,
    *,
    ndim: int | Sequence[int] | None = None,
    shape: Sequence[int | None] | None = None,
    finite: bool = True,
) -> torch.Tensor:
    """Return ``value`` as a floating tensor after checking its rank, shape and finiteness.

    ``shape`` entries that are ``None`` match any size. Integer tensors and numpy arrays are
    accepted and converted, so a user can pass data in its natural form.
    """
    if not isinstance(value, torch.Tensor):
        try:
            import numpy as np

            if isinstance(value, np.ndarray):
                value = torch.from_numpy(value)
        except ImportError:  # numpy is a dependency; this is only a guard
            pass
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.is_complex():
        raise TypeError(f"{name} must be real, got dtype {value.dtype}")
    if not value.is_floating_point():
        value = value.to(torch.get_default_dtype())
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if value.ndim not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dims, "
                             f"got shape {tuple(value.shape)}")
    if shape is not None:
        if value.ndim != len(shape) or any(
            want is not None and have != want for have, want in zip(value.shape, shape, strict=True)
        ):
            want_text = tuple("*" if s is None else s for s in shape)
            raise ValueError(f"{name} must have shape {want_text}, got {tuple(value.shape)}")
    if finite and not torch.isfinite(value).all():
        raise ValueError(f"{name} must be finite (it contains NaN or inf)")
    return value


def token_tensor(name: str, value: object, *, vocab_size: int, max_len: int | None = None,
                 ndim: int | Sequence[int] = (1, 2)) -> torch.Tensor:
    """Return ``value`` if it is an integer tensor of tokens in ``[0, vocab_size)``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(value).__name__}")
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise TypeError(f"{name} must have an integer dtype, got {value.dtype}")
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if value.ndim not in allowed:
        raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dims, "
                         f"got shape {tuple(value.shape)}")
    if value.numel() and (value.min() < 0 or value.max() >= vocab_size):
        raise ValueError(f"{name} must lie in [0, {vocab_size}), got values in "
                         f"[{int(value.min())}, {int(value.max())}]")
    if max_len is not None and value.shape[-1] > max_len:
        raise ValueError(f"{name} has length {value.shape[-1]} > max_len={max_len}")
    return value.long()
