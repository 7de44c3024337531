"""The site's inputs, joined into one view: claims, their last evidence, published results.

Three inputs, nothing else: the claim registry (:func:`theorems.claims.load_all`), the evidence
file of the pytest plugin (:mod:`theorems.evidence_file`), and the published results
(``<results>/<experiment>/<config>.json``, compared with each experiment's fingerprint to tell
a stale one). Everything a page shows is computed here; the templates only lay it out.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docutils.nodes import make_id

from theorems.claims import (
    STATUSES,
    TIERS,
    Claim,
    Registry,
    inconsistencies,
    verified_through_dependencies,
)

# A published result is compared with the code that would produce it now.
STALENESS = {
    "current": "produced by the current code",
    "stale": "the experiment's code has changed since this result was produced",
    "orphaned": "no registered experiment has this name any more",
    "unknown": "the result carries no code fingerprint",
}


def anchor(claim_id: str) -> str:
    """The HTML id of a claim's section: docutils' id of the label ``claim_id``."""
    return make_id(claim_id)


def experiment_anchor(name: str) -> str:
    """The label (and HTML id) of an experiment's section on the empirics page."""
    return make_id(f"experiment-{name}")


def area_docname(area: str) -> str:
    return f"claims/{area}"


@dataclass(frozen=True)
class ResultView:
    """One published empirics result (one JSON file and its figures)."""

    experiment: str
    config_name: str
    seeds: tuple[int, ...]  # one seed, or the seeds an aggregate averages over
    path: Path
    data: Mapping[str, Any]
    staleness: str  # a key of STALENESS

    @property
    def record(self) -> Mapping[str, Any]:
        return self.data.get("record", {})

    @property
    def label(self) -> str:
        if len(self.seeds) > 1:
            return f"{self.config_name}, mean of {len(self.seeds)} seeds"
        if self.seeds == (0,):
            return self.config_name
        return f"{self.config_name}, seed {self.seeds[0]}"

    @property
    def slug(self) -> str:
        return make_id(f"result-{self.experiment}-{self.path.stem}")

    def figure_files(self) -> dict[str, Path]:
        """Figure name -> PNG path, for the figures that exist beside the JSON file."""
        figures = self.data.get("figures") or {}
        if not isinstance(figures, Mapping):  # an unsaved Result lists names only
            return {}
        files = {name: self.path.parent / file for name, file in sorted(figures.items())}
        return {name: path for name, path in files.items() if path.is_file()}


@dataclass(frozen=True)
class ExperimentView:
    """A registered (or only published) experiment and its published results."""

    name: str
    description: str
    claims: tuple[str, ...]
    configs: Mapping[str, Mapping[str, Any]]
    results: tuple[ResultView, ...]
    registered: bool

    @property
    def slug(self) -> str:
        return experiment_anchor(self.name)


# the folder holding the packages: the repository, or site-packages for an installed wheel
REPO = Path(__file__).resolve().parents[4]


def proof_file(source: str) -> Path:
    """The file a proof record's ``source`` names: a Coq file relative to the ``theorems``
    package (``proofs/coq/x.v``, :data:`theorems.proving.PROOFS`), a query generator's module
    relative to the folder holding the packages."""
    from theorems.proving import PROOFS

    return PROOFS.parent / source if source.startswith("proofs/") else REPO / source


def is_coq(tool: Any) -> bool:
    """Whether a proof record's ``tool`` is Coq: the runner writes ``"Coq"``, and tool names
    are compared case-insensitively (contract 2), so ``"coq"`` is Coq too."""
    return str(tool).casefold() == "coq"


def trust_list(trusts: Any) -> tuple[str, ...]:
    """A proof record's ``trusts`` as a list of strings: the contract's list, or the single
    sentence older records carry, or nothing when the record does not say."""
    if trusts is None:
        return ()
    if isinstance(trusts, str):
        return (trusts,) if trusts.strip() else ()
    return tuple(str(t) for t in trusts)


# What a proof's scope says it covers (contract 2: ``proof.scope.covers``).
SCOPE_MEANING = {
    "statement": "the whole statement",
    "part": "part of the statement",
    "special-case": "a special case of the statement",
}


