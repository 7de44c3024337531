r"""What a proved check proves: its scope, its statement, and the statement's reviewed hash.

A proof establishes the statement of its theorem (Coq) or of its query (SMT), read against the
definitions it uses, and nothing else. Whether that statement *is* the claim (all of it, one of
its sentences, or a special case) is a person's judgement, made once by reading the two side by
side; this module makes the judgement explicit and keeps it current:

* :class:`Scope` is what a proved check declares it covers (``coq_proof(..., scope=...)``);
* :func:`coq_statement_sha256` hashes a Coq theorem's statement together with the file's
  definitions (everything outside proofs, minus the statements of other lemmas), with comments
  removed and whitespace normalised: editing a proof or a comment leaves it unchanged, editing
  the theorem's type or a definition it may unfold changes it;
* :func:`python_statement_sha256` hashes the source (docstrings, comments and layout removed)
  of the Python functions an SMT query is generated from;
* ``proofs/REVIEWED.json`` pins, per proved check, the claim, the file, the theorem, the
  scope and the hash, and ``tests/test_proofs.py`` fails when a statement changes until the
  entry is updated, after a review of the statement against the claim.

:func:`theorem_spans` also tells :mod:`theorems.proving` where a theorem's proof lies, so a
falsified-statement mutant counts only if coqc fails *inside* that proof.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent  # Coq files are named relative to it
REVIEWED_PATH = PACKAGE / "proofs" / "REVIEWED.json"
COVERS = ("statement", "part", "special-case")

# Vernacular that opens a proof: its statement is an assertion, what follows up to Qed is proof.
_ASSERTIONS = re.compile(r"(Theorem|Lemma|Fact|Remark|Corollary|Proposition|Property|Example|"
                         r"Let)\s+([A-Za-z_][\w']*)")
_PROOF_END = re.compile(r"(Qed|Defined|Admitted|Abort)")
_SENTENCE_END = re.compile(r"\.(?=\s|$)")
_LEADING_BULLETS = re.compile(r"^[\s{}+*-]+")


@dataclass(frozen=True)
class Scope:
    """What a proof covers of its claim's statement.

    ``covers`` is ``"statement"`` (every sentence of the claim), ``"part"`` (some sentences:
    ``text`` names them and what is left to the other checks) or ``"special-case"`` (the
    statement for a restricted case: ``text`` says which). ``text`` is plain words.
    """

    covers: str
    text: str

    def __post_init__(self) -> None:
        if self.covers not in COVERS:
            raise ValueError(f"covers must be one of {COVERS}, got {self.covers!r}")
        if not isinstance(self.text, str):
            raise TypeError(f"text must be a string, got {type(self.text).__name__}")
        if not self.text.strip():
            raise ValueError("text must say what the proof covers, got an empty string")

    def record(self) -> dict:
        """The ``proof.scope`` record of the evidence file."""
        return {"covers": self.covers, "text": self.text}


# --- Coq ---------------------------------------------------------------------------------

def blank_comments(text: str) -> str:
    """``text`` with every (nested) comment replaced by spaces, newlines kept, so offsets and
    line numbers still point into the original."""
    chars, depth, i = list(text), 0, 0
    while i < len(text):
        span = 2 if text.startswith("(*", i) or (depth and text.startswith("*)", i)) else 1
        if span == 2 and text[i] == "(":
            depth += 1
        if depth:
            chars[i:i + span] = [c if c == "\n" else " " for c in text[i:i + span]]
        if span == 2 and text[i] == "*":
            depth -= 1
        i += span
    return "".join(chars)


@dataclass(frozen=True)
class _Sentence:
    text: str   # comment-free, whitespace-normalised, without the final period
    start: int  # offsets into the file
    end: int    # just past the period
    role: str   # "assertion", "proof" or "context"
    name: str = ""  # an assertion's name


def _sentences(text: str) -> list[_Sentence]:
    """The file's sentences, each marked as an assertion (a lemma's statement), part of a proof,
    or context (imports, sections, variables, definitions, notations)."""
    blank = blank_comments(text)
    found: list[_Sentence] = []
    in_proof, start = False, 0
    for end in _SENTENCE_END.finditer(blank):
        raw = blank[start:end.start()]
        words = " ".join(raw.split())
        if words:
            head = _LEADING_BULLETS.sub("", words)
            assertion = _ASSERTIONS.match(words)
            if in_proof:
                role = "proof"
                in_proof = not _PROOF_END.fullmatch(head)
            elif assertion and not (assertion.group(1) == "Let" and ":=" in words):
                role, in_proof = "assertion", True
            else:
                role = "context"
            found.append(_Sentence(words, start + len(raw) - len(raw.lstrip()), end.end(), role,
                                   assertion.group(2) if role == "assertion" else ""))
        start = end.end()
    if blank[start:].strip():
        found.append(_Sentence(" ".join(blank[start:].split()), start, len(text), "context"))
    return found


@dataclass(frozen=True)
class TheoremSpans:
    """Where ``theorem``'s statement and proof lie in a file (character offsets)."""

    statement: tuple[int, int]  # the assertion sentence, its period included
    proof: tuple[int, int]      # from just after the statement to the end of Qed/Defined


