r"""Stress cases of circuit discovery, certified: backup heads, a distractor sub-circuit and
superposed features in one head.

:mod:`constructions.circuits.stress` builds a saturated induction model whose every score gap
is :math:`\ge 2048`, so every attention weight is exactly 0 or 1 and every logit an exact small
dyadic number: each claim here is bit for bit. With a backup previous-token head
(:func:`~constructions.circuits.stress.backup_induction`) the circuit under
earlier-occurrence resampling is not unique: exactly two minimal circuits, found by enumerating
every subset of the edges that can carry a difference. With a distractor
(:func:`~constructions.circuits.stress.distractor_induction`) a sub-circuit moves every logit
while leaving the metric bit for bit unchanged. With superposed features
(:func:`~constructions.circuits.stress.superposed_induction`) the induction head writes the
copied token and a flag of the matched token into overlapping directions; the two features'
circuits have the same nodes and differ only in which input of that head they use, so only
the edge level tells them apart. Sources: see the area's introduction; backup heads as a
phenomenon are Wang et al.'s (2022, arXiv 2211.00593, the backup name movers), superposition
Elhage et al.'s (2022, arXiv 2209.10652), these constructions and claims are ours [D].
"""

from __future__ import annotations

import itertools

import torch
from hypothesis import example, given

from constructions.circuits import (
    attention_graph,
    edge_patched_logits,
    resample_earlier_occurrence,
    target_margin,
)
from constructions.circuits.patching import graph_edges, replaced_run, source_outputs
from constructions.circuits.stress import (
    BACKUP_PATHS,
    DISTRACTOR_EDGES,
    OUTPUT_EDGE,
    SUPERPOSED_CIRCUITS,
    backup_induction,
    distractor_induction,
    mark_final_token,
    superposed_induction,
)
from theorems.areas.circuits._shared import CONSTRUCTIONS, PATCHING, cached
from theorems.areas.circuits.earlier_occurrence import occurrence_cases
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget

STRESS = f"{CONSTRUCTIONS}.stress"
OURS = {"arxiv": "2211.00593", "ref": "Wang et al. (2022), backup heads; constructions ours",
        "verified": False,
        "doubt": "the section of the backup name movers is recalled, not re-read here"}

GRAPH_2x2 = (r"The graph of a 2-layer, 2-head attention-only model has nodes input, $a_{l,h}$ "
             r"(layer $l$, head $h$) and logits, and 29 edges: from input to the query, key "
             r"and value of every head, from each layer-0 head to those of each layer-1 head, "
             r"and from input and every head to logits. " + PATCHING)
INERT = (r"An edge is *inert* when the rows its read map reads ($W^v_x$, or $W_U$) are zero "
         r"wherever its source's output can differ between the runs (the token block for "
         r"input, the columns of $W^u_O$ for a head): patching it adds exact zeros in every "
         r"context. ")
SETTING = (GRAPH_2x2 +
           r"Let $\sigma$ be a prompt of length $m \le n$ ($S \ge 3$) whose final token "
           r"$a = \sigma_i$ ($i = m$) occurs exactly once before, at $j^\star$ with "
           r"$j^\star + 1 < i$, $\tau = \sigma_{j^\star+1}$, and $\sigma'$ the prompt with "
           r"$\sigma_{j^\star}$ replaced by $a' \notin \{a, \tau\}$ (target $\bot$, class "
           r"$S$); the metric is $m(P) = \ell^P_{i,\tau} - \ell^P_{i,\bot}$. " + INERT)

