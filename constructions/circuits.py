r"""Ground-truth circuits of attention-only constructions, and edge patching on native hooks.

**The computational graph** of an attention-only transformer with :math:`L` layers of
:math:`H` heads (no MLPs, no normalisation) has the nodes ``input`` (token plus positional
embedding, the residual stream before layer 0), ``a{l}.h{h}`` (one head's output, which it
adds to the residual stream) and ``logits`` (the unembedding of the final residual stream).
Its edges, in the naming of the MIB circuit track (Mueller et al. 2025, whose leaderboard
format is ``"input->a1.h0<v>"``; the format was read in a third-party converter to it, not in
MIB's own code), run from every node to every later attention head's query, key or value input
(``<q>``, ``<k>``, ``<v>``) and to ``logits``. Since the residual stream is a sum, the input
of head :math:`v` is :math:`\sum_u \mathrm{out}_u` over the nodes upstream of it, and *patching
the edge* :math:`u \to v\langle x\rangle` from a corrupted run replaces :math:`\mathrm{out}_u`
by its corrupted value in that one input only; every node is then recomputed from its own
(clean or patched) inputs. :func:`edge_patched_logits` does exactly that, in the model's own
dtype, through the construction's hook points (:mod:`constructions.layers`), without
TransformerLens.

**A circuit** (:class:`Circuit`) is a set of edges with a role each; it is the ground truth
*relative to a corruption*: an edge belongs to it iff the corruption changes what the edge
carries in a way the output depends on. :func:`induction_mechanism` lists the edges whose
weights are non-zero in the induction constructions (what the mechanism uses on some input);
:func:`induction_circuit` is the subset that matters under a corruption:
:func:`resample_next_token` (what the induction head copies) or
:func:`resample_earlier_occurrence` (where it attends). Realistic variants with the same
circuits are in :mod:`constructions.circuit_variants` and :mod:`constructions.circuit_gauges`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterable, Iterator

import torch

from constructions import _validate
from constructions.induction_heads.model import InductionTransformer
from constructions.induction_heads.task import induction_targets, previous_occurrence

QKV = ("q", "k", "v")


@dataclasses.dataclass(frozen=True)
class Edge:
    """One edge ``source -> target<input>`` of the graph, with the role it plays.

    ``source`` is ``"input"`` or ``"a{l}.h{h}"``; ``target`` is ``"a{l}.h{h}"`` (then
    ``input`` is ``"q"``, ``"k"`` or ``"v"``) or ``"logits"`` (``input`` is ``None``).
    """

    source: str
    target: str
    input: str | None = None
    role: str = ""

    @property
    def name(self) -> str:
        """The MIB edge name, e.g. ``"a0.h0->a1.h0<k>"``."""
        return f"{self.source}->{self.target}" + (f"<{self.input}>" if self.input else "")

    def hooks(self, n_layers: int) -> tuple[str, str]:
        """(source, target) as TransformerLens hook names of ``to_transformer_lens(model,
        circuit_hooks=True)``, which sets ``use_attn_result`` and ``use_split_qkv_input``;
        ``logits`` reads the last block's ``hook_resid_post`` (these models have no final
        LayerNorm)."""
        n_layers = _validate.positive_int("n_layers", n_layers)
        return _source_hook(self.source), _target_hook(self.target, self.input, n_layers)


def _head(node: str) -> tuple[int, int]:
    layer, head = node[1:].split(".h")
    return int(layer), int(head)


def _source_hook(node: str) -> str:
    if node == "input":
        return "blocks.0.hook_resid_pre"
    layer, head = _head(node)
    return f"blocks.{layer}.attn.hook_result[:, :, {head}]"


def _target_hook(node: str, qkv: str | None, n_layers: int) -> str:
    if node == "logits":
        return f"blocks.{n_layers - 1}.hook_resid_post"  # the final residual stream
    layer, head = _head(node)
    return f"blocks.{layer}.hook_{qkv}_input[:, :, {head}]"


def attention_graph(n_layers: int, n_heads: int) -> tuple[Edge, ...]:
    """Every edge of an attention-only model's graph, in a fixed order (upstream first)."""
    n_layers = _validate.positive_int("n_layers", n_layers)
    n_heads = _validate.positive_int("n_heads", n_heads)
    heads = [[f"a{lay}.h{h}" for h in range(n_heads)] for lay in range(n_layers)]
    edges = []
    for layer in range(n_layers):
        upstream = ["input", *itertools.chain.from_iterable(heads[:layer])]
        edges += [Edge(u, v, x) for v in heads[layer] for x in QKV for u in upstream]
    edges += [Edge(u, "logits") for u in ["input", *itertools.chain.from_iterable(heads)]]
    return tuple(edges)


