r"""``icl-regression-zfb``: full-batch gradient descent from Zhang–Frei–Bartlett's balanced
initialisation on antithetic prompts, recording what the conservation law of
:math:`\lVert W_{PV}\rVert_F^2 - \lVert W_{KQ}\rVert_F^2` needs at each step.
"""
from __future__ import annotations

import torch

from constructions.icl_regression import lifted_coefficients, zfb_init
from empirics.experiment import Experiment, Result
from empirics.icl_regression.cases import lifted_snapshot, regression_case
from empirics.icl_regression.sufficient_statistics import lifted_statistics
from empirics.plots import new_axes
from empirics.training import TrainConfig, train


def run_zfb(config: dict, device: torch.device, seed: int) -> Result:
    r"""Full-batch gradient descent (a forward-Euler gradient flow) from the balanced ZFB start
    on the empirical risk of ``prompts`` tasks, recording the conservation law per step.
    (``optimizer="adam"`` is there to show the law is GD's: Adam's rescaled steps break it.)

    ``result.tables["trajectory"]`` has one row per step ``k``, before its update:
    :math:`Q_k = \lVert W_{PV}\rVert_F^2 - \lVert W_{KQ}\rVert_F^2`,
    :math:`S_k = \lVert W_{PV}\rVert_F^2 + \lVert W_{KQ}\rVert_F^2`,
    :math:`\lVert\nabla_{PV}\rVert^2`, :math:`\lVert\nabla_{KQ}\rVert^2`,
    :math:`\langle W_{PV},\nabla_{PV}\rangle` and :math:`\langle W_{KQ},\nabla_{KQ}\rangle`
    (equal by Euler's theorem, since the risk depends on the weights only through the
    bilinear effective tensor), and the absolute-value scale of those inner products.
    """
    case = regression_case("zfb", config["n"], config["d"])
    stats = lifted_statistics(case.name, case.n, case.d, config["prompts"], seed,
                              antithetic=True)
    model = zfb_init(case.d, config["init_scale"]).requires_grad_()
    rows: list[list[float]] = []
    fixed = {"gram": stats.gram, "cross": stats.cross}

    def loss_fn(model, batch):
        theta = model.lifted_coefficients()
        loss = theta @ batch["gram"] @ theta - 2 * theta @ batch["cross"] + stats.yy
        P, K = model.W_PV, model.W_KQ
        g_P, g_K = torch.autograd.grad(loss, (P, K), retain_graph=True)
        with torch.no_grad():
            # Absolute-value evaluation of <W, grad>: by Euler's theorem both inner products
            # are sum_j theta_j dL/dtheta_j, so |.| <= sum_j |theta|_j (2|gram||theta| + 2|cross|)_j
            # with |theta| the coefficients of the entrywise-absolute weights.
            theta_abs = lifted_coefficients(P.abs(), K.abs()).abs()
            euler_scale = float(theta_abs @ (2 * batch["gram"].abs() @ theta.abs()
                                             + 2 * batch["cross"].abs()))
            rows.append([float(P.pow(2).sum() - K.pow(2).sum()),
                         float(P.pow(2).sum() + K.pow(2).sum()), float(g_P.pow(2).sum()),
                         float(g_K.pow(2).sum()), float((P * g_P).sum()),
                         float((K * g_K).sum()), euler_scale])
        return loss

    snapshots: list[torch.Tensor] = []

    def evaluate(model) -> dict:
        snapshots.append(lifted_snapshot(model))
        return {"Q": float(model.W_PV.pow(2).sum() - model.W_KQ.pow(2).sum())}

    train_config = TrainConfig(steps=config["steps"], lr=config["lr"],
                               optimizer=config["optimizer"], eval_every=config["eval_every"],
                               seed=seed, dtype="float64", progress=config["progress"])
    history = train(model, loss_fn, lambda step, generator: fixed, train_config,
                    evaluate=evaluate, device=device, desc="zfb gradient flow")
    P, K = model.W_PV.detach().double().cpu(), model.W_KQ.detach().double().cpu()
    result = Result(experiment="icl-regression-zfb", config=config, seed=seed,
                    device=str(device))
    result.metrics = {"Q_final": float(P.pow(2).sum() - K.pow(2).sum()),
                      "S_final": float(P.pow(2).sum() + K.pow(2).sum()),
                      "u_y_final": float(P[-1, -1]),
                      "V_xx_norm_final": float(K[:-1, :-1].norm()),
                      "off_block_max": float(max(P[:-1].abs().max(), P[-1, :-1].abs().max(),
                                                 K[-1].abs().max(), K[:, -1].abs().max()))}
    result.training = {"zfb": history.as_record()}
    result.table("trajectory", ["Q", "S = |PV|^2 + |KQ|^2", "|g_PV|^2", "|g_KQ|^2",
                                "<PV,g_PV>", "<KQ,g_KQ>", "Euler rounding scale"], rows)
    result.table("lifted coefficients", ["index", "theta"],
                 [[i, float(v)] for i, v in enumerate(snapshots[-1])])
    result.table("final weights", ["matrix", "entries"],
                 [["W_PV", P.flatten().tolist()], ["W_KQ", K.flatten().tolist()]])
    result.figures["conservation"] = conservation_figure(result)
    return result


def conservation_figure(result: Result):
    """Q_k - Q_0 against the step, measured and as predicted by the discrete law (new figure)."""
    rows = torch.tensor(result.tables["trajectory"]["rows"], dtype=torch.float64)
    lr = result.config["lr"]
    measured = (rows[:, 0] - rows[0, 0]).tolist()
    predicted = torch.cat([torch.zeros(1, dtype=torch.float64),
                           torch.cumsum(lr**2 * (rows[:-1, 2] - rows[:-1, 3]), 0)]).tolist()
    fig, ax = new_axes()
    ax.plot(measured, lw=2, label=r"$Q_k - Q_0$ measured")
    ax.plot(predicted, "--", lw=1, label=r"$\lambda^2\sum_{j<k}(\|g_{PV}\|^2 - \|g_{KQ}\|^2)$")
    ax.set_xlabel("gradient-descent step k")
    ax.set_ylabel(r"$\|W_{PV}\|_F^2 - \|W_{KQ}\|_F^2$ drift")
    ax.set_title("conserved under gradient flow; O(step²) per step")
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


ZFB_EXPERIMENT = Experiment(
    name="icl-regression-zfb",
    description="Gradient descent from Zhang–Frei–Bartlett's balanced initialisation: the "
                "conserved quantity ||W_PV||^2 - ||W_KQ||^2 and convergence to the optimum.",
    claims=("icl-regression.zfb-conserved-quantity", "icl-regression.zfb-prompt-length-risk"),
    configs={
        "smoke": {"n": 10, "d": 3, "prompts": 200_000, "steps": 700, "lr": 0.01,
                  "optimizer": "sgd", "init_scale": 0.3, "eval_every": 10, "progress": False},
        # between the two, for a few CPU-minutes a seed: half the full n and d
        "cpu": {"n": 20, "d": 5, "prompts": 400_000, "steps": 8000, "lr": 0.005,
                "optimizer": "sgd", "init_scale": 0.3, "eval_every": 50, "progress": False},
        "full": {"n": 40, "d": 10, "prompts": 2_000_000, "steps": 20000, "lr": 0.005,
                 "optimizer": "sgd", "init_scale": 0.3, "eval_every": 50, "progress": True},
    },
    run=run_zfb,
    code=("constructions.icl_regression", "empirics.icl_regression.cases",
          "empirics.icl_regression.sufficient_statistics"),
)

