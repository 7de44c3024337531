r"""In-context deep learning (Wu, Su, Hu, Song, Liu 2025, arXiv:2411.16549), the toy case N = 2.

The paper's abstract states an explicit (2N+4)L-layer transformer that simulates L GD steps of
an N-layer ReLU network in context [V]; only the abstract and first page were read. Checked here:
this project's explicit construction for N = 2 against autograd GD step by step, with a derived
rounding tolerance, on a stated gap condition (narrowed: inside the gap the step is not GD), and
its layer count against the formula.
"""

from __future__ import annotations

import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from constructions.icdl import DEPTH, gd_step_reference, icdl_transformer, layer_count
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.strategies import seeds

WU = {"arxiv": "2411.16549", "ref": "Wu, Su, Hu, Song, Liu (2025), ICML"}
ABSTRACT = Source(where="Abstract: an explicit (2N+4)L-layer transformer simulates L GD steps "
                        "of an N-layer ReLU network", tag="V", **WU)

ICDL_GD = Claim(
    id="cot-and-looping.icdl-two-layer-gd",
    title="An explicit ReLU-attention transformer runs GD on an in-context two-layer ReLU "
          "network, exactly on a gap condition (our construction, N = 2)",
    statement=(
        r"Let $f(x) = w_2^\top\mathrm{relu}(W_1x)$, $W_1 \in \mathbb R^{H\times d}$, and "
        r"$\mathcal L = \frac1{2n}\sum_{i\le n}(f(x_i) - y_i)^2$. The transformer "
        r"`icdl_transformer(n, d, H, L, eta, gap=eps, big=M)` maps the tokens "
        r"$(W_1, w_2), (x_1, y_1), \dots, (x_n, y_n)$ through $L$ blocks; block $l$ returns "
        r"$\theta_{l+1} = \theta_l - \eta\nabla\mathcal L(\theta_l)$ (the autograd "
        r"gradient, with $\mathrm{relu}'(0) = 0$) in exact arithmetic whenever every "
        r"pre-activation $u_{ir} = W_{1,r}x_i$ at $\theta_l$ avoids $(0, \epsilon)$ and "
        r"$|r_iw_{2,r}| < M$. In float64 each block differs from the autograd step taken "
        r"from the same $\theta_l$ by at most $2\gamma_K\,\bar\theta_{l+1}$ entrywise, "
        r"$K = 2d + H + n + 10$, where $\bar\theta_{l+1} = |\theta_l| + \eta\bar G$ is the "
        r"step evaluated on absolute values, provided $u_{ir} \notin (-\tau, \epsilon + "
        r"\tau)$, $\tau = \gamma_d\sum_k|W_{1,rk}x_{ik}|$. Inside the gap the step is not GD: "
        r"the statement is narrowed to the gap condition."),
    source=(ABSTRACT,
            Source(where="the construction, the gap condition and the tolerance (this project; "
                         "the paper's construction was not read)", tag="D", **WU)),
    kind="construction",
    construction="constructions.icdl:icdl_transformer",
)


