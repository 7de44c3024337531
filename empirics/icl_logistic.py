r"""IR.8: one free softmax layer trained on one-step targets, then looped (Zhang & Cao 2026).

**Training.** The free layer :math:`w \mapsto w + \sum_i\mathrm{softmax}_i\big((wW_Q)\cdot
(z_iW_K)\big)\,z_iW_V` (:func:`constructions.icl_logistic.softmax_update`) has all of
:math:`W_Q, W_K, W_V \in \mathbb R^{d\times d}` trainable from a Gaussian initialisation. Each
batch draws fresh tasks (:math:`x_i \sim N(0, I_d)`, labels :math:`\pm1` at random: the
one-step map is defined for any data) and a query :math:`w = r u` with :math:`u` uniform on
the sphere and :math:`r \sim U[0, R]`, where :math:`R` covers the norms the loops reach. The
target is one normalized step from :math:`w`
(:func:`constructions.icl_logistic.ngd_step`), and the loss is the squared error relative to
the mean squared step length. Adam with a cosine schedule.

**Comparison** (gauge-invariant). The scores depend on :math:`W_Q W_K^\top` only (invariant
under :math:`W_Q \to W_QA`, :math:`W_K \to W_KA^{-\top}`) and the values on :math:`W_V`; the
construction has :math:`W_QW_K^\top = -I` and :math:`W_V = \eta I`. In function space, the
trained layer is looped from :math:`w_0 = 0` on held-out *separable* tasks and its iterates
are compared with the construction's: the largest relative distance and the smallest cosine
over the loops.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``icl-logistic``: 176 CPU-s for three seeds (about 59 a seed); published with three seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from constructions.icl_logistic import looped_ngd, ngd_step, separable_task, softmax_update
from empirics.experiment import Experiment, Result
from empirics.plots import pyplot
from empirics.training import HELD_OUT_SALT, TrainConfig, held_out_batch, train


class FreeSoftmaxLayer(nn.Module):
    """The trainable layer: one softmax head with a residual on the query (see above)."""

    def __init__(self, d: int, init_scale: float, generator: torch.Generator) -> None:
        super().__init__()
        self.W_Q, self.W_K, self.W_V = (
            nn.Parameter(init_scale * torch.randn(d, d, generator=generator,
                                                  dtype=torch.float64)) for _ in range(3))

    def forward(self, w: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        return softmax_update(w, Z, self.W_Q, self.W_K, self.W_V)[0]

    @torch.no_grad()
    def loop(self, Z: torch.Tensor, loops: int) -> torch.Tensor:
        """Iterates from :math:`w_0 = 0`: ``(B, loops + 1, d)``."""
        w = torch.zeros(Z.shape[0], Z.shape[-1], dtype=Z.dtype, device=Z.device)
        states = [w]
        for _ in range(loops):
            w = self(w, Z)
            states.append(w)
        return torch.stack(states, dim=1)


def one_step_batch(config: Mapping[str, Any], batch: int, generator: torch.Generator
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(w, Z, target)``: random queries and tasks, and one normalized step from each."""
    n, d, eta = config["n"], config["d"], config["eta"]
    X = torch.randn(batch, n, d, generator=generator, dtype=torch.float64)
    y = 2.0 * torch.randint(2, (batch, n), generator=generator).double() - 1.0
    u = torch.randn(batch, d, generator=generator, dtype=torch.float64)
    r = config["radius"] * torch.rand(batch, 1, generator=generator, dtype=torch.float64)
    w = r * u / u.norm(dim=-1, keepdim=True)
    return w, y.unsqueeze(-1) * X, ngd_step(w, X, y, eta)


def relative_step_error(layer: FreeSoftmaxLayer, batch) -> torch.Tensor:
    w, Z, target = batch
    return (layer(w, Z) - target).pow(2).sum(-1).mean() / (target - w).pow(2).sum(-1).mean()


