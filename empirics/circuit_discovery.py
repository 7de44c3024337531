r"""Circuit-discovery methods scored against exact ground-truth circuits.

Every case of :data:`constructions.circuit_cases.CASES` (a construction, its circuit under a
corruption, a prompt sampler and a metric :math:`m`) is exported with
``to_transformer_lens(model, circuit_hooks=True)`` and each method scores every edge
:math:`e = u \to v\langle x\rangle` of the model's graph on one batch of (clean, corrupted)
prompts, with :math:`\bar m` the batch mean of the metric:

* **activation patching** (``activation-patching``): TransformerLens's own
  ``transformer_lens.patching.generic_activation_patch`` runs the clean prompts once per edge
  with that edge patched: a patch setter on ``blocks.L.hook_{x}_input[:, :, h]`` (or the final
  ``hook_resid_post`` for logits) adds the corrupted-minus-clean output of :math:`u`
  (``hook_resid_pre`` of block 0 for input, ``attn.hook_result[:, :, h]`` for a head). Score
  :math:`|\bar m(\emptyset) - \bar m(\{e\})|`.
* **edge attribution patching** (``eap``, Syed, Rager, Conmy 2023): one clean forward and
  backward pass; score :math:`|\langle \mathrm{out}^{corr}_u - \mathrm{out}_u,\
  \partial \bar m / \partial\, \mathrm{in}_{v,x} \rangle|`, the first-order estimate of the
  same effect, read from the same hooks.

Scored against the ground truth :math:`C` (:func:`scores`): the ROC AUC of the edge scores
(Mann–Whitney, ties counted one half), the precision of the top :math:`|C|` edges (ties at the
boundary broken against the method), and the faithfulness of that top-:math:`|C|` circuit
:math:`\hat C`: :math:`(\bar m(\overline{\hat C}) - \bar m_{corr}) / (\bar m_{clean} -
\bar m_{corr})`, the share of the clean-versus-corrupted gap recovered when every edge outside
:math:`\hat C` is patched at once (recomputing every node, in TransformerLens hooks too).

**Cases that do not export to TransformerLens** (the LayerNorm majority head, one-step-GD
linear attention and their variants; ``CircuitCase.native`` is set) are scored the same way on
their native hook points (:mod:`constructions.native_cases`) through **nnsight**, which patches
any torch module's activations (:class:`NativeSetup`): activation patching replaces one hook
point's activation by the corrupted run's inside an nnsight trace, and EAP saves every hook
point's activation inside one trace (each replaced by a distinct copy, so that hook points
fed the same tensor get their own gradients) and differentiates the metric with
``torch.autograd.grad``. In a 1-layer graph each edge is one hook point, so these are the
edge-level methods above; a zero map with no hook point (the majority head's
``input -> logits``, there is no residual) scores 0 under both.

A third-party implementation (auto-circuit's ACDC and EAP) is not run: auto-circuit 1.0.1
(checked with ``pip download auto-circuit --no-deps`` and its metadata) requires
``vscode-tqdm>=4.66.2``, whose wheel installs a top-level ``tqdm`` package over the real one
(tqdm 4.70.1 here would be replaced by 4.66.2's code under the other name), pins
``kaleido==0.2.1``, and pulls ``tracr-pypi`` (JAX, dm-haiku, chex) and ``plotly``.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``circuit-discovery``: 434 CPU-s for three seeds (about 145 a seed); published with three seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from constructions.circuit_cases import CircuitCase, all_cases
from constructions.circuits import Circuit, Edge, attention_graph
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot

METHODS = ("activation-patching", "eap")


# --- the TransformerLens side ------------------------------------------------------------------

class Setup:
    """A case's model exported to TransformerLens, one prompt batch and its two caches."""

    def __init__(self, case: CircuitCase, model, clean: torch.Tensor, corrupted: torch.Tensor):
        from constructions.export import (
            to_transformer_lens,
            transformer_lens_inputs,
            transformer_lens_outputs,
        )

        self.case, self.model = case, model
        self.tl = to_transformer_lens(model, circuit_hooks=True)
        device = next(model.parameters()).device
        self.clean, self.corrupted = clean.to(device), corrupted.to(device)
        self.clean_input = transformer_lens_inputs(model, self.clean)["input"]
        self.corrupted_input = transformer_lens_inputs(model, self.corrupted)["input"]
        self._outputs = transformer_lens_outputs
        self.n_layers, self.n_heads = self.tl.cfg.n_layers, self.tl.cfg.n_heads
        self.graph = attention_graph(self.n_layers, self.n_heads)
        with torch.no_grad():
            _, clean_cache = self.tl.run_with_cache(self.clean_input)
            _, self.corrupted_cache = self.tl.run_with_cache(self.corrupted_input)
        self.clean_sources = self.sources(clean_cache)
        self.corrupted_sources = self.sources(self.corrupted_cache)

    def sources(self, cache) -> dict[str, torch.Tensor]:
        """Each source node's output ``(B, n+1, d)`` in a cache."""
        out = {"input": cache["blocks.0.hook_resid_pre"]}
        for layer in range(self.n_layers):
            result = cache[f"blocks.{layer}.attn.hook_result"]              # (B, n+1, H, d)
            for head in range(self.n_heads):
                out[f"a{layer}.h{head}"] = result[:, :, head]
        return out

    def metric(self, logits: torch.Tensor) -> torch.Tensor:
        """The batch mean of the case's metric on TransformerLens logits."""
        return self.case.metric(self._outputs(self.model, logits), self.clean,
                                self.corrupted).mean()

    def patched_metric(self, patched: Sequence[Edge]) -> float:
        """:math:`\\bar m` of the clean run with every edge in ``patched`` carrying the
        corrupted output of its source, every node recomputed from its (patched) inputs."""
        current: dict[str, torch.Tensor] = {}
        by_target: dict[str, list[tuple[int | None, str]]] = {}
        for edge in patched:
            if edge.target == "logits":
                name, head = f"blocks.{self.n_layers - 1}.hook_resid_post", None
            else:
                layer, head = _head(edge.target)
                name = f"blocks.{layer}.hook_{edge.input}_input"
            by_target.setdefault(name, []).append((head, edge.source))

        def record_input(act, hook):
            current["input"] = act

        def record_result(act, hook):
            layer = int(hook.name.split(".")[1])
            for head in range(self.n_heads):
                current[f"a{layer}.h{head}"] = act[:, :, head]

        def patch(act, hook):
            act = act.clone()
            for head, source in by_target[hook.name]:
                delta = self.corrupted_sources[source] - current[source]      # (B, n+1, d)
                if head is None:
                    act = act + delta
                else:
                    act[:, :, head] = act[:, :, head] + delta
            return act

        hooks = [("blocks.0.hook_resid_pre", record_input)]
        hooks += [(f"blocks.{layer}.attn.hook_result", record_result)
                  for layer in range(self.n_layers)]
        hooks += [(name, patch) for name in by_target]
        with torch.no_grad():
            logits = self.tl.run_with_hooks(self.clean_input, fwd_hooks=hooks)
        return float(self.metric(logits))


