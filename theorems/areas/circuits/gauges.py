r"""Gauge variants of both induction constructions: a random rotation of the residual stream, a
dyadic reparametrisation of every head, and a head permutation.

The variants (:mod:`constructions.circuits.gauges`) compute the construction's function in
exact arithmetic, but the rotation and the reparametrisation are not exact in float64: the
rotation's :math:`R` is orthogonal only to rounding and every stored product rounds, and both
make every inner product of the forward pass sum many non-zero terms. Their checks therefore
compare against a **derived forward-error bound** (:mod:`._tracked`, a running bound carried
through every operation of the forward pass and of the edge-patched runs), on top of the
derived bounds of the weights themselves:

* *Rotation.* Let :math:`\hat R` be the computed Q factor and :math:`R^*` its polar factor
  (the nearest orthogonal matrix). With :math:`\hat R = U\Sigma V^\top`,
  :math:`|\hat R - R^*|_{ij} \le \|\hat R - R^*\|_2 = \max|\sigma - 1| \le \max|\sigma^2 - 1|
  = \|\hat R^\top\hat R - I\|_2 \le \|\mathrm{fl}(\hat R^\top\hat R) - I\|_F + \gamma_d
  \||\hat R|^\top|\hat R|\|_F` (:func:`orthogonality_defect`, measured a posteriori). The
  check allows :math:`\delta = 2^{-40}` (:data:`ROTATION_DEFECT`) and asserts the measured
  defect is below it. The reference weights are the original's times :math:`R^*`, which
  compute the original's exact function, edge by edge; a stored :math:`\mathrm{fl}(W\hat R)`
  is within :math:`\gamma_d|W||\hat R| + \delta\,\mathrm{rowsum}|W|` of :math:`WR^*` (and
  :math:`\mathrm{fl}(\hat R^\top W)` within :math:`\gamma_d|\hat R|^\top|W| + \delta\,
  \mathrm{colsum}|W|` of :math:`R^{*\top}W`).
* *Reparametrisation.* The gauge :math:`G = DH` has signed powers of two for entries, so a
  stored product entry with one non-zero term is exact, one with :math:`c \ge 2` non-zero
  terms within :math:`\gamma_c\sum|w_lg_l|`; the reference is the exact products, with
  :math:`GG^{-1} = I` exactly.
* *Head permutation* (on the spurious-head variant): the same weights, so the reference is
  the variant itself; not necessarily bit-exact (the heads' batched value sums may round
  in another order, :func:`~constructions.circuits.permute_heads`), so it is checked
  within the running bound like the others.

Then for the original :math:`f` and a variant :math:`f_g` (reference: the same exact function),
every logit obeys :math:`|\hat f_g - \hat f| \le e_g + e_f`, the two running bounds. Edge
patching carries over likewise (every edge is the same map in exact arithmetic), so a move
of the metric on the variant is within :math:`E = e_g(\emptyset) + e_g(P) + e_f(\emptyset)
+ e_f(P)` of the original's move: sufficiency holds within the original's bound plus
:math:`E`, necessity and minimality with the original's derived least move minus :math:`E`.
Sources: see the area's introduction; the variants and bounds are ours [D].
"""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.circuits import (
    dyadic_gauge,
    edge_patched_logits,
    gauge_size,
    induction_circuit,
    logit_difference,
    permuted_variant,
    random_rotation,
    reparametrised_variant,
    resample_earlier_occurrence,
    rotation_variant,
)
from constructions.induction_heads import compact_induction, two_layer_induction
from constructions.induction_heads.task import induction_targets
from theorems.areas.circuits import compact
from theorems.areas.circuits._shared import cached
from theorems.areas.circuits._tracked import gamma_depth, metric_error, tracked_logits
from theorems.areas.circuits.earlier_occurrence import (
    VARIANT_CIRCUIT,
    VARIANT_FUNCTION,
    occurrence_bound,
    occurrence_cases,
)
from theorems.evidence import check, evidence
from theorems.numerics import gamma, gamma_at, unit_roundoff
from theorems.profiles import budget

EARLIER = "resample_earlier_occurrence"
BUILDERS = {"two_layer": two_layer_induction, "compact": compact_induction}

# The orthogonality defect the rotation is allowed: 2^-40 ~ 9.1e-13; the a-posteriori defect
# bound (orthogonality_defect) of the float64 QR at the widths drawn is <= 1.3e-13 (d = 41).
ROTATION_DEFECT = 2.0**-40

