"""The circuit cases' old import path: the code lives in :mod:`constructions.circuits`."""

from constructions.circuits import (
    CASES,
    CircuitCase,
    all_cases,
    case_for_builder,
    sample_earlier_occurrence_pairs,
    sample_next_token_pairs,
)

__all__ = ["CASES", "CircuitCase", "all_cases", "case_for_builder",
           "sample_earlier_occurrence_pairs", "sample_next_token_pairs"]
