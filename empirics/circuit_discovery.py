r"""Circuit-discovery methods scored against exact ground-truth circuits.

Every case of :data:`constructions.circuits.CASES` (a construction, its circuit under a
corruption, a prompt sampler and a metric :math:`m`) is wrapped by **nnsight**, which reads
and replaces any torch module's activations, at the construction's own hook points
(:mod:`constructions.layers`, named as in TransformerLens), and each method scores every edge
:math:`e = u \to v\langle x\rangle` of the model's graph on one batch of (clean, corrupted)
prompts, with :math:`\bar m` the batch mean of the metric:

* **activation patching** (``activation-patching``): the clean prompts run once per edge
  with that edge patched (:meth:`Setup.patched_metric`): :math:`(\mathrm{out}^{corr}_u -
  \mathrm{out}_u)W^h_x` added to head :math:`h`'s projected input ``layers[l].hook_x[:, :,
  h]`` (by linearity, its input with :math:`u`'s term replaced), or the difference added to
  the final residual stream ``hook_resid_post[-1]`` for logits; :math:`\mathrm{out}_u` is
  ``hook_resid_pre[0]`` for input and ``layers[l].hook_result[:, :, h]`` for a head (per-head
  outputs on, as TransformerLens's ``use_attn_result``). Score :math:`|\bar m(\emptyset) -
  \bar m(\{e\})|`.
* **edge attribution patching** (``eap``, Syed, Rager, Conmy 2023): one clean forward and
  backward pass; score :math:`|\langle \mathrm{out}^{corr}_u - \mathrm{out}_u,\
  \partial \bar m / \partial\, \mathrm{in}_{v,x} \rangle|`, the first-order estimate of the
  same effect, read at the same hook points (:func:`edge_attribution`).

Scored against the ground truth :math:`C` (:func:`evaluate`): the ROC AUC of the edge scores
(Mann–Whitney, ties counted one half), the precision of the top :math:`|C|` edges (ties at the
boundary broken against the method), and the faithfulness of that top-:math:`|C|` circuit
:math:`\hat C`: :math:`(\bar m(\overline{\hat C}) - \bar m_{corr}) / (\bar m_{clean} -
\bar m_{corr})`, the share of the clean-versus-corrupted gap recovered when every edge outside
:math:`\hat C` is patched at once (recomputing every node). **Any other method** is scored
the same way by :func:`score_edges` (a case id and a score per edge).

**TransformerLens is not needed.** Until 2026-12 the harness ran on the TransformerLens export
(``HookedTransformer`` with per-head ``attn.hook_result`` and split-QKV ``hook_{q,k,v}_input``
hooks, and ``transformer_lens.patching.generic_activation_patch``); TransformerLens 4 removed
``HookedTransformer`` and its ``TransformerBridge`` has neither hook kind
(``examples/bridge_lacks_per_head_hooks.py``), so the same patches are now made on the
native hook points. The two differ only in where a difference meets the read map
(:math:`(\mathrm{in} + \delta)W` there, :math:`\mathrm{in}W + \delta W` here) and in that
TransformerLens stored each activation-patched metric in float32: rounding.

**Cases with a hook point per edge** (the LayerNorm majority head, one-step-GD linear
attention and their variants; ``CircuitCase.native`` is set;
:mod:`constructions.circuits.native_cases`) have a 1-layer graph in which each edge is one
hook point, so patching an edge replaces that hook point's activation by the corrupted run's
(:class:`NativeSetup`), and EAP saves every hook
point's activation inside one trace (each replaced by a distinct copy, so that hook points
fed the same tensor get their own gradients) and differentiates the metric with
``torch.autograd.grad``; a zero map with no hook point (the majority head's
``input -> logits``, there is no residual) scores 0 under both.

A third-party implementation (auto-circuit's ACDC and EAP) is not run: auto-circuit 1.0.1
(checked with ``pip download auto-circuit --no-deps`` and its metadata) requires
``vscode-tqdm>=4.66.2``, whose wheel installs a top-level ``tqdm`` package over the real one
(tqdm 4.70.1 here would be replaced by 4.66.2's code under the other name), pins
``kaleido==0.2.1``, and pulls ``tracr-pypi`` (JAX, dm-haiku, chex) and ``plotly``.

Measured full-config cost (this project's 2-core CPU machine, under load from other jobs):

* ``circuit-discovery``: 434 CPU-s for three seeds (about 145 a seed) on the TransformerLens
  path (2026-12-01); on the nnsight path, 339 s wall for three seeds in two worker processes
  (2026-12-04, the published run). Published with three seeds.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from constructions import _validate
from constructions.circuits import (
    QKV,
    Circuit,
    CircuitCase,
    Edge,
    all_cases,
    attention_graph,
    per_head_results,
)
from constructions.interop.files import INTEROP_HINT
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot

METHODS = ("activation-patching", "eap")


def _head(node: str) -> tuple[int, int]:
    layer, head = node[1:].split(".h")
    return int(layer), int(head)


# --- the one-layer cases with a hook point per edge (CircuitCase.native) ----------------------

def _envoy(root, path: str):
    """The nnsight envoy of the submodule at a dotted ``path`` (digits index a ModuleList)."""
    for part in path.split("."):
        root = root[int(part)] if part.isdigit() else getattr(root, part)
    return root


class NativeSetup:
    """A non-exportable case's model wrapped by nnsight, one prompt batch and its activations
    at every edge's hook point (``case.native``)."""

    def __init__(self, case: CircuitCase, model, clean: torch.Tensor, corrupted: torch.Tensor):
        self.case = case
        module, hooks = case.native(model)
        device = next(module.parameters()).device
        self.clean, self.corrupted = clean.to(device), corrupted.to(device)
        n_heads = sum(1 for name in hooks if name.endswith("->logits") and name != "input->logits")
        self.graph = attention_graph(1, n_heads)
        if set(hooks) != {e.name for e in self.graph}:
            raise ValueError(f"case {case.name}: native hooks must name every edge of the "
                             f"1-layer, {n_heads}-head graph")
        self.hooks = dict(hooks)
        self.live = [(name, path) for name, path in hooks.items() if path is not None]
        self.model = _nnsight()(module)
        self.clean_acts = self._activations(self.clean)
        self.corrupted_acts = self._activations(self.corrupted)

    def _activations(self, prompt: torch.Tensor) -> dict[str, torch.Tensor]:
        store: dict[str, torch.Tensor] = {}
        with torch.no_grad(), self.model.trace(prompt):
            for name, path in self.live:
                store[name] = _envoy(self.model, path).output.save()
        return {name: value.clone() for name, value in store.items()}

    def metric(self, output: torch.Tensor) -> torch.Tensor:
        return self.case.metric(output, self.clean, self.corrupted).mean()

    def patched_metric(self, patched: Sequence[Edge]) -> float:
        r""":math:`\bar m` of the clean run with each patched edge's hook point carrying the
        corrupted run's activation (a zero map's edge has none: nothing to patch)."""
        names = {edge.name for edge in patched}
        saved: dict[str, torch.Tensor] = {}
        with torch.no_grad(), self.model.trace(self.clean):
            for name, path in self.live:        # in forward order, as nnsight requires
                if name in names:
                    _envoy(self.model, path).output = self.corrupted_acts[name]
            saved["metric"] = self.metric(self.model.output).save()
        return float(saved["metric"])


