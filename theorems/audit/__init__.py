"""The audit record of every claim: what was checked, sentence by sentence, and how.

One TOML file per area, ``theorems/audit/<area-id>.toml`` (the area id with dashes,
``prenorm-gradients.toml``), shipped as package data and read with :mod:`tomllib`. Per claim
a table keyed by the claim id holds

* ``scope``: what the checks actually check (dimensions, ranges, sizes, examples, seeds);
* ``source_checked``: how the source's locator and tag were checked, or what could not be;
* ``refutes``: for a refuted claim, exactly what is refuted, opening with its
  ``Claim.refutes`` scope (``"as-written: ..."``); empty otherwise;
* ``sentences``: an array of tables, each a verbatim piece ``text`` of the statement, the
  ``checks`` (module-level test names of the area) that assert it, and the ``mutants``
  (``tests/test_<area>.py::test_name``) that break that sentence and are killed by one of them.

``tests/test_audit.py`` holds every record to the claims, checks and mutants it names;
CONTRIBUTING.md ("The audit protocol") says how a record is written.
"""

from __future__ import annotations

import functools
import re
import tomllib
from importlib import resources

_AREA = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def areas() -> list[str]:
    """The area ids that have an audit file, sorted."""
    return sorted(entry.name.removesuffix(".toml") for entry in resources.files(__name__).iterdir()
                  if entry.name.endswith(".toml"))


@functools.cache
def _load(area: str) -> dict:
    entry = resources.files(__name__) / f"{area}.toml"
    if not entry.is_file():
        return {}
    with entry.open("rb") as handle:
        return tomllib.load(handle)


def load(area: str) -> dict:
    """The audit records of an area (its id, with dashes) by claim id; ``{}`` if the area has
    no audit file yet."""
    if not isinstance(area, str):
        raise TypeError(f"area must be an area id such as 'layernorm', got {area!r}")
    if not _AREA.fullmatch(area):
        raise ValueError(f"area must be an area id with dashes such as 'prenorm-gradients', "
                         f"got {area!r}")
    return _load(area)


def record(claim_id: str) -> dict | None:
    """The audit record of one claim (``area.slug``), or ``None`` if it has none."""
    if not isinstance(claim_id, str):
        raise TypeError(f"claim_id must be a claim id such as 'layernorm.two-dimensions', "
                        f"got {claim_id!r}")
    area, dot, _ = claim_id.partition(".")
    if not dot:
        raise ValueError(f"claim_id must be 'area.slug', got {claim_id!r}")
    return load(area).get(claim_id)


def scope(claim_id: str) -> str:
    """What the checks of a claim actually check, from its record; ``""`` without one."""
    found = record(claim_id)
    return found.get("scope", "") if found else ""
