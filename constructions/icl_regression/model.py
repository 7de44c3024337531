r"""Linear self-attention with explicit weights: one step of preconditioned GD, and Zhang-Frei-
Bartlett's initialisation.
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_transposed

# IR.7's autoregressive layer lives in its own module; it is part of this area's API.
from constructions.ar_mesa import ar_mesa_layer as ar_mesa_layer
from constructions.icl_regression.lifted import (
    effective_tensor_unchecked,
    key_moment_unchecked,
    lifted_coefficients_unchecked,
)
from constructions.layers import HookPoint, fixed, resolve
from constructions.residual_layout import LINEAR_ATTENTION

# --- the model -------------------------------------------------------------------------------

class LinearSelfAttention(nn.Module):
    r"""One residual linear self-attention layer on column tokens:
    :math:`f(Z) = Z + \tfrac1n W_{PV} Z M Z^\top W_{KQ} Z` (module docstring).

    The first ``n`` columns of ``Z`` are context (keys and values); the others are queries (a
    regression query, chain-of-thought tokens). ``mask_query=False`` lets them be keys too;
    the normaliser stays ``n``. Weights are fixed parameters; ``.requires_grad_()`` trains.

    What checks inspect: :meth:`predict` (the read-out), :meth:`effective_tensor`,
    :meth:`preconditioner` and :meth:`lifted_coefficients` (the gauge-invariant map).

    Hook points, in TransformerLens's layout (positions before features: the transposed
    ``(..., N, D)`` views of the column tokens): ``hook_resid_pre`` (``Z``), ``hook_attn_out``
    (the update :math:`\tfrac1n W_{PV}ZMZ^\top W_{KQ}Z`) and ``hook_resid_post``
    (:math:`f(Z)`). The forward multiplies left to right, :math:`((W_{PV}G)W_{KQ})Z`, and never
    forms queries, keys, scores or a per-token value sum, so it has no ``hook_q``, ``hook_k``,
    ``hook_pattern`` or ``hook_z``: adding them would change the summation order.
    """

    def __init__(self, W_PV: torch.Tensor, W_KQ: torch.Tensor, *, mask_query: bool = True):
        super().__init__()
        if not isinstance(mask_query, bool):
            raise TypeError(f"mask_query must be a bool, got {type(mask_query).__name__}")
        W_PV = _validate.real_tensor("W_PV", W_PV, ndim=2)
        D = W_PV.shape[0]
        if W_PV.shape != (D, D) or D < 2:
            raise ValueError(f"W_PV must be a square D x D matrix with D >= 2, "
                             f"got shape {tuple(W_PV.shape)}")
        W_KQ = _validate.real_tensor("W_KQ", W_KQ, shape=(D, D))
        self.mask_query = mask_query
        self.W_PV, self.W_KQ = fixed(W_PV), fixed(W_KQ.to(W_PV))
        self.hook_resid_pre, self.hook_attn_out = HookPoint(), HookPoint()
        self.hook_resid_post = HookPoint()

    @property
    def width(self) -> int:
        """Token width ``D`` (``d + 1`` for regression prompts)."""
        return self.W_PV.shape[0]

    def _check(self, Z: torch.Tensor, n_context: int | None) -> tuple[torch.Tensor, int]:
        Z = _validate.real_tensor("Z", Z, ndim=(2, 3))
        if Z.shape[-2] != self.width:
            raise ValueError(f"Z must have {self.width} rows (the token width), "
                             f"got shape {tuple(Z.shape)}")
        n = Z.shape[-1] - 1 if n_context is None else n_context
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n < Z.shape[-1]:
            raise ValueError(f"n_context must be an int in [1, {Z.shape[-1] - 1}] (at least one "
                             f"context column and one query column), got {n!r}")
        return Z.to(self.W_PV.dtype), n

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return [LINEAR_ATTENTION]

    def forward(self, Z: torch.Tensor, n_context: int | None = None) -> torch.Tensor:
        """:math:`f(Z)`, same shape as ``Z``; ``n_context`` defaults to all columns but the last."""
        Z, n = self._check(Z, n_context)
        Z = hook_transposed(self.hook_resid_pre, Z, -1, -2)  # hooks see (..., N, D)
        G = key_moment_unchecked(Z, n, self.mask_query)
        update = hook_transposed(self.hook_attn_out, self.W_PV @ G @ self.W_KQ @ Z, -1, -2)
        return hook_transposed(self.hook_resid_post, Z + update, -1, -2)

    def predict(self, Z: torch.Tensor) -> torch.Tensor:
        r""":math:`\hat y = -f(Z)_{D, n+1}` for regression prompts ``(..., d+1, n+1)``: the
        negated label slot of the query column (sign convention of Ahn's and von Oswald's
        code). Only that column is computed."""
        Z, n = self._check(Z, None)
        G = key_moment_unchecked(Z, n, self.mask_query)
        query = Z[..., -1:]
        return -(query[..., -1:, :] + self.W_PV[-1:] @ G @ self.W_KQ @ query)[..., 0, 0]

    def effective_tensor(self) -> torch.Tensor:
        r"""``E[o, a, b, c]`` :math:`= \tfrac12(W_{PV,oa}W_{KQ,bc} + W_{PV,ob}W_{KQ,ac})`: the
        update of row ``o`` at column ``j`` is :math:`\sum_{abc} E_{oabc}G_{ab}Z_{cj}`.
        Gauge-invariant; ``(D, D, D, D)``."""
        return effective_tensor_unchecked(self.W_PV, self.W_KQ)

    def lifted_coefficients(self) -> torch.Tensor:
        r"""``θ`` with :math:`\hat y = \phi(Z)^\top\theta` for :func:`lifted_features` ``φ``:
        the pair coefficients of :math:`T = -E_{y,:,:,x}`, flattened to ``(P,)``."""
        return lifted_coefficients_unchecked(self.W_PV, self.W_KQ)

    def preconditioner(self) -> torch.Tensor:
        r""":math:`\Gamma` with :math:`\hat y = x_q^\top\Gamma s + \dots` (module docstring):
        :math:`\Gamma_{cb} = 2T_{ybc}`, ``(d, d)``, in the orientation of
        :func:`optimal_preconditioner`."""
        T = -self.effective_tensor()[-1, :, :, :-1]
        return 2 * T[-1, :-1, :].T


def lsa(W_PV: torch.Tensor, W_KQ: torch.Tensor, *, mask_query: bool = True,
        dtype: torch.dtype = torch.float64, device=None) -> LinearSelfAttention:
    """A one-layer LSA with the given ``D x D`` weights (see :class:`LinearSelfAttention`)."""
    kw = resolve(dtype, device)
    W_PV = _validate.real_tensor("W_PV", W_PV, ndim=2)
    W_KQ = _validate.real_tensor("W_KQ", W_KQ, ndim=2)
    return LinearSelfAttention(W_PV.to(**kw), W_KQ.to(**kw), mask_query=mask_query)


def one_step_gd(d: int, eta: float, *, preconditioner: torch.Tensor | None = None,
                mask_query: bool = True, dtype: torch.dtype = torch.float64,
                device=None) -> LinearSelfAttention:
    r"""The LSA whose prediction is one step of preconditioned GD from :math:`w = 0`.

    With :math:`\Gamma = \eta P` (``P`` = ``preconditioner``, default ``I``):
    :math:`W_{PV} = e_{d+1}e_{d+1}^\top` and :math:`W_{KQ} = \begin{pmatrix} -\Gamma^\top & 0
    \\ 0 & 0\end{pmatrix}`. Then :math:`u = e_{d+1}` and
    :math:`\hat y = -s^\top(-\Gamma^\top)x_q = x_q^\top\Gamma s`, exactly
    :func:`gd_prediction` (the :math:`G_{yy}` term vanishes because :math:`W_{KQ}` has no
    ``y`` row, and masking is irrelevant because ``u`` has no ``x`` part). This is Ahn et
    al.'s code layout (``P_full[d, d] = 1``, ``Q = -Γ``) with :math:`W_{KQ} = Q^\top`.
    """
    d = _validate.positive_int("d", d)
    eta = _validate.finite_float("eta", eta)
    P = torch.eye(d, dtype=torch.float64) if preconditioner is None else \
        _validate.real_tensor("preconditioner", preconditioner, shape=(d, d)).to(torch.float64)
    W_PV = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_PV[d, d] = 1.0
    W_KQ = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_KQ[:d, :d] = -(eta * P).T
    return lsa(W_PV, W_KQ, mask_query=mask_query, dtype=dtype, device=device)


def zfb_init(d: int, scale: float = 0.1, *, Theta: torch.Tensor | None = None,
             dtype: torch.dtype = torch.float64, device=None) -> LinearSelfAttention:
    r"""Zhang–Frei–Bartlett's initialisation in this module's sign convention [R]:
    :math:`W_{PV}(0) = \sigma\begin{pmatrix}0&0\\0&1\end{pmatrix}`,
    :math:`W_{KQ}(0) = -\sigma\begin{pmatrix}\Theta\Theta^\top&0\\0&0\end{pmatrix}` with
    :math:`\lVert\Theta\Theta^\top\rVert_F = 1` (default :math:`\Theta = d^{-1/4}I`).

    The minus sign converts their read-out :math:`+f(Z)_{d+1,n+1}` to ours. The start is
    *balanced*: :math:`\lVert W_{PV}\rVert_F^2 - \lVert W_{KQ}\rVert_F^2 = 0`.
    """
    d = _validate.positive_int("d", d)
    scale = _validate.positive_float("scale", scale)
    if Theta is None:
        Theta = torch.eye(d, dtype=torch.float64) * d ** -0.25
    Theta = _validate.real_tensor("Theta", Theta, shape=(d, None)).to(torch.float64)
    block = Theta @ Theta.T
    if block.norm() == 0:
        raise ValueError("Theta must be nonzero")
    W_PV = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_PV[d, d] = scale
    W_KQ = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_KQ[:d, :d] = -scale * block / block.norm()
    return lsa(W_PV, W_KQ, dtype=dtype, device=device)


