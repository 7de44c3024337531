"""Mutants and bad input for the Pre-LN/Post-LN gradient area (Xiong et al. 2020)."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from empirics.compare import loglog_slope
from empirics.prenorm_gradients import (
    MeanFieldTransformer,
    lemma_band,
    mean_field_transformer,
    measure_point,
    point_seed,
)
from theorems.areas.prenorm_gradients import gradient_slope_check, norm_band_check
from theorems.evidence import expect_failure
from theorems.numerics import gamma


def he_initialised(arch, depth, d, **kwargs):
    """He initialisation, N(0, 2/d): the FFN then adds d instead of d/2 per layer."""
    return mean_field_transformer(arch, depth, d, weight_std=math.sqrt(2 / d), **kwargs)


@pytest.mark.training
@pytest.mark.mutant("prenorm-gradients.residual-norm-band")
def test_he_initialisation_breaks_the_norm_band():
    report = expect_failure(norm_band_check(build=he_initialised))
    assert "outside Lemma 2" in report


@pytest.mark.training
@pytest.mark.mutant("prenorm-gradients.last-layer-gradient")
def test_dropping_the_final_layer_norm_breaks_the_pre_ln_slope():
    # without the final LN the output grows with depth, the softmax saturates, and the
    # gradient no longer shrinks as L^-1/2
    report = expect_failure(gradient_slope_check(build=partial(mean_field_transformer,
                                                               final_norm=False)))
    assert "pre-LN" in report


def _weights(model: MeanFieldTransformer) -> list[torch.Tensor]:
    """``W_V, W_O, W_1, W_2`` of ``model``, cloned, ``W_2`` with its last layer re-attached."""
    W_2 = torch.cat([model.W_2_hidden, model.W_2_last[None]]).detach()
    return [w.detach().clone() for w in (model.W_V, model.W_O, model.W_1, W_2)]


def _last_layer_gradient(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    model = MeanFieldTransformer("pre", *weights, final_norm=True)
    model(x).square().mean(dim=(1, 2)).sum().backward()
    return model.W_2_last.grad


def test_the_trial_batch_gives_each_trial_its_own_gradient():
    d, depth, tokens = 8, 3, 5
    batched = mean_field_transformer("pre", depth, d, trials=2, seed=3)
    x = torch.randn(2, tokens, d, generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64)
    reference = _last_layer_gradient(_weights(batched), x)
    generator = torch.Generator().manual_seed(1)
    for t in range(2):
        # the other trial gets new weights and a new input; trial t keeps its own
        weights, y = _weights(batched), x.clone()
        other = 1 - t
        for w in weights:
            w[:, other] = torch.randn(w[:, other].shape, generator=generator,
                                      dtype=torch.float64) / math.sqrt(d)
        y[other] = torch.randn(y[other].shape, generator=generator, dtype=torch.float64)
        gradient = _last_layer_gradient(weights, y)
        # exact: the two runs perform the same operations, on tensors of the same shapes and
        # strides (so the same kernels and summation orders), and trial t's entries read only
        # trial t's numbers (batched matmuls, per-row LayerNorm and ReLU, means over the
        # tokens of one trial; the loss is a sum over trials, whose backward gives each trial
        # the exact seed 1), which are bit-identical: its gradient is bit-identical. (A
        # comparison with a one-trial model would not be: a batch of 1 may take another
        # kernel, so another summation order.)
        assert torch.equal(gradient[t], reference[t]), f"trial {t} depends on the other trial"
        # the replaced trial's gradient did change, so the comparison can fail
        assert not torch.equal(gradient[other], reference[other])


def test_post_ln_state_has_the_exact_layer_norm_part():
    model = mean_field_transformer("post", 1, 16, trials=3, seed=1)
    x = torch.randn(3, 4, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    ratio = model.residual_norms(x)
    # x^{post,5} = LN(.) + FFN(LN(.)): norm^2/d = 1 + FFN part + cross term, finite and > 0
    assert ratio.shape == (3,) and bool((ratio > 0).all())


def _loglog_balls(x, y, sem):
    r"""arb balls containing ``loglog_slope(x', y', sem)``'s float64 slope and (delta-method)
    standard error for all inputs ``x', y'`` in the balls ``x, y``: its formula evaluated in
    ball arithmetic, each operation widened by its rounding (:math:`u` relative for +, -, *,
    /, sqrt; :math:`2u` for log and exp, 1 ulp assumed; :math:`\gamma_k` of the magnitudes
    for a k-term sum, any order)."""
    from flint import arb

    def widen(v, relative):
        return v + arb(0, float(abs(v).upper()) * relative)

    def total(terms):
        size = sum(float(abs(t).upper()) for t in terms)
        return sum(terms, arb(0)) + arb(0, gamma(len(terms)) * size)

    n = len(x)
    lx = [widen(v.log(), 2 * gamma(1)) for v in x]
    ly = [widen(v.log(), 2 * gamma(1)) for v in y]
    mean = widen(total(lx) / n, gamma(1))
    centred = [widen(v - mean, gamma(1)) for v in lx]
    sxx = total([widen(v * v, gamma(1)) for v in centred])
    c = [widen(v / sxx, gamma(1)) for v in centred]
    slope = total([widen(ci * li, gamma(1)) for ci, li in zip(c, ly, strict=True)])
    relative = [widen(arb(s) / widen(v.exp(), 2 * gamma(1)), gamma(1))
                for s, v in zip(sem, ly, strict=True)]
    variance = total([widen(widen(ci * ci, gamma(1)) * widen(r * r, gamma(1)), gamma(1))
                      for ci, r in zip(c, relative, strict=True)])
    return slope, widen(variance.sqrt(), gamma(1))


def test_lemma_band_and_slope_helpers():
    from flint import arb, ctx

    assert lemma_band("post", 7) == (1.5, 1.5)
    assert lemma_band("pre", 4) == (3.0, 7.0)
    depths = [1, 2, 4, 8]
    fit = loglog_slope(depths, [3.0 * L ** -0.5 for L in depths], sem=[0.0] * 4)
    # exact: sem 0 gives relative errors 0 / exp(.) = 0 and a square root of 0
    assert fit["se"] == 0.0
    with ctx.workprec(128):
        # the exact power law 3 L^(-1/2) within gamma_3 (a 1-ulp pow and a product): the
        # float slope lies in the ball, which holds the exact slope -1/2 of the exact data
        exact = [arb(3) / arb(L).sqrt() for L in depths]
        y = [v + arb(0, gamma(3) * float(v.upper())) for v in exact]
        slope, _ = _loglog_balls([arb(L) for L in depths], y, [0.0] * 4)
        assert slope.contains(arb(fit["slope"])) and slope.contains(arb(-0.5)), slope
        # y = 1: log 1 = 0 and exp 0 = 1 exactly, so the SE is 0.1 sqrt(sum c_k^2): c_k =
        # (x_k - mean x)/Sxx for x = k log 2, k = 0..3, sum c_k^2 = 1/Sxx, Sxx = 5 log(2)^2
        se = loglog_slope(depths, [1.0] * 4, sem=[0.1] * 4)["se"]
        _, ball = _loglog_balls([arb(L) for L in depths], [arb(1)] * 4, [0.1] * 4)
        assert ball.contains(arb(se)), (ball, se)
        assert ball.contains(arb(0.1) / (arb(5).sqrt() * arb(2).log()))
    assert len({point_seed(0, a, L, c) for a in ("pre", "post") for L in (1, 2)
                for c in (0, 1)}) == 8


def test_measure_point_reports_one_value_per_trial():
    out = measure_point({"arch": "post", "depth": 2, "d": 8, "tokens": 4, "trials": 3,
                         "seed": 0, "chunk": 0, "dtype": "float64", "device": "cpu"})
    assert len(out["grad_norm"]) == 3 == len(out["norm_ratio"])
    assert all(g > 0 for g in out["grad_norm"])


@pytest.mark.parametrize("kwargs, error, match", [
    ({"arch": "mid"}, ValueError, "arch"),
    ({"depth": 0}, ValueError, "depth"),
    ({"depth": 2.0}, TypeError, "depth"),
    ({"d": 1}, ValueError, "d must"),
    ({"trials": 0}, ValueError, "trials"),
    ({"ffn_width": 0}, ValueError, "ffn_width"),
    ({"weight_std": -1.0}, ValueError, "weight_std"),
    ({"final_norm": "yes"}, TypeError, "final_norm"),
    ({"dtype": torch.int64}, ValueError, "dtype"),
])
def test_builder_rejects_bad_arguments(kwargs, error, match):
    arguments = {"arch": "pre", "depth": 2, "d": 8} | kwargs
    arch, depth, d = arguments.pop("arch"), arguments.pop("depth"), arguments.pop("d")
    with pytest.raises(error, match=match):
        mean_field_transformer(arch, depth, d, **arguments)


# --- valid example arguments for tests/test_public_api.py ---------------------------------------

PUBLIC_API_EXAMPLES = {
    "prenorm_gradients.mean_field_transformer": lambda: {"arch": "pre", "depth": 1, "d": 2},
}
