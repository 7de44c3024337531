r"""What SeqCond Attention's prefix summary holds (Nautile-370M, Chenebaux 2026,
arXiv:2604.24809): our reading of its retrieval lemma, on the definition in the author's code.

Read [V]: the abstract ("we prove that the SCA readout mechanism can exactly retrieve any
individual token from the prefix summary and can reproduce any output of softmax attention as a
special case, establishing that SCA is at least as expressive as full self-attention in the
continuous limit"), the introduction's first paragraph (the summary evaluates the gradient of
the empirical characteristic function at a small set of learned spectral points and is read out
by a complex inner product), the model card, and SCA's definition in the author's code
(:mod:`constructions.seqcond`). The paper's body, with the lemma's own statement and proof, was
not reachable, so the statement checked here is this project's reading [D], in two parts: with
at least as many spectral points as distinct keys, a readout (whose coefficients may depend on
the prefix) recovers each token's weighted key exactly; with the :math:`M = 2` points of the
~370M configuration, no readout isolates one token among three distinct keys. The second part
bounds a finite reading of "exactly retrieve any individual token"; it does not refute the
paper, which states its expressivity "in the continuous limit" and whose layer also combines
heads. The softmax half of the lemma is not registered (notes).

Certification (``retrieval_check``, ``isolation_check``). Invertibility is certified on the
float matrix and carried to the exact one: :func:`theorems.certificates.sigma_min_lower_bound`
bounds the smallest singular value of the computed matrix's real form
:math:`\begin{pmatrix}\Re & -\Im\\ \Im & \Re\end{pmatrix}` (whose singular values are the complex
matrix's, each twice), and Weyl's inequality subtracts the Frobenius norm of the entrywise error.
Each entry :math:`e^{i\theta u}` is within :math:`14u` of the exact value for the float
:math:`\theta` and keys: the softsign is off by :math:`3u|u_j| \le 3u`, the product
:math:`\theta u` by :math:`u|\theta u|`, so the angle by at most :math:`3\cdot 3u + 3u = 12u`,
and cosine and sine by 1 ulp (:math:`2u`) more.

The readout (``retrieval_check``): for computed coefficients :math:`\hat c` the exact readout of
the exact summary is :math:`\sum_ja_j(V^\top\hat c)_j`, :math:`a_j = p_jk_j/\sum p`, so it
differs from :math:`a_{j^*}` by at most :math:`\lVert a\rVert_1\max_j|r_j|` with :math:`r` the
exact residual of :math:`V^\top\hat c = e_{j^*}`, which is within
:math:`\gamma_{M+2}|V|^\top|\hat c| + 14u\lVert\hat c\rVert_1` of the computed one. The
computed summary is within :math:`\gamma_{2t+20}\lVert a\rVert_1` of the exact one (the angle
and the exponential as above, two products, the :math:`t`-term sums and the division), and the
computed readout adds :math:`\gamma_{M+4}\sum_m|\hat c_m||\hat S_m|`.
"""

from __future__ import annotations

import math

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.seqcond import (
    NAUTILE_NUM_THETAS,
    THETA_RANGE,
    sca_phases,
    sca_readout,
    sca_state,
    spectral_matrix,
)
from theorems.areas.approximation._bounds import U
from theorems.certificates import sigma_min_lower_bound
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.strategies import seeds

NAUTILE = {"arxiv": "2604.24809",
           "ref": "Chenebaux (2026), Nautile-370M: Spectral Memory Meets Attention in a Small "
                  "Reasoning Model"}
ENTRY_ERROR = 14 * U  # per real entry of e^{i theta u} (module docstring)

