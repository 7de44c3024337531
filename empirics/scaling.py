r"""Scaling studies: one experiment's measured quantity at three or more sizes, over seeds.

Where a paper's trend does not appear at the size a CPU affords, a study runs the experiment
at sizes :math:`s_1 < \dots < s_m` of one knob (training steps, width, data), every size with
the same seed, and fits for each seed :math:`j` the least-squares line of the quantity
:math:`y` against :math:`x = \log_2 s`:

.. math:: \hat b_j = \frac{\sum_i (x_i - \bar x)(y_{ij} - \bar y_j)}{\sum_i (x_i - \bar x)^2}.

The sizes of one seed share that seed's data and initialisation, so they are not independent
draws; the seeds are (each experiment draws its streams from its seed). The slope's interval
is therefore taken over seeds: Student's :math:`t` interval
:math:`\bar b \pm t_{n-1,(1+\ell)/2}\, s_b/\sqrt n` from the :math:`n` per-seed slopes, exact
when those are normal and an approximation otherwise. The trend has a direction only when
that interval excludes 0.

Where a paper gives a level :math:`\tau` for :math:`y` and the interval puts the slope on the
side that moves toward it, the mean of the per-seed lines reaches :math:`\tau` at
:math:`\log_2 s^* = \bar x + (\tau - \bar y)/\bar b` (:math:`\bar y` the mean at
:math:`\bar x`), and the ends of the slope's interval give a range. This extrapolates a
log-linear fit: it says at what size the trend would reach the paper's level if it went on as
measured, not that it does.

A study is an :class:`~empirics.experiment.Experiment` of its own (published, fingerprinted and
resumed like any other), defined beside the experiment it studies::

    STUDY_CONFIGS = {"smoke": study_config("smoke", "steps", [50, 100, 200], ...), ...}
    def run_scaling(config, device, seed):
        return run_study(SPATIAL_INDUCTION, "spatial-induction-scaling", config, device, seed)
    SCALING = Experiment(name="spatial-induction-scaling", configs=STUDY_CONFIGS,
                         run=run_scaling, summarize=summarize_study, code=("empirics.scaling",
                         ...), ...)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot

TABLE = "scaling"  # the per-seed table: one row per size


def study_config(base: str, axis: str, sizes: Sequence[float], quantities: Sequence[str], *,
                 knobs: Mapping[str, Sequence[Any]] | None = None,
                 overrides: Mapping[str, Any] | None = None,
                 thresholds: Mapping[str, float] | None = None,
                 level: float = 0.95) -> dict[str, Any]:
    """A study's config: run the studied experiment's config ``base`` with ``overrides`` at
    each size, setting each knob to its value for that size (``knobs`` defaults to ``{axis:
    sizes}``), and read ``quantities``; ``thresholds`` holds the paper's level of a quantity,
    where it gives one."""
    sizes = [float(s) if isinstance(s, float) else int(s) for s in sizes]
    if len(sizes) < 3 or any(not s > 0 for s in sizes) or sorted(set(sizes)) != sizes:
        raise ValueError(f"sizes must be at least 3 increasing positive numbers, got {sizes}")
    knobs = {axis: sizes} if knobs is None else {k: list(v) for k, v in knobs.items()}
    for name, values in knobs.items():
        if len(values) != len(sizes):
            raise ValueError(f"knobs[{name!r}] has {len(values)} values for {len(sizes)} sizes")
    if not quantities:
        raise ValueError("quantities is empty: a study measures at least one quantity")
    thresholds = dict(thresholds or {})
    if unknown := set(thresholds) - set(quantities):
        raise ValueError(f"thresholds names quantities the study does not read: {unknown}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    return {"base": base, "overrides": dict(overrides or {}), "axis": axis, "sizes": sizes,
            "knobs": knobs, "quantities": list(quantities), "thresholds": thresholds,
            "level": level}


def size_key(quantity: str, axis: str, size: float) -> str:
    """The metric key of ``quantity`` at one size: ``<quantity>/<axis>=<size>``."""
    return metric_key(quantity, (axis, size))


def run_study(experiment: Experiment, name: str, config: Mapping[str, Any],
              device: torch.device, seed: int) -> Result:
    """One seed of a study: ``experiment`` at every size of ``config`` (a
    :func:`study_config`), each with ``seed``; the metrics are each quantity at each size
    (:func:`size_key`), and the table ``scaling`` has one row per size."""
    result = Result(experiment=name, config=dict(config), seed=seed, device=str(device))
    axis, quantities = config["axis"], config["quantities"]
    rows = []
    for i, size in enumerate(config["sizes"]):
        knobs = {knob: values[i] for knob, values in config["knobs"].items()}
        inner = experiment(config["base"], device=device, seed=seed,
                           **{**config["overrides"], **knobs})
        values = [inner.metric(q) for q in quantities]
        for quantity, value in zip(quantities, values, strict=True):
            result.metrics[size_key(quantity, axis, size)] = float(value)
        rows.append([size, *values, round(inner.record["wall_time"], 2)])
    result.table(TABLE, [axis, *quantities, "wall s"], rows)
    return result


def series(config: Mapping[str, Any], per_seed: Sequence[Mapping[str, Any]],
           quantity: str) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, values): ``values[j, i]`` is ``quantity`` at size ``i`` in seed ``j``'s metrics
    (``per_seed``: dicts with a ``metrics`` key, as an aggregate's ``per_seed`` holds)."""
    sizes = np.asarray(config["sizes"], dtype=np.float64)
    values = [[seed["metrics"][size_key(quantity, config["axis"], s)] for s in config["sizes"]]
              for seed in per_seed]
    return sizes, np.asarray(values, dtype=np.float64)


