r"""Recursive transformers under a data budget: what the parameter accounting makes exact
(Gülbahar, Edman, Fraser 2026, "Squeezing More from Limited Data with Recursive Transformers",
arXiv:2608.26973).

Read [V], in a public copy: the abstract, the introduction and §2-§3.1 (small standard models
spend most of their weights on the vocabulary maps; recursive, weight-shared blocks decouple
per-token computation from the parameter count; factorised embeddings
:math:`xW_{emb}W_{proj}` with :math:`E = H`, :math:`W_{proj} = I` recovering the standard
map). The main claim, that three RecursiveGPT models beat standard transformers at 10M and
100M words of BabyLM-scale training, is empirical and not checkable on a CPU; no analog is
trained here. What is checked: the weight accounting of :mod:`constructions.recursive_transformer`
against real modules (exact integer counts and exact fractions), its closed forms in SymPy, and
the factorised maps against the standard ones (exact with the identity projection, within a
derived rounding bound otherwise). The accounting and the tied factorised head are ours [D].

Tolerances (``factorised_as_standard_check``). The embedding :math:`W_{emb}[x]W_{proj}` and the
row :math:`x` of :math:`\hat W_E = \mathrm{fl}(W_{emb}W_{proj})` are each an :math:`E`-term dot
product per entry, so each is within :math:`\gamma_E(|W_{emb}||W_{proj}|)[x]` of the exact
value. The head: :math:`\mathrm{fl}(\mathrm{fl}(hW_{proj}^\top)W_{emb}^\top)` is within
:math:`\gamma_{H+E}|h||W_{proj}|^\top|W_{emb}|^\top` of :math:`hW_{proj}^\top W_{emb}^\top`
(Higham's bound for a product of three matrices), and so is
:math:`\mathrm{fl}(h\hat W_E^\top)` (:math:`\gamma_H` for the product and :math:`\gamma_E`
carried from :math:`\hat W_E`).
"""

from __future__ import annotations

from fractions import Fraction

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.recursive_transformer import (
    Block,
    TinyDecoder,
    embedding_parameters,
    embedding_share,
    factorised_embedding,
    parameter_count,
    parameter_formula,
    tiny_decoder,
)
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.strategies import seeds

RECURSIVE = {"arxiv": "2608.26973",
             "ref": "Gülbahar, Edman, Fraser (2026), Squeezing More from Limited Data with "
                    "Recursive Transformers"}

RT_ACCOUNTING = Claim(
    id="cot-and-looping.recursive-parameter-accounting",
    title="A 12-layer model spends V/(V + 144H) of its weights on the vocabulary map, one "
          "looped block V/(V + 12H)",
    statement=(
        r"A decoder with vocabulary $V$, width $H$, an embedding tied to its head and $n_u$ "
        r"distinct blocks of $12H^2$ weights (attention $W_Q, W_K, W_V, W_O \in \mathbb "
        r"R^{H\times H}$, MLP $W_1 \in \mathbb R^{H\times 4H}$, $W_2 \in \mathbb "
        r"R^{4H\times H}$; biases and norm parameters not counted), applied in turn over its "
        r"depth, has $VH + 12n_uH^2$ weights. "
        r"So the standard 12-layer model ($n_u = 12$) spends the share $VH/(VH + 12\cdot "
        r"12H^2) = V/(V + 144H)$ of its weights on the vocabulary map, which decreases in $H$, "
        r"and one block looped 12 times ($n_u = 1$) spends $V/(V + 12H)$. "
        r"Factorised embeddings $W_{emb} \in \mathbb R^{V\times E}$, $W_{proj} \in \mathbb "
        r"R^{E\times H}$ (with the tied head $hW_{proj}^\top W_{emb}^\top$) have $E(V + H)$ "
        r"weights in place of $VH$, fewer exactly when $E < VH/(V + H)$."),
    source=(Source(where="Abstract and introduction (small models spend most weights on the "
                         "vocabulary maps; recursion decouples compute from parameters); §3.1 "
                         "(factorised embeddings, O(VE + EH) instead of O(VH))", tag="V",
                   **RECURSIVE),
            Source(where="the exact accounting, its shares and the threshold, derived here",
                   tag="D", **RECURSIVE)),
    kind="identity", construction="constructions.recursive_transformer:tiny_decoder",
    notes="The paper's sweep uses 12 layers, H in [256, 3072] and E = 96, 192, 352 for H = "
          "256, 384, 512 [V]; its vocabulary size was not recorded here, so the shares at its "
          "settings are not computed. Its downstream results (BLiMP, LAMBADA, COMPS under 10M "
          "and 100M words) are not checked.")

