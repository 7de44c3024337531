r"""Fact-storing MLPs: gradient descent against the constructions.

Three experiments, each with a CPU ``smoke`` and a larger ``full`` config:

* :data:`WIDTH_SWEEP` (FM.6, Dugan et al. 2025): for each number of facts :math:`F`, a
  parallel sweep binary-searches the smallest hidden width at which a gated MLP trained by
  Adam on the cross-entropy of the logits :math:`V g(k)` stores every fact, and compares the
  log-log slope of its parameter count with the encoder-decoder construction's.
* :data:`ROME_GD` (FM.7, Meng et al. 2022): one fact of a fitted linear memory is edited by
  ROME, by gradient descent on the constraint plus a shrinking :math:`\lambda\,\mathrm{tr}(\Delta
  C\Delta^\top)`, and by plain fine-tuning; the first two must agree and the third must
  disturb held-out keys more.
* :data:`ASSOCIATIVE_MEMORY` (Nichani et al. 2024; Cabannes et al. 2024): the capacity of the
  Hebbian linear memory against :math:`d`, and the population error of a thresholded memory
  under Zipf inputs against :math:`d`.

Comparisons are gauge-invariant: recall and parameter counts, edits compared as matrices
:math:`\Delta W` (the edit of a fixed :math:`W` is unique), disturbance as
:math:`\mathbb E\lVert\Delta W k\rVert^2` on held-out keys.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``fact-mlps-associative-memory``: 259 CPU-s for three seeds (about 86 a seed); published with
  three seeds.
* ``fact-mlps-rome-gd``: 193 CPU-s for three seeds (about 64 a seed); published with three seeds.
* ``fact-mlps-width``: 331 to 454 s of wall-clock a seed (its own process pool on both cores, so
  CPU-s are not counted here); published with three seeds.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from constructions.fact_mlps import (
    encoder_decoder_mlp,
    linear_associative_memory,
    parameter_count,
    population_error,
    recall,
    rome_edit,
    second_moment,
    smallest_code_dim,
    threshold_hidden,
    zipf_probabilities,
)
from empirics.compare import loglog_slope
from empirics.experiment import Experiment, Result
from empirics.plots import pyplot, tidy
from empirics.sweep import sweep
from empirics.training import TrainConfig, train

# --- shared helpers ---------------------------------------------------------------------------

def unit_gaussian(rows: int, cols: int, generator: torch.Generator,
                  dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Rows drawn uniformly from the unit sphere (normalised Gaussians)."""
    x = torch.randn(rows, cols, generator=generator, dtype=torch.float64)
    return (x / x.norm(dim=1, keepdim=True)).to(dtype)


def fact_problem(num_facts: int, d: int, num_values: int, seed: int):
    """Unit-norm random keys ``(F, d)`` and values ``(|V|, d)``, and uniform random facts."""
    generator = torch.Generator().manual_seed(seed)
    keys = unit_gaussian(num_facts, d, generator)
    values = unit_gaussian(num_values, d, generator)
    facts = torch.randint(0, num_values, (num_facts,), generator=generator)
    return keys, values, facts


MAX_SOLVE_ROWS = 2048  # about 10 s for LAPACK's SVD-based least squares on one core


# --- FM.6: smallest trainable width -----------------------------------------------------------

class GatedMLP(nn.Module):
    r"""The trainable gated MLP :math:`g(k) = W^\top(\sigma(Gk) \odot Ak)`: :math:`2hd + hd_v`
    parameters, the encoder of the construction with a learned output map."""

    def __init__(self, d: int, hidden: int, d_out: int, generator: torch.Generator) -> None:
        super().__init__()
        self.gate = nn.Parameter(torch.randn(hidden, d, generator=generator) / math.sqrt(d))
        self.up = nn.Parameter(torch.randn(hidden, d, generator=generator) / math.sqrt(d))
        self.out = nn.Parameter(torch.randn(hidden, d_out, generator=generator)
                                / math.sqrt(hidden))

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        return (torch.sigmoid(k @ self.gate.T) * (k @ self.up.T)) @ self.out


