"""Exports of constructions (``constructions/export.py``): TransformerLens round trips,
safetensors save/load, and clear errors for what does not export.

The round trips are checks built by factories, like the checks of ``theorems/``: each takes
the export (or the saver and loader) under test, so a mutant rebuilds it around a broken one
(the attention scale left unfolded, TransformerLens's weight processing, the BOS left out, a
loader that ignores the saved weights, a saver that rounds through float32) and asserts with
``expect_failure`` that the check then fails.

Tests that need the ``interop`` extra are marked ``interop``; without transformer-lens or
safetensors they skip and say why, except under ``THEOREMS_REQUIRE_EXTRAS``, where ``.ci/run``
installs the extra, so there a missing package fails (``tests/interop_support.py``). Every
export test runs on TransformerLens 4.x, where ``to_transformer_lens`` returns a
``TransformerBridge``; the few that test ``HookedTransformer`` itself (its weight processing, its
circuit hooks) skip there, saying that they need TransformerLens < 4.
"""

from __future__ import annotations

import copy
import doctest
import functools
import importlib
import importlib.util
import json
import math
import os
import re
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from interop_support import (
    NEEDS_HOOKED_TRANSFORMER,
    edited_export,
    has_hooked_transformer,
    require_hooked_transformer,
    required,
)
from torch import nn

from constructions import boltzmann as bz
from constructions import export
from constructions import fact_mlps as fm
from constructions.export import (
    UnsupportedConstructionError,
    build,
    build_call,
    load,
    save,
    to_transformer_bridge,
    to_transformer_lens,
    transformer_bridge_inputs,
    transformer_lens_inputs,
    transformer_lens_layout,
    transformer_lens_outputs,
)
from constructions.induction_heads import compact_induction, two_layer_induction
from constructions.layernorm import majority_head
from constructions.layers import Attention, L2Norm, Looped
from empirics.prenorm_gradients import mean_field_transformer
from theorems.evidence import expect_failure
from theorems.numerics import gamma, unit_roundoff
from theorems.numerics import gamma as _gamma
from theorems.profiles import budget, without_shrinking
from theorems.strategies import seeds

F64 = torch.float64
INDUCTION = {"two_layer": two_layer_induction, "compact": compact_induction}
# Mutants only need the first failure: no shrinking, and the checks' own example budget.
MUTANT = without_shrinking(max_examples=budget(0.5).max_examples)


@pytest.fixture(scope="module")
def transformer_lens():
    """TransformerLens, any major: ``to_transformer_lens`` builds a ``HookedTransformer`` on
    2.x/3.x and a ``TransformerBridge`` on 4.x."""
    return required("transformer_lens")


@pytest.fixture(scope="module")
def hooked_transformer():
    """TransformerLens with ``HookedTransformer`` (2.x, 3.x); on 4.x the test skips, saying
    that it needs TransformerLens < 4, under ``THEOREMS_REQUIRE_EXTRAS`` too."""
    return require_hooked_transformer()


@pytest.fixture(scope="module")
def transformer_bridge():
    """TransformerLens with ``TransformerBridge.boot_native`` (3.9, 4.x)."""
    module = required("transformer_lens.model_bridge")
    if not hasattr(module.TransformerBridge, "boot_native"):
        if os.environ.get("THEOREMS_REQUIRE_EXTRAS"):
            pytest.fail("every extra is installed (THEOREMS_REQUIRE_EXTRAS), so transformer-lens "
                        "should have TransformerBridge.boot_native")
        pytest.skip(f"transformer-lens {_version('transformer-lens')} has no boot_native")
    return module


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


@pytest.fixture(scope="module")
def safetensors():
    return required("safetensors")


