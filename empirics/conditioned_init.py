r"""Conditioned initialisation: steps to learn induction heads, Gaussian against conditioned.

The two-layer attention-only model and the task of :mod:`empirics.induction_heads` (uniform
random sequences; accuracy on the positions with an earlier occurrence), trained by Adam to a
target accuracy with early stopping. The only difference between the two arms is the initial
:math:`W_Q, W_K, W_V` of every head: :math:`\mathcal N(0, 1/d)` entries (that module's
default) or the conditioned scheme of :func:`constructions.conditioned_init.conditioned_init`
(semi-orthogonal :math:`W_Q, W_K`, :math:`W_V` a slice of the identity) [S]. Every seed trains
both arms from the same embeddings, :math:`W_O` and data stream (a matched seed budget); the
effect size is the mean difference of steps-to-target over its standard deviation across seeds.
A seed's model initialisation, data and held-out batch, and conditioned weights come from
independent streams: children of ``numpy.random.SeedSequence(seed)`` (:func:`seed_streams`),
not one integer reused, so no two of them replay the same generator.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``conditioned-init``: its full config cut to 6 of its 3000 steps took 56 CPU-s and cut to 12
  did not finish within 60, so a seed takes more than 0.5 CPU-hours; left to a GPU.

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10
under load from other jobs; CPU seconds do not count waiting):

* ``conditioned-init``: 54 CPU-s for three seeds (about 18 a seed); published with three seeds
  at the ``cpu`` size (length 32, d=32, one head, lr 0.01, 8 runs a seed): both arms reach the
  target in every run, in 185, 186, 189 steps (Gaussian) against 186, 184, 184 (conditioned);
  effect size -0.08, 0.18, 0.33: no speed-up shows at this size and rate.
* its scaling study (:mod:`empirics.conditioned_init_scaling`, ``conditioned-init-scaling``,
  d = 16, 24, 32, one training seed a seed, eight seeds): at most about 7 CPU-s a seed; no
  direction is decided.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from constructions.conditioned_init import conditioned_init
from constructions.induction_heads import induction_targets
from empirics.compare import recall_accuracy
from empirics.experiment import Experiment, Result, metric_key
from empirics.induction_heads import attention_only, induction_loss, sample_tokens
from empirics.plots import pyplot
from empirics.training import TrainConfig, train

SMOKE = {"vocab_size": 16, "length": 32, "d_model": 32, "n_heads": 1, "steps": 600,
         "batch": 32, "lr": 1e-2, "eval_every": 10, "eval_batch": 256, "target": 0.95,
         "seeds": 6}
# between the two, for a few CPU-minutes a seed: the smoke's model and rate, with longer runs
# and more seeds per run
CPU = {"vocab_size": 16, "length": 32, "d_model": 32, "n_heads": 1, "steps": 1200,
       "batch": 32, "lr": 1e-2, "eval_every": 10, "eval_batch": 256, "target": 0.95,
       "seeds": 8}
FULL = {"vocab_size": 16, "length": 64, "d_model": 64, "n_heads": 2, "steps": 3000,
        "batch": 64, "lr": 3e-3, "eval_every": 10, "eval_batch": 1024, "target": 0.95,
        "seeds": 20}
ARMS = ("gaussian", "conditioned")


def _torch_seed(stream: np.random.SeedSequence) -> int:
    """A 63-bit torch seed drawn from a SeedSequence."""
    return int(stream.generate_state(1, np.uint64)[0] >> np.uint64(1))


def seed_streams(seed: int) -> dict[str, int]:
    """Independent torch seeds for one training seed: ``model`` (its initialisation), ``data``
    (the training stream and held-out batch) and ``condition`` (the conditioned weights)."""
    names = ("model", "data", "condition")
    children = np.random.SeedSequence(seed).spawn(len(names))
    return {name: _torch_seed(child) for name, child in zip(names, children, strict=True)}


def condition(model, seed: int) -> None:
    """Overwrite every head's W_Q, W_K, W_V with the conditioned scheme (in place); each head's
    weights from its own child of ``SeedSequence(seed)``."""
    with torch.no_grad():
        heads_per_layer = [layer.W_Q.shape[0] for layer in model.layers]
        streams = iter(np.random.SeedSequence(seed).spawn(sum(heads_per_layer)))
        for layer in model.layers:
            heads, d, width = layer.W_Q.shape
            for h in range(heads):
                W_Q, W_K, _ = conditioned_init(d, width, width, seed=_torch_seed(next(streams)))
                layer.W_Q[h].copy_(W_Q)
                layer.W_K[h].copy_(W_K)
                layer.W_V[h].copy_(torch.eye(d, heads * width)[:, h * width:(h + 1) * width])


def run(config: dict, device: torch.device, seed: int, *, conditioner=condition) -> Result:
    """``conditioner`` (a mutant when replaced) prepares the conditioned arm's model."""
    result = Result("conditioned-init", config, seed, str(device))
    steps = {arm: [] for arm in ARMS}
    curves = {arm: [] for arm in ARMS}
    for k in range(config["seeds"]):
        streams = seed_streams(seed + k)
        for arm in ARMS:
            model = attention_only(config["vocab_size"], config["length"],
                                   d_model=config["d_model"], n_layers=2,
                                   n_heads=config["n_heads"], seed=streams["model"])
            if arm == "conditioned":
                conditioner(model, streams["condition"])
            record = _train(model, config, device, streams["data"])
            hit = [s for s, a in zip(*record.series("eval_accuracy"), strict=True)
                   if a >= config["target"]]
            steps[arm].append(float(hit[0]) if hit else math.inf)
            curves[arm].append(record.series("eval_accuracy"))
    g, c = np.array(steps["gaussian"]), np.array(steps["conditioned"])
    diff = g - c                                   # positive: conditioned is faster
    finite = np.isfinite(diff)
    for arm, values in (("gaussian", g), ("conditioned", c)):
        for k, value in enumerate(values):  # per seed: what an interval over seeds needs
            result.metrics[metric_key(arm, "steps", ("seed", k))] = float(value)
        result.metrics[metric_key(arm, "steps_mean")] = float(np.mean(values))
        result.metrics[metric_key(arm, "steps_std")] = float(np.std(values))
        result.metrics[metric_key(arm, "reached")] = float(np.isfinite(values).mean())
    result.metrics["steps_saved_mean"] = float(diff[finite].mean()) if finite.any() else math.nan
    result.metrics["steps_saved_std"] = float(diff[finite].std()) if finite.any() else math.nan
    spread = result.metrics["steps_saved_std"]
    result.metrics["effect_size"] = (result.metrics["steps_saved_mean"] / spread
                                     if spread and math.isfinite(spread) else math.nan)
    result.metrics["seeds"] = float(config["seeds"])
    result.table("steps to the target accuracy", [
        "arm", "steps (mean ± std over seeds)", "per seed", "seeds reaching the target"], [
        [arm, f"{np.mean(v):.1f} ± {np.std(v):.1f}", " ".join(f"{x:g}" for x in v),
         f"{np.isfinite(v).sum()}/{len(v)}"] for arm, v in (("gaussian", g),
                                                           ("conditioned", c))])
    result.figures["accuracy"] = _figure(curves, config["target"])
    return result


