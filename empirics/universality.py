r"""UA.3: a weak probe of single-layer approximation with and without positions (Gumaan 2025,
arXiv:2507.10581; the design is ours [D]). It measures; it proves nothing.

A trainable single layer on :math:`X \in [-1, 1]^{n\times d}`: tokens are embedded linearly
(:math:`e_k = x_kW_E + b_E`), plus a learned positional vector :math:`p_k` when
``positions`` is on; one softmax attention head with residual, one ReLU FFN of width ``width``
with residual, a linear readout. The targets are copy-token-1 (:math:`f(X)_k = x_1`) and,
in the full config, the equivariant :math:`g(X)_k = x_k\,\bar x`. After Adam training, the
sup error over a grid of :math:`[-1, 1]^{2\times 1}` is compared with the equivariance lower
bound :math:`\max_{\text{grid}}\lVert x_1 - x_2\rVert_\infty/2 = 1`
(``approximation.equivariance-lower-bound``), which no position-free layer can beat on
copy-token-1.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``single-layer-probe``: about 216 CPU-min a seed, extrapolated from two runs of the full
  config cut to 40 and 80 of its 20000 steps (32 and 58 CPU-s); not run to the end on a CPU, so
  its full config is left to a GPU.

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10
under load from other jobs; CPU seconds do not count waiting):

* ``single-layer-probe``: 118 CPU-s for three seeds (about 39 a seed); published with three
  seeds at the ``cpu`` size (copy-token-1 only, widths 16, 64 and 256, 3000 steps): with
  positions the sup error is 0.025, 0.008, 0.022 (width 16) and 0.015, 0.016, 0.016 (width 256);
  without positions 1.01, 1.02, 1.02 at width 256, against the bound 1. The equivariant target
  is left to the full config.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot
from empirics.training import TrainConfig, train

TARGETS = ("copy", "equivariant")


def target(name: str, x: torch.Tensor) -> torch.Tensor:
    """The probe's targets, ``(B, n, d)`` to the same."""
    if name == "copy":
        return x[:, :1].expand_as(x)
    if name == "equivariant":
        return x * x.mean(dim=1, keepdim=True)
    raise ValueError(f"target must be one of {TARGETS}, got {name!r}")


class ProbeLayer(nn.Module):
    """Embed (+ learned positions), one attention head with residual, one ReLU FFN with
    residual, readout: ``(B, n, d)`` to ``(B, n, d)``."""

    def __init__(self, d: int, n: int, width: int, d_model: int, positions: bool,
                 generator: torch.Generator) -> None:
        super().__init__()
        self.embed = nn.Linear(d, d_model)
        self.query, self.key, self.value = (nn.Linear(d_model, d_model, bias=False)
                                            for _ in range(3))
        self.ffn = nn.Sequential(nn.Linear(d_model, width), nn.ReLU(),
                                 nn.Linear(width, d_model))
        self.readout = nn.Linear(d_model, d)
        self.positions = (nn.Parameter(torch.randn(n, d_model, generator=generator))
                          if positions else None)
        with torch.no_grad():  # seeded initialisation, independent of the global RNG
            for p in self.parameters():
                if p is not self.positions:
                    p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[-1]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.embed(x)                                              # (B, n, d_model)
        if self.positions is not None:
            e = e + self.positions
        scores = self.query(e) @ self.key(e).transpose(-1, -2) / math.sqrt(e.shape[-1])
        y = e + scores.softmax(dim=-1) @ self.value(e)                 # (B, n, d_model)
        return self.readout(y + self.ffn(y))                           # (B, n, d)


def grid(points: int, n: int = 2) -> torch.Tensor:
    """Every point of a ``points``-per-axis grid of :math:`[-1, 1]^{n\\times 1}`."""
    axis = torch.linspace(-1, 1, points, dtype=torch.float64)
    return torch.cartesian_prod(*[axis] * n).reshape(-1, n, 1)


