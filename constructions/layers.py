r"""The primitives every construction is built from.

Conventions, shared by every area:

* A sequence is a tensor ``x`` of shape ``(B, n, d)``: ``n`` tokens, each a row of width ``d``.
  (Papers that write tokens as columns, :math:`Z \in \mathbb R^{d\times n}`, are transposed at
  the area's boundary, and the area's docstring says so.)
* Weights are explicit tensors, stored as ``nn.Parameter`` with ``requires_grad=False``: a
  construction is a fixed reference model. Call ``.requires_grad_()`` to train from it.
* float64 is the default dtype. Every module follows the dtype and device of its weights.

Attention, for one head ``h`` with query, key, value and output maps
:math:`W_Q^h, W_K^h \in \mathbb R^{d\times d_k}`, :math:`W_V^h\in\mathbb R^{d\times d_v}`,
:math:`W_O^h\in\mathbb R^{d_v\times d_{out}}`:

.. math::

    S^h = \mathrm{scale}\cdot (x W_Q^h)(x W_K^h)^\top,\qquad
    A^h = \mathrm{normalize}(S^h),\qquad
    \mathrm{Attn}(x) = \sum_h A^h x W_V^h W_O^h,

where ``normalize`` is the row-wise softmax, the row-wise *average-hard* argmax (uniform on
the maximal entries, zero elsewhere), or, for linear attention, :math:`S^h / c` with a fixed
normaliser ``c`` (``None`` means no division). A causal mask keeps keys ``j <= i`` only.

**Hook points.** Every intermediate that a circuit tool reads or patches passes through a
:class:`HookPoint`, an identity submodule named as in TransformerLens, so that
``register_forward_hook`` and nnsight's ``NNsight(model)`` reach it, with TransformerLens's
shapes (positions before heads; scores and patterns ``[batch, head, query, key]``):

* :class:`Attention`: ``hook_q``, ``hook_k`` ``(B, n, H, d_k)``, ``hook_v`` ``(B, n, H, d_v)``,
  ``hook_attn_scores`` ``(B, H, n, n)`` (scaled, before the mask), ``hook_pattern``
  ``(B, H, n, n)``, ``hook_z`` ``(B, n, H, d_v)`` and, with ``use_attn_result = True``,
  ``hook_result`` ``(B, n, H, d_out)``, the per-head outputs. The arithmetic keeps heads
  before positions; a hook sees a transposed *view*, which ``hook_transposed`` turns back, so
  with no hook attached every operation reads the very same tensor;
* :class:`MLP`: ``hook_mlp_in`` ``(..., d)``, ``hook_post`` ``(..., hidden)`` (after the
  activation) and ``hook_mlp_out`` ``(..., d_out)``;
* :class:`Residual`: ``hook_resid_pre`` and ``hook_resid_post``.

A hook point returns its input itself, so with no hook attached the arithmetic is unchanged,
bit for bit. ``use_attn_result`` is off by default, as in TransformerLens: summing per-head
results is another summation order than the one fused head-and-value contraction.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_transposed
from constructions.residual_layout import (
    DEFAULT_N_CTX,
    Interface,
    ResidualLayout,
    attention_block,
    context_length,
    placed,
)

AttentionKind = Literal["softmax", "hardmax", "linear"]
ATTENTION_KINDS = ("softmax", "hardmax", "linear")


def fixed(weight: torch.Tensor) -> nn.Parameter:
    """Wrap an explicit weight as a parameter that gradient descent leaves alone by default."""
    _validate.instance("weight", weight, torch.Tensor)
    return nn.Parameter(weight, requires_grad=False)


def resolve(dtype: torch.dtype, device: torch.device | str | None) -> dict:
    """Validated ``dtype``/``device`` keyword arguments for tensor factories."""
    return {"dtype": _validate.float_dtype("dtype", dtype),
            "device": _validate.device("device", device or None)}


def causal_mask(n: int, device: torch.device | None = None) -> torch.Tensor:
    """Boolean ``(n, n)`` mask, True where key ``j`` is visible from query ``i`` (``j <= i``)."""
    n = _validate.positive_int("n", n, minimum=0)
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def hardmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Average-hard attention: uniform weight on the row maxima, zero elsewhere.

    Ties are split evenly, which is the usual "average hard attention" semantics. Equality is
    exact, so the pattern is a deterministic function of the scores.
    """
    scores = _validate.real_tensor("scores", scores, finite=False)  # -inf is a masked score
    if scores.ndim == 0 or scores.shape[-1] == 0 or bool(scores.isnan().any()):
        raise ValueError(f"scores must have a non-empty last dim and no NaN, "
                         f"got shape {tuple(scores.shape)}")
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    winners = scores == scores.amax(dim=-1, keepdim=True)
    weights = winners.to(scores.dtype)
    return weights / weights.sum(dim=-1, keepdim=True)


