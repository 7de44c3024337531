"""Sphinx extension: generate the transformer-theorems site from its three inputs.

At ``builder-inited`` it loads the claim registry, the evidence file
(``theorems_evidence``) and the published empirics results (``theorems_results``), and writes
one MyST page per area, the index, the dependency graph, the empirics page and a guide into
the (dedicated, generated) source directory; Sphinx then reads them as usual. At
``build-finished`` it copies the bundled MathJax into ``_static``, so math renders offline.

``python -m theorems docs`` (:mod:`theorems.site`) is the usual way in; it gives Sphinx a
fresh source directory under ``build/``, never the ``docs/`` folder itself.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

from . import data, graph, markup, mathjax, render

__version__ = "1.0"
logger = logging.getLogger(__name__)
# the folder holding the packages: the repository, or site-packages for an installed wheel
REPO = Path(__file__).resolve().parents[4]


def setup(app: Sphinx) -> dict:
    app.add_config_value("theorems_evidence", str(Path("build") / "evidence.json"), "env",
                         types=[str])
    app.add_config_value("theorems_results", str(REPO / "empirics" / "results"), "env",
                         types=[str])
    app.add_config_value("theorems_graph_renderer", "auto", "env", types=[str])
    # Comma-separated areas to build ("" for all): a quick preview while writing an area.
    app.add_config_value("theorems_areas", "", "env", types=[str])
    markup.setup(app)
    # MathJax on every page: the index's table shows titles, which may carry math.
    app.set_html_assets_policy("always")
    app.connect("builder-inited", generate)
    app.connect("autodoc-process-signature", _clean_autodoc_signature)
    app.connect("build-finished", copy_mathjax)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}


def _clean_autodoc_signature(app, what, name, obj, options, signature, return_annotation):
    """autodoc's signatures too: a module default renders as the module's name."""
    from .data import clean_signature

    return clean_signature(signature), clean_signature(return_annotation)


def generate(app: Sphinx) -> None:
    """Write every page of the site into ``app.srcdir``."""
    srcdir = Path(app.srcdir)
    if srcdir.resolve() == Path(app.confdir).resolve():
        raise ExtensionError("theorems_site writes generated pages into the source directory; "
                             "give Sphinx a dedicated one (python -m theorems docs does)")
    from theorems.claims import load_all

    evidence_path = Path(app.config.theorems_evidence)
    results = app.config.theorems_results  # "" for no published results
    evidence = data.load_evidence(evidence_path)
    if evidence is None:
        logger.info("theorems_site: no evidence file at %s; every claim shows as unchecked",
                    evidence_path)
    site = data.collect(load_all(), evidence,
                        data.load_experiments(Path(results) if results else None),
                        evidence_path=evidence_path if evidence else None,
                        head_sha=data.git_head(),
                        areas=[a for a in app.config.theorems_areas.split(",") if a])

    from theorems.site import missing_figures, missing_figures_message

    missing = missing_figures(evidence_path) if evidence else []
    if missing:  # a page of broken images is no site: fail, saying what is missing
        raise ExtensionError("theorems_site: " + missing_figures_message(evidence_path, missing))
    figures = {}
    for view in site.claims:
        for check in view.checks:
            for relative in check.get("figures", []):
                figures[relative] = _stage(evidence_path.parent / relative,
                                           srcdir, Path("_evidence") / relative)
    for result in site.results():
        for path in result.figure_files().values():
            # a published name may hold spaces (a study's figure is named after its metric
            # key), which a figure directive's path cannot: staged under a plain name
            figures[str(path)] = _stage(path, srcdir, Path("_results") / result.experiment
                                        / re.sub(r"[^\w.=+-]+", "_", path.name))

    renderer_name, draw = graph.renderer(app.config.theorems_graph_renderer)
    nodes = [graph.Node(id=v.id, area=v.claim.area, title=v.claim.title, status=v.status,
                        url=app.builder.get_relative_uri("graph", data.area_docname(
                            v.claim.area)) + "#" + v.anchor,
                        depends_on=v.claim.depends_on, through=v.through, proved=v.proved,
                        proofs=tuple(proof.summary for proof in v.proofs))
             for v in site.claims]
    proofs = {}  # a proof file's repository path -> its copy in the source tree
    for view in site.claims:
        for proof in view.proofs:
            if proof.language == "coq":
                proofs[proof.source] = _stage(data.proof_file(proof.source), srcdir,
                                              Path("_proofs") / proof.source)
    pages = render.pages(site, graph_svg=draw(nodes), graph_renderer=renderer_name,
                         figures=figures, graph_data=graph.focus_data(nodes), proofs=proofs)
    for docname, source in pages.items():
        _write_if_changed(srcdir / f"{docname}.md", source)
    logger.info("theorems_site: %d pages for %d claims in %d areas", len(pages),
                len(site.claims), len(site.areas))


def _stage(source: Path, srcdir: Path, relative: Path) -> str:
    """Copy a figure into the source tree; return its path as Sphinx reads it (``/...``)."""
    if not source.is_file():
        logger.warning("theorems_site: file %s named by the evidence is missing", source)
    else:
        target = srcdir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return "/" + relative.as_posix()


def _write_if_changed(path: Path, text: str) -> None:
    """Unchanged pages keep their time stamp, so an incremental build skips them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        mathjax.copy_bundle(Path(app.outdir) / "_static")
