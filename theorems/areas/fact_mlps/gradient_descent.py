r"""Gradient-descent-trained gated MLPs against the encoder-decoder construction (FM.6)."""

from __future__ import annotations

import functools

import pytest

from theorems.areas.fact_mlps._shared import DUGAN
from theorems.claims import Claim, Source
from theorems.evidence import check, decide, evidence, expect_failure
from theorems.intervals import median_interval

# --- FM.6: gradient descent against the construction -------------------------------------------

FM_GD_CHEAPER = Claim(
    id="fact-mlps.gd-cheaper",
    title="GD-trained gated MLPs store facts with fewer parameters than the construction",
    statement=(
        r"For unit Gaussian keys in $\mathbb R^d$, $|V|$ unit Gaussian values in $\mathbb R^d$ "
        r"and uniform random facts $f:[F]\to[|V|]$, let $h_{GD}(F)$ be the narrowest width at "
        r"which the gated MLP $g(k) = W^\top(\sigma(Gk)\odot Ak)$ ($2hd + hd$ parameters), "
        r"trained by Adam (lr $10^{-2}$, full batch, a fixed step budget) on the "
        r"cross-entropy of the logits $\langle g(k), v_j\rangle$, stores all $F$ facts, found by "
        r"binary search (so width $h_{GD} - 1$ is shown to fail). Then "
        r"$P_{GD}(F) = 3h_{GD}d \le P_C(F)$, the parameter count of the encoder-decoder "
        r"construction at its threshold sizes, for every $F$ tested."),
    source=(Source(where="Abstract and Section 4: GD-trained MLPs store facts at a lower "
                         "absolute parameter cost than constructions", tag="S", **DUGAN),
            Source(where="the measured widths, by binary search (this project)", tag="D",
                   **DUGAN)),
    kind="scaling",
    construction="constructions.fact_mlps:encoder_decoder_mlp",
    depends_on=("fact-mlps.encoder-exact-storage",),
)

FM_GD = Claim(
    id="fact-mlps.gd-matches-construction",
    title="GD's parameter count grows with F at the construction's rate (undecided on the "
          "catalogue's experiment)",
    statement=(
        r"With $P_{GD}(F)$ and $P_C(F)$ as in fact-mlps.gd-cheaper, on the catalogue's experiment "
        r"($d = 32$, $|V| = 64$, $F \in \{64, 128, 256, 512\}$, at most 1500 Adam steps, three "
        r"seeds), the least-squares slopes of $\log P_{GD}$ and $\log P_C$ against $\log F$, "
        r"fitted per seed over its four $F$, differ by 0 in median over seeds: GD matches the "
        r"construction's facts-per-parameter scaling. The seeds are the units (the points of "
        r"one seed share its initialisations across $F$), and the 95% sign-test interval of "
        r"the median per-seed difference decides."),
    source=(Source(where="Abstract: the encoder-decoder matches GD's facts-per-parameter "
                         "asymptotics across all inputs and outputs tested", tag="V", **DUGAN),
            Source(where="the finite-range test of that claim (this project)", tag="D",
                   **DUGAN)),
    kind="scaling",
    construction="constructions.fact_mlps:encoder_decoder_mlp",
    depends_on=("fact-mlps.gd-cheaper", "fact-mlps.parameter-efficiency"),
    correction=(
        r"Undecided: on the published seeds 0, 1, 2 the construction's per-seed slope exceeds "
        r"GD's by 0.40, 0.43 and 0.51 (GD about 0.6, the construction about 1.0), but a "
        r"sign-test interval from three seeds has coverage at most $1 - 2^{-2} = 75\%$, so at "
        r"95% it decides nothing; six seeds from independent streams, all on one side, would. "
        r"The pooled fit over the 12 points (slopes $0.59 \pm 0.03$ against $1.03 \pm 0.05$) "
        r"does not decide either: its standard errors treat the points of one seed as "
        r"independent. A finite range cannot refute an asymptotic statement; what holds is "
        r"that GD is cheaper at every $F$ tested (fact-mlps.gd-cheaper)."),
    refutes="finite-test",
    notes=("The published streams are not independent in the sense of theorems.intervals: a "
           "seed s draws its fact sets from torch seeds 1000 s + F and its width-h "
           "initialisation from s * 7919 + h (the same for every F), and its construction from "
           "torch seed s, which seed 0's initialisations of widths 1-4 reuse. "
           "empirics/fact_mlps.py is left as published (changing it makes the results stale)."),
)


@functools.lru_cache(maxsize=4)
def width_sweep_data(config: str = "smoke", **overrides) -> dict:
    """The width sweep's config and points, run now (cached per process)."""
    from empirics.fact_mlps import WIDTH_SWEEP

    result = WIDTH_SWEEP(config, device="cpu", **overrides)
    return {"config": result.config, "points": result.record["points"], "stale": False,
            "figure": result.figures["width"]}


