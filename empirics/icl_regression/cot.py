r"""``icl-regression-cot``: one layer in the :math:`(x, y, w, 1)` layout trained online with a
teacher-forced chain-of-thought loss to map :math:`w_k \mapsto w_{k+1}`, compared through its
effective update map and the gauge-invariant products.
"""
from __future__ import annotations

import torch

from constructions.icl_regression import (
    cot_prompt,
    gd_iterates,
    key_moment,
    lsa,
    multi_step_layer,
    pair_coefficients,
    pair_features,
)
from empirics.experiment import Experiment, Result
from empirics.plots import new_axes
from empirics.training import TrainConfig, train


def cot_features(Z: torch.Tensor, n: int, d: int) -> torch.Tensor:
    r"""Lifted features of the CoT columns: :math:`G_{ab}z_{jc}` for pairs :math:`a \le b` of
    the ``(x, y)`` rows and ``c`` in the ``(w, 1)`` rows, ``(..., k, P)`` with
    :math:`P = \tfrac{(d+1)(d+2)}2(d+1)`. Context columns vanish outside ``(x, y)`` and CoT
    columns outside ``(w, 1)``, so these are all the features the update can use."""
    G = key_moment(Z, n)[..., :d + 1, :d + 1]
    tokens = Z[..., d + 1:, n:].transpose(-1, -2)                  # (..., k, d+1)
    return (pair_features(G).unsqueeze(-2).unsqueeze(-1) * tokens.unsqueeze(-2)).flatten(-2)


def cot_coefficients(model, d: int) -> torch.Tensor:
    """The ``w``-block update's coefficients on :func:`cot_features`, ``(d, P)``."""
    E = model.effective_tensor()[d + 1:2 * d + 1, :d + 1, :d + 1, d + 1:]
    return pair_coefficients(E).flatten(-2)


def run_cot(config: dict, device: torch.device, seed: int) -> Result:
    d, n, k, eta = config["d"], config["n"], config["k"], config["eta"]
    generator = torch.Generator().manual_seed(seed)
    D = 2 * d + 2
    model = lsa(config["init_scale"] * torch.randn(D, D, generator=generator, dtype=torch.float64),
                config["init_scale"] * torch.randn(D, D, generator=generator, dtype=torch.float64)
                ).requires_grad_()
    w = slice(d + 1, 2 * d + 1)

    def sample_batch(step: int, generator: torch.Generator) -> dict:
        X = torch.randn(config["batch"], n, d, generator=generator, dtype=torch.float64)
        w_star = torch.randn(config["batch"], d, generator=generator, dtype=torch.float64)
        y = (X @ w_star.unsqueeze(-1)).squeeze(-1)
        iterates = gd_iterates(X, y, eta, k)                       # teacher: w_0 .. w_k
        return {"Z": cot_prompt(X, y, iterates[..., :k, :]), "target": iterates[..., 1:, :]}

    def loss_fn(model, batch):
        out = model(batch["Z"], n_context=n)[..., w, n:].transpose(-1, -2)
        return (out - batch["target"]).pow(2).sum(-1).mean()

    train_config = TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="adam",
                               schedule="step", step_every=config["step_every"],
                               step_gamma=config["step_gamma"], eval_every=config["eval_every"],
                               seed=seed, dtype=config["dtype"], progress=config["progress"])
    history = train(model, loss_fn, sample_batch, train_config, device=device, desc="cot")
    model = model.double().cpu()
    held_out = sample_batch(-1, torch.Generator().manual_seed(seed + 7919))
    with torch.no_grad():
        eval_loss = float(loss_fn(model, held_out))
        features = cot_features(held_out["Z"], n, d).flatten(0, -2)
        gram = features.T @ features / features.shape[0]
        theta = cot_coefficients(model, d)
        P, K = model.W_PV, model.W_KQ
        products = {"PV[w,x] KQ[x,w]": P[w, :d] @ K[:d, w],
                    "PV[w,x] KQ[y,1]": P[w, :d] * K[d, D - 1],
                    "PV[w,y] KQ[x,1]^T": torch.outer(P[w, d], K[:d, D - 1])}
    result = Result(experiment="icl-regression-cot", config=config, seed=seed,
                    device=str(device))
    result.metrics = {"eval_loss": eval_loss,
                      "gram_min_eigenvalue": float(torch.linalg.eigvalsh(gram)[0])}
    result.training = {"cot": history.as_record()}
    result.table("products", ["product", "entries"],
                 [[name, value.flatten().tolist()] for name, value in products.items()])
    result.table("lifted coefficients", ["output", "theta"],
                 [[o, theta[o].tolist()] for o in range(d)])
    reference = cot_coefficients(multi_step_layer(d, eta), d)
    result.metrics["coefficient_distance"] = float((theta - reference).norm() / reference.norm())
    result.figures["loss"] = _loss_figure(history.history)
    return result


def _loss_figure(history: list[dict]):
    fig, ax = new_axes()
    ax.semilogy([row["step"] for row in history], [row["loss"] for row in history], lw=1)
    ax.set_xlabel("training step")
    ax.set_ylabel("teacher-forced CoT loss")
    fig.tight_layout()
    return fig


COT_EXPERIMENT = Experiment(
    name="icl-regression-cot",
    description="One linear-attention layer trained with teacher-forced chain of thought "
                "learns the GD step: W_PV[w,x] W_KQ[x,w] = -eta I, W_PV[w,x] W_KQ[y,1] = eta I.",
    claims=("icl-regression.cot-trained-products",),
    configs={
        "smoke": {"d": 4, "n": 12, "k": 5, "eta": 0.3, "steps": 400, "batch": 128,
                  "lr": 0.02, "step_every": 130, "step_gamma": 0.3, "eval_every": 50,
                  "init_scale": 0.1, "dtype": "float64", "progress": False},
        # between the two, for a few CPU-minutes a seed: half the full d, n and k
        "cpu": {"d": 5, "n": 20, "k": 5, "eta": 0.3, "steps": 12000, "batch": 512,
                "lr": 0.01, "step_every": 3000, "step_gamma": 0.3, "eval_every": 100,
                "init_scale": 0.1, "dtype": "float64", "progress": False},
        "full": {"d": 10, "n": 40, "k": 10, "eta": 0.3, "steps": 20000, "batch": 2048,
                 "lr": 0.005, "step_every": 5000, "step_gamma": 0.3, "eval_every": 200,
                 "init_scale": 0.1, "dtype": "float64", "progress": True},
    },
    run=run_cot,
    code=("constructions.icl_regression",),
)
