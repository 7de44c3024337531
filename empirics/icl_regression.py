r"""Gradient descent against the in-context regression constructions (IR.1–IR.6).

Three experiments, each with a CPU ``smoke`` config (what the checks run) and a GPU ``full``
config (larger ``d`` and ``n``):

* ``icl-regression-lsa``: a one-layer LSA from a small random start, trained by Adam on a
  :class:`RegressionCase` (isotropic, preconditioned, or sine responses) and compared with
  the closed form through its gauge-invariant effective predictor; the figure plots
  :math:`\lVert\Gamma_t - \Gamma^*\rVert_F/\lVert\Gamma^*\rVert_F` against the step. The smoke
  config trains full-batch on a fixed set of prompts, the very prompts of the convex
  (lifted least-squares) fit, so trained and convex optimum share their Monte Carlo error;
  the full config trains online on fresh prompts and takes the Polyak–Ruppert average of the
  last part of training as its estimate.
* ``icl-regression-zfb``: full-batch gradient descent with a small step (a forward-Euler
  gradient flow) from Zhang–Frei–Bartlett's balanced initialisation, on antithetic prompts
  (each task with its mirror, so the empirical risk keeps the population's symmetry and the
  odd blocks stay zero). Each step records what the conservation law of
  :math:`Q = \lVert W_{PV}\rVert_F^2 - \lVert W_{KQ}\rVert_F^2` needs.
* ``icl-regression-cot``: one layer in the :math:`(x, y, w, 1)` layout, trained online with
  a teacher-forced chain-of-thought loss to map :math:`w_k \mapsto w_{k+1}`; compared
  through its effective update map and the gauge-invariant products
  :math:`W_{PV}[w,x]W_{KQ}[x,w]` and :math:`W_{PV}[w,x]W_{KQ}[y,1]`.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``icl-regression-cot``: about 125 CPU-min a seed, extrapolated from two runs of the full
  config cut to 40 and 80 of its 20000 steps (17 and 32 CPU-s); not run to the end on a CPU, so
  its full config is left to a GPU.
* ``icl-regression-lsa``: about 59 CPU-min a seed, extrapolated from two runs of the full config
  cut to 40 and 80 of its 20000 steps (20 and 27 CPU-s); not run to the end on a CPU, so its
  full config is left to a GPU.
* ``icl-regression-zfb``: its full config cut to 40 of its 20000 steps did not finish within 60
  CPU-s, so a seed takes more than 6 CPU-hours (counting 15 CPU-s as start-up); left to a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import torch

from constructions.icl_regression import (
    RegressionPrompts,
    cot_prompt,
    gd_iterates,
    key_moment,
    lifted_coefficients,
    lifted_features,
    lsa,
    multi_step_layer,
    nonlinear_optimal_step,
    optimal_preconditioner,
    pair_coefficients,
    pair_features,
    sine_response_moments,
    spd_matrix,
    zfb_init,
)
from constructions.icl_regression.task import draw_prompts_unchecked  # the sampler's unchecked loop
from empirics.experiment import Experiment, Result
from empirics.plots import new_axes
from empirics.training import TrainConfig, train

CASE_NAMES = ("isotropic", "preconditioned", "sine", "zfb")


@dataclass(frozen=True, eq=False)
class RegressionCase:
    r"""A task distribution: :math:`x \sim N(0,\Sigma)`, :math:`w \sim N(0,\Omega)`, noise
    :math:`\sigma^2`, linear or sine responses, prompts of ``n`` examples in ``d`` dims."""

    name: str
    n: int
    d: int
    sigma2: float
    Sigma: torch.Tensor
    Omega: torch.Tensor
    response: str = "linear"

    @cached_property
    def factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Cholesky factors of Sigma and Omega, validated once for the inner loops."""
        return (torch.linalg.cholesky(spd_matrix("Sigma", self.Sigma, self.d)),
                torch.linalg.cholesky(spd_matrix("Omega", self.Omega, self.d)))

    def sample(self, batch: int, generator: torch.Generator, *, n: int | None = None,
               antithetic: bool = False) -> RegressionPrompts:
        """``batch`` tasks with prompts of ``n`` examples (default: the case's ``n``)."""
        L_x, L_w = self.factors
        return draw_prompts_unchecked(batch, self.n if n is None else n, L_x, L_w, self.sigma2,
                            self.response, antithetic, generator)

    def closed_form(self) -> torch.Tensor:
        """The optimal preconditioner :math:`\\Gamma^*` of this case (``d x d``)."""
        if self.response == "sine":
            m = sine_response_moments(self.d, float(self.Omega[0, 0]))
            return nonlinear_optimal_step(self.n, m["g2"], m["f2x2"]) * torch.eye(
                self.d, dtype=torch.float64)
        return optimal_preconditioner(self.n, self.sigma2, self.Sigma, self.Omega)


