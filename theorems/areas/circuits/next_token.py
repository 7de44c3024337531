r"""The induction circuit under next-token resampling: what the induction head copies.

Relative to :func:`~constructions.circuits.resample_next_token` the two-edge circuit of
:func:`~constructions.circuits.induction_circuit` is sufficient (patching every other edge
leaves the final logits bit for bit unchanged), necessary and minimal; the mechanism's edges
are exactly the constructions' non-zero ones. Sources: see the area's introduction.
"""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.circuits import (
    attention_graph,
    edge_patched_logits,
    induction_circuit,
    induction_mechanism,
    resample_next_token,
)
from constructions.induction_heads import (
    compact_induction,
    two_layer_conditions,
    two_layer_induction,
    two_layer_parameters,
)
from constructions.numerics import gamma, unit_roundoff
from theorems.areas.circuits._shared import (
    CONSTRUCTIONS,
    GRAPH,
    PATCHING,
    SHT,
    assert_each_edge_moves,
    cached,
    rounding_terms,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget

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
               r"on the key holding $\tau$ is $w \ge 1/(1+\omega)$. For each $e \in C$, in float64 "
               r"$|m(\emptyset) - m(\{e\})| \ge 2/(1+\omega) - \varepsilon(S, n)$ with the "
               r"rounding bound $\varepsilon$ of $\texttt{necessity\_bound}$; $2/(1+\omega) > "
               r"1$."),
    source=Source(where="from the two-layer construction's margin conditions (this project)",
                  tag="D", **SHT),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:induction_circuit",
    depends_on=("induction-heads.two-layer-margins", "induction-heads.two-layer-exact"),
    notes=(r"In exact arithmetic $m(\emptyset) - m(\{e\}) = 2w$ (necessity_bound's derivation); "
           r"the check asserts only the float64 bound."),
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
    sufficiency claim, so only its distance to the exact pattern and the readout count): with
    ``e_weight`` and ``e_logit`` of :func:`~theorems.areas.circuits._shared.rounding_terms`,
    the two metrics use four logits and two subtractions of size :math:`\le 2`, and their
    difference one more: :math:`\varepsilon = 2e_{weight} + 4e_{logit} + 8u`.
    """
    p = two_layer_parameters(max_len)
    conditions = two_layer_conditions(max_len, p)
    omega = sum(conditions[k][0] for k in "ABC") * (1 + gamma(16))
    e_weight, e_logit = rounding_terms(vocab_size, max_len)
    return 2 / (1 + omega) - (2 * e_weight + 4 * e_logit + 8 * unit_roundoff())


def _prompts(case) -> tuple[int, int, torch.Tensor, torch.Tensor]:
    S, n, sequence, replacement = case
    clean = torch.tensor([sequence])
    return S, n, clean, resample_next_token(clean, replacement, S)


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
    build = cached(build)

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
    build = cached(build)

    @given(case=corruption_cases())
    @example(case=TIGHT_CASE)
    @example(case=(3, 3, [0, 1, 0], 2))
    @budget(0.5)  # a handful of tiny forward passes per example; the ci profile gets 50
    def test_necessary(case):
        S, n, clean, corrupted = _prompts(case)
        model, kept = build(S, n), circuit("two_layer", S, n)
        bound = necessity_bound(S, n)
        assert bound > 1, f"the derived bound {bound} should exceed 1"
        assert_each_edge_moves(model, kept, clean, corrupted, bound, minimal=minimal)
        evidence.cases(1)
    return test_necessary


test_necessary = check(IC_NECESSARY, "property")(necessity_check())
test_minimal = check(IC_MINIMAL, "property")(necessity_check(minimal=True))
