r"""von Oswald et al.'s construction of one GD step, and the query leak without the mask (IR.4)."""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.icl_regression import (
    gd_transformed_labels,
    prompt,
    von_oswald,
)
from theorems.areas.icl_regression._shared import VON_OSWALD, gaussian, regression_batches
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence, expect_failure
from theorems.numerics import gamma

IR_VON_OSWALD = Claim(
    id="icl-regression.von-oswald-gd-step",
    title="von Oswald et al.'s layer moves every label by one GD step (masked query or W₀ = 0)",
    statement=(
        r"With tokens $e_j = (x_j, y_j)$, $W_K = W_Q = \begin{pmatrix}I_d&0\\0&0\end{pmatrix}$, "
        r"$W_V = \begin{pmatrix}0&0\\W_0&-1\end{pmatrix}$ ($W_0 \in \mathbb R^{1\times d}$) and "
        r"$P = \mathrm{diag}(0,\eta/n)$, one linear-attention step over the keys "
        r"$i = 1,\dots,n$ maps every token, the query $(x_q, 0)$ included, to "
        r"$(x_j, y_j - \Delta W x_j)$ with $\Delta W = -\tfrac\eta n\sum_{i=1}^n(W_0x_i - y_i)"
        r"x_i^\top$, one GD step on $\tfrac1{2n}\sum_i(Wx_i - y_i)^2$ from $W_0$; so "
        r"$-y_q' = \Delta W x_q$ is the GD prediction when $W_0 = 0$. The same holds without "
        r"masking the query when $W_0 = 0$."),
    source=(Source(where="official code, transformers_learn_icl_by_gd/src/transformer.py "
                         "(include_query=False: the query is not a key; read-out "
                         "h[:, -1, -1] * (-1.0))", tag="V", **VON_OSWALD),
            Source(where="Proposition 1's weights: the official create_weights in "
                         "transformers_learn_icl_by_gd/src/data.py (W_K = W_Q project onto x, "
                         "W_V's last row is (W_0, -1), the projection is diag(0, eta/n))",
                   tag="V", **VON_OSWALD)),
    kind="construction",
    construction="constructions.icl_regression:von_oswald",
    depends_on=("icl-regression.effective-predictor",),
)

IR_VON_OSWALD_LEAK = Claim(
    id="icl-regression.von-oswald-unmasked-any-w0",
    title="Without the query mask, von Oswald's layer is a GD step for every W₀ (false)",
    statement=(
        r"The layer of icl-regression.von-oswald-gd-step with the query also a key (no mask) "
        r"maps every token to $(x_j, y_j - \Delta W x_j)$ for every $W_0$."),
    source=Source(where="the leak caveat of the claim catalogue", tag="D", **VON_OSWALD),
    kind="construction",
    construction="constructions.icl_regression:von_oswald",
    depends_on=("icl-regression.von-oswald-gd-step",),
    correction=(
        r"Unmasked, the query's own value $\eta(W_0x_q - 0)$ joins the sum, and every label "
        r"moves by an extra $\tfrac\eta n(W_0x_q)(x_q^\top x_j)$. The layer is a GD step iff "
        r"the query is masked as a key, or $W_0x_q = 0$ (in particular $W_0 = 0$)."),
    refutes="as-written",
)

# --- IR.4: von Oswald et al. ------------------------------------------------------------------

@st.composite
def von_oswald_cases(draw, claim_hypothesis: bool = True):
    """Prompts, eta, W0 and the mask; with ``claim_hypothesis`` only masked or W0 = 0 cases."""
    X, y, x_query, generator = draw(regression_batches(max_d=4, max_n=12))
    d = X.shape[-1]
    eta = draw(st.floats(-2.0, 2.0, allow_nan=False).filter(lambda v: abs(v) > 1e-3))
    mask = draw(st.booleans())
    zero = draw(st.booleans()) or (claim_hypothesis and not mask)
    W0 = torch.zeros(1, d, dtype=torch.float64) if zero else gaussian(generator, 1, d)
    return X, y, x_query, eta, W0, mask


