"""End to end: the built site in headless Chromium, served on localhost with no network.

Asserts that the index lists every registered claim, that the filter narrows the table, that
one click on a claim opens its section with its status and evidence (the second click a
reader needs is the check's row, already on screen), and that the math on the page was
typeset by the bundled MathJax with no raw TeX left. Every request that leaves localhost is
blocked and recorded, so a CDN dependency fails the test. Screenshots go to
``build/docs-browser/``.

Needs Debian's ``chromium`` (``/usr/bin/chromium``; ``.ci/run`` installs it) and the
``playwright`` package (docs extra). Without them the test is skipped, except where
``THEOREMS_REQUIRE_EXTRAS=1`` says every extra is installed (``.ci/run``'s second run).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import docs_fixture
import pytest

from theorems.claims import load_all

CHROMIUM = os.environ.get("THEOREMS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# As root in a sandboxed machine: no sandbox, no GPU, and none of Chromium's own background
# connections (they would be refused by the closed network, and are not the site's).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(__file__).resolve().parents[1] / "build" / "docs-browser"

for _module in ("sphinx", "myst_parser", "furo"):
    docs_fixture.require(_module)
docs_fixture.require("playwright.sync_api")
# Imported only once the docs extra is known to be there: without it the module skips at
# collection, saying why, rather than failing to import.
from docutils.nodes import make_id  # noqa: E402

from theorems import site as docs  # noqa: E402

pytestmark = pytest.mark.integration  # it starts Chromium and a local HTTP server

if not os.environ.get("THEOREMS_REQUIRE_EXTRAS") and not Path(CHROMIUM).is_file():
    pytest.skip("Chromium is not installed (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The fixture site (built once per session) on a local HTTP server: (url, statuses)."""
    site, report, evidence = docs_fixture.build(tmp_path_factory)
    assert report["status"] == 0, "\n".join(report["warnings"])
    server, url = docs.serve_in_background(site)
    yield url, {claim_id: record["status"] for claim_id, record in evidence["claims"].items()}
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium is not at {CHROMIUM}: .ci/run installs Debian's chromium",
                    pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, served):
    """A page whose every request off the local server is blocked and recorded."""
    url, _ = served
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    outside: list[str] = []
    broken: list[str] = []

    def route(request_route):
        if request_route.request.url.startswith(url):
            request_route.continue_()
        else:
            outside.append(request_route.request.url)
            request_route.abort()

    page.route("**/*", route)
    page.on("response", lambda r: r.status >= 400 and broken.append(f"{r.status} {r.url}"))
    yield page
    context.close()
    assert outside == [], f"the site reached for the network: {outside}"
    assert broken == [], f"missing files: {broken}"


def claim_rows(page):
    return page.locator("table.tt-claims tbody tr")


def visible_ids(page) -> list[str]:
    return page.eval_on_selector_all(
        "table.tt-claims tbody tr:not(.tt-hidden) td:first-child a",
        "links => links.map(a => a.textContent.trim())")


def test_index_lists_every_claim_and_the_filter_narrows_it(page, served):
    url, statuses = served
    page.goto(url + "index.html")
    registry = load_all()
    assert claim_rows(page).count() == len(registry)
    assert sorted(visible_ids(page)) == sorted(c.id for c in registry)
    assert page.locator(".tt-filter .tt-count").inner_text() == (
        f"{len(registry)} of {len(registry)} claims")

    area = registry.areas()[0]
    page.fill(".tt-filter input[type=search]", area + ".")
    in_area = sorted(c.id for c in registry if c.area == area)
    assert sorted(visible_ids(page)) == in_area and len(in_area) < len(registry)
    assert f"q={area}" in page.url  # the filtered view can be linked

    page.click(".tt-filter button")  # clear
    page.select_option(".tt-filter select[name=status]", "refuted")
    refuted = sorted(c.id for c in registry if statuses.get(c.id) == "refuted")
    assert sorted(visible_ids(page)) == refuted and 0 < len(refuted) < len(registry)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "index-filtered.png"), full_page=True)

    page.goto(url + "index.html?status=failing")  # the status cards link to such views
    assert len(visible_ids(page)) == 1

    page.goto(url + "index.html")
    header = page.locator("table.tt-claims thead th").first
    header.click()
    assert visible_ids(page) == sorted(c.id for c in registry)
    header.click()  # a second click reverses the order
    assert visible_ids(page) == sorted((c.id for c in registry), reverse=True)


