r"""Theorem 2's contextual mapping: one attention layer whose outputs are context ids.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions.boltzmann.operator import (
    best_direction,
    boltzmann,
    checked_unit_vector,
    pairwise_distances,
    projection_constant,
    rank_one_head,
    separation,
    theorem_projection_constant,
)
from constructions.layers import resolve
from constructions.residual_layout import (
    Interface,
    ResidualLayout,
    attention_block,
    context_length,
)

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
        distances = pairwise_distances(vocabulary)
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
        w = checked_unit_vector("w", w, d)
        c_w = projection_constant(vocabulary, w)
    u = w if u is None else checked_unit_vector("u", u, d)
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