class HookPoint(nn.Module):
    """An identity submodule at a named intermediate, for forward hooks and nnsight to read and
    replace (TransformerLens's ``HookPoint``, without its hook registry)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class HookPoints(nn.Module):
    """A container of named :class:`HookPoint` s (and of other such containers), for a
    construction with its own forward to name its blocks as TransformerLens does:
    ``HookPoints("hook_resid_pre", "hook_resid_post", attn=HookPoints("hook_q"))`` gives
    ``hook_resid_pre``, ``hook_resid_post`` and ``attn.hook_q``."""

    def __init__(self, *names: str, **children: nn.Module) -> None:
        super().__init__()
        for name in names:
            if not name.startswith("hook_"):
                raise ValueError(f"hook point names start with 'hook_', got {name!r}")
            self.add_module(name, HookPoint())
        for name, child in children.items():
            _validate.instance(name, child, nn.Module)
            self.add_module(name, child)


def _as_heads(name: str, weight: object, d_in: int | None) -> torch.Tensor:
    weight = _validate.real_tensor(name, weight, ndim=(2, 3))
    if weight.ndim == 2:
        weight = weight.unsqueeze(0)
    if d_in is not None and weight.shape[1] != d_in:
        raise ValueError(f"{name} must map from width {d_in}, got shape {tuple(weight.shape)}")
    return weight


class Attention(nn.Module):
    """Multi-head self-attention with explicit weights (see the module docstring for the math).

    Parameters
    ----------
    W_Q, W_K : ``(H, d, d_k)`` or ``(d, d_k)`` for one head.
    W_V : ``(H, d, d_v)`` or ``(d, d_v)``.
    W_O : ``(H, d_v, d_out)`` or ``(d_v, d_out)``.
    kind : ``"softmax"``, ``"hardmax"`` or ``"linear"``.
    causal : keep keys ``j <= i`` only.
    scale : multiplies every score; fold a temperature here rather than into ad-hoc code.
    linear_normalizer : for ``kind="linear"``, divide the scores by this constant
        (for example ``n``); ``None`` leaves them as they are.
    """

    def __init__(self, W_Q, W_K, W_V, W_O, *, kind: AttentionKind = "softmax",
                 causal: bool = False, scale: float = 1.0,
                 linear_normalizer: float | None = None) -> None:
        super().__init__()
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"kind must be one of {ATTENTION_KINDS}, got {kind!r}")
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
        W_Q = _as_heads("W_Q", W_Q, None)
        d = W_Q.shape[1]
        W_K = _as_heads("W_K", W_K, d)
        W_V = _as_heads("W_V", W_V, d)
        W_O = _as_heads("W_O", W_O, None)
        heads = W_Q.shape[0]
        for name, w in (("W_K", W_K), ("W_V", W_V), ("W_O", W_O)):
            if w.shape[0] != heads:
                raise ValueError(f"{name} has {w.shape[0]} heads but W_Q has {heads}")
        if W_K.shape[2] != W_Q.shape[2]:
            raise ValueError(f"W_K has key width {W_K.shape[2]} but W_Q has {W_Q.shape[2]}")
        if W_O.shape[1] != W_V.shape[2]:
            raise ValueError(f"W_O must map from the value width {W_V.shape[2]}, "
                             f"got shape {tuple(W_O.shape)}")
        self.kind = kind
        self.causal = causal
        self.scale = _validate.finite_float("scale", scale)
        if linear_normalizer is not None:
            linear_normalizer = _validate.positive_float("linear_normalizer", linear_normalizer)
        self.linear_normalizer = linear_normalizer
        self.W_Q, self.W_K, self.W_V, self.W_O = map(fixed, (W_Q, W_K, W_V, W_O))
        self.use_attn_result = False  # route the per-head outputs through hook_result
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_scores, self.hook_pattern = HookPoint(), HookPoint()
        self.hook_z, self.hook_result = HookPoint(), HookPoint()

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[1]

    @property
    def n_heads(self) -> int:
        return self.W_Q.shape[0]

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        """The TransformerLens layout of a bare head (no residual): the input ``x`` (width d)
        sits in the first d coordinates, the head writes the next ``d_out``, which the
        unembedding reads, so the logits are ``Attn(x)``."""
        d, d_out = self.d_model, self.W_O.shape[2]
        D = d + d_out
        W = self.W_Q
        blocks = ((attention_block(name, self, D, slice(0, d), slice(d, D)), None),)
        W_U = placed(torch.eye(d_out, dtype=W.dtype, device=W.device), (D, d_out), slice(d, D))
        return ResidualLayout(name, D, W.new_zeros(1, D),
                              W.new_zeros(context_length(name, n_ctx, DEFAULT_N_CTX), D),
                              W_U, blocks, Interface("residual", width=D, dtype=W.dtype))

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Raw scores :math:`S^h_{ij}`, shape ``(B, H, n, n)``, before masking."""
        # hooks see (B, n, H, d_k), TransformerLens's layout; the arithmetic (B, H, n, d_k)
        q = hook_transposed(self.hook_q, torch.einsum("bnd,hdk->bhnk", x, self.W_Q), 1, 2)
        k = hook_transposed(self.hook_k, torch.einsum("bnd,hdk->bhnk", x, self.W_K), 1, 2)
        return self.hook_attn_scores(self.scale * q @ k.transpose(-1, -2))  # (B, H, n, n)

    def pattern(self, x: torch.Tensor) -> torch.Tensor:
        """Attention pattern :math:`A^h_{ij}`, shape ``(B, H, n, n)``; rows index queries."""
        return self.hook_pattern(self._normalized(self.scores(x)))

    def _normalized(self, scores: torch.Tensor) -> torch.Tensor:
        n = scores.shape[-1]
        mask = causal_mask(n, scores.device) if self.causal else None
        if self.kind == "softmax":
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return scores.softmax(dim=-1)
        if self.kind == "hardmax":
            return hardmax(scores, mask)
        if mask is not None:
            scores = scores.masked_fill(~mask, 0.0)
        return scores if self.linear_normalizer is None else scores / self.linear_normalizer

    def forward(self, x: torch.Tensor, *, return_pattern: bool = False):
        x = _validate.real_tensor("x", x, ndim=3)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must have width {self.d_model}, got shape {tuple(x.shape)}")
        x = x.to(self.W_Q.dtype)
        pattern = self.pattern(x)                                          # (B, H, n, n)
        values = hook_transposed(self.hook_v, torch.einsum("bnd,hdv->bhnv", x, self.W_V), 1, 2)
        # torch.einsum (without opt_einsum) contracts "bhij,bhjv,hvo->bio" left to right: these
        # two contractions are the ones it made before the hook between them, so bit for bit
        # (B, H, n, d_v); hook_z sees (B, n, H, d_v)
        z = hook_transposed(self.hook_z, torch.einsum("bhij,bhjv->bhiv", pattern, values), 1, 2)
        if self.use_attn_result:
            result = self.hook_result(torch.einsum("bhiv,hvo->biho", z, self.W_O))
            out = result.sum(dim=2)                                        # (B, n, d_out)
        else:
            out = torch.einsum("bhiv,hvo->bio", z, self.W_O)               # (B, n, d_out)
        return (out, pattern) if return_pattern else out


