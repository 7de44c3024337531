r"""Edge ablation on the induction constructions' native hook points: zero and mean ablation, the
two reference values that, with resampling from a corrupted prompt
(:func:`~constructions.circuits.edge_patched_logits`), define a circuit.

*Ablating* the edge :math:`u \to v\langle x\rangle` replaces :math:`\mathrm{out}_u` in that one
input of :math:`v` by a reference value :math:`r_u` and recomputes every node from its own
inputs, exactly as patching does with :math:`r_u` the corrupted run's output
(:func:`edge_ablated_logits`):

* **zero ablation**: :math:`r_u = 0`;
* **mean ablation**: :math:`r_u` is the mean of :math:`\mathrm{out}_u` over a stated finite
  set :math:`D` of prompts, position by position (:func:`mean_outputs`); for the induction
  claims :math:`D` is every prompt of the clean prompt's length over the :math:`S` tokens
  (:func:`all_prompts`), i.e. the uniform distribution, averaged exactly over its support.

Which edges matter differs by ablation, because the reference values differ in *which causal
variables they keep*: resampling keeps everything the corruption does not change, the mean over
:math:`D` keeps what every prompt of :math:`D` shares (the positions, the BOS), and zero keeps
nothing. :func:`ablation_circuit` gives the circuits of ``two_layer_induction`` under zero and
mean ablation, derived edge by edge in its docstring; :func:`target_margin` is their metric.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import torch

from constructions import _validate
from constructions.circuits.graph import Circuit, Edge
from constructions.circuits.induction import INDUCTION_KINDS, induction_mechanism
from constructions.circuits.patching import graph_edges, replaced_run, source_outputs
from constructions.induction_heads.model import InductionTransformer
from constructions.induction_heads.task import induction_targets

ABLATIONS = ("zero", "mean")


def all_prompts(vocab_size: int, length: int, *, max_prompts: int = 1 << 16) -> torch.Tensor:
    """Every prompt of ``length`` tokens over ``vocab_size`` tokens, ``(S^m, m)``, in
    lexicographic order: the support of the uniform distribution, for an exact mean.
    ``max_prompts`` bounds :math:`S^m` (a guard against an accidental huge enumeration)."""
    S = _validate.positive_int("vocab_size", vocab_size)
    m = _validate.positive_int("length", length)
    limit = _validate.positive_int("max_prompts", max_prompts)
    if S**m > limit:
        raise ValueError(f"length {m} over vocab_size {S} gives {S**m} prompts, more than "
                         f"max_prompts = {limit}")
    return torch.tensor(list(itertools.product(range(S), repeat=m)), dtype=torch.long)


def mean_outputs(model: InductionTransformer, prompts: torch.Tensor) -> dict[str, torch.Tensor]:
    r"""Each source node's output averaged over ``prompts`` ``(N, m)``, position by position:
    ``{"input": (1, m+1, d), "a{l}.h{h}": (1, m+1, d)}`` (``torch.mean`` over the N runs of the
    per-head path, in the model's dtype)."""
    _validate.instance("model", model, InductionTransformer)
    prompts = _validate.token_tensor("prompts", prompts, vocab_size=model.vocab_size,
                                     max_len=model.max_len, ndim=2)
    if prompts.shape[0] == 0 or prompts.shape[1] == 0:
        raise ValueError(f"prompts must hold at least one prompt of length >= 1, got shape "
                         f"{tuple(prompts.shape)}")
    return {name: out.mean(0, keepdim=True)
            for name, out in source_outputs(model, prompts).items()}


def edge_ablated_logits(model: InductionTransformer, clean: torch.Tensor,
                        ablated: Iterable[Edge | str], ablation: str = "zero",
                        means: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
    r"""Logits ``(B, n, C)`` of the clean run in which each edge in ``ablated`` carries its
    source's reference value instead of its output: 0 (``ablation="zero"``), or its mean
    (``"mean"``): ``means`` is :func:`mean_outputs` over prompts of the clean prompts' length
    (computed once by the caller, since every ablated run of a distribution shares it).

    The hooks are :func:`~constructions.circuits.edge_patched_logits`'s: the target input gets
    :math:`(r_u - \mathrm{out}_u)W^v_x` added, the final residual stream
    :math:`r_u - \mathrm{out}_u`; an empty ``ablated`` is the clean run.
    """
    _validate.instance("model", model, InductionTransformer)
    clean = model._validated(_validate.token_tensor("clean", clean, vocab_size=model.vocab_size,
                                                    max_len=model.max_len))
    if clean.shape[1] == 0:
        raise ValueError("clean must hold prompts of length >= 1")
    ablation = _validate.choice("ablation", ablation, ABLATIONS)
    edges = graph_edges(model, ablated, "ablated")
    width = (1, clean.shape[1] + 1, model.d_model)
    if ablation == "mean":
        if not isinstance(means, Mapping):
            raise TypeError(f"means must be the dict of mean_outputs for mean ablation, got "
                            f"{type(means).__name__}")
        for edge in edges:
            mean = means.get(edge.source)
            if not isinstance(mean, torch.Tensor) or tuple(mean.shape) != width:
                raise ValueError(f"means must hold a {width} tensor for {edge.source!r} (the "
                                 f"mean over prompts of the clean length), got "
                                 f"{getattr(mean, 'shape', mean)!r}")
        references = dict(means)
    else:
        if means is not None:
            raise ValueError("means must be None for zero ablation")
        zero = model.W_E.new_zeros(width)
        references = {e.source: zero for e in edges}
    return replaced_run(model, clean, references, edges)


def target_margin(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    r"""The metric :math:`\ell_{i,\tau} - \ell_{i,\bot}` at the final position :math:`i`, where
    :math:`\tau` is the final oracle target of ``tokens`` ``(B, n)``
    (:func:`~constructions.induction_heads.induction_targets`), which must exist, and
    :math:`\bot` the last class. ``logits`` ``(B, n, C)``; returns ``(B,)``."""
    logits = _validate.real_tensor("logits", logits, ndim=3)
    if logits.shape[0] == 0 or logits.shape[1] == 0 or logits.shape[2] < 2:
        raise ValueError(f"logits must have shape (B, n, C) with B, n >= 1 and C >= 2, got "
                         f"{tuple(logits.shape)}")
    tokens = _validate.token_tensor("tokens", tokens, vocab_size=logits.shape[2] - 1, ndim=2)
    if tokens.shape != logits.shape[:2]:
        raise ValueError(f"tokens must have the shape (B, n) = {tuple(logits.shape[:2])} of "
                         f"logits, got {tuple(tokens.shape)}")
    target = induction_targets(tokens.to(logits.device))[:, -1]
    if bool((target < 0).any()):
        raise ValueError("tokens must have a final target: the final token must occur earlier")
    final = logits[:, -1]
    return final.gather(-1, target.unsqueeze(-1)).squeeze(-1) - final[:, -1]


_ZERO_DROPPED = ("input->a1.h0<k>",)
_MEAN_KEPT = ("input->a0.h0<v>", "input->a1.h0<q>", "a0.h0->a1.h0<k>", "input->a1.h0<v>",
              "a1.h0->logits")


def ablation_circuit(kind: str, vocab_size: int, max_len: int, ablation: str = "zero"
                     ) -> Circuit:
    r"""The ground-truth circuit of ``two_layer_induction`` under ``ablation``, for the metric
    :func:`target_margin` on prompts whose final token :math:`a` occurs exactly once before.

    **Zero ablation: 7 of the 8 mechanism edges**, all but ``input -> a1.h0<k>``. Ablated
    alone, each of the 7 deletes a signal the output needs: ``input -> a0.h0<q>`` or ``<k>``
    zero the previous-token head's scores (it turns uniform, so prev no longer records the
    previous token), ``input -> a0.h0<v>`` and ``a0.h0 -> a1.h0<k>`` zero the prev part of
    every induction key (no key matches, the BOS sink wins: :math:`\bot`),
    ``input -> a1.h0<q>`` zeroes the induction query (uniform weights: the output is the
    prompt's token histogram), ``input -> a1.h0<v>`` and ``a1.h0 -> logits`` zero the
    output. ``input -> a1.h0<k>`` carries the recency bias and the BOS sink, which decide only
    between several matches or none: with one earlier occurrence the match term alone puts
    weight :math:`\ge 1/(1+\omega)` on the induction key, so zeroing it moves the metric by
    at most :math:`2\omega/(1+\omega)` (and in float64, where both weights round to 1, by
    nothing). The other 4 are zero maps (:func:`~constructions.circuits.induction_mechanism`).

    **Mean ablation over** :math:`D` **(every prompt of the clean length): 5 edges**,
    ``input -> a0.h0<v>``, ``input -> a1.h0<q>``, ``a0.h0 -> a1.h0<k>``,
    ``input -> a1.h0<v>``, ``a1.h0 -> logits``. The two zero-ablation edges that leave,
    ``input -> a0.h0<q>`` and ``<k>``, are those whose map from the input does not depend on
    the token (:math:`W^1_Q, W^1_K` read the positional block only): every prompt of :math:`D`
    has the same positions, so the mean input has exactly the clean positional block and these
    edges carry exactly their clean value. The 5 kept ones carry token information, which the
    mean replaces by the uniform mixture :math:`\frac1S\sum_b e_b`: no key matches the query
    any more (the match term becomes the same :math:`\frac{\beta_2}S(1 - A^1_{j0})` for
    every key), or the copied token is the mixture.

    **Resampling** (:func:`~constructions.circuits.induction_circuit`) keeps only the 2 or 3
    of these edges that carry the one causal variable the corruption changes.
    """
    kind = _validate.choice("kind", kind, INDUCTION_KINDS)
    if kind != "two_layer":
        raise ValueError("kind must be 'two_layer': the ablation circuits are derived for the "
                         "one-hot construction only")
    ablation = _validate.choice("ablation", ablation, ABLATIONS)
    mechanism = induction_mechanism(kind, vocab_size, max_len)
    edges = tuple(e for e in mechanism.edges
                  if (e.name not in _ZERO_DROPPED if ablation == "zero"
                      else e.name in _MEAN_KEPT))
    return Circuit(f"{kind}_induction {ablation}-ablation circuit", 2, 1, mechanism.d_model,
                   edges, corruption=f"{ablation}_ablation")