def _gaussian(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _run(tl_model, model: nn.Module, x: torch.Tensor, inputs=transformer_lens_inputs):
    """The export's output (in the construction's format) and its activation cache."""
    with torch.no_grad():
        logits, cache = tl_model.run_with_cache(**inputs(model, x))
    return transformer_lens_outputs(model, logits), cache


def _softmax_relative(n: int, largest: float, dtype: torch.dtype = F64) -> float:
    """Relative rounding of one float64 softmax over ``n`` entries with scores of magnitude
    <= ``largest``: the max-shift's subtraction moves each exponent by <= 2u largest (a factor
    e^{2u largest}), exp within one ulp (2u relative; assumed of torch's CPU exp), the n-term
    sum gamma_n and the division u."""
    u = unit_roundoff(dtype)
    return math.exp(2 * u * largest) * (1 + 2 * u) * (1 + gamma(n, dtype)) * (1 + u) - 1


def _linear_error(x, e_x, W, b, inner: int, dtype: torch.dtype = F64):
    """|exact - computed| of y = x W + b from the input's bound e_x: e_x|W| + gamma_{inner+1}
    (|x||W| + |b|) (the computed x, an inner-term dot product, one more rounding for b)."""
    return e_x @ W.abs() + gamma(inner + 1, dtype) * (x.abs() @ W.abs() + b.abs())


def export_error_bound(model: nn.Module, cache, from_tokens: bool, start: int = 0
                       ) -> dict[str, list[torch.Tensor]]:
    r"""A forward-error bound of the export's float64 forward pass, evaluated along it: for
    every activation, ``|exact - computed|`` entrywise, where *exact* is exact arithmetic on
    the exported float weights, computed from the cached activations and the weights (a
    running absolute-value pass, Higham Ch. 3):

    - the residual stream starts exact (real inputs) or as ``W_E[t] + W_pos`` (``u|x|``);
    - ``y = xW + b`` (``q``, ``k``, ``v``, the MLP's in and out layers, the unembedding):
      ``e_x|W| + gamma_{n+1}(|x||W| + |b|)``, n the contraction's length;
    - the scores ``q.k / s``: ``(e_q|k| + |q|e_k + e_q e_k)/s + gamma_{d_head+1}|q||k|/s``,
      plus ``u|x||W_Q|`` on ``q`` for the scale folded into ``W_Q`` (the export's product
      rounds once unless ``s`` is a power of two; the construction's exact function is the
      export's up to that);
    - the softmax: scores off by <= delta per row move every weight by a factor in
      ``e^{±2 delta}``, and its own rounding is ``sigma`` relative (_softmax_relative):
      ``e_p = p/(1 - sigma) (e^{2 delta} - 1 + sigma)``;
    - ``z = p v``: ``e_p(|v| + e_v) + p e_v + gamma_n p|v|``; the output ``z W_O`` summed over
      heads as one ``H d_head``-term contraction, ``+ b_O``;
    - LayerNorm without weights (``LNPre``, eps = 0): centring is an orthogonal projection and
      ``c -> sqrt(d) c/|c|`` is ``2 sqrt(d)/|c|``-Lipschitz, so the input's error and the
      centring's rounding (``gamma_{d+1}(|x| + mean|x|)``) move the row by at most
      ``2 sqrt(d)|e|_2/|c|``; the normalisation's own rounding is ``gamma_{d+5}|y|``;
    - ReLU is 1-Lipschitz and exact; each residual addition adds ``u|sum|``.
    Another evaluation of the same formula (another summation order or association, zeros
    padded) is within the same bound, as every term is a dot product of the same numbers; so
    is the construction's. The weights are the export's layout (the same for the
    ``HookedTransformer`` and the bridge), the computed activations those of ``cache``.
    ``start`` > 0 bounds the layers from ``start`` on, their input taken as exact.
    """
    layout = transformer_lens_layout(model)
    cfg, W = layout.config, {k: v.to(F64) for k, v in layout.state_dict.items()}
    dtype = cache[f"blocks.{start}.hook_resid_pre"].dtype    # the pass's precision
    u = unit_roundoff(dtype)

    def gamma(n: int) -> float:      # the rounding of the pass's own precision
        return _gamma(n, dtype)
    if cfg.get("normalization_type") not in (None, "LNPre") or cfg.get(
            "positional_embedding_type", "standard") != "standard" or (
            not cfg["attn_only"] and cfg.get("act_fn") != "relu") or (
            cfg.get("normalization_type") == "LNPre" and cfg.get("eps", 0.0) != 0):
        raise NotImplementedError(f"no forward-error bound for this configuration: {cfg}")

    def cached(*names):
        for name in names:
            if name in cache:
                return cache[name].to(F64)
        raise KeyError(names)

    x = cached(f"blocks.{start}.hook_resid_pre")
    e = u * x.abs() if from_tokens and start == 0 else torch.zeros_like(x)
    bounds: dict[str, list[torch.Tensor]] = {"pattern": [], "resid_post": []}

    def normalized(x, e, prefix):
        if cfg.get("normalization_type") is None:
            return x, e
        y = cached(f"{prefix}.hook_normalized", f"{prefix}.hook_out")
        if y.ndim == x.ndim + 1:    # split QKV inputs: every head normalises the same residual
            y = y[..., 0, :]
        d = x.shape[-1]
        c = x - x.mean(-1, keepdim=True)
        centring = gamma(d + 1) * (x.abs() + x.abs().mean(-1, keepdim=True))
        moved = 2 * math.sqrt(d) * (e + centring).norm(dim=-1, keepdim=True) * (
            1 + gamma(d + 2)) / (c.norm(dim=-1, keepdim=True) * (1 - gamma(d + 2)))
        return y, moved + gamma(d + 5) * y.abs()

    D, dh, H = cfg["d_model"], cfg["d_head"], cfg["n_heads"]
    for L in range(start, cfg["n_layers"]):
        A = {name: W[f"blocks.{L}.attn.{name}"] for name in
             ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}
        y, e_y = normalized(x, e, f"blocks.{L}.ln1")
        q, k, v = (cached(f"blocks.{L}.attn.hook_{n}") for n in "qkv")      # (B, n, H, dh)

        def project(y, e_y, W, b):    # (H, D, dh), (H, dh) -> bound (B, n, H, dh)
            return torch.einsum("bnd,hdk->bnhk", e_y, W.abs()) + gamma(D + 1) * (
                torch.einsum("bnd,hdk->bnhk", y.abs(), W.abs()) + b.abs())
        e_q, e_k, e_v = (project(y, e_y, A[f"W_{n}"], A[f"b_{n}"]) for n in "QKV")
        scale = math.sqrt(dh) if cfg.get("use_attn_scale", True) else 1.0
        qk = torch.einsum("bqhk,bphk->bhqp", q.abs(), k.abs()) / scale
        if math.log2(scale) != int(math.log2(scale)):     # the fold's product rounds once
            e_q = e_q + u * torch.einsum("bnd,hdk->bnhk", y.abs(), A["W_Q"].abs())
        e_s = (torch.einsum("bqhk,bphk->bhqp", e_q, k.abs() + e_k)
               + torch.einsum("bqhk,bphk->bhqp", q.abs(), e_k)) / scale \
            + gamma(dh + 1) * qk
        n = q.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool)    # the keys each query attends to
        if cfg.get("attention_dir", "causal") == "causal":
            causal = causal.tril()
        p = cached(f"blocks.{L}.attn.hook_pattern")                           # (B, H, q, p)
        delta = torch.where(causal, e_s, 0.0).amax(-1, keepdim=True)
        largest = float(torch.where(causal, cached(f"blocks.{L}.attn.hook_attn_scores").abs(),
                                    0.0).max())
        sigma = _softmax_relative(n, largest, dtype)
        e_p = torch.where(causal, p / (1 - sigma) * (torch.expm1(2 * delta) + sigma), 0.0)
        bounds["pattern"].append(e_p)
        z = cached(f"blocks.{L}.attn.hook_z")                                 # (B, n, H, dh)
        e_z = torch.einsum("bhqp,bphk->bqhk", e_p, v.abs() + e_v) \
            + torch.einsum("bhqp,bphk->bqhk", p, e_v) \
            + gamma(n) * torch.einsum("bhqp,bphk->bqhk", p, v.abs())
        e_out = torch.einsum("bqhk,hkd->bqd", e_z, A["W_O"].abs()) + gamma(H * dh + 1) * (
            torch.einsum("bqhk,hkd->bqd", z.abs(), A["W_O"].abs()) + A["b_O"].abs())
        attn_out = cached(f"blocks.{L}.hook_attn_out")
        x = x + attn_out            # the residual addition, as the cached resid_mid/post
        e = e + e_out + u * x.abs()
        if not cfg["attn_only"]:
            y, e_y = normalized(x, e, f"blocks.{L}.ln2")
            M = {name: W[f"blocks.{L}.mlp.{name}"] for name in ("W_in", "b_in", "W_out", "b_out")}
            e_pre = _linear_error(y, e_y, M["W_in"], M["b_in"], D, dtype)
            post = cached(f"blocks.{L}.mlp.hook_post")
            e_mlp = _linear_error(post, e_pre, M["W_out"], M["b_out"], cfg["d_mlp"], dtype)
            x = x + cached(f"blocks.{L}.hook_mlp_out")
            e = e + e_mlp + u * x.abs()
        bounds["resid_post"].append(e)
    y, e_y = normalized(x, e, "ln_final")
    bounds["logits"] = [_linear_error(y, e_y, W["unembed.W_U"], W["unembed.b_U"], D, dtype)]
    return bounds


def assert_within(theirs: torch.Tensor, ours: torch.Tensor, tolerance: torch.Tensor,
                  what: str) -> None:
    """Entrywise ``|theirs - ours| <= tolerance``: two evaluations of the same formula, each
    within :func:`export_error_bound` of exact arithmetic (so twice it bounds their gap)."""
    assert theirs.shape == ours.shape == tolerance.shape, (
        f"{what}: shapes differ: {tuple(theirs.shape)}, {tuple(ours.shape)}, "
        f"{tuple(tolerance.shape)}")
    gap = (theirs - ours).abs()
    excess = gap - tolerance
    assert bool((excess <= 0).all()), (
        f"{what} differs by {float(gap.max()):.3g}, beyond the derived bound by "
        f"{float(excess.max()):.3g} (bound {float(tolerance.max()):.3g})")


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}"
    return float((a - b).abs().max()) if a.numel() else 0.0


# --- induction heads: logits and attention patterns -----------------------------------------------

@st.composite
def induction_cases(draw):
    """(kind, vocab_size, max_len, a batch of equally long token lists)."""
    kind = draw(st.sampled_from(sorted(INDUCTION)))
    S, n = draw(st.integers(1, 6)), draw(st.integers(1, 10))
    length, batch = draw(st.integers(1, n)), draw(st.integers(1, 4))
    row = st.lists(st.integers(0, S - 1), min_size=length, max_size=length)
    return kind, S, n, draw(st.lists(row, min_size=batch, max_size=batch))


