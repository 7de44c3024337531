"""The generated documentation site: a strict Sphinx build from the real registry, and the parts
the build relies on (formatting, staleness, the dependency graph, the CLI).

The build uses a synthesised evidence file (``docs_fixture``) so it is fast and deterministic;
the registry, the construction docstrings and the templates are the real ones, and Sphinx
turns every warning into a failure.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import sys
import urllib.request
from pathlib import Path

import docs_fixture
import pytest

from theorems import site as docs
from theorems.claims import (
    STATUSES,
    Claim,
    Source,
    isolated_registry,
    load_all,
    verified_through_dependencies,
)

for _module in ("sphinx", "myst_parser", "furo"):
    docs_fixture.require(_module)
sys.path.insert(0, str(docs.DOCS / "_ext"))
from theorems_site import data, graph, render  # noqa: E402  (the extension lives in docs/_ext)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, dict, dict]:
    """(site folder, build report, evidence) of the fixture site, built once per session."""
    return docs_fixture.build(tmp_path_factory)


def page(site_dir: Path, name: str) -> str:
    return (site_dir / name).read_text()


def section(html_text: str, anchor: str) -> str:
    """The HTML of the section whose id is ``anchor``, nested sections included."""
    start = html_text.index(f'<section id="{anchor}"')
    depth = 0
    for tag in re.finditer(r"<(/?)section\b", html_text[start:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            return html_text[start:start + tag.end()]
    raise AssertionError(f"section {anchor} is not closed")


# --- the build ---------------------------------------------------------------------------------

def test_build_is_clean_with_warnings_as_errors(site):
    site_dir, report, _ = site
    assert report["warnings"] == [], "\n".join(report["warnings"])
    assert report["status"] == 0 and (site_dir / "index.html").is_file()


def test_index_counts_and_lists_every_claim(site):
    site_dir, _, evidence = site
    index = page(site_dir, "index.html")
    registry = load_all()
    statuses = {cid: r["status"] for cid, r in evidence["claims"].items()}
    for claim in registry:
        area_page = f"claims/{claim.area}.html#{data.anchor(claim.id)}"
        assert f'href="{area_page}"' in index, f"the index does not link {claim.id}"
    expected = {s: sum(statuses.get(c.id, "unchecked") == s for c in registry)
                for s in STATUSES}
    for status, count in expected.items():
        card = re.search(rf'tt-status-{status}"[^>]*><span class="tt-card-count">(\d+)<', index)
        assert card and int(card.group(1)) == count, status
    assert expected["failing"] == 1 and expected["unchecked"] == 1 and expected["refuted"] >= 1
    assert docs_fixture.RUN["git_sha"][:10] in index  # run metadata
    assert docs_fixture.RETIRED in index  # evidence for a claim that no longer exists
    assert 'class="tt-filter" data-table="tt-claims"' in index
    assert "claims-filter.js" in index


def test_claim_sections_show_statement_source_evidence_and_links(site):
    site_dir, _, evidence = site
    registry = load_all()
    for claim in registry:
        text = page(site_dir, f"claims/{claim.area}.html")
        body = section(text, data.anchor(claim.id))
        status = evidence["claims"].get(claim.id, {}).get("status", "unchecked")
        assert f"tt-status-{status}" in body, claim.id
        assert claim.sources[0].url in body
        assert f"tt-tag-{claim.sources[0].tag}" in body
        if claim.id in evidence["claims"]:
            assert 'class="tt-evidence' in body, claim.id
        if claim.construction:
            name = claim.construction.split(":")[1]
            assert claim.construction in body and "<details" in body, claim.id
            assert f'<span class="pre">{name}</span>' in body, claim.id  # autodoc's entry
        for dep in claim.depends_on:
            assert f"#{data.anchor(dep)}" in body, f"{claim.id} does not link to {dep}"
        for user in registry.dependents(claim.id):
            assert f"#{data.anchor(user)}" in body, f"{claim.id} does not link back to {user}"


def test_refuted_and_failing_claims_show_what_broke(site):
    site_dir, _, evidence = site
    registry = load_all()
    refuted = [c for c in registry if evidence["claims"].get(c.id, {}).get("status") == "refuted"]
    for claim in refuted:
        body = section(page(site_dir, f"claims/{claim.area}.html"), data.anchor(claim.id))
        assert html.escape(f"the pinned counterexample to {claim.id}") in body
        assert "Corrected statement" in body and "tt-refutation" in body
        assert "What this refutes:" in body and claim.refutes in body
    failing = registry[docs_fixture.roles(registry)["failing"]]
    body = section(page(site_dir, f"claims/{failing.area}.html"), data.anchor(failing.id))
    assert "Falsifying example: run(" in body and "tt-outcome-failed" in body
    unchecked = registry[docs_fixture.roles(registry)["unchecked"]]
    body = section(page(site_dir, f"claims/{unchecked.area}.html"), data.anchor(unchecked.id))
    assert "No check of this claim is in the evidence file" in body


def test_tables_figures_and_metrics_are_shown_as_data(site):
    site_dir, _, _ = site
    registry = load_all()
    figured = registry[docs_fixture.roles(registry)["figured"]]
    body = section(page(site_dir, f"claims/{figured.area}.html"), data.anchor(figured.id))
    assert "fixture table" in body and "a|b" in body
    assert "*not emphasis*" in body  # table cells are data, never markup
    assert "<em>not emphasis</em>" not in body
    image = re.search(r'<img [^>]*src="([^"]*fixture-figure[^"]*)"', body)
    assert image and (site_dir / "claims" / image.group(1)).resolve().is_file()
    assert "gap" in body  # the metric


def test_empirics_page_has_a_section_per_experiment(site):
    from empirics.experiment import load_all as experiments

    text = page(site[0], "empirics.html")
    for name in [*experiments(), "fixture-experiment"]:
        assert f'<section id="{data.experiment_anchor(name)}">' in text, name


def test_empirics_page_marks_orphaned_results_with_their_device_and_date(site):
    site_dir, _, _ = site
    text = page(site_dir, "empirics.html")
    body = section(text, "experiment-fixture-experiment")
    assert "tt-staleness-orphaned" in body
    assert "NVIDIA H200" in body and "2026-01-02T03:04:05Z" in body and "lr" in body
    assert "mean of 3 seeds" in body and "0.00115" in body  # the aggregate and its spread
    assert body.count("<h3>") == 1  # its per-seed file is not listed on its own
    image = re.search(r'<img [^>]*src="([^"]*full-loss[^"]*)"', body)
    assert image and (site_dir / image.group(1)).is_file()


def test_graph_links_every_claim_and_colours_it_by_status(site):
    site_dir, _, _evidence = site
    text = page(site_dir, "graph.html")
    for claim in load_all():
        assert f'claims/{claim.area}.html#{data.anchor(claim.id)}' in text, claim.id
    fill = graph.STATUS_COLOURS["failing"][0]
    assert fill in text
    legend = text[text.index('class="tt-legend"'):text.index("</dl>")]
    for key, meaning in graph.LEGEND.items():  # every colour is explained
        assert graph.COLOURS[key][0] in legend and html.escape(meaning) in legend, key
    assert set(graph.LEGEND) == set(graph.COLOURS)


def proved_claims(evidence: dict) -> list[str]:
    """The claims with a passed proof (the fixture's failing claim among them)."""
    return [cid for cid, record in evidence["claims"].items() if any(
        c["tier"] == "proved" and c["outcome"] == "passed" for c in record["checks"])]


def page_text(body: str) -> str:
    """The text of some HTML, with Sphinx's smart quotes turned back into plain ones."""
    text = html.unescape(re.sub(r"<[^>]+>", "", body))
    return text.translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\""))