BACKUP = Claim(
    id="circuits.backup-heads",
    title="With a backup previous-token head, either head's path is a minimal circuit and "
          "neither is necessary alone",
    statement=(r"Let $f = \texttt{backup\_induction}(S, n)$: $a_{0,0}$ and $a_{0,1}$ are "
               r"identical saturated previous-token heads, $a_{1,0}$ the induction head, "
               r"$a_{1,1}$ inert. " + SETTING +
               r"Let $P$ = {input $\to a_{0,0}\langle v\rangle$, $a_{0,0} \to a_{1,0}\langle "
               r"k\rangle$}, $B$ = {input $\to a_{0,1}\langle v\rangle$, $a_{0,1} \to "
               r"a_{1,0}\langle k\rangle$} and $o = a_{1,0} \to$ logits. "
               r"(Each alone sufficient) Patching the complement of $P \cup \{o\}$, or of "
               r"$B \cup \{o\}$, leaves the final-position logits bit for bit unchanged in "
               r"float64. "
               r"(Neither necessary alone) Patching any non-empty subset of $P$, or of $B$, "
               r"leaves them bit for bit unchanged. "
               r"(The pair necessary) Patching $P \cup B$, or $o$, moves the metric from "
               r"exactly 1 to exactly $-1$. "
               r"(Every minimal circuit) Every edge but the 7 of $L = P \cup B \cup \{o$, input "
               r"$\to a_{1,0}\langle q\rangle$, input $\to a_{1,0}\langle v\rangle\}$ is inert, "
               r"and among the $2^7$ subsets $K \subseteq L$, those whose complement can be "
               r"patched leaving the final logits bit for bit unchanged and that are minimal for "
               r"inclusion are exactly $P \cup \{o\}$ and $B \cup \{o\}$."),
    source=Source(where="backup name mover heads (Section 3 of the cited paper); this "
                  "saturated construction and its circuits are this project's", tag="D",
                  **OURS),
    kind="construction",
    construction=f"{STRESS}:backup_induction",
)

DISTRACTOR = Claim(
    id="circuits.distractor",
    title="A distractor sub-circuit moves every logit but leaves the metric bit for bit "
          "unchanged",
    statement=(r"Let $f = \texttt{distractor\_induction}(S, n)$: $a_{0,0}$ a saturated "
               r"previous-token head, $a_{1,0}$ the induction head, $a_{0,1}$ a current-token "
               r"head and $a_{1,1}$ a duplicate-token head that copies the earliest position "
               r"$p$ holding the current token, which the unembedding adds as $p/8$ to every "
               r"class. " + SETTING +
               r"Let $X$ = {input $\to a_{0,1}\langle v\rangle$, $a_{0,1} \to a_{1,1}\langle "
               r"q\rangle$, $a_{0,1} \to a_{1,1}\langle k\rangle$, $a_{1,1} \to$ logits} (the "
               r"distractor's edges that are not inert) and $C$ = {input $\to a_{0,0}\langle "
               r"v\rangle$, $a_{0,0} \to a_{1,0}\langle k\rangle$, $a_{1,0} \to$ logits}. "
               r"(Active) $a_{1,1}$'s output at position $i$ is non-zero in both runs and "
               r"differs between them, and patching $a_{1,1} \to$ logits alone adds exactly "
               r"$(i - j^\star)/8$ to every final logit. "
               r"(Unused) Patching any subset of $X$ leaves $m$ bit for bit unchanged in "
               r"float64. "
               r"(The circuit) Every edge outside $C \cup X \cup \{$input $\to a_{1,0}\langle "
               r"q\rangle$, input $\to a_{1,0}\langle v\rangle\}$ is inert; patching the "
               r"complement of $C$ leaves $m$ bit for bit unchanged, and patching any $e \in C$, "
               r"alone or with the complement, moves $m$ from exactly 1 to exactly $-1$."),
    source=Source(where="this project's saturated construction (the cited paper's backup and "
                  "distractor phenomena motivate it)", tag="D", **OURS),
    kind="construction",
    construction=f"{STRESS}:distractor_induction",
)

SUPERPOSITION = {"arxiv": "2209.10652", "verified": False,
                 "ref": "Elhage et al. (2022), Toy Models of Superposition; construction ours",
                 "doubt": "the abstract was read on Anthropic's page of the paper, not on "
                          "arXiv; the arXiv id is recalled"}
D_A = ("input->a0.h0<v>", "input->a1.h0<q>", "input->a1.h0<v>", "a0.h0->a1.h0<k>",
       "a1.h0->logits")                                   # the edges c_A moves, in the claim
D_B = (*D_A, "a0.h0->a1.h0<v>")

