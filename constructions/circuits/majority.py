r"""The ground-truth circuit of the LayerNorm majority head (Brody, Alon, Yahav 2023).

:func:`~constructions.layernorm.majority_head` embeds tokens, LayerNorms them
(:math:`x_j = \mathrm{LN}(e_{t_j}) \perp \mathbf 1`) and runs one non-causal head with query
:math:`(c^\top x_i)\mathbf 1`, key :math:`x_j` and value :math:`x_jW_V \approx e_{t_j}`; its
output (no residual, no unembedding) is the token-frequency vector. As a graph (1 layer,
1 head, :func:`~constructions.circuits.attention_graph` ``(1, 1)``) the node ``input`` is the
LayerNormed embedding; ``input -> logits`` is a zero map (there is no residual), so patching it
changes nothing.

**The corruption** :func:`resample_token` replaces the token at one position :math:`r` by
:math:`b \ne t_r`: the causal variable is that token. Every score is
:math:`(c^\top x_i)\,\mathbf 1^\top x_j = 0` in exact arithmetic whatever the tokens, so the
query and key edges carry nothing the output depends on; the value at :math:`r` goes from
:math:`e_{t_r}` to :math:`e_b`, and the metric :math:`m = o_{n,t_r} - o_{n,b}` (final position)
moves by :math:`2/n`. So the circuit is ``input -> a0.h0<v>`` and ``a0.h0 -> logits``
(:func:`majority_circuit`). In float64 the scores are rounding-sized, not 0, so sufficiency
holds within a bound that :mod:`theorems.areas.circuits.majority` derives from the run's own
operands. The model does not export to TransformerLens with its LayerNorm (see
:meth:`~constructions.layernorm.MajorityHead.residual_layout`): the edges' hook names
are those of the exportable ``normalize=False`` layout, nominal here.
"""

from __future__ import annotations

import torch

from constructions import _validate
from constructions.circuits.graph import Circuit, Edge, patched_names
from constructions.layernorm import MajorityHead

_EDGES = (
    Edge("input", "a0.h0", "v", "token t_j -> value LN(e_t) W_V = e_t: what the uniform head "
         "averages into the frequency vector"),
    Edge("a0.h0", "logits", None, "the output of the head, the token frequencies, is the output"),
)


def majority_circuit(d: int) -> Circuit:
    """The circuit of ``majority_head(V, d)`` under :func:`resample_token`: the value edge and
    the head's output edge (module docstring)."""
    d = _validate.positive_int("d", d)
    return Circuit("majority head token circuit", 1, 1, d, _EDGES, corruption="resample_token")


def resample_token(tokens: torch.Tensor, position: int, replacement: int,
                   vocab_size: int) -> torch.Tensor:
    """``tokens`` ``(B, n)`` with the token at ``position`` replaced by ``replacement``, which
    must differ from it in every row."""
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    tokens = _validate.token_tensor("tokens", tokens, vocab_size=vocab_size, ndim=2)
    if tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must hold at least one token, got shape "
                         f"{tuple(tokens.shape)}")
    n = tokens.shape[1]
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < n:
        raise ValueError(f"position must be an int in [0, {n}), got {position!r}")
    if isinstance(replacement, bool) or not isinstance(replacement, int) \
            or not 0 <= replacement < vocab_size:
        raise ValueError(f"replacement must be a token in [0, {vocab_size}), got "
                         f"{replacement!r}")
    if bool((tokens[:, position] == replacement).any()):
        raise ValueError("replacement must differ from the token it replaces")
    corrupted = tokens.clone()
    corrupted[:, position] = replacement
    return corrupted


