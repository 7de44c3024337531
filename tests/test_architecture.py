"""The house rules, checked: imports run one way (constructions <- empirics <- theorems), no two
modules import each other directly or through a loop, no construction module outside the
interop wing (``constructions/interop/`` and its facade ``constructions.export``) imports it, no
construction outside the circuits wing (``constructions/circuits/``) imports that, and no module
outgrows the size guide.

Imports are read from the source (every ``import`` statement, also those inside functions, since
a lazy import still ties two modules together, and those under ``if TYPE_CHECKING:``, since a
type one module names from another ties them as well), so the test needs no import of its own.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("constructions", "empirics", "theorems")
LAYER = {"constructions": 0, "empirics": 1, "theorems": 2}
MAX_LINES = 600
# The interop wing (constructions/interop/: files, bundles, the TransformerLens exports) and its
# facade constructions.export. The area modules may use build recording and the torch-only
# residual layout types (constructions.recording, constructions.residual_layout), nothing else
# of it, and none of the libraries it wraps.
WING = "constructions.interop"
FACADE = "constructions.export"
INTEROP = (WING, FACADE, "transformer_lens", "nnsight", "safetensors")
# The circuits wing describes the constructions it sits on (their graphs, circuits, variants and
# benchmark cases): it imports them and the primitives, and no other construction module
# imports it, but the thin module that keeps the cases' old import path.
CIRCUITS_WING = "constructions.circuits"
CIRCUITS_OLD_PATHS = {"constructions.circuit_cases"}
# Former paths of topics renamed to have one name in every layer: each re-exports the module
# that holds the code now, for users; the project imports the new path.
FORMER_TOPIC_PATHS = {"constructions.mean_field", "constructions.layernorm_geometry"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def named_imports(path: Path) -> set[str]:
    """Every module name the ``import`` statements of ``path`` name, relative ones made
    absolute (``from theorems import site`` names ``theorems`` and ``theorems.site``), project
    module or not."""
    found = set()
    here = module_name(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = here.rsplit(".", node.level - (path.name == "__init__.py"))[0]
                base = f"{package}.{base}" if base else package
            found |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return found


def imports_of(path: Path) -> set[str]:
    """The project modules ``path`` imports (a name imported from a package counts as the
    submodule when there is one: ``from theorems import site`` is ``theorems.site``)."""
    found = set()
    for name in named_imports(path):
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module_name(path):
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


def in_the_wing(name: str) -> bool:
    return name == FACADE or name == WING or name.startswith(WING + ".")


def public_path(path: Path) -> bool:
    """Whether ``path`` is a public path of the wing (``constructions/files.py`` for
    ``constructions.interop.files``): nothing but a docstring, imports from the wing and an
    ``__all__`` listing exactly the names imported (a module ``__getattr__`` aside)."""
    imported: set[str] = set()
    listed = None
    for i, node in enumerate(ast.parse(path.read_text()).body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.ImportFrom) and not node.level and (
                node.module or "").startswith(WING + "."):
            imported |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Assign) and [getattr(t, "id", None)
                                               for t in node.targets] == ["__all__"]:
            listed = set(ast.literal_eval(node.value))
        else:
            return False
    return listed == imported - {"__getattr__"}


PUBLIC_PATHS = {n for n, path in MODULES.items() if n.startswith("constructions.")
                and not in_the_wing(n) and public_path(path)}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("constructions.")
                                        and not in_the_wing(n) and n not in PUBLIC_PATHS))
def test_construction_modules_do_not_import_the_interop_wing(name):
    assert not {m for m in named_imports(MODULES[name])
                if any(m == i or m.startswith(i + ".") for i in INTEROP)}


def test_the_project_imports_the_wing_not_its_public_paths():
    """The re-export modules are for users; the project's own modules and tests import the
    module that holds the code."""
    tests = {module_name(p): imports_of(p) for p in (ROOT / "tests").rglob("*.py")}
    found = [f"{name} imports {target}" for name, targets in {**import_graph(), **tests}.items()
             for target in targets
             if target in PUBLIC_PATHS | CIRCUITS_OLD_PATHS | FORMER_TOPIC_PATHS]
    assert not found
    assert PUBLIC_PATHS  # the re-export modules are recognised, so this rule reads them


def test_no_construction_outside_the_circuits_wing_imports_it():
    def in_wing(name: str) -> bool:
        return name == CIRCUITS_WING or name.startswith(CIRCUITS_WING + ".")

    found = [f"{a} imports {b}" for a, targets in import_graph().items() for b in targets
             if a.startswith("constructions.") and not in_wing(a)
             and a not in CIRCUITS_OLD_PATHS and in_wing(b)]
    assert not found


def test_topic_modules_declare_their_claims_first():
    """CONTRIBUTING's order: in every topic module, no claim comes after a check."""
    late = []
    for name, path in MODULES.items():
        if not name.startswith("theorems.areas.") or name.rpartition(".")[2].startswith("_"):
            continue
        seen_check = False
        for node in ast.parse(path.read_text()).body:
            targets = [getattr(t, "id", "") for t in getattr(node, "targets", [])]
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")) or any(
                    t.startswith("test_") for t in targets):
                seen_check = True
            elif (seen_check and isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                  and getattr(node.value.func, "id", None) == "Claim"):
                late.append(f"{name}: {targets[0]}")
    assert not late, f"claims declared after a check: {late}"


def test_no_module_outgrows_the_size_guide():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"