@dataclass(frozen=True)
class ProofView:
    """A ``proved`` check: what checked it, what it covers and trusts, and the proof's text.

    ``statement`` is the main theorem as the proof states it (a Coq ``Theorem`` up to its
    ``Proof.``; for SMT, the Python function the query is generated from), shown beside the
    claim's LaTeX statement so a reader can review one against the other; ``text`` is the
    whole proof file (or function), highlighted as ``language``. ``covers`` and
    ``scope_text`` are the record's ``scope`` (empty when the record has none); ``outcome``
    is the check's: only a ``passed`` proof counts as one, a ``skipped`` one (its tool was
    missing) is shown as skipped.
    """

    check: str
    tool: str
    version: str
    theorem: str
    source: str
    trusts: tuple[str, ...]
    assumptions: tuple[str, ...]
    language: str
    statement: str
    text: str
    covers: str = ""
    scope_text: str = ""
    outcome: str = "passed"

    @property
    def is_coq(self) -> bool:
        return is_coq(self.tool)

    @property
    def checked_in(self) -> str:
        """'Coq 8.16.1' or 'z3 4.13.0'."""
        return f"{'Coq' if self.is_coq else self.tool} {self.version}".strip()

    @property
    def covers_meaning(self) -> str:
        return SCOPE_MEANING.get(self.covers, self.covers)

    @property
    def summary(self) -> str:
        """One line for the graph's tooltip: what checked it, what it covers and trusts."""
        covers = (f"covers {self.covers_meaning}" + (f" ({self.scope_text})"
                                                      if self.scope_text else "")
                  if self.covers else "scope not recorded")
        trusts = "; ".join(self.trusts) or "not recorded"
        return f"proof in {self.checked_in} ({self.theorem}): {covers}; trusts {trusts}"

    @classmethod
    def of(cls, check: Mapping[str, Any]) -> ProofView:
        record = check["proof"]
        source, theorem = record["source"], record["theorem"]
        if is_coq(record["tool"]):
            language, text = "coq", _read(proof_file(source))
            statement = coq_statement(text, theorem) if text else ""
        else:
            language, text = "python", _python_source(source)
            statement = ""
        scope = record.get("scope") or {}
        return cls(check=check["name"], tool=record["tool"], version=record["version"],
                   theorem=theorem, source=source, trusts=trust_list(record.get("trusts")),
                   assumptions=tuple(record.get("assumptions", ())), language=language,
                   statement=statement, text=text, covers=str(scope.get("covers") or ""),
                   scope_text=str(scope.get("text") or ""), outcome=check["outcome"])


def coq_statement(text: str, theorem: str) -> str:
    """The ``Theorem``/``Lemma`` named ``theorem`` in ``text``, up to its ``Proof.``."""
    found = re.search(rf"^\s*(?:Theorem|Lemma|Corollary|Proposition)\s+{re.escape(theorem)}\b"
                      rf".*?(?=^\s*Proof\b)", text, flags=re.M | re.S)
    return found.group(0).strip() if found else ""


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _python_source(source: str) -> str:
    """The source of ``module:function`` (``source`` may carry a trailing remark)."""
    target = source.split()[0]
    module, _, name = target.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in filter(None, name.split(".")):
            obj = getattr(obj, part)
        return inspect.getsource(obj)
    except (ImportError, AttributeError, TypeError, OSError):
        return ""