def assert_shows_scope_and_trust(body: str, proof: dict) -> None:
    """A proof's section says what the proof covers and what it trusts (contract 2), or that
    its record does not say."""
    words = " ".join(page_text(body).split())
    scope = proof.get("scope")
    if scope:
        assert data.SCOPE_MEANING[scope["covers"]] in words
        assert " ".join(scope["text"].split()) in words
    else:
        assert "no scope recorded" in words
    trusts = data.trust_list(proof.get("trusts"))
    assert trusts, "the real proof record names no trust base"
    for trust in trusts:
        assert " ".join(trust.split()) in words


def test_proved_claims_are_counted_apart_and_show_their_proof(site):
    site_dir, _, evidence = site
    registry, proved = load_all(), proved_claims(evidence)
    assert proved, "the fixture has no proved claim"
    index = page(site_dir, "index.html")
    verified = sum(evidence["claims"].get(c.id, {}).get("status") == "verified"
                   for c in registry)  # the retired claim's record is not counted
    verified_and_proved = sum(evidence["claims"][c]["status"] == "verified" for c in proved)
    assert re.search(rf"<strong>{verified_and_proved}</strong> of the {verified} verified "
                     rf"claims also "
                     rf"carry a <strong>machine-checked\s+proof</strong>", index)
    kinds = set()
    for claim_id in proved:
        claim = registry[claim_id]
        body = section(page(site_dir, f"claims/{claim.area}.html"), data.anchor(claim_id))
        proof = next(c["proof"] for c in evidence["claims"][claim_id]["checks"]
                     if c["tier"] == "proved" and c["outcome"] == "passed")
        assert "Machine-checked in" in body, claim_id
        assert_shows_scope_and_trust(body, proof)
        if claim_id.startswith("induction-heads."):
            kinds.add("smt")
            assert f"z3 {proof['version']}" in body and "highlight-python" in body
            assert "def two_layer_conditions" in page_text(body)  # the query generator
        else:
            kinds.add("coq")
            assert proof["tool"] == "Coq"  # as the runner writes it: the site must still match
            assert f"Coq {proof['version']}" in body and "tt-side-by-side" in body, claim_id
            assert "highlight-coq" in body, claim_id  # Pygments' Coq lexer
            link = re.search(r'<a class="reference download[^>]*href="([^"]+bilinear\.v)"',
                             body)
            assert link and (site_dir / "claims" / link.group(1)).resolve().is_file()
            for axiom in proof["assumptions"]:  # the audited assumptions
                assert axiom in body
            if not proof["assumptions"]:
                assert "closed under the global context" in body
    real = {kind: record["outcome"] for kind, record in docs_fixture.real_proofs().items()}
    assert kinds == {kind for kind, outcome in real.items() if outcome == "passed"}
    if real["coq"] != "passed":
        pytest.skip(f"the real Coq proof check did not pass here ({real['coq']}): "
                    "the Coq view is not shown")
    graph_page = page(site_dir, "graph.html")
    focus = json.loads(re.search(r'id="tt-graph-data">(.*?)</script>', graph_page,
                                 re.S).group(1).replace("<\\/", "</"))
    assert {n["id"] for n in focus if n["proved"]} == set(proved)
    for node in (n for n in focus if n["proved"]):  # the tooltip names scope and trust base
        assert "proof in " in node["tooltip"] and "trusts " in node["tooltip"]
    assert "double border" in graph_page


