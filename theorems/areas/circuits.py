r"""Ground-truth circuits: attention constructions as exact benchmarks for circuit discovery.

Circuit-discovery methods (activation and attribution patching, ACDC, EAP) are judged on
models whose circuit is known. Here the circuit follows from a construction's weights and is
checked: the edges of :func:`constructions.circuits.induction_mechanism` are exactly the
non-zero ones, and relative to the corruption :func:`~constructions.circuits.resample_next_token`
the two-edge circuit of :func:`~constructions.circuits.induction_circuit` is sufficient
(patching every other edge leaves the final logits bit for bit unchanged), necessary (patching
either edge moves the logit difference by at least a bound derived from the construction's
margins) and minimal. Patching runs on the constructions' own hook points in float64
(:func:`~constructions.circuits.edge_patched_logits`), without TransformerLens.

Sources: the constructions and their exactness are the induction-heads area's
(Sanford, Hsu, Telgarsky 2024, arXiv:2408.14332; Bietti et al. 2023); the circuit statements,
the corruption and the bounds are ours [D]. The edge naming is that of the MIB circuit track
(Mueller et al. 2025; arXiv id 2504.13151 recalled [R]), read in a third-party converter to
its leaderboard format [S].
"""

from __future__ import annotations

import functools
import math

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.circuits import (
    attention_graph,
    edge_patched_logits,
    induction_circuit,
    induction_mechanism,
    logit_difference,
    resample_next_token,
)
from constructions.induction_heads import (
    compact_induction,
    two_layer_conditions,
    two_layer_induction,
    two_layer_parameters,
)
from constructions.numerics import gamma, unit_roundoff
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget

SHT = {"arxiv": "2408.14332", "ref": "Sanford, Hsu, Telgarsky (2024)"}
CONSTRUCTIONS = "constructions.circuits"

GRAPH = (r"The graph of a 2-layer, 1-head attention-only model has nodes input (embedding), "
         r"$a_0$ (L0H0), $a_1$ (L1H0) and logits, and the 12 edges $u \to v\langle x\rangle$ "
         r"from input to the query, key and value ($x \in \{q,k,v\}$) of $a_0$ and $a_1$, from "
         r"$a_0$ to those of $a_1$, and from each of input, $a_0$, $a_1$ to logits. ")

PATCHING = (r"Patching a set $P$ of edges means running the clean prompt with each "
            r"$u \to v\langle x\rangle \in P$ carrying the corrupted run's output of $u$ in "
            r"$v$'s $x$-input (or in the final residual stream for $v$ = logits), every node "
            r"recomputed from its inputs; $\ell^P_i$ are the final-position logits. ")

CORRUPTION = (r"Let $f = \texttt{two\_layer\_induction}(S, n)$ with $S \ge 3$, $\sigma$ a prompt "
              r"of length $m \le n$ whose final token $\sigma_i$ ($i = m$) has a latest earlier "
              r"occurrence $j^\star$ with $j^\star + 1 < i$, $\tau = \sigma_{j^\star+1}$, and "
              r"$\sigma'$ the prompt with $\sigma_{j^\star+1}$ replaced by "
              r"$\tau' \notin \{\tau, \sigma_i\}$ (so the corrupted target is $\tau'$). "
              r"The circuit is $C = \{\text{input} \to a_1\langle v\rangle,\ a_1 \to "
              r"\text{logits}\}$; the metric is $m(P) = \ell^P_{i,\tau} - \ell^P_{i,\tau'}$. ")

IC_MECHANISM = Claim(
    id="circuits.induction-mechanism",
    title="The induction constructions' mechanism edges are exactly their non-zero edges",
    statement=(GRAPH + r"For $f = \texttt{two\_layer\_induction}(S, n)$ and "
               r"$\texttt{compact\_induction}(S, n)$, an edge carries a non-zero map iff it is "
               r"one of the 8 edges of $\texttt{induction\_mechanism}$: input to "
               r"$a_0\langle q,k,v\rangle$ and $a_1\langle q,k,v\rangle$, $a_0 \to "
               r"a_1\langle k\rangle$ and $a_1 \to$ logits. Here input's map to $v\langle x"
               r"\rangle$ is $\{(W_E[a] + W_{pos}[t])W^v_x\}_{a,t}$, $a_0$'s is "
               r"$W^0_V W^0_O W^1_x$, and the maps to logits end in $W_U$."),
    source=Source(where="the constructions' weights (this project)", tag="D", **SHT),
    kind="identity",
    construction=f"{CONSTRUCTIONS}:induction_mechanism",
    depends_on=("induction-heads.two-layer-exact", "induction-heads.compact-exact"),
)

