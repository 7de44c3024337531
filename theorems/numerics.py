"""Rounding bounds for checks' tolerances: :func:`gamma` and :func:`unit_roundoff`, whose one
copy lives in :mod:`constructions.numerics` (constructions state their own error bounds with
them too)."""

from constructions.numerics import gamma, gamma_at, unit_roundoff

__all__ = ["gamma", "gamma_at", "unit_roundoff"]
