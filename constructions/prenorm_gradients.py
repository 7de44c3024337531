r"""The mean-field Pre-LN / Post-LN transformer of Xiong et al. 2020 (arXiv:2002.04745,
Lemma 1 and Theorem 1), whose gradient norms :mod:`empirics.prenorm_gradients` measures (the
model, the loss and the derivation of Lemma 1's band are in that module's docstring).

Layers :math:`l = 1..L`, :math:`\bar v = \tfrac1n\sum_j v_j`, :math:`\mathrm{LN}` without
affine terms and with :math:`\epsilon = 0`, :math:`\mathrm{FFN}(v) = \mathrm{ReLU}(v W^{1,l})
W^{2,l}`, attention uniform so :math:`\mathrm{Attn}(v)_i = \bar v\, W^{V,l} W^{O,l}`:

* Post-LN: :math:`x^{post,3} = \mathrm{LN}(x_l + \mathrm{Attn}(x_l))`,
  :math:`x^{post,5} = x^{post,3} + \mathrm{FFN}(x^{post,3})`,
  :math:`x_{l+1} = \mathrm{LN}(x^{post,5})`; the output is :math:`x_{L+1}`.
* Pre-LN: :math:`x^{pre,3} = x_l + \mathrm{Attn}(\mathrm{LN}(x_l))`,
  :math:`x_{l+1} = x^{pre,3} + \mathrm{FFN}(\mathrm{LN}(x^{pre,3}))`; the output is
  :math:`\mathrm{LN}(x_{L+1})` (or :math:`x_{L+1}` with ``final_norm=False``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import layer_norm_without_eps
from constructions.layers import MLP, Attention, HookPoint
from constructions.residual_layout import (
    DEFAULT_N_CTX,
    Interface,
    ResidualLayout,
    UnsupportedConstructionError,
    attention_block,
    context_length,
    mlp_block,
)

# One-line TransformerLens exports for the docs pages (constructions.export.export_line).
TRANSFORMER_LENS_EXAMPLES = {
    "mean_field_transformer": "to_transformer_lens(mean_field_transformer('pre', depth=2, d=8))",
}

ARCHS = ("pre", "post")


class MeanFieldTransformer(nn.Module):
    r"""``depth`` Pre-LN or Post-LN layers in the mean-field setting, for ``trials``
    independent initialisations at once (a leading batch dim of every weight).

    Weights ``W_V, W_O, W_1, W_2`` have shape ``(depth, trials, d, d)`` (``W_1``:
    ``(..., d, ffn_width)``, ``W_2``: ``(..., ffn_width, d)``). Only ``W_2[-1]``, the last
    layer's second FFN matrix, requires a gradient: it is the one Theorem 1 is about.
    ``forward(x)`` maps ``(trials, n, d)`` to the output ``(trials, n, d)``;
    :meth:`residual_norms` exposes the quantities of Lemma 1.
    """

    def __init__(self, arch: str, W_V: torch.Tensor, W_O: torch.Tensor, W_1: torch.Tensor,
                 W_2: torch.Tensor, *, final_norm: bool) -> None:
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
        self.arch, self.final_norm = arch, final_norm
        self.W_V = nn.Parameter(W_V, requires_grad=False)
        self.W_O = nn.Parameter(W_O, requires_grad=False)
        self.W_1 = nn.Parameter(W_1, requires_grad=False)
        self.W_2_hidden = nn.Parameter(W_2[:-1], requires_grad=False)
        self.W_2_last = nn.Parameter(W_2[-1])  # (trials, ffn_width, d): the measured one
        # per layer, (trials, n, d): the residual stream before and after it, and the
        # attention and FFN outputs added to it (TransformerLens's names)
        self.hook_resid_pre, self.hook_resid_post, self.hook_attn_out, self.hook_mlp_out = (
            nn.ModuleList(HookPoint() for _ in range(W_V.shape[0])) for _ in range(4))

    @property
    def depth(self) -> int:
        return self.W_V.shape[0]

    def second_ffn_weight(self, layer: int) -> torch.Tensor:
        """:math:`W^{2,l}` of layer ``layer`` (0-based), ``(trials, ffn_width, d)``: the last
        layer's is the parameter that requires a gradient, the others are fixed."""
        return self.W_2_last if layer == self.depth - 1 else self.W_2_hidden[layer]

    def _attention(self, v: torch.Tensor, layer: int) -> torch.Tensor:
        # uniform attention: every token receives the mean of the values
        return self.hook_attn_out[layer](
            v.mean(dim=-2, keepdim=True) @ self.W_V[layer] @ self.W_O[layer] + torch.zeros_like(v))

    def _ffn(self, v: torch.Tensor, layer: int) -> torch.Tensor:
        return self.hook_mlp_out[layer](
            torch.relu(v @ self.W_1[layer]) @ self.second_ffn_weight(layer))

    def states(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(output, Lemma-1 state): ``x^{post,5}_L`` for Post-LN, ``x_{L+1}`` for Pre-LN."""
        for layer in range(self.depth):
            x = self.hook_resid_pre[layer](x)
            if self.arch == "post":
                x3 = layer_norm_without_eps(x + self._attention(x, layer))
                lemma = x3 + self._ffn(x3, layer)
                x = layer_norm_without_eps(lemma)
            else:
                x3 = x + self._attention(layer_norm_without_eps(x), layer)
                x = x3 + self._ffn(layer_norm_without_eps(x3), layer)
                lemma = x
            x = self.hook_resid_post[layer](x)
        output = layer_norm_without_eps(x) if (self.arch == "pre" and self.final_norm) else x
        return output, lemma

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.states(x)[0]

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        r"""The TransformerLens layout (Pre-LN, one trial, final LayerNorm): uniform attention
        is a head with :math:`W_Q = W_K = 0`; LayerNorm without affine terms and with
        :math:`\epsilon = 0` is TransformerLens's ``LNPre`` with ``eps=0``."""
        features = []
        if self.arch != "pre":
            features.append("Post-LN (LayerNorm after the residual sum)")
        if self.W_V.shape[1] != 1:
            features.append(f"a batch of {self.W_V.shape[1]} independent models (trials)")
        if self.arch == "pre" and not self.final_norm:
            features.append("Pre-LN without a final LayerNorm (TransformerLens normalises before "
                            "the unembedding whenever it normalises anywhere)")
        if features:
            raise UnsupportedConstructionError(name, features)
        W = self.W_V
        D = W.shape[-1]
        eye = torch.eye(D, dtype=W.dtype, device=W.device)
        blocks = []
        for layer in range(self.depth):
            uniform = Attention(W.new_zeros(D, 1), W.new_zeros(D, 1), self.W_V[layer, 0].detach(),
                                self.W_O[layer, 0].detach())
            ffn = MLP(self.W_1[layer, 0].detach(), W.new_zeros(self.W_1.shape[-1]),
                      self.second_ffn_weight(layer)[0].detach(), W.new_zeros(D))
            every = slice(None)
            blocks.append((attention_block(name, uniform, D, every, every),
                           mlp_block(name, ffn, D, every, every)))
        return ResidualLayout(name, D, W.new_zeros(1, D),
                              W.new_zeros(context_length(name, n_ctx, DEFAULT_N_CTX), D), eye,
                              tuple(blocks), Interface("residual", width=D, dtype=W.dtype),
                              layer_norm=True)

    @torch.no_grad()
    def residual_norms(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\lVert s_i\rVert^2/d` averaged over tokens, per trial, for the Lemma-1
        state :math:`s` (``x^{post,5}_L`` or ``x_{L+1}``); shape ``(trials,)``."""
        lemma = self.states(x)[1]
        return lemma.pow(2).sum(-1).mean(-1) / lemma.shape[-1]


def mean_field_transformer(arch: str, depth: int, d: int, *, trials: int = 1, seed: int = 0,
                           ffn_width: int | None = None, weight_std: float | None = None,
                           final_norm: bool = True, dtype: torch.dtype = torch.float64,
                           device: torch.device | str | None = None) -> MeanFieldTransformer:
    r"""A :class:`MeanFieldTransformer` with weights drawn i.i.d. from
    :math:`\mathcal N(0, \sigma^2)`, :math:`\sigma = 1/\sqrt d` by default (the paper's
    initialisation), from a CPU generator seeded with ``seed``.

    ``ffn_width`` defaults to ``d`` (the paper's :math:`W^{1}, W^{2} \in \mathbb R^{d\times d}`);
    ``final_norm`` applies to Pre-LN only. Changing either, or ``weight_std``, leaves the
    paper's setting (the suite's mutants do exactly that).
    """
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    depth = _validate.positive_int("depth", depth)
    d = _validate.positive_int("d", d, minimum=2)
    trials = _validate.positive_int("trials", trials)
    width = d if ffn_width is None else _validate.positive_int("ffn_width", ffn_width)
    std = 1 / math.sqrt(d) if weight_std is None else _validate.positive_float("weight_std",
                                                                                weight_std)
    if not isinstance(final_norm, bool):
        raise TypeError(f"final_norm must be a bool, got {type(final_norm).__name__}")
    dtype = _validate.float_dtype("dtype", dtype)
    device = _validate.device("device", device)
    seed = _validate.seed("seed", seed)
    # Weights are drawn where they live: a full config holds ~1e11 weights, which only a GPU
    # draws fast enough (so CUDA runs use the CUDA generator's stream, CPU runs the CPU one).
    generator = torch.Generator(device=device).manual_seed(seed)

    def gaussian(*shape: int) -> torch.Tensor:
        # Drawn in float32, which torch samples ~3x faster than float64 on the CPU (drawing
        # dominates the Monte Carlo); rounding a Gaussian draw to 24 bits is immaterial here.
        draw = torch.randn(depth, trials, *shape, generator=generator, dtype=torch.float32,
                           device=device)
        return (std * draw).to(dtype=dtype)

    return MeanFieldTransformer(arch, gaussian(d, d), gaussian(d, d), gaussian(d, width),
                                gaussian(width, d), final_norm=final_norm)
