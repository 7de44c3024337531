r"""The refutation of a paper's trend by a published scaling study (:mod:`theorems.trends`).

A trend claim states the paper's direction. Where the study's interval of the per-seed slopes
lies on the other side of 0, the claim is refuted at the sizes run: the check below asserts
the measured direction (so its table, figure and slope are the claim's evidence) and then runs
the statement as written, which must fail. An interval that holds 0 ends both inconclusive.
"""

from __future__ import annotations

from collections.abc import Callable

from theorems.evidence import evidence, expect_failure
from theorems.trends import DIRECTIONS, published_study, trend_check


def trend_refutation_check(study: str, quantity: str, stated: str, *,
                           load: Callable[[str, str], tuple[dict, bool]] = published_study
                           ) -> Callable[[], None]:
    """A refutation check: ``quantity`` of the published ``study`` moves against the
    ``stated`` direction (the interval decides it), so the statement fails."""
    if stated not in DIRECTIONS:
        raise ValueError(f"stated must be one of {DIRECTIONS}, got {stated!r}")
    measured = DIRECTIONS[1 - DIRECTIONS.index(stated)]

    def run() -> None:
        trend_check(study, quantity, measured, load=load)()
        evidence.counterexample(expect_failure(trend_check(study, quantity, stated, load=load)))
    return run