SUPERPOSED = Claim(
    id="circuits.superposed-features",
    title="One head carries two superposed features: their circuits have the same nodes and "
          "differ in one input edge of the head",
    statement=(r"Let $f = \texttt{superposed\_induction}(S, n)$ with $S \ge 4$: $a_{0,0}$ a "
               r"saturated previous-token head writing the record $\mathrm{prev}_t = "
               r"e_{\sigma_{t-1}}$ ($e_\bot$ at BOS), $a_{1,0}$ the induction head, whose value "
               r"at the key $j$ it attends to holds the token $\sigma_j$ (BOS $\mapsto \bot$) "
               r"and the flag $b_j = w \cdot \mathrm{prev}_j$, $w = (1, \dots, 1, -1, 0) \in "
               r"\mathbb R^{S+1}$ ($-1$ on the marker $\mu = S - 1$, $0$ on $\bot$), and "
               r"$a_{0,1}$, $a_{1,1}$ with zero weights. " + GRAPH_2x2 + INERT +
               r"Let $\sigma$ be a prompt of length $m \le n$ over the tokens below $\mu$ whose "
               r"final token $a = \sigma_i$ ($i = m$) occurs exactly once before, at $j^\star$ "
               r"with $j^\star + 1 < i$, and $\tau = \sigma_{j^\star+1}$; the corruption $c_A$ "
               r"replaces $\sigma_{j^\star}$ by $a' \notin \{a, \tau, \mu\}$ "
               r"($\texttt{resample\_earlier\_occurrence}$), $c_B$ replaces $a$ by $\mu$ at "
               r"$j^\star$ and at $i$ ($\texttt{mark\_final\_token}$). The metrics are "
               r"$m_A(P) = \ell^P_{i,\tau} - \ell^P_{i,\bot}$ and $m_B(P) = \sum_{c=0}^{S} "
               r"\ell^P_{i,c}$ ($\bot$ is class $S$). "
               r"(Superposition) $a_{1,0}$'s $W_O$ writes the token $c$ as $e_c$ and the flag "
               r"as $\mathbf 1$, both in the block of $S+1$ coordinates that $W_U$ reads as the "
               r"identity and that nothing else writes, so $\langle \mathbf 1, e_c \rangle = "
               r"1 \ne 0$ for every $c$: $S+2$ feature directions in $S+1$ dimensions. "
               r"(Exact readouts) The final logits are exactly $e_\tau + \mathbf 1$ on "
               r"$\sigma$, $e_\bot$ under $c_A$ and $e_\tau - \mathbf 1$ under $c_B$, so "
               r"$(m_A, m_B)$ is $(1, S+2)$, $(-1, 1)$ and $(1, -S)$ in float64: $m_A$ is "
               r"blind to the flag, since every logit difference annihilates $\mathbf 1$, and "
               r"$m_B = 1 + (S+1)b_j$, since the token feature is one-hot. "
               r"(Differences) An edge $u \to v\langle x\rangle$ carries a difference under a "
               r"corruption when $(\mathrm{out}'_u - \mathrm{out}_u)W^v_x \ne 0$ at some "
               r"position ($W_U$ for logits; $\mathrm{out}$, $\mathrm{out}'$ the clean and "
               r"corrupted runs' outputs of $u$); under $c_A$ exactly the 5 edges of $D_A$ = "
               r"{input $\to a_{0,0}\langle v\rangle$, input $\to a_{1,0}\langle q\rangle$, "
               r"input $\to a_{1,0}\langle v\rangle$, $a_{0,0} \to a_{1,0}\langle k\rangle$, "
               r"$a_{1,0} \to$ logits} carry one, under $c_B$ exactly the 6 of $D_B = D_A "
               r"\cup \{a_{0,0} \to a_{1,0}\langle v\rangle\}$. "
               r"(Minimal circuits) Every edge outside $D_B$ is inert, and among the $2^6$ "
               r"subsets $K \subseteq D_B$, those whose complement can be patched leaving the "
               r"metric bit for bit unchanged and that are minimal for inclusion are exactly "
               r"$C_A$ = {input $\to a_{0,0}\langle v\rangle$, $a_{0,0} \to a_{1,0}\langle "
               r"k\rangle$, $a_{1,0} \to$ logits} for $(c_A, m_A)$ and for $(c_A, m_B)$, "
               r"$C_B$ = {input $\to a_{0,0}\langle v\rangle$, $a_{0,0} \to a_{1,0}\langle "
               r"v\rangle$, $a_{1,0} \to$ logits} for $(c_B, m_B)$, and $\emptyset$ for "
               r"$(c_B, m_A)$: $C_A$ and $C_B$ have the same nodes and differ only in which "
               r"input of $a_{1,0}$, key or value, takes $a_{0,0}$'s record."),
    source=Source(where="abstract: superposition, more features than dimensions, tolerable "
                  "when the features are sparse; this saturated construction, its two "
                  "features and its circuits are this project's", tag="D", **SUPERPOSITION),
    kind="construction",
    construction=f"{STRESS}:superposed_induction",
)


