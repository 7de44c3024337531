r"""The circuit of the LayerNorm majority head under a token resampling.

:func:`~constructions.layernorm.majority_head` read as a 1-layer, 1-head model
(:mod:`constructions.circuits.majority`): its attention is uniform whatever the tokens, so when
one token is resampled only the value edge and the output edge carry the change. The
rounding-sized scores of float64 make sufficiency hold within a bound, which the checks
derive from each run's own computed operands (a running error bound), as they do the
necessity margin :math:`2/n`. Sources: the construction is the layernorm area's (Brody, Alon,
Yahav 2023, Section 4); the circuit, corruption and bounds are ours [D].
"""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.circuits import (
    majority_circuit,
    majority_operands,
    majority_patched_output,
    resample_token,
)
from constructions.layernorm import majority_head
from constructions.numerics import gamma, unit_roundoff
from theorems.areas.circuits._shared import CONSTRUCTIONS, PATCHING, cached
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.profiles import budget

BRODY = {"arxiv": "2305.02582", "ref": "Brody, Alon, Yahav (2023), Findings of ACL"}

SETTING = (r"Let $f = \texttt{majority\_head}(V, d)$: tokens $t_1..t_n$, $x_j = "
           r"\mathrm{LN}(E_{t_j})$, one non-causal softmax head with query "
           r"$(c^\top x_i)\mathbf 1$, key $x_j$, value $x_jW_V$, $W_O = I$, and output "
           r"$o_i \in \mathbb R^V$ (no residual). Its graph has the 5 edges input $\to "
           r"a_0\langle q\rangle, \langle k\rangle, \langle v\rangle$, input $\to$ logits (a "
           r"zero map) and $a_0 \to$ logits. ")

CORRUPTION = (r"The corrupted prompt replaces $t_r$ by $b \ne t_r$. The circuit is $C = "
              r"\{\text{input} \to a_0\langle v\rangle,\ a_0 \to \text{logits}\}$, the metric "
              r"$m(P) = o^P_{n,t_r} - o^P_{n,b}$. In each float64 run, with its computed "
              r"queries $\hat q$, keys $\hat k$, values $\hat v$: $\eta$ bounds every computed "
              r"score over both prompts' queries and keys ($\texttt{score\_bound}$), $e_w = "
              r"(1 + \mathrm{expm1}(2\eta))(1 + \gamma_{n+4}) - 1$ (every weight is within "
              r"$e_w/n$ of $1/n$), $S_a = \sum_j |\hat v_{ja}|$, and $\varepsilon_V$ is the "
              r"largest distance of a computed value entry to the one-hot $e_{t_j}$. ")

MAJ_SUFFICIENT = Claim(
    id="circuits.majority-sufficient",
    title="Under token resampling, patching the majority head's query, key and residual "
          "edges leaves its output unchanged up to the derived rounding bound",
    statement=(SETTING + PATCHING + CORRUPTION + r"In float64 the score bound is rounding-sized, "
               r"$\eta \le 2^{-30}$, and patching the 3 edges outside $C$ moves every "
               r"coordinate of $o_n$ by at most $(2e_w + 2\gamma_n(1+e_w))S_a/n$ (times "
               r"$1 + \gamma_5$ for evaluating it): both runs have weights within $e_w/n$ of "
               r"$1/n$ and the same values."),
    source=Source(where="circuit of the majority-head construction (this project)", tag="D",
                  **BRODY),
    kind="construction",
    construction=f"{CONSTRUCTIONS}:majority_circuit",
    depends_on=("layernorm.uniform-attention",),
    notes=(r"In exact arithmetic every score is 0 (the keys are LayerNormed, orthogonal to the "
           r"query direction $\mathbf 1$), so patching the 3 edges outside $C$ leaves $o_n$ "
           r"unchanged; the check asserts the float64 statement."),
)

MAJ_NECESSARY = Claim(
    id="circuits.majority-necessary",
    title="Patching either edge of the majority circuit moves the metric by about 2/n",
    statement=(SETTING + PATCHING + CORRUPTION + r"For each $e \in C$, $|m(\emptyset) - "
               r"m(\{e\})| \ge \big[(1-e_w)(2 - 4\varepsilon_V)/n - 2e_w(S_{t_r} + S_b)/n - "
               r"\gamma_n(1+e_w)(2\Sigma + \Sigma')/n - 4u(1 + |m(\emptyset)| + |m(\{e\})|)"
               r"\big](1 - 8u)$, with $\Sigma = S_{t_r} + S_b$ of the clean values and "
               r"$\Sigma'$ of the corrupted ones."),
    source=Source(where="from the majority head's weights (this project)", tag="D", **BRODY),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:majority_circuit",
    depends_on=("layernorm.uniform-attention",),
    notes=(r"In exact arithmetic with one-hot values the move is $2/n$; the check asserts the "
           r"float64 bound (and that it exceeds $1.9/n$)."),
)