class MLP(nn.Module):
    r"""Two-layer perceptron :math:`\mathrm{MLP}(x) = \phi(x W_{in} + b_{in}) W_{out} + b_{out}`."""

    ACTIVATIONS: ClassVar[dict] = {"relu": torch.relu, "identity": lambda z: z,
                                   "gelu": nn.functional.gelu}

    def __init__(self, W_in, b_in, W_out, b_out, *, activation: str = "relu") -> None:
        super().__init__()
        W_in = _validate.real_tensor("W_in", W_in, ndim=2)
        hidden = W_in.shape[1]
        b_in = _validate.real_tensor("b_in", b_in, shape=(hidden,))
        W_out = _validate.real_tensor("W_out", W_out, shape=(hidden, None))
        b_out = _validate.real_tensor("b_out", b_out, shape=(W_out.shape[1],))
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(self.ACTIVATIONS)}, "
                             f"got {activation!r}")
        self.activation = activation
        self.W_in, self.b_in, self.W_out, self.b_out = map(fixed, (W_in, b_in, W_out, b_out))
        self.hook_mlp_in, self.hook_post, self.hook_mlp_out = HookPoint(), HookPoint(), HookPoint()

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """Post-activation hidden layer, shape ``(..., hidden)``."""
        return self.hook_post(self.ACTIVATIONS[self.activation](x @ self.W_in + self.b_in))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.W_in.shape[0]:
            raise ValueError(f"x must have width {self.W_in.shape[0]}, got shape {tuple(x.shape)}")
        x = self.hook_mlp_in(x.to(self.W_in.dtype))                     # (..., d)
        return self.hook_mlp_out(self.hidden(x) @ self.W_out + self.b_out)  # (..., d_out)


