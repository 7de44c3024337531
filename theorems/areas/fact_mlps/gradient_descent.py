r"""Gradient-descent-trained gated MLPs against the encoder-decoder construction (FM.6)."""

from __future__ import annotations

import functools
import math

import pytest

from theorems.areas.fact_mlps._shared import DUGAN, t_quantile
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence, expect_failure

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
    title="GD's parameter count grows with F at the construction's rate (not on the "
          "catalogue's experiment)",
    statement=(
        r"With $P_{GD}(F)$ and $P_C(F)$ as in fact-mlps.gd-cheaper, on the catalogue's experiment "
        r"($d = 32$, $|V| = 64$, $F \in \{64, 128, 256, 512\}$, at most 1500 Adam steps, three "
        r"seeds), the least-squares slopes of $\log P_{GD}$ and $\log P_C$ against $\log F$ "
        r"agree within their 95% confidence intervals: GD matches the construction's "
        r"facts-per-parameter scaling."),
    source=(Source(where="Abstract: the encoder-decoder matches GD's facts-per-parameter "
                         "asymptotics across all inputs and outputs tested", tag="V", **DUGAN),
            Source(where="the finite-range test of that claim (this project)", tag="D",
                   **DUGAN)),
    kind="scaling",
    construction="constructions.fact_mlps:encoder_decoder_mlp",
    depends_on=("fact-mlps.gd-cheaper", "fact-mlps.parameter-efficiency"),
    correction=(
        r"On this experiment GD's parameter count grows markedly more slowly than the "
        r"construction's (slope about 0.6 against about 1.0): GD is still pre-asymptotic, its "
        r"bits per parameter rising from about 1 to about 2.5 between $F = 64$ and $512$, while "
        r"the construction's stay near its limit (fact-mlps.parameter-efficiency). A finite "
        r"range cannot refute an asymptotic statement; what holds is that GD is cheaper at "
        r"every $F$ (fact-mlps.gd-cheaper), and that both slopes must approach 1 if GD's bits "
        r"per parameter stay bounded. Matching slopes would need larger $F/d$."),
    refutes="finite-test",
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


def slopes_match_check(data=width_sweep_data):
    """The claim as stated: the two log-log slopes agree within their 95% intervals."""
    def run() -> None:
        from empirics.fact_mlps import width_slopes

        m = width_slopes(data()["points"])
        dof = min(m["gd_points"], m["construction_points"]) - 2
        allowed = t_quantile(dof) * math.hypot(m["gd_slope_se"], m["construction_slope_se"])
        gap = abs(m["gd_slope"] - m["construction_slope"])
        assert gap <= allowed, (f"slopes differ: GD {m['gd_slope']:.2f} ± {m['gd_slope_se']:.2f}"
                                f", construction {m['construction_slope']:.2f} ± "
                                f"{m['construction_slope_se']:.2f} (allowed gap {allowed:.2f})")
    return run


def slope_refutation(data=published_width_data):
    def run() -> None:
        sweep_data = data()
        gd_cheaper_check(lambda: sweep_data)()      # the data are valid: widths verified
        report = expect_failure(slopes_match_check(lambda: sweep_data))
        config = sweep_data["config"]
        evidence.counterexample(f"d={config['d']}, |V|={config['num_values']}, F in "
                                f"{config['num_facts']}, {config['steps']} steps, "
                                f"{config['seeds']} seeds: {report}")
        evidence.metric("published result is stale", float(sweep_data["stale"]))
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


