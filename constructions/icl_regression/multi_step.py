r"""von Oswald et al.'s construction (IR.4), and multi-step GD by looping or chain of thought
(IR.6).
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_transposed

# IR.7's autoregressive layer lives in its own module; it is part of this area's API.
from constructions.ar_mesa import ar_mesa_layer as ar_mesa_layer
from constructions.icl_regression._shared import MULTI_STEP_MODES, MultiStepMode
from constructions.icl_regression.lifted import checked_prompt_tokens
from constructions.icl_regression.model import LinearSelfAttention, lsa
from constructions.layers import HookPoints
from constructions.residual_layout import LINEAR_ATTENTION, LOOPED

# --- von Oswald et al. (IR.4) -----------------------------------------------------------------

def von_oswald(d: int, eta: float, W0: torch.Tensor | None = None, *, mask_query: bool = True,
               dtype: torch.dtype = torch.float64, device=None) -> LinearSelfAttention:
    r"""von Oswald et al.'s one-step-GD layer [C], scalar outputs (:math:`o = 1`).

    Their weights :math:`W_K = W_Q = \begin{pmatrix}I_d&0\\0&0\end{pmatrix}`,
    :math:`W_V = \begin{pmatrix}0&0\\W_0&-1\end{pmatrix}`, :math:`P = \mathrm{diag}(0, \eta/n)`
    act as :math:`e_j \leftarrow e_j + PW_V\sum_i e_i e_i^\top W_K^\top W_Q e_j`; in the shared
    form that is :math:`W_{PV} = nPW_V = \begin{pmatrix}0&0\\\eta W_0&-\eta\end{pmatrix}` and
    :math:`W_{KQ} = W_K^\top W_Q`. Every token's label moves to :math:`y_j - \Delta W x_j`
    with :math:`\Delta W = -\tfrac\eta n\sum_{i\le n}(W_0x_i - y_i)x_i^\top`, one GD step on
    :math:`\tfrac1{2n}\sum_i(Wx_i - y_i)^2` from :math:`W_0` (:func:`gd_transformed_labels`).
    That holds when the query is masked, or when :math:`W_0 = 0`: otherwise the query's own
    value :math:`\eta(W_0x_q - 0)` leaks into the sum [D].
    """
    d = _validate.positive_int("d", d)
    eta = _validate.finite_float("eta", eta)
    W0 = torch.zeros(1, d, dtype=torch.float64) if W0 is None else \
        _validate.real_tensor("W0", W0, shape=(1, d)).to(torch.float64)
    W_PV = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_PV[d, :d] = eta * W0[0]
    W_PV[d, d] = -eta
    W_KQ = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_KQ[:d, :d] = torch.eye(d, dtype=torch.float64)
    return lsa(W_PV, W_KQ, mask_query=mask_query, dtype=dtype, device=device)


def gd_transformed_labels(Z: torch.Tensor, eta: float, W0: torch.Tensor) -> torch.Tensor:
    r"""The oracle of IR.4: ``Z`` with every label replaced by :math:`y_j - \Delta W x_j`,
    :math:`\Delta W = -\tfrac\eta n\sum_{i\le n}(W_0 x_i - y_i)x_i^\top` (context ``i <= n``)."""
    Z = checked_prompt_tokens(Z)
    eta = _validate.real_number("eta", eta)
    W0 = _validate.real_tensor("W0", W0, shape=(1, Z.shape[-2] - 1))
    n = Z.shape[-1] - 1
    X, y = Z[..., :-1, :], Z[..., -1, :]
    residual = W0[0] @ X[..., :n] - y[..., :n]                    # (..., n)
    delta_W = -(eta / n) * torch.einsum("...n,...dn->...d", residual, X[..., :n])
    out = Z.clone()
    out[..., -1, :] = y - torch.einsum("...d,...dj->...j", delta_W, X)
    return out


# --- multi-step GD by looping or chain of thought (IR.6) ---------------------------------------

def cot_prompt(X: torch.Tensor, y: torch.Tensor,
               iterates: torch.Tensor | None = None) -> torch.Tensor:
    r"""Tokens in the :math:`(x, y, w, 1)` layout, :math:`D = 2d + 2`: context columns
    :math:`(x_j, y_j, 0, 0)`, then one CoT column :math:`(0, 0, w_k, 1)` per row of
    ``iterates`` ``(..., k, d)`` (default: the single start :math:`w_0 = 0`)."""
    X = _validate.real_tensor("X", X, ndim=(2, 3))
    n, d = X.shape[-2:]
    if n < 1 or d < 1:
        raise ValueError(f"X must be (..., n, d) with n, d >= 1, got shape {tuple(X.shape)}")
    y = _validate.real_tensor("y", y, shape=(*X.shape[:-1],)).to(X.dtype)
    if iterates is None:
        iterates = torch.zeros(*X.shape[:-2], 1, d, dtype=X.dtype, device=X.device)
    iterates = _validate.real_tensor("iterates", iterates, ndim=X.ndim).to(X.dtype)
    if iterates.shape[:-2] != X.shape[:-2] or iterates.shape[-1] != d or iterates.shape[-2] < 1:
        raise ValueError(f"iterates must have shape (..., k, {d}) with k >= 1 and X's batch "
                         f"shape, got {tuple(iterates.shape)}")
    zeros = X.new_zeros
    data = torch.cat([X, y.unsqueeze(-1), zeros(*X.shape[:-1], d + 1)], dim=-1)
    thoughts = torch.cat([zeros(*iterates.shape[:-1], d + 1), iterates,
                          X.new_ones(*iterates.shape[:-1], 1)], dim=-1)
    return torch.cat([data, thoughts], dim=-2).transpose(-1, -2)


def multi_step_layer(d: int, eta: float, *, dtype: torch.dtype = torch.float64,
                     device=None) -> LinearSelfAttention:
    r"""The layer that maps a CoT column :math:`(0, 0, w, 1)` to :math:`(0, 0, w', 1)`,
    :math:`w' = w + \tfrac\eta n X^\top(y - Xw)` [D]: :math:`W_{PV}[w, x] = \eta I`,
    :math:`W_{KQ}[x, w] = -I`, :math:`W_{KQ}[y, 1] = 1`, zero elsewhere.

    For a CoT column, :math:`W_{KQ}z = (-w, 1, 0, 0)`, so the scores with context column ``i``
    are :math:`y_i - x_i^\top w`, and :math:`W_{PV}` writes :math:`\eta x_i` into the ``w``
    block. Context columns have :math:`W_{KQ}z_j = 0` and stay unchanged; earlier CoT
    columns as keys would add nothing (their ``x`` block, all :math:`W_{PV}` reads, is 0).
    """
    d = _validate.positive_int("d", d)
    eta = _validate.finite_float("eta", eta)
    D = 2 * d + 2
    x, w = slice(0, d), slice(d + 1, 2 * d + 1)
    W_PV = torch.zeros(D, D, dtype=torch.float64)
    W_KQ = torch.zeros(D, D, dtype=torch.float64)
    W_PV[w, x] = eta * torch.eye(d, dtype=torch.float64)
    W_KQ[x, w] = -torch.eye(d, dtype=torch.float64)
    W_KQ[d, D - 1] = 1.0
    return lsa(W_PV, W_KQ, dtype=dtype, device=device)


class MultiStepGD(nn.Module):
    r"""``steps`` GD steps by one weight-shared layer (:func:`multi_step_layer`).

    ``mode="loop"`` applies the layer ``steps`` times to :func:`cot_prompt` ``(X, y)`` and
    reads :math:`w_k` from its last column. ``mode="cot"`` is chain of thought: each
    application appends the last output column as a new token, so the sequence grows to
    ``n + 1 + steps`` columns and its CoT columns are :math:`w_0, \dots, w_k`.

    Hook points, one block per step as TransformerLens names its blocks:
    ``blocks.s.hook_resid_pre`` (the tokens step ``s`` reads) and ``blocks.s.hook_resid_post``
    (the layer's output; in ``cot`` mode its last column is then appended), each the
    transposed ``(..., N_s, D)`` view of the column tokens. The weight-shared layer's own hook
    points (``layer.hook_attn_out``, ...) fire once per step.
    """

    def __init__(self, layer: LinearSelfAttention, d: int, steps: int, mode: MultiStepMode):
        super().__init__()
        if mode not in MULTI_STEP_MODES:
            raise ValueError(f"mode must be one of {MULTI_STEP_MODES}, got {mode!r}")
        self.layer, self.d, self.mode = layer, d, mode
        steps = _validate.positive_int("steps", steps)
        self.blocks = nn.ModuleList(HookPoints("hook_resid_pre", "hook_resid_post")
                                    for _ in range(steps))

    @property
    def steps(self) -> int:
        return len(self.blocks)

    def _n(self, Z: torch.Tensor) -> int:
        if Z.shape[-2] != 2 * self.d + 2:
            raise ValueError(f"Z must have {2 * self.d + 2} rows (the (x, y, w, 1) layout), "
                             f"got shape {tuple(Z.shape)}")
        return Z.shape[-1] - 1

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return [LINEAR_ATTENTION] + ([LOOPED] if self.mode == "loop" else []) + (
            ["chain-of-thought steps that append output tokens"] if self.mode == "cot" else [])

    def _states(self, Z: torch.Tensor) -> list[torch.Tensor]:
        """The token matrix each step reads, then the final one (``steps + 1`` of them)."""
        n = self._n(Z)
        states = []
        for block in self.blocks:
            Z = hook_transposed(block.hook_resid_pre, Z, -1, -2)  # hooks see (..., N, D)
            states.append(Z)
            out = hook_transposed(block.hook_resid_post, self.layer(Z, n_context=n), -1, -2)
            Z = out if self.mode == "loop" else torch.cat([Z, out[..., -1:]], dim=-1)
        return [*states, Z]

    def forward(self, Z: torch.Tensor) -> torch.Tensor:
        """The final token matrix (``loop``: same shape; ``cot``: ``steps`` columns longer)."""
        return self._states(Z)[-1]

    def iterates(self, Z: torch.Tensor) -> torch.Tensor:
        r""":math:`w_0, \dots, w_k` as ``(..., steps + 1, d)``."""
        w = slice(self.d + 1, 2 * self.d + 1)
        return torch.stack([state[..., w, -1] for state in self._states(Z)], dim=-2)

    def estimate(self, Z: torch.Tensor) -> torch.Tensor:
        """:math:`w_k`, ``(..., d)``."""
        return self.forward(Z)[..., self.d + 1:2 * self.d + 1, -1]


def multi_step_gd(d: int, eta: float, steps: int, *, mode: MultiStepMode = "loop",
                  dtype: torch.dtype = torch.float64, device=None) -> MultiStepGD:
    r"""IR.6: ``steps`` exact GD steps :math:`w_{k+1} = w_k + \tfrac\eta n X^\top(y - Xw_k)`
    from :math:`w_0 = 0`, by looping one layer or by chain of thought (:class:`MultiStepGD`).

    In noiseless tasks :math:`y = Xw^*`, :math:`w_k - w^* = -(I - \eta S)^k w^*` with
    :math:`S = X^\top X/n`, so the error is :math:`\lVert(I - \eta S)^k w^*\rVert^2`: it
    decreases in ``k`` on every prompt iff :math:`\eta \le 2/\lambda_{\max}(S)`.
    """
    d = _validate.positive_int("d", d)
    steps = _validate.positive_int("steps", steps)
    if mode not in MULTI_STEP_MODES:
        raise ValueError(f"mode must be one of {MULTI_STEP_MODES}, got {mode!r}")
    return MultiStepGD(multi_step_layer(d, eta, dtype=dtype, device=device), d, steps, mode)
