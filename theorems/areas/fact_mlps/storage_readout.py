r"""Reading stored facts out (FM.4, FM.5): when Gaussian projections of the value embeddings
decode every value, and a one-layer fact transformer whose answers follow the MLP it reads, so
that swapping the MLP swaps the facts and nothing else.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from constructions.fact_mlps import (
    decodability,
    decoding_success_rate,
    encoder_decoder_mlp,
    fact_prompts,
    fact_transformer,
    jl_code_dim,
    value_margin,
)
from theorems.areas.fact_mlps._shared import DUGAN, unit_rows
from theorems.areas.fact_mlps._storage_bounds import gated_output_error
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.strategies import gaussian_matrices, seeds

# --- FM.4: decodability ------------------------------------------------------------------------

FM_DECODABILITY = Claim(
    id="fact-mlps.decodability-jl",
    title="Gaussian projections decode values once m = O(log|V|/γ²) (our formula)",
    statement=(
        r"For values $v_1,\dots,v_{|V|}$ let $\gamma = \min_{k\ne j}(\lVert v_k\rVert^2 - "
        r"\langle v_k, v_j\rangle)/\max_j\lVert v_j\rVert^2 > 0$ and let $m^*(V)$ be the "
        r"smallest $m$ at which $P \in \mathbb R^{m\times d_v}$ with i.i.d. $N(0, 1/m)$ "
        r"entries satisfies $\arg\max_j\langle Pv_j, Pv_k\rangle = k$ for all $k$ with "
        r"probability at least $1/2$. Then $m^*(V) \le m_{JL} = \lceil 4\ln(8|V|^2)/"
        r"(\epsilon^2 - \epsilon^3)\rceil$ with $\epsilon = \min(\gamma/2, 1/2)$, so "
        r"$m^* = O(\log|V|/\gamma^2)$. And $\gamma$ alone does not determine $m^*$: pairs "
        r"$(b_k, (1-g)b_k + b'_k)$ of orthonormal vectors need a steeper growth of $m^*$ in "
        r"$1/\gamma$ than equicorrelated unit values ($\langle v_k, v_j\rangle = \rho$), "
        r"for which it is about $\gamma^{-1}$."),
    source=(Source(where="Section 3 (embedding geometry and fact-storage cost): a "
                         "'decodability' metric on value embeddings", tag="S", **DUGAN),
            Source(where="the proxy m*, the margin γ and the JL bound (this project; the "
                         "paper's own formula is unconfirmed)", tag="D", **DUGAN)),
    kind="bound",
    construction="constructions.fact_mlps:jl_code_dim",
)


FM_SWAP = Claim(
    id="fact-mlps.mlp-swap",
    title="Swapping the MLP of a one-layer fact transformer swaps its answers, nothing else",
    statement=(
        r"Let $T_g$ be a one-layer transformer (one hardmax head that copies the subject's key "
        r"$k_s$ to the last position, an MLP $g:\mathbb R^d\to\mathbb R^{d_v}$ reading it, and "
        r"logits $\langle v_j, \cdot\rangle$ on the MLP's output block). If $g_A$ stores fact "
        r"set $A$ and $g_B$ stores $B$ on the same keys and values, then on every prompt with "
        r"one subject $s$, $T_{g_A}$ answers $A(s)$ and, after replacing $g_A$ by $g_B$, "
        r"$T_{g_B}$ answers $B(s)$; the attention pattern and the residual stream before the "
        r"MLP are identical, and the logits change by exactly "
        r"$\langle v_j, g_B(k_s) - g_A(k_s)\rangle$."),
    source=(Source(where="Abstract: modular fact editing by replacing entire MLPs; Section 5 "
                         "(integrating fact-storing MLPs into Transformers)", tag="V", **DUGAN),
            Source(where="the explicit one-layer transformer (this project)", tag="D",
                   **DUGAN)),
    kind="construction",
    construction="constructions.fact_mlps:fact_transformer",
    depends_on=("fact-mlps.encoder-exact-storage",),
)


@st.composite
def decodable_values(draw):
    """Value sets with margin gamma >= 0.2: unit Gaussian, equicorrelated, or unequal norms."""
    num_values = draw(st.integers(2, 12))
    d_v = draw(st.integers(2, 12))
    kind = draw(st.sampled_from(["sphere", "equicorrelated", "scaled"]))
    raw = draw(gaussian_matrices(num_values, d_v))
    if kind == "sphere":
        values = unit_rows(raw)
    elif kind == "equicorrelated":
        rho = draw(st.floats(0.0, 0.8))
        values = torch.zeros(num_values, num_values + 1, dtype=torch.float64)
        values[:, :num_values] = math.sqrt(1 - rho) * torch.eye(num_values, dtype=torch.float64)
        values[:, -1] = math.sqrt(rho)
    else:
        values = unit_rows(raw) * torch.linspace(1.0, draw(st.floats(1.0, 1.5)), num_values,
                                                 dtype=torch.float64)[:, None]
    assume(value_margin(values) >= 0.2)
    return values


def decodability_check(bound=jl_code_dim, draws: int = 64):
    @given(values=decodable_values(), seed=seeds())
    @example(values=torch.eye(12, dtype=torch.float64), seed=0)   # gamma = 1, |V| = 12
    def run(values, seed):
        m = bound(values.shape[0], value_margin(values))
        rate = decoding_success_rate(values, m, draws=draws, seed=seed)
        # a binomial proportion's standard error is at most 1/(2 sqrt(n)); 3 sigma below 1/2
        floor = 0.5 - 3 * 0.5 / math.sqrt(draws)
        evidence.margin(rate - floor)
        assert rate >= floor, f"at m = {m}, only {rate:.2f} of projections decode"
    return run


test_jl_code_dim_decodes = check(FM_DECODABILITY, "property")(
    budget(0.3)(decodability_check()))


def equicorrelated(num_values: int, rho: float) -> torch.Tensor:
    values = torch.zeros(num_values, num_values + 1, dtype=torch.float64)
    values[:, :num_values] = math.sqrt(1 - rho) * torch.eye(num_values, dtype=torch.float64)
    values[:, -1] = math.sqrt(rho)
    return values


def short_long_pairs(num_values: int, g: float) -> torch.Tensor:
    """Pairs (b_k, (1 - g) b_k + b'_k) of orthonormal vectors: gamma ~ g/2, and the short
    vector's margin against its partner is the small inner product g |b_k|^2."""
    values = torch.zeros(num_values, num_values, dtype=torch.float64)
    for k in range(num_values // 2):
        values[2 * k, 2 * k] = 1.0
        values[2 * k + 1, 2 * k] = 1.0 - g
        values[2 * k + 1, 2 * k + 1] = 1.0
    return values


def decodability_scaling_check(bound=jl_code_dim, num_values: int = 16):
    def run() -> None:
        from empirics.plots import pyplot, tidy

        plt = pyplot()
        families = {"equicorrelated": [equicorrelated(num_values, r) for r in (0.0, 0.5, 0.75)],
                    "short-long pairs": [short_long_pairs(num_values, g)
                                         for g in (0.5, 0.25, 0.125)]}
        fig, ax = plt.subplots(figsize=(5.5, 4))
        rows, exponents = [], {}
        for name, family in families.items():
            gammas, dims = [], []
            for values in family:
                g = value_margin(values)
                m_star = decodability(values, draws=64, seed=0)
                m_jl = bound(num_values, g)
                assert m_star is not None and m_star <= m_jl, (
                    f"{name}, gamma={g:.3g}: m* = {m_star} exceeds the bound {m_jl}")
                evidence.ratio(m_star / m_jl)
                gammas.append(g)
                dims.append(m_star)
                rows.append([name, round(g, 4), m_star, m_jl,
                             round(m_star * g**2 / math.log(num_values), 3)])
            slope = float(np.polyfit(np.log(gammas), np.log(dims), 1)[0])
            exponents[name] = -slope
            evidence.metric(f"fitted exponent of 1/gamma, {name}", -slope)
            x = [math.log(num_values) / g**2 for g in gammas]
            ax.loglog(x, dims, "o-", label=f"{name}: m* ∝ γ^-{-slope:.2f}")
        grid = np.array([math.log(num_values) / g**2 for g in (1.0, 0.03)])
        ax.loglog(grid, [bound(num_values, math.sqrt(math.log(num_values) / x)) for x in grid],
                  "--", color="grey", label="bound m_JL (ours)")
        ax.set_xlabel(r"$\ln|V| / \gamma^2$")
        ax.set_ylabel(r"$m^*(V)$, Monte Carlo (64 draws)")
        ax.set_title(f"|V| = {num_values}")
        ax.legend(fontsize=8)
        tidy(ax)
        evidence.figure(fig, "decodability")
        evidence.table("m*(V)", ["family", "gamma", "m*", "m_JL", "m* gamma^2 / ln|V|"], rows)
        evidence.cases(len(rows))
        # the pairs family needs a steeper dependence on 1/gamma than the equicorrelated one:
        # gamma alone does not determine m*, and the bound's gamma^-2 order is approached
        assert exponents["short-long pairs"] > exponents["equicorrelated"]
    return run


def decodability_against_the_margin():
    decodability_scaling_check()()


test_decodability_against_the_margin = check(FM_DECODABILITY, "numeric")(
    decodability_against_the_margin)


# --- FM.5: swapping the MLP edits the facts ----------------------------------------------------


@st.composite
def swap_cases(draw):
    d = draw(st.integers(2, 6))
    F = draw(st.integers(1, 3 * d))
    num_values = draw(st.integers(2, 6))
    keys = draw(gaussian_matrices(F, d))
    values = unit_rows(draw(gaussian_matrices(num_values, draw(st.integers(2, 6)))))
    facts = st.lists(st.integers(0, num_values - 1), min_size=F, max_size=F)
    length = draw(st.integers(2, 8))
    positions = draw(st.lists(st.integers(0, length - 2), min_size=F, max_size=F))
    return (keys, values, torch.tensor(draw(facts)), torch.tensor(draw(facts)),
            torch.tensor(positions), length, draw(st.integers(0, 3)))


def swap_check(build=fact_transformer):
    @given(case=swap_cases())
    @example(case=(torch.eye(3, dtype=torch.float64), torch.eye(3, dtype=torch.float64),
                   torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]), torch.tensor([0, 1, 2]),
                   4, 2))
    def run(case):
        keys, values, facts_a, facts_b, positions, length, fillers = case
        mlp_a = encoder_decoder_mlp(keys, values, facts_a)
        mlp_b = encoder_decoder_mlp(keys, values, facts_b)
        model = build(keys, values, mlp_a, num_fillers=fillers)
        subjects = torch.arange(len(keys))
        prompts = fact_prompts(subjects, positions, num_subjects=len(keys),
                               num_fillers=fillers, length=length)
        pattern, residual, logits = (model.attention_pattern(prompts), model.residual(prompts),
                                     model(prompts))
        assert torch.equal(logits.argmax(-1), facts_a), "model does not answer fact set A"
        model.swap_mlp(mlp_b)
        # bit-identical: the same attention ops on the same inputs in the same order, and the
        # MLP is not among them
        assert torch.equal(model.attention_pattern(prompts), pattern), "attention changed"
        assert torch.equal(model.residual(prompts), residual), "pre-MLP stream changed"
        swapped = model(prompts)
        assert torch.equal(swapped.argmax(-1), facts_b), "model does not answer fact set B"
        # what the MLP reads is the subject's key, moved by the hardmax head: with an exact
        # 0/1 pattern (one subject, causal) it is sum_j p_ij (x_j W_V) W_O + x, whose terms
        # pass x W_V (width terms), the sum over the n positions (at most n; its zeros add
        # exactly), z W_O (d_head terms) and the residual's addition: rounding
        # gamma_{width+n+d_head+1} |x_s||W_V||W_O|, the absolute chain computed in float64
        # within 1 + gamma_2N of its exact value
        u = model.mlp_input(prompts)
        x = model.embeddings[prompts].abs()
        head = model.attention
        moved = torch.einsum("bnd,dv,vo->bno", x, head.W_V[0].abs(), head.W_O[0].abs())
        d = model.d
        moved = moved.amax(1)[:, d + 2:2 * d + 2]
        width = x.shape[-1]
        N = width + length + head.W_O.shape[1] + 1
        key_tol = gamma(N) * moved * (1 + gamma(2 * N))
        key_err = (u - keys[subjects].to(u.dtype)).abs()
        assert bool((key_err <= key_tol).all()), (
            f"the MLP does not read the subject's key ({key_err.max():.3g})")
        # logits - (their formula): swapped = fl(fl(g_B(u)) V^T), logits = fl(fl(g_A(u)) V^T),
        # expected = fl(fl(g_B'(u) - g_A'(u)) V^T), where g and g' are two evaluations of the
        # same MLP at u (batch shapes may differ: each is within E_g = gated_output_error of
        # g(u)); the MLP-out block of the residual is exactly 0 (0 + g is exact). So
        # |swapped - logits - expected| <= 2|V|(E_A + E_B)
        #   + gamma_{d_v+1} |V|(|g_A| + |g_B| + |g_B' - g_A'|)   (three d_v-term dot products,
        #                                                         one subtraction inside)
        #   + gamma_2 (|swapped| + |logits| + |expected|)         (the two outer subtractions)
        ga, gb = mlp_a(u), mlp_b(u)
        expected = (gb - ga) @ values.T
        V = values.abs().T.to(u.dtype)
        dv = values.shape[1]
        bound = (2 * (gated_output_error(mlp_a, u) + gated_output_error(mlp_b, u)) @ V
                 + gamma(dv + 1) * (ga.abs() + gb.abs() + (gb - ga).abs()) @ V
                 + gamma(2) * (swapped.abs() + logits.abs() + expected.abs()))
        # the bound is itself computed: its terms are sums of products of non-negative
        # numbers, at most d_v + 3 roundings deep (the d_v-term products with |V|, the three
        # additions), so the exact value of the same expression is within 1/(1 - gamma_{dv+3})
        # <= 1 + gamma_{2dv+6} of it; and |g| <= |g_computed| + E, whose second-order part
        # gamma_{dv+1} (E_A + E_B + |E_B - E_A|)|V| <= 2 gamma_{dv+1} (E_A + E_B)|V| is added
        E_sum = (gated_output_error(mlp_a, u) + gated_output_error(mlp_b, u)) @ V
        tol = (1 + gamma(2 * dv + 6)) * (bound + 2 * gamma(dv + 1) * E_sum)
        err = (swapped - logits - expected).abs()
        evidence.margin(float((1 - err / tol).min()))
        assert bool((err <= tol).all()), (
            f"logits changed by more than the MLP difference ({err.max():.3g}, "
            f"tol {tol.max():.3g})")
        evidence.cases(len(keys))
    return run


test_swapping_the_mlp_swaps_the_answers = check(FM_SWAP, "property")(
    budget(0.3)(swap_check()))