def test_a_skipped_proof_shows_as_skipped_and_is_not_counted(site):
    site_dir, _, evidence = site
    registry = load_all()
    claim = registry[docs_fixture.roles(registry)["skipped_proof"]]
    record = evidence["claims"][claim.id]
    assert [c["outcome"] for c in record["checks"] if c["tier"] == "proved"] == ["skipped"]
    assert claim.id not in proved_claims(evidence)
    body = section(page(site_dir, f"claims/{claim.area}.html"), data.anchor(claim.id))
    assert "Machine-checked in" not in body
    assert "Proof skipped" in body and "coqc not found" in page_text(body)
    header = body[:body.index('class="tt-statement')]
    checked_by = header[:header.index("skipped:")]
    assert "tt-tier-proved" not in checked_by and "tt-tier-proved" in header
    index = page(site_dir, "index.html")
    row = index[index.index(f'href="claims/{claim.area}.html#{data.anchor(claim.id)}"'):]
    row = row[:row.index("</tr>")]
    assert "tt-tier-proved" not in row  # the index lists only tiers whose checks ran
    graph_page = page(site_dir, "graph.html")
    focus = json.loads(re.search(r'id="tt-graph-data">(.*?)</script>', graph_page,
                                 re.S).group(1).replace("<\\/", "</"))
    assert not next(n for n in focus if n["id"] == claim.id)["proved"]


def test_inconclusive_claims_show_their_intervals_everywhere(site):
    site_dir, _, evidence = site
    registry = load_all()
    claim = registry[docs_fixture.roles(registry)["inconclusive"]]
    assert evidence["claims"][claim.id]["status"] == "inconclusive"
    index = page(site_dir, "index.html")
    card = re.search(r'tt-status-inconclusive"[^>]*><span class="tt-card-count">(\d+)<', index)
    assert card and int(card.group(1)) == 1
    body = section(page(site_dir, f"claims/{claim.area}.html"), data.anchor(claim.id))
    assert "tt-status-inconclusive" in body and "tt-outcome-inconclusive" in body
    text = " ".join(page_text(body).split())
    interval = docs_fixture.INTERVAL
    for value in ("0.52 [0.48, 0.56] at 95%", "0.5", "600", interval["method"],
                  interval["name"]):
        assert value in text, value
    assert graph.STATUS_COLOURS["inconclusive"][0] in page(site_dir, "graph.html")


