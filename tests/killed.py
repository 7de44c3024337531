"""Which assertion a mutant's check failed at (CONTRIBUTING.md, "The audit protocol").

:func:`theorems.evidence.expect_failure` returns a Hypothesis check's falsifying example, not
the message of the assertion it failed at; a mutant that must show *which* sentence it kills
reads that message here.
"""

from __future__ import annotations

from collections.abc import Callable

from theorems.evidence import expect_failure


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
