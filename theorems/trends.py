r"""Checks of published scaling studies (:mod:`empirics.scaling`): a trend's direction, decided
by an interval over seeds.

A claim "``quantity`` rises (falls) with ``axis``" is checked on the study's published
aggregate: for each seed, the least-squares slope of the quantity against :math:`\log_2`
size; over the seeds, Student's :math:`t` interval of the mean slope
(:func:`empirics.scaling.slope_fit`). The claim holds when the interval lies on its side of 0,
is refuted when it lies on the other, and is inconclusive when it contains 0
(:func:`theorems.evidence.decide`). The study's table of means and intervals per size, its
figure, the slope and, where the paper gives a level and the trend moves toward it, the
extrapolated size at which it would be reached, become evidence.
"""

from __future__ import annotations

from collections.abc import Callable

from theorems.evidence import decide, evidence
from theorems.intervals import Interval

DIRECTIONS = ("up", "down")


def published_study(study: str, config: str = "cpu") -> tuple[dict, bool]:
    """The published aggregate of ``study`` under ``config``, and whether it is stale."""
    from empirics.experiment import is_stale, published_result

    data = published_result(study, config)
    return data, is_stale(data)


def trend_check(study: str, quantity: str, direction: str, *, config: str = "cpu",
                load: Callable[[str, str], tuple[dict, bool]] = published_study) -> Callable:
    """A check that ``quantity`` of the published ``study`` moves in ``direction`` (``"up"``
    or ``"down"``) as the study's size grows; ``load`` reads the study (a mutant's hook)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")

    def run() -> None:
        from empirics.experiment.published import RESULTS_DIR
        from empirics.scaling import series, slope_fit, t_interval

        data, stale = load(study, config)
        evidence.metric("published result is stale", float(stale))
        settings = data["config"]
        if quantity not in settings["quantities"]:
            raise ValueError(f"study {study!r} does not measure {quantity!r}; it measures "
                             f"{settings['quantities']}")
        sizes, values = series(settings, data["per_seed"], quantity)
        level = settings["level"]
        threshold = settings["thresholds"].get(quantity)
        fit = slope_fit(sizes, values, level=level, threshold=threshold)
        rows = []
        for size, column in zip(sizes, values.T, strict=True):
            mean, low, high = t_interval(column, level)
            rows.append([float(size), *(round(float(v), 4) for v in column), round(mean, 4),
                         f"[{low:.4g}, {high:.4g}]"])
        seeds = [f"seed {s['seed']}" for s in data["per_seed"]]
        evidence.table(f"{quantity} against {settings['axis']} (published {config})",
                       [settings["axis"], *seeds, "mean", f"{level:.0%} t interval"], rows)
        figure = data.get("figures", {}).get(f"scaling-{quantity.replace('/', '-')}")
        if figure is not None and (RESULTS_DIR / study / figure).exists():
            evidence.figure(RESULTS_DIR / study / figure, f"{quantity} against size")
        evidence.cases(len(data["per_seed"]))
        # worse: a slope against the claim's direction; a crossing further out
        evidence.metric("slope per doubling", fit["mean"],
                        worse="lower" if direction == "up" else "higher")
        if fit["crossing"] is not None:
            evidence.metric("extrapolated size at the paper's level", fit["crossing"])
        interval = Interval(fit["mean"], fit["low"], fit["high"], level, fit["seeds"],
                            "Student t over seeds of each seed's least-squares slope on "
                            f"log2 {settings['axis']}")
        side = decide(f"slope of {quantity} per doubling of {settings['axis']}", interval,
                      threshold=0.0)
        expected = "above" if direction == "up" else "below"
        assert side == expected, (
            f"{quantity} moves {'up' if side == 'above' else 'down'} with {settings['axis']} "
            f"(slope {fit['mean']:.4g}, interval [{fit['low']:.4g}, {fit['high']:.4g}]), not "
            f"{direction}")
    return run


def sizes_reversed(study: str, config: str = "cpu") -> tuple[dict, bool]:
    """The published study with each seed's values of every quantity reversed in size order: a
    trend that went one way goes the other (the mutant of a trend claim, as ``load=``)."""
    import copy

    from empirics.scaling import size_key

    data, stale = published_study(study, config)
    data = copy.deepcopy(data)
    axis, sizes = data["config"]["axis"], data["config"]["sizes"]
    for seed in data["per_seed"]:
        metrics = seed["metrics"]
        for quantity in data["config"]["quantities"]:
            values = [metrics[size_key(quantity, axis, s)] for s in sizes]
            for size, value in zip(sizes, reversed(values), strict=True):
                metrics[size_key(quantity, axis, size)] = value
    return data, stale
