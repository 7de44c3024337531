r"""Gradient descent on looped linear transformers, compared with the power method
(Wu, Zhang, Cao 2026, arXiv:2606.00605).

Two experiments, both started from the paper's block initialisation
:math:`W_0 = \begin{pmatrix}0 & w_0I\\0 & 0\end{pmatrix}`,
:math:`V_0 = \begin{pmatrix}0 & 0\\v_0I & 0\end{pmatrix}`, training the full
:math:`2d\times 2d` matrices :math:`V, W` (:mod:`constructions.power_method`):

* ``power-method-gd`` (PM.2, Theorem 4.1): the looped model with ℓ2 normalisation ("LN"),
  trained on principal component prediction, :math:`\mathbb E\,\mathrm{Dist}^2(y_L,
  \mathcal V(X))`. The paper proves that the iterates stay on the block manifold, that
  :math:`w_t, v_t = \Theta(t^{1/4})` (so :math:`\rho_t = w_tv_t \sim t^{1/2}`), and that the
  loss tends to that of :math:`L` steps of the unshifted power method. The control is the same
  run without normalisation.
* ``power-method-layerwise`` (PM.3, Theorems 4.2, 4.3, 4.6): one layer supervised on the first
  power iterate :math:`t = Sa/\lVert Sa\rVert` by the squared error, with and without
  normalisation. Without it the loss plateaus at the closed-form optimum over the block
  manifold, :math:`\gamma^* = \mathbb E[(Sa)^\top(t - a)]/\mathbb E\lVert Sa\rVert^2`, whose
  contraction rate is :math:`R^* = (1+\gamma^*\lambda_2)/(1+\gamma^*\lambda_1)`; with it the
  loss keeps falling and the rate tends to :math:`\lambda_2/\lambda_1`.

Everything is compared through functions (outputs, cosines, contraction rates measured on
held-out inputs); :math:`\rho = wv` enters only through :func:`block_coordinates`, which is
invariant under the gauge :math:`(w, v) \to (cw, v/c)`, and :math:`w_t` itself is reported
because it is the quantity Theorem 4.1 is about (the init is balanced, :math:`w_0 = v_0`, and
GD keeps :math:`w_t^2 - v_t^2` fixed on the manifold).

*Orbit batches.* At a block point the per-example gradient touches only the
:math:`W_{12}` and :math:`V_{21}` blocks, as a general :math:`d\times d` matrix; the
*population* gradient there is a multiple of :math:`I`, because the data law is invariant
under :math:`(X, a) \mapsto (QX, Qa)` for orthogonal :math:`Q`. With ``orbit=True`` every base
example comes with its images under the signed cyclic permutations
:math:`\{P^k D_s\}` (:math:`P` the cyclic shift, :math:`s` the rows of a Sylvester Hadamard
matrix cut to :math:`d` columns): averaging :math:`QGQ^\top` over them gives
:math:`\tfrac{\mathrm{tr}\,G}{d}I` exactly, so each step follows an unbiased estimate of the
population gradient that has the population gradient's symmetry. Without it (the paper's
fixed-sample SGD) the blocks wander off :math:`\propto I` by sampling noise.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``power-method-gd``: its full config cut to 600 of its 30000 steps did not finish within 127
  CPU-s, so a seed takes more than 2 CPU-hours (counting 15 CPU-s as start-up); left to a GPU.

Measured cpu-config cost (one thread of this project's 2-core CPU machine, 2026-12-04, at nice 10
under load from other jobs; CPU seconds do not count waiting):

* ``power-method-gd``: 357 CPU-s for three seeds (about 119 a seed); published with three seeds
  at the ``cpu`` size (d=8, n=16, L=5, 3000 steps): with normalisation the late log-log slope of
  w_t is 0.261, 0.259, 0.261 (Theorem 4.1: 1/4) and of rho_t 0.523, 0.518, 0.522, the cosine
  with the power method ends at 0.999 and the iterates stay on the block manifold (off-block
  ratio 0); the control without it leaves the manifold (largest off-block ratio 21, 7.9, 1248)
  and ends at a cosine of 0.20, 0.18, 0.16.
* ``power-method-layerwise``: 134 CPU-s for three seeds (about 45 a seed); published with three
  seeds at the ``cpu`` size (d=8, n=16, 4000 steps): with normalisation the held-out loss falls
  to 0.011 and the rate to 0.798, 0.796, 0.798 against lambda_2/lambda_1 = 0.776, 0.774, 0.775;
  without it the loss sits at the closed-form plateau at half-training (0.2733, 0.2674, 0.2761,
  equal to it) but then leaves the block manifold (off-block ratio 0.92, 0.91, 0.90 at the end)
  and ends below the plateau (0.243, 0.237, 0.248), rate 0.94, 0.92, 0.93 against R* = 0.954.
  Its scaling study in training steps (500 to 4000) is
  :mod:`empirics.power_method_scaling` (``power-method-layerwise-scaling``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from constructions.power_method import (
    block_coordinates,
    block_weights,
    from_block_weights,
    power_iteration,
    sample_data,
    trainable,
)
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot
from empirics.training import TrainConfig, train

# --- data ----------------------------------------------------------------------------------


def symmetry_orbit(d: int) -> torch.Tensor:
    r"""The signed cyclic permutations :math:`P^kD_s`, shape ``(m d, d, d)`` (float64).

    ``s`` runs over the rows of the Sylvester Hadamard matrix of order :math:`m = 2^{\lceil
    \log_2 d\rceil}` cut to ``d`` columns, so :math:`\sum_s D_sGD_s = m\,\mathrm{diag}(G)`,
    and the cyclic shifts then average the diagonal: :math:`\sum_{k,s} P^kD_sGD_sP^{-k} =
    m\,\mathrm{tr}(G)\,I` for every :math:`G`.
    """
    m = 1 << max(0, math.ceil(math.log2(d)))
    H = torch.ones(1, 1, dtype=torch.float64)
    while H.shape[0] < m:
        H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
    eye = torch.eye(d, dtype=torch.float64)
    return torch.stack([torch.roll(eye, k, 0) * s for s in H[:, :d] for k in range(d)])


class Task:
    """Seeded batches of ``(X, a, top)`` with ``top`` the unit top eigenvector of ``XXᵀ``.

    The sampler draws on a CPU generator (identical data on every device), computes the
    eigenvectors in float64, and expands each base example by the symmetry orbit when asked.
    """

    def __init__(self, d: int, n: int, *, orbit: bool, dtype: torch.dtype,
                 device: torch.device) -> None:
        self.d, self.n, self.dtype, self.device = d, n, dtype, device
        self.orbit = symmetry_orbit(d) if orbit else None

    def sample(self, batch: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        X, a = sample_data(batch, self.d, self.n, generator=generator)
        values, vectors = torch.linalg.eigh(X @ X.mT)
        out = {"X": X, "a": a, "top": vectors[..., -1], "second": vectors[..., -2],
               "lam1": values[..., -1], "lam2": values[..., -2]}
        if self.orbit is not None:  # (QX, Qa) has eigenvectors Qv and the same eigenvalues
            for key in ("a", "top", "second"):
                out[key] = (self.orbit[None] @ out[key][:, None, :, None]).flatten(0, 1)[..., 0]
            out["X"] = (self.orbit[None] @ X[:, None]).flatten(0, 1)
            for key in ("lam1", "lam2"):
                out[key] = out[key].repeat_interleave(len(self.orbit))
        return {k: v.to(device=self.device, dtype=self.dtype) for k, v in out.items()}


def distance_squared(y: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathrm{Dist}^2(y, \mathrm{span}(v_1)) = \lVert y - (v_1^\top y)v_1\rVert^2`,
    per example."""
    return (y - (y * top).sum(-1, keepdim=True) * top).pow(2).sum(-1)