def train_to_full_recall(keys, values, facts, hidden: int, point: dict) -> dict:
    """Train a :class:`GatedMLP` of width ``hidden``; report whether it stores every fact."""
    device = torch.device(point.get("device", "cpu"))
    generator = torch.Generator().manual_seed(point["seed"] * 7919 + hidden)
    model = GatedMLP(keys.shape[1], hidden, values.shape[1], generator)
    config = TrainConfig(steps=point["steps"], lr=point["lr"], optimizer="adam",
                         eval_every=point.get("eval_every", 10), target=1.0,
                         target_metric="accuracy", target_mode="max", seed=point["seed"],
                         progress=False)
    dtype = config.torch_dtype
    keys, values, facts = keys.to(device, dtype), values.to(device, dtype), facts.to(device)

    def loss_fn(m: nn.Module, _batch) -> tuple[torch.Tensor, dict]:
        logits = m(keys) @ values.T
        accuracy = (logits.argmax(1) == facts).to(dtype).mean()
        return nn.functional.cross_entropy(logits, facts), {"accuracy": accuracy}

    result = train(model, loss_fn, lambda step, gen: None, config, device=device,
                   desc=f"width {hidden}")
    model.double()
    stored, _ = recall(model.cpu(), keys.cpu(), values.cpu(), facts.cpu())
    return {"hidden": hidden, "stored": stored == 1.0, "steps": result.steps,
            "params": parameter_count(model)}


def minimal_width(point: dict) -> dict:
    """Binary-search the smallest width whose trained gated MLP stores every fact (a picklable
    top-level sweep function). Also builds the construction on the same fact set."""
    torch.set_num_threads(1)
    F, d, num_values = point["num_facts"], point["d"], point["num_values"]
    keys, values, facts = fact_problem(F, d, num_values, seed=1000 * point["seed"] + F)
    probes: list[dict] = []

    def works(h: int) -> bool:
        probes.append(train_to_full_recall(keys, values, facts, h, point))
        return probes[-1]["stored"]

    lo, hi = 0, 1  # width lo fails (width 0 stores nothing), hi is the next candidate
    while not works(hi):
        lo, hi = hi, 2 * hi
        if hi > point["max_hidden"]:
            hi = None
            break
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if works(mid):
            hi = mid
        else:
            lo = mid
    code_dim = smallest_code_dim(values, facts, point["seed"])
    hidden = threshold_hidden(F, d, code_dim)
    row = {"num_facts": F, "seed": point["seed"], "hidden": hi,
           "params": None if hi is None else 2 * hi * d + hi * values.shape[1],
           "probes": sorted(probes, key=lambda p: p["hidden"]),
           "construction_hidden": hidden, "construction_code_dim": code_dim,
           "construction_params": 2 * hidden * d + code_dim * hidden + code_dim * d,
           "construction_accuracy": None, "construction_margin": None,
           "bits": F * math.log2(num_values)}
    # The single-bucket solve is an (Fm x hd) least-squares problem, cubic in F: build and
    # verify the construction up to MAX_SOLVE_ROWS rows; beyond, its size is the formula's.
    if F * code_dim <= point.get("max_solve_rows", MAX_SOLVE_ROWS):
        construction = encoder_decoder_mlp(keys, values, facts, seed=point["seed"])
        accuracy, margin = recall(construction, keys, values, facts)
        assert parameter_count(construction) == row["construction_params"]
        row.update(construction_accuracy=accuracy, construction_margin=margin)
    return row


def width_slopes(rows: list[dict]) -> dict[str, float]:
    """Log-log slopes of GD's and the construction's parameter counts against F."""
    found = [r for r in rows if r["hidden"] is not None]
    gd = loglog_slope([r["num_facts"] for r in found], [r["params"] for r in found])
    built = loglog_slope([r["num_facts"] for r in rows], [r["construction_params"] for r in rows])
    return {"gd_slope": gd["slope"], "gd_slope_se": gd["se"], "gd_points": gd["n"],
            "gd_intercept": gd["intercept"], "construction_slope": built["slope"],
            "construction_slope_se": built["se"], "construction_points": built["n"],
            "construction_intercept": built["intercept"], "unresolved": len(rows) - len(found)}


