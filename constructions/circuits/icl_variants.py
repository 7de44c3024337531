r"""A dense spurious-head variant of the one-step-GD linear self-attention, and an edge view
of the construction for patching libraries.

:class:`MultiHeadLSA` sums the updates of several :class:`~constructions.icl_regression.
LinearSelfAttention` heads on one residual stream, :math:`f(Z) = Z + \sum_h \tfrac1n
W^h_{PV}ZMZ^\top W^h_{KQ}Z`, and predicts :math:`\hat y = -(z_{q,y} + \sum_h e_y^\top
W^h_{PV}GW^h_{KQ}z_q)`, the heads summed in order.

:func:`spurious_head_variant` puts a dense spurious head *before* the real one (so the real
head becomes ``a0.h1``, a head permutation): its :math:`W_{KQ}` is dense Gaussian and its
:math:`W_{PV}` dense in the rows :math:`1..d` and zero in the label row :math:`y`. It writes
only into the tokens' :math:`x` coordinates, which the read-out ignores (a write into the
read-out's null space; the model has no LayerNorm, so a write nothing reads is free).
*Same prediction, bit for bit*: the spurious head's term is
:math:`0^\top GW^s_{KQ}z_q`, a product with an exact-zero row, so it is an exact zero for
every finite prompt, and :math:`\mathrm{fl}(0 + t) = t`: the real head's term is computed by
the same operations on the same operands as in the original. The circuit is the original's
with ``a0.h0`` renamed ``a0.h1`` (:data:`SPURIOUS_HEADS`).

:class:`LSAEdgeView` computes the (multi-head) prediction with one TransformerLens-named hook
point per edge of its graph: each head's ``hook_q_input``, ``hook_k_input``,
``hook_v_input`` (the prompt as that input reads it, TransformerLens's
``use_split_qkv_input``) and ``hook_result`` (the head's term), and ``hook_resid`` (the
residual label slot the read-out adds). Replacing one hook's activation by the corrupted
run's patches that one edge, so activation patching and attribution run on it through any
library that patches torch modules (nnsight); with no patch it is ``predict`` bit for bit.

Sources: the construction is von Oswald et al.'s (2023) in Ahn et al.'s layout (the
icl-regression area); the variant and the view are ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn

from constructions import _validate
from constructions.circuits.graph import Edge, patched_names
from constructions.circuits.icl import lsa_inputs, lsa_magnitude
from constructions.icl_regression import LinearSelfAttention
from constructions.icl_regression.lifted import key_moment_unchecked
from constructions.layers import HookPoint, HookPoints

SPURIOUS_HEADS = {"a0.h0": "a0.h1"}


class MultiHeadLSA(nn.Module):
    r"""Several linear self-attention heads on one residual stream (module docstring).

    ``heads`` are :class:`LinearSelfAttention` s of one width, all masking the query or
    none; :meth:`predict` sums their terms in order."""

    def __init__(self, heads: Sequence[LinearSelfAttention]):
        super().__init__()
        if isinstance(heads, LinearSelfAttention) or not isinstance(heads, Sequence) \
                or not heads:
            raise TypeError("heads must be a non-empty sequence of LinearSelfAttention")
        for head in heads:
            _validate.instance("heads", head, LinearSelfAttention)
        if len({h.width for h in heads}) != 1 or len({h.mask_query for h in heads}) != 1:
            raise ValueError("heads must share the token width and mask_query")
        self.heads = nn.ModuleList(heads)

    @property
    def width(self) -> int:
        return self.heads[0].width

    @property
    def mask_query(self) -> bool:
        return self.heads[0].mask_query

    @property
    def n_heads(self) -> int:
        return len(self.heads)

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        """:math:`f(Z)`, same shape as ``Z`` (``(..., D, n+1)``)."""
        Z, n = self.heads[0]._check(Z, None)
        G = key_moment_unchecked(Z, n, self.mask_query)                            # (..., D, D)
        return Z + sum(h.W_PV @ G @ h.W_KQ @ Z for h in self.heads)

    def predict(self, Z: torch.Tensor) -> torch.Tensor:
        r""":math:`\hat y = -f(Z)_{D, n+1}`, ``(...)``: each head's term as
        :meth:`LinearSelfAttention.predict` computes it, summed in head order."""
        Z, n = self.heads[0]._check(Z, None)
        G = key_moment_unchecked(Z, n, self.mask_query)
        query = Z[..., -1:]
        update = sum(h.W_PV[-1:] @ G @ h.W_KQ @ query for h in self.heads)  # (..., 1, 1)
        return -(query[..., -1:, :] + update)[..., 0, 0]


def spurious_head_variant(model: LinearSelfAttention, *, seed: int = 0, scale: float = 0.5
                          ) -> MultiHeadLSA:
    r"""``model`` with a dense spurious head before it (module docstring): spurious
    :math:`W_{KQ}` dense :math:`\mathcal N(0, \mathrm{scale}^2)`, spurious :math:`W_{PV}`
    dense in rows :math:`1..d`, zero in the label row (seeded)."""
    _validate.instance("model", model, LinearSelfAttention)
    seed = _validate.seed("seed", seed)
    scale = _validate.positive_float("scale", scale)
    generator = torch.Generator().manual_seed(seed)
    D = model.width
    dense = scale * torch.randn(2, D, D, generator=generator, dtype=torch.float64)
    W_PV = dense[0].clone()
    W_PV[-1] = 0.0                                   # the read-out's row: nothing reaches it
    spurious = LinearSelfAttention(W_PV.to(model.W_PV), dense[1].to(model.W_PV),
                                   mask_query=model.mask_query)
    real = LinearSelfAttention(model.W_PV.detach().clone(), model.W_KQ.detach().clone(),
                               mask_query=model.mask_query)
    return MultiHeadLSA([spurious, real])


def _heads(model: object) -> list[LinearSelfAttention]:
    if isinstance(model, LinearSelfAttention):
        return [model]
    if isinstance(model, MultiHeadLSA):
        return list(model.heads)
    raise TypeError(f"model must be a LinearSelfAttention or MultiHeadLSA, got "
                    f"{type(model).__name__}")


class LSAEdgeView(nn.Module):
    """The prediction of a (multi-head) LSA with one hook point per edge (module docstring).

    ``forward(Z)`` is ``(...)``; the hooks see ``Z`` ``(..., D, n+1)`` (the q/k/v inputs and
    ``hook_resid``) and each head's term ``(..., 1, 1)`` (``heads.{h}.hook_result``)."""

    def __init__(self, model: LinearSelfAttention | MultiHeadLSA):
        super().__init__()
        self.lsa_heads = nn.ModuleList(_heads(model))
        if not self.lsa_heads[0].mask_query:
            raise ValueError("model must mask the query (mask_query=True), as the circuit "
                             "graph assumes")
        self.hook_resid = HookPoint()
        self.heads = nn.ModuleList(
            HookPoints("hook_q_input", "hook_k_input", "hook_v_input", "hook_result")
            for _ in self.lsa_heads)

    def hook_names(self) -> dict[str, str]:
        """Edge name -> the hook point (a submodule path) whose activation it carries, in the
        order the forward reaches them."""
        names = {}
        for h in range(len(self.lsa_heads)):
            names.update({f"input->a0.h{h}<{x}>": f"heads.{h}.hook_{x}_input" for x in "qkv"})
            names[f"a0.h{h}->logits"] = f"heads.{h}.hook_result"
        names["input->logits"] = "hook_resid"
        return names

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        Z, _ = self.lsa_heads[0]._check(Z, None)
        terms = []
        for head, hooks in zip(self.lsa_heads, self.heads, strict=True):
            Z_Q, Z_K, Z_V = hooks.hook_q_input(Z), hooks.hook_k_input(Z), hooks.hook_v_input(Z)
            terms.append(hooks.hook_result(_term(head, Z_V, Z_K, Z_Q)))
        residual = self.hook_resid(Z)[..., -1:, -1:]
        return -(residual + sum(terms))[..., 0, 0]