def _checked(model: object, clean: object, corrupted: object,
             names: tuple[str, str] = ("clean", "corrupted")
             ) -> tuple[MajorityHead, torch.Tensor, torch.Tensor]:
    _validate.instance("model", model, MajorityHead)
    if model.attention.causal or model.attention.kind != "softmax" \
            or model.attention.n_heads != 1:
        raise ValueError("model must be a majority_head (one non-causal softmax head)")
    prompts = []
    for name, tokens in zip(names, (clean, corrupted), strict=True):
        tokens = _validate.token_tensor(name, tokens, vocab_size=model.vocab_size, ndim=2)
        if tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(f"{name} must hold at least one token, got shape "
                             f"{tuple(tokens.shape)}")
        prompts.append(tokens)
    if prompts[0].shape != prompts[1].shape:
        raise ValueError(f"{names[1]} must have the shape of {names[0]} "
                         f"{tuple(prompts[0].shape)}, got {tuple(prompts[1].shape)}")
    return model, prompts[0], prompts[1]


def _head(model: MajorityHead, x_Q: torch.Tensor, x_K: torch.Tensor, x_V: torch.Tensor
          ) -> torch.Tensor:
    """The head's output ``(B, n, V)`` from its query, key and value inputs, by the
    operations of :meth:`constructions.layers.Attention.forward`, in its order."""
    a = model.attention
    q = torch.einsum("bnd,hdk->bhnk", x_Q, a.W_Q)                     # (B, 1, n, d)
    k = torch.einsum("bnd,hdk->bhnk", x_K, a.W_K)                     # (B, 1, n, d)
    pattern = (a.scale * q @ k.transpose(-1, -2)).softmax(dim=-1)    # (B, 1, n, n)
    values = torch.einsum("bnd,hdv->bhnv", x_V, a.W_V)                # (B, 1, n, V)
    z = torch.einsum("bhij,bhjv->bhiv", pattern, values)
    return torch.einsum("bhiv,hvo->bio", z, a.W_O)                    # (B, n, V)


def majority_patched_output(model: MajorityHead, clean: torch.Tensor, corrupted: torch.Tensor,
                            patched) -> torch.Tensor:
    r"""The output ``(B, n, V)`` of the clean prompt with each edge in ``patched`` (names or
    :class:`Edge`\ s of ``attention_graph(1, 1)``) carrying the corrupted prompt:
    ``input -> a0.h0<x>`` feeds the corrupted LayerNormed embedding to input :math:`x`,
    ``a0.h0 -> logits`` replaces the output by the corrupted run's, ``input -> logits`` is a
    zero map. An empty ``patched`` is ``model(clean)`` bit for bit (the same operations)."""
    model, clean, corrupted = _checked(model, clean, corrupted)
    chosen = patched_names(patched, 1, 1)
    dtype = model.attention.W_Q.dtype
    x, x_corrupted = (model.keys(t).to(dtype) for t in (clean, corrupted))
    if "a0.h0->logits" in chosen:
        return _head(model, x_corrupted, x_corrupted, x_corrupted)
    inputs = [x_corrupted if f"input->a0.h0<{s}>" in chosen else x for s in "qkv"]
    return _head(model, *inputs)


def majority_operands(model: MajorityHead, tokens: torch.Tensor
                      ) -> dict[str, torch.Tensor]:
    r"""The computed operands the rounding bounds read, for ``tokens`` ``(B, n)``:
    ``queries`` :math:`\hat q` ``(B, n, d)``, ``keys`` :math:`\hat k` ``(B, n, d)`` and
    ``values`` :math:`\hat v` ``(B, n, V)``, exactly as the head computes them."""
    model, tokens, _ = _checked(model, tokens, tokens, ("tokens", "tokens"))
    a = model.attention
    x = model.keys(tokens).to(a.W_Q.dtype)
    return {"queries": torch.einsum("bnd,hdk->bhnk", x, a.W_Q)[:, 0],
            "keys": torch.einsum("bnd,hdk->bhnk", x, a.W_K)[:, 0],
            "values": torch.einsum("bnd,hdv->bhnv", x, a.W_V)[:, 0]}
