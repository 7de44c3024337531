r"""Delay copy (Nevermann & Gros 2026, arXiv:2609.11913): the C/S/R task, its oracle copier,
a fixed-offset copier, and the induction-head copier with its exact accuracy.

Task [V, the paper's Section 2; the segment layout is our formalisation, R]. Data tokens
:math:`0..N-1` and control tokens R = N, C = N + 1, S = N + 2. A sequence concatenates
segments:

* R: the token R, then :math:`\ell \sim \mathrm{Binomial}(\ell_{\max}, \mu/\ell_{\max})`
  random data tokens (not predicted);
* C (delay copy): :math:`m` random source tokens :math:`s_1..s_m`, the first C at
  :math:`c_1`, a gap of :math:`d_C - 1` positions holding only R-task tokens (the token R,
  then :math:`g = d_C - 2` random data tokens), the second C at :math:`c_2 = c_1 + d_C`, and
  the pasted copy :math:`s_1..s_m`, with :math:`d_C` uniform in the training range;
* S (selective delay copy): the same with S tokens, pasting only the even source tokens in
  their order.

Copy segments alternate with R segments; the first ``skip`` positions are never targets
(the paper masks the first 18). The mask marks the positions whose *next* token is pasted:
everything else (R and random tokens, control tokens) is unpredictable and unscored.

DG.2 [D]: paste step :math:`k` predicts at :math:`c_2 + k - 1` the token at
:math:`c_1 - m + k - 1`, so the offset :math:`d_C + m` is the same for every :math:`k`: a
head that attends by relative position alone copies at exactly one distance.

DG.3 [D]: the induction copier at a paste step :math:`k \ge 2` (teacher forced) attends to the
most recent earlier occurrence of its current token :math:`s_{k-1}` and outputs that
occurrence's successor. With i.i.d. uniform data tokens, :math:`p = 1/N`, :math:`q = 1 - p`
and :math:`n = m - 1 + g` data tokens between the source and the query, it is right with
probability :func:`induction_accuracy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import torch

from constructions import _validate as check
from constructions._roles import oracle


@oracle
@dataclass(frozen=True)
class DelayCopyTask:
    """The C/S/R generator: ``n_data`` N, copy length ``copy_len`` m, ``distances`` (lo, hi)
    for d_C (inclusive), ``length`` T, copy ``kinds`` among "C" and "S"."""

    n_data: int = 128
    copy_len: int = 10
    distances: tuple[int, int] = (15, 25)
    length: int = 256
    kinds: tuple[str, ...] = ("C",)
    max_duration: int = 9
    mean_duration: float = 6.0
    skip: int = 18

    def __post_init__(self) -> None:
        check.positive_int("n_data", self.n_data, minimum=2)
        check.positive_int("copy_len", self.copy_len)
        check.positive_int("length", self.length, minimum=2)
        check.positive_int("max_duration", self.max_duration)
        check.positive_int("skip", self.skip, minimum=0)
        if not 0 < self.mean_duration <= self.max_duration:
            raise ValueError(f"mean_duration must lie in (0, max_duration], got "
                             f"{self.mean_duration}")
        lo, hi = self.distances if isinstance(self.distances, (tuple, list)) else (None, None)
        if (not isinstance(lo, int) or not isinstance(hi, int) or isinstance(lo, bool)
                or lo < 1 or hi < lo):
            raise ValueError(f"distances must be (lo, hi) ints with 1 <= lo <= hi, got "
                             f"{self.distances!r}")
        object.__setattr__(self, "distances", (lo, hi))
        if not self.kinds or any(k not in ("C", "S") for k in self.kinds):
            raise ValueError(f"kinds must be a non-empty tuple of 'C' and 'S', got {self.kinds}")
        object.__setattr__(self, "kinds", tuple(self.kinds))

    @property
    def R(self) -> int:
        return self.n_data

    @property
    def C(self) -> int:
        return self.n_data + 1

    @property
    def S(self) -> int:
        return self.n_data + 2

    @property
    def vocab_size(self) -> int:
        return self.n_data + 3

    def sample(self, batch: int, generator: np.random.Generator, *,
               distance: int | None = None) -> DelayCopyBatch:
        """``batch`` sequences; ``distance`` fixes every d_C (evaluation at one distance)."""
        batch = check.positive_int("batch", batch)
        if distance is not None:
            check.positive_int("distance", distance)
        rows, pairs = [], []
        for _ in range(batch):
            tokens, row_pairs = self._row(generator, distance)
            rows.append(tokens)
            pairs.append(row_pairs)
        tokens = np.array(rows, dtype=np.int64)
        targets = np.full(tokens.shape, -1, dtype=np.int64)
        for b, row_pairs in enumerate(pairs):
            for pair in row_pairs:
                for position, token in pair.targets():
                    if self.skip <= position < self.length:
                        targets[b, position] = token
        return DelayCopyBatch(torch.from_numpy(tokens), torch.from_numpy(targets), pairs)

    def _row(self, generator: np.random.Generator, distance: int | None):
        out: list[int] = []
        pairs: list[CopyPair] = []
        p = self.mean_duration / self.max_duration
        while len(out) < self.length + 1:
            out += [self.R, *generator.integers(0, self.n_data,
                                                generator.binomial(self.max_duration, p))]
            kind = self.kinds[generator.integers(len(self.kinds))]
            d = distance if distance is not None else int(generator.integers(
                self.distances[0], self.distances[1] + 1))
            source = [int(x) for x in generator.integers(0, self.n_data, self.copy_len)]
            control = self.C if kind == "C" else self.S
            gap = ([self.R, *generator.integers(0, self.n_data, d - 2)] if d >= 2 else [])
            first = len(out) + self.copy_len
            pasted = source if kind == "C" else [x for x in source if x % 2 == 0]
            out += [*source, control, *gap, control, *pasted]
            pairs.append(CopyPair(kind, first, first + d, tuple(source), tuple(pasted)))
        return out[: self.length], [q for q in pairs if q.first < self.length]


@dataclass(frozen=True)
class CopyPair:
    """One copy segment: ``kind``, positions ``first`` = c_1 and ``second`` = c_2."""

    kind: str
    first: int
    second: int
    source: tuple[int, ...]
    pasted: tuple[int, ...]

    @property
    def distance(self) -> int:
        return self.second - self.first

    def targets(self) -> list[tuple[int, int]]:
        """(position predicting it, pasted token): step k is predicted at c_2 + k - 1."""
        return [(self.second + k, token) for k, token in enumerate(self.pasted)]


@dataclass
class DelayCopyBatch:
    """``tokens`` (B, T), ``targets`` (B, T) next pasted token or -1, and the pairs per row."""

    tokens: torch.Tensor
    targets: torch.Tensor
    pairs: list[list[CopyPair]] = field(default_factory=list)

    @property
    def mask(self) -> torch.Tensor:
        return self.targets >= 0


def _tokens(tokens, task: DelayCopyTask) -> np.ndarray:
    check.instance("task", task, DelayCopyTask)
    return check.token_tensor("tokens", tokens, vocab_size=task.vocab_size, ndim=2).numpy()


def oracle_copier(tokens: torch.Tensor, task: DelayCopyTask) -> torch.Tensor:
    """(B, T) predictions of the pasted tokens, found by content: control tokens of one kind
    pair up in order; after the second, paste the m tokens before the first (S: the even
    ones). -1 where nothing is pasted next."""
    x = _tokens(tokens, task)
    out = np.full(x.shape, -1, dtype=np.int64)
    m = task.copy_len
    for b, row in enumerate(x):
        open_at = {task.C: None, task.S: None}
        for i, token in enumerate(row):
            if token not in open_at:
                continue
            if open_at[token] is None:
                open_at[token] = i
                continue
            start = open_at[token]
            source = row[max(start - m, 0): start]
            pasted = source if token == task.C else source[source % 2 == 0]
            for k, value in enumerate(pasted):
                if i + k < len(row):
                    out[b, i + k] = value
            open_at[token] = None
    return torch.from_numpy(out)


def fixed_offset_copier(tokens: torch.Tensor, task: DelayCopyTask, distance: int) -> torch.Tensor:
    """Predict at position i the token at i - (distance + m): relative position only."""
    x = _tokens(tokens, task)
    offset = check.positive_int("distance", distance) + task.copy_len
    out = np.full(x.shape, -1, dtype=np.int64)
    out[:, offset:] = x[:, :-offset] if offset < x.shape[1] else out[:, offset:]
    return torch.from_numpy(out)


def induction_copier(tokens: torch.Tensor, task: DelayCopyTask) -> torch.Tensor:
    """Predict at position i the successor of the most recent j < i with x_j = x_i (data
    tokens only); -1 if there is none."""
    x = _tokens(tokens, task)
    out = np.full(x.shape, -1, dtype=np.int64)
    for b, row in enumerate(x):
        last: dict[int, int] = {}
        for i, token in enumerate(row):
            if token < task.n_data and token in last:
                out[b, i] = row[last[token] + 1]
            last[int(token)] = i
    return torch.from_numpy(out)


def induction_accuracy(n_data: int, copy_len: int, gap: int, *, exact: bool = True):
    r"""Mean accuracy of the induction copier over paste steps :math:`k = 2..m`.

    Between the source of :math:`s_{k-1}` and the query lie :math:`n = m - 1 + g` i.i.d. data
    tokens; ordered from the latest, the :math:`r`-th is the most recent occurrence with
    probability :math:`pq^r`. Its successor is then right with probability :math:`p`
    (an independent token equal to :math:`s_k`), except at three *bad* ranks whose successor
    cannot be :math:`s_k`: :math:`z_g` (the last gap token, followed by C; only if
    :math:`g \ge 1`) at :math:`r = k - 2`, :math:`s_m` (followed by C) at :math:`r = k - 2 + g`,
    and :math:`s_k` itself at :math:`r = n - 1`. So
    :math:`\mathrm{acc}_k = q^n + p(1 - q^n) - p^2\sum_{r \in B_k} q^r`, and the leading terms
    :math:`q^n + (1 - q^n)/N` are the catalogue's approximation. ``exact=True`` returns a
    :class:`~fractions.Fraction`.
    """
    n_data = check.positive_int("n_data", n_data, minimum=2)
    copy_len = check.positive_int("copy_len", copy_len, minimum=2)
    gap = check.positive_int("gap", gap, minimum=0)
    exact = check.boolean("exact", exact)
    p = Fraction(1, n_data) if exact else 1.0 / n_data
    q = 1 - p
    n = copy_len - 1 + gap
    total = 0
    for k in range(2, copy_len + 1):
        bad = {k - 2 + gap, n - 1} | ({k - 2} if gap >= 1 else set())
        total += q ** n + p * (1 - q ** n) - p * p * sum(q ** r for r in bad)
    return total / (copy_len - 1)


def approximate_induction_accuracy(n_data: int, copy_len: int, gap: int) -> float:
    """The catalogue's leading-order formula (1 - 1/N)^n + (1 - (1 - 1/N)^n)/N."""
    n_data = check.positive_int("n_data", n_data, minimum=2)
    copy_len = check.positive_int("copy_len", copy_len, minimum=2)
    gap = check.positive_int("gap", gap, minimum=0)
    q = 1 - 1 / n_data
    n = copy_len - 1 + gap
    return q ** n + (1 - q ** n) / n_data
