r"""The one-layer lower bound: the INDEX reduction and the Alice/Bob split of one layer's
computation.
"""

from __future__ import annotations

import torch

from constructions import _validate
from constructions.induction_heads.model import InductionTransformer
from constructions.layers import Attention

# --- the one-layer lower bound: INDEX and the Alice/Bob split ---------------------------------

STAR = 2  # the third letter of the INDEX alphabet {0, 1, ★}


def index_instance(bits, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The induction-heads input that encodes INDEX: Alice's bits :math:`x`, Bob's index k.

    Length :math:`n = 2n' + 1` over :math:`\{0, 1, \star = 2\}`: (1-indexed) position
    :math:`2j - 1` holds :math:`\star` if :math:`j = k` and 0 otherwise (Bob), position
    :math:`2j` holds :math:`x_j` (Alice), and position :math:`n` holds :math:`\star`. The only
    earlier :math:`\star` is at :math:`2k - 1`, so :math:`\tau_n = \sigma_{2k} = x_k`.
    Returns the tokens and a boolean mask of Alice's positions.
    """
    try:
        bits = [int(b) for b in bits]
    except (TypeError, ValueError):
        raise ValueError(f"bits must be a non-empty sequence of 0s and 1s, got {bits!r}") from None
    if not bits or any(b not in (0, 1) for b in bits):
        raise ValueError(f"bits must be a non-empty sequence of 0s and 1s, got {bits}")
    if isinstance(index, bool) or not isinstance(index, int) or not 1 <= index <= len(bits):
        raise ValueError(f"index must be an int in [1, {len(bits)}], got {index!r}")
    tokens = torch.zeros(2 * len(bits) + 1, dtype=torch.long)
    tokens[1::2][: len(bits)] = torch.tensor(bits)
    tokens[2 * (index - 1)] = STAR
    tokens[-1] = STAR
    alice = torch.zeros_like(tokens, dtype=torch.bool)
    alice[1::2] = True
    return tokens, alice


def _single_layer(model: InductionTransformer, tokens: torch.Tensor) -> Attention:
    if not isinstance(model, InductionTransformer) or len(model.layers) != 1:
        raise ValueError("model must be a one-layer InductionTransformer")
    _validate.token_tensor("tokens", tokens, vocab_size=model.vocab_size,
                           max_len=model.max_len, ndim=1)
    if tokens.shape[0] < 1:
        raise ValueError("tokens must hold at least one token (the last one is the query)")
    return model.layers[0]


def one_layer_messages(model: InductionTransformer, tokens: torch.Tensor, owned: torch.Tensor,
                       *, bos: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    r"""One party's share of a one-layer model's last-position attention: per head,
    :math:`N^h_P = \sum_{j\in P} e^{s^h_j} x_j W^h_V` (shape ``(H, d_v)``) and
    :math:`Z^h_P = \sum_{j\in P} e^{s^h_j}` (shape ``(H,)``).

    ``owned`` masks the party's token positions (``tokens`` is 1-D); ``bos`` gives it the BOS
    too. Only the party's own tokens and the public last token enter: the query
    :math:`q^h = x_n W^h_Q` depends on :math:`\sigma_n` and :math:`n` alone, and each
    :math:`x_j = W_E[\sigma_j] + W_{pos}[j]` on :math:`\sigma_j` and :math:`j`. No max-shift is
    taken: a float carries its own exponent, which is part of its p bits.
    """
    layer = _single_layer(model, tokens)
    _validate.instance("owned", owned, torch.Tensor)
    if owned.dtype != torch.bool or owned.shape != tokens.shape:
        raise ValueError(f"owned must be a boolean mask of tokens' shape {tuple(tokens.shape)}, "
                         f"got {owned.dtype} of shape {tuple(owned.shape)}")
    bos = _validate.boolean("bos", bos)
    n = tokens.shape[0]
    query = torch.einsum("d,hdk->hk", model.W_E[tokens[-1]] + model.W_pos[n], layer.W_Q)
    positions = torch.nonzero(owned).squeeze(-1) + 1  # model positions (BOS is 0)
    ids = tokens[owned]
    if bos:
        positions = torch.cat([positions.new_zeros(1), positions])
        ids = torch.cat([ids.new_full((1,), model.vocab_size), ids])
    x = model.W_E[ids] + model.W_pos[positions]
    keys = torch.einsum("pd,hdk->hpk", x, layer.W_K)
    weights = (layer.scale * torch.einsum("hk,hpk->hp", query, keys)).exp()
    values = torch.einsum("pd,hdv->hpv", x, layer.W_V)
    return torch.einsum("hp,hpv->hv", weights, values), weights.sum(-1)


def combine_messages(model: InductionTransformer, tokens: torch.Tensor,
                     alice: tuple[torch.Tensor, torch.Tensor],
                     bob: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    r"""Bob's reconstruction of the last position's logits from both shares:
    :math:`\big(x_n + \sum_h \tfrac{N^h_A + N^h_B}{Z^h_A + Z^h_B} W^h_O\big) W_U`."""
    layer = _single_layer(model, tokens)
    for name, share in (("alice", alice), ("bob", bob)):
        if not isinstance(share, tuple) or len(share) != 2:
            raise TypeError(f"{name} must be a pair (N, Z) from one_layer_messages, "
                            f"got {type(share).__name__}")
        _validate.real_tensor(name, share[0], shape=tuple(layer.W_O.shape[:2]))
        _validate.real_tensor(name, share[1], shape=tuple(layer.W_O.shape[:1]))
    heads = (alice[0] + bob[0]) / (alice[1] + bob[1]).unsqueeze(-1)
    last = model.W_E[tokens[-1]] + model.W_pos[tokens.shape[0]]
    return (last + torch.einsum("hv,hvo->o", heads, layer.W_O)) @ model.W_U
