r"""Distance generalisation in delay copy: RoPE, ALiBi and no positional encoding, against the
induction-copier baseline (Nevermann & Gros 2026, arXiv:2609.11913).

Decoders (:class:`empirics._tiny_gpt.TinyGPT`) with the three positional schemes are trained
on the C task (:class:`constructions.delay_copy.DelayCopyTask`) with :math:`d_C` in the
training range, the loss on the pasted tokens only. Evaluated at every distance of
``eval_distances`` (fresh sequences, every pair at that distance): the accuracy at paste steps
:math:`k \ge 2` (teacher forced), next to the exact accuracy of the induction copier
(:func:`constructions.delay_copy.induction_accuracy`) at the same gap :math:`g = d_C - 2`, and
the relative measure :math:`P = P_{out}/P_{in}` with :math:`P_{in}` (:math:`P_{out}`) the sum
of the accuracies at the distances inside (outside) the training range: our reading of the
paper's Eq. (2) [R].

The paper (8 layers, width 512) finds NoPE best and RoPE worst out of distribution, and that
NoPE can fail to learn the task at all in small models (its Fig. 7). The smoke configuration
is far smaller and only records what happens.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``delay-copy``: its full config cut to 80 of its 40000 steps did not finish within 61 CPU-s,
  so a seed takes more than 6 CPU-hours (counting 15 CPU-s as start-up); left to a GPU.

Measured cpu-config cost (one thread, 2026-12-04, ``/usr/bin/time`` user seconds of one
``python -m empirics run ... --seeds 3 --workers 1 --threads 1`` process, start-up included):

* ``delay-copy`` cpu: 69 CPU-s for 3 seeds (about 23 a seed);
* ``delay-copy-scaling`` cpu (NoPE alone, 300, 600, 1200, 2400 steps): 299 CPU-s for 3 seeds
  (about 100 a seed). NoPE's out-of-distribution accuracy rises: 0.016 per doubling, 95%
  interval [0.008, 0.024] over the seeds (induction-variants.dg-nope-ood-scaling).
"""

from __future__ import annotations

import numpy as np
import torch

from constructions.delay_copy import DelayCopyTask, induction_accuracy
from empirics._tiny_gpt import GPTConfig, TinyGPT
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot
from empirics.scaling import run_study, study_config, summarize_study
from empirics.training import TrainConfig, train

# arm name -> positional scheme of empirics._tiny_gpt ("none" is NoPE)
SCHEMES = {"rope": "rope", "alibi": "alibi", "none": "none"}


def make_task(config: dict) -> DelayCopyTask:
    return DelayCopyTask(n_data=config["n_data"], copy_len=config["copy_len"],
                         distances=tuple(config["train_distances"]), length=config["length"],
                         skip=config["skip"])


def later_steps(task: DelayCopyTask, batch) -> torch.Tensor:
    """(B, T) bool: positions predicting a pasted token at step k >= 2."""
    keep = torch.zeros_like(batch.mask)
    for b, pairs in enumerate(batch.pairs):
        for pair in pairs:
            for k in range(2, task.copy_len + 1):
                position = pair.second + k - 1
                if position < task.length and batch.mask[b, position]:
                    keep[b, position] = True
    return keep


def accuracy_by_distance(model, task, sets) -> dict[int, float]:
    device = next(model.parameters()).device
    out = {}
    for distance, (tokens, targets, keep) in sets.items():
        predicted = model(tokens.to(device)).argmax(-1).cpu()
        out[distance] = float((predicted == targets)[keep].double().mean())
    return out


