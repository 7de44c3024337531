"""The claim catalogue read without its checks: what ``python -m theorems list`` and ``show`` use.

A topic module declares its claims first, then their checks. Importing it therefore imports what
the checks need (Hypothesis, torch, the constructions). Reading the catalogue needs none of
that: :func:`load_claims` parses each topic module and executes only its top-level assignments,
and its undecorated function definitions (a helper that words a statement, say), with only
:mod:`theorems.claims` imported and the constants it imports from its own area's modules (a
package's ``_shared``) read the same way. Every other statement is skipped: a decorated
function, a check, an assignment that needs a skipped import.

It is exact or it steps aside. If a ``Claim(...)`` assignment cannot be evaluated this way (its
statement is computed by a helper, say), the catalogue is loaded by importing every area instead
(:func:`theorems.claims.load_all`), so the result never differs from the full import; a test
compares the two and asserts that the light path is the one taken.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from types import CodeType
from typing import Any

from theorems.claims import (
    AREAS_PACKAGE,
    Registry,
    area_modules,
    isolated_registry,
    load_all,
    topic_modules,
)

# What a claim declaration may import while it is read: the data model, and nothing heavier.
_LIGHT_MODULES = ("__future__", "theorems.claims")


class _NotLightError(Exception):
    """A claim declaration needs more than the light path provides."""


def _source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise _NotLightError(f"{module} not found")
    return Path(spec.origin).read_text()


def _is_claim(node: ast.stmt) -> bool:
    value = getattr(node, "value", None)
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id == "Claim")


@functools.lru_cache(maxsize=1024)
def _statements(module: str, source: str) -> tuple[tuple[ast.stmt, CodeType | None], ...]:
    """``module``'s top-level statements, each with its code compiled alone where the light
    path may run it. Kept per source text: parsing and compiling are most of a load, and a
    process that loads the catalogue again (the CLI's tests) reads unchanged sources."""
    light = (ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef)
    return tuple((node, compile(ast.Module(body=[node], type_ignores=[]),
                                f"<claims of {module}>", "exec")
                  if isinstance(node, light) else None)
                 for node in ast.parse(source).body)


def _constants(module: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The namespace left by executing ``module``'s light statements (memoised in ``cache``)."""
    if module in cache:
        return cache[module]
    cache[module] = namespace = {"__name__": module}
    for node, code in _statements(module, _source(module)):
        if isinstance(node, ast.ImportFrom) and node.module in _LIGHT_MODULES:
            exec(code, namespace)  # the project's own source, statement by statement
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and node.module.startswith(AREAS_PACKAGE + ".")):
            names = _constants(node.module, cache)
            for alias in node.names:
                if alias.name in names:
                    namespace[alias.asname or alias.name] = names[alias.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.FunctionDef)):
            # Defining an undecorated function runs none of its body (its defaults, though,
            # may name a construction: then it is skipped like any other failing statement).
            if isinstance(node, ast.FunctionDef) and node.decorator_list:
                continue
            try:
                exec(code, namespace)
            except Exception as error:  # a name the light path skipped, or a heavy call
                if _is_claim(node):
                    raise _NotLightError(f"{module}:{node.lineno}: {error}") from error
    return namespace


def load_claims() -> Registry:
    """Every registered claim, in definition order, preferably without importing the checks.

    Returns a fresh registry read by the light path, or the full registry of
    :func:`~theorems.claims.load_all` where some claim needs more (see the module docstring).
    """
    cache: dict[str, dict[str, Any]] = {}
    try:
        with isolated_registry() as registry:
            for area in area_modules():
                for module in topic_modules(area):
                    _constants(module, cache)
    except _NotLightError:
        return load_all()
    return registry


def is_light(registry: Registry) -> bool:
    """Whether ``registry`` came from the light path (not the full import's registry)."""
    from theorems import claims

    return registry is not claims.current_registry()