IC_SUFFICIENT = Claim(
    id="circuits.induction-sufficient",
    title="Under next-token resampling, patching every non-circuit edge leaves the output "
          "bit for bit unchanged",
    statement=(GRAPH + PATCHING + CORRUPTION + r"Then patching the 10 edges outside $C$ "
               r"leaves the final-position logits unchanged: $\ell^{\bar C}_i = "
               r"\ell^{\emptyset}_i$, exactly in float64 (every patched term reaches "
               r"$\ell_i$ only through a product with an exact zero, or is an exact zero)."),
    source=Source(where="circuit of the two-layer construction under this corruption "
                  "(this project)", tag="D", **SHT),
    kind="construction",
    construction=f"{CONSTRUCTIONS}:induction_circuit",
    depends_on=("induction-heads.two-layer-exact", "circuits.induction-mechanism"),
)

IC_NECESSARY = Claim(
    id="circuits.induction-necessary",
    title="Patching either circuit edge moves the logit difference by more than 1",
    statement=(GRAPH + PATCHING + CORRUPTION + r"Let $\omega = (A) + (B) + (C)$ be the sum "
               r"of the left sides of the margin conditions of $\texttt{two\_layer\_"
               r"conditions}(n)$ at the default temperatures, so the induction head's weight "
               r"on the key holding $\tau$ is $w \ge 1/(1+\omega)$. For each $e \in C$, "
               r"$m(\emptyset) - m(\{e\}) = 2w$ in exact arithmetic, and in float64 "
               r"$|m(\emptyset) - m(\{e\})| \ge 2/(1+\omega) - \varepsilon(S, n)$ with the "
               r"rounding bound $\varepsilon$ of $\texttt{necessity\_bound}$; $2/(1+\omega) > "
               r"1$."),
    source=Source(where="from the two-layer construction's margin conditions (this project)",
                  tag="D", **SHT),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:induction_circuit",
    depends_on=("induction-heads.two-layer-margins", "induction-heads.two-layer-exact"),
)

IC_MINIMAL = Claim(
    id="circuits.induction-minimal",
    title="No edge of the induction circuit can be dropped",
    statement=(GRAPH + PATCHING + CORRUPTION + r"For each $e \in C$ the smaller circuit "
               r"$C \setminus \{e\}$ is not sufficient: patching its complement "
               r"$\bar C \cup \{e\}$ moves the metric by at least the bound of the necessity "
               r"claim, $|m(\emptyset) - m(\bar C \cup \{e\})| \ge 2/(1+\omega) - "
               r"\varepsilon(S, n)$."),
    source=Source(where="from sufficiency and necessity (this project)", tag="D", **SHT),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:induction_circuit",
    depends_on=("circuits.induction-sufficient", "circuits.induction-necessary"),
)


# --- strategies and bounds --------------------------------------------------------------------

@st.composite
def corruption_cases(draw, max_vocab: int = 8, max_len: int = 16):
    """(vocab_size, max_len, clean prompt, replacement) meeting the corruption's conditions."""
    S = draw(st.integers(3, max_vocab))
    n = draw(st.integers(3, max_len))
    m = draw(st.integers(3, n))
    sequence = draw(st.lists(st.integers(0, S - 1), min_size=m, max_size=m))
    j = draw(st.integers(0, m - 3))         # the earlier occurrence j*, with j* + 1 < m - 1
    a = sequence[j]
    sequence[-1] = a
    for t in range(j + 1, m - 1):           # keep j* the latest earlier occurrence
        if sequence[t] == a:
            sequence[t] = (a + 1) % S
    replacement = draw(st.sampled_from([b for b in range(S) if b not in (a, sequence[j + 1])]))
    return S, n, sequence, replacement


# The tightest prompt for condition (A): n - 2 older matches of the final token before the key.
TIGHT_CASE = (3, 16, [0] * 14 + [1, 0], 2)


