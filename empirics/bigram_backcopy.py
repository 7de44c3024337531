r"""Gradient descent on Bigram-Backcopy: do attention sinks and value drains appear, and do
ReLU attention or SGD prevent them? (Guo et al. 2024, arXiv:2410.13835.)

One-layer, one-head transformers with an MLP and pre-LayerNorm are trained on BB sequences of
one synthetic Dirichlet bigram matrix (:class:`constructions.bigram_backcopy.BigramBackcopy`),
in three variants: softmax attention with Adam, ReLU attention with Adam, softmax with SGD.
Measured on held-out sequences, at dormant (non-trigger) positions:

* ``bos_mass``: the BOS's share of the head's attention weights (for softmax, its weight);
* ``bos_value_ratio``: :math:`\|v_{BOS}\|` over the median :math:`\|v_j\|` of the other keys;
* ``kl``: :math:`\mathrm{KL}(O_i \| f_i)` to the exact oracle, averaged over positions
  :math:`i \ge 1` (so the Bayes loss is known, no Monte Carlo);
* the BOS score gap (BOS score minus the mean of the others) over training, the quantity
  the caricature (induction-variants.bb-caricature) predicts to grow like ½ log t.

The paper's abstract says sinks form under softmax + Adam and that ReLU attention and SGD
mitigate them; the thresholds here (mass > 0.9) are ours. The construction
(:func:`~constructions.bigram_backcopy.active_dormant_model`) has BOS mass 1 and value 0.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``bigram-backcopy``: its full config cut to 20 of its 10000 steps did not finish within 60
  CPU-s, so a seed takes more than 6 CPU-hours (counting 15 CPU-s as start-up); left to a GPU.

Measured cpu-config cost (one thread, 2026-12-04, ``/usr/bin/time`` user seconds of one
``python -m empirics run ... --seeds 3 --workers 1 --threads 1`` process, start-up included):

* ``bigram-backcopy`` cpu: 11 CPU-s for 3 seeds (about 4 a seed);
* ``bigram-backcopy-scaling`` cpu (softmax+Adam alone, 300, 600, 1200, 2400 steps): 38 CPU-s
  for 3 seeds (about 13 a seed). The sink share shows no trend there: slope 0.006 per
  doubling, 95% interval [-0.16, 0.18] over the seeds (induction-variants.bb-sink-scaling).
"""

from __future__ import annotations

import numpy as np
import torch

from constructions.bigram_backcopy import BigramBackcopy, dirichlet_bigrams
from empirics._tiny_gpt import GPTConfig, TinyGPT
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot
from empirics.scaling import run_study, study_config, summarize_study
from empirics.training import TrainConfig, train

VARIANTS = {"softmax+adam": ("softmax", "adam"), "relu+adam": ("relu", "adam"),
            "softmax+sgd": ("softmax", "sgd")}


def make_task(config: dict, seed: int) -> BigramBackcopy:
    generator = np.random.default_rng(seed)
    cond = dirichlet_bigrams(config["vocab_size"], config["concentration"], generator)
    return BigramBackcopy(cond, config["n_triggers"])


def measure(model: TinyGPT, task: BigramBackcopy, tokens: torch.Tensor) -> dict[str, float]:
    """BOS mass, value ratio and score gap at dormant positions, and the KL to the oracle."""
    logits, patterns, values, _ = model.run(tokens)
    pattern, v = patterns[0][:, 0], values[0][:, 0]                  # head 0 of layer 1
    trig = torch.from_numpy(task.is_trigger).to(tokens.device)[tokens]
    dormant = ~trig
    dormant[:, 0] = False
    law = task.oracle(tokens.cpu()).to(logits)
    log_q = logits[..., : task.vocab_size].log_softmax(-1)
    kl = torch.where(law > 0, law * (law.clamp_min(1e-300).log() - log_q), 0.0).sum(-1)
    norms = v.norm(dim=-1)                                             # (B, n)
    # the BOS share of the weights (ReLU attention's weights need not sum to 1)
    share = pattern[..., 0] / pattern.sum(-1).clamp_min(1e-30)
    return {"bos_mass": float(share[dormant].mean()),
            "bos_value_ratio": float((norms[:, 0] / norms[:, 1:].median(-1).values).mean()),
            "kl": float(kl[:, 1:].mean())}


