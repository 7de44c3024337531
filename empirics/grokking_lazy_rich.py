r"""Grokking as lazy to rich: full-batch GD over the output scale alpha, anchored to exact levels.

For each seed and each :math:`\alpha` the network of :mod:`constructions.grokking_lazy_rich` is
trained by full-batch gradient descent on the centred loss with rate :math:`\eta = N/\alpha^2`
(as in the authors' notebook). Beside it, the *linearised* network is trained by the same GD
from the same initialisation; in function space its iterates are
:math:`\delta W_t = \sum_p c_p(t)\nabla f_0(x_p)` with :math:`c_{t+1} = c_t - \frac{2\eta}{P}
(K c_t - y)`, so its whole path is exact. Every test loss here is the exact population loss
(GK.1 closed form), not a test-set estimate, and the lazy oracle is the exact NTK-regression
level.

All seeds and all :math:`\alpha` run as one batch of weight tensors: the gradient is written
out by hand (:math:`\partial L/\partial w_i = \frac{2}{P}\frac{\alpha}{N}\sum_p r_p
(1 + \varepsilon w_i^\top x_p)x_p`) because the shared trainer runs one model at a time, which
would cost several times the CPU budget of the default run.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``grokking-lazy-rich``: its full config cut to 200 of its 100000 steps did not finish within
  60 CPU-s, so a seed takes more than 6 CPU-hours (counting 15 CPU-s as start-up); left to a
  GPU.

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10
under load from other jobs; CPU seconds do not count waiting):

* ``grokking-lazy-rich``: 197 CPU-s for three seeds (about 66 a seed); published with three
  seeds at the ``cpu`` size (dim 50, 275 training points, width 250, 10000 steps, 2 runs a
  seed): the first step with the test loss below the NTK level grows with alpha, 500-625 (alpha
  0.1), 875-1250 (0.3), 2375-3500 (1), 5750-8375 (3), never within 10000 steps for alpha 10 and
  30 (final test loss 0.54-0.87 and 0.58-1.04 against NTK levels 0.34-0.68); the recorded delay
  is negative or undefined at every alpha, so no grokking delay shows at this length of run.
* its scaling study (:mod:`empirics.grokking_scaling`, ``grokking-lazy-rich-scaling``, D = 6 to
  50 at alpha = 1, 40000 steps): about 32 CPU-s a seed; the delay falls with D.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from constructions.grokking_lazy_rich import (
    linearised_statistics,
    network_statistics,
    ntk_gram,
    ntk_level,
    quadratic_net,
    quadratic_test_loss,
    teacher_task,
)
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot

SMOKE = {"dim": 30, "train_size": 165, "width": 150, "eps": 0.02, "alphas": [0.3, 1.0, 10.0],
         "steps": 4000, "eval_every": 100, "seeds": 2, "dtype": "float32"}
# between the two, for a few CPU-minutes a seed: half the full task's sizes, the full run's
# alphas, a tenth of its steps
CPU = {"dim": 50, "train_size": 275, "width": 250, "eps": 0.02,
       "alphas": [0.1, 0.3, 1.0, 3.0, 10.0, 30.0], "steps": 10_000, "eval_every": 250,
       "seeds": 2, "dtype": "float32"}
FULL = {"dim": 100, "train_size": 550, "width": 500, "eps": 0.02,
        "alphas": [0.1, 0.3, 1.0, 3.0, 10.0, 30.0], "steps": 100_000, "eval_every": 500,
        "seeds": 5, "dtype": "float32"}


def run(config: dict, device: torch.device, seed: int, *, freeze_features: bool = False,
        lr_scale: float = 1.0) -> Result:
    """Train every (seed, alpha) pair; return per-alpha metrics as mean and std over seeds.

    ``freeze_features`` (a mutant) trains the linearised model in place of the network;
    ``lr_scale`` multiplies every rate (a mutant that changes the timescale).
    """
    dim, size, width, eps = config["dim"], config["train_size"], config["width"], config["eps"]
    alphas, steps, every = list(config["alphas"]), config["steps"], config["eval_every"]
    seeds = [seed + k for k in range(config["seeds"])]
    dtype = {"float32": torch.float32, "float64": torch.float64}[config["dtype"]]
    runs = [(s, a) for s in seeds for a in alphas]
    tasks = {s: teacher_task(dim, size, seed=s) for s in seeds}
    nets = [quadratic_net(dim, width, alpha=a, eps=eps, seed=10_000 + s) for s, a in runs]
    levels = torch.tensor([ntk_level(net, tasks[s]) for net, (s, _) in zip(nets, runs,
                                                                            strict=True)])
    X = torch.stack([tasks[s].X for s, _ in runs])                    # (R, P, D)
    y = torch.stack([tasks[s].y for s, _ in runs])                    # (R, P)
    beta = torch.stack([tasks[s].beta for s, _ in runs])              # (R, D)
    W0 = torch.stack([net.W0 for net in nets])                        # (R, N, D)
    alpha = torch.tensor([a for _, a in runs], dtype=torch.float64)
    lr = lr_scale * width / alpha ** 2
    # the linearised model, in function space on the training points (float64: exact path)
    K = torch.stack([ntk_gram(net, tasks[s].X) for net, (s, _) in zip(nets, runs,
                                                                     strict=True)])
    c = torch.zeros_like(y)

    Xd, yd, W0d = (t.to(device=device, dtype=dtype) for t in (X, y, W0))
    ad, lrd = alpha.to(device=device, dtype=dtype), lr.to(device=device, dtype=dtype)
    W = W0d.clone()
    z0 = Xd @ W0d.transpose(1, 2)
    f0 = ad[:, None] * (z0 + eps / 2 * z0 ** 2).mean(-1)              # (R, P)
    history: dict[str, list] = {"step": [], "train": [], "test": [], "lin_test": [],
                                "align": []}

    def record(step: int, residual: torch.Tensor) -> None:
        Wc = W.to(device="cpu", dtype=torch.float64)
        g, delta = network_statistics(Wc, W0, 1.0, eps, beta)
        g = alpha[:, None] * g                                        # alpha per run
        dC = (Wc.transpose(1, 2) @ Wc - W0.transpose(1, 2) @ W0) / width
        delta = alpha[:, None, None] * eps / 2 * dC - beta[:, :, None] * beta[:, None, :] / 2
        bb = beta[:, :, None] * beta[:, None, :]
        cos = (dC * bb).sum((1, 2)) / (torch.linalg.norm(dC, dim=(1, 2))
                                       * torch.linalg.norm(bb, dim=(1, 2))).clamp_min(1e-300)
        lin = torch.stack([quadratic_test_loss(*linearised_statistics(
            net, _delta_w(net, tasks[s].X, c[r]), tasks[s].beta))
            for r, (net, (s, _)) in enumerate(zip(nets, runs, strict=True))])
        history["step"].append(step)
        history["train"].append((residual.double().cpu() ** 2).mean(-1))
        history["test"].append(quadratic_test_loss(g, delta))
        history["lin_test"].append(lin)
        history["align"].append(cos)

    for step in range(steps + 1):
        if freeze_features:   # mutant: the network moves along its linearisation
            scale = 1 + eps * X @ W0.transpose(1, 2)                  # (R, P, N)
            W = W0d + ((alpha / width)[:, None, None] * (scale * c[:, :, None]).transpose(1, 2)
                       @ X).to(W0d)
        z = Xd @ W.transpose(1, 2)                                    # (R, P, N)
        residual = ad[:, None] * (z + eps / 2 * z ** 2).mean(-1) - f0 - yd
        if step % every == 0 or step == steps:
            record(step, residual)
        if step == steps:
            break
        grad = (2 / size) * (ad / width)[:, None, None] * (
            (residual[:, :, None] * (1 + eps * z)).transpose(1, 2) @ Xd)  # (R, N, D)
        W = W - lrd[:, None, None] * grad
        c = c - (2 * lr / size)[:, None] * (torch.einsum("rpq,rq->rp", K, c) - y)

    H = {k: torch.stack(v).numpy() if k != "step" else np.array(v) for k, v in history.items()}
    return _result(config, device, seed, runs, alphas, seeds, H, levels.numpy())


def _delta_w(net, X: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """The linearised model's weight change for function-space coefficients ``c``."""
    scale = 1 + net.eps * X @ net.W0.T                                # (P, N)
    return net.alpha / net.W0.shape[0] * (scale * c[:, None]).T @ X   # (N, D)