def theorem_spans(text: str, theorem: str) -> TheoremSpans:
    """Locate ``theorem``'s statement and proof; ``ValueError`` if it is not stated once."""
    sentences = _sentences(text)
    hits = [i for i, s in enumerate(sentences) if s.role == "assertion" and s.name == theorem]
    if len(hits) != 1:
        raise ValueError(f"theorem {theorem!r} is stated {len(hits)} times, expected once")
    first = hits[0]
    last = first
    while last + 1 < len(sentences) and sentences[last + 1].role == "proof":
        last += 1
    return TheoremSpans((sentences[first].start, sentences[first].end),
                        (sentences[first].end, sentences[last].end))


def coq_statement(text: str, theorem: str) -> str:
    """``theorem``'s statement (``Theorem name binders : type``), comment-free, one line."""
    return next(s.text for s in _sentences(text)
                if s.role == "assertion" and s.name == theorem)


def coq_statement_sha256(text: str, theorem: str) -> str:
    """SHA-256 of ``theorem``'s statement and of the file's context it is read against.

    The context is every sentence outside proofs except the statements of other lemmas
    (imports, scopes, sections, variables, definitions, notations), comment-free and
    whitespace-normalised, in file order; the theorem's statement keeps its place.
    """
    theorem_spans(text, theorem)  # stated exactly once
    kept = [s.text for s in _sentences(text)
            if s.role == "context" or (s.role == "assertion" and s.name == theorem)]
    return hashlib.sha256("\n".join(["coq-statement-1", *kept]).encode()).hexdigest()


# --- Python (SMT queries) ----------------------------------------------------------------

def python_source(function: Callable) -> str:
    """``function``'s source with its docstring, comments and layout removed (``ast.unparse``).
    A ``functools.partial`` is unwrapped to its function."""
    function = getattr(function, "func", function)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def qualified_name(function: Callable) -> str:
    """``module:qualname`` of a function (a ``functools.partial`` is unwrapped)."""
    function = getattr(function, "func", function)
    return f"{function.__module__}:{function.__qualname__}"


def python_statement_sha256(functions: Sequence[Callable]) -> str:
    """SHA-256 of the sources of the functions an SMT query's assertions are generated from."""
    if not functions:
        raise ValueError("functions must name at least one function the query comes from")
    parts = [f"{qualified_name(f)}\n{python_source(f)}" for f in functions]
    return hashlib.sha256("\n\0".join(["python-statement-1", *parts]).encode()).hexdigest()


@dataclass(frozen=True)
class ProofSpec:
    """What a proved check proves, for ``proofs/REVIEWED.json``: its tool, file, theorem,
    scope, and (SMT) the functions its query's assertions are generated from."""

    tool: str
    file: str
    theorem: str
    scope: Scope
    functions: tuple[Callable, ...] = ()

    def statement(self) -> tuple[str, str]:
        """(the statement in words a reviewer reads, its SHA-256)."""
        if self.tool == "Coq":
            text = (PACKAGE / self.file).read_text()
            return coq_statement(text, self.theorem), coq_statement_sha256(text, self.theorem)
        names = ", ".join(qualified_name(f) for f in self.functions)
        return f"the query generated by {names}", python_statement_sha256(self.functions)


# --- the reviewed file -------------------------------------------------------------------

def load_reviewed(path: str | Path = REVIEWED_PATH) -> list[dict]:
    """The entries of ``proofs/REVIEWED.json``: claim, tool, file, theorem, statement, sha256,
    scope; one per proved check."""
    data = json.loads(Path(path).read_text())
    return list(data["proofs"])


def declared_proofs() -> list[tuple[str, ProofSpec]]:
    """(claim id, :class:`ProofSpec`) of every proved check declared in the area modules,
    found as :func:`theorems.evidence.declared_checks` finds checks (imports them all)."""
    import importlib

    from theorems.claims import area_modules, topic_modules

    found = []
    for name in (topic for area in area_modules() for topic in topic_modules(area)):
        for attribute, value in vars(importlib.import_module(name)).items():
            spec = getattr(value, "proof_spec", None)
            if attribute.startswith("test") and isinstance(spec, ProofSpec):
                found += [(mark.args[0], spec) for mark in getattr(value, "pytestmark", [])
                          if mark.name == "claim"]
    return sorted(found, key=lambda pair: (pair[0], pair[1].file, pair[1].theorem))


def reviewed_entry(claim_id: str, spec: ProofSpec) -> dict:
    """The ``proofs/REVIEWED.json`` entry that ``spec``'s current statement would have."""
    statement, sha = spec.statement()
    return {"claim": claim_id, "tool": spec.tool, "file": spec.file, "theorem": spec.theorem,
            "statement": statement, "sha256": sha, "scope": spec.scope.record()}

