r"""The ground-truth circuit of the one-step-GD linear self-attention (von Oswald et al. 2023).

:func:`~constructions.icl_regression.one_step_gd` is one residual linear-attention head on
column tokens :math:`z_j = (x_j; y_j)`, query :math:`z_q = (x_q; 0)` last:
:math:`\hat y = -\big(z_{q,y} + e_y^\top W_{PV}\,G\,W_{KQ}z_q\big)`,
:math:`G = \tfrac1n\sum_{j \le n} z_j z_j^\top` (:meth:`~constructions.icl_regression.
LinearSelfAttention.predict`). Read as a head, token :math:`j`'s *value* is
:math:`W_{PV}z_j`, its *key* :math:`z_j`, the query's *query* :math:`W_{KQ}z_q` (score
:math:`z_j^\top W_{KQ}z_q`), and the read-out adds the residual :math:`z_{q,y}`. So the graph
is that of a 1-layer, 1-head model (:func:`~constructions.circuits.attention_graph` ``(1, 1)``):
input to ``a0.h0<q>``, ``<k>``, ``<v>``, input to logits, ``a0.h0`` to logits. (This model
does not export to TransformerLens, which has no linear attention: the hook names of
:class:`~constructions.circuits.Edge` are what an export would use, not ones that exist.)

**The corruption** :func:`shift_label` adds :math:`\delta` to one context label
:math:`y_j`: the causal variable is that example's label. With
:math:`W_{PV} = e_y e_y^\top` and :math:`W_{KQ} = \begin{pmatrix}-\Gamma^\top & 0 \\ 0 &
0\end{pmatrix}`: the query column does not change (query and residual edges carry the same
thing); the keys change in their :math:`y` coordinate only, which :math:`W_{KQ}` (no
:math:`y` row) multiplies by zero; the value changes by :math:`\delta e_y`, and the
prediction by exactly :math:`\delta\,x_q^\top\Gamma x_j/n`. So the circuit is
``input -> a0.h0<v>`` and ``a0.h0 -> logits`` (:func:`icl_circuit`).
"""

from __future__ import annotations

import torch

from constructions import _validate
from constructions.circuits.graph import Circuit, Edge, patched_names
from constructions.icl_regression import LinearSelfAttention

_EDGES = (
    Edge("input", "a0.h0", "v", "context label y_j -> value W_PV z_j = y_j e_y: what the "
         "head averages into the label slot of the query"),
    Edge("a0.h0", "logits", None, "the update the head makes to the label slot of the query "
         "-> the read-out -f(Z)_{y,q}: the prediction x_q^T Gamma (1/n) sum_j y_j x_j"),
)


def icl_circuit(d: int) -> Circuit:
    """The circuit of ``one_step_gd(d, eta)`` under :func:`shift_label` (module docstring):
    the label value edge and the head's read-out edge."""
    d = _validate.positive_int("d", d)
    return Circuit("one_step_gd label circuit", 1, 1, d + 1, _EDGES, corruption="shift_label")


def shift_label(Z: torch.Tensor, index: int, shift: float) -> torch.Tensor:
    """The prompt ``Z`` ``(..., d+1, n+1)`` with context label ``index`` (0-based, ``< n``)
    increased by ``shift``."""
    Z = _validate.real_tensor("Z", Z, ndim=(2, 3))
    if Z.shape[-2] < 2 or Z.shape[-1] < 2:
        raise ValueError(f"Z must have shape (..., d + 1, n + 1) with d, n >= 1, got "
                         f"{tuple(Z.shape)}")
    n = Z.shape[-1] - 1
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
        raise ValueError(f"index must be an int in [0, {n}), got {index!r}")
    shift = _validate.finite_float("shift", shift)
    corrupted = Z.clone()
    corrupted[..., -1, index] += shift
    return corrupted


def lsa_inputs(model: LinearSelfAttention, **prompts: object) -> list[torch.Tensor]:
    """The prompts, validated by name against the model and each other's shape."""
    _validate.instance("model", model, LinearSelfAttention)
    if not model.mask_query:
        raise ValueError("model must mask the query (mask_query=True): the query is then no "
                         "key, and the graph above is the model's")
    out: list[torch.Tensor] = []
    for name, Z in prompts.items():
        Z = _validate.real_tensor(name, Z, ndim=(2, 3))
        if Z.shape[-2] != model.width or Z.shape[-1] < 2:
            raise ValueError(f"{name} must have shape (..., {model.width}, n + 1) with "
                             f"n >= 1, got {tuple(Z.shape)}")
        if out and Z.shape != out[0].shape:
            raise ValueError(f"{name} must have the shape {tuple(out[0].shape)} of "
                             f"{next(iter(prompts))}, got {tuple(Z.shape)}")
        out.append(Z.to(model.W_PV.dtype))
    return out