def _rotation(d: int, seed: int) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed),
                                       dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def regression_case(name: str, n: int = 10, d: int = 3) -> RegressionCase:
    r"""The named cases the checks use.

    * ``isotropic``: :math:`\Sigma = \Omega = I`, :math:`\sigma = 0.5` (IR.1).
    * ``preconditioned``: :math:`\Sigma = Q_1\,\mathrm{diag}(\text{0.5 to 2})Q_1^\top`,
      :math:`\Omega = Q_2\,\mathrm{diag}(\text{2 to 0.5})Q_2^\top` with two fixed rotations,
      so :math:`\Sigma\Omega \ne \Omega\Sigma`; :math:`\sigma = 0.5` (IR.2).
    * ``sine``: :math:`y = \sin(w^\top x)`, :math:`w \sim N(0, I)`, noiseless (IR.5).
    * ``zfb``: :math:`\Sigma = \Lambda = \mathrm{diag}(\text{0.5 to 2})`, :math:`\Omega = I`,
      noiseless: Zhang–Frei–Bartlett's setting (IR.3).
    """
    if name not in CASE_NAMES:
        raise ValueError(f"name must be one of {CASE_NAMES}, got {name!r}")
    eye = torch.eye(d, dtype=torch.float64)
    spread = torch.logspace(math.log10(0.5), math.log10(2.0), d, dtype=torch.float64)
    if name == "isotropic":
        return RegressionCase(name, n, d, 0.25, eye, eye)
    if name == "preconditioned":
        Q1, Q2 = _rotation(d, 1), _rotation(d, 2)
        return RegressionCase(name, n, d, 0.25, (Q1 * spread) @ Q1.T,
                              (Q2 * spread.flip(0)) @ Q2.T)
    if name == "sine":
        return RegressionCase(name, n, d, 0.0, eye, eye, response="sine")
    return RegressionCase(name, n, d, 0.0, torch.diag(spread), eye)


def random_lsa(d: int, scale: float, generator: torch.Generator):
    r"""A random start in the sign pattern of the optimum, perturbed off its sparsity.

    :math:`W_{KQ}[x, x] = -\text{scale}\,\Theta\Theta^\top/\lVert\Theta\Theta^\top\rVert_F`
    with Gaussian :math:`\Theta` (Zhang–Frei–Bartlett's form, with a random :math:`\Theta`),
    the last row of :math:`W_{PV}` equal to :math:`\text{scale}\cdot e_{d+1}`, and the blocks
    that carry no signal at the optimum, :math:`u_x` and :math:`W_{KQ}[y, x]`, drawn from
    :math:`N(0, (\text{scale}/10)^2)` (the other entries do not affect the prediction).

    Why not an i.i.d. Gaussian start: :math:`\hat y` is bilinear in :math:`(u, V)` and the
    training problem has spurious stationary points that use the cross term
    :math:`-V_{yx}^\top u_x^\top` of :math:`\Gamma` with nonzero :math:`G_{xx}` and
    :math:`G_{yy}` terms. From i.i.d. starts, full-batch Adam settled at such points on two of
    six seeds of the sine case (loss 0.3955 against 0.3395), and on one of eight seeds of the
    preconditioned case when :math:`-u_yV_{xx}^\top` started with eigenvalues of the wrong
    sign. The claims are about the global minimiser, which this start reaches (seeds 0 to 7 of
    all three cases: excess risk 0.09 to 0.55 of the Monte Carlo resolution).
    """
    small = scale / 10
    Theta = torch.randn(d, d, generator=generator, dtype=torch.float64)
    block = Theta @ Theta.T
    W_PV = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_PV[d, :d] = small * torch.randn(d, generator=generator, dtype=torch.float64)
    W_PV[d, d] = scale
    W_KQ = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    W_KQ[:d, :d] = -scale * block / block.norm()
    W_KQ[d, :d] = small * torch.randn(d, generator=generator, dtype=torch.float64)
    return lsa(W_PV, W_KQ)


