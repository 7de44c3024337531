"""Roles and a directive the generated pages use, and the words they explain.

* ``{status}`verified```, ``{tier}`property```, ``{tag}`V```, ``{outcome}`passed```,
  ``{staleness}`stale``` and ``{scope}`part``` render a chip whose tooltip says what the
  value means; each refuses an unknown value, so a typo fails the build.
* ``{details} summary`` wraps its content in a collapsible ``<details>`` element (used for
  the autodoc entry of a construction, whose summary line shows the signature).
"""

from __future__ import annotations

from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import Directive, directives

from theorems.claims import STATUSES, TAGS, TIERS

from .data import SCOPE_MEANING, STALENESS

# What each value means, for tooltips and the "how to read" page. Statuses follow
# theorems.claims.derive_status; the keys are checked against the foundation's tuples below.
STATUS_MEANING = {
    "verified": "every check passed, and at least one is beyond the symbolic tier",
    "refuted": "a refutation check passed: a counterexample to the claim as stated is pinned",
    "inconclusive": "a check's interval over sampled trials or seeds did not decide",
    "failing": "some check failed",
    "unchecked": "no check ran (or only symbolic ones), or the claim is not in the evidence",
}
TIER_MEANING = {
    "property": "Hypothesis property test: random and shrunk inputs, extreme cases pinned",
    "exhaustive": "every input of a finite domain enumerated",
    "symbolic": "an identity proved by SymPy",
    "numeric": "a numerical solver (SciPy, cvxpy, mpmath) with a stated tolerance",
    "empirical": "a model trained by gradient descent compared with the construction",
    "refutation": "a counterexample to the claim as stated, pinned and re-checked",
    "proved": "a machine-checked proof: compiled by Coq (trusting its kernel and the listed "
              "axioms) or an SMT solver's unsat answer",
}
OUTCOME_MEANING = {
    "passed": "the check passed",
    "failed": "the check failed: see its falsifying example",
    "skipped": "the check did not run (a skipped proof is no proof)",
    "inconclusive": "the check's interval over sampled trials or seeds did not decide",
}
if tuple(STATUS_MEANING) != STATUSES or tuple(TIER_MEANING) != TIERS:
    raise RuntimeError("theorems.claims changed its statuses or tiers; explain them here")
VOCABULARY = {"status": STATUS_MEANING, "tier": TIER_MEANING, "tag": TAGS,
              "outcome": OUTCOME_MEANING, "staleness": STALENESS, "scope": SCOPE_MEANING}


def _chip_role(kind: str, meanings: dict[str, str]):
    def role(name, rawtext, text, lineno, inliner, options=None, content=()):
        value = text.strip()
        if value not in meanings:
            message = inliner.reporter.error(f"unknown {kind} {value!r}; expected one of "
                                             f"{', '.join(meanings)}", line=lineno)
            return [inliner.problematic(rawtext, rawtext, message)], [message]
        return [nodes.abbreviation(rawtext, value, explanation=meanings[value],
                                   classes=["tt-chip", f"tt-{kind}", f"tt-{kind}-{value}"])], []
    return role


class details(nodes.General, nodes.Element):  # noqa: N801 (docutils names nodes in lowercase)
    """A collapsible block; its first child is the summary."""


class summary(nodes.TextElement, nodes.General):  # noqa: N801
    pass


class DetailsDirective(Directive):
    """``{details} summary text`` with an ``:open:`` flag and a ``:class:`` option."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec: ClassVar = {"open": directives.flag, "class": directives.class_option}

    def run(self) -> list[nodes.Node]:
        node = details(open="open" in self.options,
                       classes=["tt-details", *self.options.get("class", [])])
        text_nodes, messages = self.state.inline_text(self.arguments[0], self.lineno)
        node += summary("", "", *text_nodes)
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node, *messages]


def _visit_details(self, node: details) -> None:
    attributes = {"open": "open"} if node.get("open") else {}
    self.body.append(self.starttag(node, "details", **attributes))


def _depart_details(self, node: details) -> None:
    self.body.append("</details>\n")


def _visit_summary(self, node: summary) -> None:
    self.body.append(self.starttag(node, "summary", ""))


def _depart_summary(self, node: summary) -> None:
    self.body.append("</summary>\n")


def _pass(self, node: nodes.Node) -> None:
    """Other builders (text, LaTeX) keep the content and drop the collapsing."""


def setup(app) -> None:
    for kind, meanings in VOCABULARY.items():
        app.add_role(kind, _chip_role(kind, meanings))
    others = {builder: (_pass, _pass) for builder in ("text", "latex", "man", "texinfo")}
    app.add_node(details, html=(_visit_details, _depart_details), **others)
    app.add_node(summary, html=(_visit_summary, _depart_summary), **others)
    app.add_directive("details", DetailsDirective)
