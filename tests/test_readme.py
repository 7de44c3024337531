"""The README's examples run as written, and CI runs the README's test command verbatim."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


# The TransformerLens examples run in tests/test_export.py, with their printed output checked.
PYTHON_BLOCKS = [b for b in blocks("python") if "to_transformer_" not in b]


@pytest.mark.parametrize("code", PYTHON_BLOCKS,
                         ids=[f"block{i}" for i in range(len(PYTHON_BLOCKS))])
def test_python_examples_run_as_written(code):
    exec(compile(code, "README.md", "exec"), {})


def test_ci_runs_the_readme_test_command():
    test_command = next(b.strip() for b in blocks("bash") if "pytest" in b)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert ci_lines[-1] == test_command