MAJ_MINIMAL = Claim(
    id="circuits.majority-minimal",
    title="No edge of the majority circuit can be dropped",
    statement=(SETTING + PATCHING + CORRUPTION + r"For each $e \in C$, patching $\bar C \cup "
               r"\{e\}$ moves the metric by at least the necessity bound."),
    source=Source(where="from sufficiency and necessity (this project)", tag="D", **BRODY),
    kind="bound",
    construction=f"{CONSTRUCTIONS}:majority_circuit",
    depends_on=("circuits.majority-sufficient", "circuits.majority-necessary"),
)


# --- cases and bounds -------------------------------------------------------------------------

@st.composite
def token_resamplings(draw):
    """(V, d, seed, tokens, position, replacement)."""
    V = draw(st.integers(2, 6))
    d = draw(st.integers(V + 1, 12))
    n = draw(st.integers(1, 24))
    tokens = draw(st.lists(st.integers(0, V - 1), min_size=n, max_size=n))
    r = draw(st.integers(0, n - 1))
    b = draw(st.sampled_from([a for a in range(V) if a != tokens[r]]))
    return V, d, draw(st.integers(0, 3)), tokens, r, b


LONG_CASE = (6, 12, 0, [0, 1, 2, 3, 4, 5] * 4, 23, 0)   # the smallest move, 2/24
SHORT_CASE = (2, 3, 1, [1], 0, 0)


def score_bound(queries: torch.Tensor, keys: torch.Tensor, scale: float) -> float:
    r"""A bound :math:`\eta` on every computed score :math:`\mathrm{fl}(\mathrm{scale}\cdot
    \hat q_i^\top\hat k_j)` for the computed ``queries`` ``(n, d)`` and ``keys`` ``(m, d)``.

    With :math:`a_i = \hat q_{i1}`: :math:`|\hat q_i^\top\hat k_j| \le |a_i|\,|\sum_l \hat
    k_{jl}| + \sum_l|\hat q_{il} - a_i||\hat k_{jl}|`, :math:`|\sum_l\hat k_{jl}| \le
    |\mathrm{fl}(\sum_l\hat k_{jl})| + \gamma_d\sum_l|\hat k_{jl}|`, and the float inner
    product adds :math:`\gamma_d\sum_l|\hat q_{il}||\hat k_{jl}|`. The scale's product and
    evaluating this sum of non-negative terms (at most :math:`2d + 8` operations each) are
    covered by the factor :math:`1 + \gamma_{2d+8}`. (For the majority head every
    :math:`\hat q_{il} = a_i` and the first term is all there is: the keys are LayerNormed,
    :math:`\perp \mathbf 1` up to rounding.)
    """
    d = queries.shape[-1]
    a = queries[:, :1]                                                   # (n, 1)
    key_sums = keys.sum(-1).abs() + gamma(d) * keys.abs().sum(-1)        # (m,)
    bound = (a.abs() * key_sums + (queries - a).abs() @ keys.abs().T
             + gamma(d) * queries.abs() @ keys.abs().T)                  # (n, m)
    return abs(scale) * float(bound.max()) * (1 + gamma(2 * d + 8))


def identity(model):
    """The construction itself (the ``variant`` of the original checks)."""
    return model


def _models(build, variant):
    """A cache of ``variant(build(V, d, seed=seed))`` by (V, d, seed)."""
    return cached(lambda V, d, seed: variant(build(V, d, seed=seed)))


def running_terms(model, clean: torch.Tensor, corrupted: torch.Tensor):
    r"""(operands of both runs, :math:`e_w`, :math:`S` of each run, :math:`\eta`) for the
    ``(1, n)`` prompts ``clean`` and ``corrupted`` (the claims' running bounds)."""
    ops = [majority_operands(model, t) for t in (clean, corrupted)]
    n = clean.shape[-1]
    eta = max(score_bound(p["queries"][0], q["keys"][0], model.attention.scale)
              for p in ops for q in ops)
    e_w = (1 + torch.tensor(2 * eta).expm1().item()) * (1 + gamma(n + 4)) - 1
    S = [o["values"][0].abs().sum(0) for o in ops]                       # (V,) per run
    return ops, e_w, S, eta


def _setup(models, case):
    V, d, seed, tokens, r, b = case
    model = models(V, d, seed)
    clean = torch.tensor([tokens])
    corrupted = resample_token(clean, r, b, V)
    ops, e_w, S, eta = running_terms(model, clean, corrupted)
    return model, clean, corrupted, ops, e_w, S, eta


def _metric(output: torch.Tensor, a: int, b: int) -> float:
    return float(output[0, -1, a] - output[0, -1, b])


