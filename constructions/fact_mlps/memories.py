r"""Linear associative memories (Nichani et al.), and Zipf-distributed ones (Cabannes et al.).
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions.fact_mlps.task import _fact_set, _storage_margins
from constructions.layers import HookPoint, fixed, resolve
from constructions.residual_layout import NO_SEQUENCE

# --- the linear associative memory ------------------------------------------------------------

class LinearAssociativeMemory(nn.Module):
    r""":math:`g(k) = W k` with :math:`W \in \mathbb R^{d_v\times d}` (row inputs: ``k @ W.T``).

    Hook points (a one-matrix MLP, TransformerLens's names): ``hook_mlp_in`` (``k``,
    ``(..., d)``) and ``hook_mlp_out`` (:math:`Wk`, ``(..., d_v)``).
    """

    def __init__(self, W: torch.Tensor) -> None:
        super().__init__()
        self.W = fixed(_validate.real_tensor("W", W, ndim=2))
        self.hook_mlp_in, self.hook_mlp_out = HookPoint(), HookPoint()

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return [f"{NO_SEQUENCE} (a linear map on single vectors)"]

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        if k.shape[-1] != self.W.shape[1]:
            raise ValueError(f"k must have width {self.W.shape[1]}, got shape {tuple(k.shape)}")
        return self.hook_mlp_out(self.hook_mlp_in(k.to(self.W.dtype)) @ self.W.T)


def linear_associative_memory(keys, values, facts, *, weights=None,
                              dtype: torch.dtype = torch.float64,
                              device=None) -> LinearAssociativeMemory:
    r"""The Hebbian memory :math:`W = \sum_i q_i\, v_{f(i)} k_i^\top` (default :math:`q_i = 1`).

    Key :math:`i` scores value :math:`j` by
    :math:`\langle Wk_i, v_j\rangle = q_i\lVert k_i\rVert^2\langle v_{f(i)}, v_j\rangle +
    \sum_{i' \ne i} q_{i'}\langle k_{i'}, k_i\rangle\langle v_{f(i')}, v_j\rangle`: a signal
    plus crosstalk. With random near-orthogonal unit embeddings the crosstalk is a sum of about
    :math:`F` terms of size :math:`1/d`, so recall is exact while :math:`F \lesssim d^2/\log`
    (Nichani et al. 2024); weights :math:`q` implement the thresholded and frequency-weighted
    memories of Cabannes et al. (2024).
    """
    keys, values, facts = _fact_set(keys, values, facts)
    if weights is None:
        weights = torch.ones(keys.shape[0], dtype=torch.float64)
    weights = _validate.real_tensor("weights", weights, shape=(keys.shape[0],)).to(torch.float64)
    W = (values[facts] * weights[:, None]).T @ keys
    return LinearAssociativeMemory(W.to(**resolve(dtype, device)))


# --- Zipf-distributed associative memories (Cabannes et al.) ------------------------------------

def zipf_probabilities(n: int, alpha: float) -> torch.Tensor:
    r""":math:`p(x) \propto x^{-\alpha}` for :math:`x = 1, \dots, n`."""
    n = _validate.positive_int("n", n)
    alpha = _validate.positive_float("alpha", alpha)
    weights = torch.arange(1, n + 1, dtype=torch.float64).pow(-alpha)
    return weights / weights.sum()


def population_error(model, keys, values, facts, probabilities) -> float:
    r""":math:`\sum_x p(x)\,[\mu_x \le 0]`: the probability that a token drawn from :math:`p`
    is not stored."""
    margins = _storage_margins(model, keys, values, facts)
    probabilities = _validate.probability_vector("probabilities", probabilities,
                                                 size=margins.shape[0])
    return float(probabilities[margins <= 0].sum())