def induction_roundtrip_check(export_model=to_transformer_lens, inputs=transformer_lens_inputs,
                              config: settings | None = None):
    """TransformerLens logits equal the construction's, and ``run_with_cache``'s patterns equal
    :meth:`attention_patterns`, both entrywise within twice :func:`export_error_bound` (a
    derived forward-error bound of float64 evaluations of the same formula)."""
    @functools.cache
    def exported(kind: str, S: int, n: int):
        model = INDUCTION[kind](S, n)
        return model, export_model(model)

    @(config or budget(1.0))
    @given(case=induction_cases())
    @example(case=("two_layer", 2, 8, [[0, 0, 0, 0, 0, 0, 1, 0]]))  # MEASURED.md's tight case
    @example(case=("compact", 6, 10, [[0, 1, 2, 3, 4, 5, 0, 1, 2, 3]]))  # largest scores
    @example(case=("compact", 1, 1, [[0]]))                            # one position
    def run(case):
        kind, S, n, rows = case
        model, tl_model = exported(kind, S, n)
        tokens = torch.tensor(rows)
        with torch.no_grad():
            ours, patterns = model.run(tokens)
            logits, cache = tl_model.run_with_cache(**inputs(model, tokens))
        theirs = transformer_lens_outputs(model, logits)
        bound = export_error_bound(model, cache, from_tokens=True)
        compared = [("logits", theirs, ours, transformer_lens_outputs(model, bound["logits"][0]))]
        compared += [(f"pattern {layer}", cache["pattern", layer], pattern, bound["pattern"][layer])
                     for layer, pattern in enumerate(patterns)]
        for what, a, b, e in compared:
            assert_within(a, b, 2 * e, f"{kind}({S}, {n}) on {rows}: {what}")
    return run


@pytest.mark.interop
def test_induction_exports_round_trip(transformer_lens):
    induction_roundtrip_check()()


def _unfold_scale(state, config, model):
    for key in state:
        if key.endswith("attn.W_Q"):
            state[key].div_(math.sqrt(config["d_head"]))


# Mutant: W_Q without the sqrt(d_head) that TransformerLens divides the scores by.
unfolded_scale = edited_export(_unfold_scale)


def processed(**flags):
    """Mutant: the layout loaded through ``HookedTransformer.load_and_process_state_dict``."""
    def export_model(model):
        tl_model = to_transformer_lens(model)
        layout = transformer_lens_layout(model)
        tl_model.load_and_process_state_dict(dict(layout.state_dict), **flags)
        return tl_model
    return export_model


def bridge_processed(model):
    """Mutant: the bridge with TransformerLens's default weight processing (LayerNorm folding,
    centring of the writing weights and of the unembedding)."""
    bridge = to_transformer_lens(model)
    bridge.process_weights()
    return bridge


def without_bos(model, tokens):
    """Mutant: the tokens without the BOS the construction prepends."""
    return {"input": tokens}


@pytest.mark.interop
def test_an_unfolded_scale_fails_the_induction_round_trip(transformer_lens):
    expect_failure(induction_roundtrip_check(unfolded_scale, config=MUTANT))


@pytest.mark.interop
@pytest.mark.parametrize("export_model", [
    processed(),  # TransformerLens's defaults: the unembedding is centred (issue #557)
    processed(fold_ln=False, center_writing_weights=False, center_unembed=False,
              fold_value_biases=False),  # no processing, yet weights round through float32
], ids=["default-processing", "processing-off"])
def test_processed_exports_fail_the_induction_round_trip(hooked_transformer, export_model):
    expect_failure(induction_roundtrip_check(export_model, config=MUTANT))


@pytest.mark.interop
def test_a_processed_bridge_fails_the_induction_round_trip(transformer_bridge):
    """The bridge twin: ``process_weights()`` with TransformerLens's defaults, which
    ``enable_compatibility_mode(no_processing=True)`` leaves out."""
    if has_hooked_transformer():
        pytest.skip("needs TransformerLens 4.x (to_transformer_lens builds a HookedTransformer "
                    "here; test_processed_exports_fail_the_induction_round_trip covers it)")
    expect_failure(induction_roundtrip_check(bridge_processed, config=MUTANT))


@pytest.mark.interop
def test_forgetting_the_bos_fails_the_induction_round_trip(transformer_lens):
    expect_failure(induction_roundtrip_check(inputs=without_bos, config=MUTANT))


# --- the other exportable families ----------------------------------------------------------------

def _targets(x: torch.Tensor) -> torch.Tensor:
    """A permutation-equivariant target: each token's value plus the sequence maximum."""
    return x[..., 0] + x[..., 0].amax(-1, keepdim=True)


@functools.cache
def family_model(family: str, seed: int) -> nn.Module:
    """A small instance of an exportable family (seeded, cached)."""
    if family == "rank_one_head":
        return bz.rank_one_head(_gaussian(seed, 4), rho=0.5 + seed % 4)
    if family == "contextual_mapping":
        return bz.contextual_mapping(_gaussian(seed, 6, 4), seq_len=3, seed=seed)
    if family == "memorizing_transformer":
        return bz.memorizing_transformer(*bz.labelled_sequences(8, 3, 4, 10, 2, seed=seed))
    if family == "equivariant_approximator":
        return bz.equivariant_approximator(_targets, seq_len=2, d=1, grid=2 + seed % 2)
    if family == "majority_head":
        return majority_head(vocab_size=2 + seed % 3, d=8, seed=seed, normalize=False)
    if family == "mean_field_transformer":
        return mean_field_transformer("pre", depth=1 + seed % 3, d=8, seed=seed)
    raise ValueError(family)


def family_input(family: str, model: nn.Module, seed: int) -> torch.Tensor:
    """An input in the construction's own format (tokens or real vectors)."""
    g = torch.Generator().manual_seed(seed)
    n = 1 + seed % 6
    if family == "contextual_mapping":
        ids = torch.stack([torch.randperm(6, generator=g)[:3] for _ in range(4)])
        return model.vocabulary[ids]
    if family == "memorizing_transformer":
        inputs, _ = bz.labelled_sequences(8, 3, 4, 10, 2, seed=seed % 4)
        order = torch.randperm(3, generator=g)  # trained sequences, reordered, and fresh ones
        return torch.cat([inputs[:, order], torch.randn(4, 3, 4, generator=g, dtype=F64)])
    if family == "equivariant_approximator":
        return torch.rand(16, 2, 1, generator=g, dtype=F64)
    if family == "majority_head":
        return torch.randint(model.vocab_size, (4, n), generator=g)
    width = 4 if family == "rank_one_head" else 8
    return torch.randn(3, n, width, generator=g, dtype=F64)


def family_comparisons(family: str, model: nn.Module, x: torch.Tensor, theirs, cache):
    """``[(what, theirs, ours, tolerance)]``: outputs and attention patterns against the
    export's, each entrywise within twice :func:`export_error_bound` (steep read-out ramps
    amplify the bound along the way, as they amplify rounding)."""
    bound = export_error_bound(model, cache, from_tokens=not x.is_floating_point())
    pattern_bound = [2 * e for e in bound["pattern"]]
    with torch.no_grad():
        out = [("output", theirs, model(x), 2 * transformer_lens_outputs(model,
                                                                          bound["logits"][0]))]
        if family == "rank_one_head":
            out.append(("pattern", cache["pattern", 0], model.pattern(x), pattern_bound[0]))
        elif family == "contextual_mapping":
            out.append(("pattern", cache["pattern", 0][:, 0], model.pattern(x),
                        pattern_bound[0][:, 0]))
        elif family == "majority_head":
            out.append(("pattern", cache["pattern", 0][:, 0], model.attention_pattern(x),
                        pattern_bound[0][:, 0]))
        elif family == "mean_field_transformer":
            # the exact pattern is uniform (W_Q = 0): one evaluation's bound, not twice
            uniform = torch.full_like(cache["pattern", 0], 1 / x.shape[1])
            out += [(f"pattern {layer}", cache["pattern", layer], uniform,
                     bound["pattern"][layer]) for layer in range(model.depth)]
        elif family == "memorizing_transformer":
            out.append(("pattern", cache["pattern", 0], model.attention.pattern(x),
                        pattern_bound[0]))
        elif family == "equivariant_approximator":
            # Stage by stage: the quantiser FFN_1 (layer 0's residual block), then the
            # memorizer on the export's own FFN_1 output (layer 1 on, its input exact), so
            # that no stage's error is amplified by the next one's slopes.
            d = model.memorizer.d_model
            y_theirs = cache["resid_post", 0][..., d:2 * d]
            later = export_error_bound(model, cache, from_tokens=False, start=1)
            out = [("FFN_1", y_theirs, model.quantize(x),
                    2 * bound["resid_post"][0][..., d:2 * d]),
                   ("output", theirs, model.memorizer(y_theirs),
                    2 * transformer_lens_outputs(model, later["logits"][0])),
                   ("pattern", cache["pattern", 1], model.memorizer.attention.pattern(y_theirs),
                    2 * later["pattern"][0])]
    return out