def _head(node: str) -> tuple[int, int]:
    layer, head = node[1:].split(".h")
    return int(layer), int(head)


# --- the nnsight side (cases that do not export) ------------------------------------------------

def _envoy(root, path: str):
    """The nnsight envoy of the submodule at a dotted ``path`` (digits index a ModuleList)."""
    for part in path.split("."):
        root = root[int(part)] if part.isdigit() else getattr(root, part)
    return root


class NativeSetup:
    """A non-exportable case's model wrapped by nnsight, one prompt batch and its activations
    at every edge's hook point (``case.native``)."""

    def __init__(self, case: CircuitCase, model, clean: torch.Tensor, corrupted: torch.Tensor):
        from nnsight import NNsight

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
        self.model = NNsight(module)
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


# --- the methods --------------------------------------------------------------------------------

def activation_patching(setup: Setup) -> dict[str, float]:
    """Edge name -> :math:`|\\bar m(\\emptyset) - \\bar m(\\{e\\})|`, each patched run made by
    ``transformer_lens.patching.generic_activation_patch`` (one call per target hook kind)."""
    import pandas as pd
    from transformer_lens import patching

    nodes = list(setup.clean_sources)
    with torch.no_grad():
        base = float(setup.metric(setup.tl(setup.clean_input)))
    # TransformerLens stores each patched metric in a default-dtype (float32) tensor: round the
    # base the same way, so an edge that changes nothing scores exactly 0.
    base = float(torch.tensor(base, dtype=torch.get_default_dtype()))
    groups: dict[str, list[Edge]] = {}
    for edge in setup.graph:
        groups.setdefault("resid_post" if edge.target == "logits" else f"{edge.input}_input",
                          []).append(edge)
    out = {}
    for activation, edges in groups.items():
        rows = []
        for edge in edges:
            layer, head = ((setup.n_layers - 1, -1) if edge.target == "logits"
                           else _head(edge.target))
            rows.append({"layer": layer, "head": head, "source": nodes.index(edge.source)})

        def setter(act, index, corrupted_act):
            _, head, source = index
            delta = (setup.corrupted_sources[nodes[source]]
                     - setup.clean_sources[nodes[source]])                 # (B, n+1, d)
            if head < 0:
                return act + delta
            act = act.clone()
            act[:, :, head] = act[:, :, head] + delta
            return act

        with torch.no_grad():
            values = patching.generic_activation_patch(
                setup.tl, setup.clean_input, setup.corrupted_cache, setup.metric, setter,
                activation, index_df=pd.DataFrame(rows))
        out.update({e.name: abs(base - float(v)) for e, v in zip(edges, values, strict=True)})
    return out


