"""Argument validation shared by every public builder.

Each helper raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad
value) with a message that starts with the parameter's name, so a user never meets a shape
error from deep inside torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
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
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
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


def boolean(name: str, value: object) -> bool:
    """Return ``value`` if it is a bool (numpy bools included; not an int or a string)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def instance(name: str, value: object, kind: type | tuple[type, ...]) -> object:
    """Return ``value`` if it is an instance of ``kind`` (a class or a tuple of classes)."""
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        raise TypeError(f"{name} must be a {' or '.join(k.__name__ for k in kinds)}, "
                        f"got {type(value).__name__}")
    return value


def choice(name: str, value: object, options: Sequence[object]) -> object:
    """Return ``value`` if it is one of ``options`` (compared by equality, strings mostly)."""
    if isinstance(value, bool) or not any(type(value) is type(o) and value == o
                                          for o in options):
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")
    return value


def generator(name: str, value: object) -> torch.Generator | None:
    """Return ``value`` if it is ``None`` or a ``torch.Generator``."""
    if value is not None and not isinstance(value, torch.Generator):
        raise TypeError(f"{name} must be a torch.Generator or None, got {type(value).__name__}")
    return value


def device(name: str, value: object) -> torch.device:
    """Return ``value`` (``None`` meaning the CPU, a string or a ``torch.device``) as a device."""
    if value is None:
        return torch.device("cpu")
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} must be a torch.device, a string or None, "
                        f"got {type(value).__name__}")
    try:
        return torch.device(value)
    except RuntimeError as error:
        raise ValueError(f"{name} is not a device: {value!r} ({error})") from None


def nonempty(name: str, value: torch.Tensor) -> torch.Tensor:
    """Return ``value`` if no dimension of it is 0."""
    if value.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(value.shape)}")
    return value


def square_matrix(name: str, value: object, *, size: int | None = None,
                  finite: bool = True) -> torch.Tensor:
    """Return ``value`` as a real, non-empty, square ``(size, size)`` matrix."""
    value = real_tensor(name, value, ndim=2, finite=finite)
    if value.shape[0] != value.shape[1] or value.shape[0] < 1:
        raise ValueError(f"{name} must be a square matrix, got shape {tuple(value.shape)}")
    if size is not None and value.shape[0] != size:
        raise ValueError(f"{name} must have shape ({size}, {size}), got {tuple(value.shape)}")
    return value


def spd_matrix(name: str, value: object, d: int | None = None) -> torch.Tensor:
    r"""Return ``value`` as a float64 symmetric positive-definite matrix, or raise ValueError.

    Symmetry is required to within :math:`\sqrt u\,\max|A_{ij}|` (:math:`u` the float64 unit
    roundoff): a symmetric matrix computed in floating point, such as an inverse, is symmetric
    only to about :math:`\mathrm{cond}(A)\,u`, and anything further off is not meant to be
    symmetric. The result is symmetrised; positive definiteness is decided by Cholesky.
    """
    A = real_tensor(name, value, ndim=2).to(torch.float64)
    if A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ValueError(f"{name} must be a square d x d matrix, got shape {tuple(A.shape)}")
    if d is not None and A.shape[0] != d:
        raise ValueError(f"{name} must be {d} x {d} to match Sigma, got shape {tuple(A.shape)}")
    asymmetry = float((A - A.T).abs().max())
    if asymmetry > math.sqrt(torch.finfo(torch.float64).eps / 2) * float(A.abs().max()):
        raise ValueError(f"{name} must be symmetric, got max |A - A^T| = {asymmetry:.3g}")
    A = (A + A.T) / 2
    if torch.linalg.cholesky_ex(A).info != 0:
        raise ValueError(f"{name} must be positive definite (its Cholesky factorisation failed)")
    return A


def probability_vector(name: str, value: object, *, size: int | None = None) -> torch.Tensor:
    r"""Return ``value`` as a float64 vector of non-negative entries summing to 1.

    The sum is allowed to miss 1 by :math:`\sqrt u` (:math:`u` the float64 unit roundoff):
    far above the :math:`\gamma_n` error of normalising n weights in floating point, far below
    any intended deviation.
    """
    p = real_tensor(name, value, ndim=1, shape=None if size is None else (size,))
    p = nonempty(name, p).to(torch.float64)
    if (p < 0).any():
        raise ValueError(f"{name} must be non-negative, got min {float(p.min()):.3g}")
    if abs(float(p.sum()) - 1) > math.sqrt(torch.finfo(torch.float64).eps / 2):
        raise ValueError(f"{name} must sum to 1, got {float(p.sum()):.17g}")
    return p


