r"""The ``proved`` tier: machine-checked proofs, run as checks.

A proved check compiles a Coq file with ``coqc`` (:func:`coq_proof`) or asks an SMT solver to
refute the negation of a statement (:func:`smt_proof`). It passes only if the kernel accepts
the proof *and* the main theorem rests on nothing but the axioms listed in
:data:`ALLOWED_AXIOMS` (the classical axioms of Coq's standard-library reals), or if the
solver answers ``unsat``. It records, through ``evidence.proof``:

* the tool and its version (``coqc --version``, ``z3.get_version_string()``);
* what it trusts (``trusts``, a list): the Coq kernel plus the axioms ``Print Assumptions``
  lists; or what generated the query (the SymPy rewrite, :func:`z3_from_sympy`) and the solver;
* its ``scope`` (:class:`~theorems.proof_statements.Scope`, declared by every proved check):
  whether it covers the claim's whole statement, a part, or a special case, and which;
* ``statement_sha256``, the hash of the statement it proves, which ``proofs/REVIEWED.json``
  pins for the reviewed statement (see :mod:`theorems.proof_statements`);
* the compile (or solve) time, and whether the result came from the cache.

A failed proof says why in ``failure``: ``"proof"`` only when the theorem's statement
elaborates (the file compiles with that one proof admitted) and coqc's error lies inside the
proof, so a falsified-statement mutant cannot pass on a broken toolchain or a typo; otherwise
``"compile"``, ``"not-a-proof"``, ``"axioms"``, ``"timeout"``, or for z3 ``"counterexample"``
(``sat``) and ``"unknown"``.

Proofs are cached by content hash under ``build/proofs-cache/`` (gitignored): the key covers
the proof text, the theorem's name, the tool's version, the allowed axioms and
:data:`RUNNER_VERSION`, so an unchanged proof is not re-checked. Failures are cached too, so a
mutant (a falsified statement, see ``tests/test_proofs.py``) costs one compile per change.
Set ``THEOREMS_PROOF_CACHE=off`` to check every proof cold.

When ``coqc`` or ``z3`` is missing, the checks skip and say why (they are marked at
collection, and skip again if called directly). This module imports neither hypothesis nor
torch; ``z3`` is imported only inside :func:`smt_proof`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from constructions.interop.files import installed_version
from theorems.proof_statements import (
    ProofSpec,
    Scope,
    coq_statement_sha256,
    python_statement_sha256,
    theorem_spans,
)

# The folder holding the packages (the repository, or site-packages for an installed wheel):
# SMT queries name the modules they are generated from relative to it.
ROOT = Path(__file__).resolve().parents[1]
# Coq files are named relative to this package (``proofs/coq/x.v``), whose data they are, so an
# installed wheel carries them.
PACKAGE = Path(__file__).resolve().parent
PROOFS = PACKAGE / "proofs"
# Beside the evidence (``build/`` of the working directory), never inside an installed package.
CACHE_DIR = Path("build") / "proofs-cache"
RUNNER_VERSION = 2  # bump when what a cached result means changes (2: trusts, failure)

# The axioms that ``Print Assumptions`` reports for lemmas of Coq 8.16's standard-library
# reals (``Require Import Reals``): the classical construction of R needs the first two, and
# parts of the library use functional extensionality and excluded middle. Nothing else is
# accepted: an ``Admitted`` lemma or an ``Axiom`` shows up in the same list and fails the check.
ALLOWED_AXIOMS = frozenset({
    "ClassicalDedekindReals.sig_forall_dec",
    "ClassicalDedekindReals.sig_not_dec",
    "FunctionalExtensionality.functional_extensionality_dep",
    "Classical_Prop.classic",
})
# Vernacular that ends or replaces a proof without proving it, or switches a kernel check off
# (or loads a plugin that could); rejected before compiling, so the message names the offence
# even when the file would compile.
_UNPROVED = re.compile(r"\b(Admitted|admit|give_up|Axiom|Axioms|Conjecture|Parameter|"
                       r"Parameters|bypass_check|Declare ML Module|"
                       r"Unset (?:Guard|Positivity|Universe) Checking)\b")
_COMMENT = re.compile(r"\(\*.*?\*\)", re.S)
COQ_TIMEOUT = 600  # seconds; a proof that takes longer is reported as a failure
SMT_TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class ProofResult:
    """What a proof check found; ``ok`` False means the proof was rejected (``message`` says
    why, ``failure`` how: see the module's docstring). ``seconds`` is the compile or solve time
    of the run that produced the result; ``sha256`` hashes the whole proof text (or query),
    ``statement_sha256`` only the statement it proves."""

    ok: bool
    tool: str
    version: str
    source: str
    theorem: str
    trusts: tuple[str, ...]
    assumptions: tuple[str, ...]
    seconds: float
    sha256: str
    statement_sha256: str = ""
    message: str = ""
    failure: str = ""
    cached: bool = False

    def record(self, scope: Scope) -> dict:
        """The ``evidence.proof`` record (``seconds`` is a time, like ``duration``)."""
        data = asdict(self)
        data["assumptions"] = list(self.assumptions)
        data["trusts"] = list(self.trusts)
        data["scope"] = scope.record()
        for key in ("ok", "message", "failure"):
            data.pop(key)
        return data


# --- tools -------------------------------------------------------------------------------

@functools.cache
def coq_version() -> str | None:
    """``coqc``'s version (``8.16.1``), or None when it is not installed."""
    coqc = shutil.which("coqc")
    if coqc is None:
        return None
    out = subprocess.run([coqc, "--version"], capture_output=True, text=True, timeout=60).stdout
    found = re.search(r"version (\S+)", out)
    return found.group(1) if found else out.strip()


@functools.cache
def z3_version() -> str | None:
    """The installed ``z3-solver``'s version (read from its metadata: importing z3 costs
    seconds, and a cached proof never needs it), or None when it is not installed."""
    return installed_version("z3-solver")


def missing_coq() -> str | None:
    """Why Coq proofs cannot run here, or None."""
    if coq_version() is None:
        return ("coqc not found: install Coq 8.16 and MathComp (apt-get install coq "
                "libcoq-mathcomp-ssreflect libcoq-mathcomp-algebra) to run proved checks")
    return None


def missing_z3() -> str | None:
    """Why SMT proofs cannot run here, or None."""
    if z3_version() is None:
        return "z3 not found: pip install z3-solver to run SMT proved checks"
    return None


# --- the cache ---------------------------------------------------------------------------

def _cache_enabled() -> bool:
    return os.environ.get("THEOREMS_PROOF_CACHE", "on").lower() not in ("off", "0", "no")


def _cache_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in (str(RUNNER_VERSION), ",".join(sorted(ALLOWED_AXIOMS)), *parts):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _cached(key: str) -> ProofResult | None:
    path = CACHE_DIR / f"{key}.json"
    if not _cache_enabled() or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        data["assumptions"] = tuple(data["assumptions"])
        data["trusts"] = tuple(data["trusts"])
        return ProofResult(**{**data, "cached": True})
    except (ValueError, TypeError, KeyError):
        return None  # a corrupt or outdated entry is re-checked


def _store(key: str, result: ProofResult) -> None:
    if not _cache_enabled():
        return
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    data = asdict(result)
    data.pop("cached")
    temporary = CACHE_DIR / f"{key}.{os.getpid()}.tmp"  # atomic under xdist
    temporary.write_text(json.dumps(data, indent=1))
    temporary.replace(CACHE_DIR / f"{key}.json")


# --- Coq ---------------------------------------------------------------------------------

def mutate(text: str, replace: tuple[str, str] | None) -> str:
    """``text`` with ``replace = (old, new)`` applied; ``old`` must occur exactly once."""
    if replace is None:
        return text
    old, new = replace
    count = text.count(old)
    if count != 1:
        raise ValueError(f"replace: {old!r} occurs {count} times in the proof, expected once")
    return text.replace(old, new)


def unproved_markers(text: str) -> list[str]:
    """The ``Admitted``/``admit``/``Axiom``-like words outside comments (nested ones too)."""
    previous = None
    while previous != text:  # strip innermost comments first
        previous, text = text, _COMMENT.sub(" ", text)
    return sorted(set(_UNPROVED.findall(text)))


def parse_assumptions(output: str) -> tuple[str, ...]:
    """Axiom names from ``Print Assumptions`` output (names start a line, types are indented).

    ``Closed under the global context`` gives ``()``.
    """
    if "Closed under the global context" in output:
        return ()
    names: list[str] = []
    section = False
    for line in output.splitlines():
        if re.match(r"^(Axioms|Opaque constants|Transparent constants|Section Variables):",
                    line):
            section = line.startswith("Axioms")
            continue
        if section and line and not line[0].isspace():
            names.append(line.split(" : ", 1)[0].strip())
    if not names and "Axioms:" not in output:
        raise ValueError(f"unrecognised Print Assumptions output: {output[:200]!r}")
    return tuple(names)


def check_coq(path: str | os.PathLike, theorem: str, *, replace: tuple[str, str] | None = None,
              ) -> ProofResult:
    """Compile ``path`` (relative to the ``theorems`` package: ``proofs/coq/x.v``) and audit
    ``theorem``'s axioms."""
    if not re.fullmatch(r"[A-Za-z_][\w']*", theorem):
        raise ValueError(f"theorem must be a Coq identifier, got {theorem!r}")
    file = PACKAGE / path
    if file.suffix != ".v" or not file.is_file():
        raise ValueError(f"path must name an existing .v file, got {str(path)!r}")
    text = mutate(file.read_text(), replace)
    version = coq_version()
    source = file.relative_to(PACKAGE).as_posix()
    sha = hashlib.sha256(text.encode()).hexdigest()
    try:
        statement = coq_statement_sha256(text, theorem)
    except ValueError:  # not stated exactly once: coqc or Print Assumptions says so below
        statement = ""
    key = _cache_key("coq", version or "", theorem, text)
    hit = _cached(key)
    if hit is not None:  # the key is the content: the file may have moved since
        return dataclasses.replace(hit, source=source)

    def result(ok: bool, assumptions=None, seconds=0.0, message="", failure="") -> ProofResult:
        trusts = () if assumptions is None else (  # () when the proof was not accepted
            f"the Coq {version} kernel", *(f"axiom {name}" for name in assumptions))
        return ProofResult(ok=ok, tool="Coq", version=version or "", source=source,
                           theorem=theorem, trusts=trusts, assumptions=tuple(assumptions or ()),
                           seconds=round(seconds, 3), sha256=sha, statement_sha256=statement,
                           message=message, failure=failure)

    markers = unproved_markers(text)
    if markers:
        outcome = result(False, message=f"{source} is not a proof: it uses {', '.join(markers)}",
                         failure="not-a-proof")
        _store(key, outcome)
        return outcome
    with tempfile.TemporaryDirectory(prefix="theorems-coq-") as tmp:
        stem = re.sub(r"\W", "_", file.stem)
        start = time.perf_counter()
        compiled = _compile(Path(tmp), stem, text)
        seconds = time.perf_counter() - start
        if compiled.returncode == 124:  # a timeout may pass on a quieter machine: not cached
            return result(False, seconds=seconds, failure="timeout",
                          message=f"coqc timed out on {source}:\n{_tail(compiled)}")
        if compiled.returncode != 0:
            failure, why = _where_it_fails(text, theorem, stem, compiled, Path(tmp))
            outcome = result(False, seconds=seconds, failure=failure,
                             message=why.format(theorem=theorem, source=source))
            _store(key, outcome)
            return outcome
        (Path(tmp) / "Audit.v").write_text(
            f"Require Proofs.{stem}.\nPrint Assumptions Proofs.{stem}.{theorem}.\n")
        audit = _run(["coqc", *_flags(Path(tmp)), f"{tmp}/Audit.v"], cwd=tmp)
        if audit.returncode != 0:
            outcome = result(False, seconds=seconds, failure="compile",
                             message=f"Print Assumptions {theorem} failed:\n{_tail(audit)}")
            _store(key, outcome)
            return outcome
    assumptions = parse_assumptions(audit.stdout)
    extra = sorted(set(assumptions) - ALLOWED_AXIOMS)
    message = (f"{theorem} rests on axioms outside the standard library's classical reals: "
               f"{', '.join(extra)}") if extra else ""
    outcome = result(not extra, assumptions, seconds, message, "axioms" if extra else "")
    _store(key, outcome)
    return outcome


def _flags(folder: Path) -> list[str]:
    return ["-q", "-w", "-notation-overridden,-ambiguous-paths", "-Q", str(folder), "Proofs"]


def _compile(folder: Path, stem: str, text: str) -> subprocess.CompletedProcess:
    """Write ``text`` to ``folder/stem.v`` and compile it as ``Proofs.stem``."""
    folder.mkdir(exist_ok=True)
    (folder / f"{stem}.v").write_text(text)
    return _run(["coqc", *_flags(folder), str(folder / f"{stem}.v")], cwd=str(folder))


# coqc reports an error as 'File "<path>", line L, characters A-B:' then 'Error: ...' (A, B
# are byte offsets in line L); warnings carry locations too, hence the look-ahead.
_ERROR_AT = re.compile(r'File "([^"]*)", line (\d+), characters (\d+)-\d+:\s*(?=Error)')


def error_offset(text: str, stem: str, output: str) -> int | None:
    """The character offset in ``text`` (the file ``stem.v``) of coqc's first error, or None
    when the output locates no error in that file."""
    for found in _ERROR_AT.finditer(output):
        if Path(found.group(1)).name != f"{stem}.v":
            continue
        line, column = int(found.group(2)), int(found.group(3))
        lines = text.split("\n")
        if line > len(lines):
            return None
        before = sum(len(row) + 1 for row in lines[:line - 1])
        return before + len(lines[line - 1].encode()[:column].decode(errors="ignore"))
    return None


def _where_it_fails(text: str, theorem: str, stem: str, compiled: subprocess.CompletedProcess,
                    folder: Path) -> tuple[str, str]:
    """Classify a failed compile: ``("proof", why)`` only when the error lies inside
    ``theorem``'s proof and the file compiles with that proof admitted (so the statement
    elaborates and only a tactic of that proof fails); else ``("compile", why)``. ``why`` has
    ``{theorem}`` and ``{source}`` left to fill."""
    output = compiled.stdout + compiled.stderr
    tail = _tail(compiled).replace("{", "{{").replace("}", "}}")
    offset = error_offset(text, stem, output)
    try:
        spans = theorem_spans(text, theorem)
    except ValueError as error:
        return "compile", f"coqc rejected {{source}} ({error}):\n{tail}"
    if offset is None or not spans.proof[0] <= offset < spans.proof[1]:
        where = ("with no error located in the file" if offset is None else
                 f"at line {text.count(chr(10), 0, offset) + 1}, outside the proof of "
                 "{theorem}")
        return "compile", f"coqc rejected {{source}} {where}:\n{tail}"
    line = text.count("\n", 0, offset) + 1
    admitted = text[:spans.proof[0]] + "\nAdmitted." + text[spans.proof[1]:]
    check = _compile(folder / "admitted", stem, admitted)
    if check.returncode != 0:
        return "compile", (f"coqc fails inside the proof of {{theorem}} (line {line}), but "
                           f"{{source}} does not compile with that proof admitted either:\n"
                           + _tail(check).replace("{", "{{").replace("}", "}}"))
    return "proof", (f"the proof of {{theorem}} in {{source}} does not go through: its "
                      f"statement elaborates (the file compiles with that proof admitted) and "
                      f"coqc fails inside the proof, at line {line}:\n{tail}")


def _run(command: list[str], cwd: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, cwd=cwd,
                              timeout=COQ_TIMEOUT)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"timed out after {COQ_TIMEOUT}s")