def _first(mask: np.ndarray, steps: np.ndarray) -> float:
    hits = np.flatnonzero(mask)
    return float(steps[hits[0]]) if hits.size else math.inf


def _result(config, device, seed, runs, alphas, seeds, H, levels) -> Result:
    result = Result("grokking-lazy-rich", config, seed, str(device))
    steps = H["step"]
    rows = []
    for a in alphas:
        idx = [r for r, (_, b) in enumerate(runs) if b == a]
        per = {"ntk_level": levels[idx], "final_test": H["test"][-1, idx],
               "final_train": H["train"][-1, idx], "final_lin_test": H["lin_test"][-1, idx],
               "final_align": H["align"][-1, idx],
               # the largest gap between the network and its linearisation, relative
               "lin_gap": np.max(np.abs(H["test"][:, idx] - H["lin_test"][:, idx])
                                 / H["lin_test"][:, idx], axis=0),
               # steps to train < 1% of initial, and to test < 1/2 of initial: the delay
               "delay": np.array([_first(H["test"][:, r] < H["test"][0, r] / 2, steps)
                                  - _first(H["train"][:, r] < H["train"][0, r] / 100, steps)
                                  for r in idx]),
               "below_ntk_step": np.array([_first(H["test"][:, r] < levels[r], steps)
                                           for r in idx])}
        for name, values in per.items():
            finite = values[np.isfinite(values)]
            result.metrics[metric_key(("alpha", a), name)] = float(np.mean(values))
            result.metrics[metric_key(("alpha", a), f"{name}_std")] = (float(np.std(finite))
                                                         if finite.size else math.nan)
        result.metrics[metric_key(("alpha", a), "lin_gap_max")] = float(np.max(per["lin_gap"]))
        # the extremes over seeds, so that a comparison can hold in every run, not on a mean
        result.metrics[metric_key(("alpha", a), "final_align_min")] = float(np.min(
            per["final_align"]))
        result.metrics[metric_key(("alpha", a), "final_align_max")] = float(np.max(
            per["final_align"]))
        result.metrics[metric_key(("alpha", a), "min_ratio_to_ntk")] = float(np.min(
            per["final_test"] / per["ntk_level"]))
        result.metrics[metric_key(("alpha", a), "max_ratio_to_ntk")] = float(np.max(
            per["final_test"] / per["ntk_level"]))
        rows.append([f"{a:g}", _pm(per["ntk_level"]), _pm(per["final_test"]),
                     _pm(per["final_lin_test"]), _pm(per["final_train"]),
                     _pm(per["lin_gap"]), _pm(per["delay"]), _pm(per["final_align"])])
    result.table("exact anchors against measured", [
        "alpha", "NTK level (exact)", "test loss (exact, GD)", "linearised test loss (exact)",
        "train loss", "max |net - lin| / lin", "delay (steps)", "cos(C - C0, bb^T)"], rows)
    result.metrics["seeds"] = float(len(seeds))
    result.figures["curves"] = _figure(H, runs, alphas, levels, steps)
    return result


