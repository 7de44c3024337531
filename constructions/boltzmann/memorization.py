r"""Memorization by one attention layer and a ReLU FFN, and the labelled-sequence task it is checked
on.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from constructions import _validate, numerics
from constructions.boltzmann.operator import (
    best_spacing_direction,
    boltzmann,
    checked_direction,
    rank_one_head,
)
from constructions.layers import MLP, Attention, resolve
from constructions.residual_layout import (
    AttentionBlock,
    Interface,
    MlpBlock,
    ResidualLayout,
    attention_block,
    context_length,
    mlp_block,
    placed,
)

# --- memorization ---------------------------------------------------------------------------


def context_id_error_bound(x: torch.Tensor, w: torch.Tensor, rho: float,
                           out_scale: float) -> torch.Tensor:
    r"""First-order bound on the rounding error of the context id
    :math:`z = w^\top(x_q + \mathrm{Attn}(x)_q)` of a :func:`rank_one_head` with unit ``w``
    and ``u = w``, per token, ``(B, n)``.

    With :math:`R = \max_k |x_k|^\top|w|` (per sequence), scores are :math:`d`-term products
    scaled by :math:`\rho`, so their error is :math:`\Delta\le\gamma_{2d+4}\rho R^2` (the
    rounding of :math:`\rho w`, two d-term dots, their product, and the softmax's max-shift
    subtraction, :math:`\le 2u\rho R^2`); the softmax Jacobian
    (:math:`\lVert Jv\rVert_1\le 2\lVert v\rVert_\infty` at every point) turns it into a
    value error :math:`\le 2\Delta R`, and the weighted sum adds :math:`\gamma_{n+d+4}R`. The
    residual and the final projection add :math:`\gamma_{d+2}` relative to :math:`|y|^\top|w|`.
    """
    x = _validate.nonempty("x", _validate.real_tensor("x", x, ndim=3))
    n, d = x.shape[1], x.shape[2]
    w = checked_direction("w", w, d, "x").to(x.dtype)
    _validate.finite_float("rho", rho)
    _validate.finite_float("out_scale", out_scale)

    def gamma(k: int) -> float:
        return numerics.gamma(k, x.dtype)

    projected = x.abs() @ w.abs()
    R = projected.amax(dim=-1, keepdim=True)
    rho, scale = abs(rho), abs(out_scale)
    value_error = 2 * gamma(2 * d + 4) * rho * R**3 + gamma(n + d + 4) * R
    return gamma(d + 2) * (projected + scale * R) + scale * value_error


class MemorizingTransformer(nn.Module):
    r"""One rank-1 softmax attention layer (with residual) and a ReLU FFN with a scalar output.

    ``forward(x)`` returns ``(B, n)``: the FFN applied to each token of ``x + Attn(x)``. The
    FFN's first layer is :math:`W_{in} = w\mathbf 1^\top`, so it reads only the *context id*
    :math:`z = w^\top(x_q + \mathrm{Attn}(x)_q) = s_q + \gamma\,\mathrm{boltz}_{\rho s_q}(p)`
    (:meth:`context_ids`), and it is a piecewise-linear function of :math:`z` that is constant,
    equal to the label, on a plateau around every training id (``plateaus``: rows
    ``(low, high, label)``). Between plateaus of different labels it ramps linearly;
    outside all of them it stays within the range of the labels.

    ``parameter_report()`` gives the parameter count beside the bound quoted for this result.
    """

    def __init__(self, attention: Attention, ffn: MLP, w: torch.Tensor, plateaus: torch.Tensor,
                 *, seq_len: int, samples: int, separation_ratio: float) -> None:
        super().__init__()
        self.attention = attention
        self.ffn = ffn
        self.register_buffer("w", w)
        self.register_buffer("plateaus", plateaus)
        self.seq_len = seq_len
        self.samples = samples
        self.separation_ratio = separation_ratio

    @property
    def d_model(self) -> int:
        return self.w.shape[0]

    @property
    def rho(self) -> float:
        return float(self.attention.W_Q[0, :, 0] @ self.w)

    @property
    def out_scale(self) -> float:
        return float(self.attention.W_O[0, 0] @ self.w)

    @property
    def hidden(self) -> int:
        return self.ffn.W_in.shape[1]

    def residual_blocks(self, name: str, *, offset: int = 0, width: int | None = None
                        ) -> tuple[tuple[AttentionBlock, MlpBlock], slice, int]:
        """The TransformerLens block of ``FFN(y + Attn(y))``, with ``y`` in the residual
        coordinates ``offset .. offset + d``: attention reads and writes them, the FFN writes
        its scalar output into the coordinate after them, which the unembedding reads.
        Returns ``(block, output coordinate, width)``; the width defaults to just enough."""
        d = self.d_model
        read = slice(offset, offset + d)
        out = slice(read.stop, read.stop + 1)
        D = out.stop if width is None else width
        return (attention_block(name, self.attention, D, read, read),
                mlp_block(name, self.ffn, D, read, out)), out, D

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        """The TransformerLens layout: :meth:`residual_blocks` and a scalar read-out."""
        block, out, D = self.residual_blocks(name)
        W = self.w
        W_U = placed(torch.ones(1, 1, dtype=W.dtype, device=W.device), (D, 1), out)
        W_pos = W.new_zeros(context_length(name, n_ctx, self.seq_len), D)
        return ResidualLayout(name, D, W.new_zeros(1, D), W_pos, W_U, (block,),
                              Interface("residual", width=D, scalar=True, dtype=W.dtype))

    def boltzmann_values(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\mathrm{boltz}_{\rho s_q}(p)` per token, ``(B, n)``."""
        p = x.to(self.w) @ self.w
        return boltzmann(p[:, None, :].expand(-1, p.shape[1], -1), self.rho * p, dim=-1)

    def mixed(self, x: torch.Tensor) -> torch.Tensor:
        """The attention layer's output ``x + Attn(x)``, ``(B, n, d)``."""
        x = _validate.real_tensor("x", x, ndim=3).to(self.w)
        return x + self.attention(x)

    def context_ids(self, x: torch.Tensor) -> torch.Tensor:
        r"""The scalar :math:`z = w^\top(x + \mathrm{Attn}(x))` per token, ``(B, n)``."""
        return self.mixed(x) @ self.w

    def id_error_bound(self, x: torch.Tensor) -> torch.Tensor:
        """Rounding bound of :meth:`context_ids` (see :func:`context_id_error_bound`)."""
        x = _validate.real_tensor("x", x, ndim=3).to(self.w)
        return context_id_error_bound(x, self.w, self.rho, self.out_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ffn(self.mixed(x))[..., 0]

    # -- parameters --
    def parameter_count(self) -> int:
        """Entries of every weight tensor (attention and FFN), as a dense model stores them."""
        return sum(p.numel() for p in self.parameters())

    def effective_parameter_count(self) -> int:
        r"""Free parameters of the factorised model: four :math:`d`-vectors in the rank-1
        attention, and a rank-1 FFN input layer (:math:`w`, then ``hidden`` biases), ``hidden``
        output weights and one output bias."""
        return 4 * self.d_model + self.d_model + 2 * self.hidden + 1

    def parameter_bound(self, s: int) -> int:
        r"""The quoted bound :math:`4(s + d) + d(2nN + d)` (source unverified; see the claim)."""
        d, nN = self.d_model, self.seq_len * self.samples
        return 4 * (s + d) + d * (2 * nN + d)

    def parameter_report(self) -> dict:
        nN = self.seq_len * self.samples
        return {"parameters": self.parameter_count(),
                "effective_parameters": self.effective_parameter_count(),
                "bound_formula": "4(s+d) + d(2nN+d)  [unverified source]",
                "bound_s=0": self.parameter_bound(0), "bound_s=nN": self.parameter_bound(nN),
                "d": self.d_model, "n": self.seq_len, "N": self.samples}

    def extra_repr(self) -> str:
        report = self.parameter_report()
        return (f"rho={self.rho:.4g}, hidden={self.hidden}, parameters={report['parameters']} "
                f"(effective {report['effective_parameters']}) vs bound 4(s+d)+d(2nN+d) = "
                f"{report['bound_s=0']} at s=0, {report['bound_s=nN']} at s=nN")


def _token_ids(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct rows of ``inputs`` (the vocabulary) and each token's row index, ``(N, n)``."""
    N, n, d = inputs.shape
    vocabulary, inverse = torch.unique(inputs.reshape(-1, d), dim=0, return_inverse=True)
    return vocabulary, inverse.reshape(N, n)


def _check_memorization_data(inputs: torch.Tensor, labels: torch.Tensor, ids: torch.Tensor,
                             allow_duplicates: bool) -> None:
    """Raise ValueError naming the first zero token, repeated token or inconsistent label."""
    zero = (inputs.norm(dim=-1) == 0).nonzero()
    if len(zero):
        i, k = (int(v) for v in zero[0])
        raise ValueError(f"inputs[{i}, {k}] is the zero vector; tokens must have norm > 0 "
                         f"(tokenwise separation needs r_min > 0)")
    rows = ids.tolist()
    if not allow_duplicates:
        for i, row in enumerate(rows):
            seen: dict[int, int] = {}
            for k, token in enumerate(row):
                if token in seen:
                    raise ValueError(f"inputs[{i}] repeats a token at positions {seen[token]} and "
                                     f"{k}; Theorem 2 forbids duplicate tokens in a sequence "
                                     f"(pass allow_duplicates=True to try anyway)")
                seen[token] = k
    first: dict[tuple, tuple[int, int, float]] = {}
    values = labels.tolist()
    for i, row in enumerate(rows):
        context = tuple(sorted(row))
        for k, token in enumerate(row):
            key = (token, context)
            if key not in first:
                first[key] = (i, k, values[i][k])
            elif first[key][2] != values[i][k]:
                j, l, other = first[key]
                raise ValueError(
                    f"inconsistent labels: inputs[{j}] position {l} and inputs[{i}] position {k} "
                    f"hold the same token in the same context (the same multiset of tokens) but "
                    f"have labels {other} and {values[i][k]}; attention is permutation-"
                    f"equivariant, so no such model exists")


def _plateau_ffn(ids: torch.Tensor, labels: torch.Tensor, w: torch.Tensor
                 ) -> tuple[MLP, torch.Tensor]:
    r"""A ReLU FFN reading :math:`z = w^\top y` that equals each label on a plateau around its ids.

    Sorted ids are grouped into runs of equal label. Between two runs with gap :math:`g` the
    output ramps from one label to the next over the middle half of the gap,
    :math:`\tfrac{\Delta y}{h}(\mathrm{relu}(z - t) - \mathrm{relu}(z - t - h))` with
    :math:`t = z_{\mathrm{hi}} + g/4`, :math:`h = g/2`; so it is exactly flat within
    :math:`g/4` of every training id.
    """
    order = ids.argsort()
    z, y = ids[order].tolist(), labels[order].tolist()
    runs: list[list] = []  # [low, high, label]
    for value, label in zip(z, y, strict=True):
        if runs and runs[-1][2] == label:
            runs[-1][1] = value
        else:
            runs.append([value, value, label])
    biases, weights = [], []
    for (_, high, left), (low, _, right) in itertools.pairwise(runs):
        gap = low - high
        start, width = high + gap / 4, gap / 2
        slope = (right - left) / width
        biases += [-start, -(start + width)]
        weights += [slope, -slope]
    lows = [-math.inf] + [r[0] - (r[0] - p[1]) / 4 for p, r in itertools.pairwise(runs)]
    highs = [r[1] + (q[0] - r[1]) / 4 for r, q in itertools.pairwise(runs)] + [math.inf]
    plateaus = torch.tensor([[lo, hi, r[2]] for lo, hi, r in zip(lows, highs, runs, strict=True)],
                            dtype=torch.float64)
    if not weights:  # a single label: a constant function
        biases, weights = [0.0], [0.0]
    hidden = len(weights)
    W_in = w[:, None].expand(-1, hidden).clone()
    ffn = MLP(W_in, torch.tensor(biases, dtype=torch.float64),
              torch.tensor(weights, dtype=torch.float64)[:, None],
              torch.tensor([runs[0][2]], dtype=torch.float64))
    return ffn, plateaus


# Score spans rho * |s| * spread(p) tried when choosing rho: small spans keep the Boltzmann
# operator nearly linear (ids close to means), large ones make it nearly a max (ids collapse
# onto the largest projection); the best separation lies in between and depends on the data.
_SPANS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
# Plateaus extend a quarter of each gap around the ids, so gaps must exceed 8x the id rounding
# bound for every id to land on its plateau with a factor-2 margin.
SEPARATION_FACTOR = 8.0


def memorizing_transformer(inputs, labels, *, allow_duplicates: bool = False, trials: int = 512,
                           seed: int = 0, dtype: torch.dtype = torch.float64,
                           device=None) -> MemorizingTransformer:
    r"""One attention layer plus a ReLU FFN that maps every ``inputs[i]`` to ``labels[i]``.

    ``inputs`` is ``(N, n, d)`` (real token vectors) and ``labels`` is ``(N, n)`` (real or
    integer). Requirements, each reported by a ``ValueError`` naming the offending entries:
    no zero token; no token repeated inside a sequence (Theorem 2's assumption; relax with
    ``allow_duplicates=True``); and consistency: two positions holding the same token in the
    same multiset of tokens carry the same label (else no permutation-equivariant model fits).

    Construction: the rank-1 head of :class:`ContextualMapping` with the direction ``w`` that
    spreads the token projections furthest apart (:func:`best_spacing_direction`; it sorts, so
    large vocabularies are fine), the output scale :math:`\gamma = \mathrm{spacing}/(2\,
    \mathrm{spread}(p))` (which keeps the ids of different tokens in disjoint intervals), and
    the :math:`\rho` among
    a few candidates that best separates ids of different labels relative to their float
    rounding bound (:meth:`MemorizingTransformer.id_error_bound`). If no candidate separates
    them by ``SEPARATION_FACTOR`` times that bound, the data cannot be memorized in float64 by
    this construction, and a ``ValueError`` says which two positions collide.
    """
    inputs = _validate.real_tensor("inputs", inputs, ndim=3).to(torch.float64)
    seed = _validate.seed("seed", seed)
    N, n, d = inputs.shape
    if N < 1 or n < 1 or d < 1:
        raise ValueError(f"inputs must be a non-empty (N, n, d) tensor, got {tuple(inputs.shape)}")
    labels = _validate.real_tensor("labels", labels, shape=(N, n)).to(torch.float64)
    if not isinstance(allow_duplicates, bool):
        raise TypeError(f"allow_duplicates must be a bool, got {type(allow_duplicates).__name__}")
    kw = resolve(dtype, device)
    vocabulary, ids = _token_ids(inputs)
    _check_memorization_data(inputs, labels, ids, allow_duplicates)
    w, spacing = best_spacing_direction(vocabulary, seed=seed,
                                        trials=_validate.positive_int("trials", trials))
    r_max = float(vocabulary.norm(dim=-1).max())
    p_vocab = vocabulary @ w
    spread = float(p_vocab.max() - p_vocab.min())
    # Distinct tokens project at least `spacing` apart; a context moves an id by at most
    # gamma * spread, so the ids of different tokens stay in disjoint intervals.
    gamma = spacing / (2 * spread) if spread > 0 else 1.0
    flat_labels = labels.reshape(-1)
    best = None
    for span in _SPANS:
        rho = span / (r_max * spread) if spread > 0 else span / r_max**2
        attention = rank_one_head(w, rho, out_scale=gamma)
        with torch.no_grad():
            z = ((inputs + attention(inputs)) @ w).reshape(-1)
        err = context_id_error_bound(inputs, w, rho, gamma).reshape(-1)
        ratio, pair = _separation(z, err, flat_labels)
        if best is None or ratio > best[0]:
            best = (ratio, pair, attention, z)
    ratio, pair, attention, z = best
    if ratio < SEPARATION_FACTOR:
        (i, k), (j, l) = (divmod(int(q), n) for q in pair)
        raise ValueError(
            f"cannot memorize in float64: the context ids of inputs[{i}] position {k} and "
            f"inputs[{j}] position {l} (labels {labels[i, k].item()} and {labels[j, l].item()}) "
            f"are only {ratio:.3g}x their rounding bound apart (need {SEPARATION_FACTOR:g}x); "
            f"their tokens or contexts are too close")
    ffn, plateaus = _plateau_ffn(z, flat_labels, w)
    model = MemorizingTransformer(attention, ffn, w, plateaus, seq_len=n, samples=N,
                                  separation_ratio=ratio)
    return model.to(**kw)


def _separation(z: torch.Tensor, err: torch.Tensor, labels: torch.Tensor
                ) -> tuple[float, tuple[int, int]]:
    """Smallest (gap / summed rounding bound) between neighbouring ids of different labels,
    and the two flat indices that attain it (``inf`` if every label is the same)."""
    order = z.argsort()
    zs, es, ys = z[order], err[order], labels[order]
    # For each id, the nearest id below it with a different label is the last one before its
    # run of equal labels; comparing neighbours across every label change covers all pairs.
    change = (ys[1:] != ys[:-1]).nonzero().reshape(-1)
    if len(change) == 0:
        return math.inf, (0, 0)
    ratios = (zs[change + 1] - zs[change]) / (es[change + 1] + es[change])
    worst = int(ratios.argmin())
    c = int(change[worst])
    return float(ratios[worst]), (int(order[c]), int(order[c + 1]))


# --- the memorization task (shared by the checks and the GD experiment) ------------------------


def labelled_sequences(samples: int, seq_len: int, d: int, vocab_size: int, classes: int,
                       seed: int = 0, *, permuted: float = 0.0
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """``samples`` sequences of ``seq_len`` distinct tokens from a seeded Gaussian vocabulary of
    ``vocab_size`` rows in ``R^d``, with random labels in ``[0, classes)`` that are consistent:
    one label per (token, token set), drawn once. A fraction ``permuted`` of the sequences
    repeat an earlier one in another order (with its labels permuted alike). Returns
    ``(inputs (N, n, d) float64, labels (N, n) int64)``."""
    samples = _validate.positive_int("samples", samples)
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    seq_len = _validate.positive_int("seq_len", seq_len)
    if seq_len > vocab_size:
        raise ValueError(f"seq_len must be <= vocab_size={vocab_size}, got {seq_len}")
    d = _validate.positive_int("d", d)
    classes = _validate.positive_int("classes", classes)
    permuted = _validate.positive_float("permuted", permuted, allow_zero=True)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    vocabulary = torch.randn(vocab_size, d, generator=generator, dtype=torch.float64)
    rows: list[list[int]] = []
    for i in range(samples):
        if i and float(torch.rand(1, generator=generator)) < permuted:
            source = rows[int(torch.randint(i, (1,), generator=generator))]
            rows.append([source[j] for j in torch.randperm(seq_len, generator=generator).tolist()])
        else:
            rows.append(torch.randperm(vocab_size, generator=generator)[:seq_len].tolist())
    table: dict[tuple, int] = {}
    labels = [[table.setdefault((t, tuple(sorted(row))),
                                int(torch.randint(classes, (1,), generator=generator)))
               for t in row] for row in rows]
    return vocabulary[torch.tensor(rows)], torch.tensor(labels)


def token_only_ceiling(inputs: torch.Tensor, labels: torch.Tensor) -> float:
    r"""The best accuracy of any function of the token alone:
    :math:`\frac1{nN}\sum_t\max_c\#\{(i,k): x^{(i)}_k = t,\ y^{(i)}_k = c\}`."""
    inputs = _validate.nonempty("inputs", _validate.real_tensor("inputs", inputs, ndim=3))
    labels = _validate.real_tensor("labels", labels, shape=tuple(inputs.shape[:2]))
    _, ids = _token_ids(inputs.to(torch.float64))
    counts: dict[tuple[int, float], int] = {}
    for token, label in zip(ids.reshape(-1).tolist(), labels.reshape(-1).tolist(), strict=True):
        counts[token, label] = counts.get((token, label), 0) + 1
    best: dict[int, int] = {}
    for (token, _), count in counts.items():
        best[token] = max(best.get(token, 0), count)
    return sum(best.values()) / labels.numel()
