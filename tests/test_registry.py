"""The registry's integrity, and the consistency checks between claims and their checks."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from theorems.claims import (
    REFUTATION_SCOPES,
    Claim,
    Source,
    area_modules,
    dependency_mismatches,
    derive_status,
    inconsistencies,
    isolated_registry,
    load_all,
    topic_modules,
    verified_through_dependencies,
)
from theorems.evidence import declared_checks

TESTS = Path(__file__).parent
SOURCE = {"arxiv": "2408.14332", "where": "Theorem 1", "tag": "V"}


def make(claim_id: str, depends_on=()) -> Claim:
    return Claim(id=claim_id, title="t", statement="s", source=Source(**SOURCE),
                 kind="identity", depends_on=depends_on)


# --- the real registry -------------------------------------------------------------------

def test_registry_is_consistent_with_declared_checks():
    assert inconsistencies(load_all(), checked=declared_checks()) == []


def test_claim_ids_are_prefixed_by_their_area_module():
    registry = load_all()
    for name in area_modules():
        area = name.replace("_", "-")
        for topic in topic_modules(name):
            for value in vars(importlib.import_module(topic)).values():
                if isinstance(value, Claim):
                    assert value.area == area, f"{value.id} is defined in {topic}"
    assert {c.area for c in registry} == {m.replace("_", "-") for m in area_modules()}


def test_every_claim_names_an_importable_construction():
    for claim in load_all():
        if claim.construction is not None:
            assert claim.resolve_construction() is not None, claim.id


def test_claim_texts_hold_no_control_characters():
    """A LaTeX command typed in a non-raw string loses its backslash to an escape (``"\\top"``
    is a tab and "op"): no claim's title, statement or notes holds a control character."""
    for claim in load_all():
        for field in ("title", "statement", "notes"):
            text = getattr(claim, field) or ""
            bad = sorted({repr(c) for c in text if ord(c) < 32 and c != "\n"})
            assert not bad, f"{claim.id}'s {field} holds {bad}"


def test_refuted_claims_state_their_correction():
    """A claim checked by a refutation must say what is true instead."""
    declared = declared_checks()
    for claim in load_all():
        if "refutation" in declared.get(claim.id, []):
            assert claim.correction, f"{claim.id} has a refutation check but no correction"


def test_refuted_claims_say_what_they_refute():
    """Every claim with a correction or a refutation check names its refutation's scope."""
    declared = declared_checks()
    for claim in load_all():
        if claim.correction or "refutation" in declared.get(claim.id, []):
            assert claim.refutes in REFUTATION_SCOPES, f"{claim.id}: refutes={claim.refutes!r}"


def test_a_refutation_check_without_scope_is_reported():
    with isolated_registry() as registry:
        make("area.one")
        problems = inconsistencies(registry, checked={"area.one": ["refutation"]})
    assert any("refutes" in p for p in problems), problems


@pytest.mark.parametrize("arguments, match", [
    ({"correction": "c"}, "refutes"),
    ({"refutes": "as-written"}, "correction"),
    ({"correction": "c", "refutes": "the paper"}, "refutes must be one of"),
])
def test_refutation_scope_is_validated(arguments, match):
    with isolated_registry(), pytest.raises(ValueError, match=match):
        Claim(id="area.slug", title="t", statement="s", source=Source(**SOURCE),
              kind="identity", **arguments)


def test_unverified_locator_needs_a_reason():
    with pytest.raises(ValueError, match="doubt"):
        Source(**SOURCE, verified=False)
    assert Source(**SOURCE, verified=False, doubt="not re-read").as_dict()["verified"] is False


def _mutant_claims() -> set[str]:
    """Claim ids named by @pytest.mark.mutant(...) in tests/test_*.py, read without importing."""
    named: set[str] = set()
    for path in TESTS.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "mutant"
                    and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr == "mark"):
                named.update(arg.value for arg in node.args if isinstance(arg, ast.Constant))
    return named


