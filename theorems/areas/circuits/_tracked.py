r"""A running forward-error bound for the induction transformer and its edge-patched runs.

:func:`tracked_logits` repeats the forward pass of :class:`~constructions.induction_heads.
model.InductionTransformer` (and, with ``patched``, the patched run of
:func:`~constructions.circuits.edge_patched_logits`) operation by operation, and carries for
every intermediate :math:`\hat y` two elementwise bounds: ``e`` on :math:`|\hat y - y^*|`, its
distance to the *exact* value :math:`y^*` computed in real arithmetic from *reference weights*
:math:`W^*` (within the given ``errors`` of the stored weights: :math:`|\hat W - W^*| \le E_W`),
and ``n`` on :math:`|\hat y|`. Both hold for *every* float64 computation with this structure
(the same operations, each inner product in any summation order, with or without FMA), so
they bound the model's own run, not only this mirror of it. The rules (Higham 2002, §3.1:
an inner product of :math:`K` terms is within :math:`\gamma_K \sum|a_lb_l|`,
:math:`\gamma_K = Ku/(1-Ku)`), with :math:`M = |\hat y| + e` bounding :math:`|y^*|` and
:math:`N = M + e` bounding the magnitude of any computation of :math:`y`:

* sum :math:`\hat a \pm \hat b`: :math:`e = e_a + e_b + u(N_a + N_b)`;
* product :math:`\hat C = \mathrm{fl}(\hat A\hat B)` with :math:`K` terms:
  :math:`e_C = E_AM_B + M_AE_B + E_AE_B + \gamma_K N_AN_B` (from
  :math:`\hat A\hat B - A^*B^* = \Delta_AB^* + A^*\Delta_B + \Delta_A\Delta_B`);
* softmax of a row with score errors :math:`\le e_s` over :math:`T` keys: torch subtracts
  the row maximum (relative error :math:`u`, i.e. a further score error
  :math:`\le u\cdot 2\max_j N_{s,j}`), exponentiates (assumed within 1 ulp, :math:`2u`, as
  glibc and Sleef are), sums (:math:`\gamma_T`) and divides (:math:`u`, or :math:`2u` as a
  reciprocal and a product). Scores off by :math:`\le\eta` move each exact weight by a factor
  within :math:`e^{\pm 2\eta}`; the kernel's own roundings by a factor within
  :math:`1 \pm \gamma_{T+8}`. So :math:`\hat A_{ij} / A^*_{ij} \in [F_i^{-1}, F_i]` with
  :math:`F_i = e^{2\eta_i}(1+\gamma_{T+8})`, and :math:`e_A = (F - 1)F\hat A` (masked keys are
  exact zeros in every run);
* underflow adds absolute terms (:data:`SUBNORMAL`), so no "no underflow" assumption;
* a layer's output sums its heads: per head (the ``hook_result`` path) each head's product
  then a sum over :math:`H` heads (:math:`\gamma_{H-1}`), or one contraction over
  :math:`H d_v` terms (the plain forward).

*The bound's own evaluation.* Every ``e`` and ``n`` is a sum of products of non-negative
float64 numbers (and one ``expm1``, a monotone 1-ulp function); by induction each computed
entry is within a relative :math:`\gamma_c` of its real value, where ``ops`` counts the
roundings along its longest chain (a product adds its operands' counts and its :math:`K`
terms). :func:`tracked_logits` returns the bounds inflated by :math:`1 + \gamma_{ops}`.

The stored weights themselves are compared with the reference through ``errors``; the
gauges' derivations of those (the rotation's orthogonality defect, the products' rounding)
are in :mod:`theorems.areas.circuits.gauges`. ``u`` is a parameter so that a mutant can set it
to 0 (a rounding-free bound).
"""

from __future__ import annotations

import dataclasses

import torch

from constructions.circuits import Edge, attention_graph
from constructions.induction_heads.model import InductionTransformer
from constructions.layers import causal_mask
from constructions.numerics import gamma_at, unit_roundoff

# Underflow: a product that underflows errs by at most half the least subnormal, 2^-1075,
# absolutely (Higham 2002, §2.1; sums of floats underflow exactly), and exp(t) by at most
# 2^-1074 below the normal range; a softmax weight, divided by a sum >= 1 - 2u (its largest
# term is exp(0) = 1), by at most 2^-1072. These absolute terms join the relative ones, so
# that the bound holds without assuming that nothing underflows.
SUBNORMAL = 2.0**-1074