def _tail(process: subprocess.CompletedProcess, lines: int = 12) -> str:
    return "\n".join((process.stdout + process.stderr).strip().splitlines()[-lines:])


def _report(result: ProofResult, scope: Scope) -> None:
    from theorems.evidence import evidence

    evidence.proof(result.record(scope))
    assert result.ok, result.message


def _require_scope(scope: object) -> Scope:
    if not isinstance(scope, Scope):
        raise TypeError("scope must be a theorems.proof_statements.Scope (what the proof "
                        f"covers of the claim), got {type(scope).__name__}")
    return scope


def coq_proof(path: str, theorem: str, *, scope: Scope,
              replace: tuple[str, str] | None = None) -> Callable:
    """A check that compiles the Coq file ``path`` and audits ``theorem``.

    ``scope`` says what the theorem covers of the claim's statement (recorded with the
    evidence and pinned, with the statement's hash, in ``proofs/REVIEWED.json``).
    ``replace = (old, new)`` edits the file's text first: that is how a mutant falsifies the
    statement (the edited file must then fail inside the proof). Use as
    ``test_x = check(CLAIM, "proved")(coq_proof("proofs/coq/x.v", theorem="x", scope=...))``.
    """
    _require_scope(scope)

    def run() -> None:
        reason = missing_coq()
        if reason:
            pytest.skip(reason)
        _report(check_coq(path, theorem, replace=replace), scope)

    run.__name__ = f"coq_{Path(path).stem.replace('-', '_')}"
    run.__doc__ = f"Coq proof of {theorem} in {path}."
    run.proof_spec = ProofSpec("Coq", path, theorem, scope)
    return pytest.mark.skipif(missing_coq() is not None, reason=missing_coq() or "")(run)