def test_every_claim_has_a_mutant():
    mutated = _mutant_claims()  # once: it parses every test file
    missing = sorted(c.id for c in load_all() if c.id not in mutated)
    assert missing == [], f"claims without a mutant test in tests/: {missing}"


def test_mutants_name_known_claims():
    unknown = sorted(_mutant_claims() - set(load_all().claims))
    assert unknown == [], f"mutant tests name unknown claims: {unknown}"


# --- validation of claims ----------------------------------------------------------------

@pytest.mark.parametrize("field, value, match", [
    ("id", "NoArea", "area.slug"),
    ("id", "area.Bad_Slug", "area.slug"),
    ("kind", "theorem", "kind"),
    ("construction", "no_colon_here", "module:attribute"),
])
def test_claim_rejects_malformed_fields(field, value, match):
    arguments = {"id": "area.slug", "title": "t", "statement": "s",
                 "source": Source(**SOURCE), "kind": "identity", field: value}
    with isolated_registry(), pytest.raises(ValueError, match=match):
        Claim(**arguments)


@pytest.mark.parametrize("field, value", [("arxiv", "arXiv:2408"), ("tag", "X"), ("where", " ")])
def test_source_rejects_malformed_fields(field, value):
    with pytest.raises(ValueError, match=field):
        Source(**(SOURCE | {field: value}))


def test_duplicate_ids_are_rejected():
    with isolated_registry():
        make("area.one")
        with pytest.raises(ValueError, match="duplicate"):
            make("area.one")


# --- consistency checks on synthetic registries ------------------------------------------

def test_unknown_claim_in_a_check_is_reported():
    with isolated_registry() as registry:
        make("area.known")
        problems = inconsistencies(registry, checked={"area.known": ["property"],
                                                      "area.typo": ["property"]})
    assert problems == ["a check names unknown claim 'area.typo'"]


def test_claim_without_a_check_is_reported():
    with isolated_registry() as registry:
        make("area.lonely")
        make("area.symbolic-only")
        problems = inconsistencies(registry, checked={"area.symbolic-only": ["symbolic"]})
    assert problems == ["claim 'area.lonely' has no check",
                        "claim 'area.symbolic-only' has only symbolic checks"]


def test_dependency_cycle_is_reported():
    with isolated_registry() as registry:
        make("area.a", depends_on=("area.b",))
        make("area.b", depends_on=("area.c",))
        make("area.c", depends_on=("area.a",))
        make("area.d", depends_on=("area.a",))
        problems = inconsistencies(registry)
    assert problems == ["dependency cycle: area.a -> area.b -> area.c -> area.a"]


def test_unknown_dependency_is_reported():
    with isolated_registry() as registry:
        make("area.a", depends_on=("area.ghost",))
        assert inconsistencies(registry) == ["claim 'area.a' depends on unknown claim 'area.ghost'"]


def test_verified_claim_depending_on_failing_claim_is_reported():
    with isolated_registry() as registry:
        make("area.base")
        make("area.top", depends_on=("area.base",))
        evidence = {"claims": {"area.base": {"status": "failing"},
                               "area.top": {"status": "verified"}}}
        assert inconsistencies(registry, evidence) == [
            "verified claim 'area.top' depends on failing 'area.base'"]
        evidence["claims"]["area.base"]["status"] = "verified"
        assert inconsistencies(registry, evidence) == []


def test_reverse_dependencies():
    with isolated_registry() as registry:
        make("area.base")
        make("area.top", depends_on=("area.base",))
        assert registry.dependents("area.base") == ["area.top"]


# --- status derivation -------------------------------------------------------------------

def checks(*pairs):
    return [{"tier": tier, "outcome": outcome} for tier, outcome in pairs]


