"""Hypothesis profiles, and the example budget a check asks for.

* ``dev``: few examples, for quick local runs (the default outside CI).
* ``ci``: derandomized, no deadline, no example database, fixed example counts: two runs give
  the same evidence. Selected by :func:`load_default` when the ``CI`` environment variable is
  set, and by ``python -m theorems verify``.
* ``thorough``: thousands of examples, for a nightly or pre-release run.

A check whose examples are expensive asks for a *fraction* of the profile's budget with
:func:`budget`, so ``thorough`` still scales it up and ``dev`` down.

Importing this module registers the three profiles and loads none: this project's
``conftest.py`` calls :func:`load_default`, and ``verify`` names its profile. The evidence plugin
never imports it, so a pytest session of another project keeps its own Hypothesis settings.
It is also a pytest plugin module (``-p theorems.profiles``): loaded that way, the profiles are
registered before Hypothesis reads ``--hypothesis-profile``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

BASE_EXAMPLES = {"dev": 30, "ci": 100, "thorough": 2000}

# Data generation in these checks builds tensors, and the first example pays torch's warm-up,
# so the "too slow" and "large base example" health checks are noise here, not signal.
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

settings.register_profile("dev", max_examples=BASE_EXAMPLES["dev"], deadline=None,
                          suppress_health_check=_QUIET)
settings.register_profile("ci", max_examples=BASE_EXAMPLES["ci"], deadline=None,
                          derandomize=True, database=None, print_blob=False,
                          suppress_health_check=_QUIET)
settings.register_profile("thorough", max_examples=BASE_EXAMPLES["thorough"], deadline=None,
                          suppress_health_check=_QUIET)


def _without_local_constants_when_derandomized() -> None:
    """Make a derandomized profile's examples a function of the check alone.

    Hypothesis (6.131 and later) biases some draws toward literals it finds in the source of
    the user modules present in ``sys.modules`` at the time of the draw. Which of this
    project's modules are imported by then depends on the other tests the process ran before
    (xdist's scheduling, or ``verify --claim`` collecting one file), so the same derandomized
    check drew different examples in two identical full runs (observed: 9 to 35 checks whose
    margins or last examples differed). While ``derandomize`` is on, the pool of local
    constants is empty, and only Hypothesis' own constants remain; other profiles keep it.
    Versions without the pool need nothing; the patch touches only Hypothesis' state in the
    processes that load this module (this project's conftest and ``verify``)."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without this module
        return
    original = getattr(providers, "_get_local_constants", None)
    if original is None or getattr(original, "theorems_patched", False):
        return
    empty = providers.Constants()

    def local_constants():
        return empty if settings.default.derandomize else original()

    local_constants.theorems_patched = True
    providers._get_local_constants = local_constants


_without_local_constants_when_derandomized()


def load_default() -> str:
    """Load ``ci`` when the ``CI`` environment variable is set, else ``dev``; return the name.

    ``--hypothesis-profile`` on the pytest command line still wins: Hypothesis' plugin applies
    it after the conftest that calls this has been imported.
    """
    name = "ci" if os.environ.get("CI") else "dev"
    settings.load_profile(name)
    return name


def current_profile() -> str:
    return settings.get_current_profile_name()


def budget(fraction: float, *, minimum: int = 5, **overrides) -> settings:
    """Settings with ``fraction`` of the current profile's ``max_examples`` (at least ``minimum``).

    Use it as a decorator under ``@given``-level settings; other keyword arguments are passed
    through to :class:`hypothesis.settings`.
    """
    examples = max(minimum, round(settings.default.max_examples * fraction))
    return settings(max_examples=examples, **overrides)


def without_shrinking(**overrides) -> settings:
    """Settings that stop at the first failure: for mutants, where only *that* it fails matters."""
    return settings(phases=[Phase.explicit, Phase.reuse, Phase.generate], **overrides)
