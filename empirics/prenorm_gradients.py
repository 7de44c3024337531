r"""XL.1: the gradient norm at initialisation, Pre-LN against Post-LN (Xiong et al. 2020).

Xiong et al., "On Layer Normalization in the Transformer Architecture", ICML 2020,
arXiv:2002.04745, Lemma 1 and Theorem 1, in their mean-field setting: Gaussian weights
:math:`\mathcal N(0, 1/d)`, uniform attention, ReLU, no biases, FFN width :math:`d`, and a
final LayerNorm on Pre-LN. A Monte Carlo over depths :math:`L` and independent
initialisations (the sweep API) measures

* :math:`\lVert\partial\mathcal L/\partial W^{2,L}\rVert_F`, the gradient of the last layer's
  second FFN matrix, whose log-log slope in :math:`L` Theorem 1 predicts as about
  :math:`-1/2` for Pre-LN (:math:`O(d\sqrt{\ln d/L})`) and 0 for Post-LN
  (:math:`O(d\sqrt{\ln d})`);
* the residual norms of Lemma 1: :math:`\mathbb E\lVert x^{post,5}_{L}\rVert^2 = 3d/2` and
  :math:`(1 + L/2)d \le \mathbb E\lVert x^{pre}_{L+1}\rVert^2 \le (1 + 3L/2)d`.

**The model** (:class:`~constructions.prenorm_gradients.MeanFieldTransformer`, re-exported here;
:math:`x_{1,i} \sim \mathcal N(0, I_d)` for tokens :math:`i = 1..n`, layers :math:`l = 1..L`,
:math:`\bar v = \tfrac1n\sum_j v_j`,
:math:`\mathrm{LN}` without affine terms and with :math:`\epsilon = 0`,
:math:`\mathrm{FFN}(v) = \mathrm{ReLU}(v W^{1,l}) W^{2,l}`, attention uniform so
:math:`\mathrm{Attn}(v)_i = \bar v\, W^{V,l} W^{O,l}`):

* Post-LN: :math:`x^{post,2} = x_l + \mathrm{Attn}(x_l)`,
  :math:`x^{post,3} = \mathrm{LN}(x^{post,2})`,
  :math:`x^{post,5} = x^{post,3} + \mathrm{FFN}(x^{post,3})`,
  :math:`x_{l+1} = \mathrm{LN}(x^{post,5})`; the output is :math:`x_{L+1}`.
* Pre-LN: :math:`x^{pre,3} = x_l + \mathrm{Attn}(\mathrm{LN}(x_l))`,
  :math:`x_{l+1} = x^{pre,3} + \mathrm{FFN}(\mathrm{LN}(x^{pre,3}))`; the output is
  :math:`\mathrm{LN}(x_{L+1})`.

**The loss** (ours, [D]; the paper's is recalled only as some loss of the output): the output
:math:`z_i` of each token is a logit vector over :math:`d` classes with a uniformly random
label :math:`y_i`, and :math:`\mathcal L = \tfrac1n\sum_i \mathrm{CE}(z_i, y_i)`. The
*absolute* dependence on :math:`d` depends on this normalisation, so only the slope in
:math:`L` is compared with the theorem.

**Why the Lemma's band holds exactly in expectation** (our derivation, [D]). Write
:math:`E_W` for the expectation over the current layer's weights. For :math:`v` with
:math:`\lVert v\rVert^2 = d` (a LayerNorm output), each entry of :math:`vW^1` is
:math:`\mathcal N(0, 1)`, so :math:`E\lVert\mathrm{ReLU}(vW^1)\rVert^2 = d/2`, and
:math:`E_{W^2}\lVert hW^2\rVert^2 = \lVert h\rVert^2`: the FFN adds :math:`d/2`. The mean of
LayerNorm outputs has :math:`0 \le \lVert\bar v\rVert^2 \le d`, and
:math:`E\lVert\bar vW^VW^O\rVert^2 = \lVert\bar v\rVert^2`: attention adds between 0 and
:math:`d`. Cross terms vanish because :math:`W^{2,l}` and :math:`W^{O,l}` are independent,
zero-mean and enter linearly. Hence Post-LN has :math:`E\lVert x^{post,5}\rVert^2 = d + d/2`
at every layer, and each Pre-LN layer adds between :math:`d/2` and :math:`3d/2` to
:math:`E\lVert x_1\rVert^2 = d`. (The paper writes the band for :math:`x^{pre}_l`; with our
1-based layers and :math:`x_1` the input, the band that holds is for :math:`x_{L+1}`, the
output of :math:`L` layers: the paper's indexing is [R].)

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice
10 under load from other jobs; CPU seconds do not count waiting):

* ``prenorm-gradients``: 207 CPU-s for three seeds (about 69 a seed, d=128, L up to 64, an
  upper bound: the seeds ran with two torch threads, which spin under load; one seed at d=256
  on one thread took 61 CPU-s); published with three seeds at the ``cpu`` size (Pre-LN slope
  -0.483, -0.483, -0.485; Post-LN 0.017, 0.019, 0.015). The full config is left to a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from constructions.prenorm_gradients import ARCHS as ARCHS
from constructions.prenorm_gradients import MeanFieldTransformer as MeanFieldTransformer
from constructions.prenorm_gradients import mean_field_transformer as mean_field_transformer
from empirics.compare import loglog_slope
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot
from empirics.sweep import sweep

# --- one Monte Carlo point -------------------------------------------------------------------

def point_seed(seed: int, arch: str, depth: int, chunk: int) -> int:
    """An independent stream per (seed, arch, depth, chunk), via numpy's SeedSequence."""
    sequence = np.random.SeedSequence([seed, ARCHS.index(arch), depth, chunk])
    return int(sequence.generate_state(1, dtype=np.uint64)[0] % 2**63)