@pytest.mark.parametrize("records, status", [
    (checks(), "unchecked"),
    (checks(("property", "skipped")), "unchecked"),
    (checks(("symbolic", "passed")), "unchecked"),
    (checks(("symbolic", "passed"), ("property", "passed")), "verified"),
    (checks(("property", "passed"), ("numeric", "failed")), "failing"),
    (checks(("refutation", "passed")), "refuted"),
    (checks(("refutation", "failed")), "failing"),
    (checks(("refutation", "passed"), ("property", "failed")), "failing"),
    (checks(("property", "passed"), ("empirical", "skipped")), "verified"),
    (checks(("proved", "passed")), "verified"),  # a machine-checked proof is beyond symbolic
    (checks(("symbolic", "passed"), ("proved", "passed")), "verified"),
    (checks(("proved", "skipped")), "unchecked"),  # no coqc: the proof did not run
    (checks(("proved", "failed"), ("property", "passed")), "failing"),
    # an undecided sampled check: precedence failing > inconclusive > refuted > verified
    (checks(("numeric", "inconclusive")), "inconclusive"),
    (checks(("property", "passed"), ("numeric", "inconclusive")), "inconclusive"),
    (checks(("refutation", "passed"), ("empirical", "inconclusive")), "inconclusive"),
    (checks(("refutation", "inconclusive"), ("property", "failed")), "failing"),
    (checks(("symbolic", "passed"), ("refutation", "inconclusive")), "inconclusive"),
])
def test_status_is_derived_from_outcomes(records, status):
    assert derive_status(records) == status


# --- sources without an arXiv id -----------------------------------------------------------------

OPENREVIEW = {"openreview": "cKNOCYPo2W", "where": "Abstract", "tag": "V"}


def test_openreview_source_has_its_url_and_label():
    source = Source(**OPENREVIEW)
    assert source.arxiv is None
    assert source.url == "https://openreview.net/forum?id=cKNOCYPo2W"
    assert source.label == "OpenReview:cKNOCYPo2W"
    assert source.as_dict()["openreview"] == "cKNOCYPo2W" and source.as_dict()["arxiv"] is None
    assert Source(**SOURCE).label == "arXiv:2408.14332"


@pytest.mark.parametrize("value", ["cKNOCYPo2", "cKNOCYPo2Wx", "cKNOCYPo 2", "cKNOCYPo2W\n",
                                   "https://openreview.net/forum?id=cKNOCYPo2W", 17])
def test_openreview_id_is_validated_as_strictly_as_arxiv(value):
    with pytest.raises(ValueError, match="openreview"):
        Source(**(OPENREVIEW | {"openreview": value}))


@pytest.mark.parametrize("ids", [{}, {"arxiv": "2408.14332", "openreview": "cKNOCYPo2W"}])
def test_source_needs_exactly_one_identifier(ids):
    with pytest.raises(ValueError, match="exactly one of arxiv and openreview"):
        Source(where="Abstract", tag="V", **ids)


def test_openreview_source_renders_in_cli_and_docs():
    import sys

    import docs_fixture

    for module in ("sphinx", "myst_parser", "jinja2"):  # the docs extra
        docs_fixture.require(module)
    from theorems import site as docs
    from theorems.cli import _describe

    sys.path.insert(0, str(docs.DOCS / "_ext"))
    from theorems_site import data, render

    with isolated_registry() as registry:
        claim = Claim(id="x.y", title="t", statement="s", kind="identity",
                      source=Source(ref="Anonymous (2025)", **OPENREVIEW))
        text = _describe(claim)
        site = data.collect(registry, None, [])
        pages = render.pages(site, graph_svg="", graph_renderer="python", figures={})
    assert "OpenReview:cKNOCYPo2W" in text and "openreview.net/forum?id=cKNOCYPo2W" in text
    page = pages[data.area_docname("x")]
    assert "OpenReview:cKNOCYPo2W](https://openreview.net/forum?id=cKNOCYPo2W)" in page
    assert "arXiv" not in page.split("**Source.**", 1)[1].split("\n\n", 1)[0]