# --- the weights' own bounds ------------------------------------------------------------------

def orthogonality_defect(R: torch.Tensor) -> float:
    r"""An upper bound on :math:`\|R^\top R - I\|_2` for the stored ``R`` ``(d, d)`` (hence on
    every entry of :math:`R - R^*`, see the module docstring): :math:`\|\mathrm{fl}(R^\top R)
    - I\|_F + \gamma_d\||R|^\top|R|\|_F`, each norm inflated by :math:`1 + \gamma_{d^2+d+8}`
    for its own evaluation (the subtraction, the squares and the :math:`d^2`-term sum)."""
    d = R.shape[0]
    eye = torch.eye(d, dtype=R.dtype, device=R.device)
    inflate = 1 + gamma(d * d + d + 8)
    return float(((R.T @ R - eye).norm() + gamma(d) * (R.abs().T @ R.abs()).norm()) * inflate)


def _rowsum(W: torch.Tensor) -> torch.Tensor:
    return W.abs().sum(-1, keepdim=True)


def rotation_errors(model, R: torch.Tensor, defect: float, u_scale: float = 1.0) -> dict:
    r"""Elementwise bounds on the rotation variant's stored weights against :math:`WR^*`
    (:math:`R^*` the polar factor of ``R``, :math:`|R - R^*| \le` ``defect``), each inflated by
    :math:`1 + \gamma_{d+4}` for its own evaluation; ``u_scale`` 0 drops the rounding terms."""
    d = model.d_model
    g, inflate, aR = u_scale * gamma(d), 1 + gamma(d + 4), R.abs()

    def written(W):      # fl(W R): gamma_d |W||R| + defect * rowsum|W|
        return (g * W.abs() @ aR + defect * _rowsum(W)) * inflate

    def read(W):         # fl(R^T W): gamma_d |R|^T|W| + defect * colsum|W|
        return (g * aR.T @ W.abs() + defect * W.abs().sum(-2, keepdim=True)) * inflate

    return {"W_E": written(model.W_E), "W_pos": written(model.W_pos), "W_U": read(model.W_U),
            "layers": [{"W_Q": read(layer.W_Q), "W_K": read(layer.W_K),
                        "W_V": read(layer.W_V), "W_O": written(layer.W_O)}
                       for layer in model.layers]}


def _product_error(X: torch.Tensor, G: torch.Tensor, u_scale: float) -> torch.Tensor:
    r"""Bound on :math:`|\mathrm{fl}(XG) - XG|` for a dyadic ``G``: 0 where an entry has one
    non-zero term (a product by a signed power of two is exact), else
    :math:`\gamma_c\sum|x_lg_l|` with :math:`c` its number of non-zero terms; inflated by
    :math:`1 + \gamma_{K+4}` for its own evaluation."""
    terms = (X != 0).to(X.dtype) @ (G != 0).to(X.dtype)
    g = torch.where(terms >= 2, gamma_at(terms, u_scale * unit_roundoff(X.dtype)),
                    torch.zeros_like(terms))
    return g * (X.abs() @ G.abs()) * (1 + gamma(G.shape[-2] + 4))


def reparametrised_errors(model, u_scale: float = 1.0) -> dict:
    """Elementwise bounds on the reparametrised variant's stored maps against the exact
    products (embeddings and unembedding are copied: exact)."""
    layers = []
    for layer in model.layers:
        m_qk, m_v = gauge_size(layer.W_Q.shape[2]), gauge_size(layer.W_V.shape[2])
        A, A_inv = dyadic_gauge(m_qk)
        B, B_inv = dyadic_gauge(m_v)

        def pad(W, m):
            return torch.cat([W, W.new_zeros(*W.shape[:2], m - W.shape[2])], 2)
        W_O = layer.W_O
        padded_O = torch.cat([W_O, W_O.new_zeros(W_O.shape[0], m_v - W_O.shape[1],
                                                 W_O.shape[2])], 1)
        layers.append({"W_Q": _product_error(pad(layer.W_Q, m_qk), A, u_scale),
                       "W_K": _product_error(pad(layer.W_K, m_qk), A_inv.T, u_scale),
                       "W_V": _product_error(pad(layer.W_V, m_v), B, u_scale),
                       "W_O": _product_error(B_inv.expand(W_O.shape[0], -1, -1), padded_O,
                                             u_scale)})
    return {"layers": layers}