def _patched_names(patched: Iterable[Edge | str], n_layers: int, n_heads: int) -> set[str]:
    """The names of the edges in ``patched`` (edges or names), each checked to be an edge of
    the ``n_layers``-layer, ``n_heads``-head graph (the one-layer constructions' patching)."""
    names = {e.name for e in attention_graph(n_layers, n_heads)}
    chosen = set()
    for edge in patched:
        name = edge.name if isinstance(edge, Edge) else edge
        if name not in names:
            raise ValueError(f"patched must hold edges of the {n_layers}-layer, "
                             f"{n_heads}-head graph, got {name!r}")
        chosen.add(name)
    return chosen


@dataclasses.dataclass(frozen=True)
class Circuit:
    """A circuit of an attention-only model: the edges that carry the computation.

    ``edges`` is a subset of :func:`attention_graph` ``(n_layers, n_heads)``, each with its
    role; ``corruption`` names the corruption it is the ground truth for.
    """

    name: str
    n_layers: int
    n_heads: int
    d_model: int
    edges: tuple[Edge, ...]
    corruption: str = ""

    def __post_init__(self) -> None:
        names = {e.name for e in attention_graph(self.n_layers, self.n_heads)}
        for edge in self.edges:
            if not isinstance(edge, Edge) or edge.name not in names:
                raise ValueError(f"edges must be edges of the {self.n_layers}-layer, "
                                 f"{self.n_heads}-head graph, got {edge!r}")
        if len({e.name for e in self.edges}) != len(self.edges):
            raise ValueError("edges must be distinct")

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes the edges touch, in graph order."""
        touched = {e.source for e in self.edges} | {e.target for e in self.edges}
        order = ["input", *(f"a{lay}.h{h}" for lay in range(self.n_layers)
                            for h in range(self.n_heads)), "logits"]
        return tuple(n for n in order if n in touched)

    @property
    def edge_names(self) -> frozenset[str]:
        return frozenset(e.name for e in self.edges)

    def complement(self) -> tuple[Edge, ...]:
        """The edges of the full graph that are not in the circuit."""
        return tuple(e for e in attention_graph(self.n_layers, self.n_heads)
                     if e.name not in self.edge_names)

    def hook_names(self) -> dict[str, tuple[str, str]]:
        """Each edge's (source, target) TransformerLens hook names, by MIB edge name."""
        return {e.name: e.hooks(self.n_layers) for e in self.edges}

    def without(self, name: str) -> Circuit:
        """This circuit with the edge called ``name`` dropped."""
        if name not in self.edge_names:
            raise ValueError(f"name must be an edge of the circuit, got {name!r}")
        return dataclasses.replace(self, edges=tuple(e for e in self.edges if e.name != name))

    def with_edge(self, edge: Edge) -> Circuit:
        """This circuit with one more edge."""
        return dataclasses.replace(self, edges=(*self.edges, edge))

    def relabelled(self, heads: dict[str, str], n_heads: int, d_model: int) -> Circuit:
        """The same circuit in a model whose heads were renamed by ``heads`` (old node name ->
        new), with ``n_heads`` heads a layer and width ``d_model`` (a variant's)."""
        _validate.instance("heads", heads, dict)
        n_heads = _validate.positive_int("n_heads", n_heads)
        d_model = _validate.positive_int("d_model", d_model)

        def rename(node: str) -> str:
            return heads.get(node, node)
        edges = tuple(dataclasses.replace(e, source=rename(e.source), target=rename(e.target))
                      for e in self.edges)
        return Circuit(self.name, self.n_layers, n_heads, d_model, edges, self.corruption)

    def to_mib_json(self) -> dict:
        """The circuit in the MIB circuit-track graph format: ``cfg``, and every node and edge
        of the full graph with ``in_graph`` (and ``score`` 1 or 0 for edges). The graph has no
        MLP nodes: these models have none."""
        graph = attention_graph(self.n_layers, self.n_heads)
        inside, nodes = self.edge_names, self.nodes
        all_nodes = ["input", *(f"a{lay}.h{h}" for lay in range(self.n_layers)
                                for h in range(self.n_heads)), "logits"]
        return {
            "cfg": {"n_layers": self.n_layers, "n_heads": self.n_heads,
                    "d_model": self.d_model, "parallel_attn_mlp": False},
            "nodes": {n: {"in_graph": n in nodes} for n in all_nodes},
            "edges": {e.name: {"score": float(e.name in inside), "in_graph": e.name in inside}
                      for e in graph},
        }