FAMILIES = ("rank_one_head", "contextual_mapping", "memorizing_transformer",
            "equivariant_approximator", "majority_head", "mean_field_transformer")


def family_roundtrip_check(export_model=to_transformer_lens, families=FAMILIES,
                           config: settings | None = None, inputs=transformer_lens_inputs):
    """Every other exportable family: the export's outputs and patterns equal the
    construction's, within twice :func:`export_error_bound`."""
    @functools.cache
    def exported(family: str, seed: int):
        model = family_model(family, seed)
        return model, export_model(model)

    @(config or budget(1.0))
    @given(family=st.sampled_from(families), model_seed=st.integers(0, 5), seed=seeds())
    def run(family, model_seed, seed):
        model, tl_model = exported(family, model_seed)
        x = family_input(family, model, seed)
        theirs, cache = _run(tl_model, model, x, inputs)
        for what, a, b, tolerance in family_comparisons(family, model, x, theirs, cache):
            assert_within(a, b, tolerance, f"{family} (seed {model_seed}): {what}")
    return run


@pytest.mark.interop
def test_every_family_exports_round_trip(transformer_lens):
    family_roundtrip_check()()


@pytest.mark.interop
@pytest.mark.parametrize("family", FAMILIES)
def test_unfolded_scale_fails_each_family(transformer_lens, family):
    def unfold(state, config, model):  # the scale matters only where scores are not all zero
        _unfold_scale(state, config, model)
        if family == "mean_field_transformer":  # W_Q = 0: break its MLP instead
            state["blocks.0.mlp.W_out"].mul_(2)
        elif config["d_head"] == 1:  # sqrt(1) = 1: break the folded rank-1 scale instead
            state[f"blocks.{config['n_layers'] - 1}.attn.W_Q"].mul_(2)
    expect_failure(family_roundtrip_check(edited_export(unfold), families=(family,),
                                          config=MUTANT))


@pytest.mark.interop
def test_exports_keep_dtype_and_device(transformer_lens):
    model = two_layer_induction(3, 4, dtype=torch.float32)
    tl_model = to_transformer_lens(model)
    assert tl_model.cfg.dtype == torch.float32 and tl_model.W_E.dtype == torch.float32
    assert tl_model.cfg.device == "cpu" and tl_model.W_E.device == model.W_E.device
    assert tl_model.cfg.normalization_type is None and tl_model.cfg.attn_only
    assert tl_model.cfg.d_vocab_out == 4 and tl_model.cfg.n_ctx == 5
    # float32: both evaluate the same formula, each within export_error_bound in float32
    tokens = torch.tensor([[0, 1, 0, 2]])
    theirs, cache = _run(tl_model, model, tokens)
    bound = export_error_bound(model, cache, from_tokens=True)["logits"][0]
    with torch.no_grad():
        assert_within(theirs.double(), model(tokens).double(),
                      2 * transformer_lens_outputs(model, bound), "float32 logits")


@pytest.mark.interop
def test_mean_field_export_uses_pre_layer_norm(transformer_lens):
    tl_model = to_transformer_lens(mean_field_transformer("pre", depth=2, d=8))
    assert tl_model.cfg.normalization_type == "LNPre" and tl_model.cfg.eps == 0.0
    assert not tl_model.cfg.attn_only and tl_model.cfg.act_fn == "relu"


# --- the 2.x/3.x export with the hooks circuit tools need -----------------------------------------

circuit_export = functools.partial(to_transformer_lens, circuit_hooks=True)


@pytest.mark.interop
def test_circuit_hook_exports_round_trip(hooked_transformer):
    """With per-head results, split QKV inputs and hook_mlp_in, the export still computes the
    construction (TransformerLens sums the heads' results: the same sums as the fused head
    contraction in another order, within the same acceptance bound)."""
    # a third of the examples: the same families and arithmetic as the default export's round
    # trips, which run the full budget
    induction_roundtrip_check(circuit_export, config=budget(1 / 3))()
    family_roundtrip_check(circuit_export, config=budget(1 / 3))()


@pytest.mark.interop
def test_circuit_hooks_are_in_the_cache(hooked_transformer):
    model = mean_field_transformer("pre", depth=2, d=8)
    tl_model = circuit_export(model)
    assert tl_model.cfg.use_attn_result and tl_model.cfg.use_split_qkv_input
    assert tl_model.cfg.use_hook_mlp_in
    _, cache = _run(tl_model, model, torch.randn(2, 3, 8, dtype=F64))
    for name in ("blocks.1.attn.hook_result", "blocks.1.hook_q_input", "blocks.1.hook_v_input",
                 "blocks.1.hook_mlp_in"):
        assert name in cache, name
    assert cache["blocks.1.attn.hook_result"].shape == (2, 3, 1, 8)  # (B, n, H, D)
    attention_only = circuit_export(two_layer_induction(3, 4))
    assert attention_only.cfg.use_attn_result and not attention_only.cfg.use_hook_mlp_in
    with pytest.raises(TypeError, match="circuit_hooks must be a bool"):
        to_transformer_lens(model, circuit_hooks=1)


@pytest.mark.interop
def test_unfolded_scale_fails_the_circuit_hook_round_trip(hooked_transformer):
    unfolded = edited_export(_unfold_scale, circuit_hooks=True)
    expect_failure(induction_roundtrip_check(unfolded, config=MUTANT))


@pytest.mark.interop
def test_circuit_hooks_on_transformer_lens_4_say_what_they_need(transformer_lens):
    """The 4.x bridge has no per-head result or split-QKV hooks: ``circuit_hooks=True`` says
    that it needs TransformerLens < 4, and which version is installed."""
    if has_hooked_transformer():
        pytest.skip("needs TransformerLens 4.x (this one has HookedTransformer)")
    from constructions.interop.layout import transformer_lens_version

    with pytest.raises(ImportError, match=r"circuit_hooks=True\) needs transformer-lens 2.x or "
                       rf"3.x .* transformer-lens {re.escape(transformer_lens_version())} has no "
                       "per-head result"):
        circuit_export(two_layer_induction(3, 4))


# --- TransformerBridge (TransformerLens 3.9 and 4.x) ----------------------------------------------