# --- inert edges ----------------------------------------------------------------------------

def live_edges(model) -> set[str]:
    """The edges that are not inert under earlier-occurrence resampling (see the claims): the
    rows their read map reads meet the columns where their source's output can differ."""
    S = model.vocab_size
    token_rows = (model.W_E[:S] != model.W_E[:1]).any(0)          # where the input can differ
    writes = {"input": token_rows}
    for index, layer in enumerate(model.layers):
        for h in range(layer.n_heads):
            writes[f"a{index}.h{h}"] = (layer.W_O[h] != 0).any(0)
    live = set()
    for edge in attention_graph(len(model.layers), model.layers[0].n_heads):
        if bool((writes[edge.source] & (read_map(model, edge) != 0).any(1)).any()):
            live.add(edge.name)
    return live


def read_map(model, edge) -> torch.Tensor:
    """The map ``(d, width)`` through which ``edge``'s target reads its source: the head's
    :math:`W_Q`, :math:`W_K` or :math:`W_V`, or :math:`W_U` for logits."""
    if edge.target == "logits":
        return model.W_U
    layer = model.layers[int(edge.target[1])]
    return {"q": layer.W_Q, "k": layer.W_K, "v": layer.W_V}[edge.input][
        int(edge.target.split(".h")[1])]


def _prompts(case):
    S, _, sequence, replacement = case
    clean = torch.tensor([sequence])
    return clean, resample_earlier_occurrence(clean, replacement, S)


# The longest prompt at the smallest vocabulary, and the shortest.
LONG = (3, 16, [0] + [1, 2] * 7 + [0], 2)
SHORT = (3, 3, [0, 1, 0], 2)


# --- backup heads ---------------------------------------------------------------------------

def _final(logits: torch.Tensor) -> torch.Tensor:
    return logits[:, -1]


def backup_check(build=backup_induction, paths=BACKUP_PATHS, output=OUTPUT_EDGE):
    build = cached(build)

    @given(case=occurrence_cases())
    @example(case=LONG)
    @example(case=SHORT)
    @budget(0.05, minimum=3)  # about 12 exact forward passes per example
    def test_backup_heads(case):
        clean, corrupted = _prompts(case)
        model = build(case[0], case[1])
        graph = [e.name for e in attention_graph(2, 2)]
        clean_logits = _final(edge_patched_logits(model, clean, corrupted, ()))

        def unchanged(patched) -> bool:
            logits = _final(edge_patched_logits(model, clean, corrupted, patched))
            return torch.equal(logits, clean_logits)
        for name, path in paths.items():
            kept = {*path, output}
            assert unchanged([e for e in graph if e not in kept]), (
                f"patching the complement of the {name} path moved the final logits")
        for name, path in paths.items():
            for size in range(1, len(path) + 1):
                for subset in itertools.combinations(path, size):
                    assert unchanged(subset), f"patching {subset} of the {name} path alone " \
                                              f"moved the final logits"
        both = [e for path in paths.values() for e in path]
        for patched in (both, [output]):
            before = float(target_margin(edge_patched_logits(model, clean, corrupted, ()),
                                         clean)[0])
            after = float(target_margin(edge_patched_logits(model, clean, corrupted, patched),
                                        clean)[0])
            assert (before, after) == (1.0, -1.0), (
                f"patching {patched} moved the metric from {before} to {after}, not 1 to -1")
        evidence.cases(1)
    return test_backup_heads


test_backup_heads = check(BACKUP, "property")(backup_check())