class LayerNorm(nn.Module):
    r"""LayerNorm without affine parameters, over the last dim:
    :math:`\mathrm{LN}(x) = (x - \bar x\mathbf 1)/\sqrt{\mathrm{Var}(x) + \epsilon}`.

    With :math:`\epsilon = 0` this is :math:`\sqrt d\,Px/\lVert Px\rVert` with
    :math:`P = I - \mathbf 1\mathbf 1^\top/d` (Brody et al. 2023): a projection onto
    :math:`\mathbf 1^\perp` followed by scaling to norm :math:`\sqrt d`.
    """

    def __init__(self, eps: float = 0.0) -> None:
        super().__init__()
        self.eps = _validate.positive_float("eps", eps, allow_zero=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(dim=-1, keepdim=True)
        variance = centred.pow(2).mean(dim=-1, keepdim=True)
        return centred / torch.sqrt(variance + self.eps)


class L2Norm(nn.Module):
    r"""Per-token ℓ2 normalisation :math:`x \mapsto \mathrm{scale}\cdot x/\lVert x\rVert_2`.

    This is *not* LayerNorm: there is no mean-centring and no gain. Several papers call it
    "LN"; the name here says what it computes.
    """

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = _validate.positive_float("scale", scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x / x.norm(dim=-1, keepdim=True)


class Residual(nn.Module):
    """``x + block(x)``: the residual stream around one block."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        if not isinstance(block, nn.Module):
            raise TypeError(f"block must be an nn.Module, got {type(block).__name__}")
        self.block = block
        self.hook_resid_pre, self.hook_resid_post = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        return self.hook_resid_post(x + self.block(x))


class Looped(nn.Module):
    """Apply one weight-shared ``block`` ``loops`` times: :math:`x_{t+1} = \\mathrm{block}(x_t)`.

    ``iterates(x, loops)`` returns :math:`[x_0, x_1, \\dots, x_L]`, which is what checks of
    looped constructions ("one more loop is one more step") inspect.
    """

    def __init__(self, block: nn.Module, loops: int = 1) -> None:
        super().__init__()
        if not isinstance(block, nn.Module):
            raise TypeError(f"block must be an nn.Module, got {type(block).__name__}")
        self.block = block
        self.loops = _validate.positive_int("loops", loops)

    def iterates(self, x: torch.Tensor, loops: int | None = None) -> list[torch.Tensor]:
        loops = self.loops if loops is None else _validate.positive_int("loops", loops)
        states = [x]
        for _ in range(loops):
            states.append(self.block(states[-1]))
        return states

    def forward(self, x: torch.Tensor, loops: int | None = None) -> torch.Tensor:
        return self.iterates(x, loops)[-1]