def von_oswald_tolerance(Z: torch.Tensor, eta: float, W0: torch.Tensor,
                         unmasked: bool) -> torch.Tensor:
    """Entrywise rounding bound: the absolute-value evaluation of the label update, times
    gamma of the longest chain (n + 1 keys, three D-term products, the subtraction)."""
    n, D = Z.shape[-1] - 1, Z.shape[-2]
    keys = Z.abs() if unmasked else Z[..., :n].abs()
    X = keys[..., :-1, :]
    residual = W0.abs()[0] @ X + keys[..., -1, :]
    scale = Z[..., -1, :].abs() + abs(eta) / n * torch.einsum(
        "...i,...di,...dj->...j", residual, X, Z[..., :-1, :].abs())
    return 2 * gamma(n + 1 + 3 * D + 6) * scale


def von_oswald_check(build=von_oswald, claim_hypothesis: bool = True):
    @given(case=von_oswald_cases(claim_hypothesis))
    @example(case=(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64),
                   torch.tensor([[1.0, -1.0]], dtype=torch.float64),
                   torch.tensor([[1.0, 1.0]], dtype=torch.float64), 0.5,
                   torch.tensor([[1.0, 1.0]], dtype=torch.float64), claim_hypothesis))
    # the same prompt unmasked with W0 = 0 (within the claim's hypothesis): pinned, so a layer
    # wrong only without the mask fails on every run, not only when the search draws that
    @example(case=(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64),
                   torch.tensor([[1.0, -1.0]], dtype=torch.float64),
                   torch.tensor([[1.0, 1.0]], dtype=torch.float64), 0.5,
                   torch.zeros(1, 2, dtype=torch.float64), False))
    def run(case):
        X, y, x_query, eta, W0, mask = case
        Z = prompt(X, y, x_query)
        out = build(X.shape[-1], eta, W0, mask_query=mask)(Z)
        expected = gd_transformed_labels(Z, eta, W0)
        tolerance = von_oswald_tolerance(Z, eta, W0, unmasked=not mask)
        # exact: W_PV's x rows are exact zeros, so those rows of the update are sums of
        # products with 0, and Z + 0 leaves them bit for bit
        assert torch.equal(out[..., :-1, :], Z[..., :-1, :]), "the x rows changed"
        err = (out[..., -1, :] - expected[..., -1, :]).abs()
        evidence.margin(float(((tolerance - err) / tolerance).min()))
        assert bool((err <= tolerance).all()), (
            f"labels differ from y_j - dW x_j by {float(err.max()):.3g} "
            f"(mask_query={mask}, |W0| = {float(W0.norm()):.3g})")
    return run


test_von_oswald_layer_is_one_gd_step = check(IR_VON_OSWALD, "property")(von_oswald_check())


def leak_refutation(build=von_oswald):
    """The unmasked claim fails, and the failure is exactly the predicted leak."""
    def run():
        report = expect_failure(von_oswald_check(build, claim_hypothesis=False))
        evidence.counterexample(report)
        X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
        y = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
        x_query = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
        W0, eta = torch.tensor([[1.0, 1.0]], dtype=torch.float64), 0.5
        Z = prompt(X, y, x_query)
        n = Z.shape[-1] - 1
        leak = build(2, eta, W0, mask_query=False)(Z)[..., -1, :] - gd_transformed_labels(
            Z, eta, W0)[..., -1, :]
        predicted = eta / n * float(W0[0] @ x_query[0]) * (x_query[0] @ Z[0, :-1, :])
        evidence.metric("leak into the query label", float(leak[0, -1]))
        tolerance = von_oswald_tolerance(Z, eta, W0, unmasked=True)
        assert bool(((leak[0] - predicted).abs() <= tolerance[0]).all()), (
            f"the leak {leak[0].tolist()} is not eta/n (W0 x_q)(x_q^T x_j) = {predicted.tolist()}")
        assert float(predicted.abs().min()) > float(tolerance.max())  # a real, nonzero leak
    return run


test_unmasked_von_oswald_leaks_the_query = check(IR_VON_OSWALD_LEAK, "refutation")(
    leak_refutation())


