r"""Helpers shared by the topic modules of this area."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from constructions.induction_heads import (
    NO_MATCH,
    guarantees,
    induction_keys,
    induction_targets,
)
from theorems.numerics import gamma

SHT = {"arxiv": "2408.14332", "ref": "Sanford, Hsu, Telgarsky (2024)"}
BIETTI = {"arxiv": "2306.00802", "ref": "Bietti, Cabannes, Bouchacourt, Jégou, Bottou (2023), "
          "NeurIPS"}
AREA_CONSTRUCTIONS = "constructions.induction_heads"

TASK_STATEMENT = (
    r"For $\sigma = (\sigma_1, \dots, \sigma_n) \in \Sigma^n$, $\Sigma = \{0, \dots, S-1\}$, "
    r"let $j^\star_i = \max\{j < i : \sigma_j = \sigma_i\}$. The induction-heads output is "
    r"$\tau_i = \sigma_{j^\star_i + 1}$, and $\tau_i = \bot$ when no such $j$ exists.")

# --- strategies and shared helpers ------------------------------------------------------------

def brute_force_targets(sequence: list[int]) -> list[int]:
    """The task, literally: scan back from i-1 for the latest equal token; bot is -1, as the
    statement says (a literal, not the oracle's NO_MATCH)."""
    out = []
    for i, token in enumerate(sequence):
        earlier = [j for j in range(i) if sequence[j] == token]
        out.append(sequence[earlier[-1] + 1] if earlier else -1)
    return out


def tight_sequences(vocab_size: int, length: int) -> list[list[int]]:
    r"""Inputs at the margins (A)–(D), each of exactly ``length`` tokens.

    Older matches (A): :math:`a^{n-2} b a`; non-matches after the induction key (B):
    :math:`a\,b\,c^{n-3} a`; no match after a long run (D): :math:`a^{n-1} b`; plus all-equal,
    alternating and no-repeat sequences. Tokens :math:`0, 1` and :math:`S-1, 0` are neighbours
    on the token circle (:math:`S-1` also neighbours :math:`\bot`), the hardest readouts.
    """
    S, n = vocab_size, length
    pairs = {(0, min(1, S - 1)), (S - 1, 0), (S - 1, max(S - 2, 0))}
    out = []
    for a, b in sorted(pairs):
        c = (b + 1) % S if (b + 1) % S != a else b  # a key after c must not match a
        out += [[a] * (n - 2) + [b, a], ([a, b] + [c] * (n - 3) + [a])[:n],
                [a] * (n - 1) + [b], [(a, b)[i % 2] for i in range(n)]]
    out += [[0] * n, [i % S for i in range(n)]]
    return [s[-n:] if len(s) >= n else (s + [0] * n)[:n] for s in out]


@st.composite
def induction_cases(draw, max_vocab: int = 12, max_len: int = 200):
    """(vocab_size, max_len, sequence): random, all-equal, alternating, no-repeat and tight."""
    S = draw(st.integers(1, max_vocab))
    limit = draw(st.one_of(st.integers(1, 16), st.integers(1, max_len)))
    n = draw(st.one_of(st.just(limit), st.integers(1, limit)))
    kind = draw(st.sampled_from(["random", "equal", "alternating", "distinct", "tight"]))
    if kind == "random":
        sequence = draw(st.lists(st.integers(0, S - 1), min_size=n, max_size=n))
    elif kind == "equal":
        sequence = [draw(st.integers(0, S - 1))] * n
    elif kind == "alternating":
        a, b = draw(st.integers(0, S - 1)), draw(st.integers(0, S - 1))
        sequence = [(a, b)[i % 2] for i in range(n)]
    elif kind == "distinct":
        sequence = draw(st.permutations(range(S)))[:n]
        sequence += [sequence[-1]] * (n - len(sequence))  # pad by repeating: one late match
    else:
        sequence = draw(st.sampled_from(tight_sequences(S, n)))
    return S, limit, sequence


def attention_margins(model, tokens: torch.Tensor, kind: str) -> tuple[float, float, float]:
    """(layer-1 slack, layer-2 slack, logit margin) at the worst position of a batch.

    Layer-1 slack: least weight on :math:`i-1` minus the guaranteed :math:`\\alpha`; layer-2
    slack: least weight on the induction key minus the readout threshold (both from
    :func:`~constructions.induction_heads.guarantees`, i.e. from the theory for this size,
    not from the model); logit margin: correct logit minus the best other one.
    """
    first, second = model.attention_patterns(tokens)
    bound = guarantees(kind, model.vocab_size, model.max_len)
    n = tokens.shape[-1]
    queries = torch.arange(1, n + 1)
    on_previous = first[:, 0, queries, queries - 1]
    on_key = second[:, 0, 1:].gather(-1, induction_keys(tokens).unsqueeze(-1)).squeeze(-1)
    logits = model(tokens)
    targets = induction_targets(tokens)
    classes = torch.where(targets == NO_MATCH, model.vocab_size, targets)
    correct = logits.gather(-1, classes.unsqueeze(-1)).squeeze(-1)
    others = logits.scatter(-1, classes.unsqueeze(-1), float("-inf")).amax(-1)
    return (float(on_previous.min() - bound["layer1"]), float(on_key.min() - bound["layer2"]),
            float((correct - others).min()))


def softmax_tolerance(n_keys: int, dtype: torch.dtype = torch.float64) -> float:
    """Absolute error of a float softmax weight from exact scores: exp, an (n+1)-term sum and
    a division. (A weight computed from rounded scores needs more: layer1_weight_tolerance.)"""
    return gamma(n_keys + 3, dtype)


def layer1_weight_tolerance(model, tokens: torch.Tensor) -> float:
    r"""Absolute error of a computed layer-1 attention weight against the exact one.

    The stream :math:`x = W_E + W_{pos}` rounds once; :math:`q, k` are d-term dots and the
    score a :math:`d_k`-term dot times ``scale``: :math:`|\hat s_{ij} - s_{ij}| \le
    \gamma_{2d+d_k+3}\,|\mathrm{scale}|\,(|x_i||W_Q|)\cdot(|x_j||W_K|)`, and the softmax's
    max shift adds :math:`2u\max|\hat s|`. Scores here reach :math:`O(n^2\log n)` (the
    model's docstring), so this term dominates. A score perturbation :math:`\le\Delta` moves
    each weight by a relative :math:`e^{2\Delta} - 1`; exp, the sum and the division add
    :math:`\gamma_{n+4}` (softmax_tolerance); weights are :math:`\le 1`.
    """
    layer = model.layers[0]
    n_keys = tokens.shape[-1] + 1
    d, d_k = layer.W_Q.shape[1], layer.W_Q.shape[2]
    bos = torch.full((tokens.shape[0], 1), model.vocab_size, dtype=torch.long)
    x = (model.W_E[torch.cat([bos, tokens], 1)] + model.W_pos[:n_keys]).abs()   # (B, n+1, d)
    q = torch.einsum("bnd,hdk->bhnk", x, layer.W_Q.abs())
    k = torch.einsum("bnd,hdk->bhnk", x, layer.W_K.abs())
    s_max = float((abs(layer.scale) * q @ k.transpose(-1, -2)).max()) * (1 + gamma(2 * d + d_k))
    delta = (gamma(2 * d + d_k + 3) + 2 * gamma(1)) * s_max
    return math.expm1(2 * delta) * (1 + softmax_tolerance(n_keys)) + softmax_tolerance(n_keys + 1)