def native_activation_patching(setup: NativeSetup) -> dict[str, float]:
    r"""Edge name -> :math:`|\bar m(\emptyset) - \bar m(\{e\})|`, each patched run an nnsight
    trace with that edge's hook point set to the corrupted activation."""
    base = setup.patched_metric(())
    by_name = {e.name: e for e in setup.graph}
    return {name: 0.0 if path is None else abs(base - setup.patched_metric([by_name[name]]))
            for name, path in setup.hooks.items()}


def native_edge_attribution(setup: NativeSetup) -> dict[str, float]:
    r"""Edge name -> :math:`|\langle \Delta a_e, \partial\bar m/\partial a_e\rangle|` at
    each edge's hook point :math:`a_e`, from one clean nnsight trace (EAP)."""
    kept: dict[str, torch.Tensor] = {}
    with torch.enable_grad(), setup.model.trace(setup.clean):
        for name, path in setup.live:
            envoy = _envoy(setup.model, path)
            # a distinct copy per hook point: the LSA view's q/k/v/residual hooks all see the
            # same prompt tensor, whose .grad would sum their gradients
            act = envoy.output.clone()
            act.requires_grad_()
            envoy.output = act
            kept[name] = act.save()
        kept["metric"] = setup.metric(setup.model.output).save()
    names = [name for name, _ in setup.live]
    grads = torch.autograd.grad(kept["metric"], [kept[n] for n in names], allow_unused=True)
    out = dict.fromkeys(setup.hooks, 0.0)
    for name, grad in zip(names, grads, strict=True):
        if grad is not None:
            delta = setup.corrupted_acts[name] - setup.clean_acts[name]
            out[name] = abs(float((delta * grad).sum()))
    return out


