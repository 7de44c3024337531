r"""The circuits of the induction constructions: the edges their weights use, and the subsets that
matter under each of two corruptions.

Of the 12 edges of the 2-layer, 1-head graph (:func:`~constructions.circuits.attention_graph`)
the one-hot (:func:`~constructions.induction_heads.two_layer_induction`) and the compact
(:func:`~constructions.induction_heads.compact_induction`) construction use the same 8
(:func:`induction_mechanism`). Relative to :func:`~constructions.circuits.resample_next_token`
(what the induction head copies) the circuit is 2 of them, relative to
:func:`~constructions.circuits.resample_earlier_occurrence` (where it attends) 3
(:func:`induction_circuit`, whose docstring derives both edge by edge).
"""

from __future__ import annotations

import dataclasses

from constructions import _validate
from constructions.circuits.graph import Circuit, Edge

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
