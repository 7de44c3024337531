r"""The fact-storage efficiency frontier: bits stored per parameter against F, and against the
weight precision each construction needs (issue 24).

For each number of facts :math:`F` (unit Gaussian keys in :math:`\mathbb R^d`, :math:`|V|` unit
Gaussian values, uniform facts; the fact sets of :mod:`empirics.fact_mlps`), every construction
is built, recall is checked on every fact in float64, and the fewest significand bits :math:`p`
at which its rounded weights still recall every fact is found
(:func:`constructions.fact_codes.min_precision_bits`). The counting bound at that precision,
:math:`\log_2(2^{p+e}+1)` bits per parameter with :math:`e` the exponent bits the weights use
(:func:`constructions.fact_codes.counting_bound`), is reported beside it.

Constructions: the single-bucket encoder-decoder (built while its system has at most
``max_solve_rows`` rows, its size by formula beyond), the multi-bucket encoder with the linear
decoder, the bucketed scalar code with the ladder decoder, and the Hebbian memory
:math:`W = \sum_i v_{f(i)}k_i^\top` (its points count only where it recalls every fact).
Gradient descent is not retrained: its smallest widths come from the published width sweep
(``empirics/results/fact-mlps-width/full.json``).

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``fact-mlps-frontier``: 418 CPU-s for three seeds (about 139 a seed); published with three seeds.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from constructions.fact_codes import (
    counting_bound,
    exponent_bits,
    min_precision_bits,
    multi_bucket_mlp,
    scalar_code_mlp,
)
from constructions.fact_mlps import (
    encoder_decoder_mlp,
    linear_associative_memory,
    parameter_count,
    recall,
    smallest_code_dim,
    threshold_hidden,
)
from empirics.experiment import Experiment, Result
from empirics.fact_mlps import fact_problem
from empirics.plots import pyplot, tidy

CONSTRUCTIONS = ("single-bucket", "multi-bucket", "scalar-code", "hebbian")


def measure(model, keys, values, facts) -> dict:
    """Recall, margin, parameters, precision and the counting bound of one built model."""
    accuracy, margin = recall(model, keys, values, facts)
    row = {"params": parameter_count(model), "accuracy": accuracy, "margin": margin,
           "precision_bits": None, "exponent_bits": None, "counting_bound": None}
    if accuracy == 1.0:
        bits = min_precision_bits(model, keys, values, facts)
        if bits is not None:
            exponent = exponent_bits(model, bits)
            row.update(precision_bits=bits, exponent_bits=exponent,
                       counting_bound=counting_bound(bits, exponent))
    return row


def frontier_point(F: int, seed: int, config: dict) -> list[dict]:
    """Every construction on one fact set."""
    d, num_values = config["d"], config["num_values"]
    keys, values, facts = fact_problem(F, d, num_values, seed=1000 * seed + F)
    bits = F * math.log2(num_values)
    rows = []
    for name in CONSTRUCTIONS:
        row = {"construction": name, "num_facts": F, "seed": seed, "bits": bits}
        if name == "single-bucket":
            m = smallest_code_dim(values, facts, seed)
            h = threshold_hidden(F, d, m)
            if F * m <= config["max_solve_rows"]:
                row |= measure(encoder_decoder_mlp(keys, values, facts, seed=seed),
                               keys, values, facts)
            else:  # the formula of encoder_decoder_mlp's weights, unverified at this size
                row |= {"params": 2 * h * d + m * h + m * d, "accuracy": None, "margin": None,
                        "precision_bits": None, "exponent_bits": None, "counting_bound": None}
        elif name == "multi-bucket":
            row |= measure(multi_bucket_mlp(keys, values, facts, seed=seed), keys, values, facts)
        elif name == "scalar-code":
            row |= measure(scalar_code_mlp(keys, values, facts, seed=seed), keys, values, facts)
        else:
            row |= measure(linear_associative_memory(keys, values, facts), keys, values, facts)
        row["bits_per_param"] = bits / row["params"]
        rows.append(row)
    return rows


def gd_points() -> tuple[list[dict], bool]:
    """GD's smallest widths at 100% recall from the published width sweep, and staleness."""
    from empirics.experiment import is_stale, published_result

    data = published_result("fact-mlps-width", "full", seed=0)
    return ([{"num_facts": p["num_facts"], "seed": p["seed"], "params": p["params"],
              "bits": p["bits"], "bits_per_param": p["bits"] / p["params"]}
             for p in data["record"]["points"] if p["params"] is not None], is_stale(data))