def necessity_bound(vocab_size: int, max_len: int) -> float:
    r"""The least float64 move :math:`2/(1+\omega) - \varepsilon` of the metric when one
    circuit edge is patched, for the default ``two_layer_induction(vocab_size, max_len)``.

    *Exact part.* Patching either edge changes only the value the induction head reads at the
    key :math:`c` holding :math:`\tau` (from :math:`e_\tau` to :math:`e_{\tau'}`), not its
    pattern, so :math:`m(\emptyset) - m(\{e\}) = 2A_{ic}`, and the odds against :math:`c` are
    at most :math:`\omega = (A)+(B)+(C)` (:func:`~constructions.induction_heads.
    two_layer_induction`), so :math:`A_{ic} \ge 1/(1+\omega)`; :math:`\omega` is evaluated in
    float64 with relative error :math:`\le \gamma_{16}`.

    *Rounding* (both runs share the computed row-:math:`i` pattern bit for bit, as in the
    sufficiency claim, so only its distance to the exact pattern and the readout count):
    layer-1 scores are exact (one non-zero product :math:`\beta_1\cdot 1`), its weights err by
    :math:`\le \gamma_{n+4}` each, so :math:`\mathrm{prev}` errs by
    :math:`e_p \le (n+1)\gamma_{n+4} + 2\gamma_{n+1}` (an :math:`(n+1)`-term sum of weights
    times exact one-hot values). A layer-2 score is a :math:`(S+2)`-term inner product of the
    exact query :math:`(\beta_2 e_{\sigma_i}, 1)` with a key whose prev part errs by
    :math:`e_p`: :math:`\eta \le \gamma_{S+2}(\beta_2(1+e_p) + \lambda n + \theta) +
    \beta_2 e_p`. Scores off by :math:`\le\eta` move a softmax weight by a factor within
    :math:`e^{\pm 2\eta}`, and the float softmax adds :math:`\gamma_{n+4}`:
    :math:`\varepsilon_2 = \mathrm{expm1}(2\eta) + \gamma_{n+4}`. Each logit is an
    :math:`(n+1)`-term sum of weights (total :math:`\le 2`) times exact one-hot values
    (:math:`2\gamma_{n+1}`), plus the patch's subtraction and addition on entries of size
    :math:`\le 2` (:math:`6\gamma_2`): :math:`\varepsilon_\ell = 2\gamma_{n+1} + 6\gamma_2`.
    The two metrics use four logits and two subtractions of size :math:`\le 2`, and their
    difference one more: :math:`\varepsilon = 2\varepsilon_2 + 4\varepsilon_\ell + 8u`.
    """
    p = two_layer_parameters(max_len)
    conditions = two_layer_conditions(max_len, p)
    omega = sum(conditions[k][0] for k in "ABC") * (1 + gamma(16))
    n, S, u = max_len, vocab_size, unit_roundoff()
    e_prev = (n + 1) * gamma(n + 4) + 2 * gamma(n + 1)
    eta = gamma(S + 2) * (p.beta2 * (1 + e_prev) + p.recency * n + p.sink) + p.beta2 * e_prev
    e_weight = math.expm1(2 * eta) + gamma(n + 4)
    e_logit = 2 * gamma(n + 1) + 6 * gamma(2)
    return 2 / (1 + omega) - (2 * e_weight + 4 * e_logit + 8 * u)


def _prompts(case) -> tuple[int, int, torch.Tensor, torch.Tensor]:
    S, n, sequence, replacement = case
    clean = torch.tensor([sequence])
    return S, n, clean, resample_next_token(clean, replacement, S)


def _cached(build):
    return functools.lru_cache(maxsize=32)(build)


# --- the mechanism ----------------------------------------------------------------------------

def nonzero_edges(model) -> set[str]:
    """The names of the edges whose maps (see the claim) have a non-zero entry."""
    first, second = model.layers
    inputs = (model.W_E.unsqueeze(1) + model.W_pos.unsqueeze(0)).flatten(0, 1)  # (S+1)(n+1), d
    reads = {"a0.h0": first, "a1.h0": second}
    writes = {"input": inputs, "a0.h0": first.W_V[0] @ first.W_O[0],
              "a1.h0": second.W_V[0] @ second.W_O[0]}
    out = set()
    for edge in attention_graph(2, 1):
        if edge.target == "logits":
            read = model.W_U
        else:
            layer = reads[edge.target]
            read = {"q": layer.W_Q, "k": layer.W_K, "v": layer.W_V}[edge.input][0]
        if bool((writes[edge.source] @ read != 0).any()):
            out.add(edge.name)
    return out