def rotation(model, u_scale=1.0, defect=ROTATION_DEFECT, matrix=random_rotation):
    """(variant, weight bounds) of the rotation; the measured defect must be below ``defect``."""
    R = matrix(model.d_model)
    measured = orthogonality_defect(R)
    assert measured <= defect or defect == 0, (
        f"the rotation's orthogonality defect {measured} exceeds the allowed {defect}")
    return rotation_variant(model), rotation_errors(model, R, defect, u_scale)


def reparametrised(model, u_scale=1.0):
    return reparametrised_variant(model), reparametrised_errors(model, u_scale)


GAUGES = (rotation, reparametrised)


# --- the same function ------------------------------------------------------------------------

@st.composite
def gauge_prompts(draw, max_vocab: int = 8, max_len: int = 12):
    """(kind, vocab_size, max_len, prompt): either construction, any prompt of length >= 1."""
    kind = draw(st.sampled_from(sorted(BUILDERS)))
    S = draw(st.integers(3, max_vocab))
    n = draw(st.integers(3, max_len))
    m = draw(st.integers(1, n))
    return kind, S, n, draw(st.lists(st.integers(0, S - 1), min_size=m, max_size=m))


def same_function_check(gauges=GAUGES, u=None, permuted=permuted_variant):
    """``gauges``: functions ``model -> (variant, weight bounds)``; ``u`` 0 is a rounding-free
    bound (a mutant)."""
    build = cached(lambda kind, S, n: BUILDERS[kind](S, n))
    variants = cached(lambda gauge, kind, S, n: gauge(build(kind, S, n)))
    permuted_of = cached(lambda S, n: permuted(build("two_layer", S, n)))

    @given(case=gauge_prompts())
    @example(case=("two_layer", 8, 12, [7, 0, 7, 1, 7, 2, 7, 3, 7, 4, 7, 5]))
    @example(case=("compact", 8, 12, [7, 0, 7, 1, 7, 2, 7, 3, 7, 4, 7, 5]))
    # the permuted heads were off by an ulp here on one machine (not on every machine)
    @example(case=("two_layer", 4, 8, [0] * 8))
    @budget(0.2, minimum=3)  # a few forward passes and their running bounds per example
    def test_gauges_same_function(case):
        kind, S, n, sequence = case
        tokens = torch.tensor([sequence])
        model = build(kind, S, n)
        logits = model(tokens)
        original, _ = tracked_logits(model, tokens, u=u)
        for gauge in gauges:
            variant, errors = variants(gauge, kind, S, n)
            bound, _ = tracked_logits(variant, tokens, errors, u=u)
            # each computed logit is within its running bound of the exact f; |.| of the
            # difference adds a relative u, covered by the factor 1 + gamma_2
            tol = (bound.e + original.e) * (1 + gamma_depth(2))
            gap = (variant(tokens) - logits).abs()
            assert bool((gap <= tol).all()), (
                f"{gauge.__name__} ({kind}, S={S}, n={n}): a logit moved by "
                f"{float(gap.max())}, beyond the derived bound {float(tol.max())}")
            evidence.margin(float((tol - gap).min()))
        if kind == "two_layer":
            # Not necessarily bit for bit (permute_heads's docstring): the running bound, the
            # variant its own reference (its stored weights are the original's, permuted)
            permuted_model = permuted_of(S, n)
            tol = (tracked_logits(permuted_model, tokens, u=u)[0].e + original.e) * (
                1 + gamma_depth(2))
            gap = (permuted_model(tokens) - logits).abs()
            assert bool((gap <= tol).all()), (
                f"the permuted heads moved a logit by {float(gap.max())}, beyond the derived "
                f"bound {float(tol.max())}")
            evidence.margin(float((tol - gap).min()))
        evidence.cases(1)
    return test_gauges_same_function


test_gauges_same_function = check(VARIANT_FUNCTION, "property")(same_function_check())


# --- the circuit on the gauged variants --------------------------------------------------------

def _targets(clean, corrupted, classes):
    out = []
    for prompt in (clean, corrupted):
        target = induction_targets(prompt)[:, -1]
        out.append(torch.where(target < 0, classes - 1, target))
    return out