def _term(head: LinearSelfAttention, Z_V: torch.Tensor, Z_K: torch.Tensor, Z_Q: torch.Tensor
          ) -> torch.Tensor:
    """One head's term :math:`e_y^\\top W_{PV}\\tfrac1n Z^V_{:n}(Z^K_{:n})^\\top W_{KQ}
    Z^Q_{:,q}` ``(..., 1, 1)``, by :meth:`LinearSelfAttention.predict`'s operations."""
    n = Z_V.shape[-1] - 1
    G = Z_V[..., :n] @ Z_K[..., :n].transpose(-1, -2) / n                  # (..., D, D)
    return head.W_PV[-1:] @ G @ head.W_KQ @ Z_Q[..., -1:]


def multi_head_patched_prediction(model: LinearSelfAttention | MultiHeadLSA,
                                  clean: torch.Tensor, corrupted: torch.Tensor,
                                  patched: Iterable[Edge | str]) -> torch.Tensor:
    r"""The prediction ``(...)`` of the clean prompt with each edge in ``patched`` (of
    ``attention_graph(1, H)``) carrying the corrupted prompt, as
    :func:`~constructions.circuits.lsa_patched_prediction` for each head; the heads' terms
    summed in order. For one head it is ``lsa_patched_prediction`` bit for bit (``0 + t =
    t``)."""
    heads = _heads(model)
    clean, corrupted = lsa_inputs(heads[0], clean=clean, corrupted=corrupted)
    chosen = patched_names(patched, 1, len(heads))

    def pick(edge: str) -> torch.Tensor:
        return corrupted if edge in chosen else clean

    terms = []
    for h, head in enumerate(heads):
        if f"a0.h{h}->logits" in chosen:
            terms.append(_term(head, corrupted, corrupted, corrupted))
        else:
            terms.append(_term(head, *(pick(f"input->a0.h{h}<{x}>") for x in "vkq")))
    return -(pick("input->logits")[..., -1:, -1:] + sum(terms))[..., 0, 0]


def multi_head_magnitude(model: LinearSelfAttention | MultiHeadLSA, Z_V: torch.Tensor,
                         Z_K: torch.Tensor, Z_Q: torch.Tensor) -> torch.Tensor:
    r"""The sum over heads of :func:`~constructions.circuits.lsa_magnitude`: the
    magnitude bounding the rounding of the summed head terms (a spurious head with a zero
    label row contributes an exact 0 term and magnitude 0)."""
    return sum(lsa_magnitude(head, Z_V, Z_K, Z_Q) for head in _heads(model))
