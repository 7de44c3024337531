r"""Edge patching on the induction constructions' native hook points, without TransformerLens.

Patching the edge :math:`u \to v\langle x\rangle` from a corrupted run replaces
:math:`\mathrm{out}_u` by its corrupted value in that one input of :math:`v` only, every node
recomputed from its own (clean or patched) inputs (:func:`edge_patched_logits`), in the
model's own dtype, through the hook points of :mod:`constructions.layers`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch

from constructions import _validate
from constructions.circuits.graph import Edge, _head, attention_graph
from constructions.induction_heads.model import InductionTransformer


def per_head_results(model: InductionTransformer) -> contextlib.AbstractContextManager[None]:
    """A context in which every layer's head outputs go through its ``hook_result``
    (TransformerLens's ``use_attn_result``), the flags restored after: the per-head source
    nodes that edge patching reads (here and in the circuit-discovery harness)."""
    if not isinstance(model, InductionTransformer):
        raise TypeError(f"model must be an InductionTransformer, got {type(model).__name__}")
    return _per_head_results(model)


@contextlib.contextmanager
def _per_head_results(model: InductionTransformer) -> Iterator[None]:
    before = [layer.use_attn_result for layer in model.layers]
    try:
        for layer in model.layers:
            layer.use_attn_result = True
        yield
    finally:
        for layer, flag in zip(model.layers, before, strict=True):
            layer.use_attn_result = flag


def _record_sources(model: InductionTransformer, store: dict) -> list:
    """Forward hooks that store each source node's output, ``(B, n+1, d)``, under its name."""
    def keep(name, head=None):
        def hook(module, args, output):
            store[name] = output if head is None else output[:, :, head]
        return hook
    handles = [model.hook_resid_pre[0].register_forward_hook(keep("input"))]
    for layer_index, layer in enumerate(model.layers):
        for h in range(layer.n_heads):
            handles.append(layer.hook_result.register_forward_hook(
                keep(f"a{layer_index}.h{h}", h)))
    return handles


def edge_patched_logits(model: InductionTransformer, clean: torch.Tensor,
                        corrupted: torch.Tensor, patched: Iterable[Edge | str]
                        ) -> torch.Tensor:
    r"""Logits ``(B, n, C)`` of the clean run in which each edge in ``patched`` carries the
    corrupted run's value of its source.

    For a patched edge :math:`u \to v\langle x\rangle` the hook on ``hook_x`` of head
    :math:`v` adds :math:`(\mathrm{out}^{corr}_u - \mathrm{out}_u)W^v_x`, where
    :math:`\mathrm{out}_u` is :math:`u`'s output *in this run*; by linearity of the projection
    this is the head's :math:`x`-input with :math:`u`'s term replaced. For
    :math:`u \to \mathrm{logits}` the difference is added to the final residual stream. An
    empty ``patched`` gives the clean run through the same per-head code path.
    """
    _validate.instance("model", model, InductionTransformer)
    clean, corrupted = (_validate.token_tensor(name, prompt, vocab_size=model.vocab_size,
                                               max_len=model.max_len)
                        for name, prompt in (("clean", clean), ("corrupted", corrupted)))
    clean, corrupted = model._validated(clean), model._validated(corrupted)
    if clean.shape != corrupted.shape:
        raise ValueError(f"corrupted must have the shape of clean {tuple(clean.shape)}, "
                         f"got {tuple(corrupted.shape)}")
    edges = graph_edges(model, patched)
    return replaced_run(model, clean, source_outputs(model, corrupted), edges)


def graph_edges(model: InductionTransformer, patched: Iterable[Edge | str],
                name: str = "patched") -> list[Edge]:
    """The edges of the model's graph named by ``patched`` (edges or names), in its order;
    a name outside the graph is a ValueError naming the parameter ``name``."""
    if isinstance(patched, (str, Edge)):
        raise TypeError(f"{name} must be an iterable of edges or edge names, got "
                        f"{type(patched).__name__}")
    graph = {e.name: e for e in attention_graph(len(model.layers), model.layers[0].n_heads)}
    edges = []
    for edge in patched:
        key = edge.name if isinstance(edge, Edge) else edge
        if key not in graph:
            raise ValueError(f"{name} must hold edges of the model's graph, got {key!r}")
        edges.append(graph[key])
    return edges


def source_outputs(model: InductionTransformer, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every source node's output ``(B, n+1, d)`` on ``tokens`` (validated by the caller), by
    name: ``input`` and ``a{l}.h{h}``, on the per-head path."""
    with per_head_results(model), torch.no_grad():
        outputs: dict = {}
        handles = _record_sources(model, outputs)
        try:
            model.run(tokens)
        finally:
            for handle in handles:
                handle.remove()
    return outputs


def replaced_run(model: InductionTransformer, clean: torch.Tensor,
                 replacements: dict[str, torch.Tensor], edges: list[Edge]) -> torch.Tensor:
    r"""Logits of the clean run in which each edge :math:`u \to v\langle x\rangle` of
    ``edges`` (edges of the model's graph, validated by the caller) carries
    ``replacements[u]`` (broadcastable to ``(B, n+1, d)``) instead of :math:`u`'s output in this
    run: a corrupted run's output (patching), zeros (zero ablation) or a mean (mean ablation)."""
    with per_head_results(model), torch.no_grad():
        current: dict = {}
        handles = _record_sources(model, current)
        try:
            handles += _patching_hooks(model, edges, replacements, current)
            return model.run(clean)[0]
        finally:
            for handle in handles:
                handle.remove()


def _patching_hooks(model: InductionTransformer, edges: list[Edge], corrupt_out: dict,
                    current: dict) -> list:
    """Forward hooks that add each patched edge's difference at its target input."""
    by_target: dict[tuple[str, str | None], list[str]] = {}
    for edge in edges:
        by_target.setdefault((edge.target, edge.input), []).append(edge.source)
    handles = []
    for (target, qkv), sources in by_target.items():
        def delta(sources=sources):
            return sum(corrupt_out[u] - current[u] for u in sources)       # (B, n+1, d)
        if target == "logits":
            def add_residual(module, args, output, delta=delta):
                return output + delta()
            handles.append(model.hook_resid_post[-1].register_forward_hook(add_residual))
            continue
        layer_index, head = _head(target)
        layer = model.layers[layer_index]
        weight = {"q": layer.W_Q, "k": layer.W_K, "v": layer.W_V}[qkv][head]   # (d, d_x)

        def add_input(module, args, output, delta=delta, weight=weight, head=head):
            output = output.clone()                                         # (B, n+1, H, d_x)
            output[:, :, head] = output[:, :, head] + delta() @ weight
            return output
        handles.append(getattr(layer, f"hook_{qkv}").register_forward_hook(add_input))
    return handles