class _Runs:
    """Metrics and their running bounds of one model's edge-patched runs on one prompt."""

    def __init__(self, model, errors, clean, corrupted, u):
        self.model, self.errors, self.clean, self.corrupted, self.u = (model, errors, clean,
                                                                      corrupted, u)
        self.targets = _targets(clean, corrupted, model.vocab_size + 1)
        self.sources = tracked_logits(model, corrupted, errors, per_head=True, u=u)[1]
        self.cache: dict[tuple, tuple[float, float]] = {}

    def __call__(self, patched: tuple) -> tuple[float, float]:
        """(metric, bound on its distance to the exact metric) with ``patched`` patched."""
        if patched not in self.cache:
            self.cache[patched] = self._run(patched)
        return self.cache[patched]

    def _run(self, patched: tuple) -> tuple[float, float]:
        logits = edge_patched_logits(self.model, self.clean, self.corrupted, patched)
        metric = float(logit_difference(logits, self.clean, self.corrupted)[0])
        tracked, _ = tracked_logits(self.model, self.clean, self.errors, per_head=True,
                                    patched=patched, corrupted=self.corrupted, u=self.u,
                                    corrupt_out=self.sources)
        return metric, float(metric_error(tracked, *self.targets, u=self.u)[0])


def _original_bounds(kind, case):
    """(sufficiency bound, least necessity move) of the original's claims for ``case``."""
    S, n, sequence, _ = case
    if kind == "two_layer":   # circuits.earlier-occurrence-sufficient/-necessary
        return 0.0, occurrence_bound(S, n)
    j = sequence.index(sequence[-1])
    d_lower, d_upper = compact.code_distance(sequence[j + 1], S, S)
    return (compact.sufficiency_bound(S, n, d_upper, EARLIER),
            compact.necessity_bound(S, n, d_lower, EARLIER))


def circuit_check(gauges=GAUGES, circuit=induction_circuit, u=None):
    """Sufficiency, necessity and minimality of the earlier-occurrence circuit on each gauged
    variant of both constructions, within the running bounds (see the module docstring)."""
    build = cached(lambda kind, S, n: BUILDERS[kind](S, n))
    variants = cached(lambda gauge, kind, S, n: gauge(build(kind, S, n)))

    # one gauge per example (drawn; the two explicit examples take the first and the last)
    @given(kind=st.sampled_from(sorted(BUILDERS)), gauge=st.sampled_from(gauges),
           case=occurrence_cases(max_len=12))
    @example(kind="two_layer", gauge=gauges[0], case=(3, 12, [0] + [1, 2] * 5 + [0], 2))
    @example(kind="compact", gauge=gauges[-1], case=(3, 12, [0, 2] + [1] * 9 + [0], 1))
    @budget(0.1, minimum=2)  # ~ 8 patched runs and their running bounds per example
    def test_gauges_circuit(kind, gauge, case):
        S, n, sequence, replacement = case
        clean = torch.tensor([sequence])
        corrupted = resample_earlier_occurrence(clean, replacement, S)
        kept = circuit(kind, S, n, EARLIER)
        sufficient, least = _original_bounds(kind, case)
        original = _Runs(build(kind, S, n), None, clean, corrupted, u)
        variant, errors = variants(gauge, kind, S, n)
        runs = _Runs(variant, errors, clean, corrupted, u)
        label = f"{gauge.__name__} ({kind}, S={S}, n={n})"

        def slack(patched):   # E: the four runs' distances to the exact metrics
            return runs(())[1] + runs(patched)[1] + original(())[1] + original(patched)[1]

        def move(patched):
            return abs(runs(patched)[0] - runs(())[0])

        complement = tuple(e.name for e in kept.complement())
        allowed = (sufficient + slack(complement)) * (1 + gamma(4))
        assert move(complement) <= allowed, (
            f"{label}: patching the complement moved the metric by {move(complement)} > "
            f"{allowed}")
        evidence.margin(allowed - move(complement))
        for edge in kept.edges:
            for patched in ((edge.name,), (edge.name, *complement)):
                bound = (least - slack(patched)) * (1 - gamma(4))
                assert bound > allowed, f"{label}: necessity must exceed sufficiency"
                with_complement = " and the complement" if len(patched) > 1 else ""
                assert move(patched) >= bound, (
                    f"{label}: patching {patched[0]}{with_complement} moved the metric by "
                    f"{move(patched)} < {bound}")
                evidence.margin(move(patched) - bound)
        evidence.cases(1)
    return test_gauges_circuit


test_gauges_circuit = check(VARIANT_CIRCUIT, "property")(circuit_check())