def test_one_click_from_the_index_shows_a_claim_with_its_evidence_and_rendered_math(page,
                                                                                    served):
    url, statuses = served
    registry = load_all()
    # A refuted claim shows the most: statement, counterexample, correction, evidence.
    claim = next(c for c in registry if statuses.get(c.id) == "refuted")
    page.goto(url + "index.html")
    page.get_by_role("link", name=claim.id, exact=True).click()
    page.wait_for_load_state()
    anchor = make_id(claim.id)
    assert page.url.endswith(f"claims/{claim.area}.html#{anchor}")
    section = page.locator(f"section#{anchor}")
    assert section.locator(".tt-status-refuted").first.is_visible()
    assert section.locator("table.tt-evidence").is_visible()
    assert section.locator(".tt-refutation").is_visible()

    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate("() => MathJax.startup.promise")
    math = page.locator("span.math, div.math")
    assert math.count() > 0
    untypeset = page.eval_on_selector_all(
        "span.math, div.math", "els => els.filter(e => !e.querySelector('mjx-container')).length")
    assert untypeset == 0
    text = page.inner_text("article")
    raw = re.findall(r"\$[^$\n]*\\[A-Za-z]+|\\\(|\\\[", text)
    assert raw == [], f"raw TeX left on the page: {raw[:5]}"
    # Typesetting changed the heights above the claim; the site scrolls its title back into
    # view (to the top, unless the page ends first).
    page.wait_for_function("anchor => { const top = document.querySelector(`section#${anchor} h2`)"
                           ".getBoundingClientRect().top; "
                           "return top >= 0 && top < window.innerHeight / 2; }", arg=anchor)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "claim.png"))


def test_graph_nodes_open_their_claims(page, served):
    url, _ = served
    registry = load_all()
    page.goto(url + "graph.html")
    links = page.eval_on_selector_all("svg.tt-graph a",
                                      "as => as.map(a => a.getAttribute('href') || "
                                      "a.getAttribute('xlink:href'))")
    assert len(links) == len(registry)
    nodes, width, height = (page.locator("svg.tt-graph a"), page.viewport_size["width"],
                            page.viewport_size["height"])

    def in_view(i: int) -> bool:
        box = nodes.nth(i).bounding_box()
        return box is not None and 0 <= box["x"] and box["x"] + box["width"] <= width and \
            0 <= box["y"] and box["y"] + box["height"] <= height

    # the last registered claim whose node the opening view shows: the graph pans and zooms
    # inside its frame, so a node outside it is reached by panning, not by a click
    index_of = {href.rpartition("#")[2]: i for i, href in enumerate(links)}
    target, index = next((c, index_of[make_id(c.id)]) for c in reversed(list(registry))
                         if in_view(index_of[make_id(c.id)]))
    nodes.nth(index).click()
    page.wait_for_load_state()
    assert page.url.endswith(f"claims/{target.area}.html#{make_id(target.id)}")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "graph-click.png"))