def test_verified_through_dependencies_needs_every_transitive_dependency_verified():
    with isolated_registry() as registry:
        make("a.base")
        make("a.middle", ("a.base",))
        make("a.top", ("a.middle",))
        make("a.alone")
        assert registry.transitive_dependencies("a.top") == ["a.base", "a.middle"]
        assert registry.transitive_dependents("a.base") == ["a.middle", "a.top"]
        all_verified = dict.fromkeys(registry.claims, "verified")
        assert all(verified_through_dependencies(registry, all_verified).values())
        base_refuted = {**all_verified, "a.base": "refuted"}
        assert verified_through_dependencies(registry, base_refuted) == {
            "a.base": False, "a.middle": False, "a.top": False, "a.alone": True}
        assert not verified_through_dependencies(registry, {"a.top": "verified"})["a.top"]


def _with_calls(calls_by_claim: dict[str, list[str]]) -> dict:
    return {"claims": {cid: {"status": "verified", "checks": [
        {"tier": "property", "outcome": "passed", "calls": calls}]}
        for cid, calls in calls_by_claim.items()}}


def test_derived_dependencies_must_match_the_declared_ones():
    with isolated_registry() as registry:
        Claim(id="a.base", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              construction="constructions.hopfield:twicing")
        Claim(id="a.user", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              construction="constructions.hopfield:hopfield_update", depends_on=("a.base",))
        Claim(id="a.stowaway", title="t", statement="s", source=Source(**SOURCE),
              kind="identity", construction="constructions.bilinear:bilinear_layer")
        good = _with_calls({"a.base": ["constructions.hopfield:twicing"],
                            "a.user": ["constructions.hopfield:hopfield_update",
                                       "constructions.hopfield:twicing"],
                            "a.stowaway": ["constructions.bilinear:BilinearLayer.forward",
                                           "constructions.bilinear:bilinear_layer"]})
        assert dependency_mismatches(registry, good) == []
        # a.user's checks no longer call a.base's construction: an unexercised dependency
        unused = _with_calls({"a.user": ["constructions.hopfield:hopfield_update"]})
        assert any("never call" in p for p in dependency_mismatches(registry, unused))
        # a.stowaway calls a.user's construction without depending on it
        hidden = _with_calls({"a.stowaway": ["constructions.bilinear:bilinear_layer",
                                             "constructions.hopfield:HopfieldUpdate.forward",
                                             "constructions.hopfield:hopfield_update"]})
        problems = dependency_mismatches(registry, hidden)
        assert any("'a.stowaway' uses constructions.hopfield:hopfield_update" in p
                   for p in problems), problems
        assert dependency_mismatches(registry, {"claims": {}}) == []  # no calls: not judged


def test_calls_to_an_oracle_need_no_dependency():
    with isolated_registry() as registry:
        Claim(id="a.rates", title="t", statement="s", source=Source(**SOURCE), kind="bound",
              construction="constructions.power_method:power_iteration")  # an oracle
        Claim(id="a.bound", title="t", statement="s", source=Source(**SOURCE), kind="bound",
              construction="constructions.hopfield:twicing")  # a result
        Claim(id="a.model", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              construction="constructions.hopfield:hopfield_update")
        calls = ["constructions.hopfield:hopfield_update",
                 "constructions.power_method:power_iteration"]
        assert dependency_mismatches(registry, _with_calls({"a.model": calls})) == []
        problems = dependency_mismatches(
            registry, _with_calls({"a.model": [*calls, "constructions.hopfield:twicing"]}))
        assert len(problems) == 1 and "uses constructions.hopfield:twicing" in problems[0]


def test_a_construction_is_matched_where_it_is_defined():
    """A claim names a package's re-export; the plugin records the defining module."""
    with isolated_registry() as registry:
        Claim(id="a.base", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              construction="constructions.induction_heads:two_layer_parameters")
        Claim(id="a.user", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              depends_on=("a.base",))
        calls = _with_calls({"a.user": [
            "constructions.induction_heads.margins:two_layer_parameters"]})
        assert dependency_mismatches(registry, calls) == []