# --- the multi-layer cases: nnsight on the residual-stream graph's native hook points ----------

def _nnsight():
    """nnsight's ``NNsight`` wrapper, or an ImportError that says how to install it."""
    try:
        from nnsight import NNsight
    except ImportError as error:
        raise ImportError(f"the circuit-discovery harness patches through nnsight: "
                          f"{INTEROP_HINT}") from error
    return NNsight


class Setup:
    r"""A multi-layer case's model (an attention-only
    :class:`~constructions.induction_heads.model.InductionTransformer`: its gauge and spurious-head
    variants too) wrapped by nnsight, one prompt batch, and each source node's output in the
    clean and the corrupted run.

    The hook points are the construction's own (:mod:`constructions.layers`): a source's output
    is ``hook_resid_pre[0]`` (``input``) or ``layers[l].hook_result[:, :, h]`` (``a{l}.h{h}``,
    with ``use_attn_result`` on, as TransformerLens's circuit hooks have it); the input
    :math:`\langle x\rangle` of head :math:`h` of layer :math:`l` is read through its projection
    ``layers[l].hook_{x}[:, :, h]`` :math:`= \mathrm{in}_{v,x} W^h_x`, and ``logits`` through
    ``hook_resid_post[-1]`` (no final LayerNorm; the unembedding reads it).
    """

    def __init__(self, case: CircuitCase, model, clean: torch.Tensor, corrupted: torch.Tensor):
        self.case, self.module = case, model
        device = next(model.parameters()).device
        self.clean, self.corrupted = clean.to(device), corrupted.to(device)
        self.n_layers, self.n_heads = len(model.layers), model.layers[0].n_heads
        self.graph = attention_graph(self.n_layers, self.n_heads)
        self.model = _nnsight()(model)
        self.clean_sources = self._sources(self.clean)
        self.corrupted_sources = self._sources(self.corrupted)

    def _sources(self, prompt: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each source node's output ``(B, n+1, d)`` in an unpatched run."""
        saved: dict = {}
        with per_head_results(self.module), torch.no_grad(), self.model.trace(prompt):
            saved["input"] = self.model.hook_resid_pre[0].output.save()
            for layer in range(self.n_layers):
                saved[layer] = self.model.layers[layer].hook_result.output.save()
        out = {"input": saved["input"].clone()}
        for layer in range(self.n_layers):
            for head in range(self.n_heads):
                out[f"a{layer}.h{head}"] = saved[layer][:, :, head].clone()
        return out

    def weight(self, edge: Edge) -> torch.Tensor:
        """The read map ``(d, d_x)`` of a head input edge's target: :math:`W^h_x`."""
        layer, head = _head(edge.target)
        return getattr(self.module.layers[layer], f"W_{edge.input.upper()}")[head]

    def metric(self, logits: torch.Tensor) -> torch.Tensor:
        """The batch mean of the case's metric."""
        return self.case.metric(logits, self.clean, self.corrupted).mean()

    def patched_metric(self, patched: Sequence[Edge]) -> float:
        r""":math:`\bar m` of the clean run with every edge in ``patched`` carrying the
        corrupted output of its source, every node recomputed from its (patched) inputs.

        Patching :math:`u \to v\langle x\rangle` adds :math:`(\mathrm{out}^{corr}_u -
        \mathrm{out}_u) W^v_x` to head :math:`v`'s ``hook_x`` (by linearity, its input with
        :math:`u`'s term replaced), :math:`\mathrm{out}_u` being :math:`u`'s output in this
        run; :math:`u \to \mathrm{logits}` adds the difference to the final residual stream.
        These are :func:`~constructions.circuits.edge_patched_logits`'s operations, in its
        order (differences of one target summed first), inside one nnsight trace."""
        by_target: dict[tuple[int | str, str | None], list[tuple[int, str]]] = {}
        for edge in patched:
            if edge.target == "logits":
                by_target.setdefault(("logits", None), []).append((-1, edge.source))
            else:
                layer, head = _head(edge.target)
                by_target.setdefault((layer, edge.input), []).append((head, edge.source))
        saved: dict = {}
        with per_head_results(self.module), torch.no_grad(), self.model.trace(self.clean):
            current = {"input": self.model.hook_resid_pre[0].output}

            def delta(sources):
                return sum(self.corrupted_sources[u] - current[u] for u in sources)

            for layer in range(self.n_layers):   # in forward order, as nnsight requires
                block, weights = self.model.layers[layer], self.module.layers[layer]
                for x in QKV:
                    targets = by_target.get((layer, x))
                    if not targets:
                        continue
                    envoy = getattr(block, f"hook_{x}")
                    act = envoy.output.clone()                          # (B, n+1, H, d_x)
                    W = getattr(weights, f"W_{x.upper()}")
                    for head in sorted({h for h, _ in targets}):
                        sources = [u for h, u in targets if h == head]
                        act[:, :, head] = act[:, :, head] + delta(sources) @ W[head]
                    envoy.output = act
                result = block.hook_result.output                       # (B, n+1, H, d)
                for head in range(self.n_heads):
                    current[f"a{layer}.h{head}"] = result[:, :, head]
            if ("logits", None) in by_target:
                final = self.model.hook_resid_post[self.n_layers - 1]
                final.output = final.output + delta([u for _, u in by_target[("logits", None)]])
            saved["metric"] = self.metric(self.model.output).save()
        return float(saved["metric"])


def activation_patching(setup: Setup) -> dict[str, float]:
    r"""Edge name -> :math:`|\bar m(\emptyset) - \bar m(\{e\})|`, each patched run one nnsight
    trace (:meth:`Setup.patched_metric`)."""
    base = setup.patched_metric(())
    return {edge.name: abs(base - setup.patched_metric([edge])) for edge in setup.graph}


def edge_attribution(setup: Setup) -> dict[str, float]:
    r"""Edge name -> :math:`|\langle \Delta\mathrm{out}_u\, W^v_x, \partial\bar m/\partial
    q^v_x\rangle|` from one clean forward and backward pass (EAP), :math:`q^v_x =
    \mathrm{in}_{v,x} W^v_x` head :math:`v`'s ``hook_x``: by the chain rule this is
    :math:`|\langle \Delta\mathrm{out}_u, \partial\bar m/\partial\,\mathrm{in}_{v,x}\rangle|`;
    for ``logits`` the gradient at the final residual stream."""
    kept: dict = {}
    final = setup.model.hook_resid_post[setup.n_layers - 1]
    with per_head_results(setup.module), torch.enable_grad(), setup.model.trace(setup.clean):
        for layer in range(setup.n_layers):
            for x in QKV:
                envoy = getattr(setup.model.layers[layer], f"hook_{x}")
                # a copy that requires grad: a leaf where nothing upstream does (layer 0),
                # else a node of the graph, so earlier hook points' gradients flow through it
                act = envoy.output.clone().requires_grad_()
                envoy.output = act
                kept[(layer, x)] = act.save()
        act = final.output.clone().requires_grad_()
        final.output = act
        kept["logits"] = act.save()
        kept["metric"] = setup.metric(setup.model.output).save()
    names = [name for name in kept if name != "metric"]
    grads = dict(zip(names, torch.autograd.grad(kept["metric"], [kept[n] for n in names],
                                                allow_unused=True), strict=True))
    out = {}
    for edge in setup.graph:
        delta = setup.corrupted_sources[edge.source] - setup.clean_sources[edge.source]
        if edge.target == "logits":
            grad = grads["logits"]                                         # (B, n+1, d)
        else:
            layer, head = _head(edge.target)
            grad = grads[(layer, edge.input)]
            grad = None if grad is None else grad[:, :, head]              # (B, n+1, d_x)
            delta = delta @ setup.weight(edge)
        out[edge.name] = 0.0 if grad is None else abs(float((delta * grad).sum()))
    return out


METHOD_FUNCTIONS: dict[str, Callable[[Setup], dict[str, float]]] = {
    "activation-patching": activation_patching, "eap": edge_attribution}
NATIVE_METHOD_FUNCTIONS: dict[str, Callable[[NativeSetup], dict[str, float]]] = {
    "activation-patching": native_activation_patching, "eap": native_edge_attribution}


def setup_for(case: CircuitCase, model, clean: torch.Tensor, corrupted: torch.Tensor
              ) -> Setup | NativeSetup:
    """The residual-graph setup, or the per-edge one for a case with ``native`` hook points
    (both nnsight)."""
    kind = Setup if case.native is None else NativeSetup
    return kind(case, model, clean, corrupted)


# --- scoring ------------------------------------------------------------------------------------

def roc_auc(scores: dict[str, float], truth: frozenset[str]) -> float:
    """P(score of a circuit edge > score of another edge), ties counted 1/2 (Mann–Whitney)."""
    positive = [s for e, s in scores.items() if e in truth]
    negative = [s for e, s in scores.items() if e not in truth]
    if not positive or not negative:
        return math.nan
    wins = sum((p > q) + 0.5 * (p == q) for p in positive for q in negative)
    return wins / (len(positive) * len(negative))


def ranked(scores: dict[str, float], truth: frozenset[str]) -> list[str]:
    """Edges by decreasing score; among equal scores, non-circuit edges first (so a tie at
    the top-k boundary counts against the method)."""
    return sorted(scores, key=lambda e: (-scores[e], e in truth, e))


def precision_at(scores: dict[str, float], truth: frozenset[str], k: int) -> float:
    top = ranked(scores, truth)[:k]
    return sum(e in truth for e in top) / k if k else math.nan


def faithfulness_curve(setup: Setup | NativeSetup, order: Sequence[str]) -> list[float]:
    """Faithfulness of the top-k edges of ``order`` for k = 0..E: the share of the
    clean-versus-corrupted gap recovered with every other edge patched. Kept on the setup by
    ``order``: two methods that rank the edges alike share one curve (same runs, same
    values)."""
    cache = setup.__dict__.setdefault("_curves", {})
    if tuple(order) not in cache:
        cache[tuple(order)] = _faithfulness_curve(setup, order)
    return list(cache[tuple(order)])


def _faithfulness_curve(setup: Setup | NativeSetup, order: Sequence[str]) -> list[float]:
    clean = setup.patched_metric(())
    corrupted = setup.patched_metric(setup.graph)
    if clean == corrupted:  # the corruption does not move the metric: nothing to recover
        return [math.nan] * (len(order) + 1)
    by_name = {e.name: e for e in setup.graph}
    curve = []
    for k in range(len(order) + 1):
        kept = set(order[:k])
        value = setup.patched_metric([by_name[e] for e in by_name if e not in kept])
        curve.append((value - corrupted) / (clean - corrupted))
    return curve


def evaluate(setup: Setup | NativeSetup, circuit: Circuit, edge_scores: Mapping[str, float]
             ) -> dict:
    """Edge scores (every edge of ``setup.graph`` by name) against the ground truth: the
    ranking, AUC, precision and faithfulness at :math:`|C|`, and the faithfulness curve."""
    edge_scores = dict(edge_scores)
    truth, k = circuit.edge_names, len(circuit.edges)
    order = ranked(edge_scores, truth)
    curve = faithfulness_curve(setup, order)
    return {"scores": edge_scores, "order": order, "auc": roc_auc(edge_scores, truth),
            "precision": precision_at(edge_scores, truth, k), "faithfulness": curve[k],
            "curve": curve, "k": k}


def scores(setup: Setup | NativeSetup, circuit: Circuit, method: str) -> dict:
    """One method on one case: its edge scores, AUC, precision and faithfulness at |C|."""
    functions = NATIVE_METHOD_FUNCTIONS if isinstance(setup, NativeSetup) else METHOD_FUNCTIONS
    return evaluate(setup, circuit, functions[method](setup))


def case_setup(case: CircuitCase, size: str | Mapping[str, Any], batch: int, seed: int,
               device: torch.device | str = "cpu") -> tuple[Setup | NativeSetup, Circuit]:
    """(setup, circuit) of a registered case on the harness's prompts: a ``batch`` drawn with
    ``torch.Generator().manual_seed(1000 seed + i)``, ``i`` the case's index in
    :func:`~constructions.circuits.all_cases` (so each case has its own stream)."""
    index = list(all_cases()).index(case.name)
    model, circuit = case.instance(size)
    model = model.to(device)
    generator = torch.Generator().manual_seed(seed * 1000 + index)
    clean, corrupted = case.prompts(generator, batch, size)
    return setup_for(case, model, clean, corrupted), circuit


def score_edges(case: str | CircuitCase, scores: Mapping[str | Edge, float], *,
                size: str | Mapping[str, Any] = "full", batch: int = 64, seed: int = 0
                ) -> dict[str, Any]:
    r"""Score any method's edge scores on a circuit case, as the harness scores its own.

    ``case`` is a registered :class:`~constructions.circuits.CircuitCase` or its id
    (``sorted(all_cases())``); ``scores`` maps every edge of the case's graph
    (:func:`~constructions.circuits.attention_graph`, by MIB name such as
    ``"a0.h0->a1.h0<k>"`` or as an :class:`~constructions.circuits.Edge`) to a finite score,
    larger meaning more important. With :math:`C` the ground-truth circuit and :math:`\bar m`
    the batch mean of the case's metric, it returns

    * ``auc``: :math:`P(s_e > s_{e'})` for :math:`e \in C`, :math:`e' \notin C`, ties counted
      one half (Mann–Whitney);
    * ``precision``: the share of :math:`C` among the top :math:`|C|` edges (ties at the
      boundary broken against the method);
    * ``faithfulness``: :math:`(\bar m(\overline{\hat C}) - \bar m_{corr}) / (\bar m_{clean}
      - \bar m_{corr})` for :math:`\hat C` the top :math:`|C|` edges, every edge outside it
      patched with the corrupted run's value (NaN when the corruption does not move
      :math:`\bar m`);
    * ``k`` :math:`= |C|`, ``scores`` (by edge name), ``order`` (the ranking) and ``curve``
      (the faithfulness of the top :math:`k` edges, :math:`k = 0..E`).

    The prompts are the harness's: ``size``, ``batch`` and ``seed`` as in a
    ``circuit-discovery`` run (the defaults are the published ``full`` config's, seed 0), and
    the functions are the harness's own (:func:`roc_auc`, :func:`precision_at`,
    :func:`faithfulness_curve`), so the harness's scores give its published numbers. Needs
    nnsight (the ``interop`` extra) for the faithfulness runs.
    """
    cases = all_cases()
    if isinstance(case, str):
        if case not in cases:
            raise ValueError(f"case must be a registered case id, one of {sorted(cases)}; "
                             f"got {case!r}")
        case = cases[case]
    elif isinstance(case, CircuitCase):
        if cases.get(case.name) is not case:
            raise ValueError(f"case must be registered (CircuitCase.register), got the "
                             f"unregistered case {case.name!r}")
    else:
        raise TypeError(f"case must be a case id or a CircuitCase, got {type(case).__name__}")
    if not isinstance(scores, Mapping):
        raise TypeError(f"scores must be a mapping of edges to scores, got "
                        f"{type(scores).__name__}")
    batch = _validate.positive_int("batch", batch)
    seed = _validate.seed("seed", seed)
    _, circuit = case.instance(size)                       # validates size
    graph = [e.name for e in attention_graph(circuit.n_layers, circuit.n_heads)]
    by_name: dict[str, float] = {}
    for edge, value in scores.items():
        if not isinstance(edge, (str, Edge)):
            raise TypeError(f"scores must be keyed by edge names or Edges, got "
                            f"{type(edge).__name__}")
        name = edge.name if isinstance(edge, Edge) else edge
        if name in by_name:
            raise ValueError(f"scores must name each edge once, got {name!r} twice")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"scores must map edges to real numbers, got "
                            f"{type(value).__name__} for {name!r}")
        if not math.isfinite(value):
            raise ValueError(f"scores must be finite, got {value} for {name!r}")
        by_name[name] = float(value)
    missing = [e for e in graph if e not in by_name]
    extra = sorted(set(by_name) - set(graph))
    if missing or extra:
        raise ValueError(f"scores must give every edge of the case's {len(graph)}-edge graph "
                         f"and no other: missing {missing}, not in the graph {extra}")
    setup, circuit = case_setup(case, size, batch, seed)
    return evaluate(setup, circuit, {name: by_name[name] for name in graph})