# --- the induction constructions --------------------------------------------------------------

INDUCTION_KINDS = ("two_layer", "compact")

_MECHANISM = (
    Edge("input", "a0.h0", "q", "position t -> L0H0 query: asks for key t-1 "
         "(W_Q^1 reads the positional block only)"),
    Edge("input", "a0.h0", "k", "position j -> L0H0 key (W_K^1 reads the positional block)"),
    Edge("input", "a0.h0", "v", "token -> L0H0 value: the token the previous-token head copies "
         "into prev"),
    Edge("input", "a1.h0", "q", "current token sigma_i -> L1H0 query (beta_2 times its embedding)"),
    Edge("input", "a1.h0", "k", "position -> L1H0 key: the recency bias lambda j and the BOS "
         "sink theta"),
    Edge("a0.h0", "a1.h0", "k", "L0H0 previous-token head -> L1H0 key: prev_j, matched against "
         "the current token"),
    Edge("input", "a1.h0", "v", "token -> L1H0 value: the token the induction head copies"),
    Edge("a1.h0", "logits", None, "L1H0 induction head -> unembedding: the out block W_U reads"),
)

_NEXT_TOKEN = ("input->a1.h0<v>", "a1.h0->logits")


def induction_mechanism(kind: str, vocab_size: int, max_len: int) -> Circuit:
    r"""The edges the induction constructions use, derived from their weights.

    Of the 12 edges of the 2-layer, 1-head graph, an edge :math:`u \to v\langle x\rangle`
    can carry anything only if :math:`u`'s write map composed with :math:`v`'s read map
    :math:`W_x` is non-zero. Both builders write disjoint residual blocks (input: tok, pos,
    const, and bos/rec in the compact one; L0H0: prev; L1H0: out), and read: :math:`W^1_Q,
    W^1_K` the positional block, :math:`W^1_V` tok, :math:`W^2_Q` tok and const,
    :math:`W^2_K` prev and the positional part (pos; rec and bos in the compact one),
    :math:`W^2_V` tok (and bos), :math:`W_U` out. So the 8 edges listed in the roles below are
    the non-zero ones, and ``a0.h0 -> a1.h0<q>``, ``a0.h0 -> a1.h0<v>``, ``input -> logits``
    and ``a0.h0 -> logits`` are zero maps: patching them changes nothing, for any corruption.
    """
    kind = _validate.choice("kind", kind, INDUCTION_KINDS)
    S = _validate.positive_int("vocab_size", vocab_size)
    n = _validate.positive_int("max_len", max_len)
    d = 3 * S + n + 5 if kind == "two_layer" else 11
    return Circuit(f"{kind}_induction mechanism", 2, 1, d, _MECHANISM, corruption="any")


CORRUPTIONS = ("resample_next_token", "resample_earlier_occurrence")

_EARLIER = ("input->a0.h0<v>", "a0.h0->a1.h0<k>", "a1.h0->logits")