def run_delay_copy(config: dict, device: torch.device, seed: int) -> Result:
    task = make_task(config)
    lo, hi = config["train_distances"]
    sets = {}
    for distance in config["eval_distances"]:
        batch = task.sample(config["eval_batch"], np.random.default_rng(seed + 10 ** 6 + distance),
                            distance=distance)
        sets[distance] = (batch.tokens, batch.targets, later_steps(task, batch))
    result = Result("delay-copy", config, seed, str(device))
    curves = {}
    for scheme in config["schemes"]:
        model = TinyGPT(GPTConfig(task.vocab_size, task.length, d_model=config["d_model"],
                                  heads=(config["n_heads"],) * config["layers"],
                                  mlp=4 * config["d_model"], positional=SCHEMES[scheme],
                                  layer_norm=True, dropout=config["dropout"]), seed=seed)
        rng = np.random.default_rng(seed + 1)

        def sample(step, generator, rng=rng):
            batch = task.sample(config["batch"], rng)
            return batch.tokens, batch.targets

        def loss_fn(model, batch):
            tokens, targets = batch
            logits = model(tokens)
            return torch.nn.functional.cross_entropy(logits[targets >= 0], targets[targets >= 0])

        trained = train(model, loss_fn, sample,
                        TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="adamw",
                                    weight_decay=config["weight_decay"], seed=seed,
                                    warmup=config["warmup"], eval_every=config["steps"],
                                    progress=False),
                        device=device, desc=scheme)
        result.training[scheme] = trained.as_record()
        model.eval()
        with torch.no_grad():
            curve = accuracy_by_distance(model, task, sets)
        curves[scheme] = curve
        inside = sum(a for d, a in curve.items() if lo <= d <= hi)
        outside = sum(a for d, a in curve.items() if not lo <= d <= hi)
        for key, values in (("in_distribution", [a for d, a in curve.items() if lo <= d <= hi]),
                            ("out_of_distribution",
                             [a for d, a in curve.items() if not lo <= d <= hi])):
            result.metrics[metric_key(scheme, key)] = float(np.mean(values)) if values else float(
                "nan")
        result.metrics[metric_key(scheme, "P")] = outside / inside if inside > 0 else float("nan")
    baseline = {d: float(induction_accuracy(task.n_data, task.copy_len, max(d - 2, 0),
                                            exact=False)) for d in config["eval_distances"]}
    result.table("accuracy at steps k >= 2", ["scheme", "in distribution",
                                               "out of distribution", "P = P_out / P_in"],
                 [[s, round(result.metrics[metric_key(s, "in_distribution")], 3),
                   round(result.metrics[metric_key(s, "out_of_distribution")], 3),
                   round(result.metrics[metric_key(s, "P")], 3)] for s in curves])
    result.figures["distance"] = plot(curves, baseline, (lo, hi))
    return result


def plot(curves: dict, baseline: dict, train_range: tuple[int, int]):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.axvspan(train_range[0], train_range[1], color="0.9", label="training distances")
    for scheme, curve in curves.items():
        ax.plot(list(curve), list(curve.values()), "o-", ms=3, label=scheme)
    ax.plot(list(baseline), list(baseline.values()), "k--", label="induction copier (exact)")
    ax.set_xlabel("distance d_C between the C tokens")
    ax.set_ylabel("accuracy at paste steps k ≥ 2")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    return fig


SMOKE = {"n_data": 16, "copy_len": 4, "train_distances": (6, 10), "length": 64, "skip": 8,
         "eval_distances": tuple(range(2, 31, 2)), "layers": 2, "d_model": 32, "n_heads": 4,
         "steps": 300, "batch": 32, "lr": 3e-3, "weight_decay": 0.05, "warmup": 0,
         "dropout": 0.0, "eval_batch": 32, "schemes": tuple(SCHEMES)}
# The claim's CPU configuration (induction-variants.dg-gd-small-models) is the smoke size.
CPU = dict(SMOKE)
FULL = {"n_data": 128, "copy_len": 10, "train_distances": (15, 25), "length": 256, "skip": 18,
        "eval_distances": tuple(range(1, 121)), "layers": 8, "d_model": 512, "n_heads": 8,
        "steps": 40_000, "batch": 64, "lr": 3e-4, "weight_decay": 0.05, "warmup": 3000,
        "dropout": 0.1, "eval_batch": 64, "schemes": tuple(SCHEMES)}

DELAY_COPY = Experiment(
    name="delay-copy",
    description="delay copy with RoPE, ALiBi and NoPE: accuracy against distance and the "
                "induction-copier baseline",
    claims=("induction-variants.dg-gd-small-models",),
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run_delay_copy,
    code=("constructions.delay_copy", "empirics._tiny_gpt"),
)

# The scaling study: NoPE (the paper's best encoding out of distribution) alone, its out- and
# in-distribution accuracy against training steps, the cpu config the smallest size. Each arm
# has its own seeded model, data stream and trainer, so the NoPE arm trained alone is the NoPE
# arm of the three-arm run.
STUDY_QUANTITIES = ("none/out_of_distribution", "none/in_distribution")
STUDY_CONFIGS = {
    "smoke": study_config("smoke", "steps", [5, 10, 20], STUDY_QUANTITIES,
                          overrides={"schemes": ("none",), "eval_batch": 4,
                                     "eval_distances": (4, 8, 12)}),
    "cpu": study_config("cpu", "steps", [300, 600, 1200, 2400], STUDY_QUANTITIES,
                        overrides={"schemes": ("none",)}),
    "full": study_config("full", "steps", [10_000, 20_000, 40_000], STUDY_QUANTITIES,
                         overrides={"schemes": ("none",)}),
}


def run_scaling(config: dict, device: torch.device, seed: int) -> Result:
    return run_study(DELAY_COPY, "delay-copy-scaling", config, device, seed)


DELAY_COPY_SCALING = Experiment(
    name="delay-copy-scaling",
    description="delay copy: NoPE's out-of-distribution accuracy against training steps",
    claims=("induction-variants.dg-nope-ood-scaling",),
    configs=STUDY_CONFIGS,
    run=run_scaling,
    summarize=summarize_study,
    code=("empirics.scaling", *DELAY_COPY.code),
)