def test_result_dependencies_are_exempt_from_being_called():
    with isolated_registry() as registry:
        Claim(id="a.lemma", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              construction="constructions.hopfield:twicing")
        Claim(id="a.theorem", title="t", statement="s", source=Source(**SOURCE),
              kind="identity", construction="constructions.hopfield:hopfield_update",
              depends_on=("a.lemma",), result_dependencies={"a.lemma": "the proof uses it"})
        own = ["constructions.hopfield:hopfield_update"]
        assert dependency_mismatches(registry, _with_calls({"a.theorem": own})) == []
        # called anyway (a result shared through a cache is computed by whichever check runs
        # first): not reported, since whether it is called depends on the order of the checks
        called = _with_calls({"a.theorem": [*own, "constructions.hopfield:twicing"]})
        assert dependency_mismatches(registry, called) == []
        Claim(id="a.plain", title="t", statement="s", source=Source(**SOURCE),
              kind="identity", construction="constructions.hopfield:hopfield_update",
              depends_on=("a.lemma",))
        problems = dependency_mismatches(registry, _with_calls({"a.plain": own}))
        assert len(problems) == 1 and "never call" in problems[0], problems
        with pytest.raises(ValueError, match="not in depends_on"):
            Claim(id="a.other", title="t", statement="s", source=Source(**SOURCE),
                  kind="identity", result_dependencies={"a.lemma": "why"})
        with pytest.raises(ValueError, match="needs a reason"):
            Claim(id="a.other", title="t", statement="s", source=Source(**SOURCE),
                  kind="identity", depends_on=("a.lemma",), result_dependencies={"a.lemma": ""})


def test_incidental_calls_are_not_dependencies_but_need_a_reason():
    """A construction a check calls only for reported evidence (a table's comparison column) is
    declared with the reason; any other call of it still counts."""
    with isolated_registry() as registry:
        Claim(id="a.base", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              construction="constructions.hopfield:twicing")
        Claim(id="a.user", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              construction="constructions.hopfield:hopfield_update",
              incidental_calls={"constructions.hopfield:twicing": "a baseline column"})
        Claim(id="a.plain", title="t", statement="s", source=Source(**SOURCE), kind="identity",
              construction="constructions.hopfield:hopfield_update")
        both = ["constructions.hopfield:hopfield_update", "constructions.hopfield:twicing"]
        assert dependency_mismatches(registry, _with_calls({"a.user": both})) == []
        problems = dependency_mismatches(registry, _with_calls({"a.plain": both}))
        assert len(problems) == 1 and "without depending on it" in problems[0], problems
        assert registry.claims["a.user"].as_dict()["incidental_calls"] == {
            "constructions.hopfield:twicing": "a baseline column"}
        for bad, match in (({"constructions.hopfield:twicing": " "}, "needs a reason"),
                           ({"twicing": "why"}, "module:attribute"),
                           ({"constructions.hopfield:hopfield_update": "why"},
                            "its own construction")):
            with pytest.raises(ValueError, match=match):
                Claim(id="a.bad", title="t", statement="s", source=Source(**SOURCE),
                      kind="identity", construction="constructions.hopfield:hopfield_update",
                      incidental_calls=bad)

# Mismatches still open, each with why it is not resolved yet. The test fails on any mismatch not
# listed here, and on a listed one that no longer occurs (remove it then).
OPEN_MISMATCHES: set[str] = set()


def test_the_real_registry_declares_the_dependencies_its_checks_exercise():
    """Reads the last complete evidence file; skips where there is none with recorded calls."""
    from theorems import evidence_file

    path = Path(__file__).resolve().parents[1] / evidence_file.DEFAULT_PATH
    if not path.is_file():
        pytest.skip(f"no evidence at {path}: run python -m theorems verify")
    data = evidence_file.load(path)
    if not any("calls" in c for r in data["claims"].values() for c in r["checks"]):
        pytest.skip("the evidence predates recorded calls")
    found = set(dependency_mismatches(load_all(), data))
    assert not found - OPEN_MISMATCHES, "new mismatches:\n" + "\n".join(sorted(
        found - OPEN_MISMATCHES))
    assert not OPEN_MISMATCHES - found, "resolved, so remove from OPEN_MISMATCHES:\n" + (
        "\n".join(sorted(OPEN_MISMATCHES - found)))
