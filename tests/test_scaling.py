"""Scaling studies (empirics.scaling) and the trend checks that read them (theorems.trends):
the slope's interval, the crossing, a study's run on a fake experiment, and the verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from empirics.experiment import EXPERIMENTS, Experiment, Result
from empirics.scaling import run_study, slope_fit, study_config, summarize_study, t_interval
from tests.killed import failed_assertion
from theorems.trends import trend_check

SIZES = [100, 200, 400, 800]


def lines(slopes, intercept=0.1):
    """seeds x sizes values lying exactly on intercept + slope * log2(size / 100)."""
    x = np.log2(np.asarray(SIZES) / 100)
    return np.array([intercept + b * x for b in slopes])


def test_the_slope_interval_is_students_t_over_seeds():
    fit = slope_fit(SIZES, lines([0.1, 0.2, 0.3]))
    assert fit["slopes"] == pytest.approx([0.1, 0.2, 0.3], abs=1e-12)
    # mean 0.2, s = 0.1, n = 3: half-width t_{2, 0.975} * 0.1 / sqrt 3 = 4.302653 * 0.057735
    assert fit["mean"] == pytest.approx(0.2, abs=1e-12)
    assert fit["high"] - fit["mean"] == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-6)
    assert fit["direction"] is None  # 0.2 +- 0.248 holds 0
    assert slope_fit(SIZES, lines([0.18, 0.2, 0.22]))["direction"] == "up"
    assert slope_fit(SIZES, lines([-0.18, -0.2, -0.22]))["direction"] == "down"
    assert slope_fit(SIZES, lines([-0.1, 0.1, 0.2]))["direction"] is None


def test_the_crossing_is_where_the_mean_line_reaches_the_threshold():
    # y = 0.1 + 0.2 log2(s / 100) reaches 0.9 at log2(s / 100) = 4: s = 1600
    fit = slope_fit(SIZES, lines([0.19, 0.2, 0.21]), threshold=0.9)
    assert fit["toward"] and fit["crossing"] == pytest.approx(1600, rel=1e-9)
    low, high = fit["crossing_range"]
    assert low < 1600 < high
    away = slope_fit(SIZES, lines([0.19, 0.2, 0.21]), threshold=-1.0)
    assert away["toward"] is False and away["crossing"] is None
    assert slope_fit(SIZES, lines([-0.1, 0.1, 0.2]), threshold=0.9)["crossing"] is None


def test_one_seed_decides_nothing():
    assert t_interval([0.3], 0.95) == (0.3, -math.inf, math.inf)
    assert slope_fit(SIZES, lines([0.3]))["direction"] is None


def test_bad_study_configs_are_named():
    with pytest.raises(ValueError, match="sizes"):
        study_config("smoke", "steps", [100, 200], ["q"])
    with pytest.raises(ValueError, match="sizes"):
        study_config("smoke", "steps", [200, 100, 400], ["q"])
    with pytest.raises(ValueError, match=r"knobs\['lr'\]"):
        study_config("smoke", "steps", SIZES, ["q"], knobs={"steps": SIZES, "lr": [1, 2]})
    with pytest.raises(ValueError, match="thresholds"):
        study_config("smoke", "steps", SIZES, ["q"], thresholds={"r": 0.5})
    with pytest.raises(ValueError, match="quantities"):
        study_config("smoke", "steps", SIZES, [])
    with pytest.raises(ValueError, match="values"):
        t_interval([], 0.95)


def _fake_run(config: dict, device: torch.device, seed: int) -> Result:
    """A quantity 0.1 * seed + 0.05 log2(steps), an exact line in log2 size per seed."""
    result = Result(experiment="scaling-test-fake", config=config, seed=seed, device=str(device))
    result.metrics["accuracy"] = 0.1 * seed + 0.05 * math.log2(config["steps"]) * config["gain"]
    return result


@pytest.fixture(scope="module")
def fake():
    """The fake experiment, registered for this module only (the registry is global)."""
    experiment = Experiment(name="scaling-test-fake", description="a line in log2 steps",
                      configs={"smoke": {"steps": 1, "gain": 1.0},
                               "full": {"steps": 1, "gain": 1.0}}, run=_fake_run)
    yield experiment
    EXPERIMENTS.pop(experiment.name, None)


def study(fake, per_seed_gain=(1.0, 1.0, 1.0), threshold=0.9):
    """A fake study's published aggregate (seeds 0-2), as the trend check reads it."""
    config = study_config("smoke", "steps", SIZES, ["accuracy"],
                          thresholds={"accuracy": threshold})
    per_seed = []
    for seed, gain in enumerate(per_seed_gain):
        result = run_study(fake, "fake-scaling", {**config, "overrides": {"gain": gain}},
                           torch.device("cpu"), seed)
        per_seed.append({"seed": seed, "metrics": result.metrics, "config": result.config})
    return {"config": config, "per_seed": per_seed, "figures": {}}, False


def test_a_study_runs_every_size_with_the_seed_and_tables_them(fake):
    data, _ = study(fake)
    metrics = data["per_seed"][1]["metrics"]
    assert metrics["accuracy/steps=400"] == pytest.approx(0.1 + 0.05 * math.log2(400))
    figures = summarize_study(data["per_seed"])
    assert list(figures) == ["scaling-accuracy"]
    result = run_study(fake, "fake-scaling", data["config"], torch.device("cpu"), 0)
    assert [row[0] for row in result.tables["scaling"]["rows"]] == SIZES


def test_the_trend_check_verifies_refutes_and_stays_undecided(fake):
    trend_check("fake-scaling", "accuracy", "up", load=lambda *_: study(fake))()
    # the claim's direction flipped: the same data refute it
    assert "moves up" in failed_assertion(
        trend_check("fake-scaling", "accuracy", "down", load=lambda *_: study(fake)))
    # seeds that disagree (one falls): the interval holds 0 and the check ends inconclusive
    with pytest.raises(pytest.skip.Exception, match="inconclusive"):
        trend_check("fake-scaling", "accuracy", "up",
                    load=lambda *_: study(fake, per_seed_gain=(1.0, -1.2, 0.4)))()
    with pytest.raises(ValueError, match="direction"):
        trend_check("fake-scaling", "accuracy", "sideways")
    with pytest.raises(ValueError, match="does not measure"):
        trend_check("fake-scaling", "loss", "up", load=lambda *_: study(fake))()