def probe(config: dict, name: str, width: int, positions: bool, device: torch.device,
          seed: int) -> float:
    """Train one layer and return its sup error on the grid."""
    n, d = 2, 1
    generator = torch.Generator().manual_seed(seed * 7919 + width * 2 + positions)
    model = ProbeLayer(d, n, width, config["d_model"], positions, generator)

    def sample(step: int, gen: torch.Generator) -> torch.Tensor:
        return 2 * torch.rand(config["batch"], n, d, generator=gen, dtype=torch.float64) - 1

    def loss_fn(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return (m(x) - target(name, x)).pow(2).mean()

    train(model, loss_fn, sample,
          TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="adam",
                      schedule="cosine", seed=seed, dtype=config["dtype"], progress=False),
          device=device, desc=f"probe {name} w={width}")
    points = grid(config["grid"]).to(device=device, dtype=next(model.parameters()).dtype)
    with torch.no_grad():
        return float((model(points) - target(name, points)).abs().max())


def run(config: dict, device: torch.device, seed: int) -> Result:
    result = Result("single-layer-probe", config, seed, str(device))
    rows = []
    for name in config["targets"]:
        for positions in config["positions"]:
            for width in config["widths"]:
                err = probe(config, name, width, positions, device, seed)
                label = "pe" if positions else "nope"
                result.metrics[metric_key(name, label, f"w{width}", "sup_error")] = err
                rows.append([name, label, width, err])
    bound = float((grid(config["grid"])[:, 0] - grid(config["grid"])[:, 1]).abs().max() / 2)
    result.metrics["copy/no_position_bound"] = bound
    result.table("sup error on the grid", ["target", "positions", "FFN width", "sup error"],
                 rows)
    result.figures["probe"] = probe_figure(rows, bound, config)
    return result


def probe_figure(rows: list[list[Any]], bound: float, config: dict):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for i, name in enumerate(config["targets"]):
        for label, style in (("pe", "o-"), ("nope", "s--")):
            mine = [r for r in rows if r[0] == name and r[1] == label]
            if not mine:
                continue
            ax.plot([r[2] for r in mine], [r[3] for r in mine], style, color=f"C{i}",
                    label=f"{name}, {'learned positions' if label == 'pe' else 'no positions'}")
    ax.axhline(bound, color="k", lw=1, ls=":", label="no-position bound (copy)")
    ax.set(xscale="log", yscale="log", xlabel="FFN width", ylabel="sup error on the grid",
           title=f"one layer, {config['steps']} Adam steps (a probe, not a proof)")
    ax.set_xticks(config["widths"], [str(w) for w in config["widths"]])
    ax.set_xticks([], minor=True)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# Smoke: copy-token-1 at FFN width 32 with learned positions, 200 Adam steps (about two CPU
# seconds here); the position-free layer is provably stuck at the bound, so it runs in full.
SMOKE = {"targets": ["copy"], "positions": [True], "widths": [32], "steps": 200, "lr": 1e-2,
         "batch": 128, "d_model": 16, "grid": 21, "dtype": "float64"}
# Full: both targets, with and without positions, widths 16..1024, 20k steps, 101-point grid.
FULL = {"targets": list(TARGETS), "positions": [True, False], "widths": [16, 64, 256, 1024],
        "steps": 20000, "lr": 3e-3, "batch": 1024, "d_model": 64, "grid": 101,
        "dtype": "float32"}

# Cpu: between the two, for a few CPU-minutes a seed: copy-token-1 with and without positions
# at three widths, 3000 steps.
CPU = {"targets": ["copy"], "positions": [True, False], "widths": [16, 64, 256],
       "steps": 3000, "lr": 3e-3, "batch": 256, "d_model": 32, "grid": 41, "dtype": "float32"}

EXPERIMENT = Experiment(
    name="single-layer-probe",
    description="Sup error of one trained layer, with and without learned positions",
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run,
    claims=("approximation.trained-positional-probe",),
)