def _lifted(model) -> torch.Tensor:
    return model.lifted_coefficients().detach().double().cpu()


# --- Monte Carlo sufficient statistics of the lifted least-squares problem --------------------

@dataclass(frozen=True)
class LiftedStatistics:
    r"""Sufficient statistics of ``B`` sampled prompts in the lifted features
    :math:`\phi` (:func:`~constructions.icl_regression.lifted_features`).

    ``gram`` :math:`= \tfrac1B\Phi^\top\Phi`, ``cross`` :math:`= \tfrac1B\Phi^\top y_q`,
    ``yy`` :math:`= \tfrac1B y_q^\top y_q`, so that the empirical risk of *any* one-layer LSA
    with lifted coefficients :math:`\theta` on these prompts is exactly
    :math:`\hat L(\theta) = \theta^\top\text{gram}\,\theta - 2\theta^\top\text{cross} + \text{yy}`.
    ``theta`` is the least-squares solution (the convex optimum over all LSAs and more),
    ``covariance`` its sandwich (heteroscedasticity-robust) covariance
    :math:`(\Phi^\top\Phi)^{-1}\Phi^\top\mathrm{diag}(r^2)\Phi(\Phi^\top\Phi)^{-1}`, and
    ``loss_variance`` the per-prompt variance of the squared residual at ``theta`` (for the
    standard error of a Monte Carlo loss).
    """

    prompts: int
    gram: torch.Tensor
    cross: torch.Tensor
    yy: float
    theta: torch.Tensor
    covariance: torch.Tensor
    loss_variance: float

    @property
    def standard_errors(self) -> torch.Tensor:
        return self.covariance.diagonal().sqrt()

    def risk(self, theta: torch.Tensor) -> torch.Tensor:
        """The empirical risk on these prompts of the LSA with lifted coefficients ``theta``."""
        theta = theta.to(self.gram)
        return theta @ self.gram @ theta - 2 * theta @ self.cross + self.yy

    def excess(self, theta: torch.Tensor, reference: torch.Tensor) -> float:
        r""":math:`(\theta - \theta_r)^\top\text{gram}(\theta - \theta_r)`: the excess risk of
        ``theta`` over ``reference`` when the reference is the optimum (the lifted metric)."""
        delta = (theta - reference).to(self.gram)
        return float(delta @ self.gram @ delta)

    def resolution(self, z: float) -> float:
        r"""How far in the lifted metric the least-squares solution itself is expected to lie
        from the population optimum: its excess is a weighted sum of :math:`\chi^2_1`s with
        weights the eigenvalues of :math:`M = \text{gram}\cdot\text{covariance}`; this returns
        :math:`\mathrm{tr}M + z\sqrt{2\,\mathrm{tr}M^2}` (mean plus ``z`` standard deviations)."""
        M = self.gram @ self.covariance
        return float(torch.trace(M) + z * torch.sqrt(2 * torch.trace(M @ M)))


def _chunk_prompts(case: RegressionCase, seed: int, chunk: int, size: int, antithetic: bool):
    prompts = case.sample(size, torch.Generator().manual_seed(seed * 1_000_003 + chunk),
                          antithetic=antithetic)
    return lifted_features(prompts.Z), prompts.y_query


def mirror_parity(d: int) -> torch.Tensor:
    r"""The sign each lifted feature :math:`G_{ab}(x_q)_c` takes under the mirror
    :math:`y \to -y` (context labels and query label together), ``(P,)``: :math:`-1` where
    exactly one of :math:`a, b` is the label row :math:`d`, else :math:`+1`."""
    rows, cols = torch.triu_indices(d + 1, d + 1)
    pair = torch.where((rows == d) ^ (cols == d), -1.0, 1.0).to(torch.float64)
    return pair.repeat_interleave(d)      # lifted_features flattens (pair, c) with c fastest