def test_proof_views_read_scope_and_trust_base_and_any_tool_case():
    record = {"tool": "Coq", "version": "8.16.1", "source": "proofs/coq/bilinear.v",
              "theorem": "symmetric_part", "assumptions": [],
              "scope": {"covers": "part", "text": "the second sentence, over any field"},
              "trusts": ["the Coq 8.16.1 kernel", "MathComp's algebra library"]}
    view = data.ProofView.of({"name": "test_x", "outcome": "passed", "proof": record})
    assert view.is_coq and view.language == "coq" and view.checked_in == "Coq 8.16.1"
    assert "Theorem symmetric_part" in view.statement  # read from the proof file
    assert view.covers_meaning == data.SCOPE_MEANING["part"]
    assert view.trusts == tuple(record["trusts"])
    assert "second sentence" in view.summary and "MathComp's algebra" in view.summary
    lower = data.ProofView.of({"name": "t", "outcome": "passed",
                               "proof": {**record, "tool": "coq", "trusts": "one sentence"}})
    assert lower.is_coq and lower.trusts == ("one sentence",)
    bare = data.ProofView.of({"name": "t", "outcome": "passed",
                              "proof": {**record, "tool": "z3", "scope": None,
                                        "trusts": None, "source": "math:sqrt"}})
    assert not bare.is_coq and bare.covers == "" and bare.trusts == ()
    assert "scope not recorded" in bare.summary


def test_graph_renderers_mark_proved_nodes():
    proved = graph.Node("p.one", "p", "One", "verified", "claims/p.html#p-one", (), proved=True)
    assert 'class="tt-proved"' in graph.render_in_python([proved])
    assert 'class="tt-proved"' not in graph.render_in_python(_nodes())
    assert "peripheries=2" in graph.dot_source([proved])
    assert "peripheries" not in graph.dot_source(_nodes())
    assert "machine-checked" in proved.tooltip


def test_index_shows_who_is_verified_with_all_dependencies(site):
    site_dir, _, evidence = site
    registry = load_all()
    statuses = {cid: r["status"] for cid, r in evidence["claims"].items()}
    through = verified_through_dependencies(registry, statuses)
    index = page(site_dir, "index.html")
    assert f"{sum(through.values())} of {len(registry)} claims are" in index
    assert "verified with all their" in index and "all verified" in index
    assert "rests on unverified" in index  # the fixture's failing claim has verified users


def test_exportable_constructions_show_their_transformer_lens_export(site):
    site_dir, _, _ = site
    exportable = section(page(site_dir, "claims/induction-heads.html"),
                         "induction-heads-two-layer-exact")
    assert "to_transformer_lens" in html.unescape(re.sub(r"<[^>]+>", "", exportable))
    looped = section(page(site_dir, "claims/power-method.html"),
                     "power-method-looped-shifted-power")
    assert "to_transformer_lens" not in looped


def test_circuit_cases_show_their_generated_diagram(site):
    from constructions.circuits import CASES
    from theorems.areas.circuits._cases import claims_of

    site_dir, _, _ = site
    circuits = page(site_dir, "claims/circuits.html")
    for case in CASES.values():
        _, circuit = case.instance("smoke")
        start = circuits.index(f'data-case="{case.name}"')
        diagram = circuits[start:circuits.index("</svg>", start)]
        assert 'class="tt-circuit"' in diagram  # the SVG generated from circuit()
        shown = html.unescape(diagram)   # Graphviz and Python escape -, ' and > differently
        for edge in circuit.edges:  # every circuit edge is drawn, with its role as tooltip
            assert f"{edge.name}: {edge.role}" in shown
        text = html.unescape(re.sub(r"<[^>]+>", "", circuits))
        assert case.corruption.split(":")[0] in text
        for claim in claims_of(case):
            assert f'href="#{claim.replace(".", "-")}"' in circuits
    # the published scores (docs_fixture.write_circuit_scores) with the case's figure
    text = html.unescape(re.sub(r"<[^>]+>", "", circuits))
    assert "0.9375" in text and "a1.h0->logits, input->a1.h0<v>" in text
    assert "tt-staleness-stale" in circuits  # the fixture's fingerprint is not the code's
    assert re.search(r'<img[^>]+full-two-layer-induction-eap\.png', circuits)
    for case in CASES:  # each case shows its own figures, never another case's
        start = circuits.index(f'data-case="{case}"')
        end = min([circuits.index(f'data-case="{other}"') for other in CASES
                   if circuits.index(f'data-case="{other}"') > start] or [len(circuits)])
        shown = re.findall(r'<img[^>]+src="[^"]*full-([\w-]+)\.png"', circuits[start:end])
        assert shown == [f for f in docs_fixture.CIRCUIT_FIGURES
                         if f.removesuffix("-eap") == case], case