def int_array(name: str, value: object, *, low: int | None = None, high: int | None = None,
              min_ndim: int = 0):
    """Return ``value`` as a numpy integer array with entries in ``[low, high]``.

    ``min_ndim`` is the least number of dims; with ``min_ndim >= 1`` the last dim must be
    non-empty too (it is an axis the function reduces, such as digit columns).
    """
    if isinstance(value, torch.Tensor):
        value = value.numpy()
    if isinstance(value, (str, bytes)) or not isinstance(value, (np.ndarray, int, np.integer,
                                                                  list, tuple)):
        raise TypeError(f"{name} must be an integer array, got {type(value).__name__}")
    value = np.asarray(value)
    if not np.issubdtype(value.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {value.dtype}")
    if value.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dims, got shape {value.shape}")
    if min_ndim >= 1 and value.shape[-1] == 0:
        raise ValueError(f"{name} must have a non-empty last dim, got shape {value.shape}")
    if value.size and ((low is not None and value.min() < low)
                       or (high is not None and value.max() > high)):
        raise ValueError(f"{name} must lie in [{low}, {high}], got values in "
                         f"[{value.min()}, {value.max()}]")
    return value


def numeric_tensor(name: str, value: object, *, ndim: int | Sequence[int] | None = None,
                   min_ndim: int = 0, finite: bool = True) -> torch.Tensor:
    """Return ``value`` unchanged if it is a real or complex, non-empty tensor of the given
    rank (``ndim``, or at least ``min_ndim``) with finite entries."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype == torch.bool:
        raise TypeError(f"{name} must be a numeric tensor, got dtype {value.dtype}")
    allowed = None if ndim is None else (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if (allowed is not None and value.ndim not in allowed) or value.ndim < min_ndim:
        want = " or ".join(map(str, allowed)) if allowed is not None else f">= {min_ndim}"
        raise ValueError(f"{name} must have {want} dims, got shape {tuple(value.shape)}")
    nonempty(name, value)
    entries = torch.view_as_real(value) if value.is_complex() else value
    if finite and entries.is_floating_point() and not bool(torch.isfinite(entries).all()):
        raise ValueError(f"{name} must be finite (it contains NaN or inf)")
    return value


def real_number(name: str, value: object) -> object:
    """Return ``value`` unchanged if it is a real number: finite when it is a float, and
    exact (``int``, ``Fraction``) or symbolic (a SymPy expression) values pass as they are."""
    import numbers

    if isinstance(value, (bool, str, bytes)) or not (
            isinstance(value, numbers.Real) or hasattr(value, "free_symbols")):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def seed(name: str, value: object) -> int:
    """Return ``value`` if it is a non-negative int: a seed for ``torch.Generator``."""
    return positive_int(name, value, minimum=0)


def matching(name: str, value: torch.Tensor, size: int, *, dim: int = -1,
             to: str = "") -> torch.Tensor:
    """Return ``value`` if it has ``size`` entries along ``dim`` (and at least ``|dim|`` or
    ``dim + 1`` dims); ``to`` names what the size comes from, for the message."""
    rank_ok = value.ndim >= (-dim if dim < 0 else dim + 1)
    if not rank_ok or value.shape[dim] != size:
        source = f" to match {to}" if to else ""
        raise ValueError(f"{name} must have size {size} in dim {dim}{source}, "
                         f"got shape {tuple(value.shape)}")
    return value


def count(name: str, value: object, *, minimum: int = 1) -> object:
    """Return ``value`` if it is an int >= ``minimum``, or a symbolic (SymPy) value, which
    passes as it is: a count that a formula also takes as a symbol."""
    if hasattr(value, "free_symbols") and not isinstance(value, (int, float)):
        return value
    return positive_int(name, value, minimum=minimum)


def math_library(name: str, value: object, needs: Sequence[str]) -> object:
    """Return ``value`` if it is a module (``math``, ``sympy``, ``mpmath``...) with every
    function named in ``needs``."""
    import types

    if not isinstance(value, types.ModuleType):
        raise TypeError(f"{name} must be a module such as math or sympy, "
                        f"got {type(value).__name__}")
    missing = [f for f in needs if not hasattr(value, f)]
    if missing:
        raise ValueError(f"{name} must provide {', '.join(missing)}")
    return value


def complex_tensor(name: str, value: object, *, ndim) -> torch.Tensor:
    """A complex tensor (real input is promoted), with its rank checked and finite entries."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype == torch.bool:
        raise TypeError(f"{name} must be a numeric tensor, got dtype {value.dtype}")
    if not value.is_complex():
        value = value.to(torch.complex64 if value.dtype == torch.float32 else torch.complex128)
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if value.ndim not in allowed:
        raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dims, "
                         f"got shape {tuple(value.shape)}")
    if not bool(torch.isfinite(torch.view_as_real(value)).all()):
        raise ValueError(f"{name} must be finite (it contains NaN or inf)")
    return value
