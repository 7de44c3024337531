r"""Knowledge acquisition and extraction by gradient descent (Xu & Chen, arXiv:2508.00901),
against the relation-covering law.

A one-layer model (learned embeddings, no positions; one attention head read at the last
position, a residual, a ReLU MLP and an unembedding) is pre-trained by Adam, full batch, on
every pre-training row ``(person, template) -> value`` of a
:func:`constructions.knowledge_extraction.fact_world`, then fine-tuned on the Q&A rows
``(Q, question(r), person, A) -> value`` of the fine-tuned people, either fully (every
parameter) or by a rank-one update of the value map and of the MLP's input weights (LoRA,
everything else frozen). Extraction accuracy is measured on the Q&A rows of the people never
fine-tuned, and compared with the exact anchors: the Bayes pre-training loss 0 (facts are
deterministic), chance :math:`1/V` (a guess among the relation's values) and the covering
oracle's level on the drawn world, reachable fraction :math:`+ (1-\text{reachable})/V`
(:meth:`FactWorld.reachable`; its expectation is the law of
``training-dynamics.knowledge-covering-law``).

Two arms: *covering* (every fact stored with all :math:`M = 4` templates, half the people
fine-tuned: the oracle level is 1) and *hallucination* (:math:`M = 16` templates, one per fact,
two fine-tuned people: most tested facts unreachable).

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``knowledge-extraction``: a seed did not finish within 240 CPU-s (stopped), so its full config
  is left to a GPU (``python -m empirics run-all --device cuda``).

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10
under load from other jobs; CPU seconds do not count waiting):

* ``knowledge-extraction``: 158 CPU-s for three seeds (about 53 a seed); published with three
  seeds at the ``cpu`` size (128 people, 3 relations, V=16, covering and hallucination arms, 2
  runs each): pre-training loss 0 in both arms; full fine-tuning extracts 0.85, 0.85, 0.83 with
  coverage (oracle level 1) against 0.19, 0.20, 0.18 without (oracle level 0.29, 0.26, 0.26;
  chance 0.0625); rank-1 LoRA extracts 0.91, 0.95, 0.93 and 0.44, 0.47, 0.50, above the oracle
  level in the hallucination arm.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from constructions.knowledge_extraction import FactWorld, fact_world
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot

ARMS = {"covering": {"n_templates": 4, "multiplicity": 4, "n_finetune": 16},
        "hallucination": {"n_templates": 16, "multiplicity": 1, "n_finetune": 2}}
SMOKE = {"n_people": 32, "n_relations": 2, "n_values": 8, "d_model": 32, "d_mlp": 128,
         "pretrain_steps": 200, "finetune_steps": 100, "lr": 2e-2, "seeds": 1, "arms": ARMS,
         "record_every": 10, "attention_only_control": False}
# between the two, for a few CPU-minutes a seed: a larger world than the smoke's, two arms
CPU = {"n_people": 128, "n_relations": 3, "n_values": 16, "d_model": 64, "d_mlp": 256,
       "pretrain_steps": 1000, "finetune_steps": 300, "lr": 1e-2, "seeds": 2,
       "arms": {"covering": {"n_templates": 4, "multiplicity": 4, "n_finetune": 64},
                "hallucination": {"n_templates": 16, "multiplicity": 1, "n_finetune": 4}},
       "record_every": 25, "attention_only_control": False}
FULL = {"n_people": 512, "n_relations": 4, "n_values": 32, "d_model": 128, "d_mlp": 1024,
        "pretrain_steps": 3000, "finetune_steps": 1000, "lr": 3e-3, "seeds": 5,
        "record_every": 50, "attention_only_control": True,
        "arms": {"covering": {"n_templates": 8, "multiplicity": 8, "n_finetune": 256},
                 "hallucination": {"n_templates": 64, "multiplicity": 1, "n_finetune": 8},
                 "partial": {"n_templates": 16, "multiplicity": 2, "n_finetune": 16}}}
MODES = ("full", "lora")


class OneLayerFacts(nn.Module):
    """Embeddings ``E`` (no positions); the last position's query attends over every position
    (one head, scale ``1/sqrt d``); ``h = sum_s a_s E[x_s] W_V + E[x_T]``; logits
    ``relu(h W_1^T + b_1) W_2^T``, or ``h W_U^T`` without the MLP (``mlp=False``, the
    attention-only control of the v1 abstract). ``lora`` adds ``a b^T`` to ``W_V`` and ``c e^T`` to
    ``W_1``."""

    def __init__(self, vocab: int, d: int, hidden: int, generator: torch.Generator, *,
                 mlp: bool = True) -> None:
        super().__init__()
        self.mlp = mlp

        def init(*shape, fan):
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(fan))

        self.E = init(vocab, d, fan=d)
        self.W_Q, self.W_K, self.W_V = init(d, d, fan=d), init(d, d, fan=d), init(d, d, fan=d)
        self.W_1, self.b_1 = init(hidden, d, fan=d), nn.Parameter(torch.zeros(hidden))
        self.W_2 = init(vocab, hidden, fan=hidden)
        self.W_U = init(vocab, d, fan=d)        # the attention-only control's unembedding
        self.lora: nn.ParameterList | None = None

    def add_lora(self, generator: torch.Generator) -> nn.ParameterList:
        d, hidden = self.W_V.shape[0], self.W_1.shape[0]
        self.lora = nn.ParameterList([
            nn.Parameter(torch.zeros(d)), nn.Parameter(0.01 * torch.randn(d, generator=generator)),
            nn.Parameter(torch.zeros(hidden)),
            nn.Parameter(0.01 * torch.randn(d, generator=generator))])
        return self.lora

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.E[tokens]                                            # (B, T, d)
        W_V, W_1 = self.W_V, self.W_1
        if self.lora is not None:
            a, b, c, e = self.lora
            W_V, W_1 = W_V + a[:, None] * b[None, :], W_1 + c[:, None] * e[None, :]
        q = x[:, -1] @ self.W_Q                                       # (B, d)
        scores = torch.einsum("btd,bd->bt", x @ self.W_K, q) / math.sqrt(x.shape[-1])
        attn = torch.softmax(scores, -1)                              # (B, T)
        h = torch.einsum("bt,btd->bd", attn, x @ W_V) + x[:, -1]      # (B, d)
        if not self.mlp:
            return h @ self.W_U.T                                     # (B, vocab)
        return torch.relu(h @ W_1.T + self.b_1) @ self.W_2.T          # (B, vocab)


def _fit(model, params, rows, steps, lr, every):
    opt = torch.optim.Adam(params, lr=lr)
    curve = []
    for step in range(steps):
        loss = nn.functional.cross_entropy(model(rows[:, :-1]), rows[:, -1])
        if step % every == 0 or step == steps - 1:
            curve.append((step, float(loss.detach())))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        final = float(nn.functional.cross_entropy(model(rows[:, :-1]), rows[:, -1]))
    return final, curve


def _accuracy(model, rows) -> float:
    with torch.no_grad():
        return float((model(rows[:, :-1]).argmax(-1) == rows[:, -1]).double().mean())


def _arm(config: dict, arm: dict, device: torch.device, seed: int) -> dict:
    world: FactWorld = fact_world(config["n_people"], config["n_relations"], arm["n_templates"],
                                  arm["multiplicity"], config["n_values"],
                                  n_finetune=arm["n_finetune"], seed=seed)
    generator = torch.Generator().manual_seed(seed)
    model = OneLayerFacts(world.n_vocab, config["d_model"], config["d_mlp"], generator)
    model.to(device)
    pre_rows = world.pretraining_rows().to(device)
    people = torch.arange(world.n_people)
    tuned = world.qa_rows(people[world.finetune]).to(device)
    tested = world.qa_rows(people[~world.finetune]).to(device)
    pre_loss, pre_curve = _fit(model, list(model.parameters()), pre_rows,
                               config["pretrain_steps"], config["lr"], config["record_every"])
    if config.get("attention_only_control", False):
        control = OneLayerFacts(world.n_vocab, config["d_model"], config["d_mlp"],
                                torch.Generator().manual_seed(seed), mlp=False).to(device)
        control_loss, _ = _fit(control, list(control.parameters()), pre_rows,
                               config["pretrain_steps"], config["lr"], config["record_every"])
        control_metrics = {"attention_only/pretrain_loss": control_loss,
                           "attention_only/pretrain_accuracy": _accuracy(control, pre_rows)}
    else:
        control_metrics = {}
    reach = float(world.reachable()[~world.finetune].double().mean())
    out = {"pretrain_loss": pre_loss, "pretrain_accuracy": _accuracy(model, pre_rows),
           "reachable": reach, "oracle_level": reach + (1 - reach) / config["n_values"],
           "curves": {"pretrain": pre_curve}, **control_metrics}
    for mode in MODES:
        tuned_model = copy.deepcopy(model)
        if mode == "full":
            params = list(tuned_model.parameters())
        else:
            for p in tuned_model.parameters():
                p.requires_grad_(False)
            params = list(tuned_model.add_lora(torch.Generator().manual_seed(seed + 1)))
            tuned_model.to(device)
        ft_loss, ft_curve = _fit(tuned_model, params, tuned, config["finetune_steps"],
                                 config["lr"], config["record_every"])
        out[f"{mode}/finetune_loss"] = ft_loss
        out[f"{mode}/extraction"] = _accuracy(tuned_model, tested)
        with torch.no_grad():
            out[f"{mode}/pretrain_loss_after"] = float(nn.functional.cross_entropy(
                tuned_model(pre_rows[:, :-1]), pre_rows[:, -1]))
        out["curves"][mode] = ft_curve
    return out


def run(config: dict, device: torch.device, seed: int) -> Result:
    result = Result("knowledge-extraction", config, seed, str(device))
    chance = 1 / config["n_values"]
    rows, curves = [], {}
    for name, arm in config["arms"].items():
        per_seed = [_arm(config, arm, device, seed + k) for k in range(config["seeds"])]
        curves[name] = per_seed[0]["curves"]
        keys = [k for k in per_seed[0] if k != "curves"]
        for key in keys:
            values = np.array([s[key] for s in per_seed], dtype=float)
            result.metrics[metric_key(name, key)] = float(values.mean())
            result.metrics[metric_key(name, f"{key}_std")] = float(values.std())
        m = {k: result.metrics[metric_key(name, k)] for k in keys}
        s = {k: result.metrics[metric_key(name, f"{k}_std")] for k in keys}
        rows.append([name, f"M={arm['n_templates']}, K={arm['multiplicity']}, "
                           f"n_f={arm['n_finetune']}",
                     f"0 (Bayes) / {m['pretrain_loss']:.2g}",
                     f"{chance:.3f}", f"{m['oracle_level']:.3f}",
                     f"{m['full/extraction']:.3f} ± {s['full/extraction']:.2g}",
                     f"{m['lora/extraction']:.3f} ± {s['lora/extraction']:.2g}",
                     f"{m['full/pretrain_loss_after']:.3g} / {m['lora/pretrain_loss_after']:.3g}"])
    result.metrics["chance"] = chance
    result.table("exact anchors against measured", [
        "arm", "world", "pre-training loss: exact / measured", "chance 1/V",
        "covering-oracle level (drawn world)", "full fine-tuning extraction (mean ± std)",
        "rank-1 LoRA extraction", "pre-training loss after fine-tuning (full / LoRA)"], rows)
    result.figures["losses"] = _figure(curves, result.metrics, chance, config)
    return result


def _figure(curves, metrics, chance, config):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for k, (name, c) in enumerate(curves.items()):
        steps, losses = zip(*c["pretrain"], strict=True)
        axes[0].semilogy(steps, losses, color=f"C{k}", label=f"{name}: pre-training")
        for mode, style in (("full", "--"), ("lora", ":")):
            s, l = zip(*c[mode], strict=True)
            axes[0].semilogy(np.array(s) + config["pretrain_steps"], l, style, color=f"C{k}",
                             label=f"{name}: fine-tuning ({mode})")
    axes[0].set_xlabel("step")
    axes[0].set_title("training cross-entropy (Bayes level 0)", fontsize=8)
    axes[0].legend(fontsize=6)
    names = list(curves)
    x = np.arange(len(names))
    for j, (mode, label) in enumerate((("full", "full FT"), ("lora", "rank-1 LoRA"))):
        axes[1].bar(x + 0.25 * (j - 1), [metrics[metric_key(n, mode, "extraction")] for n in names],
                    0.25, yerr=[metrics[metric_key(n, mode, "extraction_std")] for n in names],
                    label=label)
    axes[1].bar(x + 0.25, [metrics[metric_key(n, "oracle_level")] for n in names], 0.25,
                color="gray", label="covering oracle (exact)")
    axes[1].axhline(chance, color="black", lw=0.8, ls="--", label="chance 1/V")
    axes[1].set_xticks(x, names)
    axes[1].set_title("extraction on facts not revisited in fine-tuning", fontsize=8)
    axes[1].legend(fontsize=6)
    fig.tight_layout()
    return fig


EXPERIMENT = Experiment(
    name="knowledge-extraction",
    description="Knowledge acquisition and extraction: pre-training then full or rank-1 "
                "fine-tuning against the relation-covering law (Xu & Chen 2025)",
    configs={"smoke": SMOKE, "cpu": CPU, "full": FULL},
    run=run,
    claims=("training-dynamics.knowledge-extraction-gd",),
    code=("constructions.knowledge_extraction",),
)
