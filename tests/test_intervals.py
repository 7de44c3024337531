"""The interval helpers sampled verdicts rest on (theorems.intervals), and decide()."""

from __future__ import annotations

import math

import numpy as np
import pytest

from theorems.evidence import INCONCLUSIVE, decide, evidence, recording
from theorems.intervals import (
    Interval,
    bootstrap,
    clopper_pearson,
    median_interval,
    streams,
    torch_seed,
)


def test_clopper_pearson_has_its_defining_tail_probabilities():
    from scipy.stats import binom  # here, not at collection: scipy.stats costs ~1 CPU-s

    iv = clopper_pearson(7, 20, 0.95)
    assert iv.estimate == 7 / 20 and iv.trials == 20
    # L solves P(Bin(20, L) >= 7) = 0.025 and U solves P(Bin(20, U) <= 7) = 0.025
    assert binom.sf(6, 20, iv.low) == pytest.approx(0.025, abs=1e-9)
    assert binom.cdf(7, 20, iv.high) == pytest.approx(0.025, abs=1e-9)
    assert clopper_pearson(0, 10).low == 0 and clopper_pearson(10, 10).high == 1


def test_the_sign_test_interval_uses_the_order_statistics_it_promises():
    from scipy.stats import binom

    values = np.arange(1.0, 21.0)  # n = 20: k = 6, coverage 1 - 2 P(Bin(20, 1/2) <= 5)
    iv = median_interval(values[::-1], 0.95)
    assert (iv.low, iv.high, iv.estimate) == (6.0, 15.0, 10.5)
    assert 1 - 2 * binom.cdf(5, 20, 0.5) >= 0.95 > 1 - 2 * binom.cdf(6, 20, 0.5)
    # five draws cannot give a 95% interval: it decides nothing
    few = median_interval([1.0, 2.0, 3.0, 4.0, 5.0], 0.95)
    assert (few.low, few.high) == (-math.inf, math.inf) and few.side(0.0) is None
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0.95).low == 1.0  # 1 - 2/64


def test_the_bootstrap_is_reproducible_paired_and_covers_a_known_median():
    rng = np.random.default_rng(np.random.SeedSequence(1))
    a, b = rng.normal(1.0, 1.0, 400), rng.normal(0.0, 1.0, 400)

    def statistic(x, y):
        return np.median(x, -1) - np.median(y, -1)

    one = bootstrap(statistic, a, b, rng=np.random.default_rng(5))
    two = bootstrap(statistic, a, b, rng=np.random.default_rng(5))
    assert one == two  # an explicit generator: the same interval
    assert one.low < 1.0 < one.high and one.side(0.0) == "above"
    assert one.estimate == pytest.approx(float(np.median(a) - np.median(b)))
    # pairing: a paired difference with no spread has a degenerate interval
    same = bootstrap(lambda x, y: np.median(x - y, -1), a, a + 2.0, rng=np.random.default_rng(0))
    assert same.low == same.high == pytest.approx(-2.0)


def test_streams_are_independent_children_of_one_seed():
    children = streams(7, 3)
    seeds = [torch_seed(s) for s in children]
    assert len(set(seeds)) == 3 and all(0 <= s < 2**63 for s in seeds)
    assert seeds == [torch_seed(s) for s in streams(7, 3)]  # reproducible
    assert torch_seed(streams(8, 1)[0]) != seeds[0]


@pytest.mark.parametrize("call, error, match", [
    (lambda: clopper_pearson(3, 2), ValueError, "successes"),
    (lambda: clopper_pearson(1.0, 2), TypeError, "successes"),
    (lambda: median_interval([], 0.95), ValueError, "values"),
    (lambda: median_interval([1.0], 1.5), ValueError, "level"),
    (lambda: bootstrap(np.median, [1.0, 2.0], rng=0), TypeError, "rng"),
    (lambda: bootstrap(np.median, [1.0, 2.0], [1.0], rng=np.random.default_rng()),
     ValueError, "samples"),
    (lambda: bootstrap(np.median, [1.0, 2.0], rng=np.random.default_rng(), resamples=5),
     ValueError, "resamples"),
    (lambda: streams(-1, 2), ValueError, "seed"),
    (lambda: torch_seed(3), TypeError, "stream"),
    (lambda: Interval(0.0, 1.0, 0.0, 0.95, 3, "m"), ValueError, "low"),
])
def test_bad_input_names_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_decide_returns_the_side_and_records_the_interval():
    from theorems.evidence import Recorder

    recorder = Recorder(claim="demo.x", tier="numeric")
    with recording(recorder):
        assert decide("r", Interval(0.5, 0.4, 0.6, 0.95, 30, "m"), threshold=1.0) == "below"
        assert decide("s", Interval(2.0, 1.5, 2.5, 0.95, 30, "m"), threshold=1.0) == "above"
        with pytest.raises(pytest.skip.Exception, match=f"^{INCONCLUSIVE} t: "):
            decide("t", Interval(1.0, 0.5, 1.5, 0.95, 30, "m"), threshold=1.0)
    assert [(r["name"], r["decided"]) for r in recorder.as_dict()["intervals"]] == [
        ("r", True), ("s", True), ("t", False)]
    # outside a check (a mutant test), nothing is kept
    assert decide("u", Interval(0.5, 0.4, 0.6, 0.95, 30, "m"), threshold=1.0) == "below"
    assert evidence.intervals == []
