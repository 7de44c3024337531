r"""IR.7 (a): the forward pass of the construction is one gradient step on in-context OLS, for
every sequence."""

from __future__ import annotations

import math

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.ar_mesa import (
    X1_KINDS,
    ar_mesa_layer,
    ar_sequences,
    one_step_gd_predictions,
    sample_x1,
)
from constructions.ar_mesa_bounds import one_step_tolerance
from theorems.areas.ar_mesa._shared import MODEL_SOURCE, ZHENG
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.strategies import seeds

AR_ONE_STEP = Claim(
    id="ar-mesa.one-gd-step",
    title="The AR linear-attention construction predicts with one GD step on in-context OLS",
    statement=(
        r"For every sequence $x_1, \dots, x_T \in \mathbb C^d$ (not only AR ones), tokens "
        r"$e_t = (x_t; x_{t-1})$ with $x_0 = 0$, and real $a, b$, the causal linear attention "
        r"with $W_{KQ}[d{:},{:}d] = aI_d$, $W_{PV}[:,{:}d] = bI_d$ (zeros elsewhere) predicts "
        r"$\hat y_t = \widehat W_t x_t$ for $t = 2,\dots,T$, where "
        r"$\widehat W_t = W_0 - ab\,\nabla_W L_t(W_0)$ at $W_0 = 0$ is one gradient step with "
        r"learning rate $ab$ on $L_t(W) = \frac{1}{2(t-1)}\sum_{i=2}^t\lVert x_i - W x_{i-1}"
        r"\rVert^2$, i.e. $\widehat W_t = \frac{ab}{t-1}\sum_{i=2}^t x_i x_{i-1}^{\mathsf H}$ "
        r"(and $\hat y_1 = 0$)."),
    source=(MODEL_SOURCE,
            Source(where="the exact identity for every sequence, derived here", tag="D",
                   **ZHENG)),
    kind="identity",
    construction="constructions.ar_mesa:ar_mesa_layer",
)


# --- strategies ----------------------------------------------------------------------------

@st.composite
def sequences(draw, max_T: int = 12, max_d: int = 4) -> torch.Tensor:
    """``(B, T, d)`` complex sequences: AR ones from each start kind, or arbitrary ones."""
    B, T, d = draw(st.integers(1, 3)), draw(st.integers(2, max_T)), draw(st.integers(1, max_d))
    generator = torch.Generator().manual_seed(draw(seeds()))
    scale = 10.0 ** draw(st.floats(-2, 1))
    kind = draw(st.sampled_from((*X1_KINDS, "arbitrary")))
    if kind == "arbitrary":
        parts = torch.randn(B, T, d, 2, generator=generator, dtype=torch.float64)
        return scale * torch.view_as_complex(parts)
    x1 = sample_x1(kind, B, d, scale=scale, generator=generator)
    theta = None
    if draw(st.booleans()):  # phases 0 and pi: W = +-I, where every term aligns
        theta = math.pi * torch.randint(2, (B, d), generator=generator).double()
    return ar_sequences(x1, T, theta=theta, generator=generator)


def step_sizes() -> st.SearchStrategy[float]:
    return st.floats(-4, 4, allow_nan=False).filter(lambda v: abs(v) > 1e-3)


# --- IR.7 (a): the forward pass is one GD step ----------------------------------------------

def explicit_step(x: torch.Tensor, lr: float) -> torch.Tensor:
    r"""The statement's closed form :math:`\widehat W_t x_t`, :math:`\widehat W_t =
    \frac{\mathrm{lr}}{t-1}\sum_{i=2}^t x_i x_{i-1}^{\mathsf H}` (0 at :math:`t = 1`)."""
    previous = torch.cat([torch.zeros_like(x[..., :1, :]), x[..., :-1, :]], dim=-2)  # x_0 = 0
    rho = torch.arange(x.shape[-2], dtype=torch.float64).clamp_min(1)[:, None, None]
    W = lr * (x[..., :, None] * previous[..., None, :].conj()).cumsum(-3) / rho
    return (W @ x[..., None])[..., 0]


def one_step_check(build=ar_mesa_layer, closed_form=explicit_step):
    @given(x=sequences(), a=step_sizes(), b=step_sizes())
    @example(x=torch.ones(1, 2, 1, dtype=torch.complex128), a=1.0, b=1.0)  # shortest context
    def run(x, a, b):
        d = x.shape[-1]
        predicted = build(d, a, b)(x)
        oracle = one_step_gd_predictions(x, a * b)
        tolerance = one_step_tolerance(x, a, b)
        error = (predicted - oracle).abs()
        # entries whose absolute-value bound is 0 (t = 1, zero inputs) must be exactly 0
        bounded = tolerance > 0
        if bool(bounded.any()):
            evidence.margin(float(((tolerance - error)[bounded] / tolerance[bounded]).min()))
        assert bool((error <= tolerance).all()), (
            f"prediction differs from one GD step by {float(error.max()):.3g} (tolerance "
            f"{float(tolerance.max()):.3g}), first at t={(error > tolerance).nonzero()[0, -2] + 1}")
        # "i.e.": the closed form against the autograd step, within one_step_tolerance
        gap = (closed_form(x, a * b) - oracle).abs()
        assert bool((gap <= tolerance).all()), (
            f"the closed form (ab/(t-1)) sum x_i x_(i-1)^H differs from the GD step by "
            f"{float(gap.max()):.3g}")
    return run


test_the_prediction_is_one_gradient_step = check(AR_ONE_STEP, "property")(one_step_check())
