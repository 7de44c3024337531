r"""IR.9: gradient descent on a combined vs a factorized output-value map (Huang et al. 2025).

**Setup.** The reduced OCR model of :mod:`constructions.ocr`: logits :math:`W(e_n + e_r)` over
the answer tokens, trained with cross-entropy on the training facts and implications by
full-batch **plain gradient descent** (rate 1, as in the catalogue's measurement), from a
small Gaussian initialisation, either as one matrix :math:`W` (*combined*) or as
:math:`W = W_OW_V` with a hidden width :math:`h` (*factorized*).

**Implicit vs explicit bias.** Gradient descent on the cross-entropy of separable data
converges in direction to a minimum-norm max-margin solution: Frobenius for :math:`W`,
nuclear for :math:`W_OW_V` (the implicit bias). The paper's experiments use AdamW with weight
decay, which adds an *explicit* penalty: on :math:`W` it is :math:`\tfrac\lambda2\lVert W
\rVert_F^2`, on the factors :math:`\tfrac\lambda2(\lVert W_O\rVert_F^2 + \lVert W_V\rVert_F^2)
\ge \lambda\lVert W_OW_V\rVert_*`, with equality at balanced factors. Every variant is
therefore run with and without weight decay, and both are reported.

**What is measured** (functions of the product :math:`W` only, which every gauge
:math:`W_O \to W_OA`, :math:`W_V \to A^{-1}W_V` leaves unchanged): the margins of the test
implications (true animal minus the best other answer, and minus the best other *animal*,
which separates "cannot tell the animals apart" from "answers a city"), the test accuracy, the
smallest
training margin, the test margin relative to it (the nuclear solution has
:math:`\min(1, \sqrt{m/k})`), the nuclear norm per unit training margin next to the minimum
nuclear norm from cvxpy, and for factorized runs the balance
:math:`\tfrac12(\lVert W_O\rVert_F^2 + \lVert W_V\rVert_F^2)/\lVert W_OW_V\rVert_*`.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``ocr``: 358 CPU-s for three seeds (about 119 a seed); published with three seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from constructions.ocr import (
    FactImplicationTask,
    fact_implication_task,
    margins,
    min_norm_solution,
    nuclear_margin,
)
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot
from empirics.training import TrainConfig, train

PARAMETERISATIONS = ("combined", "factorized")


class CombinedMap(nn.Module):
    """Logits :math:`XW^\\top` with one trainable :math:`W` (answers x inputs)."""

    def __init__(self, task: FactImplicationTask, init: float, generator: torch.Generator,
                 hidden: int | None = None) -> None:
        super().__init__()
        self.W = nn.Parameter(init * torch.randn(task.answers, task.inputs,
                                                 generator=generator, dtype=torch.float64))

    def product(self) -> torch.Tensor:
        return self.W

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X @ self.product().T


class FactorizedMap(CombinedMap):
    """Logits :math:`X(W_OW_V)^\\top` with trainable :math:`W_O` (answers x h) and
    :math:`W_V` (h x inputs)."""

    def __init__(self, task: FactImplicationTask, init: float, generator: torch.Generator,
                 hidden: int | None = None) -> None:
        nn.Module.__init__(self)
        hidden = hidden or task.inputs
        self.W_O = nn.Parameter(init * torch.randn(task.answers, hidden, generator=generator,
                                                   dtype=torch.float64))
        self.W_V = nn.Parameter(init * torch.randn(hidden, task.inputs, generator=generator,
                                                   dtype=torch.float64))

    def product(self) -> torch.Tensor:
        return self.W_O @ self.W_V


BUILDERS: dict[str, Callable[..., CombinedMap]] = {"combined": CombinedMap,
                                                   "factorized": FactorizedMap}


@torch.no_grad()
def measure(model: CombinedMap, task: FactImplicationTask) -> dict[str, float]:
    """Test-implication margins and accuracy, training margin, norms (module docstring)."""
    W = model.product()
    test, train_margin = margins(W, *task.test_pairs), margins(W, *task.training_pairs)
    animals = margins(W, *task.test_pairs, among=slice(task.cities, task.answers))
    singular = torch.linalg.svdvals(W)
    result = {"test_margin_min": float(test.min()), "test_margin_median": float(test.median()),
              "test_margin_max": float(test.max()),
              "test_margin_max_abs": float(test.abs().max()),
              "animal_margin_max_abs": float(animals.abs().max()),
              "test_accuracy": float((test > 0).double().mean()),
              "train_margin_min": float(train_margin.min()),
              "normalized_test_margin": float(test.min() / train_margin.min()),
              "nuclear_per_margin": float(singular.sum() / train_margin.min()),
              "frobenius_per_margin": float(W.norm() / train_margin.min())}
    if isinstance(model, FactorizedMap):
        result["balance"] = float(0.5 * (model.W_O.norm() ** 2 + model.W_V.norm() ** 2)
                                  / singular.sum())
    return result


def train_map(config: Mapping[str, Any], kind: str, weight_decay: float, device: torch.device,
              seed: int, *, builders: Mapping[str, Callable[..., CombinedMap]] = BUILDERS,
              progress: bool = True) -> tuple[CombinedMap, Any, dict[str, float]]:
    """Train one parameterisation with plain GD; return the model, history and metrics."""
    if kind not in PARAMETERISATIONS:
        raise ValueError(f"kind must be one of {PARAMETERISATIONS}, got {kind!r}")
    task = task_of(config)
    model = builders[kind](task, config["init"], torch.Generator().manual_seed(seed),
                           config.get("hidden"))
    X, answers = task.training_pairs
    batch = (X.to(device), answers.to(device))
    history = train(model, lambda net, b: nn.functional.cross_entropy(net(b[0]), b[1]),
                    lambda step, generator: batch,
                    TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="sgd",
                                weight_decay=weight_decay, eval_every=config["eval_every"],
                                seed=seed, dtype="float64", progress=progress),
                    evaluate=lambda net: measure(net, task), device=device,
                    desc=f"ocr {kind} wd={weight_decay:g}")
    return model, history, measure(model.cpu(), task)


def task_of(config: Mapping[str, Any]) -> FactImplicationTask:
    return fact_implication_task(config["cities"], config["train_names_per_city"],
                                 config["test_names_per_city"])


def variants(config: Mapping[str, Any]) -> list[tuple[str, float]]:
    """Every (parameterisation, weight decay) pair the experiment runs."""
    return [(kind, wd) for wd in (0.0, config["weight_decay"]) for kind in PARAMETERISATIONS]


def metric_name(kind: str, weight_decay: float | None, metric: str) -> str:
    """The key of ``metric`` for one parameterisation ``kind`` trained with ``weight_decay``
    (``None``: the minimum-norm reference solution of that ``kind``, "fro" or "nuclear")."""
    if weight_decay is None:
        return metric_key(f"min-{kind}", metric)
    return metric_key(kind, ("wd", weight_decay), metric)


def run(config: dict, device: torch.device, seed: int, *,
        builders: Mapping[str, Callable[..., CombinedMap]] = BUILDERS,
        progress: bool = True) -> Result:
    result = Result("ocr", config, seed, str(device))
    task = task_of(config)
    histories = {}
    for kind, wd in variants(config):
        name = metric_key(kind, ("wd", wd))
        _, history, metrics = train_map(config, kind, wd, device, seed, builders=builders,
                                        progress=progress)
        histories[name] = history
        result.training[name] = history.as_record()
        result.metrics.update({metric_name(kind, wd, k): v for k, v in metrics.items()})
    if config.get("min_norm_reference", True):
        for norm in ("fro", "nuclear"):
            W = min_norm_solution(task, norm)
            singular = torch.linalg.svdvals(W)
            result.metrics[metric_name(norm, None, "nuclear_norm")] = float(singular.sum())
            result.metrics[metric_name(norm, None, "test_margin_min")] = float(
                margins(W, *task.test_pairs).min())
    result.metrics["derived_nuclear_test_margin"] = nuclear_margin(task)
    rows = []
    for kind, wd in variants(config):
        rows.append([kind, wd] + [round(result.metric(metric_name(kind, wd, k)), 4) for k in (
            "test_accuracy", "test_margin_min", "test_margin_median", "animal_margin_max_abs",
            "train_margin_min", "normalized_test_margin", "nuclear_per_margin")])
    result.table("test implications after GD", ["parameterisation", "weight decay", "accuracy",
                                                "min margin", "median margin",
                                                "max |margin among animals|", "train margin",
                                                "test / train margin", "nuclear / margin"],
                 rows)
    result.figures["margins"] = margins_figure(histories)
    return result


def margins_figure(histories: Mapping[str, Any]):
    """The smallest test-implication margin against the step, one line per variant."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, history in histories.items():
        ax.plot(*history.series("test_margin_min"), label=name,
                ls="-" if name.endswith("wd=0") else "--")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set(xlabel="GD step", ylabel="min test-implication margin",
           title="OCR: factorized learns the test implications, combined does not")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


# Smoke: the catalogue's GD measurement (C = 4 cities, 1 train and 2 test names per city,
# plain GD at rate 1 from scale 1e-3, 2000 steps); weight decay 1e-3 for the explicit arm.
SMOKE = {"cities": 4, "train_names_per_city": 1, "test_names_per_city": 2, "hidden": None,
         "init": 1e-3, "lr": 1.0, "steps": 2000, "eval_every": 250, "weight_decay": 1e-3,
         "min_norm_reference": True}
# Full: the authors' script's proportions (20 cities, 80 names, a 0.25 train split: 1 train and
# 3 test names per city), run ten times longer.
FULL = {"cities": 20, "train_names_per_city": 1, "test_names_per_city": 3, "hidden": None,
        "init": 1e-3, "lr": 1.0, "steps": 20000, "eval_every": 500, "weight_decay": 1e-3,
        "min_norm_reference": True}

EXPERIMENT = Experiment(
    name="ocr",
    description="OCR: GD on W_O W_V learns test implications, GD on W does not "
                "(Huang et al. 2025)",
    configs={"smoke": SMOKE, "full": FULL},
    run=run,
    claims=("ocr.gd-factorization", "ocr.implicit-vs-explicit"),
    code=("constructions.ocr",),
)
