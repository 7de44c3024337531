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