def induction_circuit(kind: str, vocab_size: int, max_len: int,
                      corruption: str = "resample_next_token") -> Circuit:
    r"""The ground-truth circuit of the one-hot induction construction under ``corruption``,
    at the final position.

    **Under** :func:`resample_next_token`. The corruption changes one causal variable: the
    token :math:`\tau` at the induction key :math:`c = j^\star + 2` (model positions, BOS at
    0), i.e. *what* the induction head copies, not *where* it attends. It keeps
    :math:`\tau' \ne \sigma_i` and :math:`c < i`, so the latest earlier occurrence
    :math:`j^\star` of :math:`\sigma_i` is the same in both runs. Edge by edge (two-layer,
    one-hot blocks):

    * ``input -> a0.h0<q>``, ``<k>``, ``input -> a1.h0<k>``: read positions only, which the
      corruption does not change.
    * ``input -> a1.h0<q>``: the embedding changes at row :math:`c` only, and row :math:`i`'s
      query is the current token, the same in both runs.
    * ``input -> a0.h0<v>`` and ``a0.h0 -> a1.h0<k>``: they carry prev, which changes where
      :math:`\tau` was (:math:`\mathrm{prev}_{c+1}` and the weak off-diagonal terms), but the
      induction head's query :math:`\beta_2 e_{\sigma_i}` reads only the :math:`\sigma_i`
      coordinate :math:`\mathrm{prev}_j[\sigma_i] = \sum_t A^1_{jt}[\sigma_t = \sigma_i]`, which
      neither :math:`\tau` nor :math:`\tau'` (both :math:`\ne \sigma_i`) touches.
    * the four zero edges of :func:`induction_mechanism`.
    * ``input -> a1.h0<v>``: the value at :math:`c` is :math:`e_\tau` clean and
      :math:`e_{\tau'}` corrupted, and the head puts weight :math:`w = A^2_{ic} > 1/2` on it, so
      the logit difference :math:`\ell_\tau - \ell_{\tau'}` moves by exactly :math:`2w`.
    * ``a1.h0 -> logits``: it carries that output: the same move, :math:`2w`.

    So the circuit is these last two edges.

    **Under** :func:`resample_earlier_occurrence`. The corruption changes the other causal
    variable, *where* the induction head attends: the one earlier occurrence
    :math:`j^\star` of :math:`a = \sigma_i` becomes :math:`a' \notin \{a, \tau\}`
    (:math:`\tau = \sigma_{j^\star+1}`), so the corrupted prompt has no earlier :math:`a`, its
    target is :math:`\bot`, and the metric is :math:`m = \ell_{i,\tau} - \ell_{i,\bot}`
    (:func:`logit_difference`). Edge by edge:

    * ``input -> a0.h0<q>``, ``<k>``, ``input -> a1.h0<k>``: positions only (the input's
      change is in the tok block, which :math:`W^1_Q, W^1_K, W^2_K` do not read): unchanged.
    * ``input -> a1.h0<q>``: row :math:`i`'s query is :math:`\beta_2 e_a`, the same in both
      runs (the embedding changes at row :math:`j^\star+1` only).
    * ``input -> a1.h0<v>``: the value at model position :math:`j^\star+1` goes from
      :math:`e_a` to :math:`e_{a'}`; the logits :math:`\ell_a, \ell_{a'}` move (by the small
      weight on that non-matching key), but :math:`\ell_\tau` and :math:`\ell_\bot` read
      coordinates :math:`\tau, \bot \notin \{a, a'\}`: the metric does not move.
    * ``input -> a0.h0<v>``: the previous-token head's value at :math:`j^\star+1` becomes
      :math:`e_{a'}`, so :math:`\mathrm{prev}_c[a]` drops from :math:`\ge \alpha` to the
      weak terms: key :math:`c` stops matching and the induction head falls back on the BOS
      sink, condition (D): the metric goes from :math:`\ge 2w - 1` to :math:`\le 1 - 2w_0`.
    * ``a0.h0 -> a1.h0<k>``: carries that prev into the induction head's key: the same move.
    * ``a1.h0 -> logits``: carries the induction head's output: the same move.
    * the four zero edges of :func:`induction_mechanism`.

    So the circuit is the previous-token head's value input, its composition into the
    induction head's key (K-composition) and the induction head's output: 3 edges. (Were the
    metric the whole logit vector, ``input -> a1.h0<v>`` would matter too, by the weight
    :math:`\le 1 - w` on a non-matching key.)

    **The compact construction** (:func:`~constructions.induction_heads.compact_induction`)
    has the same 8 non-zero edges, and under :func:`resample_next_token` the same 2-edge
    circuit, but its sufficiency holds only within a derived bound: its query
    :math:`\beta_2 u_{\sigma_i}` reads the whole circle code of prev, and
    :math:`\langle u_{\sigma_i}, u_{\tau'} - u_\tau\rangle \ne 0`, so ``input -> a0.h0<v>`` and
    ``a0.h0 -> a1.h0<k>`` move the scores of the keys whose prev holds :math:`\tau`
    (key :math:`c+1` by up to :math:`2\beta_2`, the others by :math:`\le 2\beta_2\delta`). Every
    key so moved is non-matching or the induction key itself, so the induction head's row is
    the corrupted run's, whose wrong mass is :math:`\le \bar\varepsilon = \omega/(1+\omega)`
    (:math:`\omega` = (A′)+(B′)+(C′)); the metric moves by at most
    :math:`2\bar\varepsilon\,|u_\tau - u_{\tau'}|`, while patching a circuit edge moves it by
    at least :math:`|u_\tau - u_{\tau'}|((1-\bar\varepsilon)|u_\tau - u_{\tau'}| -
    2\bar\varepsilon)`, which is larger when :math:`\rho > 2\omega`. The derivation, with its
    rounding terms, is in :mod:`theorems.areas.circuits.compact`. Under
    :func:`resample_earlier_occurrence` its circuit is again the one-hot one's 3 edges, and
    only ``input -> a1.h0<v>`` moves the metric off the circuit: the value after
    :math:`j^\star` goes from :math:`u_a` to :math:`u_{a'}`, and :math:`\langle u_{a'} - u_a,
    u_\tau - u_\bot\rangle \ne 0` on the circle, times the clean weight
    :math:`\le\bar\varepsilon` on that (non-induction) key: at most
    :math:`2\bar\varepsilon|u_\tau - u_\bot|`, with :math:`\omega` now also covering (D′).
    """
    kind = _validate.choice("kind", kind, INDUCTION_KINDS)
    corruption = _validate.choice("corruption", corruption, CORRUPTIONS)
    mechanism = induction_mechanism(kind, vocab_size, max_len)
    kept = _NEXT_TOKEN if corruption == "resample_next_token" else _EARLIER
    label = "next-token" if corruption == "resample_next_token" else "earlier-occurrence"
    edges = tuple(e for e in mechanism.edges if e.name in kept)
    return dataclasses.replace(mechanism, name=f"{kind}_induction {label} circuit",
                               edges=edges, corruption=corruption)


