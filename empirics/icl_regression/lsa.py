r"""``icl-regression-lsa``: a one-layer LSA trained by Adam on a :class:`RegressionCase`,
compared with the closed form through its gauge-invariant effective predictor.
"""
from __future__ import annotations

import torch

from empirics.experiment import Experiment, Result
from empirics.icl_regression.cases import lifted_snapshot, random_lsa, regression_case
from empirics.icl_regression.sufficient_statistics import lifted_statistics
from empirics.plots import new_axes
from empirics.training import TrainConfig, train


def run_lsa(config: dict, device: torch.device, seed: int) -> Result:
    """Train an LSA on ``case`` and compare its effective predictor with the closed form.

    ``prompts_per_step=None`` (smoke): full-batch Adam on a fixed set of ``prompts`` tasks,
    the empirical risk computed from their :class:`LiftedStatistics` (an exact identity,
    checked by ``icl-regression.effective-predictor``), so the trained model is the LSA
    class's empirical risk minimiser on the same prompts as the convex fit. An int: online
    Adam on fresh batches of that size (full config), with the Polyak–Ruppert average of the
    lifted coefficients over the last ``average_from`` of training as the estimate.
    """
    case = regression_case(config["case"], config["n"], config["d"])
    target = case.closed_form()
    model = random_lsa(case.d, config["init_scale"],
                       torch.Generator().manual_seed(seed)).requires_grad_()
    online = config["prompts_per_step"] is not None
    if online:
        def sample_batch(step: int, generator: torch.Generator) -> dict:
            prompts = case.sample(config["prompts_per_step"], generator)
            return {"Z": prompts.Z, "y": prompts.y_query}

        def loss_fn(model, batch):
            return (model.predict(batch["Z"]) - batch["y"]).pow(2).mean()
    else:
        stats = lifted_statistics(case.name, case.n, case.d, config["prompts"], seed)
        fixed = {"gram": stats.gram, "cross": stats.cross}

        def sample_batch(step: int, generator: torch.Generator) -> dict:
            return fixed

        def loss_fn(model, batch):
            theta = model.lifted_coefficients()
            return theta @ batch["gram"] @ theta - 2 * theta @ batch["cross"] + stats.yy

    snapshots: list[torch.Tensor] = []

    def evaluate(model) -> dict:
        snapshots.append(lifted_snapshot(model))
        gamma = model.preconditioner().detach().double().cpu()
        return {"gamma_distance": float((gamma - target).norm() / target.norm())}

    train_config = TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="adam",
                               schedule="step", step_every=config["step_every"],
                               step_gamma=config["step_gamma"], eval_every=config["eval_every"],
                               seed=seed, dtype=config["dtype"], progress=config["progress"])
    history = train(model, loss_fn, sample_batch, train_config, evaluate=evaluate,
                    device=device, desc=f"lsa {case.name}")
    steps = [int(row["step"]) for row in history.history]
    start = (1 - config["average_from"]) * steps[-1] if online else steps[-1] - 1
    tail = [theta for step, theta in zip(steps, snapshots, strict=True) if step > start]
    trained = torch.stack(tail).mean(0)
    gamma = gamma_from_lifted(trained, case.d)
    result = Result(experiment="icl-regression-lsa", config=config, seed=seed,
                    device=str(device))
    result.metrics = {"gamma_distance": float((gamma - target).norm() / target.norm()),
                      "averaged_iterates": len(tail)}
    floor = None
    if not online:
        floor = float((gamma_from_lifted(stats.theta, case.d) - target).norm() / target.norm())
        result.metrics["gamma_distance_least_squares"] = floor
    result.training = {"lsa": history.as_record()}
    result.table("lifted coefficients", ["index", "theta"],
                 [[i, float(v)] for i, v in enumerate(trained)])
    result.table("preconditioner", ["row", *[f"col {j}" for j in range(case.d)]],
                 [[f"trained {i}", *map(float, gamma[i])] for i in range(case.d)]
                 + [[f"closed form {i}", *map(float, target[i])] for i in range(case.d)])
    result.figures["distance"] = distance_figure(result)
    return result


def trained_coefficients(result: Result) -> torch.Tensor:
    """The trained model's lifted coefficients, read back from a :func:`run_lsa` result."""
    return torch.tensor([row[1] for row in result.tables["lifted coefficients"]["rows"]],
                        dtype=torch.float64)


def gamma_from_lifted(theta: torch.Tensor, d: int) -> torch.Tensor:
    """Γ from lifted coefficients: the (b, y) pair's coefficient of (x_q)_c is Γ[c, b]."""
    D = d + 1
    rows, cols = torch.triu_indices(D, D)
    table = theta.reshape(-1, d)
    return torch.stack([table[int(((rows == b) & (cols == d)).nonzero())] for b in range(d)], 1)


def distance_figure(result: Result):
    """Relative distance of the trained Γ to the closed form against the step (a new figure)."""
    history = result.training["lsa"]["history"]
    floor = result.metrics.get("gamma_distance_least_squares")
    fig, ax = new_axes()
    ax.semilogy([row["step"] for row in history], [row["gamma_distance"] for row in history],
                lw=1, label="trained LSA")
    if floor is not None:
        ax.axhline(floor, color="grey", ls=":", lw=1, label="lifted least squares, same prompts")
    ax.set_xlabel("training step")
    ax.set_ylabel(r"$\|\Gamma_t - \Gamma^*\|_F / \|\Gamma^*\|_F$")
    ax.set_title(f"trained LSA → closed-form optimum ({result.config['case']})")
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


LSA_EXPERIMENT = Experiment(
    name="icl-regression-lsa",
    description="A one-layer LSA trained on in-context regression converges to the closed-form "
                "optimal (preconditioned) GD step, compared through its effective predictor.",
    claims=("icl-regression.isotropic-optimum", "icl-regression.preconditioned-optimum",
            "icl-regression.nonlinear-step"),
    configs={
        "smoke": {"case": "isotropic", "n": 10, "d": 3, "prompts": 200_000,
                  "prompts_per_step": None, "steps": 500, "lr": 0.05, "step_every": 170,
                  "step_gamma": 0.3, "eval_every": 10, "average_from": 0.0,
                  "init_scale": 0.3, "dtype": "float64", "progress": False},
        # between the two, for a few CPU-minutes a seed: the full case at half its n and d
        "cpu": {"case": "preconditioned", "n": 20, "d": 5, "prompts": 0,
                "prompts_per_step": 2048, "steps": 8000, "lr": 0.01, "step_every": 2000,
                "step_gamma": 0.3, "eval_every": 20, "average_from": 0.5, "init_scale": 0.3,
                "dtype": "float32", "progress": False},
        "full": {"case": "preconditioned", "n": 40, "d": 10, "prompts": 0,
                 "prompts_per_step": 8192, "steps": 20000, "lr": 0.01, "step_every": 5000,
                 "step_gamma": 0.3, "eval_every": 20, "average_from": 0.5, "init_scale": 0.3,
                 "dtype": "float32", "progress": True},
    },
    run=run_lsa,
    code=("constructions.icl_regression", "empirics.icl_regression.cases",
          "empirics.icl_regression.sufficient_statistics"),
)

