"""Roles a construction declares about itself, read by the suite's derived-dependency test.

:func:`oracle` marks a function or class as an *oracle or task definition*: the reference that
says what a task asks (its data generator, its targets, the textbook algorithm a model is
compared with), not a result that a claim establishes about a construction. A claim may name
an oracle as its ``construction`` (a claim about the task, or about training on it); the
checks of other claims may then call the oracle without declaring ``depends_on`` on that
claim, because calling a definition relies on nothing that claim proves
(:func:`theorems.claims.dependency_mismatches`). Mark only what is a definition: a closed form,
a bound or a builder whose correctness some claim checks is a result, and calling it is a
dependency.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")

ORACLE = "__oracle__"


def oracle(obj: T) -> T:
    """Mark ``obj`` (a function or class, returned unchanged) as an oracle or task definition."""
    setattr(obj, ORACLE, True)
    return obj


def is_oracle(obj: object) -> bool:
    return bool(getattr(obj, ORACLE, False))