def train_layer(config: Mapping[str, Any], device: torch.device, seed: int, *,
                progress: bool = True) -> tuple[FreeSoftmaxLayer, Any]:
    """Train the free layer on one-step targets; return it and its training history."""
    layer = FreeSoftmaxLayer(config["d"], config["init_scale"],
                             torch.Generator().manual_seed(seed + 1))

    def sample(step: int, generator: torch.Generator):
        return one_step_batch(config, config["batch"], generator)

    held_out = held_out_batch(sample, seed)
    history = train(layer, relative_step_error, sample,
                    TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="adam",
                                schedule="cosine", eval_every=config["eval_every"], seed=seed,
                                dtype="float64", progress=progress),
                    evaluate=lambda m: {"one_step_relative_error": float(relative_step_error(
                        m, tuple(t.to(device) for t in held_out)))},
                    device=device, desc="icl-logistic one-step layer")
    return layer, history


@torch.no_grad()
def compare_loops(layer: FreeSoftmaxLayer, config: Mapping[str, Any], *,
                  reference: Callable = looped_ngd, seed: int = 0):
    """Loop the trained layer on held-out separable tasks next to ``reference``'s iterates."""
    eta, loops, d = config["eta"], config["loops"], config["d"]
    generator = torch.Generator().manual_seed(seed + 2 * HELD_OUT_SALT)
    X, y = separable_task(config["n"], d, generator=generator, batch=config["eval_tasks"])
    device = layer.W_Q.device
    X, y = X.to(device), y.to(device)
    constructed = reference(eta, loops=loops, device=device).iterates(X, y)[:, 1:]
    learned = layer.loop(y.unsqueeze(-1) * X, loops)[:, 1:]
    distance = (learned - constructed).norm(dim=-1) / constructed.norm(dim=-1)
    cosine = nn.functional.cosine_similarity(learned, constructed, dim=-1)
    eye = torch.eye(d, dtype=layer.W_Q.dtype, device=device)
    metrics = {
        "max_relative_distance": float(distance.max()),
        "min_cosine": float(cosine.min()),
        "query_key_distance": float((layer.W_Q @ layer.W_K.T + eye).norm() / eye.norm()),
        "value_distance": float((layer.W_V - eta * eye).norm() / (eta * eye.norm())),
        "one_step_relative_error": float(relative_step_error(
            layer, one_step_batch(config, 512, torch.Generator().manual_seed(seed + 7)))),
    }
    return metrics, loops_figure(distance.cpu())


def loops_figure(distance: torch.Tensor):
    """Relative distance between the trained and the constructed iterates, per loop."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 3.4))
    loops = range(1, distance.shape[-1] + 1)
    for row in distance:
        ax.semilogy(loops, row.clamp_min(1e-16), color="tab:blue", alpha=0.4)
    ax.set(xlabel="loop t", ylabel="|w_t(trained) - w_t(construction)| / |w_t|",
           title="trained one-step layer, looped")
    fig.tight_layout()
    return fig


def run(config: dict, device: torch.device, seed: int) -> Result:
    result = Result("icl-logistic", config, seed, str(device))
    layer, history = train_layer(config, device, seed)
    metrics, figure = compare_loops(layer, config, seed=seed)
    result.metrics.update(metrics)
    result.training["layer"] = history.as_record()
    result.figures["loops"] = figure
    result.table("trained layer vs construction",
                 ["metric", "value"], [[k, round(v, 6)] for k, v in metrics.items()])
    return result


# Smoke: the catalogue's d = 5, n = 20, eta = 1; R = 12 covers |w_t| over 10 loops (|w_t| grows
# by at most eta * max|z_i| per loop, and about 1 per loop on these tasks).
SMOKE = {"d": 5, "n": 20, "eta": 1.0, "radius": 12.0, "init_scale": 0.3, "batch": 64,
         "steps": 300, "lr": 0.03, "eval_every": 100, "loops": 10, "eval_tasks": 16}
FULL = {"d": 5, "n": 20, "eta": 1.0, "radius": 60.0, "init_scale": 0.3, "batch": 1024,
        "steps": 5000, "lr": 0.01, "eval_every": 250, "loops": 50, "eval_tasks": 256}

EXPERIMENT = Experiment(
    name="icl-logistic",
    description="A softmax layer trained on one normalized GD step, looped (Zhang & Cao 2026)",
    configs={"smoke": SMOKE, "full": FULL},
    run=run,
    claims=("icl-logistic.trained-layer",),
    code=("constructions.icl_logistic",),
)
