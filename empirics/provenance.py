"""Provenance shared by the checks and the experiments: the run record, JSON and figures.

Standard library only at import (matplotlib, torch, numpy and Hypothesis are imported inside the
functions that need them), so the evidence plugin can use it without making pytest sessions of
other projects heavier. One copy of each piece: the git commit, the JSON encoding of
non-finite floats, and how a figure is written.
"""

from __future__ import annotations

import math
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def git(*args: str, cwd: str | Path = REPO) -> str | None:
    """Output of ``git ARGS`` in the repository, or None where git or the repository is absent."""
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              timeout=10, cwd=cwd).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def git_sha() -> str | None:
    """The commit checked out, or None outside a git checkout."""
    return git("rev-parse", "HEAD")


def git_dirty() -> bool:
    """Whether tracked files differ from the commit (untracked files do not count)."""
    return bool(git("status", "--porcelain", "--untracked-files=no"))


def utc_now(seconds: float | None = None) -> str:
    """ISO-8601 UTC time of ``seconds`` since the epoch (now by default), to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def versions() -> dict[str, str]:
    """Python's version, and those of the numerical packages already imported by this process."""
    import sys

    found = {"python": platform.python_version()}
    for name in ("torch", "numpy", "hypothesis"):
        module = sys.modules.get(name)
        if module is not None:
            found[name] = module.__version__
    return found


# The interop packages whose versions a result records: record key -> distribution name.
INTEROP_PACKAGES = {"transformer_lens": "transformer-lens", "nnsight": "nnsight"}


def interop_versions() -> dict[str, str | None]:
    """TransformerLens's and nnsight's installed versions, ``None`` where one is not installed,
    read from the package metadata (neither is imported)."""
    from constructions.interop.files import installed_version  # here: this module stays torch-free

    return {key: installed_version(distribution)
            for key, distribution in INTEROP_PACKAGES.items()}


def json_ready(value: Any) -> Any:
    """A JSON-ready copy: non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"``,
    tuples become lists, and numpy or torch scalars become Python numbers."""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        return json_ready(value.item())  # a numpy or torch scalar
    return value


def as_float(value: Any) -> float | None:
    """Inverse of :func:`json_ready` for one number: ``"inf"`` -> ``inf``; None stays None."""
    return None if value is None else float(value)


def save_figure(fig, path: str | Path, *, dpi: int = 110) -> Path:
    """Write ``fig`` as a PNG at ``path`` (reproducibly: no software stamp) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    finally:
        plt.close(fig)
    return path