def measure_point(point: dict) -> dict[str, Any]:
    """Gradient norms and residual norms of ``point["trials"]`` initialisations.

    ``point``: ``arch, depth, d, tokens, trials, seed, chunk, dtype, device`` and optionally
    ``build`` (a picklable builder with :func:`mean_field_transformer`'s signature).
    """
    build: Callable[..., MeanFieldTransformer] = point.get("build") or mean_field_transformer
    dtype = {"float32": torch.float32, "float64": torch.float64}[point["dtype"]]
    device = torch.device(point["device"])
    stream = point_seed(point["seed"], point["arch"], point["depth"], point["chunk"])
    model = build(point["arch"], point["depth"], point["d"], trials=point["trials"],
                  seed=stream, dtype=dtype, device=device)
    generator = torch.Generator().manual_seed(stream ^ 0x5EED)
    shape = (point["trials"], point["tokens"], point["d"])
    x = torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype=dtype,
                                                                        device=device)
    labels = torch.randint(point["d"], shape[:2], generator=generator).to(device)
    logits = model(x)
    # sum over trials of each trial's mean token loss: the gradient slice of trial t is the
    # gradient of trial t's own loss
    loss = nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
    loss.mean(dim=1).sum().backward()
    gradient = model.W_2_last.grad.flatten(1).norm(dim=1)
    return {"arch": point["arch"], "depth": point["depth"],
            "grad_norm": gradient.detach().cpu().double().tolist(),
            "norm_ratio": model.residual_norms(x).cpu().double().tolist()}


# --- the Monte Carlo -------------------------------------------------------------------------

def lemma_band(arch: str, depth: int) -> tuple[float, float]:
    r"""Lemma 1 on :math:`E\lVert\cdot\rVert^2/d`: ``(1.5, 1.5)`` for Post-LN, and
    ``(1 + L/2, 1 + 3L/2)`` for Pre-LN after ``L`` layers."""
    if arch == "post":
        return 1.5, 1.5
    return 1 + depth / 2, 1 + 3 * depth / 2