def frontier_table(rows: list[dict], gd: list[dict]) -> tuple[list[str], list[list]]:
    header = ["construction", "F", "seed", "params", "bits/param", "recall", "precision p",
              "exponent e", "counting bound at p"]

    def fmt(x, digits=4):
        return None if x is None else round(x, digits)

    body = [[r["construction"], r["num_facts"], r["seed"], r["params"],
             fmt(r["bits_per_param"]), r["accuracy"], r["precision_bits"], r["exponent_bits"],
             fmt(r["counting_bound"], 2)] for r in rows]
    body += [["gradient descent (published)", g["num_facts"], g["seed"], g["params"],
              fmt(g["bits_per_param"]), 1.0, None, None, None] for g in gd]
    return header, body


def frontier_figure(rows: list[dict], gd: list[dict], config: dict):
    """Bits per parameter against F (verified points filled), and against the precision p."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5.2))
    styles = {"single-bucket": ("s", "C1"), "multi-bucket": ("D", "C2"),
              "scalar-code": ("*", "C3"), "hebbian": ("v", "C4")}
    for name, (marker, color) in styles.items():
        kept = [r for r in rows if r["construction"] == name]
        ok = [r for r in kept if r["accuracy"] == 1.0]
        other = [r for r in kept if r["accuracy"] != 1.0 and name != "hebbian"]
        left.semilogx([r["num_facts"] for r in ok], [r["bits_per_param"] for r in ok], marker,
                      color=color, label=f"{name} (recall 100%)")
        if other:
            left.semilogx([r["num_facts"] for r in other],
                          [r["bits_per_param"] for r in other], marker, color=color,
                          mfc="none", label=f"{name} (size by formula / recall < 100%)")
        right.plot([r["precision_bits"] for r in ok], [r["bits_per_param"] for r in ok],
                   marker, color=color, label=name)
    if gd:
        left.semilogx([g["num_facts"] for g in gd], [g["bits_per_param"] for g in gd], "o",
                      color="C0", label="gradient descent (published widths)")
    left.axhline(1.0, color="grey", lw=0.8, ls=":")
    left.set_xlabel("facts F")
    left.set_ylabel(r"bits per parameter, $F\log_2|V|/P$")
    left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    ps = [r["precision_bits"] for r in rows if r["precision_bits"] is not None]
    if ps:
        grid = np.arange(1, max(ps) + 2)
        es = [r["exponent_bits"] for r in rows if r["exponent_bits"] is not None]
        right.plot(grid, [counting_bound(int(p), min(es)) for p in grid], "-", color="grey",
                   label=f"counting bound, e = {min(es)}")
    right.set_yscale("log")
    right.set_xlabel("significand bits p needed for 100% recall")
    right.set_ylabel("bits per parameter")
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.suptitle(f"d={config['d']}, |V|={config['num_values']}")
    tidy(left)
    fig.tight_layout()
    return fig


def run_frontier(config: dict, device: torch.device, seed: int) -> Result:
    torch.set_num_threads(1)
    rows = [r for F in config["num_facts"] for s in range(config["seeds"])
            for r in frontier_point(F, seed + s, config)]
    gd, stale = gd_points() if config["gd"] else ([], False)
    result = Result("fact-mlps-frontier", dict(config), seed, str(device))
    result.record["points"] = rows
    result.record["gd_points"] = gd
    result.record["gd_stale"] = stale
    for name in CONSTRUCTIONS:
        ok = [r for r in rows if r["construction"] == name and r["accuracy"] == 1.0]
        if ok:
            best = max(ok, key=lambda r: r["bits_per_param"])
            result.metrics[f"{name} best bits/param"] = best["bits_per_param"]
            result.metrics[f"{name} largest verified F"] = max(r["num_facts"] for r in ok)
    result.table("frontier", *frontier_table(rows, gd))
    result.figures["frontier"] = frontier_figure(rows, gd, config)
    return result


FRONTIER = Experiment(
    name="fact-mlps-frontier",
    description="Bits stored per parameter against F and precision: constructions vs GD",
    claims=("fact-mlps.frontier-construction", "fact-mlps.gd-beats-frontier"),
    configs={
        "smoke": {"d": 32, "num_values": 64, "num_facts": [64, 256, 512], "seeds": 1,
                  "max_solve_rows": 1024, "gd": True},
        "full": {"d": 32, "num_values": 64, "num_facts": [64, 128, 256, 512, 1024, 2048, 4096],
                 "seeds": 1, "max_solve_rows": 2048, "gd": True},
    },
    run=run_frontier,
    code=("constructions.fact_codes", "constructions.fact_mlps", "empirics.fact_mlps"),
)