# --- corruption and metric ---------------------------------------------------------------------

def _prompt_batch(tokens: object, vocab_size: object) -> tuple[torch.Tensor, torch.Tensor,
                                                                 torch.Tensor]:
    """(tokens as given, as a (B, n) batch, the final token's latest earlier occurrence)."""
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    tokens = _validate.token_tensor("tokens", tokens, vocab_size=vocab_size)
    batch = tokens if tokens.ndim == 2 else tokens.unsqueeze(0)
    if batch.shape[-1] < 3 or batch.shape[0] == 0:
        raise ValueError(f"tokens must hold at least one prompt of length >= 3, got shape "
                         f"{tuple(tokens.shape)}")
    return tokens, batch, previous_occurrence(batch)[:, -1]                  # (B,)


def _replacements(replacement: object, previous: torch.Tensor, vocab_size: int
                  ) -> torch.Tensor:
    """``replacement`` (an int or a (B,) tensor) as a (B,) tensor of tokens."""
    if isinstance(replacement, int) and not isinstance(replacement, bool):
        replacement = torch.full_like(previous, replacement)
    replacement = _validate.token_tensor("replacement", replacement, vocab_size=vocab_size,
                                         ndim=1)
    if replacement.shape != previous.shape:
        raise ValueError(f"replacement must have shape {tuple(previous.shape)}, "
                         f"got {tuple(replacement.shape)}")
    return replacement


def resample_next_token(tokens: torch.Tensor, replacement: torch.Tensor | int,
                        vocab_size: int) -> torch.Tensor:
    r"""The corrupted prompt: the token after the latest earlier occurrence of the final token
    replaced by ``replacement``.

    ``tokens`` ``(B, n)`` or ``(n,)``: at the final position :math:`i`, let :math:`j^\star` be
    the latest earlier occurrence of :math:`\sigma_i`; it must exist with
    :math:`j^\star + 1 < i`, so that the replaced token is not the current one.
    ``replacement`` (an int or a ``(B,)`` tensor) must differ from the old token
    :math:`\tau_i` and from :math:`\sigma_i`; then the corrupted target is ``replacement``.
    """
    tokens, batch, previous = _prompt_batch(tokens, vocab_size)
    n = batch.shape[-1]
    if bool(((previous < 0) | (previous + 1 >= n - 1)).any()):
        raise ValueError("tokens must have, at the final position, an earlier occurrence "
                         "j* of the final token with j* + 1 < n - 1")
    replacement = _replacements(replacement, previous, vocab_size)
    rows = torch.arange(batch.shape[0])
    old = batch[rows, previous + 1]
    if bool(((replacement == old) | (replacement == batch[:, -1])).any()):
        raise ValueError("replacement must differ from the replaced token and the final token")
    corrupted = batch.clone()
    corrupted[rows, previous + 1] = replacement
    return corrupted if tokens.ndim == 2 else corrupted[0]


