"""The audit records (theorems/audit/<area>.toml) against the claims, checks and mutants they
name: static and import-level only, no check runs (CONTRIBUTING.md, "The audit protocol").

For every area with an audit file: every claim has a record and every record a claim; the
sentences are verbatim pieces of the statement, in order, that together cover it; each names
checks of its own claim and mutants of its own claim that call one of those checks' factories;
``scope`` and ``source_checked`` are filled in, and ``refutes`` says what a refuted claim's
refutation refutes, opening with its ``Claim.refutes`` scope.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import unicodedata
from pathlib import Path

import pytest

from theorems import audit
from theorems.claims import area_modules, load_all, topic_modules

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
AUDITED = audit.areas()
RECORD_KEYS = {"scope", "source_checked", "refutes", "sentences"}
SENTENCE_KEYS = {"text", "checks", "mutants"}
# LaTeX spacing: \, \; \: \! "\ " \quad \qquad \enspace \thinspace and ~ assert nothing.
LATEX_SPACING = re.compile(r"\\[,;:! ]|\\(?:qquad|quad|enspace|thinspace)(?![A-Za-z])|~")


def area_id(module: str) -> str:
    return module.replace("_", "-")


def claims_of(area: str) -> dict:
    return {c.id: c for c in load_all() if c.area == area}


@functools.cache
def checks_of(area: str) -> dict[str, dict[str, object]]:
    """Claim id -> {module-level test name: test object} over the area's topic modules."""
    found: dict[str, dict[str, object]] = {}
    for name in topic_modules(area.replace("-", "_")):
        for attribute, value in vars(importlib.import_module(name)).items():
            if not attribute.startswith("test") or not callable(value):
                continue
            for mark in getattr(value, "pytestmark", []):
                if mark.name == "claim":
                    found.setdefault(mark.args[0], {})[attribute] = value
    return found


def factory_name(test) -> str:
    """The name of the factory a check was made by: ``decomposition_check`` for a run function
    whose ``__qualname__`` is ``decomposition_check.<locals>.run`` (a Hypothesis test's own
    function is its ``.hypothesis.inner_test``, which ``check`` wraps keeping the name), or the
    function itself for a check written as a plain module-level function."""
    handle = getattr(test, "hypothesis", None)
    function = handle.inner_test if handle is not None else test
    parts = function.__qualname__.split(".<locals>.")
    return parts[-2].split(".")[-1] if len(parts) > 1 else parts[0]


@functools.cache
def _module_factories(module_name: str) -> dict[str, ast.FunctionDef]:
    """The module-level functions of a module that are factories: they define a function
    inside and return it."""
    tree = ast.parse(Path(importlib.import_module(module_name).__file__).read_text())
    factories = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        inner = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        returned = {n.value.id for n in ast.walk(node) if isinstance(n, ast.Return)
                    and isinstance(n.value, ast.Name)}
        if inner & returned:
            factories[node.name] = node
    return factories


def factories_of(test) -> set[str]:
    """:func:`factory_name`, and for a check written as a plain function (which loops over
    cases, say) the factories of its own module that it calls."""
    name = factory_name(test)
    if "<locals>" in getattr(test, "__qualname__", "") or getattr(test, "hypothesis", None):
        return {name}
    tree = ast.parse(Path(importlib.import_module(test.__module__).__file__).read_text())
    own = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name),
               None)
    factories = _module_factories(test.__module__)
    return {name} | (_called_names(own) & set(factories) if own is not None else set())


@functools.cache
def parsed_test_files() -> dict[str, ast.Module]:
    return {f"tests/{path.name}": ast.parse(path.read_text(), str(path))
            for path in sorted(TESTS.glob("test_*.py"))}


def _mark_args(function: ast.FunctionDef, mark: str) -> list[list[str]]:
    """The constant arguments of each ``@pytest.mark.<mark>(...)`` decorator of a function."""
    return [[a.value for a in d.args if isinstance(a, ast.Constant)]
            for d in function.decorator_list
            if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
            and d.func.attr == mark]