def _mirror_symmetric(gram: torch.Tensor, cross: torch.Tensor, d: int
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The antithetic sums with the entries the pairing cancels set to exact zeros.

    Under the mirror a feature of parity :math:`s_j` becomes :math:`s_j\phi_j` and the label
    :math:`-y`, so over each pair :math:`\sum\phi_i\phi_j = 0` when :math:`s_i \ne s_j` and
    :math:`\sum\phi_jy = 0` when :math:`s_j = +1`, exactly. The chunked float sums leave
    there only rounding (a pair's two terms land in different blocks of the matmul); setting
    them to 0 is the exact value, and it makes the float risk exactly mirror-invariant, which
    is what keeps the odd weights exactly zero in float (``zfb_conservation_check``).
    """
    s = mirror_parity(d).to(gram)
    gram = torch.where(s[:, None] * s[None, :] < 0, 0.0, gram)
    cross = torch.where(s > 0, 0.0, cross)
    return gram, cross


@lru_cache(maxsize=16)
def lifted_statistics(name: str, n: int, d: int, prompts: int, seed: int,
                      antithetic: bool = False, chunk_size: int = 50_000) -> LiftedStatistics:
    """Monte Carlo lifted least squares on ``prompts`` fresh prompts of the case ``name``
    (:func:`regression_case`); two passes, the second regenerating each chunk from its seed,
    so memory stays at one chunk. Cached: the convex fit and the trained model share it.
    ``antithetic=True`` pairs each task with its mirror (``sample_prompts``), which makes the
    empirical risk exactly invariant under :math:`y \\to -y`, as the population risk is; the
    entries of the sums that the pairing cancels are set to their exact value 0
    (:func:`_mirror_symmetric`), so the float risk is exactly invariant too."""
    case = regression_case(name, n, d)
    sizes = [min(chunk_size, prompts - start) for start in range(0, prompts, chunk_size)]
    gram = cross = 0.0
    yy = 0.0
    for index, size in enumerate(sizes):
        Phi, y = _chunk_prompts(case, seed, index, size, antithetic)
        gram, cross, yy = gram + Phi.T @ Phi, cross + Phi.T @ y, yy + float(y @ y)
    if antithetic:
        gram, cross = _mirror_symmetric(gram, cross, d)
    theta = torch.linalg.solve(gram, cross)
    meat, sq_sum, sq_sq_sum = 0.0, 0.0, 0.0
    for index, size in enumerate(sizes):
        Phi, y = _chunk_prompts(case, seed, index, size, antithetic)
        r2 = (y - Phi @ theta).pow(2)
        meat = meat + (Phi * r2.unsqueeze(-1)).T @ Phi
        sq_sum, sq_sq_sum = sq_sum + float(r2.sum()), sq_sq_sum + float(r2.pow(2).sum())
    bread = torch.linalg.inv(gram)
    mean_sq = sq_sum / prompts
    return LiftedStatistics(prompts=prompts, gram=gram / prompts, cross=cross / prompts,
                            yy=yy / prompts, theta=theta, covariance=bread @ meat @ bread,
                            loss_variance=sq_sq_sum / prompts - mean_sq**2)


# --- icl-regression-lsa ----------------------------------------------------------------------

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
        snapshots.append(_lifted(model))
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
        "full": {"case": "preconditioned", "n": 40, "d": 10, "prompts": 0,
                 "prompts_per_step": 8192, "steps": 20000, "lr": 0.01, "step_every": 5000,
                 "step_gamma": 0.3, "eval_every": 20, "average_from": 0.5, "init_scale": 0.3,
                 "dtype": "float32", "progress": True},
    },
    run=run_lsa,
    code=("constructions.icl_regression",),
)


# --- icl-regression-zfb ------------------------------------------------------------------------

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
        snapshots.append(_lifted(model))
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
        "full": {"n": 40, "d": 10, "prompts": 2_000_000, "steps": 20000, "lr": 0.005,
                 "optimizer": "sgd", "init_scale": 0.3, "eval_every": 50, "progress": True},
    },
    run=run_zfb,
    code=("constructions.icl_regression",),
)


# --- icl-regression-cot ------------------------------------------------------------------------

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
        "full": {"d": 10, "n": 40, "k": 10, "eta": 0.3, "steps": 20000, "batch": 2048,
                 "lr": 0.005, "step_every": 5000, "step_gamma": 0.3, "eval_every": 200,
                 "init_scale": 0.1, "dtype": "float64", "progress": True},
    },
    run=run_cot,
    code=("constructions.icl_regression",),
)
