"""Math without a network: MathJax 3 served from the site's own ``_static/mathjax``.

The files come from the PyPI package ``sphinx-mathjax-offline`` (MathJax 3.2.2, the docs
extra installs it). Only what the ``tex-chtml`` combined component can load is copied: the
component itself, the TeX extensions its ``autoload`` pulls in on demand (``\\boldsymbol``,
``\\cancel``, ...), the CHTML fonts, the context menu and the accessibility modules with
their speech maps (loaded when a reader turns them on in the menu). About 7 MB, against 24 MB
for the whole distribution, whose SVG and MathML builds the site never loads.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

PACKAGE = "sphinx-mathjax-offline"
ENTRY = "tex-chtml.js"
SUBTREES = ("input/tex", "output/chtml", "ui", "a11y", "sre")
MATHJAX_PATH = f"mathjax/{ENTRY}"  # Sphinx's mathjax_path, relative to _static


def bundle_dir() -> Path:
    """The directory holding MathJax's ``es5`` files inside the installed package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"MathJax is bundled from the {PACKAGE!r} package; install the docs "
                           "extra: pip install -e '.[docs]'")
    directory = Path(spec.origin).parent / "static" / "mathjax"
    if not (directory / ENTRY).is_file():
        raise RuntimeError(f"{directory / ENTRY} is missing: reinstall {PACKAGE}")
    return directory


def copy_bundle(static_dir: Path) -> Path:
    """Copy the subset into ``<static_dir>/mathjax`` (skipping files already there)."""
    source, target = bundle_dir(), Path(static_dir) / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / ENTRY, target / ENTRY)
    for subtree in SUBTREES:
        shutil.copytree(source / subtree, target / subtree, dirs_exist_ok=True)
    return target
