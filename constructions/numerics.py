r"""Floating-point error bounds that checks derive their tolerances from.

The standard model (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §2–3):
every elementary operation returns :math:`\mathrm{fl}(a \circ b) = (a \circ b)(1 + \delta)`
with :math:`|\delta| \le u`, the unit roundoff. A sum or dot product of :math:`n` terms is
then accurate to :math:`\gamma_n \sum_i |a_i b_i|` with :math:`\gamma_n = nu/(1 - nu)`. A
tolerance built as ``gamma(n) * (the same computation on absolute values)`` is a rigorous
first-order bound, and a check that exceeds it has found a real discrepancy, not noise.

The one copy of these bounds: constructions use them to state their own error bounds (for
example :func:`constructions.boltzmann.context_id_error_bound`), and checks import them through
:mod:`theorems.numerics`.
"""

from __future__ import annotations

import math
import numbers

import torch

from constructions import _validate


def unit_roundoff(dtype: torch.dtype = torch.float64) -> float:
    """:math:`u = \\epsilon_{mach}/2`: 1.1e-16 for float64, 6.0e-8 for float32."""
    return torch.finfo(_validate.float_dtype("dtype", dtype)).eps / 2


def gamma(n: int, dtype: torch.dtype = torch.float64) -> float:
    """:math:`\\gamma_n = nu/(1 - nu)`, the relative error bound of an n-term sum or product."""
    if isinstance(n, bool) or not isinstance(n, numbers.Real):
        raise TypeError(f"n must be a real number (a count), got {type(n).__name__}")
    if not math.isfinite(n) or n < 0:
        raise ValueError(f"n must be finite and >= 0, got {n}")
    nu = n * unit_roundoff(dtype)
    if nu >= 1:
        raise ValueError(f"n * u must be < 1 for the bound to hold, got n={n}")
    return gamma_at(n, unit_roundoff(dtype))


def gamma_at(n: float | torch.Tensor, u: float) -> float | torch.Tensor:
    r""":math:`\gamma_n = nu/(1 - nu)` at a given unit roundoff ``u`` (``u = 0`` is exact
    arithmetic and gives 0; a scaled ``u`` bounds a computation in a coarser precision), for a
    count ``n`` or a tensor of counts (elementwise); :math:`nu < 1` is required."""
    if isinstance(u, bool) or not isinstance(u, numbers.Real) or not 0 <= u < 1:
        raise ValueError(f"u must be a unit roundoff in [0, 1), got {u!r}")
    if isinstance(n, torch.Tensor):
        n = _validate.real_tensor("n", n)
        if not bool(((n >= 0) & (n * u < 1)).all()):
            raise ValueError("n must hold counts >= 0 with n * u < 1 for the bound to hold")
    else:
        if isinstance(n, bool) or not isinstance(n, numbers.Real):
            raise TypeError(f"n must be a real number (a count) or a tensor, got "
                            f"{type(n).__name__}")
        if not math.isfinite(n) or n < 0 or n * u >= 1:
            raise ValueError(f"n must be a count >= 0 with n * u < 1, got n={n}")
    nu = n * u
    return nu / (1 - nu)