def monte_carlo(config: dict, seed: int = 0, *, build: Callable | None = None,
                device: torch.device | str = "cpu", progress: bool = False
                ) -> dict[str, Any]:
    """Run the sweep over (arch, depth, chunk of trials) and summarise it.

    Returns ``{"rows": [...], "slopes": {arch: (slope, se)}}``; each row holds arch, depth,
    the mean and standard error of the gradient norm and of the norm ratio, the Lemma band,
    and the number of trials.
    """
    chunks = max(1, math.ceil(config["trials"] / config["chunk"]))
    points = [{"arch": arch, "depth": depth, "d": config["d"], "tokens": config["tokens"],
               "trials": min(config["chunk"], config["trials"] - k * config["chunk"]),
               "seed": seed, "chunk": k, "dtype": config["dtype"], "device": str(device),
               "build": build}
              for arch in config["archs"] for depth in config["depths"] for k in range(chunks)]
    outputs = sweep(measure_point, points, workers=config["workers"],
                    backend=config["backend"], progress=progress, desc="prenorm-gradients")
    pooled: dict[tuple[str, int], dict[str, list[float]]] = {}
    for out in outputs:
        slot = pooled.setdefault((out["arch"], out["depth"]), {"grad_norm": [],
                                                               "norm_ratio": []})
        slot["grad_norm"] += out["grad_norm"]
        slot["norm_ratio"] += out["norm_ratio"]
    rows = []
    for (arch, depth), values in pooled.items():
        g, r = np.asarray(values["grad_norm"]), np.asarray(values["norm_ratio"])
        low, high = lemma_band(arch, depth)
        rows.append({"arch": arch, "depth": depth, "trials": len(g),
                     "grad_mean": float(g.mean()), "grad_sem": float(g.std(ddof=1)
                                                                     / math.sqrt(len(g))),
                     "norm_mean": float(r.mean()), "norm_sem": float(r.std(ddof=1)
                                                                     / math.sqrt(len(r))),
                     "band_low": low, "band_high": high})
    slopes = {}
    for arch in config["archs"]:
        mine = sorted((r for r in rows if r["arch"] == arch), key=lambda r: r["depth"])
        fit = loglog_slope([r["depth"] for r in mine], [r["grad_mean"] for r in mine],
                           sem=[r["grad_sem"] for r in mine])
        slopes[arch] = (fit["slope"], fit["se"])
    return {"rows": rows, "slopes": slopes}


def run(config: dict, device: torch.device, seed: int, *, build: Callable | None = None,
        progress: bool = True) -> Result:
    """The Monte Carlo as a :class:`Result`: per-arch ``slope``/``slope_se`` metrics, the
    ``monte-carlo`` table (one row per arch and depth) and the two figures. ``build`` replaces
    the mean-field builder (a mutant's broken construction)."""
    # On a GPU one process does every point (the points are batched tensor work); on the
    # CPU the config's backend and workers decide.
    if device.type == "cuda":
        config = {**config, "backend": "serial"}
    summary = monte_carlo(config, seed, build=build, device=device, progress=progress)
    result = Result("prenorm-gradients", config, seed, str(device))
    for arch, (slope, se) in summary["slopes"].items():
        result.metrics[metric_key(arch, "slope")] = slope
        result.metrics[metric_key(arch, "slope_se")] = se
    for row in summary["rows"]:
        key = metric_key(row['arch'], f"L{row['depth']}")
        result.metrics[metric_key(key, "grad_norm")] = row["grad_mean"]
        result.metrics[metric_key(key, "norm_ratio")] = row["norm_mean"]
    result.table("monte-carlo", ["arch", "L", "trials", "grad norm mean", "grad norm SE",
                                 "E|x|^2/d", "SE", "Lemma low", "Lemma high"],
                 [[r["arch"], r["depth"], r["trials"], r["grad_mean"], r["grad_sem"],
                   r["norm_mean"], r["norm_sem"], r["band_low"], r["band_high"]]
                  for r in sorted(summary["rows"], key=lambda r: (r["arch"], r["depth"]))])
    result.figures["gradients"] = gradient_figure(summary)
    result.figures["norms"] = norm_figure(summary)
    return result