def test_circuits_page_shows_the_benchmark_and_the_hook_conformance(site):
    """The benchmark section (commands, both formats, the third-party table, each miss said
    in words) and the conformance table per tool and version, from the fixture's results
    (docs_fixture.write_benchmark_results)."""
    site_dir, _, _ = site
    circuits = page(site_dir, "claims/circuits.html")
    text = html.unescape(re.sub(r"<[^>]+>", "", circuits))
    benchmark = text[text.index("Circuit benchmark"):text.index("Circuit case:")]
    assert "python -m theorems.circuits write OUT" in benchmark
    assert "python -m theorems.circuits score SUBMISSION" in benchmark
    assert "ground_truth.json" in benchmark and "edges.pkl" in benchmark
    assert "auto-circuit 1.0.1" in benchmark and "0.8125" in benchmark
    # each miss in words: the failure's exception, the inexact method's scores
    assert ("EAP (MIB EAP-IG (circuitkit 0.2.0)) fails on two-layer-induction: RuntimeError"
            in benchmark)
    assert ("auto-circuit ACDC (auto-circuit 1.0.1) on two-layer-induction-rotated scores "
            "AUROC 0.8125, precision 0.5" in benchmark)
    # the project's own harness misses too (docs_fixture.write_circuit_scores: EAP 0.875)
    assert ("eap (this project\N{RIGHT SINGLE QUOTATION MARK}s harness) on "
            "two-layer-induction-rotated scores AUROC 0.875" in benchmark)
    conformance = text[text.index("Hook conformance"):]
    assert "python -m theorems.conformance" in conformance
    assert "bridge (native names)" in conformance and "blocks.L.attn.hook_attn_scores" in \
        conformance
    assert conformance.index("Hooks that do not hold") < conformance.index("hook_attn_scores")


def test_circuit_figures_are_matched_to_their_case_exactly():
    from theorems.areas.circuits._page import case_figures, figure_owner

    cases, methods = ("a", "a-rotated"), ("activation-patching", "eap")
    assert figure_owner("a-rotated-eap", cases, methods) == ("a-rotated", "eap")
    assert figure_owner("a-eap", cases, methods) == ("a", "eap")
    assert figure_owner("a-rotated", cases, methods) is None  # no method: nobody's
    assert figure_owner("seeds", cases, methods) is None
    with pytest.raises(ValueError, match="more than one"):
        figure_owner("a-b-c", ("a", "a-b"), ("b-c", "c"))
    result = {"config": {"methods": list(methods)},
              "figure_paths": {"two-layer-induction-eap": "/1.png",
                               "two-layer-induction-rotated-eap": "/2.png", "seeds": "/3.png"}}
    assert case_figures("two-layer-induction", result) == [("two-layer-induction-eap", "/1.png")]


def test_math_is_left_for_the_bundled_mathjax(site):
    site_dir, _, _ = site
    text = page(site_dir, "claims/layernorm.html")
    assert 'src="../_static/mathjax/tex-chtml.js' in text
    assert (site_dir / "_static/mathjax/tex-chtml.js").is_file()
    assert (site_dir / "_static/mathjax/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff"
            ).is_file()
    assert not re.search(r"https?://[^\"']*(mathjax|katex|jsdelivr|cdnjs)", text, re.I)
    assert '<span class="math notranslate nohighlight">\\(' in text


def test_a_warning_fails_the_strict_build(tmp_path):
    """The build really is strict: a mis-shaped table in the evidence is a failure. (Only the
    area of that claim is built, with the Python graph renderer: the point is the failure.)"""
    registry = load_all()
    evidence = docs_fixture.write_evidence(registry, tmp_path)
    figured = docs_fixture.roles(registry)["figured"]
    data_ = json.loads(evidence.read_text())
    table = data_["claims"][figured]["checks"][0]["tables"]["fixture table"]
    table["rows"].append([3, "x", "one cell too many"])
    evidence.write_text(json.dumps(data_))
    site, report = docs_fixture.cached_build(evidence, tmp_path / "site", results=None,
                                             strict=True, areas=[registry[figured].area],
                                             graph_renderer="python")
    assert report["status"] != 0
    assert any("fixture table" in w and "mis-shaped" in w and "row 3 has 3 cells" in w
               for w in report["warnings"]), report["warnings"]
    assert "A preview of" in (site / "index.html").read_text()
    assert not (site / "claims" / f"{registry.areas()[-1]}.html").exists()