def _residual_stream(model, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The induction construction's residual stream after each layer, ``(B, n + 1, D)`` with
    the BOS at position 0, by its own layers: ``x_0 = W_E[bos, tokens] + W_pos``,
    ``x_{l+1} = x_l + Attn_l(x_l)`` (the sums :meth:`InductionTransformer.run` forms)."""
    bos = torch.full((tokens.shape[0], 1), model.vocab_size)
    x = model.W_E[torch.cat([bos, tokens], dim=1)] + model.W_pos[: tokens.shape[1] + 1]
    out = []
    for layer in model.layers:
        x = x + layer(x)
        out.append(x)
    return out


def bridge_roundtrip_check(export_model=to_transformer_bridge, config: settings | None = None):
    """The bridge's logits equal the construction's, its ``cache["pattern", L]`` the
    construction's patterns and its ``cache["resid_post", L]`` the construction's residual
    stream after layer L, all within twice :func:`export_error_bound` (float64; the same sums
    as the ``HookedTransformer`` round trip, so the same derived bound)."""
    @functools.cache
    def exported(kind: str, S: int, n: int):
        model = INDUCTION[kind](S, n)
        return model, export_model(model)

    @(config or budget(1.0))
    @given(case=induction_cases())
    @example(case=("two_layer", 2, 8, [[0, 0, 0, 0, 0, 0, 1, 0]]))
    @example(case=("compact", 6, 10, [[0, 1, 2, 3, 4, 5, 0, 1, 2, 3]]))
    @example(case=("compact", 1, 1, [[0]]))
    def run(case):
        kind, S, n, rows = case
        model, bridge = exported(kind, S, n)
        tokens = torch.tensor(rows)
        with torch.no_grad():
            ours, patterns = model.run(tokens)
            residuals = _residual_stream(model, tokens)
            logits, cache = bridge.run_with_cache(**transformer_bridge_inputs(model, tokens))
        bound = export_error_bound(model, cache, from_tokens=True)
        compared = [("logits", transformer_lens_outputs(model, logits), ours,
                     transformer_lens_outputs(model, bound["logits"][0]))]
        for layer, (pattern, resid) in enumerate(zip(patterns, residuals, strict=True)):
            compared += [(f"pattern {layer}", cache["pattern", layer], pattern,
                          bound["pattern"][layer]),
                         (f"resid_post {layer}", cache["resid_post", layer], resid,
                          bound["resid_post"][layer])]
        for what, theirs, expected, e in compared:
            assert theirs.dtype == expected.dtype, f"{what}: {theirs.dtype} vs {expected.dtype}"
            assert_within(theirs, expected, 2 * e, f"{kind}({S}, {n}) on {rows}: {what}")
    return run


@pytest.mark.interop
def test_bridge_exports_round_trip(transformer_bridge):
    bridge_roundtrip_check()()
    family_roundtrip_check(to_transformer_bridge,
                           inputs=transformer_bridge_inputs, config=budget(0.5))()


def _mutant_bridge(edit):
    """Mutant exports: the converted state dict edited by ``edit`` and loaded with
    ``strict=False``, so that what ``edit`` removes keeps the native model's initialisation."""
    def export_model(model):
        from transformer_lens.config import TransformerBridgeConfig
        from transformer_lens.model_bridge import TransformerBridge

        layout = transformer_lens_layout(model)
        config = dict(layout.config)
        dtype, device = config.pop("dtype"), config.pop("device")
        bridge = TransformerBridge.boot_native(TransformerBridgeConfig.from_dict(config),
                                               dtype=dtype, device=device)
        state = export.bridge_state_dict(layout)
        edit(state, layout)
        bridge.load_state_dict(state, strict=False)
        bridge.enable_compatibility_mode(disable_warnings=True, no_processing=True)
        return bridge.eval()
    return export_model


def _drop_key(state, layout):
    del state["blocks.0.attn.v.weight"]


def _untransposed_W_O(state, layout):
    # W_O as (H d_head, D), the HookedTransformer orientation, poured into nn.Linear's (D, H
    # d_head) slot without the transpose
    W_O = layout.state_dict["blocks.0.attn.W_O"]
    state["blocks.0.attn.o.weight"] = W_O.reshape(-1, W_O.shape[-1]).reshape(W_O.shape[-1], -1)


@pytest.mark.interop
@pytest.mark.parametrize("edit", [_drop_key, _untransposed_W_O], ids=["dropped-key",
                                                                      "transposed-W_O"])
def test_broken_bridges_fail_the_round_trip(transformer_bridge, edit):
    expect_failure(bridge_roundtrip_check(_mutant_bridge(edit), config=MUTANT))


@pytest.mark.interop
def test_the_bridge_keeps_float64_and_every_weight(transformer_bridge):
    model = two_layer_induction(3, 6)
    bridge = to_transformer_bridge(model)
    expected = export.bridge_state_dict(transformer_lens_layout(model))
    loaded = bridge.state_dict()
    assert set(loaded) == set(expected)
    for key, value in expected.items():  # bit for bit: no folding, centring or rounding
        assert loaded[key].dtype == F64 and torch.equal(loaded[key], value), key
    assert bridge.cfg.d_model == model.d_model and bridge.cfg.n_ctx == model.max_len + 1


@pytest.mark.interop
def test_our_conversion_is_transformer_lens_own(transformer_bridge):
    """Where TransformerLens has ``convert_tl_checkpoint`` (4.x) it gives the same tensors as
    :func:`bridge_state_dict`, apart from what it drops, which must be zero."""
    try:
        from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint
    except ImportError:
        pytest.skip("this TransformerLens has no convert_tl_checkpoint (3.9)")
    for model in (compact_induction(4, 6), family_model("memorizing_transformer", 0)):
        layout = transformer_lens_layout(model)
        bridge = to_transformer_bridge(model)
        theirs = convert_tl_checkpoint(dict(layout.state_dict), bridge.cfg)
        ours = export.bridge_state_dict(layout)
        assert set(theirs) <= set(ours)
        for key in set(ours) - set(theirs):
            assert not ours[key].any(), key
        for key, value in theirs.items():
            assert torch.equal(value, ours[key]), key


@pytest.mark.interop
def test_a_dropped_weight_stops_the_bridge_export(transformer_bridge, monkeypatch):
    from constructions.interop import bridge as tb

    convert = tb._convert

    def dropping(layout, cfg):
        state = convert(layout, cfg)
        del state["blocks.0.attn.o.weight"]
        return state
    monkeypatch.setattr(tb, "_convert", dropping)
    with pytest.raises(RuntimeError, match=r"missing \['blocks.0.attn.o.weight'\]"):
        to_transformer_bridge(two_layer_induction(3, 4))


@pytest.mark.interop
def test_the_mean_field_bridge_keeps_float64_layer_norm(transformer_bridge):
    """The bridge's LayerNorm (``LayerNormPreBridge``, which recomputes the norm and upcasts only
    dtypes below float32) keeps float64: the mean-field export is not refused, and its
    ``hook_scale`` is float64 (its output round-trips in test_bridge_exports_round_trip)."""
    model = family_model("mean_field_transformer", 0)
    bridge = to_transformer_bridge(model)
    x = family_input("mean_field_transformer", model, 0)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(**transformer_bridge_inputs(model, x))
    assert cache["blocks.0.ln1.hook_scale"].dtype == F64
    with pytest.raises(UnsupportedConstructionError, match="Post-LN"):
        to_transformer_bridge(mean_field_transformer("post", depth=1, d=4))


@pytest.mark.interop
def test_a_float32_bridge_layer_norm_is_refused_in_float64(transformer_bridge, monkeypatch):
    """Mutant TransformerLens: the bridge's LayerNorm evaluated in float32 (as the native
    ``NativeLayerNormPre`` it wraps is) makes the float64 export refuse, naming it."""
    from transformer_lens.model_bridge.generalized_components.normalization import (
        LayerNormPreBridge,
    )

    def in_float32(self, hidden_states):
        x = hidden_states.float()
        x = x - x.mean(-1, keepdim=True)
        return (x / (x.pow(2).mean(-1, keepdim=True)).sqrt()).to(hidden_states.dtype)
    monkeypatch.setattr(LayerNormPreBridge, "_python_norm_forward", in_float32)
    with pytest.raises(UnsupportedConstructionError, match="normalises in float32"):
        to_transformer_bridge(mean_field_transformer("pre", depth=1, d=4))


EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.py"))


@pytest.mark.interop
@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_the_upstream_reproducers_run(transformer_bridge, script, capsys):
    """Each reproducer in examples/ runs and exits 1 (the gap is there) or 0 (fixed upstream)."""
    import runpy

    if NEEDS_HOOKED_TRANSFORMER in script.read_text():  # its docstring says so
        require_hooked_transformer()
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(script), run_name="__main__")
    assert exited.value.code in (0, 1)
    assert capsys.readouterr().out


