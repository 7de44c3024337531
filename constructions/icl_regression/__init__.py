r"""In-context linear regression by one layer of linear self-attention (LSA).

Sources: Mahankali, Hashimoto, Ma (2023, arXiv:2307.03576); Ahn, Cheng, Daneshmand, Sra (2023,
arXiv:2306.00297); Zhang, Frei, Bartlett (2024, arXiv:2306.09927); von Oswald et al. (2023,
arXiv:2212.07677); Huang, Wang, Lee (2025, arXiv:2502.21212). Only the papers' openings were
read; every constant below was derived here (and is checked in ``theorems/areas/icl_regression/``)
or read from the authors' code, as each docstring says.

The shared parameterisation
---------------------------
Tokens are **columns**, as in the papers (``constructions.layers`` stores tokens as rows; this
area transposes at its boundary). A prompt of ``n`` examples :math:`(x_i, y_i)` and a query
:math:`x_q` is

.. math::

    Z = \begin{pmatrix} x_1 & \cdots & x_n & x_q \\ y_1 & \cdots & y_n & 0 \end{pmatrix}
      \in \mathbb R^{(d+1)\times(n+1)},

and one LSA layer with value-projection :math:`W_{PV}` and key-query product :math:`W_{KQ}`
(both :math:`D\times D`, :math:`D = d+1`) computes

.. math::

    f(Z) = Z + \tfrac1n W_{PV}\, Z M Z^\top\, W_{KQ}\, Z,
    \qquad M = \mathrm{diag}(1, \dots, 1, 0),

where ``M`` masks the query as a key (as in Ahn et al.'s code, ``A[N, N] = 0``, and von Oswald
et al.'s ``include_query=False``). **Sign convention**: the prediction is
:math:`\hat y = -f(Z)_{d+1,\,n+1}`, the negated bottom-right entry, as both codes read it out
(Ahn: ``loss = (output[:, N, d] + y)**2``; von Oswald: ``h[:, -1, -1] * (-1.0)``). Zhang, Frei
and Bartlett read :math:`+f(Z)_{d+1,n+1}`; their model is ours with :math:`W_{KQ}` negated.

Writing :math:`u` for the last row of :math:`W_{PV}`, :math:`V = W_{KQ}`,
:math:`G = \tfrac1n\sum_{i\le n} z_i z_i^\top` (plus :math:`z_q z_q^\top/n` when the query is
not masked) and :math:`\tilde x_q = (x_q, 0)`,

.. math::

    \hat y = -u^\top G\, V \tilde x_q = \sum_{a,b,c} T_{abc}\, G_{ab}\, (x_q)_c,\qquad
    T_{abc} = -\tfrac12(u_a V_{bc} + u_b V_{ac}),

so only ``u`` and ``V`` matter, and only through the *effective predictor* ``T`` (symmetrised in
``a, b`` because ``G`` is symmetric). ``T`` is invariant under the gauge
:math:`(u, V) \to (cu, V/c)`, so trained and constructed models are compared through it,
never through raw weights. Its :math:`(y, x)` slice is the GD preconditioner: with
:math:`s = \tfrac1n\sum_i y_i x_i`,

.. math::

    \hat y = x_q^\top \Gamma\, s + (\text{terms in } G_{xx} \text{ and } G_{yy}),\qquad
    \Gamma_{cb} = 2\,T_{y b c}.

**The symmetric-slice trap.** A least-squares fit over all :math:`(a, b)` pairs of features
:math:`G_{ab}(x_q)_c` is rank-deficient (:math:`G_{ab} = G_{ba}`); its minimum-norm solution
puts half of :math:`\Gamma` on each slice :math:`T_{y,x,:}` and :math:`T_{x,y,:}`. The lifted
coordinates here (:func:`pair_features`, :func:`pair_coefficients`) use each unordered pair
once, so the :math:`(b, y)` coefficient *is* the sum of the two slices, :math:`\Gamma^\top`.
"""

from __future__ import annotations

from constructions._validate import spd_matrix  # re-exported: empirics use it

# IR.7's autoregressive layer lives in its own module; it is part of this area's API.
from constructions.ar_mesa import ar_mesa_layer
from constructions.icl_regression._shared import (
    MULTI_STEP_MODES,
    RESPONSES,
    MultiStepMode,
    ResponseKind,
)
from constructions.icl_regression.closed_forms import (
    nonlinear_optimal_step,
    optimal_loss,
    optimal_preconditioner,
    population_loss,
    second_moment,
    sine_response_moments,
)
from constructions.icl_regression.lifted import (
    effective_tensor,
    key_moment,
    lifted_coefficients,
    lifted_features,
    pair_coefficients,
    pair_features,
)
from constructions.icl_regression.model import (
    LinearSelfAttention,
    lsa,
    one_step_gd,
    zfb_init,
)
from constructions.icl_regression.multi_step import (
    MultiStepGD,
    cot_prompt,
    gd_transformed_labels,
    multi_step_gd,
    multi_step_layer,
    von_oswald,
)
from constructions.icl_regression.task import (
    RegressionPrompts,
    gd_iterates,
    gd_prediction,
    prompt,
    sample_prompts,
)

__all__ = [
    "MULTI_STEP_MODES",
    "RESPONSES",
    "LinearSelfAttention",
    "MultiStepGD",
    "MultiStepMode",
    "RegressionPrompts",
    "ResponseKind",
    "ar_mesa_layer",
    "cot_prompt",
    "effective_tensor",
    "gd_iterates",
    "gd_prediction",
    "gd_transformed_labels",
    "key_moment",
    "lifted_coefficients",
    "lifted_features",
    "lsa",
    "multi_step_gd",
    "multi_step_layer",
    "nonlinear_optimal_step",
    "one_step_gd",
    "optimal_loss",
    "optimal_preconditioner",
    "pair_coefficients",
    "pair_features",
    "population_loss",
    "prompt",
    "sample_prompts",
    "second_moment",
    "sine_response_moments",
    "spd_matrix",
    "von_oswald",
    "zfb_init",
]
