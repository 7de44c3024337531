"""Benchmark: the trainer's steps per second against a bare PyTorch loop doing the same work.

::

    python -m empirics.bench [--steps 300] [--repeats 5] [--device auto|cpu|cuda] [--json]

Both loops train the same reference model (a two-layer attention-only transformer with
:math:`d = 64`, vocabulary 16, context 32, batch 64: the size of the induction-head
experiments) from the same seed on the same data stream, with AdamW at a constant rate. The
bare loop is what one would write by hand: sample, forward, backward, step, and one host
sync at the end. The engine is :func:`empirics.training.train` with its progress bar on and
one evaluation at the end. Runs alternate (bare, engine, bare, ...) so that background load
hits both alike, and the medians are compared; the ratio ``engine / bare`` is the overhead
figure (1.0 means none). Rates per CPU second of this process are reported too: on a shared
machine other processes stretch wall-clock time at random, but not the CPU time a loop uses.
Because both loops perform identical arithmetic, their final weights must agree bit for bit,
which the report also states: a ratio between loops that did different work would be
meaningless.

On CUDA it also reports samples per second (steps/s times the batch size), with a
``torch.cuda.synchronize()`` before each clock read.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from typing import Any

import torch
from torch import nn

from empirics.training import TrainConfig, pick_device, seed_everything, to_device, train

D_MODEL, VOCAB, CONTEXT, BATCH, LR = 64, 16, 32, 64, 1e-3


class ReferenceModel(nn.Module):
    """Token and position embeddings, two causal softmax attention layers, an unembedding."""

    def __init__(self, d: int = D_MODEL, vocab: int = VOCAB, context: int = CONTEXT) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.position = nn.Parameter(0.02 * torch.randn(context, d))
        self.layers = nn.ModuleList(nn.MultiheadAttention(d, 1, bias=False, batch_first=True)
                                    for _ in range(2))
        self.unembed = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).triu(1))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        for attention in self.layers:
            x = x + attention(x, x, x, attn_mask=self.mask, need_weights=False)[0]
        return self.unembed(x)


def sample_batch(step: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token sequences and their next tokens (the task does not matter for speed)."""
    tokens = torch.randint(VOCAB, (BATCH, CONTEXT + 1), generator=generator)
    return tokens[:, :-1], tokens[:, 1:]


def loss_fn(model: nn.Module, batch) -> torch.Tensor:
    tokens, targets = batch
    return nn.functional.cross_entropy(model(tokens).reshape(-1, VOCAB), targets.reshape(-1))


def _model(seed: int, device: torch.device) -> nn.Module:
    torch.manual_seed(seed)
    return ReferenceModel().to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bare_loop(steps: int, device: torch.device, seed: int = 0
              ) -> tuple[float, float, nn.Module]:
    """Steps per wall-clock second and per CPU second of a hand-written loop, and the model."""
    model = _model(seed, device)
    generator = seed_everything(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    model.train()
    _sync(device)
    started, cpu = time.perf_counter(), time.process_time()
    for step in range(steps):
        batch = to_device(sample_batch(step, generator), device)
        loss = loss_fn(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    float(loss.detach())  # the one host sync, as the trainer does at its final evaluation
    _sync(device)
    return (steps / (time.perf_counter() - started), steps / (time.process_time() - cpu),
            model)


def engine_loop(steps: int, device: torch.device, seed: int = 0, progress: bool = True
                ) -> tuple[float, float, nn.Module]:
    """Steps per wall-clock and per CPU second of :func:`empirics.training.train`."""
    model = _model(seed, device)
    config = TrainConfig(steps=steps, lr=LR, optimizer="adamw", eval_every=steps, seed=seed,
                         dtype="float32", progress=progress)
    _sync(device)
    started, cpu = time.perf_counter(), time.process_time()
    train(model, loss_fn, sample_batch, config, device=device, desc="bench")
    _sync(device)
    return (steps / (time.perf_counter() - started), steps / (time.process_time() - cpu),
            model)


def benchmark(steps: int = 300, repeats: int = 5, device: str | torch.device = "auto",
              progress: bool = True, warmup: int = 20) -> dict[str, Any]:
    """Alternate bare and engine runs ``repeats`` times; report medians and their ratio."""
    if steps < 1 or repeats < 1:
        raise ValueError(f"steps and repeats must be >= 1, got {steps}, {repeats}")
    device = pick_device(device)
    bare_loop(warmup, device)  # first-call costs (allocator, kernels) paid by neither side
    engine_loop(warmup, device, progress=False)
    bare, engine, bare_cpu, engine_cpu, identical = [], [], [], [], True
    for _ in range(repeats):
        rate, cpu_rate, bare_model = bare_loop(steps, device)
        bare.append(rate)
        bare_cpu.append(cpu_rate)
        rate, cpu_rate, engine_model = engine_loop(steps, device, progress=progress)
        engine.append(rate)
        engine_cpu.append(cpu_rate)
        identical &= all(torch.equal(a, b) for a, b in zip(bare_model.parameters(),
                                                            engine_model.parameters(),
                                                            strict=True))
    report = {"device": str(device), "threads": torch.get_num_threads(), "steps": steps,
              "repeats": repeats, "batch": BATCH,
              "bare_steps_per_s": statistics.median(bare),
              "engine_steps_per_s": statistics.median(engine),
              "bare_runs": bare, "engine_runs": engine, "identical_weights": identical,
              # per CPU second of this process: insensitive to other processes on a shared
              # machine (on a quiet one the two ratios agree)
              "bare_steps_per_cpu_s": statistics.median(bare_cpu),
              "engine_steps_per_cpu_s": statistics.median(engine_cpu)}
    report["ratio"] = report["engine_steps_per_s"] / report["bare_steps_per_s"]
    report["cpu_ratio"] = report["engine_steps_per_cpu_s"] / report["bare_steps_per_cpu_s"]
    if device.type == "cuda":
        report["bare_samples_per_s"] = report["bare_steps_per_s"] * BATCH
        report["engine_samples_per_s"] = report["engine_steps_per_s"] * BATCH
        report["device_name"] = torch.cuda.get_device_name(device)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m empirics.bench",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true",
                        help="benchmark the engine without its progress bar")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    report = benchmark(args.steps, args.repeats, args.device, progress=not args.no_progress)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"device {report['device']}, {report['threads']} thread(s), {args.steps} steps x "
          f"{args.repeats} alternating runs, batch {BATCH}")
    print(f"  bare PyTorch loop   {report['bare_steps_per_s']:9.1f} steps/s (median)")
    print(f"  empirics.training   {report['engine_steps_per_s']:9.1f} steps/s (median)")
    print(f"  ratio engine/bare   {report['ratio']:9.3f}   (target >= 0.95)")
    print(f"  per CPU second: bare {report['bare_steps_per_cpu_s']:.1f}, engine "
          f"{report['engine_steps_per_cpu_s']:.1f} steps, ratio {report['cpu_ratio']:.3f}")
    spread = max(report["bare_runs"]) / min(report["bare_runs"])
    print(f"  run-to-run spread of the bare loop: x{spread:.2f}"
          + ("  (a busy machine: rerun for a firm ratio)" if spread > 1.1 else ""))
    print(f"  identical final weights: {report['identical_weights']}")
    if "bare_samples_per_s" in report:
        print(f"  samples/s: bare {report['bare_samples_per_s']:.0f}, "
              f"engine {report['engine_samples_per_s']:.0f} on {report['device_name']}")
    return 0 if math.isfinite(report["ratio"]) else 1


if __name__ == "__main__":
    sys.exit(main())