def _pm(values: np.ndarray) -> str:
    finite = values[np.isfinite(values)]
    if finite.size < values.size:
        return f"inf in {values.size - finite.size}/{values.size}"
    return f"{np.mean(values):.4g} ± {np.std(values):.2g}"


def _figure(H, runs, alphas, levels, steps):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(alphas), figsize=(3.6 * len(alphas), 3.0), squeeze=False)
    for ax, a in zip(axes[0], alphas, strict=True):
        for r, (_, b) in enumerate(runs):
            if b != a:
                continue
            x = np.maximum(steps, 1)
            ax.loglog(x, H["train"][:, r], "--", color="C0", lw=1)
            ax.loglog(x, H["test"][:, r], color="C0", lw=1.5)
            ax.loglog(x, H["lin_test"][:, r], color="black", lw=1)
            ax.axhline(levels[r], color="C3", lw=1)
            ax2 = ax.twinx()
            ax2.semilogx(x, H["align"][:, r], ":", color="C2")
            ax2.set_ylim(-1, 1)
        ax.set_title(f"alpha = {a:g} (train --, test -, lin black, NTK red, cos green)",
                     fontsize=7)
        ax.set_xlabel("step")
    fig.tight_layout()
    return fig


EXPERIMENT = Experiment(
    name="grokking-lazy-rich",
    description="Grokking as lazy to rich: GD over alpha against the exact NTK level "
                "(Kumar et al. 2024)",
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run,
    claims=("training-dynamics.grokking-alpha-controls-laziness",),
    code=("constructions.grokking_lazy_rich",),
)