SCA_RETRIEVAL = Claim(
    id="approximation.seqcond-prefix-retrieval",
    title="SeqCond Attention's summary at M ≥ t spectral points determines every token; at "
          "Nautile's M = 2 no readout isolates one of three keys (our reading)",
    statement=(
        r"In SeqCond Attention (SCA) as coded by the author, one coordinate of a head gives "
        r"tokens with keys $k_j \in \mathbb R$ and weights $p_j > 0$ the phases $u_j = "
        r"\sigma(ck_j)$, $\sigma(z) = z/(1 + |z|)$, $c > 0$, holds at spectral points "
        r"$\theta_m \in [0.001, 3]$ the prefix summary $S_t(\theta_m) = \sum_{j\le t}p_jk_j"
        r"e^{i\theta_mu_j}/\sum_{j\le t}p_j$ and reads it out as $\sum_mc_mS_t(\theta_m)$ with "
        r"complex $c_m$. If the $t$ keys are pairwise distinct and $\theta_m = 3(m+1)/M$ for "
        r"$m = 0, \dots, M-1$ with $M \ge t$, the matrix $V_{mj} = e^{i\theta_mu_j}$ has rank "
        r"$t$, so for every $j^*$ some coefficients give $\sum_mc_mS_t(\theta_m) = p_{j^*}"
        r"k_{j^*}/\sum_jp_j$ exactly: the summary at $M \ge t$ points determines each token's "
        r"weighted key. "
        r"With $M = 2$ points, as in Nautile-370M's configuration, no readout isolates a token "
        r"among three distinct keys: for $\theta_1 \ne \theta_2$ in $[0.001, 3]$ and distinct "
        r"$u_a, u_b, u_c \in (-1, 1)$ no $c_1, c_2$ make $g(u) = c_1e^{i\theta_1u} + "
        r"c_2e^{i\theta_2u}$ equal to 1 at $u_a$ and 0 at $u_b$ and $u_c$, because the minor "
        r"$e^{i(\theta_1u_b + \theta_2u_c)} - e^{i(\theta_2u_b + \theta_1u_c)}$ has modulus "
        r"$2|\sin((\theta_2 - \theta_1)(u_b - u_c)/2)| > 0$ (as $|(\theta_2 - \theta_1)"
        r"(u_b - u_c)| < 6 < 2\pi$)."),
    source=(Source(where="Abstract (the SCA readout exactly retrieves any individual token from "
                         "the prefix summary; softmax attention as a special case in the "
                         "continuous limit) and the introduction's first paragraph", tag="V",
                   **NAUTILE),
            Source(where="SCA's definition in the author's code: kerighan/seqcond, "
                         "seqcond/torch/seqcond.py and seqcond/jax/seqcond_fast.py at commit "
                         "360d9d6; num_thetas = 2 in ModelConfig.large (~370M)", tag="V",
                   **NAUTILE),
            Source(where="this reading of the retrieval lemma and the M = 2 limitation, "
                         "derived here (the paper's own statement was not read)", tag="D",
                   **NAUTILE)),
    kind="construction", construction="constructions.seqcond:sca_state",
    notes="Not registered: the lemma's second half, that SCA reproduces any softmax-attention "
          "output in the continuous limit. In the code p_j depends on token j alone, so a "
          "query can weight tokens only through its readout coefficients, i.e. through a "
          "function of each key coordinate's phase; whether the paper's limit is over the "
          "number of points, their range (the code caps theta at 3) or both is in the body, "
          "which was not read. The layer also mixes heads after a gated RMSNorm, so several "
          "heads reading one key coordinate act like more points; the M = 2 sentence is about "
          "one coordinate's readout. Sources tried for the definition: the arXiv HTML page "
          "(abstract and introduction only), the model card trickstr-ai/nautile-370m, and the "
          "code, found by searching public code for SeqCondAttention.")


# --- the summary at M >= t points ----------------------------------------------------------------

@st.composite
def prefixes(draw) -> dict:
    """t distinct keys from {-3, ..., 3} times a scale, log-uniform weights in [1e-4, 5000]
    (the code's clamp), M in t..t+2 points on the grid 3(m+1)/M."""
    t = draw(st.integers(1, 5))
    grid = draw(st.permutations(range(-3, 4)))[:t]
    scale = draw(st.sampled_from([0.5, 1.0, 2.0]))
    generator = torch.Generator().manual_seed(draw(seeds()))
    log_weights = torch.empty(t, dtype=torch.float64).uniform_(math.log(1e-4), math.log(5000),
                                                               generator=generator)
    return {"keys": scale * torch.tensor(grid, dtype=torch.float64),
            "weights": log_weights.exp(), "M": t + draw(st.integers(0, 2)),
            "phase_scale": draw(st.sampled_from([0.5, 1.0, 3.0]))}


def real_form(V: torch.Tensor) -> torch.Tensor:
    """The real (2M, 2t) matrix of a complex (M, t) one: the same singular values, doubled."""
    return torch.cat([torch.cat([V.real, -V.imag], 1), torch.cat([V.imag, V.real], 1)], 0)


def certified_rank_margin(V: torch.Tensor) -> float:
    """A lower bound on the exact matrix's smallest singular value (tall V): the computed one's
    certified bound less the Frobenius norm of the entrywise error (Weyl)."""
    perturbation = ENTRY_ERROR * math.sqrt(4 * V.shape[0] * V.shape[1])
    return sigma_min_lower_bound(real_form(V)) - perturbation


