r"""Confidence intervals for verdicts that rest on sampled trials or trained seeds.

A check whose verdict compares a sampled quantity :math:`\theta` (a median ratio, a mean
saving, a success probability) with a threshold :math:`\tau` computes an interval
:math:`[L, U]` that covers :math:`\theta` with probability at least the stated level, and
:func:`theorems.evidence.decide` reads the verdict off it: :math:`\theta > \tau` when
:math:`L > \tau`, :math:`\theta < \tau` when :math:`U < \tau`, and *inconclusive* when
:math:`\tau\in[L, U]`. A point estimate never decides.

Randomness is explicit: every random stream is a ``numpy.random.SeedSequence`` spawned from
one root seed (:func:`streams`), so the data, the weights and the noise of a trial are
independent streams and not one generator reused, and :func:`torch_seed` turns a stream into
the integer seed a ``torch.Generator`` takes. The bootstrap takes its ``numpy.random.Generator``
as an argument, so two runs give the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "bootstrap", "clopper_pearson", "median_interval", "streams",
           "torch_seed"]


@dataclass(frozen=True)
class Interval:
    """An interval ``[low, high]`` for a quantity estimated by ``estimate`` from ``trials``
    samples, covering it with probability at least ``level`` under ``method``."""

    estimate: float
    low: float
    high: float
    level: float
    trials: int
    method: str

    def __post_init__(self) -> None:
        if not self.low <= self.high:  # also rejects NaN
            raise ValueError(f"low must be <= high, got [{self.low}, {self.high}]")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level}")

    def side(self, threshold: float) -> str | None:
        """``"above"`` if the whole interval exceeds ``threshold``, ``"below"`` if it lies
        under it, ``None`` if the closed interval contains it (undecided)."""
        if self.low > threshold:
            return "above"
        if self.high < threshold:
            return "below"
        return None


def _level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    return float(level)


def streams(seed: int, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent random streams derived from ``seed``:
    ``SeedSequence(seed).spawn(n)``. Children of one sequence have distinct spawn keys, so
    their states are (with overwhelming probability) unrelated, unlike ``seed + i``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return np.random.SeedSequence(seed).spawn(n)


def torch_seed(stream: np.random.SeedSequence) -> int:
    """A 63-bit integer seed for ``torch.Generator().manual_seed`` drawn from ``stream``."""
    if not isinstance(stream, np.random.SeedSequence):
        raise TypeError(f"stream must be a numpy SeedSequence, got {type(stream).__name__}")
    return int(stream.generate_state(1, np.uint64)[0] >> np.uint64(1))


def bootstrap(statistic: Callable[..., np.ndarray], *samples, rng: np.random.Generator,
              resamples: int = 4000, level: float = 0.95) -> Interval:
    r"""Percentile bootstrap interval for ``statistic(*samples)``.

    The ``samples`` are arrays of equal length :math:`n` along their first axis, *paired*
    row by row (row :math:`i` of each is one trial). Each of the :math:`B` = ``resamples``
    replicates draws :math:`n` row indices uniformly with replacement (the same indices for
    every sample, which keeps the pairing) from ``rng``, and evaluates the statistic;
    :math:`[L, U]` are the :math:`\alpha/2` and :math:`1-\alpha/2` empirical quantiles of the
    :math:`B` values, :math:`\alpha = 1 -` ``level`` (Efron's percentile interval: its
    coverage is asymptotic, correct to first order for a smooth statistic such as a sample
    median of a continuous distribution). ``statistic`` must reduce the last axis: it maps
    arrays of shape ``(..., n)`` to shape ``(...)``, so that all replicates are computed at
    once (``lambda a, b: np.log(np.median(a, -1) / np.median(b, -1))``).
    """
    level = _level(level)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"resamples must be an int >= 100, got {resamples!r}")
    if not samples:
        raise ValueError("samples must name at least one array")
    arrays = [np.asarray(s, dtype=np.float64) for s in samples]
    n = arrays[0].shape[0] if arrays[0].ndim else 0
    if n < 2 or any(a.ndim != 1 or a.shape[0] != n for a in arrays):
        raise ValueError("samples must be 1-d arrays of one common length >= 2, got shapes "
                         f"{[a.shape for a in arrays]}")
    estimate = float(statistic(*arrays))
    index = rng.integers(0, n, size=(resamples, n))
    replicates = np.asarray(statistic(*(a[index] for a in arrays)), dtype=np.float64)
    if replicates.shape != (resamples,):
        raise ValueError(f"statistic must reduce the last axis, got shape {replicates.shape}")
    alpha = 1 - level
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    return Interval(estimate, float(low), float(high), level, n,
                    f"percentile bootstrap, {resamples} paired resamples")


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> Interval:
    r"""Exact (Clopper–Pearson) interval for a success probability :math:`p` from
    ``successes`` :math:`k` out of ``trials`` :math:`n` independent Bernoulli trials:
    :math:`L` solves :math:`P(\mathrm{Bin}(n, L)\ge k) = \alpha/2` (0 when :math:`k = 0`) and
    :math:`U` solves :math:`P(\mathrm{Bin}(n, U)\le k) = \alpha/2` (1 when :math:`k = n`),
    :math:`\alpha = 1 -` ``level``; it covers :math:`p` with probability at least ``level``
    for every :math:`p` (scipy.stats.binomtest(...).proportion_ci(method="exact"))."""
    from scipy.stats import binomtest

    level = _level(level)
    for name, value in (("successes", successes), ("trials", trials)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got successes="
                         f"{successes}, trials={trials}")
    ci = binomtest(successes, trials).proportion_ci(confidence_level=level, method="exact")
    return Interval(successes / trials, float(ci.low), float(ci.high), level, trials,
                    "Clopper-Pearson exact binomial")


def median_interval(values, level: float = 0.95) -> Interval:
    r"""Distribution-free interval for the median :math:`m` of a continuous distribution from
    :math:`n` independent draws (the interval that inverts the sign test).

    With order statistics :math:`x_{(1)}\le\dots\le x_{(n)}`, the number of draws below
    :math:`m` is :math:`\mathrm{Bin}(n, 1/2)`, so :math:`P(x_{(k)}\le m\le x_{(n+1-k)}) =
    1 - 2P(\mathrm{Bin}(n, 1/2)\le k-1)`. The largest :math:`k\ge1` with that coverage at
    least ``level`` is taken. When even :math:`k = 1` falls short (:math:`1 - 2^{1-n} <`
    ``level``: :math:`n\le5` draws at 95%), no interval from the draws has the level, and
    :math:`(-\infty, \infty)` is returned: it decides nothing.
    """
    from scipy.stats import binom

    level = _level(level)
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    n = x.size
    if n < 1 or not np.all(np.isfinite(x)):
        raise ValueError(f"values must be a non-empty array of finite numbers, got {values!r}")
    estimate = float(np.median(x))
    method = "sign test (order statistics)"
    k = 0
    while k + 1 <= (n + 1) // 2 and 1 - 2 * binom.cdf(k, n, 0.5) >= level:
        k += 1  # coverage of [x_(k+1), x_(n-k)] is 1 - 2 F(k) >= level
    if k == 0:
        return Interval(estimate, -math.inf, math.inf, level, n, method)
    return Interval(estimate, float(x[k - 1]), float(x[n - k]), level, n, method)
