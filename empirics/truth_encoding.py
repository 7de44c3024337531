r"""Linear truth encodings: a one-layer transformer on the truth co-occurrence process.

The model reads :math:`(s, a, s', a')` (subjects and attributes have separate token ids) and
predicts each next token; the losses that matter are those of :math:`a` (from the position of
:math:`s`) and :math:`a'` (from the position of :math:`s'`), compared with the exact levels
:math:`L_0 > L_{mem} > L_{truth}` of :func:`constructions.truth_encoding.truth_levels`. A
logistic probe on the residual stream at the :math:`s'` position predicts the truth bit; its
accuracy is compared with the same probe fitted to shuffled labels (the control) and with the
Bayes accuracy of the truth bit given :math:`(s, a)`, :math:`q + (1-q)\max(\pi', 1-\pi')` where
only a matching first attribute is informative.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``truth-encoding``: its full config cut to 60 of its 30000 steps did not finish within 60
  CPU-s, so a seed takes more than 6 CPU-hours (counting 15 CPU-s as start-up); left to a GPU.

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10
under load from other jobs; CPU seconds do not count waiting):

* ``truth-encoding``: 309 CPU-s for three seeds (about 103 a seed); published with three seeds
  at the ``cpu`` size (300 subjects, 150 attributes, d=64, 10000 steps): a-token loss 3.247,
  3.263, 3.250 against L_mem 3.178 (0.07 to 0.09 above it, outside the smoke claim's 0.05 band);
  a'-token loss 2.556, 2.549, 2.550 against its Bayes level 2.525; probe accuracy 0.997, 0.999,
  0.997 against Bayes 0.997 (shuffled control 0.507, 0.503, 0.498); the a' loss spends 2%, 2%,
  0% of training within 0.05 of L_mem, so no memorisation plateau shows at this size either.
* its scaling study (:mod:`empirics.truth_scaling`, ``truth-encoding-scaling``, 75 to 300
  subjects at the cpu config's length): about 270 CPU-s a seed; no direction is decided.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from constructions.truth_encoding import truth_levels, truth_process
from empirics.experiment import Experiment, Result
from empirics.plots import pyplot
from empirics.training import TrainConfig, held_out_batch, train

SMOKE = {"n_subjects": 100, "n_attributes": 50, "rho": 0.5, "d_model": 64, "d_mlp": 256,
         "layernorm": True, "steps": 2000, "batch": 256, "lr": 1e-3, "eval_every": 100,
         "eval_size": 4096, "probe_size": 2048, "seeds": 1, "co_occurrence": True}
# between the two, for a few CPU-minutes a seed: the smoke's model on a larger world, longer
CPU = {"n_subjects": 300, "n_attributes": 150, "rho": 0.5, "d_model": 64, "d_mlp": 256,
       "layernorm": True, "steps": 10_000, "batch": 256, "lr": 1e-3, "eval_every": 200,
       "eval_size": 4096, "probe_size": 2048, "seeds": 1, "co_occurrence": True}
FULL = {"n_subjects": 1000, "n_attributes": 500, "rho": 0.5, "d_model": 128, "d_mlp": 512,
        "layernorm": True, "steps": 30_000, "batch": 512, "lr": 1e-3, "eval_every": 200,
        "eval_size": 16384, "probe_size": 8192, "seeds": 5, "co_occurrence": True}
NEAR = 0.05   # the catalogue's "within 0.05 nats" of a plateau


class OneLayer(nn.Module):
    """Token + position embedding, one causal single-head attention block and one MLP block
    (pre-LayerNorm when ``layernorm``), a final LayerNorm and an unembedding."""

    def __init__(self, vocab: int, d_model: int, d_mlp: int, layernorm: bool,
                 generator: torch.Generator) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(4, d_model))
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_mlp), nn.GELU(), nn.Linear(d_mlp, d_model))
        norm = (lambda: nn.LayerNorm(d_model)) if layernorm else nn.Identity
        self.ln1, self.ln2, self.ln_f = norm(), norm(), norm()
        self.unembed = nn.Linear(d_model, vocab, bias=False)
        with torch.no_grad():
            for p in self.parameters():
                if p.ndim == 2:
                    p.copy_(torch.randn(p.shape, generator=generator) * 0.02)

    def forward(self, tokens: torch.Tensor, *, residual: bool = False):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]               # (B, 4, d)
        q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)                       # (B, 4, d) each
        scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])            # (B, T, T)
        length = tokens.shape[1]
        mask = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        x = x + self.out(torch.softmax(scores.masked_fill(mask, -math.inf), -1) @ v)
        x = x + self.mlp(self.ln2(x))                                      # (B, 4, d)
        logits = self.unembed(self.ln_f(x))                                # (B, 4, V)
        return (logits, x) if residual else logits


def run(config: dict, device: torch.device, seed: int) -> Result:
    levels = truth_levels(config["rho"], config["n_attributes"])
    result = Result("truth-encoding", config, seed, str(device))
    rows, curves = [], []
    for k in range(config["seeds"]):
        metrics, curve = _one_seed(config, device, seed + k, levels)
        curves.append(curve)
        rows.append(metrics)
    for name in rows[0]:
        values = np.array([r[name] for r in rows], dtype=float)
        result.metrics[name] = float(values.mean())
        result.metrics[f"{name}_std"] = float(values.std())
    _, Lmem, Ltruth = levels
    m = result.metrics
    result.table("exact anchors against measured",
                 ["quantity", "exact", "measured (mean ± std)"], [
        ["a-token loss, end", f"{Lmem:.4f} (L_mem = H_mix)",
         f"{m['final_a_loss']:.4f} ± {m['final_a_loss_std']:.2g}"],
        ["a'-token loss, end", f"{2 * Ltruth - Lmem:.4f} (Bayes, 2 L_truth - L_mem)",
         f"{m['final_a2_loss']:.4f} ± {m['final_a2_loss_std']:.2g}"],
        ["mean attribute loss, end", f"{Ltruth:.4f} (L_truth)",
         f"{m['final_mean_loss']:.4f} ± {m['final_mean_loss_std']:.2g}"],
        ["fraction of training with a' loss within 0.05 of L_mem", "—",
         f"{m['mem_plateau_fraction']:.3f}"],
        ["first step with mean loss within 0.05 of L_truth", "—",
         f"{m['truth_step']:.0f}"],
        ["probe accuracy at s' (shuffled control)", f"{m['bayes_truth_accuracy']:.4f} (Bayes)",
         f"{m['probe_accuracy']:.4f} ({m['probe_control_accuracy']:.4f})"],
    ])
    result.figures["losses"] = _figure(curves, levels)
    return result


def _one_seed(config, device, seed, levels):
    process = truth_process(config["n_subjects"], config["n_attributes"], config["rho"],
                            seed=seed)
    offset = config["n_subjects"]
    generator = torch.Generator().manual_seed(seed)
    model = OneLayer(offset + config["n_attributes"], config["d_model"], config["d_mlp"],
                     config["layernorm"], generator).to(device)

    def sample(step, gen, size=config["batch"]):
        rows, true = process.sample(size, gen)
        if not config["co_occurrence"]:   # a mutant: the two facts' truths independent
            rows = torch.cat([rows[:, :2], process.sample(size, gen)[0][:, 2:]], 1)
        rows = rows.clone()
        rows[:, 1::2] += offset                                             # attribute ids
        return rows, true

    def losses(model, batch):
        rows, _ = batch
        logits = model(rows[:, :3])                                         # (B, 3, V)
        la = nn.functional.cross_entropy(logits[:, 0], rows[:, 1], reduction="none")
        la2 = nn.functional.cross_entropy(logits[:, 2], rows[:, 3], reduction="none")
        return la, la2

    def loss_fn(model, batch):
        la, la2 = losses(model, batch)
        return (la.mean() + la2.mean()) / 2

    eval_batch = held_out_batch(lambda s, g: sample(s, g, config["eval_size"]), seed)

    def evaluate(model):
        la, la2 = losses(model, [t.to(device) for t in eval_batch])
        return {"a_loss": float(la.mean()), "a2_loss": float(la2.mean()),
                "mean_loss": float((la.mean() + la2.mean()) / 2)}

    cfg = TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="adam",
                      eval_every=config["eval_every"], eval_at_start=True, seed=seed,
                      progress=False)
    trained = train(model, loss_fn, sample, cfg, evaluate=evaluate, device=device)
    steps, a2 = trained.series("a2_loss")
    _, mean = trained.series("mean_loss")
    _, a1 = trained.series("a_loss")
    _, Lmem, Ltruth = levels
    near_mem = np.abs(np.array(a2) - Lmem) <= NEAR
    hits = np.flatnonzero(np.abs(np.array(mean) - Ltruth) <= NEAR)
    probe, control = _probe(model, process, offset, config, device, seed)
    q = config["rho"] + (1 - config["rho"]) / config["n_attributes"]
    post = config["rho"] / q
    metrics = {"final_a_loss": a1[-1], "final_a2_loss": a2[-1], "final_mean_loss": mean[-1],
               "mem_plateau_fraction": float(near_mem.mean()),
               "truth_step": float(steps[hits[0]]) if hits.size else math.inf,
               "probe_accuracy": probe, "probe_control_accuracy": control,
               "bayes_truth_accuracy": q * max(post, 1 - post) + (1 - q) * 1.0}
    return metrics, (steps, a1, a2, mean)


def _probe(model, process, offset, config, device, seed) -> tuple[float, float]:
    """Logistic probe for the truth bit on the residual at the s' position: accuracy on a
    held-out half, for the true labels and for shuffled labels (the control)."""
    generator = torch.Generator().manual_seed(seed + 7)
    rows, true = process.sample(2 * config["probe_size"], generator)
    rows = rows.clone()
    rows[:, 1::2] += offset
    with torch.no_grad():
        _, resid = model(rows[:, :3].to(device), residual=True)
    features = resid[:, 2].double().cpu()
    features = (features - features.mean(0)) / features.std(0).clamp_min(1e-12)
    half = config["probe_size"]
    shuffled = true[torch.randperm(len(true), generator=generator)]
    return (_fit_probe(features, true.double(), half),
            _fit_probe(features, shuffled.double(), half))


def _fit_probe(X, y, half, steps: int = 300) -> float:
    w = torch.zeros(X.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(X[:half] @ w + b, y[:half]) \
            + 1e-3 * (w ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(((X[half:] @ w + b > 0).double() == y[half:]).double().mean())


def _figure(curves, levels):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for k, (steps, a1, a2, _) in enumerate(curves):
        ax.plot(steps, a2, color="C0", lw=1, label="a' loss" if k == 0 else None)
        ax.plot(steps, a1, color="C1", lw=1, label="a loss" if k == 0 else None)
    L0, Lmem, Ltruth = levels
    for value, name in ((L0, "L_0"), (Lmem, "L_mem"), (2 * Ltruth - Lmem, "a' Bayes")):
        ax.axhline(value, color="gray", lw=0.8, ls="--")
        ax.text(0, value, name, fontsize=7, va="bottom")
    ax.set_xlabel("step")
    ax.set_title("the a token should end at L_mem, the a' token at its Bayes level", fontsize=8)
    ax.set_ylabel("cross-entropy (nats)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


EXPERIMENT = Experiment(
    name="truth-encoding",
    description="Linear truth encodings: one-layer transformer through the exact loss "
                "plateaus (Ravfogel et al. 2025)",
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run,
    claims=("training-dynamics.truth-two-phases",),
    code=("constructions.truth_encoding",),
)