def resample_earlier_occurrence(tokens: torch.Tensor, replacement: torch.Tensor | int,
                                vocab_size: int) -> torch.Tensor:
    r"""The corrupted prompt: the one earlier occurrence of the final token replaced by
    ``replacement``.

    ``tokens`` ``(B, n)`` or ``(n,)``: the final token :math:`a = \sigma_i` must occur exactly
    once before position :math:`i`, at :math:`j^\star` with :math:`j^\star + 1 < i`, so that
    the copied token :math:`\tau = \sigma_{j^\star+1}` is not :math:`a`. ``replacement``
    (an int or a ``(B,)`` tensor) :math:`a'` must differ from :math:`a` and :math:`\tau`.
    The corrupted prompt has no earlier occurrence of :math:`a`: its target is :math:`\bot`.
    """
    tokens, batch, previous = _prompt_batch(tokens, vocab_size)
    n = batch.shape[-1]
    count = (batch[:, :-1] == batch[:, -1:]).sum(-1)                     # (B,)
    if bool(((count != 1) | (previous + 1 >= n - 1)).any()):
        raise ValueError("tokens must have, before the final position, exactly one "
                         "occurrence j* of the final token, with j* + 1 < n - 1")
    replacement = _replacements(replacement, previous, vocab_size)
    rows = torch.arange(batch.shape[0])
    copied = batch[rows, previous + 1]
    if bool(((replacement == copied) | (replacement == batch[:, -1])).any()):
        raise ValueError("replacement must differ from the final token and the token after "
                         "its earlier occurrence")
    corrupted = batch.clone()
    corrupted[rows, previous] = replacement
    return corrupted if tokens.ndim == 2 else corrupted[0]


def logit_difference(logits: torch.Tensor, clean: torch.Tensor, corrupted: torch.Tensor
                     ) -> torch.Tensor:
    r"""The metric :math:`\ell_{i,\tau} - \ell_{i,\tau'}` at the final position :math:`i`.

    ``logits`` ``(B, n, C)`` with :math:`C = S + 1` classes (the last one :math:`\bot`);
    ``clean``, ``corrupted`` ``(B, n)`` prompts over :math:`S` tokens, whose final oracle
    targets (:func:`~constructions.induction_heads.induction_targets`) are :math:`\tau` and
    :math:`\tau'`; a final position with no earlier occurrence has target :math:`\bot`, the
    class :math:`S` (the constructions' "no match" output). Returns ``(B,)``.
    """
    logits = _validate.real_tensor("logits", logits, ndim=3)
    if logits.shape[0] == 0 or logits.shape[1] == 0 or logits.shape[2] < 2:
        raise ValueError(f"logits must have shape (B, n, C) with B, n >= 1 and C >= 2, got "
                         f"{tuple(logits.shape)}")
    classes = logits.shape[-1]
    targets = []
    for name, prompt in (("clean", clean), ("corrupted", corrupted)):
        prompt = _validate.token_tensor(name, prompt, vocab_size=classes - 1, ndim=2)
        if prompt.shape != logits.shape[:2]:
            raise ValueError(f"{name} must have the shape (B, n) = {tuple(logits.shape[:2])} of "
                             f"logits, got {tuple(prompt.shape)}")
        target = induction_targets(prompt.to(logits.device))[:, -1]
        targets.append(torch.where(target < 0, classes - 1, target).unsqueeze(-1))
    final = logits[:, -1]                                                # (B, C)
    return (final.gather(-1, targets[0]) - final.gather(-1, targets[1])).squeeze(-1)


# --- edge patching on the native hook points ------------------------------------------------

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
    names = {e.name for e in attention_graph(len(model.layers), model.layers[0].n_heads)}
    edges = []
    for edge in patched:
        name = edge.name if isinstance(edge, Edge) else edge
        if name not in names:
            raise ValueError(f"patched must hold edges of the model's graph, got {name!r}")
        edges.append(next(e for e in attention_graph(len(model.layers),
                                                     model.layers[0].n_heads)
                          if e.name == name))
    with per_head_results(model), torch.no_grad():
        corrupt_out: dict = {}
        handles = _record_sources(model, corrupt_out)
        try:
            model.run(corrupted)
        finally:
            for handle in handles:
                handle.remove()
        current: dict = {}
        handles = _record_sources(model, current)
        try:
            handles += _patching_hooks(model, edges, corrupt_out, current)
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
