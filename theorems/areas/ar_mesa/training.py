r"""IR.7 (f): gradient descent from the authors' initialisation learns :math:`ab \approx ab^*`
and keeps the construction's block structure (one seeded run; the experiment is
:mod:`empirics.ar_mesa`)."""

from __future__ import annotations

import pytest
import torch

from constructions.ar_mesa_bounds import loss_identity_error_bound
from theorems.areas.ar_mesa._shared import SYMBOLS, ZHENG
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence

AR_TRAINED = Claim(
    id="ar-mesa.trained-optimum",
    title="Gradient descent from the code's initialisation learns ab ≈ ab* and keeps the "
          "structure",
    statement=(
        SYMBOLS
        + r"Train all of $W_{KQ} \in \mathbb C^{2d\times 2d}$ and $W_{PV}\in\mathbb C^{d\times "
          r"2d}$ by full-batch gradient descent on $\frac1m\sum_{n\le m}\frac1{2(T-2)}"
          r"\sum_{t=2}^{T-1}\lVert\hat y_t - x_{t+1}\rVert^2$ over $m$ sequences, from "
          r"$a = b = 0.1$. Then the learned "
          r"$ab = \frac1d\sum_j\mathrm{Re}(W_{KQ}[d+j,j]W_{PV}[j,j])$ is within 3% of $ab^*$ "
          r"and the entries outside the two diagonals stay $\approx 0$ (relative Frobenius "
          r"mass at most 5%). Checked in one run at $d = 3$, $T = 30$ (sequences from seed 0, "
          r"fixed start): one-hot starts ($ab^* = 1/s^2$, $m = 400$); Gaussian starts ($ab^*_T$; "
          r"3% plus three Monte Carlo standard errors of the training set's own optimum at "
          r"$m = 1000$; 3% and the 5% mass at $m = 5\cdot10^4$, in the full configuration)."),
    source=(Source(where="Abstract (training by gradient flow yields one GD step); the "
                         "initialisation and training loop of the code's main_train_ar.py",
                   tag="V", **ZHENG),
            Source(where="the tolerances and the finite-sample caveat, measured here", tag="D",
                   **ZHENG)),
    kind="dynamics",
    construction="constructions.ar_mesa:ar_mesa_layer",
    depends_on=("ar-mesa.one-hot-optimum", "ar-mesa.gaussian-optimum"),
    notes=("At m = 2000 Gaussian sequences (the catalogue's size) the training set's own "
           "optimum has a 4% relative standard error, and gradient descent also fits the "
           "off-diagonal blocks (about 25% relative mass): 3% holds only for larger m."),
)


# --- IR.7 (f): gradient descent ------------------------------------------------------------------

# The claim's tolerances: 3% on ab and 5% relative off-structure mass; the Gaussian smoke run
# adds three standard errors of its own training set's optimum (its m is 1000).
AB_TOLERANCE, OFF_TOLERANCE, SE_ALLOWANCE = 0.03, 0.05, 3.0


def trained_check(config: str = "smoke", reader=None, overrides: dict | None = None):
    """Run the ``ar-mesa`` config; check ab, structure and the loss identity. ``reader`` reads
    the trained weights (a mutant: the transposed block), ``overrides`` shrink the config."""
    def run():
        from empirics.ar_mesa import EXPERIMENT, read_trained, training_sequences
        from empirics.ar_mesa import run as run_experiment

        values = {**EXPERIMENT.configs[config], **(overrides or {})}
        seen = {}  # each start kind's model, as the reader first sees it
        result = run_experiment(values, torch.device("cpu"), 0, progress=False, reader=lambda m: (
            reader or read_trained)(seen.setdefault(id(m), m)))
        for kind, model in zip(result.config["starts"], seen.values(), strict=True):
            ab, ab_star = result.metric(kind, "ab"), result.metric(kind, "ab_star")
            off = max(result.metric(kind, "off_KQ"), result.metric(kind, "off_PV"))
            error = abs(ab / ab_star - 1)
            # smoke's small Gaussian set gets a sampling allowance; full (SE ~0.9%) the claim's 3%
            sampling = SE_ALLOWANCE * result.metric(kind, "ab_relative_se") * (config == "smoke")
            allowance = AB_TOLERANCE + sampling
            evidence.metric(f"{kind}: |ab/ab* - 1|", error)
            evidence.metric(f"{kind}: off-structure mass (KQ, PV max)", off)
            evidence.margin((allowance - error) / allowance)
            assert error <= allowance, f"{kind}: trained ab = {ab:.4f} vs ab* = {ab_star:.4f}"
            x = training_sequences(kind, values["sequences"][kind], values["d"], values["T"],
                                   values["scale"], torch.Generator().manual_seed(0))  # its own
            assert result.metric(kind, "loss_identity") <= loss_identity_error_bound(
                model, x, values["chunk"]), "the losses (equal in exact arithmetic) differ"
            if kind == "one-hot" or config == "full":
                assert off <= OFF_TOLERANCE, f"{kind}: off-structure mass {off:.3g}"
        for name, fig in result.figures.items():
            evidence.figure(fig, name)
        evidence.cases(len(result.config["starts"]))
    return run


test_gradient_descent_learns_the_optimal_step = check(AR_TRAINED, "empirical")(trained_check())
test_gradient_descent_full_config = pytest.mark.slow(check(AR_TRAINED, "empirical")(
    trained_check("full")))