def width_figure(rows: list[dict], config: dict):
    """Parameters at 100% recall (log-log, with fits) and bits stored per parameter, vs F."""
    plt = pyplot()
    fits = width_slopes(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for label, key, name, marker, color in (
            ("gradient descent", "params", "gd", "o", "C0"),
            ("construction", "construction_params", "construction", "s", "C1")):
        kept = [r for r in rows if r[key] is not None]
        xs = np.array([r["num_facts"] for r in kept], dtype=float)
        slope, se = fits[f"{name}_slope"], fits[f"{name}_slope_se"]
        left.loglog(xs, [r[key] for r in kept], marker, color=color,
                    label=f"{label}: slope {slope:.2f} ± {se:.2f}")
        grid = np.unique(xs)
        left.loglog(grid, np.exp(fits[f"{name}_intercept"]) * grid**slope, "-", color=color,
                    alpha=0.5)
        right.semilogx(xs, [r["bits"] / r[key] for r in kept], marker, color=color,
                       label=label)
    left.set_xlabel("facts F")
    left.set_ylabel("parameters at 100% recall")
    left.legend(fontsize=8)
    right.set_xlabel("facts F")
    right.set_ylabel(r"bits stored per parameter, $F\log_2|V|/P$")
    right.legend(fontsize=8)
    fig.suptitle(f"d={config['d']}, |V|={config['num_values']}, {config['steps']} Adam steps")
    tidy(left, right)
    fig.tight_layout()
    return fig


def run_width_sweep(config: dict, device: torch.device, seed: int) -> Result:
    """FM.6: the smallest trainable width against F, in parallel over (F, seed) points."""
    points = [{"num_facts": F, "d": config["d"], "num_values": config["num_values"],
               "steps": config["steps"], "lr": config["lr"], "max_hidden": config["max_hidden"],
               "seed": seed + s, "device": "cpu"} for F in config["num_facts"]
              for s in range(config["seeds"])]
    rows = sweep(minimal_width, points, workers=config["workers"], backend="process",
                 desc="width sweep")
    result = Result("fact-mlps-width", dict(config), seed, str(device))
    result.metrics = width_slopes(rows)
    result.record["points"] = rows
    result.table("smallest width", *width_table(rows))
    result.figures["width"] = width_figure(rows, config)
    return result


def width_table(rows: list[dict]) -> tuple[list[str], list[list]]:
    header = ["F", "seed", "GD width", "GD params", "construction h", "construction m",
              "construction params", "bits/param GD", "bits/param construction"]
    return header, [[r["num_facts"], r["seed"], r["hidden"], r["params"],
                     r["construction_hidden"], r["construction_code_dim"],
                     r["construction_params"],
                     None if r["params"] is None else round(r["bits"] / r["params"], 4),
                     round(r["bits"] / r["construction_params"], 4)] for r in rows]


WIDTH_SWEEP = Experiment(
    name="fact-mlps-width",
    description="Smallest gated-MLP width reaching 100% recall, GD vs construction (FM.6)",
    claims=("fact-mlps.gd-cheaper", "fact-mlps.gd-matches-construction"),
    configs={
        # The smoke run is serial (workers=1): a fresh worker pays seconds importing
        # torch._dynamo on its first optimizer, more than the whole smoke sweep's training.
        "smoke": {"d": 8, "num_values": 8, "num_facts": [8, 16, 32, 64], "steps": 200,
                  "lr": 1e-2, "max_hidden": 64, "seeds": 1, "workers": 1},
        "full": {"d": 32, "num_values": 64, "num_facts": [64, 128, 256, 512], "steps": 1500,
                 "lr": 1e-2, "max_hidden": 1024, "seeds": 3, "workers": None},
    },
    run=run_width_sweep,
    code=("constructions.fact_mlps",),
)


# --- FM.7: ROME by gradient descent -----------------------------------------------------------

def rome_problem(config: dict, seed: int) -> dict[str, torch.Tensor]:
    r"""A linear memory fitted by least squares to ``n`` anisotropic keys, and one new fact.

    Keys are :math:`k = \Sigma^{1/2}z` with :math:`\Sigma` having log-spaced eigenvalues in
    ``[1, spread]`` in a random basis, so :math:`C` is far from the identity and ROME differs
    from the minimum-Frobenius-norm edit. ``W`` solves :math:`WKK^\top = VK^\top`.
    """
    generator = torch.Generator().manual_seed(seed)
    d_k, d_v, n = config["d_k"], config["d_v"], config["n"]
    eigenvalues = torch.logspace(0, math.log10(config["spread"]), d_k, dtype=torch.float64)
    basis, _ = torch.linalg.qr(torch.randn(d_k, d_k, generator=generator, dtype=torch.float64))
    root = basis * eigenvalues.sqrt()

    def sample(count: int) -> torch.Tensor:
        return torch.randn(count, d_k, generator=generator, dtype=torch.float64) @ root.T

    keys = sample(n)
    truth = torch.randn(d_v, d_k, generator=generator, dtype=torch.float64) / math.sqrt(d_k)
    values = keys @ truth.T + 0.1 * torch.randn(n, d_v, generator=generator, dtype=torch.float64)
    W = torch.linalg.lstsq(keys, values, driver="gelsd").solution.T  # gelsy is not reproducible
    return {"W": W, "keys": keys, "values": values, "C": second_moment(keys),
            "k_star": keys[0], "v_star": torch.randn(d_v, generator=generator,
                                                     dtype=torch.float64),
            "held_out": sample(config["n_test"])}


def penalized_gd(W, C, k_star, v_star, *, steps: int, momentum: float, lam_start: float,
                 lam_end: float, penalty: torch.Tensor | None = None) -> tuple[torch.Tensor, list]:
    r"""Heavy-ball gradient descent on
    :math:`L_\lambda(\Delta) = \lVert(W + \Delta)k_* - v_*\rVert^2 + \lambda\,\mathrm{tr}(\Delta
    \Pi\Delta^\top)` with :math:`\lambda` shrinking geometrically from ``lam_start`` to
    ``lam_end`` over the first 80% of the steps (then held), from :math:`\Delta = 0`.

    ``penalty`` is :math:`\Pi` (default ``C``; ``0`` gives plain fine-tuning). The objective is
    quadratic, so its gradient :math:`2(\Delta k_* - r)k_*^\top + 2\lambda\Delta\Pi` is given
    in closed form to :class:`torch.optim.SGD`; the step is :math:`1/L` with
    :math:`L = 2(\lVert k_*\rVert^2 + \lambda\lambda_{\max}(\Pi))` the gradient's Lipschitz
    constant. Returns :math:`\Delta` and the history of the relative change per 100 steps.
    """
    penalty = C if penalty is None else penalty
    residual = v_star - W @ k_star
    delta = torch.zeros_like(W, requires_grad=True)
    optimizer = torch.optim.SGD([delta], lr=1.0, momentum=momentum)
    top = float(torch.linalg.eigvalsh(penalty).max()) if penalty.abs().sum() > 0 else 0.0
    anneal = max(1, int(0.8 * steps))
    history = []
    for step in range(steps):
        lam = lam_start * (lam_end / lam_start) ** min(1.0, step / anneal)
        with torch.no_grad():
            delta.grad = 2 * torch.outer(delta @ k_star - residual, k_star) \
                + 2 * lam * delta @ penalty
        optimizer.param_groups[0]["lr"] = 1.0 / (2 * (float(k_star @ k_star) + lam * top))
        optimizer.step()
        if step % 100 == 0:
            history.append({"step": step, "lambda": lam,
                            "constraint": float((delta.detach() @ k_star - residual).norm())})
    return delta.detach(), history


def run_rome_gd(config: dict, device: torch.device, seed: int) -> Result:
    """FM.7: penalised GD converges to ROME; plain fine-tuning disturbs held-out keys more."""
    plt = pyplot()
    problem = rome_problem(config, seed)
    W, C, k_star, v_star = (problem[k] for k in ("W", "C", "k_star", "v_star"))
    rome = rome_edit(W, C, k_star, v_star) - W
    kwargs = {"steps": config["steps"], "momentum": config["momentum"],
              "lam_start": config["lam_start"], "lam_end": config["lam_end"]}
    # "I" is the mutant "ROME with the wrong covariance": the penalty forgets the key statistics
    penalty = C if config["penalty"] == "C" else torch.eye(C.shape[0], dtype=torch.float64)
    penalized, history = penalized_gd(W, C, k_star, v_star, penalty=penalty, **kwargs)
    plain, _ = penalized_gd(W, C, k_star, v_star, penalty=torch.zeros_like(C), **kwargs)
    held_out = problem["held_out"]

    def disturbance(delta: torch.Tensor) -> torch.Tensor:
        """|delta k|^2 for every held-out key."""
        return (held_out @ delta.T).pow(2).sum(1)

    def mean_and_se(x: torch.Tensor) -> tuple[float, float]:
        return float(x.mean()), float(x.std() / math.sqrt(len(x)))

    result = Result("fact-mlps-rome-gd", dict(config), seed, str(device))
    d_rome, se_rome = mean_and_se(disturbance(rome))
    d_plain, se_plain = mean_and_se(disturbance(plain))
    d_pen, _ = mean_and_se(disturbance(penalized))
    # paired over the same held-out keys, so the gap's standard error is that of the differences
    gap, gap_se = mean_and_se(disturbance(plain) - disturbance(rome))
    result.metrics = {
        "penalized_vs_rome": float((penalized - rome).norm() / rome.norm()),
        "plain_vs_rome": float((plain - rome).norm() / rome.norm()),
        "constraint_penalized": float(((W + penalized) @ k_star - v_star).norm()
                                      / v_star.norm()),
        "constraint_plain": float(((W + plain) @ k_star - v_star).norm() / v_star.norm()),
        "disturbance_rome": d_rome, "disturbance_rome_se": se_rome,
        "disturbance_plain": d_plain, "disturbance_plain_se": se_plain,
        "disturbance_penalized": d_pen, "disturbance_gap": gap, "disturbance_gap_se": gap_se,
        "cost_rome": float(torch.trace(rome @ C @ rome.T)),
        "cost_plain": float(torch.trace(plain @ C @ plain.T)),
    }
    result.training["penalized"] = {"history": history}
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(["ROME", "penalised GD", "plain fine-tuning"], [d_rome, d_pen, d_plain],
           yerr=[se_rome, 0, se_plain])
    ax.set_ylabel(r"held-out $\mathbb{E}\,\|\Delta W k\|^2$")
    ax.set_title("disturbance of other keys by one edit")
    result.figures["disturbance"] = fig
    return result


ROME_GD = Experiment(
    name="fact-mlps-rome-gd",
    description="Penalised GD converges to ROME; plain fine-tuning disturbs more (FM.7)",
    claims=("fact-mlps.rome-gd",),
    configs={
        "smoke": {"d_k": 32, "d_v": 16, "n": 500, "n_test": 2000, "spread": 10.0,
                  "steps": 5000, "momentum": 0.97, "lam_start": 1.0, "lam_end": 1e-7,
                  "penalty": "C"},
        "full": {"d_k": 256, "d_v": 128, "n": 5000, "n_test": 20000, "spread": 10.0,
                 "steps": 20000, "momentum": 0.99, "lam_start": 1.0, "lam_end": 1e-8,
                 "penalty": "C"},
    },
    run=run_rome_gd,
    code=("constructions.fact_mlps",),
)


# --- associative memories: capacity (Nichani et al.) and Zipf scaling (Cabannes et al.) -------

def hebbian_recalls_all(d: int, num_facts: int, seed: int) -> bool:
    """Does the Hebbian memory of ``num_facts`` random unit key/value pairs recall them all?"""
    generator = torch.Generator().manual_seed(seed)
    keys = unit_gaussian(num_facts, d, generator)
    values = unit_gaussian(num_facts, d, generator)
    facts = torch.arange(num_facts)
    return recall(linear_associative_memory(keys, values, facts), keys, values, facts)[0] == 1.0


def hebbian_capacity(d: int, seeds: int) -> int:
    """The largest F at which at least half of ``seeds`` random memories recall every fact,
    by doubling then bisection (the success rate falls with F on average)."""
    def rate(F: int) -> float:
        return sum(hebbian_recalls_all(d, F, s) for s in range(seeds)) / seeds

    lo, hi = 1, 2
    while rate(hi) >= 0.5:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if rate(mid) >= 0.5:
            lo = mid
        else:
            hi = mid
    return lo


def zipf_problem(d: int, config: dict, seed: int):
    """Unit embeddings of N tokens and M outputs in R^d, a random map f*, and Zipf p."""
    N, M = config["tokens"], config["outputs"]
    generator = torch.Generator().manual_seed(seed)
    keys = unit_gaussian(N, d, generator)
    values = unit_gaussian(M, d, generator)
    facts = torch.randint(0, M, (N,), generator=generator)
    return keys, values, facts, zipf_probabilities(N, config["alpha"])


def thresholded_errors(d: int, config: dict, seed: int) -> tuple[list[int], torch.Tensor]:
    r"""Population errors of the memories :math:`W_P = \sum_{x \le P} u_{f(x)}e_x^\top` that
    store the :math:`P` most frequent of :math:`N` Zipf tokens, for every threshold :math:`P`
    in a geometric grid, from one crosstalk matrix (the scores of :math:`W_P` are sums over
    the first :math:`P` stored tokens)."""
    keys, values, facts, p = zipf_problem(d, config, seed)
    N = len(keys)
    most = min(N, config["max_stored_per_dim"] * d)
    grid = sorted({max(1, round(2 ** (k / 2))) for k in range(2 * int(math.log2(most)) + 1)})
    crosstalk = keys @ keys[:most].T                       # (N, most)
    readout = values[facts[:most]] @ values.T              # (most, M)
    errors = []
    for P in grid:  # the scores of W_P are sums over the first P stored tokens
        scores = crosstalk[:, :P] @ readout[:P]            # (N, M)
        correct = scores.gather(1, facts[:, None]).squeeze(1)
        rivals = scores.scatter(1, facts[:, None], float("-inf")).amax(1)
        errors.append(float(p[correct <= rivals].sum()))
    return grid, torch.tensor(errors, dtype=torch.float64)


def zipf_memory_error(d: int, config: dict) -> dict:
    """The best thresholded memory's population error at width ``d``, averaged over seeds."""
    errors = []
    for seed in range(config["seeds"]):
        grid, error = thresholded_errors(d, config, seed)
        errors.append(error)
    mean = torch.stack(errors).mean(0)
    best = int(mean.argmin())
    return {"d": d, "threshold": grid[best], "largest_threshold": grid[-1],
            "error": float(mean[best]), "per_seed": [float(e[best]) for e in errors]}


def check_thresholded_against_memory(d: int, config: dict, threshold: int, seed: int = 0) -> float:
    """The same error computed with :func:`linear_associative_memory` (a cross-check of the
    batched threshold sweep); returns the absolute difference."""
    grid, errors = thresholded_errors(d, config, seed)
    keys, values, facts, p = zipf_problem(d, config, seed)
    weights = (torch.arange(len(keys)) < threshold).double()
    memory = linear_associative_memory(keys, values, facts, weights=weights)
    direct = population_error(memory, keys, values, facts, p)
    return abs(direct - float(errors[grid.index(threshold)]))


def run_associative_memory(config: dict, device: torch.device, seed: int) -> Result:
    """Capacity of the Hebbian memory against d, and the Zipf error exponent against d."""
    plt = pyplot()
    result = Result("fact-mlps-associative-memory", dict(config), seed, str(device))
    capacity = [hebbian_capacity(d, config["capacity_seeds"]) for d in config["capacity_dims"]]
    scaled = [c * math.log(c) for c in capacity]
    fit = loglog_slope(config["capacity_dims"], scaled)
    zipf = {k: config[f"zipf_{k}"] for k in ("tokens", "outputs", "alpha", "seeds",
                                              "max_stored_per_dim")}
    errors = [zipf_memory_error(d, zipf) for d in config["zipf_dims"]]
    points = [(e["d"], err) for e in errors for err in e["per_seed"]]
    zfit = loglog_slope([d for d, _ in points], [err for _, err in points])
    result.metrics = {"capacity_slope": fit["slope"], "capacity_slope_se": fit["se"],
                      "capacity_points": fit["n"], "zipf_slope": zfit["slope"],
                      "zipf_slope_se": zfit["se"], "zipf_points": zfit["n"],
                      "capacity_constant_max": max(s / d**2 for s, d in
                                                   zip(scaled, config["capacity_dims"],
                                                       strict=True)),
                      "capacity_constant_min": min(s / d**2 for s, d in
                                                   zip(scaled, config["capacity_dims"],
                                                       strict=True))}
    result.table("Hebbian capacity", ["d", "F*", "F* ln F* / d^2"],
                 [[d, c, round(s / d**2, 4)] for d, c, s in
                  zip(config["capacity_dims"], capacity, scaled, strict=True)])
    result.table("Zipf thresholded memory", ["d", "best threshold P", "population error"],
                 [[e["d"], e["threshold"], round(e["error"], 6)] for e in errors])
    result.record["capacity"] = capacity
    result.record["zipf"] = errors
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.loglog(config["capacity_dims"], capacity, "o-", label="measured F*")
    dims = np.array(config["capacity_dims"], dtype=float)
    left.loglog(dims, dims**2 / (8 * np.log(dims**2 / 8)), "--",
                label=r"$d^2/(8\ln(d^2/8))$, crosstalk estimate")
    left.set_xlabel("d")
    left.set_ylabel("capacity F* (all facts recalled)")
    left.legend(fontsize=8)
    right.loglog([e["d"] for e in errors], [e["error"] for e in errors], "o-",
                 label=f"measured: slope {zfit['slope']:.2f} ± {zfit['se']:.2f}")
    zd = np.array([e["d"] for e in errors], dtype=float)
    right.loglog(zd, errors[0]["error"] * (zd / zd[0]) ** (1 - zipf["alpha"]), "--",
                 label=rf"$d^{{-(\alpha-1)}}$, $\alpha={zipf['alpha']}$")
    right.set_xlabel("d")
    right.set_ylabel("population error")
    right.legend(fontsize=8)
    left.set_title("Hebbian memory (Nichani et al.)")
    right.set_title(f"Zipf inputs (Cabannes et al.), M = {zipf['outputs']}")
    tidy(left, right)
    fig.tight_layout()
    result.figures["associative-memory"] = fig
    return result


ASSOCIATIVE_MEMORY = Experiment(
    name="fact-mlps-associative-memory",
    description="Hebbian memory capacity against d; Zipf error exponent (Nichani; Cabannes)",
    claims=("fact-mlps.linear-memory-capacity", "fact-mlps.zipf-memory-scaling"),
    configs={
        "smoke": {"capacity_dims": [16, 32, 64, 128], "capacity_seeds": 8,
                  "zipf_dims": [16, 32, 64, 128], "zipf_tokens": 2048, "zipf_outputs": 4,
                  "zipf_alpha": 2.0, "zipf_seeds": 4, "zipf_max_stored_per_dim": 2},
        "full": {"capacity_dims": [16, 32, 64, 128, 256], "capacity_seeds": 32,
                 "zipf_dims": [32, 64, 128, 256, 512], "zipf_tokens": 16384,
                 "zipf_outputs": 4, "zipf_alpha": 2.0, "zipf_seeds": 16,
                 "zipf_max_stored_per_dim": 2},
    },
    run=run_associative_memory,
    code=("constructions.fact_mlps",),
)