# --- SMT ---------------------------------------------------------------------------------

def check_smt(build: Callable, name: str, source: str, depends: tuple[str, ...] = (), *,
              statement: tuple[Callable, ...] = (), trusts: tuple[str, ...] = ()
              ) -> ProofResult:
    """Ask z3 whether the formulas ``build()`` returns can all hold; ``unsat`` is a proof.

    ``build`` returns the statement's negation (with its hypotheses) as a list of z3 Booleans.
    With ``depends`` (paths, relative to the repository root, of every file the query is
    generated from), the cache is keyed on those files' contents and the SymPy and z3
    versions, so a cached proof does not even rebuild its query; without it, on the query's
    SMT-LIB text. ``statement`` names the functions the query's assertions come from (their
    source is hashed into ``statement_sha256``); ``trusts`` lists what generating the query
    trusts, before z3's own answer.
    """
    version = z3_version() or ""
    statement_sha = python_statement_sha256(statement) if statement else ""
    early_key = None
    if depends:
        contents = [(ROOT / path).read_text() for path in depends]
        early_key = _cache_key("z3-inputs", version, installed_version("sympy") or "",
                               name, source, statement_sha, *trusts, *depends, *contents)
        hit = _cached(early_key)
        if hit is not None:
            return hit
    import z3

    formulas = list(build())
    solver = z3.Solver()
    solver.set("timeout", SMT_TIMEOUT_MS)
    solver.add(*formulas)
    query = solver.to_smt2()
    sha = hashlib.sha256(query.encode()).hexdigest()
    key = _cache_key("z3", version, name, statement_sha, *trusts, query)
    hit = _cached(key)
    if hit is not None:
        return hit
    start = time.perf_counter()
    answer = solver.check()
    seconds = time.perf_counter() - start
    version = z3.get_version_string()  # the library's own word, recorded with the proof
    message, failure = "", ""
    if answer == z3.sat:
        message = f"z3 found a counterexample to {name}: {solver.model()}"
        failure = "counterexample"
    elif answer != z3.unsat:
        message = f"z3 answered {answer} on {name} ({solver.reason_unknown()})"
        failure = "unknown"
    outcome = ProofResult(ok=answer == z3.unsat, tool="z3", version=version, source=source,
                          theorem=name, trusts=(*trusts, f"z3 {version}'s unsat answer"),
                          assumptions=(), seconds=round(seconds, 3), sha256=sha,
                          statement_sha256=statement_sha, message=message, failure=failure)
    if answer in (z3.sat, z3.unsat):  # an 'unknown' (a timeout) may differ next time
        _store(key, outcome)
        if early_key is not None:
            _store(early_key, outcome)
    return outcome


