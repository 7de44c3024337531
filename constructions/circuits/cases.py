"""Every circuit case, registered in one fixed order, and how to find one.

The cases are defined in :mod:`constructions.circuits.induction_cases` (the induction
constructions, their variants and gauges), :mod:`constructions.circuits.native_cases` (the
majority head and one-step GD, which do not export to TransformerLens) and
:mod:`constructions.circuits.stress_cases` (backup heads, a distractor, superposed features),
imported here by name; this module registers them in
:data:`~constructions.circuits.case.CASES`. A new case is a
:class:`~constructions.circuits.CircuitCase` in one of those modules (or a new one imported
here) and a place in the tuple below.

The order is part of the benchmark: the discovery harness (:mod:`empirics.circuit_discovery`)
draws each case's prompts from the stream numbered by its position in :func:`all_cases`, and
the docs list the cases in it.
"""

from __future__ import annotations

from constructions.circuits.case import CASES, CircuitCase
from constructions.circuits.induction_cases import GAUGE_VARIANTS, INDUCTION_CASES
from constructions.circuits.native_cases import NATIVE_CASES
from constructions.circuits.stress_cases import STRESS_CASES

# the stress cases came last (issue 35): appended, they leave every earlier case's stream as it was
for _case in (*INDUCTION_CASES, *NATIVE_CASES, *GAUGE_VARIANTS.values(), *STRESS_CASES):
    _case.register()


def all_cases() -> dict[str, CircuitCase]:
    """Every registered case, by name, in registration order."""
    return CASES


def case_for_builder(path: str) -> CircuitCase | None:
    """The first case whose model builder or circuit builder is ``path`` (``"module:name"``),
    or None."""
    if not isinstance(path, str):
        raise TypeError(f"path must be a 'module:name' string, got {type(path).__name__}")
    for case in all_cases().values():
        if path in (case.builder, case.circuit_builder):
            return case
    return None
