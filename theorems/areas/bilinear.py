r"""Bilinear layers as tensors (Sharkey 2023, arXiv:2305.03452; Pearce et al. 2025,
arXiv:2410.08417).

Tolerances: every quantity here is a sum of products of at most four factors over
:math:`h d^2` index triples. By the standard model (:mod:`theorems.numerics`), two correct
evaluations differ by at most :math:`2\gamma_{K}` times the same sum taken over absolute
values, with :math:`K = h + d^2 + 4` operations along any one product-and-sum chain.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from constructions.bilinear import BilinearLayer, bilinear_form, bilinear_layer, symmetrize
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.proof_statements import Scope
from theorems.proving import coq_proof
from theorems.strategies import gaussian_matrices, seeds

SHARKEY = {"arxiv": "2305.03452", "ref": "Sharkey (2023), technical note"}

BL_TENSOR = Claim(
    id="bilinear.tensor-identity",
    title="A bilinear layer is a third-order tensor contracted twice with its input",
    statement=(
        r"For $W_1, W_2 \in \mathbb R^{h\times d}$, $W_O \in \mathbb R^{o\times h}$ and "
        r"$x \in \mathbb R^d$, the bilinear layer $f(x) = W_O\big((W_1x)\odot(W_2x)\big)$ "
        r"satisfies $f(x)_a = \sum_{j,k} B_{ajk}x_jx_k$ with "
        r"$B_{ajk} = \sum_{i=1}^h (W_O)_{ai}(W_1)_{ij}(W_2)_{ik}$; $\odot$ is the elementwise "
        r"product. With $W_O = I$ this is $B_{ijk} = (W_1)_{ij}(W_2)_{ik}$."),
    source=(Source(where="Abstract: bilinear layers can be expressed using only linear "
                         "operations and third order tensors", tag="V", **SHARKEY),
            Source(where="Section 2 (bilinear layers as tensors)", tag="S", **SHARKEY),
            Source(where="the identity, with an output projection, derived here", tag="D",
                   **SHARKEY)),
    kind="identity",
    construction="constructions.bilinear:bilinear_layer",
)

BL_SYMMETRIC = Claim(
    id="bilinear.symmetric-part",
    title="Only the symmetric part of the interaction tensor affects outputs",
    statement=(
        r"With $B$ as in the tensor identity and $B^s_{ajk} = \tfrac12(B_{ajk} + B_{akj})$, "
        r"$\sum_{jk}B^s_{ajk}x_jx_k = f(x)_a$ for all $x$, so $B$ is determined by $f$ only up "
        r"to its antisymmetric part $B - B^s$."),
    source=Source(where="Section 2 (non-uniqueness of B)", tag="S", **SHARKEY),
    kind="identity",
    construction="constructions.bilinear:symmetrize",
    depends_on=("bilinear.tensor-identity",),
)

BL_QUADRATIC = Claim(
    id="bilinear.quadratic-form",
    title="A bilinear layer is homogeneous of degree 2 and satisfies polarization",
    statement=(
        r"With $f$ and $B^s$ as above, for all $x, y \in \mathbb R^d$ and "
        r"$\alpha \in \mathbb R$: $f(\alpha x) = \alpha^2 f(x)$ and "
        r"$f(x + y) - f(x) - f(y) = 2B^s(x, y)$, where "
        r"$B^s(x, y)_a = \sum_{jk}B^s_{ajk}x_jy_k$."),
    source=Source(where="consequence of the tensor identity, derived here", tag="D", **SHARKEY),
    kind="identity",
    construction="constructions.bilinear:bilinear_layer",
    depends_on=("bilinear.symmetric-part",),
)


@st.composite
def bilinear_cases(draw):
    """A seeded layer and two inputs; sizes from 1 (degenerate) upward."""
    d, h, o = draw(st.integers(1, 8)), draw(st.integers(1, 8)), draw(st.integers(1, 6))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    x, y = (draw(gaussian_matrices(1, d, scale=scale))[0] for _ in range(2))
    return h, d, o, draw(seeds()), x, y


def absolute_bound(layer: BilinearLayer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The identity's sums evaluated on absolute values: what rounding errors scale with."""
    return torch.einsum("ai,ij,ik,j,k->a", layer.W_O.abs(), layer.W1.abs(), layer.W2.abs(),
                        x.abs(), y.abs())


