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


def trend_refutation(study: str, quantity: str, direction: str, *, config: str = "cpu",
                     load: Callable[[str, str], tuple[dict, bool]] = published_study
                     ) -> Callable[[], None]:
    """A refutation of a trend claim: its :func:`trend_check` in the claim's ``direction``
    fails, which it does only when the slope's interval lies on the other side of 0 (an
    undecided interval ends it inconclusive instead); that failure is the counterexample, and
    the check in the other direction records the study's table, figure and interval."""
    from theorems.evidence import expect_failure

    stated = trend_check(study, quantity, direction, config=config, load=load)
    other = trend_check(study, quantity, "down" if direction == "up" else "up", config=config,
                        load=load)

    def run() -> None:
        evidence.counterexample(expect_failure(stated))
        other()
    return run


def sizes_reversed(study: str, config: str = "cpu", *,
                   falling: str | None = None) -> tuple[dict, bool]:
    r"""The published study with each seed's values of every quantity reversed in size order: a
    trend that went one way goes the other (the mutant of a trend claim, as ``load=``).

    For the quantity ``falling`` each seed's values also fall by the width :math:`w` of the
    published slope interval per doubling, so the reversed interval :math:`[-h, -\ell]` moves
    to :math:`[-h - w, -h]`, below 0 whenever the published one reaches above 0: the mutant of
    a claim whose published study is undecided, where reversal alone stays undecided."""
    import copy

    import numpy as np

    from empirics.scaling import series, size_key, slope_fit

    data, stale = published_study(study, config)
    data = copy.deepcopy(data)
    settings = data["config"]
    axis, sizes = settings["axis"], settings["sizes"]
    doublings = np.log2(np.asarray(sizes, dtype=np.float64) / sizes[0])
    for quantity in settings["quantities"]:
        fall = 0.0
        if quantity == falling:
            fit = slope_fit(*series(settings, data["per_seed"], quantity),
                            level=settings["level"])
            fall = fit["high"] - fit["low"]
        for seed in data["per_seed"]:
            keys = [size_key(quantity, axis, s) for s in sizes]
            values = [seed["metrics"][key] for key in keys]
            seed["metrics"].update({key: value - fall * float(x) for key, value, x in
                                    zip(keys, reversed(values), doublings, strict=True)})
    return data, stale