def published_width_data() -> dict:
    """The published full-config width sweep (empirics/results/fact-mlps-width/full.json)."""
    from empirics.experiment import RESULTS_DIR, is_stale, published_result

    data = published_result("fact-mlps-width", "full", seed=0)
    return {"config": data["config"], "points": data["record"]["points"],
            "stale": is_stale(data), "device": data["record"].get("device_name"),
            "figure": RESULTS_DIR / "fact-mlps-width" / data["figures"]["width"]}


def gd_cheaper_check(data=width_sweep_data, cost_ratio: float = 1.0):
    """``cost_ratio`` scales the claimed bound (1 = the claim)."""
    def run() -> None:
        from empirics.fact_mlps import width_slopes, width_table

        sweep_data = data()
        points = sweep_data["points"]
        for p in points:
            F = p["num_facts"]
            assert p["construction_accuracy"] in (1.0, None), f"F={F}: construction misses facts"
            assert p["hidden"] is not None, f"F={F}: GD never reached 100% recall"
            probes = {q["hidden"]: q["stored"] for q in p["probes"]}
            assert probes.get(p["hidden"]) is True, f"F={F}: width {p['hidden']} not verified"
            if p["hidden"] > 1:
                assert probes.get(p["hidden"] - 1) is False, (
                    f"F={F}: width {p['hidden']} is not the smallest (width-1 not shown to fail)")
            evidence.margin(1 - p["params"] / (cost_ratio * p["construction_params"]))
            assert p["params"] <= cost_ratio * p["construction_params"], (
                f"F={F}: GD needs {p['params']} parameters, construction "
                f"{p['construction_params']}")
        evidence.metric("construction solved and verified at",
                        sum(p["construction_accuracy"] is not None for p in points),
                        worse="lower")
        for name, value in width_slopes(points).items():
            if name.endswith(("slope", "slope_se")):
                evidence.metric(name, value)
        evidence.table("smallest width", *width_table(points))
        evidence.figure(sweep_data["figure"], "params-vs-facts")  # the Result's own
        evidence.cases(len(points))
    return run


def gd_width_sweep_smoke():
    gd_cheaper_check()()


test_gd_width_sweep_smoke = check(FM_GD_CHEAPER, "empirical")(gd_width_sweep_smoke)


@pytest.mark.slow
def gd_width_sweep_full():
    gd_cheaper_check(functools.partial(width_sweep_data, "full"))()


test_gd_width_sweep_full = check(FM_GD_CHEAPER, "empirical")(gd_width_sweep_full)


def slope_differences(points: list[dict]) -> list[float]:
    """Per seed with a GD width at every F: the construction's log-log slope minus GD's."""
    from empirics.compare import loglog_slope

    differences = []
    for seed in sorted({p["seed"] for p in points}):
        rows = [p for p in points if p["seed"] == seed]
        if all(p["params"] is not None for p in rows):
            F = [p["num_facts"] for p in rows]
            differences.append(loglog_slope(F, [p["construction_params"] for p in rows])["slope"]
                               - loglog_slope(F, [p["params"] for p in rows])["slope"])
    return differences


def slopes_match_check(data=width_sweep_data):
    """The claim as stated: the median per-seed slope difference is 0. An interval that
    contains 0 ends the check inconclusive (decide); one that excludes it fails it."""
    def run() -> None:
        differences = slope_differences(data()["points"])
        interval = median_interval(differences, 0.95)
        side = decide(SLOPE_GAP, interval, threshold=0.0)
        raise AssertionError(
            f"slopes differ: per-seed construction - GD slope {[round(x, 3) for x in differences]}"
            f", 95% sign-test interval [{interval.low:.3f}, {interval.high:.3f}] is {side} 0")
    return run


SLOPE_GAP = "median per-seed slope difference (construction - GD)"


def slope_refutation(data=published_width_data):
    def run() -> None:
        sweep_data = data()
        gd_cheaper_check(lambda: sweep_data)()      # the data are valid: widths verified
        differences = slope_differences(sweep_data["points"])
        evidence.metric("per-seed slope difference, min", min(differences))
        evidence.metric("published result is stale", float(sweep_data["stale"]))
        # recorded here: expect_failure below runs the statement without a recorder
        decide(SLOPE_GAP, median_interval(differences, 0.95), threshold=0.0)
        report = expect_failure(slopes_match_check(lambda: sweep_data))
        config = sweep_data["config"]
        evidence.counterexample(f"d={config['d']}, |V|={config['num_values']}, F in "
                                f"{config['num_facts']}, {config['steps']} steps, "
                                f"{config['seeds']} seeds: {report}")
    return run


def gd_slope_differs_on_the_published_full_sweep():
    slope_refutation()()


test_gd_slope_differs_on_the_published_full_sweep = check(FM_GD, "refutation")(
    gd_slope_differs_on_the_published_full_sweep)


@pytest.mark.slow
def gd_slope_differs_on_a_fresh_full_sweep():
    slope_refutation(functools.partial(width_sweep_data, "full"))()


test_gd_slope_differs_on_a_fresh_full_sweep = check(FM_GD, "refutation")(
    gd_slope_differs_on_a_fresh_full_sweep)