@dataclasses.dataclass
class Tracked:
    """A computed value ``v`` with bounds ``e`` (on its distance to the exact value) and ``n``
    (on the magnitude of any computation of it); ``ops`` counts the bound's own roundings."""

    v: torch.Tensor
    e: torch.Tensor
    n: torch.Tensor
    ops: int

    @property
    def m(self) -> torch.Tensor:       # a bound on the exact value's magnitude
        return self.v.abs() + self.e

    @classmethod
    def computed(cls, v: torch.Tensor, e: torch.Tensor, ops: int) -> Tracked:
        return cls(v, e, v.abs() + 2 * e, ops)

    @classmethod
    def stored(cls, W: torch.Tensor, E: torch.Tensor | None) -> Tracked:
        """A stored weight: used as it is in every run, within ``E`` of the reference."""
        return cls(W, torch.zeros_like(W) if E is None else E, W.abs(), 2)

    def map(self, index) -> Tracked:
        return Tracked(self.v[index], self.e[index], self.n[index], self.ops)


def _add(a: Tracked, b: Tracked, u: float, sign: float = 1.0) -> Tracked:
    return Tracked.computed(a.v + sign * b.v, a.e + b.e + u * (a.n + b.n),
                            max(a.ops, b.ops) + 4)


def _product(spec: str, a: Tracked, b: Tracked, terms: int, u: float, *,
             rounding: bool = True) -> Tracked:
    """``einsum(spec, a, b)`` summing ``terms`` products an entry."""
    def ein(x, y):
        return torch.einsum(spec, x, y)
    e = ein(a.e, b.m) + ein(a.m, b.e) + ein(a.e, b.e)
    if rounding:
        e = e + gamma_at(terms, u) * ein(a.n, b.n) + (terms * SUBNORMAL if u else 0.0)
    return Tracked.computed(ein(a.v, b.v), e, a.ops + b.ops + terms + 6)


def _scaled(a: Tracked, scale: float, u: float) -> Tracked:
    if scale == 1.0:
        return a
    return Tracked.computed(scale * a.v, abs(scale) * a.e + u * abs(scale) * a.n
                            + (SUBNORMAL if u else 0.0), a.ops + 3)


def _softmax(s: Tracked, u: float) -> Tracked:
    """Causal softmax over the last dim of ``(B, H, T, T)`` scores (see the module docstring)."""
    T = s.v.shape[-1]
    mask = causal_mask(T, s.v.device)
    zero = torch.zeros((), dtype=s.v.dtype, device=s.v.device)
    eta = (torch.where(mask, s.e, zero).amax(-1, keepdim=True)
           + 2 * u * torch.where(mask, s.n, zero).amax(-1, keepdim=True))
    F = 1 + torch.expm1(2 * eta) * (1 + gamma_at(T + 8, u)) + gamma_at(T + 8, u)
    A = s.v.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    underflow = torch.where(mask, 4 * SUBNORMAL if u else 0.0, 0.0)   # 2^-1072, see above
    return Tracked.computed(A, (F - 1) * F * A + underflow, s.ops + T + 16)


