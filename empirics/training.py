"""One small trainer for every experiment: seeded, device-agnostic, with a progress bar.

::

    config = TrainConfig(steps=2000, lr=3e-3, target=0.95, target_metric="accuracy",
                         target_mode="max")
    eval_batch = held_out_batch(sample_batch, config.seed)
    result = train(model, loss_fn, sample_batch, config,
                   evaluate=lambda m: metrics_on(m, eval_batch))

* ``loss_fn(model, batch) -> loss`` (a scalar tensor) or ``(loss, {name: float})``;
* ``sample_batch(step, generator) -> batch``: fresh data per step from a seeded generator
  (a ``torch.Generator`` on the CPU, so the data stream is identical on every device). The
  trainer moves the batch to the model's device and casts its floating tensors to the
  training dtype (:func:`to_device`); integer tensors (tokens, labels) keep their dtype;
* ``evaluate(model) -> {name: float}``: metrics on a fixed held-out batch
  (:func:`held_out_batch` draws one from a generator disjoint from the training stream), run
  every ``eval_every`` steps and at the end, in ``torch.no_grad()`` and ``eval()`` mode.

Early stopping: once ``target_metric`` (from ``evaluate``, or the training ``loss``)
reaches ``target`` (``<=`` for ``target_mode="min"``, ``>=`` for ``"max"``) training stops.
A non-finite training loss also stops the run, with ``diverged=True``. The history of every
evaluation is kept (step, learning rate, training loss and metrics, evaluation metrics), and
:meth:`TrainResult.as_record` / :meth:`TrainResult.save` turn it into the JSON record an
experiment saves beside its figures.

On CUDA the usual speed-ups are options: TF32 matmuls (``tf32``; the previous precision is
restored afterwards), bf16 autocast (``autocast_bf16``, which needs ``dtype="float32"``
parameters) and ``torch.compile`` (``compile``). On the CPU they are ignored, so a float64
run on the CPU is plain IEEE float64 arithmetic: ``tests/test_empirics.py`` checks that SGD
through this trainer reproduces hand-written gradient descent to the last bit.

The loop does nothing per step beyond a bare PyTorch loop except advancing the progress bar
(and the scheduler, when there is one): ``python -m empirics.bench`` measures the ratio.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from empirics.provenance import json_ready

DTYPES = {"float32": torch.float32, "float64": torch.float64}
# Offset between a run's training seed and the seed of its held-out batch, so that the two
# generators never produce the same stream (a prime well beyond any seed used here).
HELD_OUT_SALT = 1_000_003


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a training run, so that the run can be reproduced from it."""

    steps: int
    lr: float
    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    weight_decay: float = 0.0
    momentum: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    schedule: Literal["constant", "cosine", "linear", "step"] = "constant"
    warmup: int = 0
    step_every: int = 1000      # for schedule="step": multiply the rate by step_gamma this often
    step_gamma: float = 0.3
    grad_clip: float | None = None
    eval_every: int = 50
    eval_at_start: bool = False  # also evaluate before the first step (step 0 of the curves)
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
                   "schedule": ("constant", "cosine", "linear", "step"),
                   "target_mode": ("min", "max"), "dtype": tuple(DTYPES)}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("eval_every", "step_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be an int >= 0, got {self.warmup!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip}")
        if not self.weight_decay >= 0 or not 0 <= self.momentum < 1:
            raise ValueError(f"weight_decay must be >= 0 and momentum in [0, 1), got "
                             f"{self.weight_decay}, {self.momentum}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.autocast_bf16 and self.dtype != "float32":
            raise ValueError("autocast_bf16 needs dtype='float32' parameters "
                             f"(autocast lowers float32 ops only), got dtype={self.dtype!r}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


@dataclass
class TrainResult:
    """What a run produced: the evaluation history and how the run ended."""

    history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    stopped_early: bool = False
    diverged: bool = False
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
                "stopped_early": self.stopped_early, "diverged": self.diverged,
                "wall_time": round(self.wall_time, 3),
                "steps_per_second": round(self.steps_per_second, 2), "device": self.device}

    def save(self, path: str | Path) -> Path:
        """Write :meth:`as_record` as JSON (non-finite floats as strings) and return the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(json_ready(self.as_record()), indent=1) + "\n")
        return path


def pick_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` picks CUDA when it is present, else the CPU; ``"cuda"`` without it is an error."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(f"device must be a str or torch.device, got {type(device).__name__}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:k]', got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested, but torch.cuda.is_available() "
                         "is False")
    return torch.device(device)


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, numpy and torch (every CUDA device too); return a CPU generator for data."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)


def held_out_batch(sample_batch: Callable[[int, torch.Generator], Any], seed: int,
                   step: int = -1) -> Any:
    """A fixed evaluation batch, drawn from a generator disjoint from the training stream.

    The training stream uses ``torch.Generator().manual_seed(seed)``; this uses
    ``seed + HELD_OUT_SALT``, so the held-out batch is the same on every call and every device
    and is not one of the training batches. ``step`` is passed to ``sample_batch`` (``-1``
    marks it as held out, for samplers that care).
    """
    return sample_batch(step, torch.Generator().manual_seed(seed + HELD_OUT_SALT))


def to_device(batch: Any, device: torch.device, dtype: torch.dtype | None = None) -> Any:
    """Move every tensor in ``batch`` (nested tuples, lists, dicts) to ``device``.

    Floating tensors are cast to ``dtype`` when it is given; integer and boolean tensors
    (tokens, labels, masks) keep theirs.
    """
    if isinstance(batch, torch.Tensor):
        cast = dtype if (dtype is not None and batch.is_floating_point()) else batch.dtype
        if batch.device == device and batch.dtype == cast:
            return batch
        return batch.to(device=device, dtype=cast, non_blocking=device.type == "cuda")
    if isinstance(batch, Mapping):
        return type(batch)({k: to_device(v, device, dtype) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(to_device(v, device, dtype) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device, dtype) for v in batch)
    return batch


def make_optimizer(params, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum,
                               weight_decay=config.weight_decay)
    kind = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    return kind(params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)


def learning_rate_factor(step: int, config: TrainConfig) -> float:
    """Multiplier of ``lr`` at ``step``: linear warm-up, then the chosen schedule.

    ``cosine`` and ``linear`` decay from 1 to 0 between the end of the warm-up and
    ``config.steps``; ``step`` multiplies by ``step_gamma`` every ``step_every`` steps.
    """
    if step < config.warmup:
        return (step + 1) / config.warmup
    progress = min(1.0, (step - config.warmup) / max(1, config.steps - config.warmup))
    if config.schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * progress))
    if config.schedule == "linear":
        return 1.0 - progress
    if config.schedule == "step":
        return config.step_gamma ** (step // config.step_every)
    return 1.0


def _reached(value: float | None, config: TrainConfig) -> bool:
    if config.target is None or value is None or math.isnan(value):
        return False
    return value <= config.target if config.target_mode == "min" else value >= config.target


def _split(output) -> tuple[torch.Tensor, Mapping[str, float]]:
    if isinstance(output, tuple):
        loss, metrics = output
        return loss, metrics
    return output, {}


@contextlib.contextmanager
def _float32_matmul_precision(tf32: bool) -> Iterator[None]:
    """Allow TF32 matmuls for the block and restore the previous precision afterwards."""
    if not tf32:
        yield
        return
    previous = torch.get_float32_matmul_precision()
    cudnn = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)
        torch.backends.cudnn.allow_tf32 = cudnn


def train(model: torch.nn.Module,
          loss_fn: Callable[[torch.nn.Module, Any], Any],
          sample_batch: Callable[[int, torch.Generator], Any],
          config: TrainConfig,
          *,
          evaluate: Callable[[torch.nn.Module], Mapping[str, float]] | None = None,
          device: str | torch.device = "auto",
          desc: str = "train") -> TrainResult:
    """Train ``model`` in place with ``config``; see the module docstring for the contract."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    device = pick_device(device)
    generator = seed_everything(config.seed)
    model.to(device=device, dtype=config.torch_dtype)
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("model has no parameter with requires_grad=True")
    optimizer = make_optimizer(trainable, config)
    # A constant rate needs no scheduler; skipping it keeps the loop as lean as a bare one.
    scheduler = None
    if config.schedule != "constant" or config.warmup > 0:
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: learning_rate_factor(step, config))
    on_cuda = device.type == "cuda"
    step_model = torch.compile(model) if (config.compile and on_cuda) else model
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16)
                if on_cuda and config.autocast_bf16 else contextlib.nullcontext())

    def evaluation(step: int, loss: float, metrics: Mapping[str, Any]) -> dict[str, float]:
        row = {"step": step, "lr": optimizer.param_groups[0]["lr"], "loss": loss,
               **{k: float(v) for k, v in metrics.items()}}
        if evaluate is not None:
            model.eval()
            with torch.no_grad(), autocast:
                row.update({f"eval_{k}" if k in row else k: float(v)
                            for k, v in evaluate(model).items()})
            model.train()
        return row

    result = TrainResult(device=str(device))
    bar = tqdm(total=config.steps, desc=desc, disable=not config.progress, leave=False,
               dynamic_ncols=True)
    shown = config.target_metric

    def report(row: dict[str, float]) -> None:
        result.history.append(row)
        postfix = {"loss": f"{row['loss']:.4g}"}
        if shown in row and shown != "loss":
            postfix[shown] = f"{row[shown]:.4g}"
        bar.set_postfix(postfix, refresh=False)

    started = time.perf_counter()
    with _float32_matmul_precision(config.tf32 and on_cuda):
        model.train()
        if config.eval_at_start:
            # No step has run, so there is no training loss: the row (and the progress bar,
            # until the first evaluation) shows loss=nan, which is not a divergence.
            report(evaluation(0, float("nan"), {}))
        for step in range(config.steps):
            batch = to_device(sample_batch(step, generator), device, config.torch_dtype)
            with autocast:
                loss, metrics = _split(loss_fn(step_model, batch))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(trainable, config.grad_clip)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            result.steps = step + 1
            last = step + 1 == config.steps
            if (step + 1) % config.eval_every == 0 or last:
                value = float(loss.detach())  # the only host sync: at evaluations
                report(evaluation(step + 1, value, metrics))
                if not math.isfinite(value):
                    result.diverged = True
                    result.stopped_early = not last
                    break
                if _reached(result.history[-1].get(config.target_metric), config):
                    result.stopped_early = not last
                    break
            bar.update(1)
    bar.update(result.steps - bar.n)
    bar.close()
    result.wall_time = time.perf_counter() - started
    return result


def config_dict(config: TrainConfig) -> dict[str, Any]:
    """The config as JSON-ready data, for records."""
    return asdict(config)