def minimal_circuits(model, clean, corrupted, live: list[str]) -> list[frozenset]:
    """The inclusion-minimal subsets K of ``live`` whose complement (the rest of ``live`` and
    every inert edge) can be patched leaving the final logits bit for bit unchanged. (The
    corrupted run's outputs are computed once: edge_patched_logits's own two steps.)"""
    graph = [e.name for e in attention_graph(len(model.layers), model.layers[0].n_heads)]
    inert = [e for e in graph if e not in live]
    corrupt_out = source_outputs(model, corrupted)

    def final(patched):
        return _final(replaced_run(model, clean, corrupt_out, graph_edges(model, patched)))
    reference = final(())
    sufficient = []
    for size in range(len(live) + 1):
        for kept in itertools.combinations(live, size):
            if any(s <= set(kept) for s in sufficient):
                continue   # a superset of a sufficient set is not minimal
            if torch.equal(final([e for e in live if e not in kept] + inert), reference):
                sufficient.append(frozenset(kept))
    return sufficient


BACKUP_LIVE = {"input->a0.h0<v>", "a0.h0->a1.h0<k>", "input->a0.h1<v>", "a0.h1->a1.h0<k>",
               "a1.h0->logits", "input->a1.h0<q>", "input->a1.h0<v>"}   # L of the claim


def enumeration_check(build=backup_induction, paths=BACKUP_PATHS, output=OUTPUT_EDGE,
                      live=live_edges):
    build = cached(build)

    @given(case=occurrence_cases(max_len=12))
    @example(case=LONG)
    @budget(0.01, minimum=1)  # up to 2^7 exact forward passes per example
    def test_backup_minimal_circuits(case):
        clean, corrupted = _prompts(case)
        model = build(case[0], case[1])
        found = live(model)
        assert found == BACKUP_LIVE, (f"the edges that are not inert are {sorted(found)}, not "
                                      f"{sorted(BACKUP_LIVE)}")
        minimal = set(minimal_circuits(model, clean, corrupted, sorted(found)))
        circuits = {frozenset({*path, output}) for path in paths.values()}
        assert minimal == circuits, (f"the minimal circuits are "
                                     f"{[sorted(k) for k in minimal]}")
        evidence.cases(1)
    return test_backup_minimal_circuits


test_backup_minimal_circuits = check(BACKUP, "exhaustive")(enumeration_check())


# --- the distractor -------------------------------------------------------------------------

CIRCUIT = ("input->a0.h0<v>", "a0.h0->a1.h0<k>", "a1.h0->logits")


def distractor_check(build=distractor_induction, distractor=DISTRACTOR_EDGES, circuit=CIRCUIT,
                     live=live_edges, scale=8.0):
    """``scale``: the denominator of the distractor's logit shift (a mutant may change it)."""
    build = cached(build)

    @given(case=occurrence_cases())
    @example(case=LONG)
    @example(case=SHORT)
    @budget(0.05, minimum=3)  # about 24 exact forward passes per example
    def test_distractor(case):
        clean, corrupted = _prompts(case)
        S, n, sequence, _ = case
        model = build(S, n)
        j, i = sequence.index(sequence[-1]) + 1, len(sequence)   # model positions

        runs: dict[tuple, torch.Tensor] = {}

        def run(patched):
            if tuple(patched) not in runs:
                runs[tuple(patched)] = edge_patched_logits(model, clean, corrupted, patched)
            return runs[tuple(patched)]

        def metric(patched) -> float:
            return float(target_margin(run(patched), clean)[0])
        for size in range(len(distractor) + 1):
            for subset in itertools.combinations(distractor, size):
                assert metric(subset) == metric(()), (
                    f"patching the distractor edges {subset} moved the metric from "
                    f"{metric(())} to {metric(subset)}")
        clean_out = source_outputs(model, clean)["a1.h1"][0, -1]
        corrupt_out = source_outputs(model, corrupted)["a1.h1"][0, -1]
        shift = _final(run([distractor[-1]])) - _final(run(()))
        assert bool(clean_out.any()) and bool(corrupt_out.any()) and not torch.equal(
            clean_out, corrupt_out) and bool((shift == (i - j) / scale).all()), (
            f"the distractor is not active as stated: the shift of the logits is "
            f"{shift.tolist()}, not {(i - j) / scale}")
        outside = live(model) - set(circuit) - set(distractor)
        assert outside == {"input->a1.h0<q>", "input->a1.h0<v>"}, (
            f"the edges outside C and X that are not inert are {sorted(outside)}")
        complement = [e.name for e in attention_graph(2, 2) if e.name not in circuit]
        assert metric(complement) == metric(()) == 1.0, (
            f"patching the complement of C moved the metric to {metric(complement)}")
        for edge in circuit:
            for patched in ([edge], [edge, *complement]):
                assert metric(patched) == -1.0, (
                    f"patching {edge}{' and the complement' if len(patched) > 1 else ''} "
                    f"gave the metric {metric(patched)}, not -1")
        evidence.cases(1)
    return test_distractor