def tracked_logits(model: InductionTransformer, tokens: torch.Tensor, errors: dict | None = None,
                   *, per_head: bool = False, patched: tuple[Edge, ...] = (),
                   corrupted: torch.Tensor | None = None, u: float | None = None,
                   corrupt_out: dict[str, Tracked] | None = None
                   ) -> tuple[Tracked, dict[str, Tracked]]:
    """(logits ``(B, n, C)``, node outputs) of ``model`` on ``tokens`` ``(B, n)``, tracked.

    ``errors``: ``{"W_E", "W_pos", "W_U": tensor, "layers": [{"W_Q", "W_K", "W_V", "W_O"}]}``,
    elementwise bounds on the stored weights' distance to the reference (``None``: zero, the
    model is its own reference). ``per_head``: the ``hook_result`` path of
    :func:`~constructions.circuits.edge_patched_logits` (else the plain forward).
    ``patched`` edges take their source's output from the tracked run of ``corrupted``
    (``edge_patched_logits``'s operations: the difference of the two outputs, summed over a
    target's sources left to right, times the target's read map, added to its input).
    ``corrupt_out``: the node outputs of that tracked corrupted run, if already computed.
    The bounds ``e`` of the returned logits are inflated for their own evaluation.
    """
    u = unit_roundoff() if u is None else u
    errors = errors or {}
    layer_errors = errors.get("layers", [{} for _ in model.layers])
    if patched and corrupt_out is None:
        _, corrupt_out = tracked_logits(model, corrupted, errors, per_head=per_head, u=u)
    names = {e.name: e for e in attention_graph(len(model.layers), model.layers[0].n_heads)}
    by_target: dict[tuple[str, str | None], list[str]] = {}
    for edge in patched:
        edge = names[edge.name if isinstance(edge, Edge) else edge]
        by_target.setdefault((edge.target, edge.input), []).append(edge.source)

    def delta(sources, current) -> Tracked:
        total = None
        for source in sources:   # Python's sum: 0 + d_1 is exact, then left to right
            diff = _add(corrupt_out[source], current[source], u, sign=-1.0)
            total = diff if total is None else _add(total, diff, u)
        return total

    B, n = tokens.shape
    bos = torch.full((B, 1), model.vocab_size, dtype=torch.long, device=tokens.device)
    with_bos = torch.cat([bos, tokens], 1)
    W_E = Tracked.stored(model.W_E.detach(), errors.get("W_E"))
    W_pos = Tracked.stored(model.W_pos.detach(), errors.get("W_pos"))
    x = _add(W_E.map(with_bos), W_pos.map(slice(0, n + 1)), u)            # (B, T, d)
    T, d = n + 1, model.d_model
    current = {"input": x}
    for index, (layer, errs) in enumerate(zip(model.layers, layer_errors, strict=True)):
        W = {k: Tracked.stored(getattr(layer, k).detach(), errs.get(k))
             for k in ("W_Q", "W_K", "W_V", "W_O")}
        H = layer.n_heads
        inputs = {}
        for qkv in "qkv":
            y = _product("btd,hdk->bthk", x, W[f"W_{qkv.upper()}"], d, u)   # (B, T, H, k)
            for h in range(H):
                sources = by_target.get((f"a{index}.h{h}", qkv))
                if sources:
                    read = W[f"W_{qkv.upper()}"].map(h)                     # (d, k)
                    moved = _product("btd,dk->btk", delta(sources, current), read, d, u)
                    head = _add(y.map((slice(None), slice(None), h)), moved, u)
                    y = _replace_head(y, head, h)
            inputs[qkv] = y
        q = _scaled(inputs["q"], layer.scale, u)
        s = _product("bihk,bjhk->bhij", q, inputs["k"], layer.W_Q.shape[2], u)
        A = _softmax(s, u)                                                   # (B, H, T, T)
        z = _product("bhij,bjhv->bihv", A, inputs["v"], T, u)                # (B, T, H, dv)
        d_v = layer.W_V.shape[2]
        results = _product("bihv,hvo->biho", z, W["W_O"], d_v, u, rounding=per_head)
        for h in range(H):
            current[f"a{index}.h{h}"] = results.map((slice(None), slice(None), h))
        if per_head:
            out_e = results.e.sum(2) + gamma_at(H - 1, u) * results.n.sum(2)
        else:   # one contraction over H d_v terms
            out_e = results.e.sum(2) + gamma_at(H * d_v, u) * torch.einsum(
                "bihv,hvo->bio", z.n, W["W_O"].n)
        out = Tracked.computed(results.v.sum(2), out_e, results.ops + H + 4)
        x = _add(x, out, u)
        if index == len(model.layers) - 1 and ("logits", None) in by_target:
            x = _add(x, delta(by_target[("logits", None)], current), u)
    W_U = Tracked.stored(model.W_U.detach(), errors.get("W_U"))
    logits = _product("btd,dc->btc", x.map((slice(None), slice(1, None))), W_U, d, u)
    inflate = 1 + gamma_at(logits.ops, unit_roundoff())
    logits = Tracked(logits.v, logits.e * inflate, logits.n * inflate, logits.ops)
    return logits, current


def _replace_head(y: Tracked, head: Tracked, h: int) -> Tracked:
    parts = []
    for field in ("v", "e", "n"):
        full = getattr(y, field).clone()
        full[:, :, h] = getattr(head, field)
        parts.append(full)
    return Tracked(*parts, max(y.ops, head.ops))


def metric_error(logits: Tracked, clean_target: torch.Tensor, corrupted_target: torch.Tensor,
                 u: float | None = None) -> torch.Tensor:
    r"""``(B,)``: a bound on a computed metric :math:`\hat\ell_{i,\tau} - \hat\ell_{i,\tau'}`'s
    distance to the exact one (the two logits' bounds and the subtraction's rounding, inflated
    by :math:`1 + \gamma_2` for its own evaluation)."""
    u = unit_roundoff() if u is None else u
    rows = torch.arange(logits.v.shape[0])
    e, n = logits.e[rows, -1], logits.n[rows, -1]
    a, b = clean_target, corrupted_target
    return (e[rows, a] + e[rows, b] + u * (n[rows, a] + n[rows, b])) * (
        1 + gamma_at(2, unit_roundoff()))


def gamma_depth(terms: int) -> float:
    """:math:`\\gamma` of ``terms`` roundings at float64 (for the callers' own inflation)."""
    return gamma_at(terms, unit_roundoff())