def edge_attribution(setup: Setup) -> dict[str, float]:
    """Edge name -> :math:`|\\langle \\Delta\\mathrm{out}_u, \\partial\\bar m/\\partial
    \\mathrm{in}_{v,x}\\rangle|` from one clean forward and backward pass (EAP)."""
    kept: dict[str, torch.Tensor] = {}

    def keep(act, hook):
        act.retain_grad()
        kept[hook.name] = act

    final = f"blocks.{setup.n_layers - 1}.hook_resid_post"
    names = [final, *(f"blocks.{layer}.hook_{x}_input" for layer in range(setup.n_layers)
                      for x in "qkv")]
    setup.tl.zero_grad(set_to_none=True)
    with torch.enable_grad():
        logits = setup.tl.run_with_hooks(setup.clean_input,
                                         fwd_hooks=[(n, keep) for n in names])
        setup.metric(logits).backward()
    out = {}
    for edge in setup.graph:
        if edge.target == "logits":
            grad = kept[final].grad                                        # (B, n+1, d)
        else:
            layer, head = _head(edge.target)
            grad = kept[f"blocks.{layer}.hook_{edge.input}_input"].grad[:, :, head]
        delta = setup.corrupted_sources[edge.source] - setup.clean_sources[edge.source]
        out[edge.name] = abs(float((delta * grad).sum()))
    setup.tl.zero_grad(set_to_none=True)
    return out


METHOD_FUNCTIONS: dict[str, Callable[[Setup], dict[str, float]]] = {
    "activation-patching": activation_patching, "eap": edge_attribution}
NATIVE_METHOD_FUNCTIONS: dict[str, Callable[[NativeSetup], dict[str, float]]] = {
    "activation-patching": native_activation_patching, "eap": native_edge_attribution}


def setup_for(case: CircuitCase, model, clean: torch.Tensor, corrupted: torch.Tensor
              ) -> Setup | NativeSetup:
    """The TransformerLens setup, or the nnsight one for a case with native hook points."""
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


def scores(setup: Setup, circuit: Circuit, method: str) -> dict:
    """One method on one case: its edge scores, AUC, precision and faithfulness at |C|."""
    functions = NATIVE_METHOD_FUNCTIONS if isinstance(setup, NativeSetup) else METHOD_FUNCTIONS
    edge_scores = functions[method](setup)
    truth, k = circuit.edge_names, len(circuit.edges)
    order = ranked(edge_scores, truth)
    curve = faithfulness_curve(setup, order)
    return {"scores": edge_scores, "order": order, "auc": roc_auc(edge_scores, truth),
            "precision": precision_at(edge_scores, truth, k), "faithfulness": curve[k],
            "curve": curve, "k": k}


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
    for index, name in enumerate(chosen):
        case = cases[name]
        model, circuit = case.instance(config["size"])
        model = model.to(device)
        generator = torch.Generator().manual_seed(seed * 1000 + index)
        clean, corrupted = case.prompts(generator, config["batch"], config["size"])
        setup = setup_for(case, model, clean, corrupted)
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
    description=("Activation patching (TransformerLens's patching utilities, or nnsight on "
                 "the cases that do not export) and edge "
                 "attribution patching scored against the exact ground-truth circuits of the "
                 "circuit cases: ROC AUC, precision and faithfulness at the true circuit "
                 "size."),
    configs={
        "smoke": {"cases": "all", "size": "smoke", "batch": 8, "methods": list(METHODS)},
        # Every case at its full size. The batch is 64, not GPU-sized: a circuit edge's effect
        # is exact, so the batch moves activation patching's scores only in their rounding
        # (EAP's rounding-level scores, as on the rotated case, can move more); batch 512 took
        # over 20 CPU-minutes a seed on this 2-core machine.
        "full": {"cases": "all", "size": "full", "batch": 64, "methods": list(METHODS)},
    },
    run=run,
    code=("constructions.circuit_cases", "constructions.circuits", "constructions.native_cases"),
)