def test_evidence_without_its_figures_fails_the_build_naming_them(tmp_path, capsys):
    registry = load_all()
    evidence = docs_fixture.write_evidence(registry, tmp_path)
    figures = sorted((tmp_path / "figures").rglob("*.png"))
    assert figures
    for figure in figures:
        figure.unlink()
    with pytest.raises(docs.MissingFiguresError, match=r"fixture-figure\.png"):
        docs.build_site(evidence, tmp_path / "site", results=None, strict=False)
    assert not (tmp_path / "site").exists()  # refused before Sphinx started
    assert docs.main(_args(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "names 1 figure that is not beside it" in err and "figures/" in err


def test_a_mis_shaped_table_is_flagged_not_rendered():
    good = render.data_table({"header": ["a", "b"], "rows": [[1, 2]]}, caption="t")
    assert good.startswith("::::{list-table} t") and "Mis-shaped" not in good
    bad = render.data_table({"header": ["a", "b"], "rows": [[1, 2], [3, 4, 5]]},
                            caption="kl (check)")
    assert "list-table" not in bad and ":class: error" in bad
    assert "header has 2 cells but row 2 has 3 cells" in bad and "3 | 4 | 5" in bad


@pytest.mark.integration  # a real verify run (a pytest process) and a Sphinx build
def test_the_site_builds_from_a_real_run_and_the_published_results(tmp_path):
    """The real inputs, not the fixture's: a small real ``verify`` run (a Coq proof, a z3
    proof, and the cot2 experiment's check with its table and figure) and the published
    results under ``empirics/results``. The strict build has no warning, the Coq proof is
    shown, the cot2 table is a table, and the circuits page puts every published figure under
    its own case."""
    from constructions.circuits import all_cases

    checks = (*docs_fixture.REAL_PROOF_CHECKS.values(), "test_csft_beats_sft")
    evidence = docs_fixture.real_run(tmp_path / "run", checks)
    areas = ["bilinear", "circuits", "cot-and-looping", "induction-heads"]
    report = docs.build_site(evidence, tmp_path / "site", results=docs.RESULTS, strict=True,
                             areas=areas)
    assert report.warnings == () and report.ok, "\n".join(report.warnings)
    site_dir, real = tmp_path / "site", json.loads(evidence.read_text())
    coq = real["claims"]["bilinear.symmetric-part"]["checks"]
    if any(c["tier"] == "proved" and c["outcome"] == "passed" for c in coq):
        body = section(page(site_dir, "claims/bilinear.html"), "bilinear-symmetric-part")
        assert "Machine-checked in" in body and "highlight-coq" in body
    cot2 = section(page(site_dir, "claims/cot-and-looping.html"), "cot-and-looping-cot2-csft")
    assert "Mis-shaped" not in cot2 and "KL soft step 1" in cot2
    circuits = page(site_dir, "claims/circuits.html")
    result = json.loads((docs.RESULTS / "circuit-discovery" / "full.json").read_text())
    methods = result["config"]["methods"]
    cases = list(all_cases())
    starts = sorted((circuits.index(f'data-case="{case}"'), case) for case in cases)
    for (start, case), (end, _) in zip(starts, [*starts[1:], (len(circuits), "")],
                                         strict=True):
        shown = re.findall(r"<figcaption>\s*<p><span class=\"caption-text\">([^<]+)</span>",
                           circuits[start:end])
        assert shown, case
        assert set(shown) <= {f"{case}-{method}" for method in methods}, (case, shown)


def test_unknown_preview_areas_are_refused():
    with pytest.raises(ValueError, match="unknown areas"):
        data.collect(load_all(), None, [], areas=["no-such-area"])


# --- the pieces ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "shown"), [
    (None, "—"), (1234567, "1,234,567"), (0.000112233, "0.0001122"), ("inf", "∞"),
    ("-inf", "−∞"), ("nan", "NaN"), (-0.0, "0"), (True, "True")])
def test_numbers_are_formatted_for_reading(value, shown):
    assert render.number(value) == shown


def test_data_strings_cannot_become_markup():
    assert render.text("*a* $x$ [l](u) `c` a|b") == (
        r"\*a\* \$x\$ \[l\]\(u\) \`c\` a\|b")
    assert render.code("a `b` c") == "``a `b` c``"
    assert render.fence("```python\nx\n```").startswith("````text\n")
    assert render.rst_inline(r"Heads need :math:`\Omega(n)` in ``f`` (a*b)") == (
        r"Heads need $\Omega(n)$ in `f` \(a\*b\)")
    table = render.list_table(["h"], [["line one\nline two"]])
    assert "* - line one\n    line two" in table


