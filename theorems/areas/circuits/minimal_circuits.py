r"""Every minimal circuit and every don't-care edge of the cases whose patching is exact,
found by enumeration and compared with what each case declares.

A ground-truth circuit is a claim of uniqueness as much as of sufficiency: a method scored
against one circuit is wrong to return another that works as well. Where the patched metric is
bit-exact (the one-hot two-layer induction construction under both corruptions, and the
saturated stress constructions), the question "which sets of edges are circuits" has an exact
answer, found here by enumerating every subset of the edges that can carry a difference, on
prompts from each case's own sampler. Each case declares its answer
(:attr:`~constructions.circuits.CircuitCase.minimal_circuits`,
:attr:`~constructions.circuits.CircuitCase.dont_care`), which the formats write and the site
shows; this claim checks the declaration. Sources: the constructions as in the area's
introduction; the definitions and the enumeration are ours [D].
"""

from __future__ import annotations

import functools
import itertools

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.circuits import all_cases, attention_graph
from constructions.circuits.patching import replaced_run, source_outputs
from theorems.areas.circuits._shared import CONSTRUCTIONS, PATCHING, SHT
from theorems.areas.circuits.stress import inclusion_minimal, live_edges, metric_table
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget

ENUMERATED = ("two-layer-induction", "two-layer-induction-earlier-occurrence", "backup-heads",
              "distractor-sub-circuit", "superposed-features-match", "superposed-features-flag")

MINIMAL = Claim(
    id="circuits.minimal-circuits",
    title="Every minimal circuit and every don't-care edge of the six exactly patchable "
          "cases are the ones each case declares",
    statement=(r"Let a case be one of two-layer-induction, two-layer-induction-earlier-"
               r"occurrence, backup-heads, distractor-sub-circuit, superposed-features-match "
               r"and superposed-features-flag of $\texttt{all\_cases}$, built at $(S, n)$, with "
               r"graph $E$ ($\texttt{attention\_graph}$ of its layers and heads), metric $m$ "
               r"and a (clean, corrupted) prompt pair from its sampler. " + PATCHING +
               r"$m(P)$ is the metric with the edges $P \subseteq E$ patched. A set $K "
               r"\subseteq E$ is *sufficient* when $m(E \setminus K) = m(\emptyset)$ bit for "
               r"bit in float64, a *minimal circuit* when it is sufficient and no proper "
               r"subset of it is; an edge $e$ is *don't-care* when $m(P \cup \{e\}) = m(P)$ "
               r"bit for bit for every $P \subseteq E \setminus \{e\}$. Then on every prompt "
               r"pair: (i) the minimal circuits are exactly the case's declared "
               r"$\texttt{minimal\_circuits}$: one on five cases, and on backup-heads two, "
               r"either previous-token head's value input and its edge into the induction "
               r"head's key, with the induction head's output; (ii) the case's circuit "
               r"(what methods are scored against) is their union; (iii) the don't-care edges "
               r"are exactly the declared $\texttt{dont\_care}$: every edge outside that union "
               r"on five cases, and on superposed-features-flag every such edge but "
               r"input $\to a_1.h_0\langle q\rangle$ and $a_0.h_0 \to a_1.h_0\langle "
               r"k\rangle$, each of which moves the metric when patched alone; (iv) at the "
               r"head level, where node-patching a set $R$ of heads patches every edge out of "
               r"each, the inclusion-minimal sets $R$ of heads such that node-patching every "
               r"other head leaves the metric bit for bit are exactly the sets of heads the "
               r"declared minimal circuits touch: on backup-heads two, $\{a_0.h_0, a_1.h_0\}$ "
               r"and $\{a_0.h_1, a_1.h_0\}$, so neither previous-token head is necessary "
               r"alone at the head level either."),
    source=Source(where="minimal circuits of the exact circuit cases (this project)", tag="D",
                  **SHT),
    kind="identity",
    construction=f"{CONSTRUCTIONS}.stress_cases:backup_circuit",
    depends_on=("circuits.induction-sufficient", "circuits.earlier-occurrence-sufficient",
                "circuits.backup-heads", "circuits.distractor", "circuits.superposed-features"),
    notes=(r"Why enumerating the *live* edges $L$ (stress's $\texttt{live\_edges}$: the rows "
           r"of the edge's read map meet the coordinates where its source's output can differ "
           r"between the runs) covers $E$: for an edge outside $L$ the patch adds "
           r"$\delta W$ with every product $\delta_c W_{cx}$ an exact zero, so $m(P \cup "
           r"\{e\}) = m(P)$ for every $P$ (the lemma; the check asserts it once, $m(E "
           r"\setminus L) = m(\emptyset)$), and no minimal circuit holds a don't-care edge "
           r"(dropping it keeps the set sufficient). The other cases are left out: the "
           r"compact, gauged and multi-head variants are sufficient only within a rounding "
           r"bound, so bit-for-bit enumeration does not apply; the native cases have their "
           r"own minimality claims."),
)