RT_IDENTITY = Claim(
    id="cot-and-looping.factorised-embedding-recovers-standard",
    title="Factorised embeddings with E = H and W_proj = I are the standard embedding, bit for "
          "bit",
    statement=(
        r"With $E = H$ and $W_{proj} = I_H$, the factorised embedding $W_{emb}[x]W_{proj}$ "
        r"equals the standard embedding $W_{emb}[x]$ and the head's projection $hW_{proj}^"
        r"\top$ equals $h$, bit for bit in float64, for every token $x$ and every $h \in "
        r"\mathbb R^H$ (each entry is one product by 1 plus products by 0, all exact); so the "
        r"factorised model is the standard model with $W_E = W_{emb}$. "
        r"For any $E$ and $W_{proj}$, the factorised maps are those of the standard model "
        r"whose embedding is $W_E = W_{emb}W_{proj}$ (of rank at most $E$): in float64 they "
        r"agree within $2\gamma_E(|W_{emb}||W_{proj}|)[x]$ (embedding) and "
        r"$2\gamma_{E+H}|h||W_{proj}|^\top|W_{emb}|^\top$ (head)."),
    source=(Source(where="§3.1: E = H with W_proj = I recovers the standard map", tag="V",
                   **RECURSIVE),
            Source(where="the tied head, exactness in floating point and the rank-E reading, "
                         "derived here", tag="D", **RECURSIVE)),
    kind="identity", construction="constructions.recursive_transformer:factorised_embedding",
    notes="The whole decoder's logits are not compared bit for bit: the same operations on "
          "equal values may round differently when a kernel picks its path by memory "
          "alignment, so only the maps, where exactness is arithmetic, are compared.")


# --- RT.2: the accounting ------------------------------------------------------------------------

GRID = [(V, H) for V in (1, 7, 50) for H in (1, 4, 8)]
UNIQUE = (1, 2, 3, 12)


def weight_count_check(build=tiny_decoder):
    """Every (V, H) of GRID and n_u in UNIQUE (depth n_u and 2 n_u): the modules' weight count
    equals VH + 12 n_u H^2, and their vocabulary map VH."""
    def run():
        for V, H in GRID:
            for n_u in UNIQUE:
                for depth in (n_u, 2 * n_u):
                    model = build(V, H, n_u, depth)
                    embedding, total = parameter_formula(V, H, n_u)
                    assert (parameter_count(model), embedding_parameters(model)) == (
                        total, embedding), (
                        f"V={V}, H={H}, n_u={n_u}, depth={depth}: {parameter_count(model)} "
                        f"weights ({embedding_parameters(model)} in the embedding), not "
                        f"VH + 12 n_u H^2 = {total} ({embedding})")
        evidence.cases(len(GRID) * len(UNIQUE) * 2)
    return run


test_the_weights_are_vh_plus_12_n_u_h_squared = check(RT_ACCOUNTING, "exhaustive")(
    weight_count_check())


def share_check(share=embedding_share):
    """Exact fractions: the share of a 12-layer and a one-block model against V/(V + 144H) and
    V/(V + 12H) and against the counts of real modules; the share falls from H to H + 1."""
    def run():
        for V, H in GRID:
            for n_u, closed in ((12, Fraction(V, V + 144 * H)), (1, Fraction(V, V + 12 * H))):
                model = tiny_decoder(V, H, n_u, 12)
                counted = Fraction(embedding_parameters(model), parameter_count(model))
                assert share(V, H, n_u) == closed == counted, (
                    f"V={V}, H={H}, n_u={n_u}: share {share(V, H, n_u)}, closed form {closed}, "
                    f"counted {counted}")
            assert share(V, H + 1, 12) < share(V, H, 12), (
                f"V={V}: the share does not fall from H={H} to H={H + 1}")
        evidence.cases(len(GRID))
        evidence.table("vocabulary share of a 12-layer model, V/(V + 144H)", ["V", "H", "share"],
                       [[V, H, float(Fraction(V, V + 144 * H))] for V, H in GRID])
    return run


test_the_shares_are_exact_fractions = check(RT_ACCOUNTING, "exhaustive")(share_check())


def symbolic_share_check(share=embedding_share):
    """SymPy: for positive symbols V, H the shares simplify to V/(V + 144H) and V/(V + 12H),
    the first has a negative H-derivative, and E(V + H) < VH is E < VH/(V + H)."""
    def run():
        import sympy as sp

        V, H, E = sp.symbols("V H E", positive=True)
        for n_u, closed in ((12, V / (V + 144 * H)), (1, V / (V + 12 * H))):
            residual = sp.cancel(share(V, H, n_u) - closed)
            assert residual == 0, f"n_u={n_u}: share - closed form = {residual}"
        slope = sp.factor(sp.diff(share(V, H, 12), H))
        assert slope.is_negative, f"the share's H-derivative {slope} is not negative"
        embedding, _ = parameter_formula(V, H, 1, d_embed=E)
        gap = sp.expand(V * H - embedding - (V + H) * (V * H / (V + H) - E))
        assert sp.cancel(gap) == 0, f"VH - E(V + H) - (V + H)(VH/(V + H) - E) = {gap}"
        evidence.cases(4)
    return run