test_distractor = check(DISTRACTOR, "property")(distractor_check())



# --- superposed features --------------------------------------------------------------------

def marked_cases(max_len: int = 16):
    """(vocab_size, max_len, clean prompt, replacement): an earlier-occurrence case over the
    tokens below the marker mu = vocab_size - 1 (so S runs from 4 to 9)."""
    return occurrence_cases(max_len=max_len).map(lambda case: (case[0] + 1, *case[1:]))


MARKED_LONG = (4, 16, [0] + [1, 2] * 7 + [0], 2)   # LONG with the marker 3 added
MARKED_SHORT = (4, 3, [0, 1, 0], 2)


def _corruptions(case, mark) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    S, _, sequence, replacement = case
    clean = torch.tensor([sequence])
    return clean, {"c_A": resample_earlier_occurrence(clean, replacement, S),
                   "c_B": mark(clean, S)}


def _metrics(logits: torch.Tensor, clean: torch.Tensor) -> tuple[float, float]:
    """(m_A, m_B) of the claim: the target margin and the sum of the final logits."""
    return float(target_margin(logits, clean)[0]), float(logits[0, -1].sum())


def carrying_edges(model, clean, corrupted) -> set[str]:
    """The edges that carry a difference (the claim's definition): the corrupted minus the
    clean output of the source, read through the target's map, is non-zero somewhere."""
    before, after = source_outputs(model, clean), source_outputs(model, corrupted)
    return {e.name for e in attention_graph(len(model.layers), model.layers[0].n_heads)
            if bool(((after[e.source] - before[e.source]) @ read_map(model, e) != 0).any())}


def superposed_check(build=superposed_induction, mark=mark_final_token, carried=(D_A, D_B)):
    build = cached(build)

    @given(case=marked_cases())
    @example(case=MARKED_LONG)
    @example(case=MARKED_SHORT)
    @budget(0.05, minimum=3)  # 3 forward passes and 4 recorded runs per example
    def test_superposed_features(case):
        S, n, sequence, _ = case
        model = build(S, n)
        clean, corrupted = _corruptions(case, mark)
        f64 = {"dtype": torch.float64}
        eye, ones = torch.eye(S + 1, **f64), torch.ones(S + 1, **f64)
        out = (model.W_U != 0).any(1)                        # the coordinates W_U reads
        W_O = model.layers[1].W_O[0]
        others = [model.W_E, model.W_pos] + [
            layer.W_O[h] for index, layer in enumerate(model.layers)
            for h in range(layer.n_heads) if (index, h) != (1, 0)]
        stated = (int(out.sum()) == S + 1 and torch.equal(model.W_U[out], eye)
                  and torch.equal(W_O[: S + 1, out], eye) and torch.equal(W_O[S + 1, out], ones)
                  and not bool(W_O[: S + 2, ~out].any()) and not bool(W_O[S + 2:].any())
                  and not any(bool(w[:, out].any()) for w in others))
        inner = W_O[: S + 1] @ W_O[S + 1]                    # <flag direction, e_c>
        assert stated and torch.equal(inner, ones), (
            f"the token and flag directions are not as stated: <flag, e_c> = {inner.tolist()}")

        tau = sequence[sequence.index(sequence[-1]) + 1]
        token = eye[tau]
        expected = {"clean": (token + ones, (1.0, S + 2.0)), "c_A": (eye[S], (-1.0, 1.0)),
                    "c_B": (token - ones, (1.0, -float(S)))}
        for name, prompt in {"clean": clean, **corrupted}.items():
            logits = model(prompt)
            final, metrics = expected[name]
            assert torch.equal(logits[0, -1], final) and _metrics(logits, clean) == metrics, (
                f"the readouts are not exact: the final logits under {name} are "
                f"{logits[0, -1].tolist()}, (m_A, m_B) = {_metrics(logits, clean)}")

        for name, edges in zip(("c_A", "c_B"), carried, strict=True):
            found = carrying_edges(model, clean, corrupted[name])
            assert found == set(edges), (f"the edges that carry a difference under {name} are "
                                         f"{sorted(found)}, not {sorted(edges)}")
        evidence.cases(1)
    return test_superposed_features