def necessity_bound(model, clean: torch.Tensor, corrupted: torch.Tensor, base: float,
                    value: float) -> float:
    r"""The least float64 move of :math:`\texttt{circuits.majority-necessary}` for the ``(1, n)``
    prompt ``clean`` and its resampling ``corrupted``, with ``base`` :math:`= m(\emptyset)` and
    ``value`` :math:`= m(P)` the metric of the patched run: the exact move :math:`2/n` of
    one-hot values, less both runs' weight errors :math:`e_w`, the values' distance
    :math:`\varepsilon_V` to one-hot, the sums' rounding and the metric's subtractions."""
    ops, e_w, S, _ = running_terms(model, clean, corrupted)
    r = int((clean[0] != corrupted[0]).nonzero()[0, 0])
    n, a, b, u = clean.shape[-1], int(clean[0, r]), int(corrupted[0, r]), unit_roundoff()
    one_hot = [torch.nn.functional.one_hot(t[0], model.vocab_size).to(S[0])
               for t in (clean, corrupted)]
    eps_v = max(float((o["values"][0] - h).abs().max())
                for o, h in zip(ops, one_hot, strict=True)) * (1 + gamma(2))
    sigma, sigma_c = float(S[0][a] + S[0][b]), float(S[1][a] + S[1][b])
    return ((1 - e_w) * (2 - 4 * eps_v) / n - 2 * e_w * sigma / n
            - gamma(n) * (1 + e_w) * (2 * sigma + sigma_c) / n
            - 4 * u * (1 + abs(base) + abs(value))) * (1 - 8 * u)


# --- checks -----------------------------------------------------------------------------------

def sufficiency_check(build=majority_head, circuit=majority_circuit, variant=identity):
    """Patch the circuit's complement; ``variant`` maps the built model to a variant of it
    (:mod:`.majority_variants`), whose own computed operands the bound reads."""
    models = _models(build, variant)

    @given(case=token_resamplings())
    @example(case=LONG_CASE)
    @example(case=SHORT_CASE)
    @budget(0.3, minimum=4)  # two tiny forward passes per example
    def test_sufficient(case):
        model, clean, corrupted, _, e_w, S, eta = _setup(models, case)
        n = len(case[3])
        # the claim's first part: the scores are rounding-sized (1^T x_j = 0 exactly), so
        # the bound below is; a head whose keys or queries matter fails here
        assert eta <= 2.0**-30, f"the score bound {eta} is not rounding-sized"
        reference = majority_patched_output(model, clean, corrupted, ())
        patched = majority_patched_output(model, clean, corrupted,
                                          circuit(case[1]).complement())
        # both runs' weights lie within e_w/n of 1/n and read the same (clean) values; each
        # output sum of n terms adds gamma_n (1 + e_w)/n S_a; |fl(difference)| and evaluating
        # the bound: the factor 1 + gamma_5
        tol = (2 * e_w + 2 * gamma(n) * (1 + e_w)) * S[0] / n * (1 + gamma(5))
        moved = (patched[0, -1] - reference[0, -1]).abs()
        assert bool((moved <= tol).all()), (
            f"outputs moved by {moved.tolist()} > {tol.tolist()} when the edges outside the "
            f"circuit were patched")
        evidence.margin(float((tol - moved).min()))
        evidence.cases(1)
    return test_sufficient


test_sufficient = check(MAJ_SUFFICIENT, "property")(sufficiency_check())


def necessity_check(build=majority_head, circuit=majority_circuit, minimal=False,
                    variant=identity):
    """Patch each circuit edge alone (necessity) or with the whole complement (minimality),
    on ``variant`` of the built model."""
    models = _models(build, variant)

    @given(case=token_resamplings())
    @example(case=LONG_CASE)
    @example(case=SHORT_CASE)
    @budget(0.3, minimum=4)  # a few tiny forward passes per example
    def test_necessary(case):
        model, clean, corrupted, *_ = _setup(models, case)
        _, d, _, tokens, r, b = case
        n, a = len(tokens), tokens[r]
        base = _metric(majority_patched_output(model, clean, corrupted, ()), a, b)
        kept = circuit(d)
        for edge in kept.edges:
            patched = [edge, *kept.complement()] if minimal else [edge]
            value = _metric(majority_patched_output(model, clean, corrupted, patched), a, b)
            bound = necessity_bound(model, clean, corrupted, base, value)
            assert bound > 1.9 / n, f"the derived bound {bound} should be about 2/n"
            moved = abs(base - value)
            assert moved >= bound, (f"patching {edge.name}"
                                    f"{' and the complement' if minimal else ''} moved the "
                                    f"metric by {moved} < {bound}")
            evidence.margin(moved - bound)
        evidence.cases(1)
    return test_necessary


test_necessary = check(MAJ_NECESSARY, "property")(necessity_check())
test_minimal = check(MAJ_MINIMAL, "property")(necessity_check(minimal=True))