# --- the docs: the README example and one line per construction -----------------------------------

@pytest.mark.interop
def test_the_module_example_runs_as_written(transformer_lens):
    """The README's example is the module docstring's, run as a doctest (on 4.x through the
    bridge that ``to_transformer_lens`` returns there)."""
    result = doctest.testmod(export, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8 and result.failed == 0, result


@pytest.mark.interop
@pytest.mark.parametrize("construction", sorted(export.EXPORT_LINES))
def test_each_docs_line_exports(transformer_lens, construction):
    namespace: dict = {}
    exec(export.export_line(construction), namespace)
    expected = (transformer_lens.HookedTransformer if has_hooked_transformer() else
                importlib.import_module("transformer_lens.model_bridge").TransformerBridge)
    assert isinstance(namespace["tl_model"], expected)


def test_every_exporter_has_a_docs_line():
    """Torch only: the docs lines, run with the export swapped for the layout, cover every
    registered class."""
    covered = set()
    for construction in export.EXPORT_LINES:
        namespace: dict = {}
        code = export.export_line(construction).replace(
            "from constructions.export import to_transformer_lens",
            "from constructions.export import transformer_lens_layout as to_transformer_lens")
        exec(code, namespace)
        assert namespace["tl_model"].config["d_model"] >= 1
        exec(code.replace("tl_model = to_transformer_lens(", "model = ("), namespace)
        covered.add(f"{type(namespace['model']).__module__}.{type(namespace['model']).__name__}")
    assert covered == set(export._SPECS)
    assert export.export_line("constructions.hopfield:hopfield_update") is None


README_SNIPPET = """\
import torch
from constructions.induction_heads import two_layer_induction
from constructions.export import to_transformer_lens

model = two_layer_induction(vocab_size=4, max_len=8)
tl_model = to_transformer_lens(model)           # TL 4: TransformerBridge; 3: HookedTransformer
tokens = torch.tensor([[0, 1, 2, 3, 0, 1, 2]])
bos = torch.full((1, 1), model.vocab_size)      # the construction's own BOS: token 4
logits, cache = tl_model.run_with_cache(torch.cat([bos, tokens], dim=1))
print(cache["pattern", 0][0, 0].argmax(-1))     # layer 1: the previous token
print(cache["pattern", 1][0, 0].argmax(-1))     # layer 2: the token after the last match
print(logits[0, 1:].argmax(-1))                 # 4 means "no earlier occurrence"
"""
README_OUTPUT = ["tensor([0, 0, 1, 2, 3, 4, 5, 6])", "tensor([0, 0, 0, 0, 0, 2, 3, 4])",
                 "tensor([4, 4, 4, 4, 1, 2, 3])"]


def _readme_examples(export_name: str = "to_transformer_lens") -> list[str]:
    """The README's python blocks that call ``export_name``, or the snippet proposed."""
    readme = Path(__file__).parents[1] / "README.md"
    blocks = readme.read_text().split("```python\n")[1:] if readme.exists() else []
    found = [b.split("```")[0] for b in blocks if f"{export_name}(" in b]
    return found or [README_SNIPPET.replace("to_transformer_lens", export_name)]


@pytest.mark.interop
@pytest.mark.parametrize("snippet", _readme_examples())
def test_the_readme_example_runs_as_written(transformer_lens, snippet, capsys):
    """On every major: a HookedTransformer (2.x/3.x) or the bridge (4.x) prints the same."""
    exec(snippet, {})
    assert capsys.readouterr().out.splitlines() == README_OUTPUT


@pytest.mark.interop
@pytest.mark.parametrize("snippet", _readme_examples("to_transformer_bridge"))
def test_the_readme_bridge_example_runs_as_written(transformer_bridge, snippet, capsys):
    """On TransformerLens 3.9 and 4.x alike: the bridge prints what the HookedTransformer
    does."""
    exec(snippet, {})
    assert capsys.readouterr().out.splitlines() == README_OUTPUT


# --- what does not export -------------------------------------------------------------------------

def _optional(module: str, builder: str):
    """A builder from a module that may not have landed yet."""
    def make(*args, **kwargs):
        try:
            target = importlib.import_module(module)
        except ModuleNotFoundError:
            pytest.skip(f"{module} is not in this tree")
        return getattr(target, builder)(*args, **kwargs)
    return make


def _power(*args, **kwargs):
    return _optional("constructions.power_method", "looped_power_transformer")(*args, **kwargs)


_KEYS = torch.eye(3, dtype=F64)
UNSUPPORTED = {
    "looped power method": (lambda: _power(3, 0.5), ["looped", "ℓ2", "linear attention"]),
    "power method, no norm": (lambda: _power(3, 0.5, normalize=False), ["looped", "linear"]),
    "looped NGD": (lambda: _optional("constructions.icl_logistic", "looped_ngd")(0.1, loops=3),
                   ["looped"]),
    "LSA": (lambda: _optional("constructions.icl_regression", "one_step_gd")(2, 0.1),
            ["linear attention"]),
    "multi-step GD": (lambda: _optional("constructions.icl_regression", "multi_step_gd")(
        2, 0.1, 3), ["linear attention", "looped"]),
    "complex AR": (lambda: _optional("constructions.ar_mesa", "ar_mesa_layer")(2, 1.0, 1.0),
                   ["complex numbers", "linear attention"]),
    "bilinear": (lambda: _optional("constructions.bilinear", "bilinear_layer")(3, 4),
                 ["bilinear MLP"]),
    "gated MLP": (lambda: fm.GatedEncoderDecoder(_KEYS, _KEYS, _KEYS, _KEYS), ["sigmoid-gated"]),
    "linear memory": (lambda: fm.linear_associative_memory(_KEYS, _KEYS, torch.arange(3)),
                      ["no attention"]),
    "fact transformer": (lambda: fm.fact_transformer(
        _KEYS, _KEYS, fm.linear_associative_memory(_KEYS, _KEYS, torch.arange(3))),
        ["hardmax"]),
    "hopfield": (lambda: _optional("constructions.hopfield", "hopfield_update")(_KEYS, 1.0),
                 ["stored patterns"]),
    "majority with LayerNorm": (lambda: majority_head(3, 8), ["LayerNorm on the embeddings"]),
    "post-LN": (lambda: mean_field_transformer("post", depth=1, d=4), ["Post-LN"]),
    "trials": (lambda: mean_field_transformer("pre", depth=1, d=4, trials=2), ["trials"]),
    "no final norm": (lambda: mean_field_transformer("pre", depth=1, d=4, final_norm=False),
                      ["without a final LayerNorm"]),
    "hardmax head": (lambda: Attention(torch.eye(2), torch.eye(2), torch.eye(2), torch.eye(2),
                                       kind="hardmax"), ["hardmax"]),
    "linear head": (lambda: Attention(torch.eye(2), torch.eye(2), torch.eye(2), torch.eye(2),
                                      kind="linear"), ["linear attention"]),
    "unregistered ℓ2": (lambda: nn.Sequential(L2Norm()), ["ℓ2 normalisation"]),
    "unregistered loop": (lambda: Looped(nn.Identity(), 2), ["looped"]),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_constructions_name_what_transformer_lens_lacks(case):
    make, features = UNSUPPORTED[case]
    model = make()
    with pytest.raises(UnsupportedConstructionError) as raised:
        to_transformer_lens(model)  # raises before transformer_lens is imported
    message = str(raised.value)
    assert type(model).__name__ in message and "cannot be exported to TransformerLens" in message
    for feature in features:
        assert feature in message, f"{feature!r} not in {message!r}"
    assert raised.value.features and raised.value.construction in message


def test_an_unregistered_class_is_named_as_such():
    with pytest.raises(UnsupportedConstructionError,
                       match=r"Linear cannot be exported .* no exporter is registered"):
        to_transformer_lens(nn.Linear(2, 2))


def test_every_unsupported_class_is_tested():
    tested = set()
    for make, _ in UNSUPPORTED.values():
        try:
            model = make()
        except pytest.skip.Exception:
            continue
        tested.add(f"{type(model).__module__}.{type(model).__qualname__}")
    present = {name for name in export._UNSUPPORTED
               if importlib.util.find_spec(name.rsplit(".", 1)[0]) is not None}
    assert present <= tested, f"untested: {sorted(present - tested)}"


def test_a_recorded_build_is_named_in_the_error():
    model = build(majority_head, 3, 8)
    with pytest.raises(UnsupportedConstructionError, match=r"majority_head \(MajorityHead\)"):
        to_transformer_lens(model)


def test_bad_arguments_to_the_export_are_named():
    with pytest.raises(TypeError, match=r"model must be an nn.Module"):
        to_transformer_lens("two_layer_induction")
    model = two_layer_induction(3, 4)
    with pytest.raises(ValueError, match=r"n_ctx .* fixed .* to 5"):
        to_transformer_lens(model, n_ctx=8)
    with pytest.raises(ValueError, match="n_ctx must be >= 1"):
        transformer_lens_layout(majority_head(3, 8, normalize=False), n_ctx=0)
    with pytest.raises(ValueError, match="x must lie in"):
        transformer_lens_inputs(model, torch.tensor([[0, 3]]))
    with pytest.raises(ValueError, match="x has length 5 > max_len=4"):
        transformer_lens_inputs(model, torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="x must have 3 dims"):
        transformer_lens_inputs(family_model("rank_one_head", 0), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="x must have width <= 8"):
        transformer_lens_inputs(family_model("rank_one_head", 0), torch.zeros(1, 2, 9))


def test_the_layout_folds_the_scale_and_pads_heads():
    """Torch only: d_head is the widest map, W_Q carries sqrt(d_head), nothing is processed."""
    model = two_layer_induction(3, 4)
    layout = transformer_lens_layout(model)
    d_head = layout.config["d_head"]
    assert d_head == max(max(a.W_Q.shape[2], a.W_V.shape[2]) for a in model.layers)
    W_Q = layout.state_dict["blocks.1.attn.W_Q"]
    k = model.layers[1].W_Q.shape[2]
    assert torch.equal(W_Q[..., :k], model.layers[1].W_Q * math.sqrt(d_head))
    assert not W_Q[..., k:].any()
    assert torch.equal(layout.state_dict["unembed.W_U"], model.W_U)
    assert layout.config["attn_only"] and layout.config["normalization_type"] is None


# --- save and load --------------------------------------------------------------------------------

@st.composite
def saved_cases(draw):
    """(model, an input): a recorded construction with arguments drawn, possibly edited."""
    family = draw(st.sampled_from(["two_layer", "compact", "contextual_mapping",
                                   "memorizing_transformer"]))
    seed = draw(st.integers(0, 3))
    if family in INDUCTION:
        S, n = draw(st.integers(1, 5)), draw(st.integers(1, 8))
        kwargs = draw(st.fixed_dictionaries({}, optional={
            "beta1": st.floats(0.5, 20.0), "recency": st.floats(0.0, 5.0),
            "dtype": st.sampled_from([torch.float32, torch.float64])}))
        model = INDUCTION[family](S, n, **kwargs)
        x = torch.randint(S, (2, n), generator=torch.Generator().manual_seed(seed))
    elif family == "contextual_mapping":
        vocabulary = _gaussian(seed, 5, 3)
        model = build(bz.contextual_mapping, vocabulary, seq_len=draw(st.integers(2, 5)),
                      seed=seed)
        x = vocabulary[None, :model.seq_len]
    else:
        inputs, labels = bz.labelled_sequences(6, 3, 4, 8, 2, seed=seed)
        model = build("constructions.boltzmann:memorizing_transformer", inputs, labels)
        x = inputs
    if draw(st.booleans()):  # edited after building, e.g. fine-tuned: verify must notice
        with torch.no_grad():
            weight = next(p for p in model.parameters() if p.is_floating_point() and p.numel())
            weight.view(-1)[0] += 2 * torch.finfo(weight.dtype).eps * (1 + weight.view(-1)[0].abs())
        model.edited = True
    return model, x


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(torch.uint8) if t.is_floating_point() else t


def save_load_check(saver=save, loader=load, config: settings | None = None):
    """save then load reproduces every weight and the outputs bit for bit; verify passes for
    an unedited construction and rejects an edited one, whose weights verify=False restores."""
    @(config or budget(0.5))
    @given(case=saved_cases())
    def run(case):
        model, x = case
        edited = getattr(model, "edited", False)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "construction"
            saver(model, path)
            if edited:
                try:
                    loader(path)
                except ValueError as error:
                    assert "rebuilds different weights" in str(error), str(error)
                else:
                    raise AssertionError("verify accepted weights edited after building")
            try:
                loaded = loader(path, verify=not edited)
            except ValueError as error:
                raise AssertionError(f"loading failed: {error}") from error
        saved, restored = model.state_dict(), loaded.state_dict()
        assert list(saved) == list(restored)
        for key, value in saved.items():
            assert value.dtype == restored[key].dtype, key
            assert torch.equal(_bits(value), _bits(restored[key])), f"{key} changed"
        with torch.no_grad():
            before, after = model(x), loaded(x)
        assert torch.equal(_bits(before), _bits(after)), "outputs changed"
        assert build_call(loaded) is not None
    return run


@pytest.mark.interop
def test_save_and_load_round_trip(safetensors):
    save_load_check()()


def rebuild_only(path, verify=True):
    """Mutant: rebuild from the sidecar and ignore the saved weights."""
    return build_call(load(path, verify=False)).rebuild()


def float32_saver(model, path):
    """Mutant: weights rounded through float32 before saving."""
    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for p in rounded.parameters():
            p.copy_(p.float())
    return save(rounded, path)


@pytest.mark.interop
def test_a_loader_that_ignores_the_saved_weights_fails(safetensors):
    expect_failure(save_load_check(loader=rebuild_only, config=MUTANT))


@pytest.mark.interop
def test_a_saver_that_rounds_through_float32_fails(safetensors):
    expect_failure(save_load_check(saver=float32_saver, config=MUTANT))


@pytest.mark.interop
def test_the_sidecar_names_builder_arguments_and_versions(safetensors, tmp_path):
    model = two_layer_induction(3, 4, beta1=2.5, dtype=torch.float32)
    weights, sidecar = save(model, tmp_path / "induction.safetensors")
    assert weights.name == "induction.safetensors" and sidecar.name == "induction.json"
    record = json.loads(sidecar.read_text())
    assert record["builder"] == "constructions.induction_heads:two_layer_induction"
    assert record["args"] == [3, 4]
    assert record["kwargs"] == {"beta1": 2.5, "dtype": {"$dtype": "float32"}}
    assert set(record["versions"]) == {"transformer-theorems", "torch"}
    assert record["class"] == "constructions.induction_heads.InductionTransformer"
    sidecar.unlink()  # the weights file alone suffices: its metadata holds the sidecar
    assert load(weights).W_E.dtype == torch.float32


@pytest.mark.interop
def test_tensor_and_structured_arguments_round_trip(safetensors, tmp_path):
    inputs, labels = bz.labelled_sequences(4, 2, 3, 6, 2)
    model = build(bz.memorizing_transformer, inputs.numpy(), labels, trials=64)
    save(model, tmp_path / "memorizer")
    loaded = load(tmp_path / "memorizer.json")
    args = build_call(loaded).args
    assert isinstance(args[0], type(inputs.numpy())) and torch.equal(args[1], labels)
    assert torch.equal(loaded(inputs), model(inputs))


@pytest.mark.interop
def test_bad_files_and_arguments_are_named(safetensors, tmp_path):
    with pytest.raises(ValueError, match="carries no record of the builder call"):
        save(majority_head(3, 8), tmp_path / "plain")
    approximator = build(bz.equivariant_approximator, _targets, 2, 1, 2)
    with pytest.raises(TypeError, match="builder argument '0' is a function"):
        save(approximator, tmp_path / "approximator")
    with pytest.raises(TypeError, match="path must be a str or Path"):
        save(two_layer_induction(2, 3), 3)
    with pytest.raises(FileNotFoundError, match="no weights file"):
        load(tmp_path / "missing")
    weights, sidecar = save(two_layer_induction(2, 3), tmp_path / "m")
    with pytest.raises(TypeError, match="verify must be a bool"):
        load(weights, verify="yes")
    save(build("constructions.hopfield:hopfield_update", _KEYS, 1.0), tmp_path / "hopfield")
    with pytest.raises(ValueError, match="takes no device argument"):
        load(tmp_path / "hopfield", device="cpu")
    weights.write_bytes(weights.read_bytes()[:-1] + b" ")
    with pytest.raises(ValueError, match="SHA-256 differs"):
        load(weights)
    sidecar.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match=r"is not a transformer-theorems.construction file"):
        load(sidecar)


def test_build_needs_an_importable_builder():
    with pytest.raises(ValueError, match="not importable by name"):
        build(lambda: two_layer_induction(2, 3))
    with pytest.raises(TypeError, match="builder must be callable"):
        build(3)
    with pytest.raises(TypeError, match=r"returned Tensor, not an nn.Module"):
        build("constructions.boltzmann:boltzmann", torch.zeros(3))
    with pytest.raises(ValueError, match="builder must be 'module:qualname'"):
        build("two_layer_induction")


def test_recorded_builders_keep_their_signature_and_copy_tensor_arguments():
    import inspect

    assert "vocab_size" in inspect.signature(two_layer_induction).parameters
    assert two_layer_induction.__doc__.startswith("Exact two-layer induction head")
    vocabulary = _gaussian(0, 4, 3)
    model = build(bz.contextual_mapping, vocabulary, 2)
    vocabulary.add_(1.0)  # the caller's later edits do not reach the record
    assert torch.equal(build_call(model).args[0], _gaussian(0, 4, 3))


# --- valid example arguments for tests/test_public_api.py ---------------------------------------

def _two_layer() -> nn.Module:
    return two_layer_induction(3, 4)


def _attention() -> Attention:
    return Attention(_gaussian(0, 1, 2, 2), _gaussian(1, 1, 2, 2), _gaussian(2, 1, 2, 2),
                     _gaussian(3, 1, 2, 2))


def _mlp():
    from constructions.layers import MLP

    return MLP(_gaussian(4, 2, 3), _gaussian(5, 3), _gaussian(6, 3, 2), _gaussian(7, 2))


_BUILDER = "constructions.induction_heads:two_layer_induction"
PUBLIC_API_EXAMPLES = {
    "recording.build": lambda: {"builder": _BUILDER, "args": (3, 4), "kwargs": {}},
    "recording.build_call": lambda: {"model": _two_layer()},
    "recording.construction_name": lambda: {"model": _two_layer()},
    "recording.import_builder": lambda: {"path": _BUILDER},
    "recording.public_module": lambda: {"obj": two_layer_induction},
    "recording.recorded": lambda: {"builder": two_layer_induction},
    "residual_layout.attention_block": lambda: {"name": "a", "layer": _attention(), "D": 4,
                                                "read": slice(0, 2), "write": slice(2, 4)},
    "residual_layout.mlp_block": lambda: {"name": "m", "mlp": _mlp(), "D": 4,
                                          "read": slice(0, 2), "write": slice(2, 4)},
    "residual_layout.placed": lambda: {"weight": _gaussian(0, 2, 2), "shape": (3, 4),
                                       "index": (slice(0, 2), slice(1, 3))},
    "residual_layout.context_length": lambda: {"name": "m", "n_ctx": 4, "default": 8},
    "residual_layout.fixed_context_length": lambda: {"name": "m", "n_ctx": 8, "fixed": 8},
    "interop.layout.construction_classes": lambda: {"method": "residual_layout"},
    "interop.transformer_lens.export_line": lambda: {"construction": _BUILDER},
    "interop.layout.residual_layout": lambda: {"model": _two_layer(), "n_ctx": None},
    "interop.layout.scanned_features": lambda: {"model": _two_layer()},
    "interop.transformer_lens.to_transformer_lens": lambda: {
        "model": majority_head(3, 8, normalize=False), "n_ctx": 8},
    "interop.layout.transformer_lens_inputs": lambda: {"model": _two_layer(),
                                                         "x": torch.tensor([[0, 1, 2]])},
    "interop.layout.transformer_lens_layout": lambda: {"model": _two_layer()},
    "interop.layout.transformer_lens_outputs": lambda: {"model": _two_layer(),
                                                          "logits": _gaussian(0, 1, 4, 4)},
    "interop.bridge.bridge_state_dict": lambda: {
        "layout": transformer_lens_layout(_two_layer())},
    "interop.bridge.to_transformer_bridge": lambda: {
        "model": majority_head(3, 8, normalize=False), "n_ctx": 8},
    "interop.bridge.transformer_bridge_inputs": lambda: {"model": _two_layer(),
                                                             "x": torch.tensor([[0, 1, 2]])},
}
PUBLIC_API_ACCEPTED = {
    # a builder's own arguments, passed on as they are: their errors are the builder's
    ("recording.build", "args"): ("wrong-type",),
    ("recording.build", "kwargs"): ("wrong-type",),
    # a name only labels the construction in error messages: any string is one
    **{(f"residual_layout.{f}", "name"): ("unknown",) for f in (
        "attention_block", "mlp_block", "context_length", "fixed_context_length")},
    # placement moves weights as they are: non-finite ones stay non-finite, as in any layer
    ("residual_layout.placed", "weight"): ("nan", "inf"),
    # any method name is a question: no class defines "no-such-option", so the set is empty
    ("interop.layout.construction_classes", "method"): ("unknown",),
    # None answers "no such exportable builder" (the docs page of a non-exporting claim)
    ("interop.transformer_lens.export_line", "construction"): ("unknown",),
    # one more token is still within max_len = 4, and an empty sequence is just the BOS
    ("interop.layout.transformer_lens_inputs", "x"): ("mismatched", "empty"),
    ("interop.bridge.transformer_bridge_inputs", "x"): ("mismatched", "empty"),
    # the export's logits may be anything a float computation gives
    ("interop.layout.transformer_lens_outputs", "logits"): ("nan", "inf"),
}
# Valid calls that build a TransformerLens model: tests/test_export.py makes them (round trips,
# on every major), so the fuzzer makes only their bad calls, which fail before any import.
PUBLIC_API_VALID_ELSEWHERE = {
    "interop.transformer_lens.to_transformer_lens": "test_every_family_exports_round_trip",
    "interop.bridge.to_transformer_bridge": "test_bridge_exports_round_trip",
}