def lsa_patched_prediction(model: LinearSelfAttention, clean: torch.Tensor,
                           corrupted: torch.Tensor, patched) -> torch.Tensor:
    r"""The prediction ``(...)`` of the clean prompt with each edge in ``patched`` (names or
    :class:`Edge`\ s of ``attention_graph(1, 1)``) carrying the corrupted prompt.

    :math:`\hat y_P = -\big(Z^L_{y,q} + e_y^\top W_{PV}\,\tfrac1n Z^V_{:n}(Z^K_{:n})^\top\,
    W_{KQ}Z^Q_{:,q}\big)`, with :math:`Z^x` the corrupted prompt if ``input -> a0.h0<x>`` is
    patched (:math:`Z^L` for ``input -> logits``), and the head term the corrupted run's if
    ``a0.h0 -> logits`` is. The operations and their order are :meth:`LinearSelfAttention.
    predict`'s, so an empty ``patched`` gives its result bit for bit.
    """
    clean, corrupted = lsa_inputs(model, clean=clean, corrupted=corrupted)
    chosen = patched_names(patched, 1, 1)

    def pick(edge: str) -> torch.Tensor:
        return corrupted if edge in chosen else clean

    def head(Z_V: torch.Tensor, Z_K: torch.Tensor, Z_Q: torch.Tensor) -> torch.Tensor:
        n = Z_V.shape[-1] - 1
        G = Z_V[..., :n] @ Z_K[..., :n].transpose(-1, -2) / n             # (..., D, D)
        return model.W_PV[-1:] @ G @ model.W_KQ @ Z_Q[..., -1:]          # (..., 1, 1)

    if "a0.h0->logits" in chosen:
        update = head(corrupted, corrupted, corrupted)
    else:
        update = head(pick("input->a0.h0<v>"), pick("input->a0.h0<k>"),
                      pick("input->a0.h0<q>"))
    residual = pick("input->logits")[..., -1:, -1:]
    return -(residual + update)[..., 0, 0]


def lsa_magnitude(model: LinearSelfAttention, Z_V: torch.Tensor, Z_K: torch.Tensor,
                  Z_Q: torch.Tensor) -> torch.Tensor:
    r""":math:`e_y^\top|W_{PV}|\,\tfrac1n|Z^V_{:n}||Z^K_{:n}|^\top|W_{KQ}||Z^Q_{:,q}|`, the
    magnitude that bounds the rounding of the head term (:math:`|\mathrm{fl} - \cdot| \le
    \gamma_{n+3D+1}` times it, for the inner products of lengths :math:`n, D, D, D` and the
    division by :math:`n`)."""
    Z_V, Z_K, Z_Q = lsa_inputs(model, Z_V=Z_V, Z_K=Z_K, Z_Q=Z_Q)
    n = Z_V.shape[-1] - 1
    G = Z_V[..., :n].abs() @ Z_K[..., :n].abs().transpose(-1, -2) / n
    return (model.W_PV[-1:].abs() @ G @ model.W_KQ.abs() @ Z_Q[..., -1:].abs())[..., 0, 0]


def null_space_variant(model: LinearSelfAttention, *, seed: int = 0, scale: float = 0.5
                       ) -> LinearSelfAttention:
    r"""``model`` with dense random weights (:math:`\mathcal N(0, \mathrm{scale}^2)`, seeded)
    wherever the prediction cannot see them: the rows :math:`1..d` of :math:`W_{PV}` (they
    update the tokens' :math:`x` coordinates, which the read-out ignores) and the last column
    of :math:`W_{KQ}` (it multiplies the query's label slot, an exact 0).

    *Same prediction, bit for bit*: :meth:`LinearSelfAttention.predict` reads only
    :math:`W_{PV}`'s last row, and the new column's products meet :math:`z_{q,y} = 0`, so
    :math:`\mathrm{fl}(\cdot \times 0) = 0` joins the inner product as an exact zero. The
    :math:`y` row of :math:`W_{KQ}` stays zero (the circuit's key argument needs it), so the
    circuit and its bit-exact sufficiency carry over.
    """
    _validate.instance("model", model, LinearSelfAttention)
    seed = _validate.seed("seed", seed)
    scale = _validate.positive_float("scale", scale)
    generator = torch.Generator().manual_seed(seed)
    D = model.width
    W_PV, W_KQ = model.W_PV.detach().clone(), model.W_KQ.detach().clone()
    dense = scale * torch.randn(D - 1 + D - 1, D, generator=generator, dtype=torch.float64)
    W_PV[:-1] = dense[: D - 1].to(W_PV)
    W_KQ[:-1, -1] = dense[D - 1:, 0].to(W_KQ)
    return LinearSelfAttention(W_PV, W_KQ, mask_query=model.mask_query)