def test_the_graph_focuses_on_one_claim_from_its_page(page, served):
    url, _ = served
    registry = load_all()
    # the claim with the most transitive dependencies shows a real restriction
    claim = max(registry, key=lambda c: (len(registry.transitive_dependencies(c.id)), c.id))
    expected = {claim.id, *registry.transitive_dependencies(claim.id)}
    assert 1 < len(expected) < len(registry)
    page.goto(url + f"claims/{claim.area}.html#{make_id(claim.id)}")
    page.locator(f"section#{make_id(claim.id)} a.tt-focus-link").first.click()
    page.wait_for_load_state()
    assert f"focus={claim.id}" in page.url and "direction=dependencies" in page.url

    def shown() -> set[str]:
        return set(page.eval_on_selector_all(
            "svg.tt-graph-focused a title", "ts => ts.map(t => t.textContent.split(' ')[0])"))

    assert shown() == expected
    assert not page.locator(".tt-graph-wrapper").is_visible()  # the full graph is hidden
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "graph-focus.png"))

    base = next(iter(registry.transitive_dependencies(claim.id)))
    page.fill(".tt-focus input[type=search]", base)
    page.select_option(".tt-focus select[name=direction]", "dependents")
    page.dispatch_event(".tt-focus input[type=search]", "change")
    assert shown() == {base, *registry.transitive_dependents(base)}
    assert f"focus={base}" in page.url and "direction=dependents" in page.url

    page.click(".tt-focus button")  # back to the whole graph
    assert page.locator(".tt-graph-wrapper").is_visible() and "focus=" not in page.url
    assert page.locator("svg.tt-graph-focused").count() == 0


def test_the_index_claims_table_fits_its_column(page, served):
    url, _ = served
    page.goto(url + "index.html")
    table = page.locator("table.tt-claims")
    # [table, its scrolling wrapper's content, the wrapper's box, the article's box]
    widths = table.evaluate("t => [t.getBoundingClientRect().width, "
                            "t.parentElement.scrollWidth, t.parentElement.clientWidth, "
                            "document.querySelector('article').clientWidth]")
    # no horizontal scrolling at 1400 px: the table fits its wrapper, the wrapper the article
    assert widths[0] <= widths[3] and widths[1] <= widths[2], widths


def test_the_whole_graph_zooms_and_pans(page, served):
    url, _ = served
    page.goto(url + "graph.html")
    svg = page.locator(".tt-graph-wrapper svg.tt-graph")

    def view() -> list[float]:
        return [float(v) for v in svg.get_attribute("viewBox").split()]

    page.click(".tt-zoom button[title='show the whole graph']")
    whole = view()
    box = svg.bounding_box()
    middle = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.move(*middle)
    page.mouse.wheel(0, -300)  # zoom in about the pointer
    page.wait_for_function("w => parseFloat(document.querySelector('.tt-graph-wrapper svg')"
                           ".getAttribute('viewBox').split(' ')[2]) < w", arg=whole[2])
    zoomed = view()
    assert zoomed[2] < whole[2] and zoomed[3] < whole[3]
    page.mouse.down()  # drag left: the view moves right
    page.mouse.move(middle[0] - 120, middle[1], steps=5)
    page.mouse.up()
    assert view()[0] > zoomed[0] and view()[2] == zoomed[2]
    assert page.url.endswith("graph.html")  # the drag opened no claim
    page.click(".tt-zoom button[title='show the whole graph']")
    assert view() == whole
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.click(".tt-zoom button[title=\"fit the graph's width\"]")
    page.screenshot(path=str(SCREENSHOTS / "graph-zoom.png"))


def test_every_circuit_figure_sits_under_its_own_case(page, served):
    url, _ = served
    page.goto(url + "claims/circuits.html")
    shown = page.eval_on_selector_all(
        ".tt-circuit-diagram[data-case]",
        "ds => ds.map(d => [d.dataset.case, Array.from(d.closest('section')"
        ".querySelectorAll('figcaption')).map(f => f.textContent.replace('¶', '').trim())])")
    assert shown, "no circuit case on the page"
    methods = ("activation-patching", "eap")
    for case, captions in shown:
        assert all(c in {f"{case}-{m}" for m in methods} for c in captions), (case, captions)
    by_case = dict(shown)
    assert by_case["two-layer-induction"] == ["two-layer-induction-eap"]
    assert by_case["two-layer-induction-rotated"] == ["two-layer-induction-rotated-eap"]