def enumerate_row(table: dict[frozenset, torch.Tensor], live: list[str], row: int
                  ) -> tuple[set[frozenset], set[str]]:
    """(the minimal circuits within ``live``, the don't-care edges of ``live``) on one prompt."""
    everything = frozenset(live)
    base = table[frozenset()][row]
    minimal = inclusion_minimal(k for k in table if bool(table[everything - k][row] == base))
    dont_care = {e for e in live
                 if all(bool(table[p | {e}][row] == table[p][row]) for p in table if e not in p)}
    return minimal, dont_care


def minimal_head_sets(case, model, clean, corrupted, corrupt_out: dict
                      ) -> list[set[frozenset]]:
    """Per prompt, the inclusion-minimal sets R of heads such that node-patching every other
    head (every edge out of it) leaves the metric bit for bit; all 2^heads sets are run
    (``corrupt_out``: the corrupted run's source outputs)."""
    graph = attention_graph(len(model.layers), model.layers[0].n_heads)
    heads = sorted({e.source for e in graph} - {"input"})
    metric = {}
    for size in range(len(heads) + 1):
        for kept in itertools.combinations(heads, size):
            patched = [e for e in graph if e.source in heads and e.source not in kept]
            metric[frozenset(kept)] = case.metric(replaced_run(model, clean, corrupt_out,
                                                               patched), clean, corrupted)
    base = metric[frozenset(heads)]      # nothing patched
    return [inclusion_minimal(k for k in metric if bool(metric[k][row] == base[row]))
            for row in range(clean.shape[0])]


def _listed(sets) -> list[list[str]]:
    """Sets of names as sorted lists, in sorted order (messages independent of hashing)."""
    return sorted(sorted(k) for k in sets)


def _size(name: str, S: int, n: int) -> dict:
    return {"vocab_size": S, "max_len": n}


def heads_touched(circuit_edges, graph) -> frozenset[str]:
    """The heads the edges (names) enter or leave, ``graph`` the edges of the model's graph."""
    by_name = {e.name: e for e in graph}
    return frozenset({by_name[e].source for e in circuit_edges}
                     | {by_name[e].target for e in circuit_edges}) - {"input", "logits"}


def minimal_circuits_check(cases=None, names=ENUMERATED, live_of=live_edges,
                           promote=heads_touched):
    """``cases``: name -> CircuitCase (a mutant replaces one), default the registered ones;
    ``live_of(model)``: the live edges (a mutant leaves one out); ``promote(edges, graph)``:
    the heads a minimal circuit's edges touch (a mutant promotes wrongly)."""

    @given(S=st.integers(4, 7), n=st.integers(3, 10), seed=st.integers(0, 2**32 - 1),
           pick=st.integers(0, len(names) - 1))
    @example(S=4, n=8, seed=0, pick=-1)
    @budget(0.03, minimum=2)  # one case's 2^|L| <= 512 tiny patched runs an example
    def test_minimal_circuits(S, n, seed, pick):
        registered = cases or all_cases()
        for name in (names if pick < 0 else names[pick:pick + 1]):
            case = registered[name]
            model, circuit = case.instance(_size(name, S, n))
            clean, corrupted = case.prompts(torch.Generator().manual_seed(seed), 4,
                                            _size(name, S, n))
            edges = attention_graph(len(model.layers), model.layers[0].n_heads)
            graph = [e.name for e in edges]
            live = sorted(live_of(model))
            corrupt_out = source_outputs(model, corrupted)     # once, for every run below
            # every subset of L patched (with every edge outside L, which the lemma says
            # changes nothing), keyed by the patched set
            table = metric_table(functools.partial(case.metric, clean=clean,
                                                   corrupted=corrupted),
                                 model, clean, corrupt_out, live)
            unpatched = case.metric(replaced_run(model, clean, corrupt_out, []), clean,
                                    corrupted)
            # the lemma, once: patching every edge outside L changes nothing
            assert torch.equal(table[frozenset()], unpatched), (
                f"{name}: patching the edges outside the live set moved the metric")
            declared = {frozenset(k) for k in case.minimal_circuits}
            union = frozenset().union(*declared)
            assert union == circuit.edge_names, (
                f"{name}: the case's circuit {sorted(circuit.edge_names)} is not the union of "
                f"its minimal circuits {sorted(union)}")
            inert = {e for e in graph if e not in live}
            for row in range(clean.shape[0]):
                minimal, dont_care = enumerate_row(table, live, row)
                assert minimal == declared, (
                    f"{name} S={S} n={n} prompt {row}: the minimal circuits are "
                    f"{_listed(minimal)}, not {_listed(declared)}")
                assert dont_care | inert == set(case.dont_care), (
                    f"{name} S={S} n={n} prompt {row}: the don't-care edges are "
                    f"{sorted(dont_care | inert)}, not {sorted(case.dont_care)}")
            promoted = {promote(k, edges) for k in declared}
            for row, found in enumerate(minimal_head_sets(case, model, clean, corrupted,
                                                               corrupt_out)):
                assert found == promoted, (
                    f"{name} S={S} n={n} prompt {row}: the minimal head sets are "
                    f"{_listed(found)}, not {_listed(promoted)}")
            evidence.cases(clean.shape[0])
    return test_minimal_circuits


test_minimal_circuits = check(MINIMAL, "property")(minimal_circuits_check())