@dataclass(frozen=True)
class ClaimView:
    """A claim with its last evidence and its links."""

    claim: Claim
    record: Mapping[str, Any] | None  # this claim's entry in the evidence file, if any
    dependents: tuple[str, ...]
    experiments: tuple[str, ...]
    through: bool = False  # verified, and so is every claim it transitively depends on

    @property
    def id(self) -> str:
        return self.claim.id

    @property
    def anchor(self) -> str:
        return anchor(self.claim.id)

    @property
    def status(self) -> str:
        return self.record["status"] if self.record else "unchecked"

    @property
    def checks(self) -> list[Mapping[str, Any]]:
        return list(self.record["checks"]) if self.record else []

    @property
    def summary(self) -> Mapping[str, Any]:
        return self.record["summary"] if self.record else {}

    @property
    def tiers(self) -> list[str]:
        """The tiers of the checks that ran: a tier whose every check was skipped (a proof
        whose tool is missing, say) is not evidence, so it is not listed here."""
        ran = {c["tier"] for c in self.checks if c["outcome"] != "skipped"}
        return [t for t in self.summary.get("tiers", []) if t in ran]

    @property
    def skipped_tiers(self) -> list[str]:
        """The tiers whose every check was skipped."""
        return [t for t in self.summary.get("tiers", []) if t not in self.tiers]

    @property
    def failures(self) -> list[Mapping[str, Any]]:
        """The checks that failed: what a failing status rests on."""
        return [c for c in self.checks if c["outcome"] == "failed"]

    @property
    def proofs(self) -> list[ProofView]:
        """The passed machine-checked proofs of this claim."""
        return [ProofView.of(c) for c in self.checks
                if c["tier"] == "proved" and c["outcome"] == "passed" and c.get("proof")]

    @property
    def skipped_proofs(self) -> list[Mapping[str, Any]]:
        """The proof checks that did not run (their tool is missing): never a proof."""
        return [c for c in self.checks if c["tier"] == "proved" and c["outcome"] == "skipped"]

    @property
    def intervals(self) -> list[tuple[str, Mapping[str, Any]]]:
        """(check name, interval) of every interval the checks reported (contract 1)."""
        return [(c["name"], i) for c in self.checks for i in c.get("intervals") or ()]

    @property
    def undecided(self) -> list[Mapping[str, Any]]:
        """The checks whose interval did not decide: what an inconclusive status rests on."""
        return [c for c in self.checks if c["outcome"] == "inconclusive"]

    @property
    def proved(self) -> bool:
        return bool(self.proofs)

    @property
    def counterexamples(self) -> list[tuple[str, str]]:
        """(check name, pinned counterexample) of the passed refutation checks."""
        return [(c["name"], c["counterexample"]) for c in self.checks
                if c["tier"] == "refutation" and c["outcome"] == "passed"
                and c.get("counterexample")]


@dataclass
class SiteData:
    """Everything the generated pages show."""

    registry: Registry
    claims: list[ClaimView]
    evidence_path: Path | None
    run: Mapping[str, Any] | None
    experiments: list[ExperimentView]
    unknown_in_evidence: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    head_sha: str | None = None
    only_areas: tuple[str, ...] = ()  # a preview of some areas; empty for the whole site

    @property
    def by_id(self) -> dict[str, ClaimView]:
        return {c.id: c for c in self.claims}

    @property
    def areas(self) -> list[str]:
        return sorted({c.claim.area for c in self.claims})

    def claims_in(self, area: str) -> list[ClaimView]:
        return [c for c in self.claims if c.claim.area == area]

    def proved_count(self) -> int:
        """How many verified claims also carry a passed machine-checked proof."""
        return sum(c.proved and c.status == "verified" for c in self.claims)

    def through_count(self) -> int:
        """How many claims are verified with all their dependencies."""
        return sum(c.through for c in self.claims)

    def status_counts(self, claims: list[ClaimView] | None = None) -> dict[str, int]:
        counts = Counter(c.status for c in (self.claims if claims is None else claims))
        return {status: counts.get(status, 0) for status in STATUSES}

    def tier_counts(self) -> list[dict[str, Any]]:
        """Per tier: claims checked at it, and its checks' outcomes and example counts."""
        rows = []
        for tier in TIERS:
            checks = [(c, k) for c in self.claims for k in c.checks if k["tier"] == tier]
            outcomes = Counter(k["outcome"] for _, k in checks)
            # a claim counts at a tier when one of its checks there ran (a skipped proof is
            # no proof)
            rows.append({"tier": tier, "claims": len({c.id for c, k in checks
                                                      if k["outcome"] != "skipped"}),
                         "checks": len(checks), "passed": outcomes.get("passed", 0),
                         "failed": outcomes.get("failed", 0),
                         "inconclusive": outcomes.get("inconclusive", 0),
                         "skipped": outcomes.get("skipped", 0),
                         "examples": sum(int(k["examples"]) for _, k in checks)})
        return rows

    def empirics_counts(self, config: str | None = None) -> dict[str, int]:
        """Registered experiments by the state of their published result at ``config`` (else
        at the largest each has published, :func:`empirics.census.largest_config`): current,
        stale, missing; how many are one seed, and how many are counted at the ``cpu`` size."""
        from empirics.census import largest_config

        counts = dict.fromkeys(("current", "stale", "missing", "single_seed", "cpu",
                                "experiments"), 0)
        for experiment in (e for e in self.experiments if e.registered):
            counts["experiments"] += 1
            chosen = config if config is not None else largest_config(
                r.config_name for r in experiment.results)
            mine = [r for r in experiment.results if r.config_name == chosen]
            if not mine:
                counts["missing"] += 1
                continue
            counts["current" if all(r.staleness == "current" for r in mine) else "stale"] += 1
            counts["single_seed"] += all(len(r.seeds) < 2 for r in mine)
            counts["cpu"] += chosen == "cpu"
        return counts

    def results(self) -> list[ResultView]:
        return [r for e in self.experiments for r in e.results]

    @property
    def evidence_is_behind(self) -> bool:
        """True when the evidence was produced at another commit, or from a dirty tree."""
        if not self.run:
            return False
        return bool(self.run.get("git_dirty")) or (
            self.head_sha is not None and self.run.get("git_sha") != self.head_sha)

    @property
    def evidence_is_partial(self) -> bool:
        """True when the evidence comes from a run that did not check every claim."""
        return bool(self.run and self.run.get("partial"))