def mechanism_check(mechanism=induction_mechanism, sizes=((1, 1), (2, 3), (3, 5), (5, 8),
                                                          (8, 4))):
    def test_mechanism():
        for kind, build in (("two_layer", two_layer_induction), ("compact", compact_induction)):
            for S, n in sizes:
                expected = mechanism(kind, S, n).edge_names
                found = nonzero_edges(build(S, n))
                assert found == expected, (f"{kind} S={S} n={n}: non-zero edges "
                                           f"{sorted(found)} != mechanism {sorted(expected)}")
                evidence.cases(1)
    return test_mechanism


test_mechanism_edges = check(IC_MECHANISM, "exhaustive")(mechanism_check())


# --- sufficiency ------------------------------------------------------------------------------

def sufficiency_check(build=two_layer_induction, circuit=induction_circuit):
    build = _cached(build)

    @given(case=corruption_cases())
    @example(case=TIGHT_CASE)
    @example(case=(3, 3, [0, 1, 0], 2))
    @budget(0.5)  # a handful of tiny forward passes per example; the ci profile gets 50
    def test_sufficient(case):
        S, n, clean, corrupted = _prompts(case)
        model, kept = build(S, n), circuit("two_layer", S, n)
        reference = edge_patched_logits(model, clean, corrupted, ())
        patched = edge_patched_logits(model, clean, corrupted, kept.complement())
        # Bit-identity, not a tolerance: each patched edge reaches the final row only through
        # a product with an exact zero weight (tok/prev/pos blocks that the reading map
        # ignores), or its difference is exactly 0 there (the embedding changes at row c only;
        # prev[sigma_i] sums the same operands, since tau, tau' != sigma_i). fl(0 * x) = 0 and
        # fl(y + 0) = y, so the final row repeats the clean run's operations on equal operands.
        # (This assumes, as every CPU/BLAS kernel does for finite inputs, that an output
        # entry's operation sequence does not depend on the values of other entries.)
        assert torch.equal(patched[:, -1], reference[:, -1]), (
            f"final logits moved by {float((patched[:, -1] - reference[:, -1]).abs().max())}"
            f" when the edges outside the circuit were patched")
        evidence.cases(1)
    return test_sufficient


test_sufficient = check(IC_SUFFICIENT, "property")(sufficiency_check())


# --- necessity and minimality -----------------------------------------------------------------

def necessity_check(build=two_layer_induction, circuit=induction_circuit, minimal=False):
    """Patch each circuit edge alone (necessity) or with the whole complement (minimality)."""
    build = _cached(build)

    @given(case=corruption_cases())
    @example(case=TIGHT_CASE)
    @example(case=(3, 3, [0, 1, 0], 2))
    @budget(0.5)  # a handful of tiny forward passes per example; the ci profile gets 50
    def test_necessary(case):
        S, n, clean, corrupted = _prompts(case)
        model, kept = build(S, n), circuit("two_layer", S, n)
        bound = necessity_bound(S, n)
        assert bound > 1, f"the derived bound {bound} should exceed 1"
        base = logit_difference(edge_patched_logits(model, clean, corrupted, ()), clean,
                                corrupted)
        for edge in kept.edges:
            patched = [edge, *kept.complement()] if minimal else [edge]
            moved = base - logit_difference(
                edge_patched_logits(model, clean, corrupted, patched), clean, corrupted)
            assert float(moved.abs().min()) >= bound, (
                f"patching {edge.name}{' and the complement' if minimal else ''} moved the "
                f"metric by {float(moved.abs().min())} < {bound}")
            evidence.margin(float(moved.abs().min()) - bound)
        evidence.cases(1)
    return test_necessary


test_necessary = check(IC_NECESSARY, "property")(necessity_check())
test_minimal = check(IC_MINIMAL, "property")(necessity_check(minimal=True))


# --- the area page ------------------------------------------------------------------------------

def page_sections(results=(), claims=None) -> str:
    """The circuit cases' sections of this area's docs page (:mod:`theorems.circuit_pages`):
    diagram generated from ``circuit()``, corruption, checked claims, method scores."""
    from theorems.circuit_pages import case_sections

    return case_sections(results, claims)