def run_bigram_backcopy(config: dict, device: torch.device, seed: int) -> Result:
    task = make_task(config, seed)
    length, batch = config["length"], config["batch"]
    held_out = task.sample(config["eval_batch"], length, np.random.default_rng(seed + 10 ** 6))
    result = Result("bigram-backcopy", config, seed, str(device))
    histories = {}
    for name in config["variants"]:
        attention, optimizer = VARIANTS[name]
        model = TinyGPT(GPTConfig(task.vocab_size + 1, length, d_model=config["d_model"],
                                  heads=(1,) * config["layers"], mlp=config["mlp"],
                                  attention=attention, layer_norm=True), seed=seed)
        streams = {"rng": np.random.default_rng(seed + 1)}

        def sample(step, generator, streams=streams):
            return task.sample(batch, length, streams["rng"])

        def loss_fn(model, tokens):
            logits = model(tokens)[:, 1:-1, : task.vocab_size]
            return torch.nn.functional.cross_entropy(
                logits.reshape(-1, task.vocab_size), tokens[:, 2:].reshape(-1))

        def evaluate(model, held_out=held_out):
            return measure(model, task, held_out.to(next(model.parameters()).device))

        lr = config["sgd_lr"] if optimizer == "sgd" else config["lr"]
        trained = train(model, loss_fn, sample,
                        TrainConfig(steps=config["steps"], lr=lr, optimizer=optimizer,
                                    weight_decay=config["weight_decay"], seed=seed,
                                    eval_every=config["eval_every"], progress=False),
                        evaluate=evaluate, device=device, desc=name)
        histories[name] = trained
        result.training[name] = trained.as_record()
        for key, value in trained.final.items():
            if key in ("bos_mass", "bos_value_ratio", "kl"):
                result.metrics[metric_key(name, key)] = value
    result.table("dormant positions", ["variant", "BOS mass", "‖v_BOS‖ / median ‖v‖",
                                       "KL to oracle"],
                 [[n, round(result.metrics[metric_key(n, "bos_mass")], 4),
                   round(result.metrics[metric_key(n, "bos_value_ratio")], 4),
                   round(result.metrics[metric_key(n, "kl")], 4)] for n in config["variants"]])
    result.figures["dynamics"] = plot(histories)
    return result


def plot(histories: dict):
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    for name, trained in histories.items():
        for ax, key in zip(axes, ("bos_mass", "bos_value_ratio", "kl"), strict=True):
            steps, values = trained.series(key)
            ax.plot(steps, values, label=name)
            ax.set_title(key)
            ax.set_xlabel("step")
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=8)
    return fig


SMOKE = {"vocab_size": 16, "n_triggers": 3, "concentration": 0.3, "length": 24, "layers": 1,
         "d_model": 16, "mlp": 32, "steps": 300, "batch": 32, "lr": 1e-2, "sgd_lr": 0.03,
         "weight_decay": 1e-4, "eval_every": 50, "eval_batch": 64, "variants": tuple(VARIANTS)}
# The claim's CPU configuration (induction-variants.bb-gd-sinks) is the smoke size.
CPU = dict(SMOKE)
FULL = {"vocab_size": 64, "n_triggers": 3, "concentration": 0.3, "length": 256, "layers": 3,
        "d_model": 256, "mlp": 1024, "steps": 10_000, "batch": 512, "lr": 3e-4, "sgd_lr": 0.03,
        "weight_decay": 1e-4, "eval_every": 250, "eval_batch": 256, "variants": tuple(VARIANTS)}

BIGRAM_BACKCOPY = Experiment(
    name="bigram-backcopy",
    description="attention sinks and value drains on Bigram-Backcopy: softmax+Adam vs "
                "ReLU attention vs SGD",
    claims=("induction-variants.bb-gd-sinks",),
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run_bigram_backcopy,
    code=("constructions.bigram_backcopy", "empirics._tiny_gpt"),
)

# The scaling study: the softmax+Adam arm alone (each variant has its own seeded model, data
# stream and trainer, so it is the arm of the three-variant run), its BOS share at dormant
# positions against training steps, the cpu config the smallest size.
STUDY_QUANTITIES = ("softmax+adam/bos_mass", "softmax+adam/kl")
STUDY_CONFIGS = {
    "smoke": study_config("smoke", "steps", [10, 20, 40], STUDY_QUANTITIES,
                          overrides={"variants": ("softmax+adam",), "eval_every": 10,
                                     "eval_batch": 8}),
    "cpu": study_config("cpu", "steps", [300, 600, 1200, 2400], STUDY_QUANTITIES,
                        overrides={"variants": ("softmax+adam",)}),
    "full": study_config("full", "steps", [2500, 5000, 10_000], STUDY_QUANTITIES,
                         overrides={"variants": ("softmax+adam",)}),
}


def run_scaling(config: dict, device: torch.device, seed: int) -> Result:
    return run_study(BIGRAM_BACKCOPY, "bigram-backcopy-scaling", config, device, seed)


BIGRAM_BACKCOPY_SCALING = Experiment(
    name="bigram-backcopy-scaling",
    description="Bigram-Backcopy: the softmax+Adam BOS share at dormant positions against "
                "training steps",
    claims=("induction-variants.bb-sink-scaling",),
    configs=STUDY_CONFIGS,
    run=run_scaling,
    summarize=summarize_study,
    code=("empirics.scaling", *BIGRAM_BACKCOPY.code),
)

__all__ = ["BIGRAM_BACKCOPY", "BIGRAM_BACKCOPY_SCALING", "measure"]