def gradient_figure(summary: dict[str, Any]):
    """Log-log gradient norm against depth with ±2 SE bars and the fitted slopes."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for arch, (slope, se) in summary["slopes"].items():
        rows = sorted((r for r in summary["rows"] if r["arch"] == arch),
                      key=lambda r: r["depth"])
        depths = [r["depth"] for r in rows]
        means = [r["grad_mean"] for r in rows]
        ax.errorbar(depths, means, yerr=[2 * r["grad_sem"] for r in rows], marker="o",
                    capsize=3, label=f"{arch}-LN: slope {slope:.3f} ± {se:.3f}")
    if "pre" in summary["slopes"]:
        first = min((r for r in summary["rows"] if r["arch"] == "pre"),
                    key=lambda r: r["depth"])
        depths = sorted({r["depth"] for r in summary["rows"]})
        ax.plot(depths, [first["grad_mean"] * (L / first["depth"]) ** -0.5 for L in depths],
                "k--", lw=1, label=r"$\propto L^{-1/2}$")
    ax.set(xscale="log", yscale="log", xlabel="depth L",
           ylabel=r"$\|\partial \mathcal{L}/\partial W^{2,L}\|_F$ (mean ± 2 SE)",
           title="gradient at initialisation (Xiong et al. 2020, Thm 1)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def norm_figure(summary: dict[str, Any]):
    """Lemma 1: measured E|x|^2/d against depth, with the band."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for arch in summary["slopes"]:
        rows = sorted((r for r in summary["rows"] if r["arch"] == arch),
                      key=lambda r: r["depth"])
        depths = [r["depth"] for r in rows]
        ax.errorbar(depths, [r["norm_mean"] for r in rows],
                    yerr=[2 * r["norm_sem"] for r in rows], marker="o", capsize=3,
                    label=f"{arch}-LN measured")
        ax.fill_between(depths, [r["band_low"] for r in rows], [r["band_high"] for r in rows],
                        alpha=0.15, label=f"{arch}-LN Lemma 1")
    ax.set(xscale="log", yscale="log", xlabel="depth L", ylabel=r"$E\|x\|^2/d$",
           title="residual norm (Pre-LN: x_{L+1}; Post-LN: x^{post,5}_L)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def summarize_seeds(per_seed: list[dict]) -> dict[str, Any]:
    """Across seeds: each arch's gradient norm against depth, mean ± std over seeds."""
    from empirics.sweep import aggregate, errorbar_figure

    rows = []
    for data in per_seed:
        for key, value in data["metrics"].items():
            parts = key.split("/")
            if len(parts) == 3 and parts[2] == "grad_norm":
                rows.append({"arch": parts[0], "depth": int(parts[1][1:]), "grad_norm": value})
    figures = {}
    for arch in ARCHS:
        groups = aggregate([r for r in rows if r["arch"] == arch], by=("depth",),
                           metrics=("grad_norm",))
        if groups:
            figures[f"{arch}-seeds"] = errorbar_figure(
                groups, x="depth", metrics=("grad_norm",), logx=True, logy=True,
                title=f"{arch}-LN gradient norm over {len(per_seed)} seeds",
                ylabel="grad norm (mean ± std over seeds)")
    return figures


DEPTHS = [1, 2, 4, 8, 16, 32]
# Smoke: the catalogue's Monte Carlo (16 tokens, 40 trials, L in 1..32) at d=64 instead of
# 128: drawing the weights dominates and scales as d^2; about a second of one CPU core.
SMOKE = {"d": 64, "tokens": 16, "trials": 40, "chunk": 40, "depths": DEPTHS,
         "archs": list(ARCHS), "dtype": "float64", "workers": 1, "backend": "serial"}
# Full: d=512, 64 tokens, 200 trials, L up to 128, for a GPU. Chunks of 10 trials keep one
# point's weights (128 layers x 10 trials x 4 x 512^2 floats) near 5 GB.
FULL = {"d": 512, "tokens": 64, "trials": 200, "chunk": 10,
        "depths": [1, 2, 4, 8, 16, 32, 64, 128], "archs": list(ARCHS), "dtype": "float32",
        "workers": None, "backend": "process"}
# Cpu: between the two, for a CPU-minute a seed on one core: d=128, 32 tokens, 100 trials,
# L up to 64 (chunks of 20 trials keep one point's weights near 0.3 GB).
CPU = {"d": 128, "tokens": 32, "trials": 100, "chunk": 20,
       "depths": [1, 2, 4, 8, 16, 32, 64], "archs": list(ARCHS), "dtype": "float32",
       "workers": 1, "backend": "serial"}

EXPERIMENT = Experiment(
    name="prenorm-gradients",
    description="Gradient norm at initialisation: Pre-LN decays as L^-1/2, Post-LN is flat",
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run,
    claims=("prenorm-gradients.residual-norm-band", "prenorm-gradients.last-layer-gradient"),
    summarize=summarize_seeds,
)