def step_tolerance(X, y, W1, w2, eta: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Entrywise bound on |construction - autograd| for one step from (W1, w2).

    Both compute, on a fixed activation pattern, a polynomial of the inputs; every monomial of
    the updated weight passes through at most :math:`K = 2d + H + n + 10` roundings (u: d;
    f: H; r: 1; the product r h or g = r w2 and delta x: up to d more and 2; the n-term
    aggregation: n + 1; 1/n: 2; the update: 2; autograd's own order fits the same count), so
    each side is within :math:`\gamma_K` times the polynomial on absolute values of the exact
    step (Higham, Lemma 3.1), and the two sides within twice that.
    """
    n, d = X.shape
    H = W1.shape[0]
    active = (X @ W1.T > 0).to(X.dtype)                         # (n, H)
    h_abs = active * (X.abs() @ W1.abs().T)                     # (n, H)
    r_abs = h_abs @ w2.abs() + y.abs()                           # (n,)
    G2_abs = (r_abs[:, None] * h_abs).sum(0) / n                 # (H,)
    G1_abs = ((r_abs[:, None] * w2.abs() * active).T @ X.abs()) / n   # (H, d)
    K = 2 * d + H + n + 10
    return (2 * gamma(K) * (W1.abs() + eta * G1_abs),
            2 * gamma(K) * (w2.abs() + eta * G2_abs))


def gap_holds(X, y, W1, w2, gap: float, big: float) -> bool:
    """The premise at one step: pre-activations clear of (-tau, gap + tau), |r w2| < big."""
    u = X @ W1.T
    tau = gamma(X.shape[1]) * (X.abs() @ W1.abs().T)
    clear = bool(((u <= -tau) | (u >= gap + tau)).all())
    r = torch.relu(u) @ w2 - y
    return clear and bool(((r[:, None] * w2).abs() < big / 2).all())


def problems():
    return st.tuples(st.integers(1, 10), st.integers(1, 3), st.integers(1, 3),
                     st.integers(1, 3), st.sampled_from([0.01, 0.1, 0.5]), seeds())


def gd_check(build=icdl_transformer, gap: float = 2.0**-20, big: float = 2.0**20):
    @given(problem=problems())
    @example(problem=(8, 2, 2, 2, 0.1, 0))       # the catalogue's toy case, L = 2
    def run(problem):
        n, d, H, L, eta, seed = problem
        g = torch.Generator().manual_seed(seed)
        X, y = (torch.randn(n, d, generator=g, dtype=torch.float64),
                torch.randn(n, generator=g, dtype=torch.float64))
        W1, w2 = (torch.randn(H, d, generator=g, dtype=torch.float64),
                  torch.randn(H, generator=g, dtype=torch.float64))
        model = build(n, d, H, L, eta, gap=gap, big=big)
        iterates = model.iterates(X, y, W1, w2)
        assert len(iterates) == L + 1, f"{len(iterates) - 1} blocks for L = {L} steps"
        for l in range(L):
            W1_l, w2_l = iterates[l]
            assume(gap_holds(X, y, W1_l, w2_l, gap, big))
            W1_ref, w2_ref = gd_step_reference(X, y, W1_l, w2_l, eta)
            tol1, tol2 = step_tolerance(X, y, W1_l, w2_l, eta)
            err1 = (iterates[l + 1][0] - W1_ref).abs()
            err2 = (iterates[l + 1][1] - w2_ref).abs()
            worst = max(float((err1 / tol1).max()), float((err2 / tol2).max()))
            evidence.ratio(worst)
            assert bool((err1 <= tol1).all()) and bool((err2 <= tol2).all()), (
                f"step {l + 1}: |construction - autograd| exceeds the rounding bound "
                f"(ratio {worst:.3g})")
    return run


test_gd_steps_match_autograd = check(ICDL_GD, "property")(budget(0.4)(gd_check()))


def gap_needed_check(build=icdl_transformer, gap: float = 2.0**-20):
    """Narrowing: one pre-activation inside (0, gap) makes the block leave GD."""
    def run():
        X = torch.tensor([[gap / 4, 0.0], [1.0, 1.0]], dtype=torch.float64)  # u_1 = gap/4
        y = torch.tensor([1.0, -1.0], dtype=torch.float64)
        W1 = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
        w2 = torch.tensor([1.0], dtype=torch.float64)
        model = build(2, 2, 1, 1, 0.5, gap=gap)
        W1_new, _ = model(X, y, W1, w2)
        W1_ref, _ = gd_step_reference(X, y, W1, w2, 0.5)
        tol1, _ = step_tolerance(X, y, W1, w2, 0.5)
        excess = float(((W1_new - W1_ref).abs() / tol1).max())
        evidence.metric("error / rounding bound inside the gap", excess, worse="lower")
        evidence.cases(1)
        assert excess > 1, "a pre-activation inside the gap still gave the GD step"
    return run


test_the_gap_condition_is_needed = check(ICDL_GD, "numeric")(gap_needed_check())


ICDL_LAYERS = Claim(
    id="cot-and-looping.icdl-layer-count",
    title="The N = 2 construction uses (2N + 4)L layers",
    statement=(
        r"Counting each residual sublayer (a ReLU attention or a ReLU MLP) as a layer, "
        r"`icdl_transformer(..., steps=L)` has exactly $(2N + 4)L = 8L$ layers for $N = 2$, "
        r"the paper's formula; each of its $L$ blocks of $2N + 4$ layers is one GD step "
        r"(cot-and-looping.icdl-two-layer-gd). The split (N forward, N backward, loss "
        r"derivative, aggregation, update, clean-up) is ours; the paper's is unread."),
    source=(ABSTRACT, Source(where="the layer convention and the split (this project)",
                             tag="D", **WU)),
    kind="construction",
    construction="constructions.icdl:icdl_transformer",
    depends_on=("cot-and-looping.icdl-two-layer-gd",),
)


def layer_count_check(build=icdl_transformer):
    @given(n=st.integers(1, 6), d=st.integers(1, 3), H=st.integers(1, 3), L=st.integers(1, 6))
    def run(n, d, H, L):
        model = build(n, d, H, L, 0.1)
        assert model.num_layers == layer_count(DEPTH, L), (
            f"{model.num_layers} layers, the formula gives {layer_count(DEPTH, L)}")
    return run


test_layer_count_matches_the_formula = check(ICDL_LAYERS, "property")(
    budget(0.2)(layer_count_check()))