def retrieval_check(state=sca_state, phases=sca_phases):
    @budget(0.4)
    @given(case=prefixes())
    @example(case={"keys": torch.tensor([-1.5, 1.0, 1.5, 0.5, -0.5], dtype=torch.float64),
                   "weights": torch.tensor([1e-4, 5000.0, 1.0, 3.0, 0.2], dtype=torch.float64),
                   "M": 5, "phase_scale": 1.0})
    def run(case):
        keys, weights, M, c = case["keys"], case["weights"], case["M"], case["phase_scale"]
        t = keys.shape[0]
        thetas = torch.tensor([3.0 * (m + 1) / M for m in range(M)], dtype=torch.float64)
        V = spectral_matrix(phases(keys, c), thetas)                      # (M, t)
        margin = certified_rank_margin(V)
        evidence.margin(margin)
        assert margin > 0, (
            f"M={M} points do not certify rank t={t} (sigma_min margin {margin:.3g})")
        summary = state(keys, weights, thetas, c)[-1]                     # S_t(theta_m), (M,)
        a = weights * keys / weights.sum()
        for j_star in range(t):
            target = torch.zeros(t, dtype=torch.complex128)
            target[j_star] = 1
            coefficients = torch.linalg.lstsq(V.T, target[:, None], driver="gelsd").solution[:, 0]
            residual = (V.T @ coefficients - target).abs()
            exact_residual = (residual + gamma(M + 2) * (V.abs().T @ coefficients.abs())
                              + ENTRY_ERROR * float(coefficients.abs().sum()))
            out = sca_readout(summary, coefficients)
            tol = (float(a.abs().sum() * exact_residual.max())
                   + gamma(2 * t + 20) * float(a.abs().sum() * coefficients.abs().sum())
                   + gamma(M + 4) * float((coefficients.abs() * summary.abs()).sum()))
            err = abs(complex(out) - float(a[j_star]))
            if tol > 0:  # tol = 0 only for keys all 0: a, the summary and the readout are 0
                evidence.ratio(err / tol)
            assert err <= tol, (
                f"the readout for token {j_star} is {complex(out):.6g}, not p k / sum p = "
                f"{float(a[j_star]):.6g} (|difference| {err:.3g} > {tol:.3g})")
    return run


test_the_summary_at_enough_points_determines_every_token = check(SCA_RETRIEVAL, "property")(
    retrieval_check())


# --- M = 2: no readout isolates a token among three keys ------------------------------------------

@st.composite
def three_keys(draw) -> dict:
    """Two points 0.05 or more apart in [0.001, 3], three phases from a grid of step 0.1 in
    (-1, 1): the certified minors stay far above rounding."""
    thetas = sorted(draw(st.lists(st.integers(0, 60), min_size=2, max_size=2, unique=True)))
    phases = draw(st.lists(st.integers(-9, 9), min_size=3, max_size=3, unique=True))
    return {"thetas": [max(0.05 * k, THETA_RANGE[0]) for k in thetas],
            "phases": [0.1 * p for p in phases]}


def isolation_check(num_thetas: int = NAUTILE_NUM_THETAS):
    @budget(0.3)
    @given(case=three_keys())
    @example(case={"thetas": [2.95, 3.0], "phases": [0.9, -0.9, 0.8]})   # close points
    def run(case):
        low, high = case["thetas"]
        thetas = torch.linspace(low, high, num_thetas, dtype=torch.float64)
        phases = torch.tensor(case["phases"], dtype=torch.float64)
        V = spectral_matrix(phases, thetas).T                             # (3, M): g at u_j
        for j_star in range(3):
            target = torch.zeros(3, 1, dtype=torch.complex128)
            target[j_star] = 1
            augmented = torch.cat([V, target], dim=1)                     # (3, M + 1)
            margin = (certified_rank_margin(augmented) if augmented.shape[1] <= 3 else
                      -math.inf)
            evidence.margin(margin)
            assert margin > 0, (
                f"with M={num_thetas} points a readout can isolate key {j_star} among three "
                f"(e_j* is not certified outside the readouts' span)")
            b, c = (j for j in range(3) if j != j_star)
            minor = V[b, 0] * V[c, 1] - V[b, 1] * V[c, 0]
            closed = 2 * abs(math.sin(float((thetas[-1] - thetas[0])
                                            * (phases[b] - phases[c])) / 2))
            assert abs(float(minor.abs()) - closed) <= 8 * ENTRY_ERROR, (
                f"the minor's modulus {float(minor.abs()):.6g} is not 2|sin(...)| = {closed:.6g}")
    return run


test_two_points_cannot_isolate_one_of_three_keys = check(SCA_RETRIEVAL, "property")(
    isolation_check())


def symbolic_minor_check():
    """SymPy: the 2 x 2 minor times its conjugate is 4 sin^2((theta_2 - theta_1)(u_b - u_c)/2),
    and (theta_2 - theta_1)(u_b - u_c) ranges below 3 * 2 = 6 < 2 pi."""
    def run():
        import sympy as sp

        t1, t2, ub, uc = sp.symbols("theta1 theta2 u_b u_c", real=True)
        minor = sp.exp(sp.I * (t1 * ub + t2 * uc)) - sp.exp(sp.I * (t2 * ub + t1 * uc))
        target = 4 * sp.sin((t2 - t1) * (ub - uc) / 2) ** 2
        # both sides as sums of exponentials: expand makes the difference canonical
        residual = sp.expand(sp.expand(minor * sp.conjugate(minor)) - target.rewrite(sp.exp))
        assert residual == 0, f"|minor|^2 - 4 sin^2(...) = {residual}"
        assert 3 * 2 < 2 * sp.pi, "the phase differences reach 2 pi"
        evidence.cases(1)
    return run


test_the_minor_is_a_sine_symbolically = check(SCA_RETRIEVAL, "symbolic")(symbolic_minor_check())
