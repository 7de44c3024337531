"""The house rules, checked: imports run one way (constructions <- empirics <- theorems), no two
modules import each other directly or through a loop, no construction module imports the
interop layer, and no module outgrows the size guide.

Imports are read from the source (every ``import`` statement, also those inside functions, since
a lazy import still ties two modules together), so the test needs no import of its own.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("constructions", "empirics", "theorems")
LAYER = {"constructions": 0, "empirics": 1, "theorems": 2}
MAX_LINES = 700
# The interop layer: exports to TransformerLens and nnsight, files and bundles. The area modules
# may use build recording and the torch-only residual layout types, nothing else of it.
INTEROP_LAYER = {"export", "transformer_lens", "transformer_lens_layout", "transformer_bridge",
                 "files", "bundle"}
INTEROP = (*(f"constructions.{m}" for m in INTEROP_LAYER), "transformer_lens", "nnsight",
           "safetensors")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def imports_of(path: Path) -> set[str]:
    """The project modules ``path`` imports (a name imported from a package counts as the
    submodule when there is one: ``from theorems import site`` is ``theorems.site``)."""
    found = set()
    here = module_name(path)
    tree = ast.parse(path.read_text())
    # imports for type checkers only (``if TYPE_CHECKING:``) never run
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and getattr(block.test, "id", None) == "TYPE_CHECKING"
                   for n in ast.walk(block)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = here.rsplit(".", node.level - (path.name == "__init__.py"))[0]
                base = f"{package}.{base}" if base else package
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != here:
                found.add(name)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports. Built on first use, not at collection: parsing
    every module takes about a second, which each xdist worker would pay before its first
    test."""
    return {name: imports_of(path) for name, path in MODULES.items()}


def test_imports_run_one_way():
    upward = [f"{a} imports {b}" for a, targets in import_graph().items() for b in targets
              if LAYER[b.split(".")[0]] > LAYER[a.split(".")[0]]]
    assert not upward


def test_no_module_imports_itself_through_a_loop():
    graph = import_graph()
    colour: dict[str, int] = {}
    loops: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        colour[node] = 1
        for target in sorted(graph[node]):
            # a package's __init__ and its own submodules are one unit, not a loop
            if target.startswith(node + ".") or node.startswith(target + "."):
                continue
            if colour.get(target) == 1:
                loops.append([*path[path.index(target):], target])
            elif not colour.get(target):
                visit(target, [*path, target])
        colour[node] = 2

    for name in sorted(graph):
        if not colour.get(name):
            visit(name, [name])
    assert not loops, "import loops: " + "; ".join(" -> ".join(loop) for loop in loops)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("constructions.")
                                        and n.split(".")[1] not in INTEROP_LAYER))
def test_construction_modules_do_not_import_the_interop_layer(name):
    source = MODULES[name].read_text()
    tree = ast.parse(source)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m.startswith(INTEROP)}


def test_no_module_outgrows_the_size_guide():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"