test_the_shares_hold_symbolically = check(RT_ACCOUNTING, "symbolic")(symbolic_share_check())


def factorised_count_check(build=tiny_decoder):
    """Every (V, H) of GRID and E in 1..H: the factorised vocabulary map of a real module has
    E(V + H) weights, and it has fewer than VH exactly when E < VH/(V + H)."""
    def run():
        cases = 0
        for V, H in GRID:
            for E in range(1, H + 1):
                model = build(V, H, 1, 1, d_embed=E)
                _, total = parameter_formula(V, H, 1, d_embed=E)
                assert (embedding_parameters(model), parameter_count(model)) == (
                    E * (V + H), total), (
                    f"V={V}, H={H}, E={E}: the factorised map has "
                    f"{embedding_parameters(model)} weights, not E(V + H) = {E * (V + H)}")
                fewer = embedding_parameters(model) < V * H
                assert fewer == (E < Fraction(V * H, V + H)), (
                    f"V={V}, H={H}, E={E}: fewer weights is {fewer}, E < VH/(V + H) is "
                    f"{E < Fraction(V * H, V + H)}")
                cases += 1
        evidence.cases(cases)
    return run


test_factorised_embeddings_have_e_v_plus_h_weights = check(RT_ACCOUNTING, "exhaustive")(
    factorised_count_check())


# --- RT.2: the identity projection ----------------------------------------------------------------

@st.composite
def vocabulary_cases(draw) -> dict:
    return {"V": draw(st.integers(1, 40)), "H": draw(st.integers(1, 12)),
            "E": draw(st.integers(1, 12)), "seed": draw(seeds())}


def _tokens_and_states(case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(case["seed"] ^ 0x5EED)
    tokens = torch.randint(case["V"], (2, 6), generator=generator)
    h = 3 * torch.randn(2, 6, case["H"], generator=generator, dtype=torch.float64)
    return tokens, h


def identity_projection_check(build=factorised_embedding):
    @budget(0.3)
    @given(case=vocabulary_cases())
    @example(case={"V": 5, "H": 4, "E": 4, "seed": 0})
    def run(case):
        tokens, h = _tokens_and_states(case)
        vocabulary = build(case["V"], case["H"], case["H"], seed=case["seed"],
                           identity_projection=True)
        with torch.no_grad():
            assert torch.equal(vocabulary.embed(tokens), vocabulary.W_emb[tokens]), (
                "W_emb[x] W_proj with W_proj = I is not W_emb[x]")
            assert torch.equal(vocabulary.project(h), h), "h W_proj^T with W_proj = I is not h"
            blocks = [Block(case["H"], torch.Generator().manual_seed(0), torch.float64)]
            factorised = TinyDecoder(vocabulary, blocks, 1)
            standard = TinyDecoder(vocabulary.W_emb.detach(), blocks, 1)
            assert torch.equal(factorised.embed(tokens), standard.embed(tokens)), (
                "the factorised decoder's residual stream starts elsewhere")
    return run


test_the_identity_projection_recovers_the_standard_maps = check(RT_IDENTITY, "property")(
    identity_projection_check())


def factorised_as_standard_check(build=factorised_embedding):
    @budget(0.3)
    @given(case=vocabulary_cases())
    @example(case={"V": 40, "H": 12, "E": 3, "seed": 1})
    def run(case):
        tokens, h = _tokens_and_states(case)
        vocabulary = build(case["V"], case["H"], case["E"], seed=case["seed"])
        with torch.no_grad():
            W_emb, W_proj = vocabulary.W_emb, vocabulary.W_proj
            W_E = W_emb @ W_proj
            E, H = W_emb.shape[1], W_proj.shape[1]
            embed_err = (vocabulary.embed(tokens) - W_E[tokens]).abs()
            embed_tol = 2 * gamma(E) * (W_emb.abs() @ W_proj.abs())[tokens]
            assert bool((embed_err <= embed_tol).all()), (
                f"the factorised embedding differs from W_emb W_proj by "
                f"{float(embed_err.max()):.3g}")
            head_err = (vocabulary.unembed(h) - h @ W_E.T).abs()
            head_tol = 2 * gamma(E + H) * (h.abs() @ W_proj.abs().T @ W_emb.abs().T)
            evidence.ratio(float((head_err / head_tol).max()))
            assert bool((head_err <= head_tol).all()), (
                f"the factorised head differs from h W_E^T by {float(head_err.max()):.3g}")
    return run


test_factorised_maps_are_a_rank_e_standard_embedding = check(RT_IDENTITY, "property")(
    factorised_as_standard_check())
