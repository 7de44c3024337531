r"""Temperatures and margin conditions of the two constructions, the precision they need, and its
emulation by rounding significands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType

import torch

from constructions import _validate

# --- parameters and margin conditions ------------------------------------------------------

@dataclass(frozen=True)
class InductionParameters:
    r"""Temperatures of an induction construction, and the geometry they were derived for.

    ``beta1``: layer-1 (previous-token) inverse temperature; ``beta2``: layer-2 match weight;
    ``recency``: :math:`\lambda`, the per-position recency bias; ``sink``: :math:`\theta`, the
    BOS score. ``readout``: :math:`\rho`, the largest odds (wrong mass / correct mass) on the
    layer-2 keys at which the argmax is still right (1 for one-hot values,
    :math:`\sin(\pi/(S+1))` on the token circle). ``token_gap`` and ``position_gap``:
    :math:`g^\star` and :math:`g_{pos}`, the score gaps of one unit of token and position
    similarity (1 for one-hot embeddings).
    """

    beta1: float
    beta2: float
    recency: float
    sink: float
    readout: float = 1.0
    token_gap: float = 1.0
    position_gap: float = 1.0


def two_layer_parameters(max_len, *, lib: ModuleType = math) -> InductionParameters:
    r"""Temperatures of :func:`two_layer_induction` for sequences of length :math:`\le n`.

    :math:`\lambda = \ln(3n) + 2`, :math:`\theta = \lambda n + \ln n + 2`,
    :math:`\beta_2 = 2\theta + 10`, :math:`\beta_1 = \ln(n\beta_2) + 1`. With ``lib=sympy``
    and a positive symbol ``max_len`` the parameters are symbolic.
    """
    _validate.instance("lib", lib, ModuleType)
    if lib is math:
        max_len = _validate.positive_int("max_len", max_len)
    n = max_len
    recency = lib.log(3 * n) + 2
    sink = recency * n + lib.log(n) + 2
    beta2 = 2 * sink + 10
    beta1 = lib.log(n * beta2) + 1
    return InductionParameters(beta1=beta1, beta2=beta2, recency=recency, sink=sink)


def two_layer_conditions(max_len, params: InductionParameters, *,
                         lib: ModuleType = math) -> dict[str, tuple[object, object]]:
    r"""The margin conditions (A)–(D) of :func:`two_layer_induction`: ``{name: (lhs, bound)}``.

    With :math:`\alpha = e^{\beta_1}/(e^{\beta_1} + n)`, the smallest layer-1 weight on the
    previous token, each condition is ``lhs < bound``:

    * (A) older matches: :math:`n e^{\beta_2(1-\alpha) - \lambda} < 1/3`;
    * (B) non-matching keys: :math:`n e^{\beta_2(1-2\alpha) + \lambda(n-1)} < 1/3`;
    * (C) the BOS sink against a match: :math:`e^{\theta - \beta_2\alpha - \lambda} < 1/3`;
    * (D) with no match, the sink wins: :math:`n e^{\beta_2(1-\alpha) + \lambda n - \theta} < 1`.

    (A)–(C) give the correct key odds :math:`< 1`, i.e. weight :math:`> 1/2`, and (D) gives BOS
    weight :math:`> 1/2`; see :func:`two_layer_induction` for the derivation.
    """
    _validate.instance("lib", lib, ModuleType)
    _validate.instance("params", params, InductionParameters)
    if lib is math:
        max_len = _validate.positive_int("max_len", max_len)
    n, b1, b2 = max_len, params.beta1, params.beta2
    lam, theta = params.recency, params.sink
    alpha = lib.exp(b1) / (lib.exp(b1) + n)
    third = lib.exp(0) / 3  # 1/3 exactly in sympy, at working precision in mpmath
    return {
        "A": (n * lib.exp(b2 * (1 - alpha) - lam), third),
        "B": (n * lib.exp(b2 * (1 - 2 * alpha) + lam * (n - 1)), third),
        "C": (lib.exp(theta - b2 * alpha - lam), third),
        "D": (n * lib.exp(b2 * (1 - alpha) + lam * n - theta), 1),
    }


def circle_gaps(vocab_size, max_len, *, lib: ModuleType = math) -> tuple:
    r"""(:math:`\rho`, :math:`g^\star`, :math:`g_{pos}`) of the circle embeddings.

    Tokens and :math:`\bot` sit at :math:`N = S+1` equally spaced points, positions at
    :math:`n+1`: :math:`\rho = \sin(\pi/N)`,
    :math:`g^\star = \min(1 - \cos(2\pi/N), 1)`, :math:`g_{pos} = 1 - \cos(2\pi/(n+1))`.
    The gaps are evaluated as :math:`2\sin^2(\pi/N)`, which does not cancel for large N.
    """
    _validate.instance("lib", lib, ModuleType)
    if lib is math:
        vocab_size = _validate.positive_int("vocab_size", vocab_size)
        max_len = _validate.positive_int("max_len", max_len)
    points = vocab_size + 1
    rho = lib.sin(lib.pi / points)
    token_gap = 2 * rho**2
    token_gap = lib.Min(token_gap, 1) if hasattr(lib, "Min") else min(token_gap, 1)
    position_gap = 2 * lib.sin(lib.pi / (max_len + 1)) ** 2
    return rho, token_gap, position_gap


def compact_parameters(vocab_size, max_len, *, lib: ModuleType = math,
                       gaps: tuple | None = None) -> InductionParameters:
    r"""Temperatures of :func:`compact_induction`; ``gaps`` overrides :func:`circle_gaps`.

    :math:`\lambda = \ln(3n/\rho) + 2`,
    :math:`\beta_2 = (\lambda n + \ln(3n/\rho^2) + 4)/g^\star`,
    :math:`\theta = \beta_2(1 - g^\star) + \lambda n + \ln(n/\rho) + 2`,
    :math:`\beta_1 = (\ln(n\beta_2) + 1)/g_{pos}`. Passing symbolic ``gaps`` with
    ``lib=sympy`` gives the parameters for any geometry.
    """
    _validate.instance("lib", lib, ModuleType)
    if lib is math:
        vocab_size = _validate.positive_int("vocab_size", vocab_size)
        max_len = _validate.positive_int("max_len", max_len)
    n = max_len
    rho, g, g_pos = gaps if gaps is not None else circle_gaps(vocab_size, max_len, lib=lib)
    recency = lib.log(3 * n / rho) + 2
    beta2 = (recency * n + lib.log(3 * n / rho**2) + 4) / g
    sink = beta2 * (1 - g) + recency * n + lib.log(n / rho) + 2
    beta1 = (lib.log(n * beta2) + 1) / g_pos
    return InductionParameters(beta1=beta1, beta2=beta2, recency=recency, sink=sink,
                               readout=rho, token_gap=g, position_gap=g_pos)


def compact_conditions(max_len, params: InductionParameters, *,
                       lib: ModuleType = math) -> dict[str, tuple[object, object]]:
    r"""The margin conditions (A′)–(D′) of :func:`compact_induction`: ``{name: (lhs, bound)}``.

    With the layer-1 leak :math:`\delta = n e^{-\beta_1 g_{pos}}` (an upper bound on the weight
    off the previous token), readout odds :math:`\rho` and token gap :math:`g^\star`:

    * (A′) older matches: :math:`n e^{2\delta\beta_2 - \lambda} < \rho/3`;
    * (B′) non-matching keys:
      :math:`n e^{\beta_2(2\delta - (1-\delta)g^\star) + \lambda(n-2)} < \rho/3`;
    * (C′) the sink against a match: :math:`e^{\theta - \beta_2(1 - 2\delta) - 2\lambda} < \rho/3`;
    * (D′) with no match, the sink wins:
      :math:`n e^{\beta_2(1 - (1-\delta)g^\star) + \lambda n - \theta} < \rho`.
    """
    _validate.instance("lib", lib, ModuleType)
    _validate.instance("params", params, InductionParameters)
    if lib is math:
        max_len = _validate.positive_int("max_len", max_len)
    n, b2, lam, theta = max_len, params.beta2, params.recency, params.sink
    rho, g = params.readout, params.token_gap
    delta = n * lib.exp(-params.beta1 * params.position_gap)
    return {
        "A": (n * lib.exp(2 * delta * b2 - lam), rho / 3),
        "B": (n * lib.exp(b2 * (2 * delta - (1 - delta) * g) + lam * (n - 2)), rho / 3),
        "C": (lib.exp(theta - b2 * (1 - 2 * delta) - 2 * lam), rho / 3),
        "D": (n * lib.exp(b2 * (1 - (1 - delta) * g) + lam * n - theta), rho),
    }


def max_score(max_len: int, params: InductionParameters) -> float:
    r"""The largest score magnitude :math:`M` of either layer on inputs of length :math:`\le n`.

    Layer 1 scores are at most :math:`\beta_1`; layer 2 scores are
    :math:`\beta_2\langle\mathrm{tok},\mathrm{prev}\rangle + \lambda j \le \beta_2 + \lambda n`
    for real keys and :math:`\theta` for BOS.
    """
    max_len = _validate.positive_int("max_len", max_len)
    _validate.instance("params", params, InductionParameters)
    return max(params.beta1, params.beta2 + params.recency * max_len, params.sink)


def required_bits(max_len: int, params: InductionParameters) -> int:
    r"""Significand bits :math:`p` that the margins guarantee to suffice:
    :math:`\lceil \log_2 M + 6 \rceil` with :math:`M` from :func:`max_score`.

    Derivation (first order in the unit roundoff :math:`u = 2^{-p}`, for the rounding model
    of :meth:`InductionTransformer.run`). A score is :math:`\hat q\cdot\hat k`, rounded;
    each of the weight, the residual entry, :math:`q` and :math:`k` is rounded once, so each
    contributes at most :math:`u` times the absolute-value evaluation
    :math:`\sum_l |q_l k_l| \le 2M` (two circle coordinates of modulus :math:`\le 1`), and the
    final rounding :math:`uM`. A layer-2 key also carries the rounded layer-1 output
    :math:`\mathrm{prev}` (entries :math:`\le 1`; a rounded attention weight, head output,
    projection and residual sum: abs. error :math:`\le 4u`), times :math:`\beta_2 \le M`.
    So every score errs by :math:`\epsilon \le (8 + 1 + 4)uM \le 16uM`, which is
    :math:`\le 1/4` for :math:`p \ge \log_2 M + 6`. Then every odds term of (A)–(D) grows by
    at most :math:`e^{2\epsilon} \le e^{1/2}` and the layer-1 leak by the same factor, so
    :math:`\beta_2\delta \le e^{1/2}/e`; the symbolic bounds of the conditions
    (:math:`1/e - 2`, :math:`2/e - 2`, ... in the exponent) keep a margin of at least 0.29.
    The weights of the softmax and of the readout are rounded once more, a relative
    :math:`u` that the margins absorb. The bound is conservative: on the stress inputs of
    ``theorems.areas.induction_heads`` the least exact :math:`p` is 8–9 bits lower.
    """
    return math.ceil(math.log2(max_score(max_len, params)) + 6)  # max_score checks both


# --- precision emulation ----------------------------------------------------------------------

def round_significand(x: torch.Tensor, bits: int) -> torch.Tensor:
    r"""Round to ``bits`` significand bits (the implicit leading bit included), to nearest even.

    The exponent is unbounded and there are no subnormals, so this isolates the effect of the
    significand: ``bits=24`` reproduces float32 rounding, 11 float16 and 8 bfloat16 for values
    in their normal range. The unit roundoff is :math:`u = 2^{-\text{bits}}`.
    """
    x = _validate.real_tensor("x", x, finite=False)  # NaN and inf round to themselves
    bits = _validate.positive_int("bits", bits)
    mantissa, exponent = torch.frexp(x)  # x = mantissa * 2**exponent, |mantissa| in [1/2, 1)
    scale = float(2**bits)
    return torch.ldexp(torch.round(mantissa * scale) / scale, exponent)


