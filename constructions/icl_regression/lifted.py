r"""The effective predictor of a linear self-attention layer in lifted coordinates.
"""

from __future__ import annotations

import torch

from constructions import _validate

# IR.7's autoregressive layer lives in its own module; it is part of this area's API.
from constructions.ar_mesa import ar_mesa_layer as ar_mesa_layer

# --- the effective predictor in lifted coordinates ---------------------------------------------

def pair_features(G: torch.Tensor) -> torch.Tensor:
    """The upper-triangular entries :math:`G_{ab}`, :math:`a \\le b`, of ``(..., D, D)``, in
    ``torch.triu_indices`` order: each unordered pair once (see the module docstring)."""
    G = _validate.real_tensor("G", G)
    if G.ndim < 2 or G.shape[-1] != G.shape[-2] or G.shape[-1] < 1:
        raise ValueError(f"G must have shape (..., D, D) with D >= 1, got {tuple(G.shape)}")
    return _pair_features(G)


def _pair_features(G: torch.Tensor) -> torch.Tensor:
    D = G.shape[-1]
    rows, cols = torch.triu_indices(D, D, device=G.device)
    return G[..., rows, cols]


def pair_coefficients(T: torch.Tensor) -> torch.Tensor:
    """Coefficients of :func:`pair_features` for a tensor ``(..., D, D, C)`` symmetric in its
    pair axes: :math:`T_{aac}` on the diagonal, :math:`T_{abc} + T_{bac}` off it."""
    T = _validate.real_tensor("T", T, finite=False)
    if T.ndim < 3 or T.shape[-2] != T.shape[-3] or T.numel() == 0:
        raise ValueError(f"T must have shape (..., D, D, C) with D, C >= 1, got {tuple(T.shape)}")
    return _pair_coefficients(T)


def _pair_coefficients(T: torch.Tensor) -> torch.Tensor:
    D = T.shape[-2]
    rows, cols = torch.triu_indices(D, D, device=T.device)
    return T[..., rows, cols, :] + torch.where(rows == cols, 0.0, 1.0).to(T).unsqueeze(-1) * \
        T[..., cols, rows, :]


def key_moment(Z: torch.Tensor, n_context: int | None = None,
               mask_query: bool = True) -> torch.Tensor:
    r""":math:`G = \tfrac1n Z M Z^\top`: the keys' second moment, ``(..., D, D)``. The first
    ``n`` columns are context; later columns are keys only when ``mask_query=False``."""
    Z = checked_prompt_tokens(Z)
    if n_context is not None:
        n_context = _validate.positive_int("n_context", n_context)
        if n_context > Z.shape[-1]:
            raise ValueError(f"n_context must be <= the {Z.shape[-1]} columns of Z, "
                             f"got {n_context}")
    return key_moment_unchecked(Z, n_context, _validate.boolean("mask_query", mask_query))


def checked_prompt_tokens(Z: object) -> torch.Tensor:
    """Validated prompt tokens ``Z`` ``(..., D, n + 1)`` with ``D >= 2`` and ``n >= 1``."""
    Z = _validate.real_tensor("Z", Z)
    if Z.ndim < 2 or Z.shape[-2] < 2 or Z.shape[-1] < 2:
        raise ValueError(f"Z must have shape (..., D, n + 1) with D, n + 1 >= 2, "
                         f"got {tuple(Z.shape)}")
    return Z


def key_moment_unchecked(Z: torch.Tensor, n_context: int | None, mask_query: bool) -> torch.Tensor:
    """:func:`key_moment` without argument checks, for callers that validated ``Z`` already."""
    n = Z.shape[-1] - 1 if n_context is None else n_context
    keys = Z if not mask_query else Z[..., :n]
    return keys @ keys.transpose(-1, -2) / n


def lifted_features(Z: torch.Tensor, *, mask_query: bool = True) -> torch.Tensor:
    r"""Features :math:`G_{ab}(x_q)_c` (:math:`a \le b`) of regression prompts, ``(..., P)``
    with :math:`P = \tfrac{D(D+1)}2 d`: every one-layer LSA predicts
    :math:`\hat y = \phi(Z)^\top\theta` with ``θ`` its
    :meth:`LinearSelfAttention.lifted_coefficients`. Least squares in these features is the
    convex relaxation of training an LSA (IR.1/IR.2's "lifted least squares")."""
    Z = checked_prompt_tokens(Z)
    G = key_moment_unchecked(Z, None, _validate.boolean("mask_query", mask_query))
    x_query = Z[..., :-1, -1]
    return (_pair_features(G).unsqueeze(-1) * x_query.unsqueeze(-2)).flatten(-2)


def effective_tensor(W_PV: torch.Tensor, W_KQ: torch.Tensor) -> torch.Tensor:
    """:meth:`LinearSelfAttention.effective_tensor` of raw weights (differentiable; like a
    layer it lets non-finite weights through, so that a diverging run reports its loss)."""
    W_PV, W_KQ = _raw_weights(W_PV, W_KQ)
    return effective_tensor_unchecked(W_PV, W_KQ)


def _raw_weights(W_PV: object, W_KQ: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Square ``(D, D)`` weights of one size, ``D >= 2`` (non-finite entries allowed)."""
    W_PV = _validate.square_matrix("W_PV", W_PV, finite=False)
    W_KQ = _validate.square_matrix("W_KQ", W_KQ, size=W_PV.shape[0], finite=False)
    if W_PV.shape[0] < 2:
        raise ValueError(f"W_PV must be D x D with D >= 2, got {tuple(W_PV.shape)}")
    return W_PV, W_KQ


def effective_tensor_unchecked(W_PV: torch.Tensor, W_KQ: torch.Tensor) -> torch.Tensor:
    """:func:`effective_tensor` without argument checks (the model's forward pass calls it)."""
    E = torch.einsum("oa,bc->oabc", W_PV, W_KQ)
    return (E + E.transpose(1, 2)) / 2


def lifted_coefficients(W_PV: torch.Tensor, W_KQ: torch.Tensor) -> torch.Tensor:
    """:meth:`LinearSelfAttention.lifted_coefficients` of raw weights (differentiable): only
    the last row of ``W_PV`` enters, so this costs :math:`O(D^3)`."""
    W_PV, W_KQ = _raw_weights(W_PV, W_KQ)
    return lifted_coefficients_unchecked(W_PV, W_KQ)


def lifted_coefficients_unchecked(W_PV: torch.Tensor, W_KQ: torch.Tensor) -> torch.Tensor:
    """:func:`lifted_coefficients` without argument checks (the model's forward pass calls it)."""
    T = -torch.einsum("a,bc->abc", W_PV[-1], W_KQ[:, :-1])
    return _pair_coefficients((T + T.transpose(0, 1)) / 2).flatten()