# --- the experiment ---------------------------------------------------------------------------

def figure(case: CircuitCase, circuit: Circuit, method: str, scored: dict):
    """Edge scores (circuit edges red) and the faithfulness of the top-k edges."""
    plt = pyplot()
    names = [e.name for e in attention_graph(circuit.n_layers, circuit.n_heads)]
    values = [scored["scores"][n] for n in names]
    colours = ["#c62828" if n in circuit.edge_names else "#90a4ae" for n in names]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4),
                                      gridspec_kw={"width_ratios": [2, 1]})
    left.bar(range(len(names)), values, color=colours)
    left.set_xticks(range(len(names)), names, rotation=70, fontsize=6, ha="right")
    left.set_ylabel("|effect on metric|")
    left.set_title(f"{method}: AUC {scored['auc']:.3f}, precision@{scored['k']} "
                   f"{scored['precision']:.2f}", fontsize=9)
    right.plot(range(len(scored["curve"])), scored["curve"], marker="o", ms=3)
    right.axvline(scored["k"], color="#c62828", ls=":", label=f"|C| = {scored['k']}")
    right.set_xlabel("top-k edges kept")
    right.set_ylabel("faithfulness")
    right.set_title(f"faithfulness@|C| = {scored['faithfulness']:.3f}", fontsize=9)
    right.legend(fontsize=7)
    fig.suptitle(case.title, fontsize=9)
    fig.tight_layout()
    return fig


