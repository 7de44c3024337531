r"""The Boltzmann operator, and one-layer rank-1 softmax attention as a contextual mapping
(Kajitsuka & Sato, ICLR 2024, arXiv:2307.14023).

Conventions. Tokens are rows: a sequence is ``x`` of shape ``(B, n, d)`` (the paper writes
:math:`Z\in\mathbb R^{d\times n}` with tokens as columns; every formula here is its transpose).

**Boltzmann operator.** For :math:`a\in\mathbb R^n` and an inverse temperature :math:`\beta`,

.. math::

    \mathrm{boltz}_\beta(a) = \frac{\sum_i a_i e^{\beta a_i}}{\sum_j e^{\beta a_j}}
    = a^\top\sigma_S[\beta a],\qquad \mathrm{boltz} = \mathrm{boltz}_1,\qquad
    \mathrm{boltz}_\beta(a) = \mathrm{boltz}(\beta a)/\beta .

**Rank-1 attention computes it.** With :math:`W_Q = \rho\,w`, :math:`W_K = W_V = w`
(each :math:`d\times 1`) and :math:`W_O = c\,u^\top`, the score of query :math:`q` on key
:math:`k` is :math:`\rho\,s_q p_k` with :math:`s_q = w^\top x_q`, :math:`p_k = w^\top x_k`, and
the head adds :math:`c\,u\,\mathrm{boltz}_{\rho s_q}(p)` to token :math:`q`.

**Theorem 2 (contextual mapping).** Let the vocabulary :math:`\mathcal V` (rows of
``vocabulary``) be tokenwise separated: :math:`r_{\min}\le\lVert v\rVert\le r_{\max}` and
:math:`\lVert v - v'\rVert\ge\varepsilon` for distinct :math:`v, v'`. Pick a unit :math:`w` with
:math:`|w^\top(x - x')|\ge c_w\lVert x - x'\rVert` on :math:`\mathcal V\cup\{0\}` (a random
direction has :math:`c_w\ge\sqrt{8/(\pi d)}/(|\mathcal V|+1)^2` with positive probability,
Park et al. 2021). Then every score vector :math:`a = \rho s_q p` has entries at least
:math:`\rho c_w^2\varepsilon r_{\min}` apart and at most :math:`\rho r_{\max}^2` in size, so

.. math::

    \rho = \frac{2\ln n + 3}{c_w^2\,\varepsilon\,r_{\min}}

meets the hypothesis of Lemma 1 (score gaps :math:`\ge 2\ln n + 3`), and Lemma 1 separates the
Boltzmann values of different contexts by :math:`(\ln n)^2 e^{-2\rho r_{\max}^2}`. With
:math:`c = \varepsilon/(4 r_{\max})` the layer maps tokens to norm at most
:math:`r = r_{\max} + \varepsilon/4` and separates outputs whose tokens or whose context *sets*
differ by

.. math::

    \delta = \frac{\varepsilon(\ln n)^2}{4\rho r_{\max}^2}\,e^{-2\rho r_{\max}^2}.

With the worst-case constant :math:`c_w = \sqrt{8/(\pi d)}/(|\mathcal V|+1)^2` this is the
paper's closed form (:attr:`ContextualMapping.theorem_delta`). The builder searches for a good
``w`` and uses its measured :math:`c_w`, which gives a smaller :math:`\rho` and a larger (still
astronomically small) :math:`\delta`; the paper's :math:`\delta` then holds a fortiori, because
:math:`\delta(\rho)` decreases in :math:`\rho`. Float64 cannot resolve such gaps, which is
why the checks certify them in interval arithmetic.

**Memorization.** :func:`memorizing_transformer` turns labelled data into one rank-1 attention
layer plus a ReLU FFN that reads the scalar "context id" :math:`w^\top y` of each attention
output :math:`y` and interpolates the labels with flat plateaus. Its :math:`\rho` is chosen
from the data so that the ids are resolvable in float64 (the theorem's :math:`\rho` is not).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
from torch import nn

from constructions import _validate
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

# One-line TransformerLens exports for the docs pages (constructions.export.export_line).
TRANSFORMER_LENS_EXAMPLES = {
    "rank_one_head":
        "to_transformer_lens(rank_one_head(torch.ones(3, dtype=torch.float64), rho=2.0))",
    "contextual_mapping":
        "to_transformer_lens(contextual_mapping(torch.randn(6, 4, dtype=torch.float64), "
        "seq_len=3))",
    "memorizing_transformer":
        "to_transformer_lens(memorizing_transformer(*labelled_sequences(8, 3, 4, 10, 2)))",
    "equivariant_approximator":
        "to_transformer_lens(equivariant_approximator(lambda x: x.sum(-1), seq_len=2, d=1, "
        "grid=3))",
}

# --- the Boltzmann operator ------------------------------------------------------------------


def boltzmann(a, beta=1.0, dim: int = -1) -> torch.Tensor:
    r""":math:`\mathrm{boltz}_\beta(a) = \sum_i a_i e^{\beta a_i}/\sum_j e^{\beta a_j}`, along
    ``dim``.

    ``beta`` is a real number or a tensor that broadcasts against the output (``a`` with
    ``dim`` removed), so a batch may carry one inverse temperature per row. The weights are a
    max-shifted softmax, and the sum is taken relative to the entry of largest weight,
    :math:`\mathrm{boltz}_\beta(a) = a_m + \sum_i (a_i - a_m)\,p_i`, so that nothing overflows
    for any finite :math:`\beta a` (checked up to :math:`|\beta a| = 10^4`) and the result
    keeps full relative accuracy near :math:`\max a` at large :math:`\beta`.
    """
    a = _validate.real_tensor("a", a)
    if a.ndim == 0:
        raise ValueError("a must have at least one dimension, got a scalar")
    dim = _validate.positive_int("dim", dim, minimum=-a.ndim)
    if not -a.ndim <= dim < a.ndim:
        raise ValueError(f"dim must be in [{-a.ndim}, {a.ndim}), got {dim}")
    if a.shape[dim] == 0:
        raise ValueError(f"a must have at least one entry along dim={dim}")
    dim = dim % a.ndim
    if isinstance(beta, torch.Tensor):
        beta = _validate.real_tensor("beta", beta).to(a)
        out_shape = a.shape[:dim] + a.shape[dim + 1:]
        try:
            beta = torch.broadcast_to(beta, out_shape).unsqueeze(dim)
        except RuntimeError:
            raise ValueError(f"beta of shape {tuple(beta.shape)} does not broadcast to the "
                             f"output shape {tuple(out_shape)}") from None
    else:
        beta = _validate.finite_float("beta", beta)
    scores = beta * a
    if not torch.isfinite(scores).all():
        raise ValueError("beta * a overflows the dtype; rescale a or beta")
    weights = scores.softmax(dim=dim)
    anchor = a.gather(dim, scores.argmax(dim=dim, keepdim=True))
    return (anchor + ((a - anchor) * weights).sum(dim=dim, keepdim=True)).squeeze(dim)


def rank_one_head(w, rho: float, *, u=None, out_scale: float = 1.0,
                  dtype: torch.dtype = torch.float64, device=None) -> Attention:
    r"""The single head :math:`W_Q = \rho w`, :math:`W_K = W_V = w`, :math:`W_O = c\,u^\top`.

    Its output at query :math:`q` is :math:`c\,u\,\mathrm{boltz}_{\rho s_q}(p)` with
    :math:`s_q = w^\top x_q` and :math:`p_k = w^\top x_k`: the score vector of query :math:`q`
    is :math:`\rho s_q p`, and the values are :math:`p`. ``w`` need not be a unit vector; ``u``
    defaults to ``w``.
    """
    w = _validate.nonempty("w", _validate.real_tensor("w", w, ndim=1)).to(torch.float64)
    u = w if u is None else _validate.real_tensor("u", u, shape=(len(w),)).to(torch.float64)
    rho = _validate.finite_float("rho", rho)
    out_scale = _validate.finite_float("out_scale", out_scale)
    kw = resolve(dtype, device)
    column = w[:, None]
    return Attention(*(t.to(**kw) for t in (rho * column, column, column,
                                             out_scale * u[None, :])))


# --- tokenwise separation and the projection direction ------------------------------------------


def _distances(points: torch.Tensor) -> torch.Tensor:
    """Pairwise distances with ``inf`` on the diagonal, from exact differences (the default
    matrix-product form of ``cdist`` cancels small distances to 0 beyond 25 rows)."""
    distances = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
    return distances.fill_diagonal_(math.inf)


def separation(vocabulary: torch.Tensor) -> tuple[float, float, float]:
    r"""``(r_min, r_max, eps)``: the smallest and largest token norm and the smallest distance
    between two distinct tokens (:math:`\infty` for a single token)."""
    vocabulary = _points("vocabulary", vocabulary)
    norms = vocabulary.norm(dim=-1)
    if len(vocabulary) < 2:
        return float(norms.min()), float(norms.max()), math.inf
    distances = _distances(vocabulary)
    return float(norms.min()), float(norms.max()), float(distances.min())


def projection_constant(points: torch.Tensor, w: torch.Tensor) -> float:
    r""":math:`c_w = \min_{x\ne x'} |w^\top(x - x')|/\lVert x - x'\rVert` over the rows of
    ``points`` and the origin: how well the direction ``w`` keeps them apart."""
    points = _points("points", points)
    w = _direction("w", w, points.shape[1], "points").to(points.dtype)
    points = torch.cat([points, points.new_zeros(1, points.shape[1])])
    diffs = points[:, None, :] - points[None, :, :]
    norms = diffs.norm(dim=-1)
    keep = norms > 0
    return float(((diffs @ w).abs()[keep] / norms[keep]).min())


def theorem_projection_constant(vocab_size: int, d: int) -> float:
    r""":math:`\sqrt{8/(\pi d)}/(|\mathcal V| + 1)^2`: the constant the projection lemma
    guarantees for :math:`|\mathcal V| + 1` points in :math:`\mathbb R^d`."""
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    d = _validate.positive_int("d", d)
    return math.sqrt(8.0 / (math.pi * d)) / (vocab_size + 1) ** 2


def _points(name: str, points: object) -> torch.Tensor:
    """A non-empty ``(V, d)`` matrix of finite points."""
    return _validate.nonempty(name, _validate.real_tensor(name, points, ndim=2))


def _direction(name: str, w: object, d: int, to: str) -> torch.Tensor:
    """A direction ``(d,)`` matching the width of ``to``."""
    w = _validate.real_tensor(name, w, ndim=1)
    return _validate.matching(name, w, d, to=to)


def _candidates(d: int, trials: int, seed: int) -> torch.Tensor:
    """The coordinate axes and ``trials`` seeded Gaussian directions, as unit rows."""
    trials = _validate.positive_int("trials", trials)
    seed = _validate.seed("seed", seed)
    generator = torch.Generator().manual_seed(seed)
    candidates = torch.cat([torch.eye(d, dtype=torch.float64),
                            torch.randn(trials, d, generator=generator, dtype=torch.float64)])
    return candidates / candidates.norm(dim=-1, keepdim=True)


# Entries of the (pairs x candidates) block evaluated at once by best_direction.
_BLOCK = 1 << 22


def best_direction(points: torch.Tensor, *, trials: int = 512, seed: int = 0
                   ) -> tuple[torch.Tensor, float]:
    """The unit vector with the largest projection constant among ``trials`` seeded Gaussian
    directions (and the coordinate axes), with that constant. Pairs are taken from the rows of
    ``points`` and the origin, in blocks of candidates, so memory stays bounded."""
    points = _points("points", points).to(torch.float64)
    d = points.shape[1]
    candidates = _candidates(d, trials, seed)
    augmented = torch.cat([points, points.new_zeros(1, d)])
    i, j = torch.triu_indices(len(augmented), len(augmented), offset=1)
    diffs = augmented[i] - augmented[j]
    norms = diffs.norm(dim=-1)
    diffs, norms = diffs[norms > 0], norms[norms > 0]
    chunk = max(1, _BLOCK // max(1, len(diffs)))
    constants = torch.cat([((diffs @ block.T).abs() / norms[:, None]).amin(dim=0)
                           for block in candidates.split(chunk)])
    best = int(constants.argmax())
    return candidates[best], float(constants[best])


def best_spacing_direction(points: torch.Tensor, *, trials: int = 512, seed: int = 0
                           ) -> tuple[torch.Tensor, float]:
    r"""The candidate unit vector (as in :func:`best_direction`) whose projections of the rows
    of ``points`` and of the origin are furthest apart, with that smallest spacing. Sorting
    makes this :math:`O(V\log V)` per direction, for vocabularies of any size."""
    points = _points("points", points).to(torch.float64)
    candidates = _candidates(points.shape[1], trials, seed)
    augmented = torch.cat([points, points.new_zeros(1, points.shape[1])])
    chunk = max(1, _BLOCK // len(augmented))
    spacings = torch.cat([(augmented @ block.T).sort(dim=0).values.diff(dim=0).amin(dim=0)
                          if len(augmented) > 1 else torch.full((len(block),), math.inf)
                          for block in candidates.split(chunk)])
    best = int(spacings.argmax())
    return candidates[best], float(spacings[best])


def _unit_vector(name: str, value: object, d: int) -> torch.Tensor:
    value = _validate.real_tensor(name, value, shape=(d,)).to(torch.float64)
    norm = float(value.norm())
    if norm == 0:
        raise ValueError(f"{name} must be a nonzero vector")
    return value / norm


# --- Theorem 2: the contextual mapping ---------------------------------------------------------


class ContextualMapping(nn.Module):
    r"""``x + Attn(x)`` with the rank-1 single-head attention of Theorem 2.

    Attributes (all floats unless noted): ``w`` and ``u`` (unit ``(d,)`` tensors), ``rho``,
    ``out_scale`` (:math:`\varepsilon/(4r_{\max})`, so :math:`W_O = ` ``out_scale`` :math:`u^\top`),
    ``c_w`` (measured projection constant) and ``theorem_c``, ``r_min``, ``r_max``, ``eps``,
    ``seq_len``, ``r``, ``log_delta``/``delta`` (the bound for this :math:`\rho`) and
    ``theorem_log_delta``/``theorem_delta``/``theorem_rho`` (the paper's closed form).
    ``delta`` underflows to ``0.0`` as a float; the logs do not.
    """

    def __init__(self, vocabulary: torch.Tensor, seq_len: int, w: torch.Tensor, u: torch.Tensor,
                 rho: float, c_w: float, *, dtype: torch.dtype, device) -> None:
        super().__init__()
        kw = resolve(dtype, device)
        V, d = vocabulary.shape
        self.seq_len = seq_len
        self.r_min, self.r_max, self.eps = separation(vocabulary.to(torch.float64))
        self.c_w = c_w
        self.theorem_c = theorem_projection_constant(V, d)
        self.rho = rho
        self.out_scale = self.eps / (4 * self.r_max)
        self.register_buffer("vocabulary", vocabulary.to(**kw))
        self.register_buffer("w", w.to(**kw))
        self.register_buffer("u", u.to(**kw))
        self.attention = rank_one_head(w, rho, u=u, out_scale=self.out_scale, dtype=dtype,
                                       device=device)

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        """The TransformerLens layout of ``x + Attn(x)``: one layer, the identity unembedding,
        and the vocabulary as token embedding (token ids work too)."""
        vocabulary = self.vocabulary.detach()
        D = vocabulary.shape[1]
        every = slice(None)
        blocks = ((attention_block(name, self.attention, D, every, every), None),)
        eye = torch.eye(D, dtype=vocabulary.dtype, device=vocabulary.device)
        W_pos = vocabulary.new_zeros(context_length(name, n_ctx, self.seq_len), D)
        return ResidualLayout(name, D, vocabulary, W_pos, eye, blocks,
                              Interface("residual", width=D, dtype=vocabulary.dtype))

    @property
    def W_O(self) -> torch.Tensor:
        r""":math:`W_O = \frac{\varepsilon}{4r_{\max}}u^\top`, shape ``(1, d)`` (row convention)."""
        return self.attention.W_O[0]

    # -- the theorem's constants --
    @property
    def r(self) -> float:
        r"""Output norm bound :math:`r_{\max} + \varepsilon/4`."""
        return self.r_max + self.eps / 4

    @property
    def score_gap(self) -> float:
        r"""Guaranteed gap between the entries of a score vector,
        :math:`\rho c_w^2\varepsilon r_{\min}`; Lemma 1 needs at least :math:`2\ln n + 3`."""
        return self.rho * self.c_w**2 * self.eps * self.r_min

    @property
    def lemma_threshold(self) -> float:
        return 2 * math.log(self.seq_len) + 3

    @property
    def max_score(self) -> float:
        r""":math:`\rho r_{\max}^2`, the radius :math:`r` Lemma 1 is applied with."""
        return self.rho * self.r_max**2

    @staticmethod
    def _log_delta(rho: float, eps: float, r_max: float, n: int) -> float:
        return (math.log(eps) + 2 * math.log(math.log(n)) - 2 * rho * r_max**2
                - math.log(4 * rho * r_max**2))

    @property
    def log_delta(self) -> float:
        r""":math:`\ln\delta` for this :math:`\rho` (valid if ``score_gap >= lemma_threshold``)."""
        return self._log_delta(self.rho, self.eps, self.r_max, self.seq_len)

    @property
    def delta(self) -> float:
        return math.exp(self.log_delta)

    @property
    def theorem_rho(self) -> float:
        r""":math:`(2\ln n + 3)\pi d(|\mathcal V|+1)^4/(8\varepsilon r_{\min})`."""
        return self.lemma_threshold / (self.theorem_c**2 * self.eps * self.r_min)

    @property
    def theorem_log_delta(self) -> float:
        """The paper's :math:`\\ln\\delta` (worst-case projection constant)."""
        return self._log_delta(self.theorem_rho, self.eps, self.r_max, self.seq_len)

    @property
    def theorem_delta(self) -> float:
        return math.exp(self.theorem_log_delta)

    # -- what checks inspect --
    def projections(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`p_k = w^\top x_k`, shape ``(B, n)``."""
        return x.to(self.w) @ self.w

    def boltzmann_values(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`b_q = \mathrm{boltz}_{\rho s_q}(p)`, shape ``(B, n)``: the scalar the head adds
        (times ``out_scale`` :math:`u`) to token :math:`q`."""
        p = self.projections(x)
        return boltzmann(p[:, None, :].expand(-1, p.shape[1], -1), self.rho * p, dim=-1)

    def pattern(self, x: torch.Tensor) -> torch.Tensor:
        """Attention pattern ``(B, n, n)``; rows are queries."""
        return self.attention.pattern(x.to(self.w))[:, 0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _validate.real_tensor("x", x, ndim=3).to(self.w)
        return x + self.attention(x)

    def extra_repr(self) -> str:
        return (f"seq_len={self.seq_len}, rho={self.rho:.4g}, c_w={self.c_w:.3g}, "
                f"r={self.r:.4g}, log10_delta={self.log_delta / math.log(10):.4g}, "
                f"log10_theorem_delta={self.theorem_log_delta / math.log(10):.4g}")


def _vocabulary(vocabulary: object) -> torch.Tensor:
    vocabulary = _validate.real_tensor("vocabulary", vocabulary, ndim=2).to(torch.float64)
    if vocabulary.shape[0] < 1 or vocabulary.shape[1] < 1:
        raise ValueError(f"vocabulary must be a non-empty (V, d) matrix, got shape "
                         f"{tuple(vocabulary.shape)}")
    norms = vocabulary.norm(dim=-1)
    if bool((norms == 0).any()):
        row = int((norms == 0).nonzero()[0])
        raise ValueError(f"vocabulary is not tokenwise separated: row {row} is the zero vector "
                         f"(r_min must be > 0)")
    if len(vocabulary) > 1:
        distances = _distances(vocabulary)
        if float(distances.min()) == 0:
            i, j = (int(k) for k in (distances == 0).nonzero()[0])
            raise ValueError(f"vocabulary is not tokenwise separated: rows {i} and {j} are equal "
                             f"(eps must be > 0)")
    return vocabulary


def contextual_mapping(vocabulary, seq_len: int, *, w=None, u=None, rho: float | None = None,
                       trials: int = 512, seed: int = 0, dtype: torch.dtype = torch.float64,
                       device=None) -> ContextualMapping:
    r"""The rank-1 single-head attention layer of Theorem 2 for tokens from ``vocabulary``.

    ``vocabulary`` is ``(V, d)``, its rows the tokens; they must be tokenwise separated (no
    zero row, no two equal rows). Inputs are sequences of ``seq_len`` *distinct* tokens.

    ``w`` (the projection direction) defaults to the best of ``trials`` seeded random unit
    vectors; it must reach the projection lemma's constant. ``u`` (the output direction)
    defaults to ``w``. ``rho`` defaults to :math:`(2\ln n + 3)/(c_w^2\varepsilon r_{\min})`, the
    smallest value for which Lemma 1 applies (module docstring); passing ``rho`` or ``w``
    explicitly skips those guarantees, which the checks then test.
    """
    vocabulary = _vocabulary(vocabulary)
    V, d = vocabulary.shape
    seq_len = _validate.positive_int("seq_len", seq_len, minimum=2)
    if seq_len > V:
        raise ValueError(f"seq_len must be <= the vocabulary size {V} (tokens in a sequence are "
                         f"distinct), got {seq_len}")
    trials = _validate.positive_int("trials", trials)
    seed = _validate.seed("seed", seed)
    if w is None:
        w, c_w = best_direction(vocabulary, trials=trials, seed=seed)
        if c_w < theorem_projection_constant(V, d):
            raise ValueError(f"no direction among {trials} trials reaches the projection "
                             f"constant {theorem_projection_constant(V, d):.3g}; raise trials")
    else:
        w = _unit_vector("w", w, d)
        c_w = projection_constant(vocabulary, w)
    u = w if u is None else _unit_vector("u", u, d)
    if rho is None:
        if c_w == 0:
            raise ValueError("w does not separate the vocabulary (two tokens, or a token and 0, "
                             "have the same projection); pass another w")
        _, _, eps = separation(vocabulary)
        r_min = float(vocabulary.norm(dim=-1).min())
        rho = (2 * math.log(seq_len) + 3) / (c_w**2 * eps * r_min)
    else:
        rho = _validate.positive_float("rho", rho)
    return ContextualMapping(vocabulary, seq_len, w, u, rho, c_w, dtype=dtype, device=device)


# --- memorization ---------------------------------------------------------------------------


def context_id_error_bound(x: torch.Tensor, w: torch.Tensor, rho: float,
                           out_scale: float) -> torch.Tensor:
    r"""First-order bound on the rounding error of the context id
    :math:`z = w^\top(x_q + \mathrm{Attn}(x)_q)` of a :func:`rank_one_head` with unit ``w``
    and ``u = w``, per token, ``(B, n)``.

    With :math:`R = \max_k |x_k|^\top|w|` (per sequence), scores are :math:`d`-term products
    scaled by :math:`\rho`, so their error is :math:`\Delta\le\gamma_{2d+2}\rho R^2`; the
    softmax Jacobian (:math:`\lVert Jv\rVert_1\le 2\lVert v\rVert_\infty`) turns it into a
    value error :math:`\le 2\Delta R`, and the weighted sum adds :math:`\gamma_{n+d+4}R`. The
    residual and the final projection add :math:`\gamma_{d+2}` relative to :math:`|y|^\top|w|`.
    """
    x = _validate.nonempty("x", _validate.real_tensor("x", x, ndim=3))
    n, d = x.shape[1], x.shape[2]
    w = _direction("w", w, d, "x").to(x.dtype)
    _validate.finite_float("rho", rho)
    _validate.finite_float("out_scale", out_scale)
    unit = torch.finfo(x.dtype).eps / 2

    def gamma(k: int) -> float:
        return k * unit / (1 - k * unit)

    projected = x.abs() @ w.abs()
    R = projected.amax(dim=-1, keepdim=True)
    rho, scale = abs(rho), abs(out_scale)
    value_error = 2 * gamma(2 * d + 2) * rho * R**3 + gamma(n + d + 4) * R
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


# --- universal approximation: FFN_2 o SA o FFN_1 -------------------------------------------------


def quantizer(grid: int, d: int, *, ramp: float | None = None, dtype: torch.dtype = torch.float64,
              device=None) -> MLP:
    r"""FFN\ :sub:`1`: a ReLU staircase sending each coordinate of :math:`x\in[0,1]^d` to the
    centre :math:`(\lfloor gx\rfloor + \tfrac12)/g` of its grid cell.

    Per coordinate and interior boundary :math:`j/g` two units form
    :math:`\mathrm{clamp}((x - j/g)/\eta + \tfrac12, 0, 1)`; the output is
    :math:`\tfrac1{2g} + \tfrac1g\sum_j\mathrm{clamp}_j`. It is exact except within
    :math:`\eta/2` of a boundary, a set of measure at most :math:`(g - 1)\eta` per coordinate;
    a continuous network cannot do better, which is why the approximation theorem is stated in
    :math:`L^p` and not in the sup norm. ``ramp`` (:math:`\eta`) defaults to :math:`1/(16g^2)`,
    so that the inexact set has measure below :math:`1/(16g)` per coordinate.
    """
    grid = _validate.positive_int("grid", grid)
    d = _validate.positive_int("d", d)
    eta = 1.0 / (16 * grid**2) if ramp is None else _validate.positive_float("ramp", ramp)
    if eta >= 1.0 / grid:
        raise ValueError(f"ramp must be < 1/grid = {1 / grid:.4g} so that ramps do not overlap, "
                         f"got {eta}")
    boundaries = torch.arange(1, grid, dtype=torch.float64) / grid
    units = 2 * len(boundaries)
    hidden = max(units * d, 1)
    W_in = torch.zeros(d, hidden, dtype=torch.float64)
    b_in = torch.zeros(hidden, dtype=torch.float64)
    W_out = torch.zeros(hidden, d, dtype=torch.float64)
    for c in range(d):
        block = slice(c * units, (c + 1) * units)
        W_in[c, block] = 1.0 / eta
        b_in[block] = torch.stack([-boundaries / eta + 0.5,
                                   -boundaries / eta - 0.5], dim=1).reshape(-1)
        W_out[block, c] = torch.tensor([1.0 / grid, -1.0 / grid],
                                       dtype=torch.float64).repeat(len(boundaries))
    b_out = torch.full((d,), 0.5 / grid, dtype=torch.float64)
    return MLP(*(t.to(**resolve(dtype, device)) for t in (W_in, b_in, W_out, b_out)))


class EquivariantApproximator(nn.Module):
    r"""FFN\ :sub:`2` :math:`\circ` SA :math:`\circ` FFN\ :sub:`1`: :func:`quantizer`, then a
    :class:`MemorizingTransformer` fitted to the target on every multiset of grid-cell centres.

    ``forward(x)`` maps ``(B, n, d)`` with entries in :math:`[0, 1]` to ``(B, n)``.
    ``inexact(x)`` marks the inputs with a coordinate within :math:`\eta/2` of an interior
    cell boundary, where FFN\ :sub:`1` ramps and no error bound beyond the label range holds.
    """

    def __init__(self, quantize: MLP, memorizer: MemorizingTransformer, grid: int,
                 ramp: float) -> None:
        super().__init__()
        self.quantize = quantize
        self.memorizer = memorizer
        self.grid = grid
        self.ramp = ramp

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        """The TransformerLens layout of ``FFN_2(SA(FFN_1(x)))``: block 1 has no attention
        and the quantiser FFN writing ``FFN_1(x)`` into fresh coordinates; block 2 is the
        memorizer on those coordinates."""
        d = self.memorizer.d_model
        D = 2 * d + 1
        quantize = mlp_block(name, self.quantize, D, slice(0, d), slice(d, 2 * d))
        block, out, _ = self.memorizer.residual_blocks(name, offset=d, width=D)
        W = self.memorizer.w
        W_U = placed(torch.ones(1, 1, dtype=W.dtype, device=W.device), (D, 1), out)
        W_pos = W.new_zeros(context_length(name, n_ctx, self.memorizer.seq_len), D)
        return ResidualLayout(name, D, W.new_zeros(1, D), W_pos, W_U, ((None, quantize), block),
                              Interface("residual", width=D, scalar=True, dtype=W.dtype))

    def inexact(self, x: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: some coordinate lies within ``ramp / 2`` of an interior boundary."""
        scaled = x * self.grid
        nearest = scaled.round().clamp(1, self.grid - 1)
        near = (scaled - nearest).abs() <= self.grid * self.ramp / 2
        return near.flatten(1).any(dim=1) if self.grid > 1 else torch.zeros(
            len(x), dtype=torch.bool, device=x.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _validate.real_tensor("x", x, ndim=3).to(self.memorizer.w)
        return self.memorizer(self.quantize(x))


def _grid_multisets(grid: int, d: int, seq_len: int) -> torch.Tensor:
    """Every multiset of ``seq_len`` grid-cell centres in ``[0, 1]^d``, one sorted sequence each."""
    centres = (torch.arange(grid, dtype=torch.float64) + 0.5) / grid
    tokens = torch.cartesian_prod(*([centres] * d)).reshape(-1, d)
    index = torch.combinations(torch.arange(len(tokens)), seq_len, with_replacement=True)
    return tokens[index.reshape(-1, seq_len)]


def equivariant_approximator(f: Callable[[torch.Tensor], torch.Tensor], seq_len: int, d: int,
                             grid: int, *, ramp: float | None = None,
                             max_sequences: int = 20_000, dtype: torch.dtype = torch.float64,
                             device=None) -> EquivariantApproximator:
    r"""Approximate a permutation-equivariant :math:`f:[0,1]^{n\times d}\to\mathbb R^n` in
    :math:`L^p` by FFN\ :sub:`2` :math:`\circ` SA :math:`\circ` FFN\ :sub:`1` (Kajitsuka & Sato,
    Theorem 4 as summarised in the abstract).

    ``f`` maps ``(B, n, d)`` to ``(B, n)``. FFN\ :sub:`1` quantises to ``grid`` cells per
    coordinate; the attention layer and FFN\ :sub:`2` memorize :math:`f` at the cell centres of
    every multiset (duplicates allowed: cells repeat). Off the ramp set the error is at most
    :math:`\omega_f(1/(2g))`, the modulus of continuity in the sup norm over entries; on it the
    output stays within the range of the memorized values.
    """
    if not callable(f):
        raise TypeError(f"f must be callable, got {type(f).__name__}")
    seq_len = _validate.positive_int("seq_len", seq_len)
    d = _validate.positive_int("d", d)
    grid = _validate.positive_int("grid", grid)
    count = math.comb(grid**d + seq_len - 1, seq_len)
    if count > _validate.positive_int("max_sequences", max_sequences):
        raise ValueError(f"grid={grid} gives {count} multisets of grid cells, more than "
                         f"max_sequences={max_sequences}")
    quantize = quantizer(grid, d, ramp=ramp)
    eta = 1.0 / (16 * grid**2) if ramp is None else float(ramp)
    sequences = _grid_multisets(grid, d, seq_len)
    values = f(sequences)
    if not isinstance(values, torch.Tensor) or tuple(values.shape) != (len(sequences), seq_len):
        raise ValueError(f"f must map a (B, {seq_len}, {d}) tensor to shape (B, {seq_len}), got "
                         f"{getattr(values, 'shape', type(values).__name__)}")
    memorizer = memorizing_transformer(sequences, values.detach().to(torch.float64),
                                       allow_duplicates=True)
    kw = resolve(dtype, device)
    return EquivariantApproximator(quantize.to(**kw), memorizer.to(**kw), grid, eta)


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