def _train(model, config, device, seed):
    eval_tokens = sample_tokens(config["eval_batch"], config["length"], config["vocab_size"],
                                torch.Generator().manual_seed(10_000 + seed)).to(device)

    def evaluate(trained):
        return {"accuracy": recall_accuracy(trained(eval_tokens), induction_targets(eval_tokens))}

    train_config = TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="adam",
                               eval_every=config["eval_every"], seed=seed,
                               target=config["target"], target_metric="eval_accuracy",
                               target_mode="max", progress=False)

    def batch(step, generator):
        return sample_tokens(config["batch"], config["length"], config["vocab_size"],
                             generator).to(device)

    return train(model, induction_loss, batch, train_config, evaluate=evaluate, device=device)


def _figure(curves, target):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for k, arm in enumerate(ARMS):
        for i, (x, y) in enumerate(curves[arm]):
            ax.plot(x, y, color=f"C{k}", lw=0.8, alpha=0.7, label=arm if i == 0 else None)
    ax.axhline(target, color="black", lw=0.8, ls="--")
    ax.set_xlabel("step")
    ax.set_ylabel("held-out induction accuracy")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


EXPERIMENT = Experiment(
    name="conditioned-init",
    description="Conditioned initialisation: steps to learn induction heads, Gaussian against "
                "conditioned W_Q, W_K, W_V (ICLR 2026 submission cKNOCYPo2W)",
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run,
    claims=("training-dynamics.conditioned-init-trains-faster",),
    code=("constructions.conditioned_init", "empirics.induction_heads"),
)