def cosine_rows(y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine, in float64 (robust to the no-normalisation run's huge or tiny norms)."""
    y, z = y.double(), z.double()
    y = y / y.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return (y * z).sum(-1)


def late_slope(steps: list[int], values: list[float], start_fraction: float = 0.5) -> float:
    """Least-squares slope of log(value) against log(step) over steps >= start_fraction * last."""
    keep = [(s, v) for s, v in zip(steps, values, strict=True)
            if s >= start_fraction * steps[-1] and v > 0]
    if len(keep) < 2:
        return math.nan
    x = np.log([s for s, _ in keep])
    y = np.log([v for _, v in keep])
    return float(np.polyfit(x, y, 1)[0])


def _figure():
    plt = pyplot()

    return plt


# --- PM.2: GD on the looped model ----------------------------------------------------------


def _train_looped(config: dict, device: torch.device, seed: int, normalize: bool,
                  heldout: dict, desc: str) -> tuple[torch.nn.Module, dict]:
    """Train the looped model from the block initialisation; the run without normalisation
    uses ``control_lr`` and clips the gradient norm at ``control_grad_clip``."""
    dtype = torch.float32 if config["dtype"] == "float32" else torch.float64
    task = Task(config["d"], config["n"], orbit=config["orbit"], dtype=dtype, device=device)
    W, V = block_weights(config["d"], config["init"], config["init"], dtype=dtype)
    model = trainable(from_block_weights(W, V, normalize=normalize))
    loops = config["loops"]

    def loss_fn(model, batch):
        y = model(batch["X"], batch["a"], loops)
        return distance_squared(y, batch["top"]).mean()

    def sample_batch(step, generator):
        return task.sample(config["batch"], generator)

    def evaluate(model):
        y = model(heldout["X"], heldout["a"], loops)
        coords = block_coordinates(model.W, model.V)
        W, V = model.W.detach().double(), model.V.detach().double()
        d = config["d"]
        structural = math.hypot(
            float(W[:, :d].norm()), float(W[d:, d:].norm()),
            float(V[:, d:].norm()), float(V[:d, :d].norm()))
        direction = y.double() / y.double().norm(dim=-1, keepdim=True)
        return {"heldout_loss": float(distance_squared(direction, heldout["top"]).mean()),
                "raw_loss": float(distance_squared(y.double(), heldout["top"]).mean()),
                "cos_power_method": float(cosine_rows(y, heldout["power_method"]).mean()),
                "w": coords["w"], "v": coords["v"], "rho": coords["rho"],
                "off_ratio": coords["off_ratio"], "off_structural": structural}

    lr = config["lr"] if normalize else config["control_lr"]
    clip = None if normalize else config["control_grad_clip"]
    train_config = TrainConfig(steps=config["steps"], lr=lr, optimizer="sgd", grad_clip=clip,
                               eval_every=config["eval_every"], seed=seed,
                               dtype=config["dtype"], progress=config.get("progress", True))
    result = train(model, loss_fn, sample_batch, train_config, evaluate=evaluate,
                   device=device, desc=desc)
    return model, result.as_record()


def heldout_set(config: dict, seed: int, device: torch.device, dtype: torch.dtype) -> dict:
    """A fixed held-out set (its own seed), with the power method's L-step output."""
    generator = torch.Generator().manual_seed(10_000 + seed)
    task = Task(config["d"], config["n"], orbit=False, dtype=torch.float64,
                device=torch.device("cpu"))
    data = task.sample(config["eval_size"], generator)
    loops = config.get("loops", 1)
    data["power_method"] = power_iteration(data["X"] @ data["X"].mT, data["a"], loops)[:, -1]
    return {k: v.to(device=device, dtype=dtype) for k, v in data.items()}


def heldout_digest(heldout: dict) -> str:
    """SHA-256 of the held-out ``X``, ``a`` and target's bytes (CPU, contiguous): lets a check
    that regenerates the set confirm it holds the very floats the run evaluated on."""
    import hashlib

    digest = hashlib.sha256()
    for key in ("X", "a", "power_method"):
        digest.update(heldout[key].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def run_gd(config: dict, device: torch.device, seed: int) -> Result:
    """PM.2: train the looped model with and without normalisation; see the module docstring."""
    dtype = torch.float32 if config["dtype"] == "float32" else torch.float64
    heldout = heldout_set(config, seed, device, dtype)
    result = Result(experiment="power-method-gd", config=dict(config), seed=seed,
                    device=str(device))
    limit = float(distance_squared(heldout["power_method"].double(),
                                   heldout["top"].double()).mean())
    runs = {"ln": True, "no_ln": False} if config["control"] else {"ln": True}
    histories = {}
    for name, normalize in runs.items():
        _, record = _train_looped(config, device, seed, normalize, heldout,
                                  desc=f"power-method-gd[{name}]")
        result.training[name] = record
        histories[name] = record["history"]
    hist = histories["ln"]
    steps = [int(h["step"]) for h in hist]
    w = [h["w"] for h in hist]
    excess = [h["heldout_loss"] - limit for h in hist]
    late = [h for h in hist if h["step"] >= steps[-1] / 2]
    # w^4 = w0^4 + K t in the t^{1/4} regime: K is the growth constant (eta Upsilon_1/d up to
    # the paper's constant, which we do not claim).
    k_fit = np.polyfit([h["step"] for h in late], [h["w"] ** 4 for h in late], 1)[0]
    result.metrics.update({
        "limit_loss": limit,
        "final_loss": hist[-1]["heldout_loss"],
        "final_excess_loss": excess[-1],
        "excess_loss_late_slope": late_slope(steps, excess),
        "w_late_slope": late_slope(steps, w),
        "rho_late_slope": late_slope(steps, [h["rho"] for h in hist]),
        "w4_growth_constant": float(k_fit),
        "final_w": w[-1], "final_rho": hist[-1]["rho"],
        "max_off_ratio": max(h["off_ratio"] for h in hist),
        "max_off_structural": max(h["off_structural"] for h in hist),
        "first_cos_power_method": hist[0]["cos_power_method"],
        "final_cos_power_method": hist[-1]["cos_power_method"],
    })
    if "no_ln" in histories:
        control = histories["no_ln"]
        result.metrics.update({
            "control_final_cos_power_method": control[-1]["cos_power_method"],
            "control_final_rho": control[-1]["rho"],
            "control_final_loss": control[-1]["heldout_loss"],
            "control_final_raw_loss": control[-1]["raw_loss"],
            "control_max_off_ratio": max(h["off_ratio"] for h in control),
        })
    plt = _figure()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].loglog(steps, [max(abs(x), 1e-12) for x in w], label="$w_t$ (LN)")
    ref = np.array(steps, dtype=float)
    axes[0].loglog(ref, w[-1] * (ref / ref[-1]) ** 0.25, "--", label=r"$\propto t^{1/4}$")
    axes[0].set(xlabel="step $t$", ylabel="$w_t$", title="weight growth")
    axes[1].loglog(steps, [max(e, 1e-12) for e in excess], label="LN")
    axes[1].loglog(ref, excess[-1] * (ref / ref[-1]) ** -0.5, "--", label=r"$\propto t^{-1/2}$")
    axes[1].set(xlabel="step $t$", ylabel=r"loss $-\ L_\infty$", title="excess loss")
    for name, history in histories.items():
        axes[2].plot([h["step"] for h in history],
                     [1 - h["cos_power_method"] for h in history], label=name)
    axes[2].set_yscale("log")
    axes[2].set(xlabel="step $t$", ylabel="1 - cos(y_L, power method)",
                title="distance to the power method")
    from matplotlib.ticker import NullFormatter

    for ax in axes:
        ax.legend()
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    fig.tight_layout()
    result.figures["w-vs-t"] = fig
    result.table("history (LN)", ["step", "w", "rho", "heldout loss", "cos to power method",
                                  "off ratio"],
                 [[h["step"], round(h["w"], 5), round(h["rho"], 5), round(h["heldout_loss"], 6),
                   round(h["cos_power_method"], 6), f"{h['off_ratio']:.2e}"]
                  for h in hist[:: max(1, len(hist) // 8)]])
    return result


# --- PM.3: one layer, layer-wise supervision -----------------------------------------------


def effective_shift(f: torch.Tensor, a: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    r"""The :math:`\gamma` with :math:`f \parallel a + \gamma Sa`, read off the output ``f``.

    With :math:`u = Sa - (a^\top Sa)a` (so :math:`u \perp a` for a unit :math:`a`) and
    :math:`f = \alpha(a + \gamma Sa)`: :math:`f^\top u = \alpha\gamma\lVert u\rVert^2` and
    :math:`f^\top a = \alpha(1 + \gamma a^\top Sa)`, which gives :math:`\alpha` and then
    :math:`\gamma`. A function-level (gauge-invariant) reading of the learned layer.
    """
    f, a, S = f.double(), a.double(), S.double()
    Sa = (S @ a.unsqueeze(-1)).squeeze(-1)
    q = (a * Sa).sum(-1)
    u = Sa - q.unsqueeze(-1) * a
    fu, fa = (f * u).sum(-1), (f * a).sum(-1)
    alpha = fa - fu * q / u.pow(2).sum(-1)
    return fu / (u.pow(2).sum(-1) * alpha)


def contraction_rate(layer: Callable, X: torch.Tensor, top: torch.Tensor,
                     second: torch.Tensor) -> torch.Tensor:
    r"""How much one application of ``layer`` shrinks :math:`\tan\varphi`, per example.

    Input :math:`y = (v_1 + v_2)/\sqrt 2` (so :math:`\tan\varphi(y) = 1`); the output's
    :math:`\tan\varphi = |v_2^\top f|/|v_1^\top f|` is the rate. For a layer on the block
    manifold, :math:`f \parallel (I + \gamma S)y` and the rate is exactly
    :math:`(1 + \gamma\lambda_2)/(1 + \gamma\lambda_1)`.
    """
    y = (top + second) / math.sqrt(2)
    f = layer(X, y).double()
    return (f * second.double()).sum(-1).abs() / (f * top.double()).sum(-1).abs()


def optimal_shift(data: dict) -> tuple[float, float, float]:
    r"""Closed form over the block manifold without normalisation, on a sample:
    :math:`\hat\gamma^* = \sum (Sa)^\top(t - a)/\sum\lVert Sa\rVert^2`, the loss there, and the
    standard error of :math:`\hat\gamma^*` (delta method on the ratio of means)."""
    X, a = data["X"].double(), data["a"].double()
    Sa = (X @ (X.mT @ a.unsqueeze(-1))).squeeze(-1)
    t = Sa / Sa.norm(dim=-1, keepdim=True)
    num, den = (Sa * (t - a)).sum(-1), Sa.pow(2).sum(-1)
    gamma_star = float(num.mean() / den.mean())
    loss = float((a + gamma_star * Sa - t).pow(2).sum(-1).mean())
    influence = (num - gamma_star * den) / den.mean()
    se = float(influence.std() / math.sqrt(len(influence)))
    return gamma_star, loss, se


def run_layerwise(config: dict, device: torch.device, seed: int) -> Result:
    """PM.3: one layer on the first power iterate, with and without normalisation.

    Besides the metrics, ``tables["<run> final weights"]`` holds each run's final ``W`` and
    ``V`` (float64 lists, row-major) and ``tables["held-out set"]`` the held-out floats'
    digest: the layer-wise check certifies the no-LN loss's floor from them."""
    dtype = torch.float32 if config["dtype"] == "float32" else torch.float64
    heldout = heldout_set({**config, "loops": 1}, seed, device, dtype)
    heldout["S"] = heldout["X"] @ heldout["X"].mT
    heldout["target"] = heldout["power_method"]
    digest = heldout_digest(heldout)
    gamma_star, plateau, gamma_se = optimal_shift(
        {k: v.cpu() for k, v in heldout.items()})
    mc = Task(config["d"], config["n"], orbit=False, dtype=torch.float64,
              device=torch.device("cpu")).sample(config["mc_size"],
                                                 torch.Generator().manual_seed(20_000 + seed))
    gamma_pop, plateau_pop, gamma_pop_se = optimal_shift(mc)
    lam1, lam2 = heldout["lam1"].double(), heldout["lam2"].double()
    ratio = lam2 / lam1
    r_star = (1 + gamma_pop * lam2) / (1 + gamma_pop * lam1)
    result = Result(experiment="power-method-layerwise", config=dict(config), seed=seed,
                    device=str(device))
    result.metrics.update({"gamma_star": gamma_star, "gamma_star_population": gamma_pop,
                           "gamma_star_population_se": gamma_pop_se,
                           "gamma_star_se": gamma_se,
                           "plateau_loss": plateau, "plateau_loss_population": plateau_pop,
                           "mean_r_star": float(r_star.mean()),
                           "mean_eigen_ratio": float(ratio.mean())})
    task = Task(config["d"], config["n"], orbit=config["orbit"], dtype=dtype, device=device)
    histories = {}
    for name, normalize in (("ln", True), ("no_ln", False)):
        W, V = block_weights(config["d"], config["init"], config["init"], dtype=dtype)
        model = trainable(from_block_weights(W, V, normalize=normalize))

        def loss_fn(model, batch):
            Sa = (batch["X"] @ (batch["X"].mT @ batch["a"].unsqueeze(-1))).squeeze(-1)
            target = Sa / Sa.norm(dim=-1, keepdim=True)
            return (model(batch["X"], batch["a"], 1) - target).pow(2).sum(-1).mean()

        def evaluate(model):
            f = model(heldout["X"], heldout["a"], 1)
            rate = contraction_rate(lambda X, y: model(X, y, 1), heldout["X"], heldout["top"],
                                    heldout["second"])
            coords = block_coordinates(model.W, model.V)
            return {"heldout_loss": float((f.double() - heldout["target"].double())
                                          .pow(2).sum(-1).mean()),
                    "gamma_eff": float(effective_shift(f, heldout["a"], heldout["S"]).median()),
                    "rate": float(rate.mean()),
                    "rate_gap": float((rate - ratio).mean()),
                    "rate_vs_r_star": float((rate - r_star).abs().max()),
                    "off_ratio": coords["off_ratio"], "rho": coords["rho"]}

        train_config = TrainConfig(steps=config["steps"], lr=config["lr"], optimizer="sgd",
                                   eval_every=config["eval_every"], seed=seed,
                                   dtype=config["dtype"], schedule=config["schedule"],
                                   progress=config.get("progress", True))
        record = train(model, loss_fn, lambda step, g: task.sample(config["batch"], g),
                       train_config, evaluate=evaluate, device=device,
                       desc=f"power-method-layerwise[{name}]").as_record()
        result.training[name] = record
        histories[name] = record["history"]
        final = record["history"][-1]
        # the last evaluation at or before half-way (the first one when eval_every > steps/2)
        half = ([h for h in record["history"] if h["step"] <= config["steps"] // 2]
                or record["history"][:1])[-1]
        # the weights of the final evaluation (train evaluates after the last step), exactly:
        # the layer-wise check certifies the no-LN loss's floor from them
        W_final, V_final = model.W.detach().double().cpu(), model.V.detach().double().cpu()
        result.table(f"{name} final weights", ["matrix", "entries"],
                     [["W", W_final.flatten().tolist()], ["V", V_final.flatten().tolist()]])
        result.metrics.update({metric_key(name, key): final[key] for key in
                               ("heldout_loss", "gamma_eff", "rate", "rate_gap",
                                "rate_vs_r_star", "off_ratio")})
        result.metrics[metric_key(name, "half_loss")] = half["heldout_loss"]
        result.metrics[metric_key(name, "half_rate_gap")] = half["rate_gap"]
    result.table("held-out set", ["digest", "sha256"], [["X, a, target", digest]])
    plt = _figure()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, history in histories.items():
        steps = [h["step"] for h in history]
        axes[0].plot(steps, [h["heldout_loss"] for h in history], label=name, lw=2)
        axes[1].plot(steps, [h["rate"] for h in history], label=f"measured rate ({name})")
    axes[0].axhline(plateau, ls=":", c="k", lw=1, label=r"closed-form plateau $L(\gamma^*)$")
    axes[0].set_yscale("log")
    axes[0].set(xlabel="step", ylabel="held-out loss", title="layer-wise loss")
    axes[1].axhline(float(r_star.mean()), ls="--", c="C1", label=r"$R^*$ (mean)")
    axes[1].axhline(float(ratio.mean()), ls=":", c="C0", label=r"$\lambda_2/\lambda_1$ (mean)")
    axes[1].set(xlabel="step", ylabel="contraction rate", title="rate of the learned layer")
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    result.figures["layerwise"] = fig
    return result


# --- the experiments ---------------------------------------------------------------------------

GD_EXPERIMENT = Experiment(
    name="power-method-gd",
    description=("GD from the block initialisation on the looped model with and without "
                 "ℓ2 normalisation (Theorem 4.1): manifold, w_t ~ t^{1/4}, power method"),
    claims=("power-method.gd-learns-power-method",),
    configs={
        # About 2.5 s of one CPU thread for both runs. Orbit batches: 4 base examples x 16
        # images. Without normalisation the loss is a degree-2L polynomial in rho, so plain SGD
        # diverges at lr 1.0 (and at any usable lr once L = 10): the control uses the paper's
        # lr 0.1 and clips the gradient norm at 1.
        "smoke": {"d": 4, "n": 8, "loops": 2, "batch": 4, "orbit": True, "steps": 500,
                  "lr": 1.0, "control_lr": 0.1, "control_grad_clip": 1.0, "init": 0.5,
                  "eval_every": 20, "eval_size": 256, "dtype": "float32", "control": True},
        # Between the two, for a few CPU-minutes a seed: d=8, n=16, L=5 (8 base examples x
        # 64 orbit images), the paper's lr 0.1, a tenth of the full run's steps.
        "cpu": {"d": 8, "n": 16, "loops": 5, "batch": 8, "orbit": True, "steps": 3000,
                "lr": 0.1, "control_lr": 0.1, "control_grad_clip": 1.0, "init": 0.5,
                "eval_every": 150, "eval_size": 1000, "dtype": "float32", "control": True},
        # The paper's size (d=16, n=32, L=10) and lr 0.1, for a GPU. Orbit batches (8 base
        # examples x 256 images) follow the population gradient that Theorem 4.1 is about; the
        # paper's plain minibatches (128 of a fixed 10k set) drift off the manifold by noise.
        "full": {"d": 16, "n": 32, "loops": 10, "batch": 8, "orbit": True, "steps": 30_000,
                 "lr": 0.1, "control_lr": 0.1, "control_grad_clip": 1.0, "init": 0.5,
                 "eval_every": 500, "eval_size": 2000, "dtype": "float32", "control": True},
    },
    run=run_gd,
    code=("constructions.power_method",),
)

LAYERWISE_EXPERIMENT = Experiment(
    name="power-method-layerwise",
    description=("One layer supervised on the first power iterate, with and without ℓ2 "
                 "normalisation (Theorems 4.2, 4.3, 4.6)"),
    claims=("power-method.layerwise-ln-vs-none",),
    configs={
        # About 1.2 s of one CPU thread for both runs (4 base examples x 16 orbit images).
        "smoke": {"d": 4, "n": 8, "batch": 4, "orbit": True, "steps": 300, "lr": 0.2,
                  "init": 0.5, "eval_every": 20, "eval_size": 256, "mc_size": 20_000,
                  "schedule": "constant", "dtype": "float64"},
        # Between the two, for a few CPU-minutes a seed: d=8, n=16 (8 base examples x 64 orbit
        # images), the full run's lr, a fifth of its steps.
        "cpu": {"d": 8, "n": 16, "batch": 8, "orbit": True, "steps": 4000, "lr": 0.05,
                "init": 0.5, "eval_every": 250, "eval_size": 1000, "mc_size": 100_000,
                "schedule": "constant", "dtype": "float32"},
        "full": {"d": 16, "n": 32, "batch": 8, "orbit": True, "steps": 20_000, "lr": 0.05,
                 "init": 0.5, "eval_every": 500, "eval_size": 2000, "mc_size": 200_000,
                 "schedule": "constant", "dtype": "float32"},
    },
    run=run_layerwise,
    code=("constructions.power_method",),
)