test_superposed_features = check(SUPERPOSED, "property")(superposed_check())


def metric_table(metric, model, clean, corrupt_out: dict, live: list[str]
                 ) -> dict[frozenset, object]:
    """``metric(logits)`` for every subset :math:`P` of ``live`` patched, keyed by :math:`P`,
    with every edge outside ``live`` (every inert edge) patched as well; ``corrupt_out`` is the
    corrupted run's source outputs (:func:`~constructions.circuits.patching.source_outputs`),
    computed once by the caller."""
    graph = [e.name for e in attention_graph(len(model.layers), model.layers[0].n_heads)]
    inert = [e for e in graph if e not in live]
    table = {}
    for size in range(len(live) + 1):
        for patched in itertools.combinations(live, size):
            table[frozenset(patched)] = metric(
                replaced_run(model, clean, corrupt_out, graph_edges(model, [*patched, *inert])))
    return table


def inclusion_minimal(sets) -> set[frozenset]:
    """The sets of ``sets`` (frozensets) with no proper subset among them."""
    sets = list(sets)
    return {k for k in sets if not any(other < k for other in sets)}


def patched_metrics(model, clean, corrupted, live: list[str]) -> dict[frozenset, tuple]:
    """(m_A, m_B) for every subset K of ``live`` kept, its complement (the rest of ``live``
    and every inert edge) patched."""
    table = metric_table(lambda logits: _metrics(logits, clean), model, clean,
                         source_outputs(model, corrupted), live)
    return {frozenset(live) - patched: value for patched, value in table.items()}


def _nodes(circuit) -> set[str]:
    return {node for edge in circuit for node in (edge.split("->")[0],
                                                  edge.split("->")[1].split("<")[0])}


def superposed_enumeration_check(build=superposed_induction, mark=mark_final_token,
                                 circuits=SUPERPOSED_CIRCUITS, live=live_edges):
    build = cached(build)
    match, flag = frozenset(circuits["match"]), frozenset(circuits["flag"])
    expected = {("c_A", 0): {match}, ("c_A", 1): {match}, ("c_B", 1): {flag},
                ("c_B", 0): {frozenset()}}                   # (corruption, metric index)

    @given(case=marked_cases(max_len=12))
    @example(case=MARKED_LONG)
    @budget(0.01, minimum=1)  # 2 x 2^6 exact forward passes per example
    def test_superposed_minimal_circuits(case):
        S, n, _, _ = case
        model = build(S, n)
        clean, corrupted = _corruptions(case, mark)
        found = live(model)
        assert found == set(D_B), (f"the edges that are not inert are {sorted(found)}, not "
                                   f"{sorted(D_B)}")
        reference = _metrics(model(clean), clean)
        for name, prompt in corrupted.items():
            table = patched_metrics(model, clean, prompt, sorted(found))
            for index, metric in enumerate(("m_A", "m_B")):
                sufficient = [k for k, v in table.items() if v[index] == reference[index]]
                minimal = {k for k in sufficient if not any(j < k for j in sufficient)}
                assert minimal == expected[(name, index)], (
                    f"the minimal circuits of ({name}, {metric}) are "
                    f"{[sorted(k) for k in minimal]}")
        assert _nodes(match) == _nodes(flag) and match - flag == {"a0.h0->a1.h0<k>"} \
            and flag - match == {"a0.h0->a1.h0<v>"}, (
            f"the circuits do not differ in a1.h0's key and value input alone: "
            f"{sorted(match ^ flag)}")
        evidence.cases(1)
    return test_superposed_minimal_circuits


test_superposed_minimal_circuits = check(SUPERPOSED, "exhaustive")(
    superposed_enumeration_check())
