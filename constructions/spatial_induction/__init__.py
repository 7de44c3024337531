r"""Spatial induction heads: cellular automata on a torus, the Bayes predictor, and an explicit
two-layer gather-and-match circuit (Kazemian et al. 2026, arXiv:2610.09124).

Only the paper's abstract was readable [V]; the task formalisation below is this project's
reading of it [R], and every weight and temperature is ours [D].

Task (the oracle). A trajectory lives on the torus :math:`(\mathbb{Z}/L)^D`, :math:`D \in
\{1, 2\}`, volume :math:`V = L^D`, states :math:`\Sigma = \{0..k-1\}`. Slab 0 is i.i.d.
uniform; for :math:`t \ge 1`, :math:`x_{t,i} \sim \theta_{c(t,i)}` with the configuration
:math:`c(t,i) = (x_{t-1, i+\delta})_{\delta \in \nu}` (indices mod :math:`L`). Stochastic
rules draw :math:`\theta_c \sim \mathrm{Dirichlet}(\alpha)` per configuration; deterministic
rules put :math:`\theta_c = e_{\rho(c)}` with :math:`\rho` uniform. The trajectory is read
row-major, position :math:`p = tV + \mathrm{index}(i)`, after a BOS token (id :math:`k`).
The Bayes predictor of cell :math:`n` (slab :math:`\ge 1`, configuration :math:`c`) is the
Dirichlet posterior predictive :math:`P^*(a) = (N_c(a) + \alpha_a)/(N_c + A)`, with
:math:`N_c(a)` the earlier cells in slabs :math:`\ge 1` with configuration :math:`c` and value
:math:`a`, and :math:`A = \sum_a \alpha_a`.

The circuit (:class:`SpatialInductionCircuit`).

* **Positional features** of position :math:`p` (:func:`positional_features`): for the cell at
  :math:`p` and for the next cell :math:`p+1`, one circle :math:`(\cos, \sin)(2\pi x_a/L)`
  per axis and a time circle :math:`(\cos, \sin)(2\pi t/3)`; the scalar :math:`p`; a constant.
  That is :math:`2(2D + 2) + 1 = 4D + 5` features plus the constant, for every :math:`L, T`.
  The match layer adds one flag, :math:`1[p \ge V]` (the cell has a configuration).
* **Layer 1 (gather)**, one head per offset :math:`\delta` and side (next cell, own cell). The
  next-cell head scores key :math:`q \le p` as
  :math:`s = \beta_s \sum_a \cos(2\pi(x_a(q) - x_a(p+1) - \delta_a)/L) + \beta_t
  \cos(2\pi(t(q) - t(p+1) + 1)/3) + \lambda q`, bilinear in the features because
  :math:`\cos(u - v - \delta)` is :math:`(\cos u, \sin u) R_\delta (\cos v, \sin v)^\top`. Its
  value is the one-hot token (BOS: zero), written into slot :math:`\delta` of the next-config
  block. The own-cell heads are the same with :math:`p` for :math:`p + 1`.
* **Layer 2 (match)**: key :math:`j` scores :math:`\beta\langle \mathrm{next}(p),
  \mathrm{cur}(j)\rangle - \beta\,1[j < V]`, and the BOS scores :math:`\beta|\nu| + \ln A`.
  Values: one-hot :math:`x_j`, and :math:`\alpha/A` at the BOS. The output is the attention
  output itself, a probability vector: with one-hot configs it is exactly
  :math:`(N_c(\cdot) + \alpha)/(N_c + A)` up to the leak of mismatching keys.

Temperatures (:func:`gather_temperatures`). With :math:`P = TV` positions, the required loss
:math:`M_0 = \ln P + 29` and :math:`M = M_0 + 1`: every key other than the true neighbour
:math:`q^*` loses at least :math:`M_0` against it, because

* same cell coordinates and time phase, hence three slabs (or more) back: it loses
  :math:`3V\lambda` of recency, so :math:`\lambda = M/(3V)`;
* wrong time phase (:math:`\cos = -1/2`): it loses :math:`1.5\beta_t` and gains at most
  :math:`\lambda(2V - 1)` of recency (:math:`p - q^* \le 2V - 1`), so
  :math:`\beta_t = (2\lambda V + M)/1.5`;
* right phase and slab, wrong coordinate on some axis: it loses at least
  :math:`\beta_s(1 - \cos(2\pi/L))` and gains at most :math:`\lambda(V-1)`, so
  :math:`\beta_s = (2\lambda V + M)/(1 - \cos(2\pi/L))`.

Hence the mass on :math:`q^*` is at least :math:`1/(1 + P e^{-M_0}) \ge 1 - e^{-29}`: the
scores grow like :math:`L^2 \ln P`, the dimension does not.
"""

from __future__ import annotations

from constructions.spatial_induction.model import (
    MARGIN_EXTRA,
    REQUIRED_LOSS_SLACK,
    TIME_PERIOD,
    GatherTemperatures,
    SpatialInductionCircuit,
    gather_qk,
    gather_temperatures,
    positional_dim,
    positional_features,
    spatial_induction_circuit,
    temperatures_for,
)
from constructions.spatial_induction.task import (
    CellularAutomaton,
    dirichlet_parameter,
    neighbourhood,
)

# One-line TransformerLens exports for the docs pages (constructions.export.export_line).
TRANSFORMER_LENS_EXAMPLES = {
    "spatial_induction_circuit": "to_transformer_lens(spatial_induction_circuit("
                                 "CellularAutomaton(1, 5, 2, neighbourhood(1)), 20))",
}

__all__ = [
    "MARGIN_EXTRA",
    "REQUIRED_LOSS_SLACK",
    "TIME_PERIOD",
    "TRANSFORMER_LENS_EXAMPLES",
    "CellularAutomaton",
    "GatherTemperatures",
    "SpatialInductionCircuit",
    "dirichlet_parameter",
    "gather_qk",
    "gather_temperatures",
    "neighbourhood",
    "positional_dim",
    "positional_features",
    "spatial_induction_circuit",
    "temperatures_for",
]
