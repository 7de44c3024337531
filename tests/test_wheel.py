"""The wheel holds the whole project: installed from it, outside the source tree, the registry,
the constructions and the data files the code reads are all there.

An editable install hides packaging gaps (a hand-written package list once left every
subpackage out of the wheel: 34 of 177 claims). So this builds the wheel as ``pip install .``
would, installs it (without dependencies) into a fresh venv that has no access to this
checkout, and compares what it sees with the registry seen here. The dependencies come from
this interpreter's site-packages through a plain path entry, which puts them on ``sys.path``
without running their ``.pth`` hooks: this project's own editable install is one of those
hooks, so it cannot leak in. ``.ci/run`` also installs ``.[interop]`` into a fresh venv with its
dependencies, as a user does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from theorems.claims import load_all

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration


def _run(args: list, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          check=False)


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh venv with only the wheel installed (dependencies borrowed, see the docstring)."""
    tmp = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp / "dist",
                  ROOT], cwd=tmp)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("transformer_theorems-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                     cwd=tmp).stdout.strip())
    (site / "borrowed-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = _run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                      site, wheel], cwd=tmp)
    assert installed.returncode == 0, installed.stderr
    return python


def test_the_wheel_lists_every_claim(wheel_venv, tmp_path):
    listed = _run([wheel_venv, "-m", "theorems", "list", "--json"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    claims = data.get("claims", data) if isinstance(data, dict) else data
    # the same claims (the order of a registry filled by imports depends on what this session
    # imported first; `list` reads the catalogue in area order)
    assert sorted(c["id"] for c in claims) == sorted(c.id for c in load_all())


def test_the_wheel_imports_from_itself(wheel_venv, tmp_path):
    """Every module comes from the installed wheel, never from this checkout, and every
    construction a claim names resolves there."""
    code = (
        "import theorems.claims as c, constructions, pathlib, sys\n"
        "reg = c.load_all()\n"
        "[claim.resolve_construction() for claim in reg]\n"
        f"root = pathlib.Path({str(ROOT)!r})\n"
        "ours = ('constructions', 'theorems', 'empirics')\n"
        "leaked = sorted(n for n, m in sys.modules.items() if n.split('.')[0] in ours\n"
        "                and getattr(m, '__file__', None)\n"
        "                and pathlib.Path(m.__file__).is_relative_to(root))\n"
        "assert not leaked, leaked\n"
        "print(len(reg))\n")
    ran = _run([wheel_venv, "-c", code], cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert int(ran.stdout.strip()) == len(load_all())


def test_the_wheel_carries_the_data_files_the_code_reads(wheel_venv):
    """Every non-Python file of the three packages in the source tree is in the wheel."""
    (wheel,) = (wheel_venv.parents[2] / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # -z: one name per NUL, so a name with a space is one name
    tracked = subprocess.run(["git", "ls-files", "-z", "constructions", "theorems", "empirics"],
                             cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split("\0")[:-1]
    missing = [f for f in tracked if f not in names]
    assert not missing, f"tracked files missing from the wheel: {missing[:10]}"