@functools.cache
def mutants() -> dict[str, tuple[ast.FunctionDef, ast.Module]]:
    """``tests/test_x.py::name`` -> (its module-level function, its module), for every test."""
    return {f"{path}::{node.name}": (node, module)
            for path, module in parsed_test_files().items() for node in module.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def _called_names(node: ast.AST) -> set[str]:
    """Names a function body calls: ``f(...)``, ``m.f(...)``, and ``partial(f, ...)``."""
    def name(expression: ast.AST) -> str | None:
        if isinstance(expression, ast.Name):
            return expression.id
        if isinstance(expression, ast.Attribute):
            return expression.attr
        return None

    called = set()
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        called.add(name(call.func))
        if name(call.func) == "partial" and call.args:
            called.add(name(call.args[0]))
    return called - {None}


def calls_factory(function: ast.FunctionDef, module: ast.Module, factories: set[str]) -> bool:
    """Whether a mutant calls one of ``factories`` by name, directly, through
    ``functools.partial``, or through a function of its own test module that does."""
    helpers = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
    seen, stack = set(), [function]
    while stack:
        node = stack.pop()
        called = _called_names(node)
        if called & factories:
            return True
        for helper in called & set(helpers) - seen:
            seen.add(helper)
            stack.append(helpers[helper])
    return False


def uncovered(statement: str, texts: list[str]) -> tuple[list[str], list[str]]:
    """(the texts not found, in order, in the statement; the gaps between the found ones that
    assert something: not only whitespace, punctuation and LaTeX spacing)."""
    missing, gaps, position = [], [], 0
    for text in texts:
        start = statement.find(text, position) if text.strip() else -1
        if start < 0:
            missing.append(text)
            continue
        gaps.append(statement[position:start])
        position = start + len(text)
    gaps.append(statement[position:])
    meaningful = []
    for gap in gaps:
        bare = LATEX_SPACING.sub("", gap)
        if any(not ch.isspace() and not unicodedata.category(ch).startswith("P")
               for ch in bare):
            meaningful.append(gap.strip())
    return missing, meaningful


def _report(problems: list[str]) -> str:
    return "\n  " + "\n  ".join(problems)


# --- which areas have a record ---------------------------------------------------------------

def test_every_area_has_an_audit_file():
    areas = [area_id(m) for m in area_modules()]
    unknown = sorted(set(AUDITED) - set(areas))
    assert unknown == [], f"audit files of unknown areas: {unknown}"
    pending = [a for a in areas if a not in AUDITED]
    assert not pending, (f"areas without an audit record: {', '.join(pending)} (CONTRIBUTING.md, "
                         "The audit protocol)")


def test_the_loader_rejects_bad_input():
    with pytest.raises(ValueError, match=r"^area"):
        audit.load("prenorm_gradients")
    with pytest.raises(TypeError, match=r"^claim_id"):
        audit.record(3)
    with pytest.raises(ValueError, match=r"^claim_id"):
        audit.record("layernorm")


# --- per audited area ------------------------------------------------------------------------

@pytest.fixture(params=AUDITED)
def area(request) -> str:
    return request.param


def test_records_and_claims_match(area):
    records, claims = audit.load(area), claims_of(area)
    problems = [f"claim {c!r} has no record" for c in claims if c not in records]
    problems += [f"record {r!r} names no claim of area {area!r}" for r in records
                 if r not in claims]
    for claim_id, rec in records.items():
        if not isinstance(rec, dict):
            problems.append(f"{claim_id}: a record is a table")
            continue
        problems += [f"{claim_id}: missing key {k!r}" for k in sorted(RECORD_KEYS - set(rec))]
        problems += [f"{claim_id}: unknown key {k!r}" for k in sorted(set(rec) - RECORD_KEYS)]
        for i, sentence in enumerate(rec.get("sentences", [])):
            keys = set(sentence)
            problems += [f"{claim_id} sentence {i + 1}: missing key {k!r}"
                         for k in sorted(SENTENCE_KEYS - keys)]
            problems += [f"{claim_id} sentence {i + 1}: unknown key {k!r}"
                         for k in sorted(keys - SENTENCE_KEYS)]
    assert not problems, _report(problems)


def test_sentences_cover_the_statement(area):
    problems = []
    for claim_id, claim in claims_of(area).items():
        rec = audit.load(area).get(claim_id)
        if rec is None:
            continue
        texts = [s.get("text", "") for s in rec.get("sentences", [])]
        missing, gaps = uncovered(claim.statement, texts)
        problems += [f"{claim_id}: not a verbatim piece of the statement (after the sentence "
                     f"before it): {t!r}" for t in missing]
        problems += [f"{claim_id}: no sentence covers {g!r} (give it a check, or move it to "
                     "the claim's notes)" for g in gaps]
    assert not problems, _report(problems)


def test_every_sentence_names_checks_of_its_claim(area):
    problems = []
    for claim_id, rec in audit.load(area).items():
        known = checks_of(area).get(claim_id, {})
        for i, sentence in enumerate(rec.get("sentences", [])):
            checks = sentence.get("checks", [])
            if not checks:
                problems.append(f"{claim_id} sentence {i + 1}: no check asserts it")
            problems += [f"{claim_id} sentence {i + 1}: {c!r} is not a check of {claim_id} "
                         f"(its checks: {sorted(known)})" for c in checks if c not in known]
    assert not problems, _report(problems)


def test_every_sentence_has_a_mutant_of_its_claim_on_its_checks(area):
    problems = []
    for claim_id, rec in audit.load(area).items():
        known = checks_of(area).get(claim_id, {})
        for i, sentence in enumerate(rec.get("sentences", [])):
            where = f"{claim_id} sentence {i + 1}"
            factories = set().union(*(factories_of(known[c])
                                      for c in sentence.get("checks", []) if c in known))
            if not sentence.get("mutants"):
                problems.append(f"{where}: no mutant breaks it")
            for name in sentence.get("mutants", []):
                if name not in mutants():
                    problems.append(f"{where}: no test {name!r} in tests/ "
                                    "(write tests/test_<area>.py::test_name)")
                    continue
                function, module = mutants()[name]
                if not any(claim_id in args for args in _mark_args(function, "mutant")):
                    problems.append(f"{where}: {name} is not marked "
                                    f"@pytest.mark.mutant({claim_id!r})")
                if not calls_factory(function, module, factories):
                    problems.append(f"{where}: {name} calls none of the factories of the "
                                    f"sentence's checks ({sorted(factories)})")
    assert not problems, _report(problems)


def test_scope_source_and_refutation_are_stated(area):
    problems = []
    for claim_id, claim in claims_of(area).items():
        rec = audit.load(area).get(claim_id)
        if rec is None:
            continue
        for key in ("scope", "source_checked"):
            if not str(rec.get(key, "")).strip():
                problems.append(f"{claim_id}: {key} is empty")
        refutes = str(rec.get("refutes", "")).strip()
        if claim.correction is None:
            if refutes:
                problems.append(f"{claim_id}: refutes is set, but the claim is not refuted "
                                "(it has no correction)")
        elif not refutes:
            problems.append(f"{claim_id}: a refuted claim's record says what it refutes")
        elif not refutes.startswith(f"{claim.refutes}:"):
            problems.append(f"{claim_id}: refutes must open with the claim's scope "
                            f"'{claim.refutes}:' (Claim.refutes), got {refutes[:40]!r}")
    assert not problems, _report(problems)


# --- the rules themselves --------------------------------------------------------------------

def test_coverage_ignores_punctuation_and_latex_spacing_only():
    statement = r"Let $x \in \mathbb R$. Then $x^2 \ge 0$,\; and $|x| \ge 0$."
    assert uncovered(statement, [r"Let $x \in \mathbb R$", r"Then $x^2 \ge 0$",
                                 r"and $|x| \ge 0$"]) == ([], [])
    missing, gaps = uncovered(statement, [r"Let $x \in \mathbb R$", r"and $|x| \ge 0$"])
    assert missing == [] and gaps == [r". Then $x^2 \ge 0$,\;"]
    assert uncovered(statement, ["and", "Let"])[0] == ["Let"]  # in order


def test_the_factory_is_recovered_from_a_check():
    from theorems.areas.layernorm import (
        test_a_midpoint_key_is_unselectable,
        test_layer_norm_is_scaled_projection,
    )

    assert factory_name(test_layer_norm_is_scaled_projection) == "decomposition_check"
    assert factory_name(test_a_midpoint_key_is_unselectable) == "midpoint_refutation"
    from theorems.areas.addition import test_failure_probability_by_enumeration

    assert factories_of(test_failure_probability_by_enumeration) == {
        "failure_probability_by_enumeration", "probability_exhaustive_check"}
    module = ast.parse("from functools import partial\n"
                       "def helper():\n    return expect_failure(partial(f_check, 1))\n"
                       "def test_m():\n    helper()\n"
                       "def test_n():\n    g_check()\n")
    test_m, test_n = module.body[2], module.body[3]
    assert calls_factory(test_m, module, {"f_check"})
    assert not calls_factory(test_n, module, {"f_check"})
