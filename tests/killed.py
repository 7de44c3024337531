"""Which assertion a mutant's check failed at (CONTRIBUTING.md, "The audit protocol").

:func:`theorems.evidence.expect_failure` returns a Hypothesis check's falsifying example, not
the message of the assertion it failed at; a mutant that must show *which* sentence it kills
reads that message here.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis.errors import HypothesisDeprecationWarning, InvalidArgument

from theorems.evidence import expect_failure
from theorems.profiles import without_shrinking


def failed_assertion(check: Callable[[], None]) -> str:
    """Run ``check`` through :func:`~theorems.evidence.expect_failure` (which requires it to
    fail with an assertion) and return the message of each assertion it failed at, one a
    line, followed by expect_failure's own report."""
    messages: list[str] = []

    def collect(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                collect(inner)
        elif isinstance(error, AssertionError):
            messages.append(str(error))

    def run() -> None:
        try:
            check()
        except (AssertionError, BaseExceptionGroup) as error:
            collect(error)
            raise

    report = expect_failure(run)
    return "\n".join([*messages, report])


def fails_at(check: Callable[..., None], match: str, *, literal: bool = False,
             **case: Any) -> str:
    """A Hypothesis ``check`` fails, and on the pinned ``case`` it fails at the assertion whose
    message matches ``match`` (a regular expression; ``literal=True`` for plain text): the
    assertion of the sentence the mutant breaks. Returns that message.

    A Hypothesis report names only the falsifying example, so the pinned case is replayed
    through ``check.hypothesis.inner_test``; a check that calls ``assume()`` only warns there
    (outside Hypothesis), which is silenced."""
    try:
        quick = without_shrinking()(check)  # a mutant only asserts that its check fails
    except InvalidArgument:  # already decorated with settings (theorems.profiles.budget)
        quick = check
    expect_failure(quick)
    with warnings.catch_warnings(), pytest.raises(
            AssertionError, match=re.escape(match) if literal else match) as raised:
        warnings.simplefilter("ignore", HypothesisDeprecationWarning)
        check.hypothesis.inner_test(**case)
    return str(raised.value)
