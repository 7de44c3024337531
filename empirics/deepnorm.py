r"""DN.2: one optimiser step's output change against depth, Post-LN, Pre-LN and DeepNorm
(Wang et al. 2022, arXiv:2203.00555): the sequel to :mod:`empirics.prenorm_gradients`.

The setting is that experiment's mean-field one (Xiong et al. 2020): Gaussian weights
:math:`\mathcal N(0, 1/d)`, uniform attention :math:`\mathrm{Attn}(v)_i = \bar v\,W^VW^O`,
ReLU FFN :math:`\mathrm{ReLU}(vW^1)W^2` of width :math:`d`, no biases, LayerNorm without affine
terms, :math:`n` tokens :math:`x_i \sim \mathcal N(0, I_d)`, trials batched along a leading
dimension. Each of the :math:`N` layers has two sublayers :math:`G` (attention, FFN), wrapped as

* Post-LN: :math:`x \leftarrow \mathrm{LN}(x + G(x))`;
* DeepNorm: :math:`x \leftarrow \mathrm{LN}(\alpha x + G(x))` with :math:`W^V, W^O, W^1, W^2`
  scaled by :math:`\beta`; :math:`\alpha = (2N)^{1/4}`, :math:`\beta = (8N)^{-1/4}` (the
  decoder-only constants of :mod:`constructions.deepnorm`, [V code]);
* Pre-LN: :math:`x \leftarrow x + G(\mathrm{LN}(x))`, output :math:`\mathrm{LN}(x)`.

**The measurement** (ours [D]). All four weight matrices of every layer are trained on a random
regression loss :math:`\mathcal L = \mathrm{mean}_{i,c}(F(x)_{ic} - y_{ic})^2`, :math:`y` a
fixed Gaussian target, for ``steps`` steps from initialisation. For each step :math:`k` the
*model update* is the RMS output change :math:`\lVert F(x;\theta_{k}) - F(x;\theta_{k-1})
\rVert_F/\sqrt{nd}`. DeepNet's bound on :math:`\lVert\Delta F\rVert` is, as recalled, for an
SGD-like update through the budget :math:`\sum_l (v_l^2 + w_l^2)/\alpha^2` [R]; the checked
optimiser is plain SGD, and Adam (the paper's practice) is measured in the full config only.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``deepnorm``: a seed did not finish in 9 minutes of wall-clock on its own two-process pool
  (under load from other jobs), so its full config is left to a GPU (``python -m empirics
  run-all --device cuda``).

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10
under load from other jobs; CPU seconds do not count waiting):

* ``deepnorm``: 63 CPU-s for three seeds (about 21 a seed); published with three seeds at the
  ``cpu`` size (d=64, N up to 64): the SGD update slope in log N is -0.040, -0.030, -0.035 for
  DeepNorm at step 1 against 0.92, 0.90, 0.87 for Post-LN (step 5: -0.039, -0.029, -0.034
  against 0.79, 0.76, 0.81).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from constructions import _validate
from constructions._kernels import layer_norm_without_eps
from constructions.deepnorm import deepnorm_constants
from empirics.compare import loglog_slope
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot
from empirics.sweep import sweep

ARCHS = ("post", "deepnorm", "pre")
OPTIMIZERS = ("sgd", "adam")


class DeepNormStack(nn.Module):
    r"""``depth`` layers of (uniform attention, FFN) sublayers for ``trials`` initialisations.

    Weights ``W_V, W_O, W_1, W_2`` have shape ``(depth, trials, d, d)`` and are all trained.
    ``forward(x)`` maps ``(trials, n, d)`` to ``(trials, n, d)``.
    """

    def __init__(self, arch: str, alpha: float, W_V, W_O, W_1, W_2) -> None:
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
        self.arch, self.alpha = arch, alpha
        self.W_V, self.W_O, self.W_1, self.W_2 = (nn.Parameter(w) for w in (W_V, W_O, W_1, W_2))

    @property
    def depth(self) -> int:
        return self.W_V.shape[0]

    def _sublayers(self, layer: int):
        def attention(v):  # every token receives the mean of the values
            return v.mean(dim=-2, keepdim=True) @ self.W_V[layer] @ self.W_O[layer] \
                + torch.zeros_like(v)

        def ffn(v):
            return torch.relu(v @ self.W_1[layer]) @ self.W_2[layer]
        return attention, ffn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in range(self.depth):
            for sublayer in self._sublayers(layer):
                if self.arch == "pre":
                    x = x + sublayer(layer_norm_without_eps(x))                   # (trials, n, d)
                else:
                    x = layer_norm_without_eps(self.alpha * x + sublayer(x))
        return layer_norm_without_eps(x) if self.arch == "pre" else x


def deepnorm_stack(arch: str, depth: int, d: int, *, trials: int = 1, seed: int = 0,
                   beta: float | None = None, dtype: torch.dtype = torch.float64,
                   device: torch.device | str | None = None) -> DeepNormStack:
    r"""A :class:`DeepNormStack` with :math:`\mathcal N(0, \beta^2/d)` weights. For
    ``"deepnorm"``, :math:`\alpha, \beta` are the decoder-only constants of ``depth`` layers
    (``beta`` overrides :math:`\beta`, for the suite's mutant); otherwise
    :math:`\alpha = \beta = 1`."""
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    depth = _validate.positive_int("depth", depth)
    d = _validate.positive_int("d", d, minimum=2)
    trials = _validate.positive_int("trials", trials)
    alpha, scale = deepnorm_constants("decoder", depth) if arch == "deepnorm" else (1.0, 1.0)
    if beta is not None:
        scale = _validate.positive_float("beta", beta)
    dtype = _validate.float_dtype("dtype", dtype)
    device = torch.device(device or "cpu")
    generator = torch.Generator(device=device).manual_seed(seed)

    def gaussian() -> torch.Tensor:
        draw = torch.randn(depth, trials, d, d, generator=generator, dtype=torch.float32,
                           device=device)
        return (scale / math.sqrt(d) * draw).to(dtype=dtype)

    return DeepNormStack(arch, alpha, gaussian(), gaussian(), gaussian(), gaussian())


# --- one Monte Carlo point -------------------------------------------------------------------

def point_seed(seed: int, arch: str, depth: int, optimizer: str) -> int:
    """An independent stream per (seed, arch, depth, optimizer), via numpy's SeedSequence."""
    sequence = np.random.SeedSequence([seed, ARCHS.index(arch), depth,
                                       OPTIMIZERS.index(optimizer)])
    return int(sequence.generate_state(1, dtype=np.uint64)[0] % 2**63)


def measure_point(point: dict) -> dict[str, Any]:
    """RMS output change of each of ``point["steps"]`` optimiser steps, per trial."""
    dtype = {"float32": torch.float32, "float64": torch.float64}[point["dtype"]]
    device = torch.device(point["device"])
    stream = point_seed(point["seed"], point["arch"], point["depth"], point["optimizer"])
    beta = point["beta"] if point["arch"] == "deepnorm" else None
    model = deepnorm_stack(point["arch"], point["depth"], point["d"], trials=point["trials"],
                           seed=stream, beta=beta, dtype=dtype, device=device)
    generator = torch.Generator().manual_seed(stream ^ 0x5EED)
    shape = (point["trials"], point["tokens"], point["d"])
    x, y = (torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype=dtype,
                                                                            device=device)
            for _ in range(2))
    if point["optimizer"] == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=point["lr"]["sgd"])
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=point["lr"]["adam"])
    changes = []
    with torch.no_grad():
        before = model(x)
    for _ in range(point["steps"]):
        # each trial's loss is its own mean, so summing over trials keeps the gradients apart
        loss = (model(x) - y).pow(2).mean(dim=(1, 2)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            after = model(x)
        changes.append(((after - before).flatten(1).norm(dim=1)
                        / math.sqrt(shape[1] * shape[2])).double().cpu().tolist())
        before = after
    return {"arch": point["arch"], "depth": point["depth"], "optimizer": point["optimizer"],
            "changes": changes}


def monte_carlo(config: dict, seed: int = 0, *, device: torch.device | str = "cpu",
                progress: bool = False) -> dict[str, Any]:
    """Every (optimizer, arch, depth) point; rows of the mean and SE of each step's change."""
    points = [{**{k: config[k] for k in ("d", "tokens", "trials", "steps", "lr", "dtype",
                                          "beta")},
               "arch": arch, "depth": depth, "optimizer": opt, "seed": seed,
               "device": str(device)}
              for opt in config["optimizers"] for arch in config["archs"]
              for depth in config["depths"]]
    outputs = sweep(measure_point, points, workers=config["workers"],
                    backend=config["backend"], progress=progress, desc="deepnorm")
    rows = []
    for out in outputs:
        for step, values in enumerate(out["changes"], start=1):
            v = np.asarray(values)
            rows.append({"optimizer": out["optimizer"], "arch": out["arch"],
                         "depth": out["depth"], "step": step, "mean": float(v.mean()),
                         "sem": float(v.std(ddof=1) / math.sqrt(len(v))), "trials": len(v)})
    return {"rows": rows}


def _series(rows, optimizer: str, arch: str, step: int) -> list[dict]:
    return sorted((r for r in rows if (r["optimizer"], r["arch"], r["step"])
                   == (optimizer, arch, step)), key=lambda r: r["depth"])


def run(config: dict, device: torch.device, seed: int) -> Result:
    if device.type == "cuda":
        config = {**config, "backend": "serial"}
    summary = monte_carlo(config, seed, device=device, progress=True)
    result = Result("deepnorm", config, seed, str(device))
    rows = summary["rows"]
    for opt in config["optimizers"]:
        for arch in config["archs"]:
            for step in (1, config["steps"]):
                series = _series(rows, opt, arch, step)
                means = [r["mean"] for r in series]
                key = metric_key(opt, arch, f"step{step}")
                result.metrics[metric_key(key, "spread")] = max(means) / min(means)
                result.metrics[metric_key(key, "growth")] = means[-1] / means[0]
                fit = loglog_slope([r["depth"] for r in series], means,
                                   sem=[r["sem"] for r in series])
                result.metrics[metric_key(key, "slope")] = fit["slope"]
                result.metrics[metric_key(key, "slope_se")] = fit["se"]
    result.table("model-update", ["optimizer", "arch", "N", "step", "trials", "RMS change",
                                  "SE"],
                 [[r["optimizer"], r["arch"], r["depth"], r["step"], r["trials"], r["mean"],
                   r["sem"]] for r in sorted(rows, key=lambda r: (r["optimizer"], r["arch"],
                                                                   r["step"], r["depth"]))])
    for opt in config["optimizers"]:
        result.figures[f"update-{opt}"] = update_figure(rows, opt, config)
    return result


def update_figure(rows: list[dict], optimizer: str, config: dict):
    """Log-log RMS output change against depth, per arch, at the first and last step."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for i, arch in enumerate(config["archs"]):
        for step, style in ((1, "o-"), (config["steps"], "s--")):
            series = _series(rows, optimizer, arch, step)
            ax.errorbar([r["depth"] for r in series], [r["mean"] for r in series],
                        yerr=[2 * r["sem"] for r in series], fmt=style, color=f"C{i}",
                        capsize=3, label=f"{arch}, step {step}")
    lr = config["lr"][optimizer]
    ax.set(xscale="log", yscale="log", xlabel="layers N",
           ylabel=r"RMS $\|F(\theta_k) - F(\theta_{k-1})\|$ (mean ± 2 SE)",
           title=f"model update per {optimizer.upper()} step (lr {lr}), d={config['d']}")
    ax.set_xticks(config["depths"], [str(n) for n in config["depths"]])
    ax.set_xticks([], minor=True)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


LR = {"sgd": 0.05, "adam": 1e-3}
# Smoke: d=32, 8 tokens, 8 trials, N in 2..32, SGD only, 3 steps: about 2 s of one CPU core.
SMOKE = {"d": 32, "tokens": 8, "trials": 8, "steps": 3, "depths": [2, 4, 8, 16, 32],
         "archs": ["post", "deepnorm"], "optimizers": ["sgd"], "lr": LR, "beta": None,
         "dtype": "float64", "workers": 1, "backend": "serial"}
# Full: d=256, 64 tokens, 32 trials, N up to 256 (x 2 sublayers), all three archs, SGD and
# Adam, 5 steps, float32 on a GPU.
FULL = {"d": 256, "tokens": 64, "trials": 32, "steps": 5,
        "depths": [2, 4, 8, 16, 32, 64, 128, 256], "archs": list(ARCHS),
        "optimizers": list(OPTIMIZERS), "lr": LR, "beta": None, "dtype": "float32",
        "workers": None, "backend": "process"}

# Cpu: between the two, for a few CPU-minutes a seed: d=64, 16 tokens, 8 trials, N up to 64,
# all three archs, SGD and Adam, 5 steps, on one core.
CPU = {"d": 64, "tokens": 16, "trials": 8, "steps": 5, "depths": [2, 4, 8, 16, 32, 64],
       "archs": list(ARCHS), "optimizers": list(OPTIMIZERS), "lr": LR, "beta": None,
       "dtype": "float32", "workers": 1, "backend": "serial"}

EXPERIMENT = Experiment(
    name="deepnorm",
    description="One optimiser step's output change against depth: flat with DeepNorm, "
                "growing with Post-LN",
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run,
    claims=("approximation.deepnorm-update-flat",),
    code=("constructions.deepnorm", "empirics.prenorm_gradients"),
)