def run(config: dict, device: torch.device, seed: int) -> Result:
    result = Result("circuit-discovery", config, seed, str(device))
    cases = all_cases()
    chosen = list(cases) if config["cases"] == "all" else list(config["cases"])
    unknown = sorted(set(chosen) - set(cases))
    if unknown:
        raise ValueError(f"cases {unknown} are not registered; known: {sorted(cases)}")
    rows = []
    for name in chosen:
        case = cases[name]
        setup, circuit = case_setup(case, config["size"], config["batch"], seed, device)
        for method in config["methods"]:
            scored = scores(setup, circuit, method)
            for key in ("auc", "precision", "faithfulness"):
                result.metrics[metric_key(name, method, key)] = scored[key]
            rows.append([name, method, len(setup.graph), scored["k"], scored["auc"],
                         scored["precision"], scored["faithfulness"],
                         ", ".join(scored["order"][:scored["k"]])])
            result.figures[f"{name}-{method}"] = figure(case, circuit, method, scored)
    result.table("scores", ["case", "method", "edges", "|C|", "ROC AUC", "precision@|C|",
                            "faithfulness@|C|", "top-|C| edges"], rows)
    return result


CIRCUIT_DISCOVERY = Experiment(
    name="circuit-discovery",
    description=("Activation patching and edge attribution patching (both through nnsight, on "
                 "the constructions' native hook points) scored against the exact "
                 "ground-truth circuits of the circuit cases: ROC AUC, precision and "
                 "faithfulness at the true circuit size."),
    configs={
        "smoke": {"cases": "all", "size": "smoke", "batch": 8, "methods": list(METHODS)},
        # Every case at its full size. The batch is 64, not GPU-sized: a circuit edge's effect
        # is exact, so the batch moves activation patching's scores only in their rounding
        # (EAP's rounding-level scores, as on the rotated case, can move more); batch 512 took
        # over 20 CPU-minutes a seed on this 2-core machine.
        "full": {"cases": "all", "size": "full", "batch": 64, "methods": list(METHODS)},
    },
    run=run,
    # the whole package: the cases, their circuits, samplers, metrics and hook maps
    code=("constructions.circuits",),
)