def t_interval(values: Sequence[float], level: float) -> tuple[float, float, float]:
    r"""(mean, low, high): Student's :math:`t` interval :math:`\bar v \pm t_{n-1,(1+\ell)/2}
    s/\sqrt n` of level ``level``; :math:`(-\infty, \infty)` for one value (no spread)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"values must be a non-empty array of finite numbers, got {values!r}")
    mean = float(v.mean())
    if v.size == 1:
        return mean, -math.inf, math.inf
    half = float(t.ppf((1 + level) / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


def slope_fit(sizes: Sequence[float], values: np.ndarray, *, level: float = 0.95,
              threshold: float | None = None) -> dict[str, Any]:
    r"""The trend of ``values`` (seeds × sizes) against :math:`\log_2` size (module docstring).

    Returns ``slopes`` (per seed, per doubling of the size), the slope's ``mean``, ``low`` and
    ``high`` (:func:`t_interval`), ``direction`` (``"up"``, ``"down"`` or None when the
    interval contains 0), the mean line's ``intercept`` (at :math:`\log_2 s = 0`), and, with a
    ``threshold`` the trend moves toward, ``crossing`` (the size :math:`s^*`) and
    ``crossing_range`` (from the interval's ends); ``crossing`` is None otherwise, and
    ``toward`` says whether the trend moves toward the threshold."""
    x = np.log2(np.asarray(sizes, dtype=np.float64))
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 2 or y.shape[1] != x.size or x.size < 2:
        raise ValueError(f"values must be seeds x {x.size} sizes, got shape {y.shape}")
    dx = x - x.mean()
    slopes = (y - y.mean(axis=1, keepdims=True)) @ dx / float(dx @ dx)
    mean, low, high = t_interval(slopes, level)
    direction = "up" if low > 0 else "down" if high < 0 else None
    y_bar = float(y.mean())
    fit = {"slopes": [float(s) for s in slopes], "mean": mean, "low": low, "high": high,
           "level": level, "seeds": int(y.shape[0]), "direction": direction,
           "intercept": y_bar - mean * float(x.mean()), "threshold": threshold,
           "toward": None, "crossing": None, "crossing_range": None}
    if threshold is None or direction is None:
        return fit
    gap = threshold - y_bar
    fit["toward"] = gap == 0 or (gap > 0) == (direction == "up")
    if fit["toward"]:
        ends = sorted(float(x.mean() + gap / b) for b in (low, high))
        fit["crossing"] = float(2 ** (x.mean() + gap / mean))
        fit["crossing_range"] = [float(2 ** e) for e in ends]
    return fit


def summarize_study(per_seed: list[dict]) -> dict[str, Any]:
    """One figure per quantity: each seed's values against size (log scale), the mean with its
    :func:`t_interval` at each size, the mean fitted line, and the paper's level, if any."""
    plt = pyplot()
    config = per_seed[0]["config"]
    figures = {}
    for quantity in config["quantities"]:
        sizes, values = series(config, per_seed, quantity)
        threshold = config["thresholds"].get(quantity)
        fit = slope_fit(sizes, values, level=config["level"], threshold=threshold)
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for seed, row in zip(per_seed, values, strict=True):
            ax.plot(sizes, row, color="0.6", lw=0.8, marker=".", label=f"seed {seed['seed']}")
        intervals = [t_interval(column, config["level"]) for column in values.T]
        means = [m for m, _, _ in intervals]
        spans = [[m - lo for m, lo, _ in intervals], [hi - m for m, _, hi in intervals]]
        if len(per_seed) > 1:
            ax.errorbar(sizes, means, yerr=spans, color="black", marker="s", capsize=4,
                        label=f"mean, {config['level']:.0%} t interval")
        line = np.array([sizes[0], sizes[-1]])
        ax.plot(line, fit["intercept"] + fit["mean"] * np.log2(line), color="C0", ls="--",
                label=f"slope {fit['mean']:.3g} [{fit['low']:.3g}, {fit['high']:.3g}] "
                      f"per doubling")
        if threshold is not None:
            ax.axhline(threshold, color="C3", ls=":", label=f"paper's level {threshold:g}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(config["axis"])
        ax.set_ylabel(quantity)
        crossing = ("" if fit["crossing"] is None else
                    f"; reaches it near {config['axis']} ≈ {fit['crossing']:.3g} if extended")
        ax.set_title(f"{quantity} against {config['axis']} ({len(per_seed)} seeds){crossing}",
                     fontsize=8)
        ax.legend(fontsize=7)
        fig.tight_layout()
        figures[f"scaling-{quantity.replace('/', '-')}"] = fig
    return figures