# --- loading ---------------------------------------------------------------------------------

def load_evidence(path: Path | None) -> dict | None:
    """The evidence file, schema-checked, or ``None`` when there is none."""
    from theorems import evidence_file

    if path is None or not Path(path).is_file():
        return None
    return evidence_file.load(path)


def staleness(record: Mapping[str, Any], current: Callable[[], str] | None) -> str:
    """Compare a result's ``code_fingerprint`` with the experiment's current fingerprint.

    ``current`` computes the fingerprint of the registered experiment, or is ``None`` when no
    experiment of that name is registered. Anything but ``current`` is what
    :func:`empirics.experiment.is_stale` calls stale; this also says why.
    """
    if current is None:
        return "orphaned"
    produced = record.get("code_fingerprint")
    if not produced:
        return "unknown"
    return "current" if produced == current() else "stale"


def load_results(results_dir: Path | None,
                 fingerprints: Mapping[str, Callable[[], str]]) -> list[ResultView]:
    """The published results under ``results_dir``, as :func:`empirics.experiment.published`
    lists them (aggregates, not their per-seed files), with the reason each is not current."""
    from empirics.experiment import load_result, published

    if results_dir is None or not Path(results_dir).is_dir():
        return []
    views = []
    for entry in published(results_dir):
        path = Path(entry["path"])
        data = load_result(path)
        seeds = tuple(int(s) for s in entry["seeds"] if s is not None) or (0,)
        views.append(ResultView(experiment=entry["experiment"], config_name=entry["config"],
                                seeds=seeds, path=path, data=data,
                                staleness=staleness(data["record"],
                                                    fingerprints.get(entry["experiment"]))))
    return views


def load_experiments(results_dir: Path | None) -> list[ExperimentView]:
    """Registered experiments with their published results, plus orphaned results' names."""
    from empirics.experiment import load_all as load_experiments_registry

    registered = load_experiments_registry()
    results = load_results(results_dir, {name: e.fingerprint for name, e in registered.items()})
    views = []
    for name in sorted(set(registered) | {r.experiment for r in results}):
        experiment = registered.get(name)
        mine = tuple(r for r in results if r.experiment == name)
        if experiment is None:
            views.append(ExperimentView(name, "", (), {}, mine, registered=False))
        else:
            views.append(ExperimentView(name, experiment.description, tuple(experiment.claims),
                                        dict(experiment.configs), mine, registered=True))
    return views


def git_head() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, timeout=10,
                              cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def collect(registry: Registry, evidence: Mapping[str, Any] | None,
            experiments: list[ExperimentView], evidence_path: Path | None = None,
            head_sha: str | None = None, areas: Sequence[str] = ()) -> SiteData:
    """Join the registry, the evidence and the experiments into a :class:`SiteData`.

    ``areas``, when given, limits the pages to those areas (a quick preview of one area);
    links to claims outside them are shown as plain ids.
    """
    unknown = sorted(set(areas) - set(registry.areas()))
    if unknown:
        raise ValueError(f"theorems_areas names unknown areas {unknown}; "
                         f"the areas are {registry.areas()}")
    records = dict(evidence["claims"]) if evidence else {}
    shown = [c for c in registry if not areas or c.area in areas]
    shown_ids = {c.id for c in shown}
    covering: dict[str, list[str]] = {}
    for experiment in experiments:
        for claim_id in experiment.claims:
            covering.setdefault(claim_id, []).append(experiment.name)
    # Areas in alphabetical order; within an area, claims in their order of definition.
    order = {claim_id: rank for rank, claim_id in enumerate(registry.claims)}
    through = verified_through_dependencies(
        registry, {cid: record["status"] for cid, record in records.items()})
    claims = [ClaimView(claim=claim, record=records.get(claim.id),
                        dependents=tuple(d for d in registry.dependents(claim.id)
                                         if d in shown_ids),
                        experiments=tuple(covering.get(claim.id, ())),
                        through=through.get(claim.id, False))
              for claim in sorted(shown, key=lambda c: (c.area, order[c.id]))]
    return SiteData(registry=registry, claims=claims, evidence_path=evidence_path,
                    run=evidence["run"] if evidence else None, experiments=experiments,
                    unknown_in_evidence=sorted(set(records) - set(registry.claims)),
                    problems=inconsistencies(registry, evidence) if evidence else [],
                    head_sha=head_sha, only_areas=tuple(areas))


