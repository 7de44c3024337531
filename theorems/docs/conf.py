"""Sphinx configuration of the transformer-theorems site.

The pages are generated (see ``_ext/theorems_site``): build with ``python -m theorems docs``,
which writes them into a fresh source directory under ``build/`` and the HTML into
``build/site/``. This folder holds only the configuration, the extension, the CSS and the
filter script.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parents[1]))  # autodoc imports constructions.* beside theorems

from theorems_site.mathjax import MATHJAX_PATH  # noqa: E402

project = "transformer-theorems"
author = "the transformer-theorems contributors"
copyright = "the transformer-theorems contributors"
root_doc = "index"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "theorems_site",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", ".doctrees"]

# MyST: $...$ and $$...$$ math, ::: fences for directives around Markdown.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_dmath_double_inline = True

# Autodoc: show constructions as their users call them.
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
add_module_names = True

# MathJax comes from the site itself (theorems_site copies the bundle), never a CDN.
mathjax_path = MATHJAX_PATH

html_theme = "furo"
html_title = "transformer-theorems"
html_static_path = ["_static"]
html_favicon = "_static/favicon.svg"
html_css_files = ["theorems.css"]
html_js_files = ["claims-filter.js", "math-anchor.js", "graph-focus.js", "graph-zoom.js"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "navigation_with_keys": True,
    "sidebar_hide_name": False,
    "light_css_variables": {"color-brand-primary": "#1f4e79", "color-brand-content": "#1f4e79"},
    "dark_css_variables": {"color-brand-primary": "#8fc1ff", "color-brand-content": "#8fc1ff"},
}

# Claims, not the functions documented inside them, make the page's table of contents.
toc_object_entries = False
