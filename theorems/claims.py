r"""Claims, their sources, the registry, and status derived from evidence.

A :class:`Claim` is a statement from a paper (or derived here), with its exact source and a
LaTeX statement in which every symbol is defined. Creating a ``Claim`` registers it. Checks
(pytest tests marked with :func:`theorems.evidence.check`) produce evidence, and a claim's
status is computed from that evidence by :func:`derive_status`, never set by hand:

* ``verified``: every check passed, and at least one is beyond the ``symbolic`` tier (a
  ``proved`` check, a machine-checked proof, counts as beyond it);
* ``refuted``: a ``refutation`` check passed, so a counterexample to the claim *as stated*
  is pinned (and no check failed or was inconclusive);
* ``inconclusive``: some check rests on sampled trials or trained seeds and the interval it
  computed for the compared quantity contains the threshold the verdict turns on, so neither
  side is established (its record's outcome is ``inconclusive``; no check failed);
* ``failing``: some check failed;
* ``unchecked``: no check ran, every check was skipped, or only symbolic checks ran.

Precedence, when checks disagree: failing > inconclusive > refuted > verified > unchecked.

A derived state rides on top of the status: a claim is *verified with all its dependencies*
(:func:`verified_through_dependencies`) when it and every claim it transitively depends on
are verified. A verified claim whose dependency is refuted, inconclusive, failing or
unchecked is verified only on its own: its checks passed, but what it rests on is not
established.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import pkgutil
import re
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal

TAGS = {
    "V": "read in the primary text: the abstract, the paper, the official code or the "
         "author's own post",
    "S": "from a secondary summary only; the paper's exact constant is not claimed",
    "R": "recalled or reconstructed, unverified against the paper",
    "D": "derived in this project and checked numerically; the statement is ours",
}
# A trend claim's result dependency on the claim whose trend its scaling study measures (its
# reason, which the site reads to show the study's figure on that claim's page): the check reads
# a published study (theorems.trends), not that claim's construction.
SCALING_STUDY_OF = ("the study runs that claim's experiment at more sizes to measure the trend "
                    "it records as not reproduced; the check reads the published study, not "
                    "that claim's construction")
KINDS = ("identity", "bound", "construction", "lower-bound", "dynamics", "scaling")
TIERS = ("property", "exhaustive", "symbolic", "numeric", "empirical", "refutation", "proved")
STATUSES = ("verified", "refuted", "inconclusive", "failing", "unchecked")
# What a refutation refutes. A refuted claim (one with a ``correction`` or a refutation check)
# names one of these, so that nobody reads "refuted" as "the paper is wrong" when it is not.
REFUTATION_SCOPES = {
    "as-written": "the statement as written is false: the paper's own words for a [V], [S] or "
                  "[R] source, the claim catalogue's for a [D] statement",
    "reading": "one reading of an ambiguous statement is false; the paper may mean another",
    "finite-test": "this project's stronger or finite-range test of the paper's claim fails; "
                   "the paper's claim itself (asymptotic, or weaker) is not refuted",
}

Tag = Literal["V", "S", "R", "D"]
Kind = Literal["identity", "bound", "construction", "lower-bound", "dynamics", "scaling"]
Status = Literal["verified", "refuted", "inconclusive", "failing", "unchecked"]
Scope = Literal["as-written", "reading", "finite-test"]

_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*\.[a-z0-9]+(?:-[a-z0-9]+)*$")
_ARXIV = re.compile(r"^\d{4}\.\d{4,5}$")
# An OpenReview forum id: ten characters from the URL-safe base-64 alphabet (``cKNOCYPo2W``).
_OPENREVIEW = re.compile(r"^[A-Za-z0-9_-]{10}$")
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")



@dataclass(frozen=True, kw_only=True)
class Source:
    """Where a claim comes from.

    Exactly one of ``arxiv`` (the identifier, ``2305.02582``) and ``openreview`` (the forum id,
    ``cKNOCYPo2W``, for a paper with no arXiv version) names the paper; :attr:`url` follows
    from it. ``where`` is the theorem, lemma or section, and ``tag`` how well the detail is
    sourced (see :data:`TAGS`). ``ref`` is a short citation.
    ``verified=False`` marks a locator (the theorem or section number in ``where``) that could
    not be checked against the paper's text; ``doubt`` then says why, and the page shows it.
    """

    arxiv: str | None = None
    where: str
    tag: Tag
    ref: str = ""
    openreview: str | None = None
    verified: bool = True
    doubt: str = ""

    def __post_init__(self) -> None:
        if (self.arxiv is None) == (self.openreview is None):
            raise ValueError("give exactly one of arxiv and openreview, "
                             f"got arxiv={self.arxiv!r}, openreview={self.openreview!r}")
        if self.arxiv is not None and not (isinstance(self.arxiv, str)
                                           and _ARXIV.fullmatch(self.arxiv)):
            raise ValueError(f"arxiv must look like 2305.02582, got {self.arxiv!r}")
        if self.openreview is not None and not (isinstance(self.openreview, str)
                                                and _OPENREVIEW.fullmatch(self.openreview)):
            raise ValueError("openreview must be a ten-character forum id like cKNOCYPo2W, "
                             f"got {self.openreview!r}")
        if self.tag not in TAGS:
            raise ValueError(f"tag must be one of {sorted(TAGS)}, got {self.tag!r}")
        if not self.where.strip():
            raise ValueError("where must name the theorem, lemma or section")
        if not isinstance(self.verified, bool):
            raise TypeError(f"verified must be a bool, got {self.verified!r}")
        if not self.verified and not self.doubt.strip():
            raise ValueError("an unverified locator (verified=False) needs a doubt saying why")

    @property
    def label(self) -> str:
        """The identifier as people cite it: ``arXiv:2305.02582`` or ``OpenReview:cKNOCYPo2W``."""
        if self.arxiv is not None:
            return f"arXiv:{self.arxiv}"
        return f"OpenReview:{self.openreview}"

    @property
    def url(self) -> str:
        if self.arxiv is not None:
            return f"https://arxiv.org/abs/{self.arxiv}"
        return f"https://openreview.net/forum?id={self.openreview}"

    def as_dict(self) -> dict:
        return {"arxiv": self.arxiv, "openreview": self.openreview, "label": self.label,
                "where": self.where, "tag": self.tag, "ref": self.ref, "url": self.url,
                "verified": self.verified, "doubt": self.doubt}


@dataclass(frozen=True)
class Claim:
    """One checkable statement. Creating it registers it in the current :class:`Registry`.

    ``id`` is ``area.slug``; the area is the ``theorems`` module that defines the claim.
    ``correction`` is the corrected statement of a claim that is false as stated, and
    ``refutes`` (required with it) says what the refutation refutes: a key of
    :data:`REFUTATION_SCOPES`.

    ``depends_on`` names the claims this one rests on; by default a dependency is on the other
    claim's *construction*, which this claim's checks must call
    (:func:`dependency_mismatches`). ``result_dependencies`` maps those of them that are on
    the other claim's *result* instead (a lemma the derivation uses, a formula the statement
    is phrased in, while the checks test this claim's own object independently) to the reason,
    one line each; every key must be in ``depends_on``.

    ``incidental_calls`` maps another claim's construction (``module:attribute``) that this
    claim's checks call, but only for evidence they report and do not assert on (a comparison
    column of a table an experiment fills in), to the reason saying which evidence; such a
    call is not a dependency (:func:`dependency_mismatches`), and the claim page shows it.
    """

    id: str
    title: str
    statement: str
    source: Source | tuple[Source, ...]
    kind: Kind
    construction: str | None = None
    depends_on: tuple[str, ...] = ()
    correction: str | None = None
    refutes: Scope | None = None
    notes: str = ""
    result_dependencies: Mapping[str, str] = field(default_factory=dict, hash=False)
    incidental_calls: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ValueError(f"id must be 'area.slug' in kebab-case, got {self.id!r}")
        if not self.title.strip() or not self.statement.strip():
            raise ValueError(f"{self.id}: title and statement must be non-empty")
        sources = (self.source,) if isinstance(self.source, Source) else tuple(self.source)
        if not sources or not all(isinstance(s, Source) for s in sources):
            raise TypeError(f"{self.id}: source must be a Source or a tuple of Sources")
        object.__setattr__(self, "source", sources)
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.construction is not None and not _IMPORT_PATH.match(self.construction):
            raise ValueError(f"{self.id}: construction must be 'module:attribute', "
                             f"got {self.construction!r}")
        object.__setattr__(self, "depends_on", tuple(self.depends_on))
        object.__setattr__(self, "result_dependencies", dict(self.result_dependencies))
        for dep, reason in self.result_dependencies.items():
            if dep not in self.depends_on:
                raise ValueError(f"{self.id}: result_dependencies names {dep!r}, which is not "
                                 "in depends_on")
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"{self.id}: result_dependencies[{dep!r}] needs a reason")
        object.__setattr__(self, "incidental_calls", dict(self.incidental_calls))
        for construction, reason in self.incidental_calls.items():
            if not isinstance(construction, str) or not _IMPORT_PATH.match(construction):
                raise ValueError(f"{self.id}: incidental_calls keys must be 'module:attribute', "
                                 f"got {construction!r}")
            if construction == self.construction:
                raise ValueError(f"{self.id}: incidental_calls names its own construction")
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"{self.id}: incidental_calls[{construction!r}] needs a reason")
        if self.refutes is not None and self.refutes not in REFUTATION_SCOPES:
            raise ValueError(f"{self.id}: refutes must be one of {tuple(REFUTATION_SCOPES)}, "
                             f"got {self.refutes!r}")
        if (self.correction is None) != (self.refutes is None):
            raise ValueError(f"{self.id}: a correction needs refutes= (what it refutes), and "
                             "refutes= needs a correction")
        current_registry().add(self)

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def sources(self) -> tuple[Source, ...]:
        return self.source  # normalised to a tuple in __post_init__

    @property
    def tags(self) -> str:
        """The distinct source tags, in V, S, R, D order: what the claim relies on."""
        return "".join(t for t in TAGS if any(s.tag == t for s in self.sources))

    def resolve_construction(self):
        """Import and return the construction object named by ``construction``."""
        if self.construction is None:
            return None
        module, attribute = self.construction.split(":")
        return getattr(importlib.import_module(module), attribute)

    def as_dict(self) -> dict:
        return {
            "id": self.id, "area": self.area, "title": self.title, "statement": self.statement,
            "kind": self.kind, "sources": [s.as_dict() for s in self.sources], "tags": self.tags,
            "construction": self.construction, "depends_on": list(self.depends_on),
            "correction": self.correction, "refutes": self.refutes, "notes": self.notes,
            "result_dependencies": dict(self.result_dependencies),
            "incidental_calls": dict(self.incidental_calls),
        }


@dataclass
class Registry:
    """Claims by id, in definition order."""

    claims: dict[str, Claim] = field(default_factory=dict)

    def add(self, claim: Claim) -> None:
        if claim.id in self.claims:
            raise ValueError(f"duplicate claim id {claim.id!r}")
        self.claims[claim.id] = claim

    def __getitem__(self, claim_id: str) -> Claim:
        try:
            return self.claims[claim_id]
        except KeyError:
            raise KeyError(f"unknown claim {claim_id!r}") from None

    def __contains__(self, claim_id: object) -> bool:
        return claim_id in self.claims

    def __iter__(self) -> Iterator[Claim]:
        return iter(self.claims.values())

    def __len__(self) -> int:
        return len(self.claims)

    def areas(self) -> list[str]:
        return sorted({c.area for c in self})

    def dependents(self, claim_id: str) -> list[str]:
        """Claims whose ``depends_on`` names ``claim_id``: the reverse links."""
        return [c.id for c in self if claim_id in c.depends_on]

    def transitive_dependencies(self, claim_id: str) -> list[str]:
        """Every claim ``claim_id`` rests on, directly or through others (definition order;
        unknown ids are skipped, cycles terminate)."""
        return self._closure(claim_id, lambda c: self.claims[c].depends_on
                             if c in self.claims else ())

    def transitive_dependents(self, claim_id: str) -> list[str]:
        """Every claim that rests on ``claim_id``, directly or through others."""
        return self._closure(claim_id, self.dependents)

    def _closure(self, claim_id: str, step) -> list[str]:
        seen: set[str] = set()
        stack = list(step(claim_id))
        while stack:
            node = stack.pop()
            if node not in seen and node != claim_id:
                seen.add(node)
                stack.extend(step(node))
        return [c for c in self.claims if c in seen]


_DEFAULT = Registry()
_CURRENT: ContextVar[Registry] = ContextVar("registry", default=_DEFAULT)


def current_registry() -> Registry:
    return _CURRENT.get()


@contextlib.contextmanager
def isolated_registry() -> Iterator[Registry]:
    """A fresh registry for the duration of the block (used by the suite's own tests)."""
    registry = Registry()
    token = _CURRENT.set(registry)
    try:
        yield registry
    finally:
        _CURRENT.reset(token)


AREAS_PACKAGE = "theorems.areas"


def area_modules() -> list[str]:
    """Names of the area modules or packages: every public entry of :mod:`theorems.areas`.

    Areas are found by location, so adding one is adding its file (or package); nothing lists
    them. The name, with ``_`` read as ``-``, is the area part of its claims' ids.
    """
    import theorems.areas

    return sorted(m.name for m in pkgutil.iter_modules(theorems.areas.__path__)
                  if not m.name.startswith("_"))


def topic_modules(area: str) -> list[str]:
    """Full names of the modules that hold an area's claims and checks: the area module itself,
    or every public module of the area's package (``theorems.areas.fact_mlps.rome``, ...)."""
    import importlib.util

    name = f"{AREAS_PACKAGE}.{area}"
    spec = importlib.util.find_spec(name)  # found, not imported: the claims loader reads it
    if spec is None:
        raise ValueError(f"no area module or package {name!r}")
    if spec.submodule_search_locations is None:
        return [name]
    topics = sorted(f"{name}.{m.name}" for m in
                    pkgutil.iter_modules(spec.submodule_search_locations)
                    if not m.name.startswith("_"))
    return [name, *topics]


def load_all() -> Registry:
    """Import every area's modules, so that every claim is registered, and return the registry."""
    for area in area_modules():
        for name in topic_modules(area):
            importlib.import_module(name)
    return _DEFAULT


# --- status ------------------------------------------------------------------------------

def derive_status(checks: Iterable[Mapping]) -> Status:
    """Status of one claim from its check records (each with ``tier`` and ``outcome``).

    Precedence: failing > inconclusive > refuted > verified > unchecked. An ``inconclusive``
    check ran, but its interval did not decide; it blocks every verdict but ``failing``."""
    checks = list(checks)
    ran = [c for c in checks if c["outcome"] in ("passed", "failed")]
    if any(c["outcome"] == "failed" for c in ran):
        return "failing"
    if any(c["outcome"] == "inconclusive" for c in checks):
        return "inconclusive"
    if any(c["tier"] == "refutation" for c in ran):
        return "refuted"
    if any(c["tier"] != "symbolic" for c in ran):
        return "verified"
    return "unchecked"


VERIFIED_THROUGH = "verified with all its dependencies"


def verified_through_dependencies(registry: Registry, statuses: Mapping[str, str]
                                  ) -> dict[str, bool]:
    """Claim id -> whether it and every claim it transitively depends on are ``verified``.

    ``statuses`` maps claim ids to their status (from the evidence file); a claim missing
    from it is unchecked. This is the one place the derived state is computed: the site's
    table and graph and ``verify``'s summary all call it.
    """
    def ok(claim_id: str) -> bool:
        return statuses.get(claim_id) == "verified"

    return {c.id: ok(c.id) and all(ok(d) for d in registry.transitive_dependencies(c.id))
            for c in registry}


def inconsistencies(registry: Registry, evidence: Mapping | None = None,
                    checked: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Every way the registry and the evidence disagree; an empty list means consistent.

    ``checked`` maps a claim id to the tiers of the checks that name it (from collection);
    ``evidence`` is a loaded ``evidence.json``. Reported: a check naming an unknown claim, a
    claim with no check (or only symbolic ones), a refutation check on a claim that does not
    say what it refutes, a dependency on an unknown claim, a cycle in
    ``depends_on``, a claim whose id prefix is not its area, a verified claim that depends
    on a failing one, and (from the checks' recorded calls) a dependency used but not declared
    or declared but never exercised are reported apart, by :func:`dependency_mismatches`.
    """
    problems: list[str] = []
    if checked is not None:
        for claim_id in sorted(set(checked) - set(registry.claims)):
            problems.append(f"a check names unknown claim {claim_id!r}")
        for claim in registry:
            tiers = set(checked.get(claim.id, ()))
            if not tiers:
                problems.append(f"claim {claim.id!r} has no check")
            elif tiers <= {"symbolic"}:
                problems.append(f"claim {claim.id!r} has only symbolic checks")
            if "refutation" in tiers and claim.refutes is None:
                problems.append(f"claim {claim.id!r} has a refutation check but no refutes= "
                                "(what it refutes)")
    for claim in registry:
        for dep in claim.depends_on:
            if dep not in registry:
                problems.append(f"claim {claim.id!r} depends on unknown claim {dep!r}")
    problems.extend(f"dependency cycle: {' -> '.join(c)}" for c in _cycles(registry))
    if evidence is not None:
        status = {cid: rec["status"] for cid, rec in evidence.get("claims", {}).items()}
        for claim in registry:
            if status.get(claim.id) != "verified":
                continue
            for dep in claim.depends_on:
                if status.get(dep) == "failing":
                    problems.append(f"verified claim {claim.id!r} depends on failing {dep!r}")
    return problems


@functools.cache
def defined_at(construction: str) -> str:
    """``module:qualname`` where the object a ``construction`` path names is defined.

    A claim names a construction by its public path (``constructions.boltzmann:f``, a
    re-export of a package), while the plugin records calls under the module whose code runs
    (``constructions.boltzmann.memorization:f``); this maps the first to the second. A path
    that does not import is returned unchanged (its claim's checks then fail anyway)."""
    module, attribute = construction.split(":")
    try:
        obj = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError):
        return construction
    home, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(home, str) or not isinstance(qualname, str):
        return construction  # an instance or a partial: judged under its public path
    return f"{home}:{qualname}"


def _uses(calls: Iterable[str], construction: str) -> bool:
    """Whether recorded calls (``module:qualname``) exercise ``construction`` (``module:attr``,
    as named or where it is defined): the attribute itself, or a method of it."""
    names = {construction, defined_at(construction)}
    return any(c.split(":")[0] == name.split(":")[0]
               and (c.split(":")[1] == name.split(":")[1]
                    or c.split(":")[1].startswith(name.split(":")[1] + "."))
               for c in calls for name in names)


def _is_oracle(construction: str) -> bool:
    """Whether the object a construction path names declares itself an oracle or task
    definition (:func:`constructions._roles.oracle`)."""
    from constructions._roles import is_oracle

    module, attribute = construction.split(":")
    try:
        obj = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError):
        return False
    return is_oracle(obj)


def dependency_mismatches(registry: Registry, evidence: Mapping) -> list[str]:
    """Where the dependencies the checks exercised disagree with the declared ``depends_on``.

    The plugin records in every check record the functions and classes of ``constructions``
    and ``empirics`` the check called (``calls``, under the module that defines them), and
    those it called from its own code rather than from inside a construction
    (``direct_calls``). Only calls to some claim's ``construction`` count; the rule, for a
    claim whose checks carry such records:

    * **a hidden dependency**: its checks directly call another claim's construction (one it
      does not name itself) without the claim depending, directly or transitively, on a claim
      that names it. Exempt: a construction marked as an oracle or task definition
      (:func:`constructions._roles.oracle`): calling the definition of a task or a reference
      algorithm relies on nothing its claim proves; and a construction in the claim's
      ``incidental_calls`` (called for reported evidence the checks do not assert on);
    * **an unexercised dependency**: it declares a dependency on a claim with a construction
      that none of its checks calls, directly or not (and that is not its own construction
      too). Exempt: a dependency listed in the claim's ``result_dependencies`` with its reason
      (it is on the other claim's result, not its construction);

    An exemption whose construction the checks do call is not reported: a result that checks
    share through a cache (``functools.cache``) is computed by whichever check runs first, so
    whether a given check calls the construction depends on the order the checks ran, while
    the exemption's claim (it rests on that result) holds either way. For the same reason a
    hidden dependency reached only through such a shared cache can come and go between runs.

    Claims without ``calls`` in the evidence (older files, claims whose checks did not run)
    are not judged.
    """
    named: dict[str, list[str]] = {}
    for claim in registry:
        if claim.construction:
            named.setdefault(claim.construction, []).append(claim.id)
    oracles = {construction for construction in named if _is_oracle(construction)}
    problems = []
    for claim in registry:
        record = evidence.get("claims", {}).get(claim.id)
        checks = [c for c in (record or {}).get("checks", ()) if "calls" in c
                  and c.get("outcome") != "skipped"]
        if not checks:
            continue
        calls = {name for c in checks for name in c["calls"]}
        direct = {name for c in checks for name in c.get("direct_calls", c["calls"])}
        deps = set(registry.transitive_dependencies(claim.id))
        for construction, owners in sorted(named.items()):
            if (construction == claim.construction or construction in oracles
                    or construction in claim.incidental_calls
                    or not _uses(direct, construction)):
                continue
            if claim.id not in owners and not deps & set(owners):
                problems.append(f"claim {claim.id!r} uses {construction} (the construction "
                                f"of {', '.join(owners)}) without depending on it")
        for dep in claim.depends_on:
            target = registry.claims.get(dep)
            if target is None or target.construction is None:
                continue
            used = (target.construction == claim.construction
                    or _uses(calls, target.construction))
            if dep not in claim.result_dependencies and not used:
                problems.append(f"claim {claim.id!r} declares a dependency on {dep!r} whose "
                                f"construction {target.construction} its checks never call")
    return problems


def _cycles(registry: Registry) -> list[list[str]]:
    """One representative path per dependency cycle, found by depth-first search."""
    colour: dict[str, int] = {}  # 0 absent = unvisited, 1 on the stack, 2 done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        colour[node] = 1
        for dep in registry.claims[node].depends_on if node in registry else ():
            if colour.get(dep) == 1:
                cycles.append([*path[path.index(dep):], dep])
            elif colour.get(dep, 0) == 0 and dep in registry:
                visit(dep, [*path, dep])
        colour[node] = 2

    for claim in registry:
        if colour.get(claim.id, 0) == 0:
            visit(claim.id, [claim.id])
    return cycles