# --- what the area pages import -----------------------------------------------------------------

def area_intro(area: str) -> tuple[str, str]:
    """(title, first paragraph) of the area's docstring: its module, or its package's
    ``__init__``, e.g. ``theorems/areas/layernorm.py``."""
    try:
        module = importlib.import_module(f"theorems.areas.{area.replace('-', '_')}")
    except ImportError:
        return area, ""
    doc = inspect.getdoc(module) or ""
    paragraphs = [p.strip() for p in doc.split("\n\n")]
    title = paragraphs[0].split("\n", 1)[0].split(" (", 1)[0].rstrip(". ") or area
    # A first paragraph that is the title line alone is followed by the intro paragraph.
    skip = 1 if paragraphs[0].rstrip(". ") == title else 0
    return title, paragraphs[skip] if len(paragraphs) > skip else ""


def area_sections(area: str, site: SiteData, figures: Mapping[str, str] | None = None) -> str:
    """MyST the area adds to its page, from ``page_sections(results, claims)`` of its package's
    private ``_page`` module (``theorems/areas/circuits/_page.py``; the published result dicts,
    each with ``staleness`` and ``figure_paths``: figure name -> its path in the source tree;
    and the claim ids on the site), or ``""`` without one. The module is private, so no claims
    are looked for in it, and the package's ``__init__`` keeps only its docstring."""
    try:
        module = importlib.import_module(f"theorems.areas.{area.replace('-', '_')}")
    except ImportError:
        return ""
    if not hasattr(module, "__path__") or importlib.util.find_spec(
            f"{module.__name__}._page") is None:
        return ""
    sections = getattr(importlib.import_module(f"{module.__name__}._page"), "page_sections",
                       None)
    if not callable(sections):
        return ""
    figures = figures or {}
    results = [{**r.data, "staleness": r.staleness,
                "figure_paths": {name: figures[str(path)]
                                           for name, path in r.figure_files().items()
                                           if str(path) in figures}}
               for e in site.experiments for r in e.results]
    return sections(results, {c.id for c in site.claims})


_MODULE_REPR = re.compile(r"<module '([\w.]+)'(?: from '[^']*')?(?: \(\w+\))?>")


def clean_signature(signature: str | None) -> str | None:
    """A signature as a reader should see it: a default that is a module renders as its
    name (``math``), never as ``<module 'math' from '/usr/lib/...'>`` with a machine path."""
    return None if signature is None else _MODULE_REPR.sub(r"\1", signature)


@dataclass(frozen=True)
class ConstructionView:
    """What autodoc documents for a claim's construction."""

    import_path: str  # "module:attribute", as the claim names it
    dotted: str       # "module.attribute", as autodoc names it
    directive: str    # autofunction | autoclass | autodata
    signature: str
    export: str | None = None  # runnable TransformerLens export, where the construction fits

    @classmethod
    def of(cls, claim: Claim) -> ConstructionView | None:
        if claim.construction is None:
            return None
        obj = claim.resolve_construction()  # raises if it does not import: a real error
        if inspect.isclass(obj):
            directive = "autoclass"
        elif callable(obj):
            directive = "autofunction"
        else:
            directive = "autodata"
        try:
            signature = clean_signature(str(inspect.signature(obj)))
        except (TypeError, ValueError):
            signature = ""
        from constructions.export import export_line

        return cls(claim.construction, claim.construction.replace(":", "."), directive,
                   signature, export_line(claim.construction))