def _tolerance(layer: BilinearLayer, *pairs) -> torch.Tensor:
    r"""Twice :math:`\gamma_{h+d^2+4}` times the absolute-value evaluation of the pairs.

    Every term :math:`W_O W_1 x W_2 y` of either side carries at most :math:`h + d^2 + 4`
    roundings: the layer, :math:`\gamma_{2d+1+h}` (two d-term dots, a product, an h-term sum;
    :math:`2d + 1 \le d^2 + 4`); the tensor route, :math:`\gamma_{h+2}` for each entry of
    :math:`B` (two products, h-term sum) and :math:`\gamma_{d^2+2}` for the form. So each side
    is within :math:`\gamma_{h+d^2+4}` of the exact value, on absolute values (Higham 2002,
    Sec. 3.1). The callers scale it for what they add: :math:`f(\alpha x)` rounds
    :math:`\alpha x` and :math:`\alpha^2` (two more roundings, :math:`2d + h + 3 \le h + d^2 + 4`
    for :math:`d \ge 2`; for :math:`d = 1` the :math:`+1` in :math:`\alpha^2 + 1` absorbs the
    :math:`\alpha^2 u` excess); polarisation has three layer calls, two subtractions and
    :math:`B^s` (one more addition), well inside 4 times the four-pair sum, since
    :math:`|x + y|` is bounded entrywise by :math:`|x| + |y|`.
    """
    h, d = layer.W1.shape
    return 2 * gamma(h + d * d + 4) * sum(absolute_bound(layer, a, b) for a, b in pairs)


def _assert_within(name: str, err: torch.Tensor, tol: torch.Tensor) -> None:
    slack = float((tol - err).min() / tol.max().clamp_min(1e-300))
    evidence.margin(slack)
    assert (err <= tol).all(), f"{name}: error {float(err.max()):.3g} > {float(tol.max()):.3g}"


def tensor_identity_check(build=bilinear_layer):
    @given(case=bilinear_cases())
    def run(case):
        h, d, o, seed, x, _ = case
        layer = build(d, h, o, seed=seed)
        _assert_within("f(x) = B(x, x)", (layer(x) - bilinear_form(layer.tensor(), x, x)).abs(),
                       _tolerance(layer, (x, x)))
    return run


test_bilinear_layer_is_a_tensor = check(BL_TENSOR, "property")(tensor_identity_check())


def symmetric_part_check(sym=symmetrize):
    @given(case=bilinear_cases())
    def run(case):
        h, d, o, seed, x, _ = case
        layer = bilinear_layer(d, h, o, seed=seed)
        B = layer.tensor()
        _assert_within("B^s(x, x) = B(x, x)",
                       (bilinear_form(sym(B), x, x) - bilinear_form(B, x, x)).abs(),
                       _tolerance(layer, (x, x)))
    return run


test_only_the_symmetric_part_matters = check(BL_SYMMETRIC, "property")(symmetric_part_check())


def quadratic_form_check(build=bilinear_layer):
    @given(case=bilinear_cases(), alpha=st.floats(-10, 10, allow_subnormal=False))
    def run(case, alpha):
        h, d, o, seed, x, y = case
        layer = build(d, h, o, seed=seed)
        _assert_within("f(ax) = a^2 f(x)", (layer(alpha * x) - alpha**2 * layer(x)).abs(),
                       (alpha**2 + 1) * _tolerance(layer, (x, x)))
        polarization = layer(x + y) - layer(x) - layer(y)
        B_sym = symmetrize(layer.tensor())
        _assert_within("f(x+y) - f(x) - f(y) = 2B^s(x, y)",
                       (polarization - 2 * bilinear_form(B_sym, x, y)).abs(),
                       4 * _tolerance(layer, (x, x), (y, y), (x, y), (y, x)))
    return run


test_bilinear_layer_is_a_quadratic_form = check(BL_QUADRATIC, "property")(
    quadratic_form_check())


# --- proved (appended: machine-checked proofs, see theorems/proving.py) ----------------------


# The three identities for every h, d, o, over any commutative ring (numeric field where the
# statement divides by 2): MathComp matrices and big sums in proofs/coq/bilinear.v.
test_tensor_identity_proved = check(BL_TENSOR, "proved")(
    coq_proof("proofs/coq/bilinear.v", theorem="tensor_identity",
              scope=Scope("statement", "both sentences: f(x)_a = sum_jk B_ajk x_j x_k, and "
                          "B_ijk = (W_1)_ij (W_2)_ik when W_O = I; for every h, d, o and x, "
                          "over any commutative ring")))
test_symmetric_part_proved = check(BL_SYMMETRIC, "proved")(
    coq_proof("proofs/coq/bilinear.v", theorem="symmetric_part",
              scope=Scope("statement", "both parts: sum_jk B^s_ajk x_j x_k = f(x)_a for every "
                          "x, and B is determined by f only up to its antisymmetric part (a "
                          "tensor T gives f, T(x, x) = f(x) for all x, iff its symmetric part "
                          "is B^s); for every h, d, o, over any numeric field")))
test_quadratic_form_proved = check(BL_QUADRATIC, "proved")(
    coq_proof("proofs/coq/bilinear.v", theorem="quadratic_form",
              scope=Scope("statement", "both identities, f(alpha x) = alpha^2 f(x) and "
                          "f(x + y) - f(x) - f(y) = 2 B^s(x, y), for every h, d, o, x, y and "
                          "alpha, over any numeric field")))
