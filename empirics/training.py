"""One small trainer for every experiment: seeded, device-agnostic, with a progress bar.

::

    config = TrainConfig(steps=2000, lr=3e-3, target=0.95, target_metric="accuracy",
                         target_mode="max")
    result = train(model, loss_fn, sample_batch, config, evaluate=evaluate)

* ``loss_fn(model, batch) -> loss`` (a scalar tensor) or ``(loss, {name: float})``;
* ``sample_batch(step, generator) -> batch``: fresh data per step from a seeded generator
  (a ``torch.Generator`` on the CPU, so the data stream is identical on every device);
* ``evaluate(model) -> {name: float}``: metrics on a fixed held-out batch, run every
  ``eval_every`` steps and at the end, in ``torch.no_grad()`` and ``eval()`` mode.

Early stopping: once ``target_metric`` (from ``evaluate``, or the training ``loss``)
reaches ``target`` (``<=`` for ``target_mode="min"``, ``>=`` for ``"max"``) training stops.
The history of every evaluation is kept, and :meth:`TrainResult.as_record` turns it into the
JSON record an experiment saves beside its figures.

On CUDA the usual speed-ups are options: TF32 matmuls (``tf32``), bf16 autocast
(``autocast_bf16``) and ``torch.compile`` (``compile``). On the CPU they are ignored, and
float64 training is exact to the usual rounding.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from tqdm.auto import tqdm

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a training run, so that the run can be reproduced from it."""

    steps: int
    lr: float
    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    weight_decay: float = 0.0
    momentum: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    schedule: Literal["constant", "cosine", "step"] = "constant"
    warmup: int = 0
    step_every: int = 1000      # for schedule="step": multiply the rate by step_gamma this often
    step_gamma: float = 0.3
    grad_clip: float | None = None
    eval_every: int = 50
    target: float | None = None
    target_metric: str = "loss"
    target_mode: Literal["min", "max"] = "min"
    seed: int = 0
    dtype: Literal["float32", "float64"] = "float32"
    tf32: bool = False
    autocast_bf16: bool = False
    compile: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be a positive int, got {self.steps!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr!r}")
        choices = {"optimizer": ("adamw", "adam", "sgd"),
                   "schedule": ("constant", "cosine", "step"),
                   "target_mode": ("min", "max"), "dtype": tuple(DTYPES)}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


@dataclass
class TrainResult:
    """What a run produced: the evaluation history and how the run ended."""

    history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    stopped_early: bool = False
    wall_time: float = 0.0
    device: str = "cpu"

    @property
    def final(self) -> dict[str, float]:
        return self.history[-1] if self.history else {}

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.wall_time if self.wall_time > 0 else float("nan")

    def series(self, name: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one metric across the evaluations that reported it."""
        rows = [h for h in self.history if name in h]
        return [int(h["step"]) for h in rows], [h[name] for h in rows]

    def as_record(self) -> dict[str, Any]:
        return {"history": self.history, "steps": self.steps,
                "stopped_early": self.stopped_early, "wall_time": round(self.wall_time, 3),
                "steps_per_second": round(self.steps_per_second, 2), "device": self.device}


def pick_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` picks CUDA when it is present, else the CPU; ``"cuda"`` without it is an error."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested, but torch.cuda.is_available() is False")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:k]', got {device!r}")
    return torch.device(device)


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, numpy and torch; return a CPU generator for the data stream."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def make_optimizer(params, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum,
                               weight_decay=config.weight_decay)
    kind = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    return kind(params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)


def learning_rate_factor(step: int, config: TrainConfig) -> float:
    """Multiplier of ``lr`` at ``step``: linear warm-up, then the chosen schedule."""
    if step < config.warmup:
        return (step + 1) / config.warmup
    if config.schedule == "cosine":
        progress = (step - config.warmup) / max(1, config.steps - config.warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    if config.schedule == "step":
        return config.step_gamma ** (step // config.step_every)
    return 1.0


def _reached(value: float, config: TrainConfig) -> bool:
    if config.target is None or value is None or math.isnan(value):
        return False
    return value <= config.target if config.target_mode == "min" else value >= config.target


def _split(output) -> tuple[torch.Tensor, Mapping[str, float]]:
    if isinstance(output, tuple):
        loss, metrics = output
        return loss, metrics
    return output, {}


def train(model: torch.nn.Module,
          loss_fn: Callable[[torch.nn.Module, Any], Any],
          sample_batch: Callable[[int, torch.Generator], Any],
          config: TrainConfig,
          *,
          evaluate: Callable[[torch.nn.Module], Mapping[str, float]] | None = None,
          device: str | torch.device = "auto",
          desc: str = "train") -> TrainResult:
    """Train ``model`` in place with ``config``; see the module docstring for the contract."""
    device = pick_device(device)
    generator = seed_everything(config.seed)
    model.to(device=device, dtype=config.torch_dtype)
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("model has no parameter with requires_grad=True")
    optimizer = make_optimizer(trainable, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: learning_rate_factor(step, config))
    on_cuda = device.type == "cuda"
    if on_cuda and config.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    step_model = torch.compile(model) if (config.compile and on_cuda) else model

    def autocast():
        if on_cuda and config.autocast_bf16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    result = TrainResult(device=str(device))
    bar = tqdm(total=config.steps, desc=desc, disable=not config.progress, leave=False,
               dynamic_ncols=True)
    started = time.perf_counter()
    last_train: dict[str, float] = {}
    for step in range(config.steps):
        model.train()
        batch = sample_batch(step, generator)
        with autocast():
            loss, metrics = _split(loss_fn(step_model, batch))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(trainable, config.grad_clip)
        optimizer.step()
        scheduler.step()
        result.steps = step + 1
        last = step + 1 == config.steps
        if (step + 1) % config.eval_every == 0 or last:
            last_train = {"step": step + 1, "loss": float(loss.detach()),
                          **{k: float(v) for k, v in metrics.items()}}
            if evaluate is not None:
                model.eval()
                with torch.no_grad():
                    last_train.update({f"eval_{k}" if k in last_train else k: float(v)
                                       for k, v in evaluate(model).items()})
            result.history.append(last_train)
            shown = config.target_metric if config.target_metric in last_train else "loss"
            bar.set_postfix({"loss": f"{last_train['loss']:.4g}",
                             shown: f"{last_train[shown]:.4g}"}, refresh=False)
            if _reached(last_train.get(config.target_metric), config):
                result.stopped_early = not last
                bar.update(step + 1 - bar.n)
                break
        bar.update(1)
    bar.close()
    result.wall_time = time.perf_counter() - started
    return result


def config_dict(config: TrainConfig) -> dict[str, Any]:
    """The config as JSON-ready data, for records."""
    return asdict(config)
