r"""ROME's rank-one edit (Meng et al. 2022), as the paper states it and as its code computes it
(FM.7).
"""

from __future__ import annotations

import torch

from constructions import _validate

# --- ROME (FM.7) ------------------------------------------------------------------------------

def second_moment(keys) -> torch.Tensor:
    r"""The uncentred second moment :math:`C = \frac1n\sum_t k_tk_t^\top` of keys ``(n, d_k)``."""
    keys = _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=2))
    keys = keys.to(torch.float64)
    return keys.T @ keys / keys.shape[0]


def _rome_arguments(W, C, k_star, v_star, *, key_name: str = "k_star"):
    W = _validate.nonempty("W", _validate.real_tensor("W", W, ndim=2)).to(torch.float64)
    d_v, d_k = W.shape
    C = _validate.real_tensor("C", C, ndim=2).to(torch.float64)
    if C.shape != (d_k, d_k):
        raise ValueError(f"C must have shape ({d_k}, {d_k}) to match W of shape {(d_v, d_k)}, "
                         f"got {tuple(C.shape)}")
    # A symmetric matrix computed in floating point (say Q diag Q^T) is symmetric only to
    # about d u max|C|; accept that, reject anything further, and symmetrise.
    asymmetry = float((C - C.T).abs().max())
    if asymmetry > 8 * d_k * torch.finfo(torch.float64).eps * float(C.abs().max()):
        raise ValueError(f"C must be symmetric (max |C - C^T| = {asymmetry:.3g})")
    C = (C + C.T) / 2
    factor, info = torch.linalg.cholesky_ex(C)
    if int(info) != 0:
        raise ValueError("C must be positive definite (its Cholesky factorisation failed)")
    k_star = _validate.real_tensor(key_name, k_star, shape=(d_k,)).to(torch.float64)
    v_star = _validate.real_tensor("v_star", v_star, shape=(d_v,)).to(torch.float64)
    return W, factor, k_star, v_star


def rome_edit(W, C, k_star, v_star) -> torch.Tensor:
    r"""ROME's rank-one edit (Meng et al. 2022, Eq. 2):
    :math:`W' = W + \Lambda(C^{-1}k_*)^\top` with
    :math:`\Lambda = (v_* - Wk_*)/((C^{-1}k_*)^\top k_*)`.

    ``W`` is ``(d_v, d_k)`` and maps keys to values (:math:`v = Wk`); ``C`` is the keys'
    uncentred second moment (symmetric positive definite; its scale cancels). :math:`W'`
    inserts the fact (:math:`W'k_* = v_*`) while minimising
    :math:`\mathrm{tr}(\Delta C\Delta^\top) = \mathbb E\lVert\Delta k\rVert^2` among all
    :math:`\Delta` with :math:`\Delta k_* = v_* - Wk_*`.
    """
    W, factor, k_star, v_star = _rome_arguments(W, C, k_star, v_star)
    u = torch.cholesky_solve(k_star[:, None], factor)[:, 0]
    denominator = float(u @ k_star)
    if not denominator > 0:
        raise ValueError("k_star must be non-zero")
    return W + torch.outer((v_star - W @ k_star) / denominator, u)


def rome_edit_as_coded(W, C, k_bar, k_prompt, v_star) -> torch.Tensor:
    r"""The update as the released code computes it (kmeng01/rome, ``compute_u.py`` and
    ``compute_v.py``).

    The left vector is built from :math:`\bar k`, the subject's key averaged over random
    prefixes: :math:`u = C^{-1}\bar k/\lVert C^{-1}\bar k\rVert`; the right vector uses the
    raw prompt's key :math:`k_p`: :math:`r = (v_* - Wk_p)/(u^\top k_p)`; and
    :math:`W' = W + ru^\top`. So :math:`W'k_p = v_*` exactly, but
    :math:`W'\bar k = W\bar k + (v_* - Wk_p)\,u^\top\bar k/u^\top k_p`, which is not
    :math:`v_*` unless :math:`\bar k` and :math:`k_p` agree on the relevant directions.
    """
    W, factor, k_bar, v_star = _rome_arguments(W, C, k_bar, v_star, key_name="k_bar")
    k_prompt = _validate.real_tensor("k_prompt", k_prompt, shape=k_bar.shape).to(torch.float64)
    u = torch.cholesky_solve(k_bar[:, None], factor)[:, 0]
    u = u / u.norm()
    denominator = float(u @ k_prompt)
    if denominator == 0:
        raise ValueError("k_prompt must not be C-orthogonal to k_bar (u^T k_prompt = 0)")
    return W + torch.outer((v_star - W @ k_prompt) / denominator, u)