def _result(folder: Path, experiment: str, config: str, fingerprint: str | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {} if fingerprint is None else {"code_fingerprint": fingerprint}
    (folder / f"{config}.json").write_text(json.dumps(
        {"experiment": experiment, "config_name": config, "seed": 0, "record": record}))


def test_staleness_compares_code_fingerprints(tmp_path):
    for config, fingerprint in (("full", "abc"), ("smoke", "old"), ("bare", None)):
        _result(tmp_path / "exp", "exp", config, fingerprint)
    _result(tmp_path / "gone", "gone", "full", None)
    views = data.load_results(tmp_path, {"exp": lambda: "abc"})
    found = {(v.experiment, v.config_name): v.staleness for v in views}
    assert found == {("exp", "bare"): "unknown", ("exp", "full"): "current",
                     ("exp", "smoke"): "stale", ("gone", "full"): "orphaned"}


def test_staleness_agrees_with_the_empirics_package(tmp_path):
    """The site's marker is the foundation's is_stale, with the reason spelled out."""
    from empirics.experiment import is_stale
    from empirics.experiment import load_all as experiments

    registered = experiments()
    if not registered:
        pytest.skip("no experiment is registered yet")
    name, experiment = sorted(registered.items())[0]
    _result(tmp_path / name, name, "full", experiment.fingerprint())
    _result(tmp_path / name, name, "smoke", "0" * 16)
    views = data.load_results(tmp_path, {n: e.fingerprint for n, e in registered.items()})
    assert [v.staleness for v in views] == ["current", "stale"]
    assert all((v.staleness != "current") == is_stale(v.data) for v in views)


def test_the_empirics_census_counts_a_cpu_result_and_prefers_full(tmp_path):
    """The site counts each experiment at its largest published config, full else cpu, like
    ``python -m empirics results``: a cpu result is present (and counted as at cpu size), a
    smoke one is not, and a stale full result is not hidden by a current cpu one."""
    _result(tmp_path / "cpu-only", "cpu-only", "cpu", "abc")
    _result(tmp_path / "both", "both", "cpu", "abc")
    _result(tmp_path / "both", "both", "full", "old")
    _result(tmp_path / "smoke-only", "smoke-only", "smoke", "abc")
    names = ("cpu-only", "both", "smoke-only")
    results = data.load_results(tmp_path, dict.fromkeys(names, lambda: "abc"))
    experiments = [data.ExperimentView(name, "", (), {}, tuple(r for r in results
                                                               if r.experiment == name), True)
                   for name in names]
    site_data = data.SiteData(registry=None, claims=[], evidence_path=None, run=None,
                              experiments=experiments)
    assert site_data.empirics_counts() == {"current": 1, "stale": 1, "missing": 1,
                                           "single_seed": 2, "cpu": 1, "experiments": 3}
    assert site_data.empirics_counts("full")["missing"] == 2


def _nodes() -> list[graph.Node]:
    return [graph.Node("a.one", "a", "One", "verified", "claims/a.html#a-one", ()),
            graph.Node("a.two", "a", "Two", "refuted", "claims/a.html#a-two", ("a.one",)),
            graph.Node("b.three", "b", 'Three "quoted"', "failing", "claims/b.html#b-three",
                       ("a.one", "a.two"))]


def test_python_graph_renderer_links_and_colours_every_node():
    svg = graph.render_in_python(_nodes())
    assert svg.startswith("<svg") and svg.count("<a href=") == 3
    for node in _nodes():
        assert f'href="{node.url}"' in svg
        assert graph.STATUS_COLOURS[node.status][0] in svg
    assert svg.count("marker-end=") == 3  # a.one->a.two, a.one->b.three, a.two->b.three
    alone = graph.Node("c.four", "c", "Four", "verified", "claims/c.html#c-four", ("a.two",),
                       through=False)
    assert alone.colour == "verified-alone"
    assert graph.COLOURS["verified-alone"][0] in graph.render_in_python([*_nodes(), alone])


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graphviz_renderer_links_and_colours_every_node():
    name, draw = graph.renderer("graphviz")
    svg = draw(_nodes())
    assert svg.startswith("<svg") and name == "Graphviz"
    for node in _nodes():
        assert f'xlink:href="{node.url}"' in svg or f'href="{node.url}"' in svg
        assert graph.STATUS_COLOURS[node.status][0] in svg
    assert svg.count('class="edge"') == 3


def test_graph_renderer_choice_is_validated():
    with pytest.raises(ValueError, match="theorems_graph_renderer"):
        graph.renderer("matplotlib")
    assert graph.renderer("python")[0] == "NetworkX layered layout"


def test_area_intro_and_construction_views():
    title, paragraph = data.area_intro("layernorm")
    assert title == "LayerNorm geometry and attention" and "2305.02582" in paragraph
    assert data.area_intro("no-such-area") == ("no-such-area", "")
    with isolated_registry():
        claim = Claim(id="x.y", title="t", statement="s", kind="identity",
                      source=Source(arxiv="2305.02582", where="Section 3", tag="V"),
                      construction="constructions.layernorm:layer_norm")
        view = data.ConstructionView.of(claim)
    assert view.directive == "autofunction"
    assert view.dotted == "constructions.layernorm.layer_norm"
    assert view.signature.startswith("(")


# --- the command ---------------------------------------------------------------------------------

def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    return argparse.Namespace(**{"serve": False, "port": 0,
                                 "evidence": str(tmp_path / "evidence.json"),
                                 "out": str(tmp_path / "site"), **kw})


def test_docs_command_runs_verify_when_there_is_no_evidence(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_verify(out, **options):
        calls.append((Path(out), options))
        Path(out).write_text(json.dumps({"schema": 1, "run": {}, "claims": {}}))

    def fake_build(evidence, out, **kw):
        calls.append((Path(evidence), Path(out)))
        return docs.BuildReport(index=Path(out) / "index.html", warnings=(), status=0)

    import theorems.verify

    monkeypatch.setattr(theorems.verify, "verify", fake_verify)
    monkeypatch.setattr(docs, "build_site", fake_build)
    assert docs.main(_args(tmp_path)) == 0
    assert calls[0] == (tmp_path / "evidence.json", {})  # verify's defaults: the ci profile
    assert calls[1] == (tmp_path / "evidence.json", tmp_path / "site")
    assert "running `python -m theorems verify`" in capsys.readouterr().out


def test_docs_command_fails_when_verify_writes_nothing(tmp_path, monkeypatch, capsys):
    import theorems.verify

    monkeypatch.setattr(theorems.verify, "verify", lambda out, **options: None)
    assert docs.main(_args(tmp_path)) == 1
    assert "wrote no evidence" in capsys.readouterr().err


def test_docs_command_names_the_missing_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(docs.REQUIRED, "no_such_module_for_docs", "no-such-dist")
    assert docs.main(_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "no-such-dist" in err and "pip install -e '.[docs]'" in err


def test_server_serves_the_site(tmp_path):
    (tmp_path / "index.html").write_text("<p>hello</p>")
    server, url = docs.serve_in_background(tmp_path)
    try:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "index.html", timeout=10) as response:
            assert response.read() == b"<p>hello</p>"
    finally:
        server.shutdown()
        server.server_close()


def test_extension_refuses_to_write_into_the_docs_folder(tmp_path):
    from sphinx.application import Sphinx
    from sphinx.errors import ExtensionError
    from sphinx.util.docutils import docutils_namespace

    with docutils_namespace(), pytest.raises(ExtensionError, match="dedicated"):
        Sphinx(docs.DOCS, docs.DOCS, tmp_path / "out", tmp_path / "doctrees", "html",
               status=None, warning=None)


def test_signatures_show_no_machine_paths(site):
    site_dir, _, _ = site
    text = page(site_dir, "claims/induction-heads.html")
    assert "= math" in html.unescape(re.sub(r"<[^>]+>", "", text))
    for path in site_dir.rglob("*.html"):
        body = html.unescape(path.read_text())
        assert "<module '" not in body, path
    assert data.clean_signature("(x, lib=<module 'math' from '/usr/lib/python3.12/x.so'>)") == (
        "(x, lib=math)")


def test_the_site_links_the_dataset_for_download(site):
    site_dir, _, _ = site
    index = page(site_dir, "index.html")
    for name in ("evidence.json", "evidence.schema.json", "claims.json", "CITATION.cff"):
        assert f'href="dataset/{name}"' in index and (site_dir / "dataset" / name).is_file()


def test_the_trust_page_names_the_trust_base_and_every_reviewed_proof(site):
    """One page says what the proved tier trusts; the reading page and every proof link it."""
    from theorems import proof_statements, proving

    site_dir, _, _ = site
    trust = page_text(page(site_dir, "trust.html"))
    for axiom in proving.ALLOWED_AXIOMS:
        assert axiom in trust
    for words in ("Coq kernel", "z3", "SymPy", "exporter", "float64"):
        assert words in trust, words
    for entry in proof_statements.load_reviewed():
        assert entry["theorem"] in trust, entry["theorem"]
    assert 'href="trust.html"' in page(site_dir, "reading.html")
    assert 'href="../trust.html"' in page(site_dir, "claims/layernorm.html")
