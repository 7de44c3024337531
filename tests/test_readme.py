"""The README's examples run as written, and CI runs the README's test command verbatim.

Each ```python block runs as written in a fresh Python (``integration``: each starts one), and
what it prints is compared with the README's "prints `...`" sentence after it, where there is
one. A block that needs an extra says so in a comment (``# needs the interop extra: pip install
-e '.[interop]'``); it skips, naming the extra, only where that extra is missing, and fails
instead under ``THEOREMS_REQUIRE_EXTRAS``. The default run also executes the blocks that need
no extra in this process (fast).
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
# What each extra's blocks import (pyproject.toml's optional dependencies, by module name)
EXTRA_MODULES = {"interop": ("transformer_lens", "safetensors", "nnsight"),
                 "docs": ("sphinx", "myst_parser"), "ray": ("ray",), "proofs": ("z3",)}


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def needed_extras(code: str) -> list[str]:
    """The extras a block's comments name: ``pip install -e '.[NAME]'``."""
    comments = "\n".join(line for line in code.splitlines() if line.lstrip().startswith("#"))
    return re.findall(r"\.\[(\w+)\]", comments)


def printed(code: str) -> list[str] | None:
    """The lines the README says ``code`` prints (its "prints `a`, `b` and `c`" sentence right
    after the block), or ``None`` where it says none."""
    after = README.split(f"```python\n{code}```", 1)[1].lstrip()
    found = re.match(r"prints ((?:`[^`]*`(?:,\s+|\s+and\s+)?)+)", after)
    return re.findall(r"`([^`]*)`", found.group(1)) if found else None


PYTHON_BLOCKS = blocks("python")
BLOCK_IDS = [f"block{i}" for i in range(len(PYTHON_BLOCKS))]


@pytest.mark.parametrize("code", [b for b in PYTHON_BLOCKS if not needed_extras(b)])
def test_python_examples_run_as_written(code):
    exec(compile(code, "README.md", "exec"), {})


@pytest.mark.integration
@pytest.mark.parametrize("code", PYTHON_BLOCKS, ids=BLOCK_IDS)
def test_python_examples_run_as_written_in_a_fresh_python(code):
    for extra in needed_extras(code):
        missing = [m for m in EXTRA_MODULES[extra] if importlib.util.find_spec(m) is None]
        if missing and os.environ.get("THEOREMS_REQUIRE_EXTRAS"):
            pytest.fail(f"{missing} missing, but THEOREMS_REQUIRE_EXTRAS says every extra is in")
        if missing:
            pytest.skip(f"this block needs the {extra} extra ({', '.join(missing)} missing): "
                        f"pip install -e '.[{extra}]'")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    expected = printed(code)
    if expected is not None:
        assert run.stdout.splitlines() == expected


def test_ci_runs_the_readme_commands():
    """.ci/run reads the set-up and test commands from the README's first two bash blocks,
    runs both, and ends with the test command again, verbatim, once every extra is in."""
    setup, test_command = (b.strip() for b in blocks("bash")[:2])
    assert "pip install -e '.[dev]'" in setup and setup.endswith("python -m theorems verify")
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert ci_lines[-1] == test_command
    assert 'eval "$SETUP"' in ci and 'eval "$TEST"' in ci


def test_the_readme_claims_table_is_current():
    """The README's claims table is generated (``python -m theorems.readme``): it matches the
    registry and the statuses of the last complete ``verify`` at the ci profile (CI's set-up
    writes one before the tests run)."""
    from theorems import readme

    evidence = readme.complete_evidence(ROOT / "build" / "evidence.json")
    if evidence is None or evidence["run"].get("hypothesis_profile") != "ci":
        pytest.skip("no complete ci-profile build/evidence.json: run python -m theorems verify")
    assert readme.current_block(README) == readme.claims_block(evidence), (
        "the README's claims table is out of date: run python -m theorems.readme")


def test_the_readme_claims_table_counts_every_claim_by_area():
    """Without evidence the table still lists every area with its number of claims."""
    from theorems import readme
    from theorems.claims import load_all

    block = readme.claims_block(None)
    registry = load_all()
    assert block.startswith(f"{len(registry)} claims in {len(registry.areas())} areas.")
    for area in registry.areas():
        count = sum(claim.area == area for claim in registry)
        assert f"| `{area}` | {count} |" in block


def test_the_readme_papers_table_is_current():
    """The README's papers table is generated from the registry alone (``python -m
    theorems.readme``), so it is compared always: one row per paper a claim cites."""
    from theorems import readme

    assert readme.current_block(README, readme.PAPERS_BEGIN, readme.PAPERS_END) == (
        readme.papers_block()), "the README's papers table is out of date: run python -m "\
        "theorems.readme"


def test_the_papers_table_names_every_cited_paper_with_its_areas():
    from theorems import readme
    from theorems.claims import load_all

    block = readme.papers_block()
    for claim in load_all():
        for source in claim.sources:
            row = next(line for line in block.splitlines() if f"[{source.label}]" in line)
            assert f"`{claim.area}`" in row, (source.label, claim.area)