def smt_proof(build: Callable, name: str, source: str, depends: tuple[str, ...] = (), *,
              scope: Scope, statement: tuple[Callable, ...], trusts: tuple[str, ...] = ()
              ) -> Callable:
    """A check that proves ``name`` by z3 answering ``unsat`` on ``build()`` (its negation).

    ``source`` names the Python function the query comes from (shown with the evidence);
    ``depends`` lists the files it is generated from (see :func:`check_smt`); ``scope`` says
    what it covers of the claim; ``statement`` lists the functions whose source *is* the
    statement proved (hashed and pinned in ``proofs/REVIEWED.json``); ``trusts`` lists what
    the query's generation trusts (a rewrite, a translator).
    """
    _require_scope(scope)
    if not statement:
        raise ValueError("statement must list the functions the query's assertions come from")

    def run() -> None:
        reason = missing_z3()
        if reason:
            pytest.skip(reason)
        _report(check_smt(build, name, source, depends, statement=statement, trusts=trusts),
                scope)

    run.__name__ = "smt_" + re.sub(r"\W", "_", name)
    run.__doc__ = f"SMT proof of {name} (query from {source})."
    where = Path(inspect.getsourcefile(getattr(build, "func", build))).resolve()
    run.proof_spec = ProofSpec("z3", where.relative_to(ROOT).as_posix(), name, scope,
                               tuple(statement))
    return pytest.mark.skipif(missing_z3() is not None, reason=missing_z3() or "")(run)


# --- from SymPy to z3 --------------------------------------------------------------------

def _series_bounds(name: str) -> tuple:
    """Rational enclosures ``(lo, hi)`` of e or ln k (integer k >= 2), from series with tails.

    e = sum 1/j! (tail after J terms < 2/(J+1)!); ln k = 2 atanh((k-1)/(k+1)) =
    2 sum t^(2j+1)/(2j+1), t = (k-1)/(k+1) (tail after J terms < 2 t^(2J+1)/((2J+1)(1-t^2))).
    """
    from fractions import Fraction
    from math import factorial

    if name == "E":
        lower = sum(Fraction(1, factorial(j)) for j in range(30))
        return lower, lower + Fraction(2, factorial(30))
    k = int(name)
    if k < 2:
        raise ValueError(f"ln of {k}: only integers >= 2 have series bounds here")
    t = Fraction(k - 1, k + 1)
    terms = 60
    lower = 2 * sum(t ** (2 * j + 1) / (2 * j + 1) for j in range(terms))
    tail = 2 * t ** (2 * terms + 1) / ((2 * terms + 1) * (1 - t * t))
    return lower, lower + tail


def z3_from_sympy(expr, variables: dict, facts: list) -> object:
    """Translate a SymPy expression in positive symbols, their logarithms, logarithms of
    integers and e into a z3 real term, appending to ``facts`` what is known of each atom.

    ``variables`` maps each SymPy symbol to its z3 real. ``log(s)`` of a positive symbol
    becomes a fresh real with the sound bounds ``1 - 1/s <= log s <= s - 1``; ``log(k)`` of
    an integer and ``E`` become fresh reals inside the rational enclosures of
    :func:`_series_bounds`, and ``exp(k)`` of an integer is ``E**k``. Anything else (another
    function, a float, a non-integer power) raises ``ValueError``: the translation is exact
    or it refuses.
    """
    import sympy
    import z3

    atoms: dict = variables.setdefault("_atoms", {})

    def atom(key, make):
        if key not in atoms:
            atoms[key] = make()
        return atoms[key]

    def bounded(name: str, key) -> object:
        def make():
            real = z3.Real(name)
            lo, hi = _series_bounds(key)
            facts.extend([real >= z3.RealVal(f"{lo.numerator}/{lo.denominator}"),
                          real <= z3.RealVal(f"{hi.numerator}/{hi.denominator}")])
            return real
        return atom(("const", key), make)

    def walk(e):
        if e.is_Symbol:
            if e not in variables:
                raise ValueError(f"no z3 variable for symbol {e}")
            return variables[e]
        if e.is_Integer or e.is_Rational:
            return z3.RealVal(f"{e.p}/{e.q}")
        if e == sympy.E:
            return bounded("e", "E")
        if isinstance(e, sympy.exp) and e.args[0].is_Integer:  # e^k = E^k, exactly
            return walk(sympy.Pow(sympy.E, e.args[0], evaluate=False))
        if isinstance(e, sympy.log):
            (arg,) = e.args
            if arg.is_Integer and arg >= 2:
                return bounded(f"ln_{arg}", str(arg))
            if arg.is_Symbol and arg.is_positive:
                def make():
                    real, s = z3.Real(f"ln_{arg}"), walk(arg)
                    facts.extend([real >= 1 - 1 / s, real <= s - 1])
                    return real
                return atom(("log", arg), make)
            raise ValueError(f"cannot translate {e}: log of a non-atom (expand_log first)")
        if e.is_Add:
            return z3.Sum([walk(a) for a in e.args])
        if e.is_Mul:
            return z3.Product([walk(a) for a in e.args])
        if e.is_Pow and e.exp.is_Integer:
            base, power = walk(e.base), int(e.exp)
            result = z3.RealVal(1)
            for _ in range(abs(power)):
                result = result * base
            return result if power >= 0 else 1 / result
        raise ValueError(f"cannot translate {e} ({type(e).__name__}) to z3")

    return walk(expr)
