r"""Fact-storing MLPs at the efficiency frontier: bucketed encoders and cheap decoders.

Sources: Dugan et al. (2025, arXiv:2512.00207), Sec. 4 and the authors' blog post "MLPs" part 2;
what was read there is the abstract, the blog's problem set-up and a secondary summary (keys are
grouped into small random buckets, each with an encoder gadget that "activates only for keys in
that group" and outputs a low-dimensional code, undone by a linear decoder). The gadget's gate,
the bucket sizes and the decoder below are our reconstruction (tag D).

The task and the storage criterion are those of :mod:`constructions.fact_mlps`: key
:math:`k_i \in \mathbb R^d` is stored iff :math:`\langle g(k_i), v_{f(i)}\rangle >
\langle g(k_i), v_j\rangle` for every :math:`j \ne f(i)`.

Bucketed encoder (:class:`BucketedEncoder`)
-------------------------------------------
Gadget :math:`\beta` has a routing vector :math:`w_\beta \in \mathbb R^d`, a threshold
:math:`\tau_\beta` and a linear map :math:`L_\beta \in \mathbb R^{m\times d}` (its :math:`m`
neurons' up-weights); its neurons are :math:`\mathrm{ReLU}(w_\beta^\top k - \tau_\beta)\,
(L_\beta k)_r` and the code is the sum over gadgets,

.. math:: z(k) = \sum_\beta \mathrm{ReLU}(w_\beta^\top k - \tau_\beta)\, L_\beta k \in \mathbb R^m.

Buckets are peeled (:func:`peel_buckets`): bucket :math:`\beta` is the top of the keys not yet
bucketed, ranked by :math:`w_\beta^\top k`, cut at a gap, and :math:`\tau_\beta` sits in that gap.
So gadget :math:`\beta` is off on every later bucket, and a key of bucket :math:`\beta` sees
gadget :math:`\beta` and possibly later gadgets only: the system "every key hits its code" is
block triangular, and solving the gadgets from the last bucket back leaves for gadget
:math:`\beta` the :math:`b_\beta m` equations :math:`L_\beta k_i = (c_i - \text{later}_i)/
\mathrm{gate}_i` in :math:`md` unknowns, solvable for generic keys when :math:`b_\beta \le d`.

Decoders
--------
* :class:`LinearDecoder`: :math:`P^\top z` with :math:`P` the orthonormal projection of
  :func:`constructions.fact_mlps.orthonormal_projection` and codes :math:`c = Pv_{f(i)}` (the
  paper's decoder, as the suite reconstructs it): :math:`m d_v` weights.
* :class:`LadderDecoder`: a scalar code :math:`z = t` for value :math:`t` and the
  piecewise-linear interpolation :math:`y(z) = y_0 + \sum_t s_t\,\mathrm{ReLU}(z - t)` through
  the projected values :math:`Y_t = Pv_t`, followed by :math:`P^\top`: one equation per fact in
  the encoder, and :math:`(|V|-1)(n+1) + n + nd_v` decoder weights paid once, whatever
  :math:`F`.

Every weight a model holds is an entry of one of its parameter tensors, and
:func:`constructions.fact_mlps.parameter_count` counts them all; the sum over gadgets and the
ladder's unit input weight are fixed wiring, not weights.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions.fact_mlps import (
    DECODE_FLOOR,
    orthonormal_projection,
    recall,
    smallest_code_dim,
    value_margin,
)
from constructions.fact_mlps.encoder_decoder import _projection_decoding_margin
from constructions.fact_mlps.task import _conflicting_keys, _fact_set
from constructions.induction_heads import round_significand
from constructions.layers import HookPoint, fixed, resolve

# A gate below this fraction of the keys' projection spread is "too close to its threshold":
# the gadget then divides a target by it and its weights blow up (see peel_buckets).
MIN_GAP = 1e-3


# --- the modules --------------------------------------------------------------------------------

class BucketedEncoder(nn.Module):
    r""":math:`z(k) = \sum_\beta \mathrm{ReLU}(w_\beta^\top k - \tau_\beta) L_\beta k`.

    ``route`` is ``(B, d)``, ``threshold`` ``(B,)`` and ``up`` ``(B, m, d)``.

    Hook points, named as in TransformerLens's gated MLP (the gate :math:`\mathrm{ReLU}(w_\beta^\top
    k - \tau_\beta)` is the activated branch, :math:`L_\beta k` the linear one):
    ``hook_mlp_in`` (``k``, ``(N, d)``), ``hook_pre`` (:math:`w_\beta^\top k - \tau_\beta`, before
    the ReLU, ``(N, B)``), ``hook_pre_linear`` (:math:`L_\beta k`, ``(N, B, m)``) and
    ``hook_mlp_out`` (the code :math:`z`, ``(N, m)``). There is no ``hook_post``: the
    :math:`Bm` neurons' products are never formed, one contraction over :math:`\beta` makes
    :math:`z` from the gates and :math:`L_\beta k` directly, and forming them would be another
    summation order.
    """

    def __init__(self, route, threshold, up) -> None:
        super().__init__()
        route = _validate.real_tensor("route", route, ndim=2)
        threshold = _validate.real_tensor("threshold", threshold, shape=(route.shape[0],))
        up = _validate.real_tensor("up", up, shape=(route.shape[0], None, route.shape[1]))
        self.route, self.threshold, self.up = map(fixed, (route, threshold, up))
        self.hook_mlp_in, self.hook_pre, self.hook_pre_linear = (HookPoint(), HookPoint(),
                                                                 HookPoint())
        self.hook_mlp_out = HookPoint()

    def gates(self, k: torch.Tensor) -> torch.Tensor:
        """Gadget gates ``(N, B)``."""
        if k.shape[-1] != self.route.shape[1]:
            raise ValueError(f"k must have width {self.route.shape[1]}, got shape {tuple(k.shape)}")
        return torch.relu(self.hook_pre(k.to(self.route.dtype) @ self.route.T - self.threshold))

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        k = self.hook_mlp_in(k)                                 # (N, d)
        gates = self.gates(k)                                   # (N, B)
        per_gadget = self.hook_pre_linear(
            torch.einsum("bmd,nd->nbm", self.up, k.to(self.up.dtype)))  # (N, B, m)
        return self.hook_mlp_out(torch.einsum("nb,nbm->nm", gates, per_gadget))   # (N, m)


class LinearDecoder(nn.Module):
    r""":math:`y = P^\top z`, ``projection`` :math:`P` of shape ``(m, d_v)``.

    Hook points (a one-matrix MLP, TransformerLens's names): ``hook_mlp_in`` (the code ``z``,
    ``(N, m)``) and ``hook_mlp_out`` (:math:`P^\top z`, ``(N, d_v)``)."""

    def __init__(self, projection) -> None:
        super().__init__()
        self.projection = fixed(_validate.real_tensor("projection", projection, ndim=2))
        self.hook_mlp_in, self.hook_mlp_out = HookPoint(), HookPoint()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.hook_mlp_out(self.hook_mlp_in(z) @ self.projection)   # (N, d_v)


class LadderDecoder(nn.Module):
    r""":math:`y(z) = P^\top\big(y_0 + \sum_t s_t\,\mathrm{ReLU}(z - \kappa_t)\big)` for a scalar
    code :math:`z`: ``knots`` :math:`\kappa` ``(T,)``, ``slopes`` ``(T, n)``, ``offset``
    :math:`y_0` ``(n,)``, ``projection`` :math:`P` ``(n, d_v)``.

    Hook points (TransformerLens's MLP names, one neuron per knot): ``hook_mlp_in`` (the code
    ``z``, ``(N, m)``, of which the first coordinate is read), ``hook_pre``
    (:math:`z - \kappa_t`, ``(N, T)``), ``hook_post`` (the ramps
    :math:`\mathrm{ReLU}(z - \kappa_t)`, ``(N, T)``) and ``hook_mlp_out`` (:math:`y(z)`,
    ``(N, d_v)``)."""

    def __init__(self, knots, slopes, offset, projection) -> None:
        super().__init__()
        knots = _validate.real_tensor("knots", knots, ndim=1)
        slopes = _validate.real_tensor("slopes", slopes, shape=(knots.shape[0], None))
        offset = _validate.real_tensor("offset", offset, shape=(slopes.shape[1],))
        projection = _validate.real_tensor("projection", projection, shape=(slopes.shape[1], None))
        self.knots, self.slopes, self.offset, self.projection = map(
            fixed, (knots, slopes, offset, projection))
        self.hook_mlp_in, self.hook_pre, self.hook_post = HookPoint(), HookPoint(), HookPoint()
        self.hook_mlp_out = HookPoint()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = self.hook_mlp_in(z)                                 # (N, m)
        ramps = self.hook_post(torch.relu(self.hook_pre(z[:, :1] - self.knots)))  # (N, T)
        return self.hook_mlp_out((self.offset + ramps @ self.slopes) @ self.projection)  # (N, d_v)


class CodedFactMLP(nn.Module):
    """An encoder to codes followed by a decoder to the value space.

    Hook points (the whole model is one MLP, TransformerLens's names): ``hook_mlp_in`` (the key
    ``k``, ``(N, d)``) and ``hook_mlp_out`` (the decoded value, ``(N, d_v)``); the code between
    them is ``encoder.hook_mlp_out``, and ``encoder.*`` and ``decoder.*`` hold the rest."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module) -> None:
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.hook_mlp_in, self.hook_mlp_out = HookPoint(), HookPoint()

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        return self.hook_mlp_out(self.decoder(self.encoder(self.hook_mlp_in(k))))


# --- buckets ---------------------------------------------------------------------------------

def peel_buckets(keys: torch.Tensor, bucket_size: int, seed: int):
    r"""Routing vectors, thresholds and buckets (lists of key indices), peeled in order.

    Draw a Gaussian :math:`w_\beta`; rank the keys not yet bucketed by :math:`w_\beta^\top k`;
    cut at the widest gap between ranks :math:`\lceil 3b/4\rceil` and :math:`b` (``bucket_size``)
    and put :math:`\tau_\beta` in its middle. Every gate of a bucket key is then at least half
    that gap; with :math:`n` remaining keys the widest of :math:`b/2` consecutive spacings is
    rarely below a fraction :math:`1/n` of the spread, and a draw whose gap falls under
    :data:`MIN_GAP` times the spread is redrawn (at most 64 times, then ValueError).

    ``keys`` is ``(F, d)``, finite and non-empty; ``bucket_size`` a positive int; ``seed`` a
    non-negative int.
    """
    keys = _keys(keys)
    bucket_size = _validate.positive_int("bucket_size", bucket_size)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    remaining = torch.arange(keys.shape[0])
    routes, thresholds, buckets = [], [], []
    while remaining.numel() > 0:
        for _ in range(64):
            w = torch.randn(keys.shape[1], generator=generator, dtype=torch.float64)
            w /= w.norm()
            proj = keys[remaining] @ w
            order = torch.argsort(proj, descending=True)
            ranked = proj[order]
            n = ranked.numel()
            if n <= bucket_size:
                spread = float(ranked[0] - ranked[-1]) or 1.0
                cut, tau, gap = n, float(ranked[-1]) - spread, spread
                break
            lo = max(1, math.ceil(3 * bucket_size / 4))
            gaps = ranked[lo - 1:bucket_size] - ranked[lo:bucket_size + 1]
            best = int(torch.argmax(gaps))
            cut, gap = lo + best, float(gaps[best])
            tau = float(ranked[cut - 1] + ranked[cut]) / 2
            if gap > MIN_GAP * float(ranked[0] - ranked[-1]):
                break
        else:
            raise ValueError("keys are degenerate: no routing draw separates a bucket "
                             f"(gap above {MIN_GAP} of the spread) in 64 tries")
        routes.append(w)
        thresholds.append(tau)
        buckets.append(remaining[order[:cut]])
        remaining = remaining[order[cut:]]
    return torch.stack(routes), torch.tensor(thresholds, dtype=torch.float64), buckets


def solve_buckets(keys: torch.Tensor, codes: torch.Tensor, routes: torch.Tensor,
                  thresholds: torch.Tensor) -> torch.Tensor:
    r"""The gadgets' maps ``(B, m, d)``: the minimum-norm solution of the whole system.

    Code coordinate :math:`o` of key :math:`i` is :math:`\sum_{\beta, j} \mathrm{gate}_{i\beta}
    k_{ij} (L_\beta)_{oj}`, so the :math:`m` coordinates share one matrix
    :math:`M_{i,(\beta j)} = \mathrm{gate}_{i\beta}k_{ij}` (``F x Bd``, sparse: key :math:`i`
    meets only the gadgets that fire on it) and :math:`MX = C` is one least-squares solve with
    :math:`m` right-hand sides. The system is block triangular (peel_buckets), so it has full
    row rank for generic keys; it is nevertheless solved jointly rather than by back
    substitution, because back substitution divides by the bucket keys' gates gadget after
    gadget and its weights grow geometrically with the number of buckets (measured: norms
    of 1e20 at F = 4096), while the minimum-norm solution stays small.

    ``keys`` ``(F, d)``, ``codes`` ``(F, m)``, ``routes`` ``(B, d)`` and ``thresholds``
    ``(B,)`` (as :func:`peel_buckets` returns them) are finite and non-empty.
    """
    keys = _keys(keys)
    codes = _validate.nonempty("codes", _validate.real_tensor("codes", codes, ndim=2))
    _validate.matching("codes", codes, keys.shape[0], dim=0, to="keys")
    routes = _validate.nonempty("routes", _validate.real_tensor("routes", routes, ndim=2))
    _validate.matching("routes", routes, keys.shape[1], to="keys")
    thresholds = _validate.real_tensor("thresholds", thresholds, shape=(routes.shape[0],))
    codes, routes, thresholds = (t.to(torch.float64) for t in (codes, routes, thresholds))
    B, d = routes.shape
    gates = torch.relu(keys @ routes.T - thresholds)           # (F, B)
    M = (gates[:, :, None] * keys[:, None, :]).reshape(keys.shape[0], B * d)
    X = torch.linalg.lstsq(M, codes, driver="gelsd").solution   # (B d, m)
    return X.reshape(B, d, codes.shape[1]).transpose(1, 2).contiguous()


def _keys(keys: object) -> torch.Tensor:
    """Validated ``(F, d)`` keys in float64, the precision the gadgets are solved in."""
    return _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=2)).to(
        torch.float64)


# --- builders ----------------------------------------------------------------------------------

def _prepare(keys, values, facts, seed, bucket_size, num_buckets):
    keys, values, facts = _fact_set(keys, values, facts)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    conflict = _conflicting_keys(keys, facts)
    if conflict is not None:
        i, j = conflict
        raise ValueError(f"facts are infeasible: keys {i} and {j} are equal but map to values "
                         f"{int(facts[i])} and {int(facts[j])}")
    d = keys.shape[1]
    bucket_size = d if bucket_size is None else _validate.positive_int("bucket_size", bucket_size)
    if bucket_size > d:
        raise ValueError(f"bucket_size must be <= d = {d}: a gadget's linear map hits at most d "
                         f"generic targets; got {bucket_size}")
    routes, thresholds, buckets = peel_buckets(keys, bucket_size, seed)
    if num_buckets is not None:
        num_buckets = _validate.positive_int("num_buckets", num_buckets)
        if keys.shape[0] > num_buckets * bucket_size or len(buckets) > num_buckets:
            raise ValueError(f"F = {keys.shape[0]} facts exceed the capacity of num_buckets="
                             f"{num_buckets} gadgets (at most num_buckets*bucket_size = "
                             f"{num_buckets * bucket_size} keys, and this draw needs "
                             f"{len(buckets)} buckets)")
    return keys, values, facts, routes, thresholds


def _code_projection(values, facts, seed, code_dim):
    d_v = values.shape[1]
    smallest = smallest_code_dim(values, facts, seed)
    if smallest is None:
        raise ValueError(f"values are not decodable: some used value v_k has <v_k, v_j> >= "
                         f"|v_k|^2 - {DECODE_FLOOR:.1e} max|v|^2 for a j != k (margin gamma = "
                         f"{value_margin(values, facts):.3g}), so no projection decodes it")
    code_dim = smallest if code_dim is None else _validate.positive_int("code_dim", code_dim)
    if code_dim > d_v:
        raise ValueError(f"code_dim must be <= d_v = {d_v}, got {code_dim}")
    projection = orthonormal_projection(d_v, d_v, seed)[:code_dim]
    margin = _projection_decoding_margin(values, projection, facts)
    if margin <= DECODE_FLOOR:
        raise ValueError(f"code_dim={code_dim} is too small: the projected values do not decode "
                         f"(relative margin {margin:.3g} <= {DECODE_FLOOR:.1e}); the smallest "
                         f"working code_dim for seed={seed} is {smallest}")
    return projection


def multi_bucket_mlp(keys, values, facts, *, code_dim: int | None = None,
                     bucket_size: int | None = None, num_buckets: int | None = None,
                     seed: int = 0, dtype: torch.dtype = torch.float64,
                     device=None) -> CodedFactMLP:
    r"""The paper's multi-bucket encoder with its linear decoder (our reconstruction, tag D):
    codes :math:`c_i = Pv_{f(i)}` of dimension ``code_dim`` (default: the smallest that decodes,
    :func:`constructions.fact_mlps.smallest_code_dim`), gadgets of at most ``bucket_size``
    (default :math:`d`) keys. Weights: :math:`B(d + 1 + md) + md_v`.

    Raises ``ValueError`` for infeasible or undecodable facts, ``code_dim`` too small to decode,
    ``bucket_size > d``, or more facts than ``num_buckets`` gadgets can hold."""
    keys, values, facts, routes, thresholds = _prepare(
        keys, values, facts, seed, bucket_size, num_buckets)
    projection = _code_projection(values, facts, seed, code_dim)
    up = solve_buckets(keys, values[facts] @ projection.T, routes, thresholds)
    kw = resolve(dtype, device)
    return CodedFactMLP(BucketedEncoder(routes.to(**kw), thresholds.to(**kw), up.to(**kw)),
                        LinearDecoder(projection.to(**kw)))


def ladder_tolerance(points: torch.Tensor, decoded: torch.Tensor) -> float:
    r"""The largest :math:`\delta` such that every code within :math:`\delta` of an integer
    :math:`t \in [0, T)` decodes like :math:`t` on the ladder through ``points`` ``(T, d_v)``
    (already in value space, scored against ``decoded`` ``(|V|, d_v)``).

    On :math:`[t, t\pm1]` the output is :math:`(1-\delta)Y_t + \delta Y_{t\pm1}`, so each
    score gap :math:`a + \delta(b - a)` is linear in :math:`\delta`; the first root over the
    rivals and both neighbours is the tolerance at :math:`t` (:math:`\le 1/2` by convention,
    so neighbouring cells never overlap).

    ``points`` and ``decoded`` are finite, non-empty, with the same width, and ``decoded``
    has a row for every point (point :math:`t` is value :math:`t`'s).
    """
    points = _validate.nonempty("points", _validate.real_tensor("points", points, ndim=2))
    decoded = _validate.nonempty("decoded", _validate.real_tensor("decoded", decoded, ndim=2))
    _validate.matching("decoded", decoded, points.shape[1], to="points")
    if decoded.shape[0] < points.shape[0]:
        raise ValueError(f"decoded must have a row for each of the T = {points.shape[0]} points, "
                         f"got shape {tuple(decoded.shape)}")
    T = points.shape[0]
    scores = points @ decoded.T                                 # (T, |V|)
    best = 0.5
    for t in range(T):
        own = scores[t, t] - scores[t]                          # a_l >= 0 (0 at l = t)
        for s in (t - 1, t + 1):
            if not 0 <= s < T:
                continue
            other = scores[s, t] - scores[s]                    # b_l
            a, b = own.clone(), other.clone()
            a[t], b[t] = math.inf, math.inf
            falling = b < 0
            if falling.any():
                roots = a[falling] / (a[falling] - b[falling])
                best = min(best, float(roots.min()))
    return best


def scalar_code_mlp(keys, values, facts, *, code_dim: int | None = None,
                    bucket_size: int | None = None, num_buckets: int | None = None,
                    seed: int = 0, dtype: torch.dtype = torch.float64,
                    device=None) -> CodedFactMLP:
    r"""Our frontier construction (tag D): the bucketed encoder writes the scalar code
    :math:`z_i = f(i)` (one equation per fact) and the :class:`LadderDecoder` maps integer
    :math:`t` to :math:`P^\top Pv_t`, which decodes to :math:`v_t`.

    The ladder :math:`y_0 + \sum_{t=0}^{|V|-2} s_t\mathrm{ReLU}(z - t)` with :math:`y_0 = Y_0`,
    :math:`s_0 = Y_1 - Y_0` and :math:`s_t = Y_{t+1} - 2Y_t + Y_{t-1}` interpolates
    :math:`Y_t = Pv_t` linearly, so :math:`y(t) = Y_t` at every integer; codes within
    :func:`ladder_tolerance` of :math:`f(i)` still decode. Weights:
    :math:`B(2d + 1) + (|V|-1)(n + 1) + n + nd_v` for projection dimension ``code_dim``
    :math:`= n` (default the smallest that decodes every value, used or not, since the ladder
    passes through all of them).
    """
    keys, values, facts, routes, thresholds = _prepare(
        keys, values, facts, seed, bucket_size, num_buckets)
    everything = torch.arange(values.shape[0])
    projection = _code_projection(values, everything, seed, code_dim)
    Y = values @ projection.T                                   # (|V|, n)
    T = values.shape[0]
    slopes = torch.zeros(max(T - 1, 1), Y.shape[1], dtype=torch.float64)
    if T > 1:
        slopes[0] = Y[1] - Y[0]
        slopes[1:] = Y[2:] - 2 * Y[1:-1] + Y[:-2]
    knots = torch.arange(slopes.shape[0], dtype=torch.float64)
    tolerance = ladder_tolerance(Y @ projection, values)
    if not tolerance > 0:
        raise ValueError("values cannot be decoded on the ladder: some segment between "
                         f"consecutive values leaves its cell at once (tolerance {tolerance})")
    codes = facts.to(torch.float64)[:, None]
    up = solve_buckets(keys, codes, routes, thresholds)
    kw = resolve(dtype, device)
    decoder = LadderDecoder(knots.to(**kw), slopes.to(**kw), Y[0].to(**kw),
                            projection.to(**kw))
    return CodedFactMLP(BucketedEncoder(routes.to(**kw), thresholds.to(**kw), up.to(**kw)),
                        decoder)


# --- precision and the counting bound --------------------------------------------------------

def rounded(model: nn.Module, bits: int, *, only: str | None = None) -> nn.Module:
    """A copy of ``model`` with every weight (or those under the submodule ``only``) rounded to
    ``bits`` significand bits by :func:`constructions.induction_heads.round_significand`."""
    import copy

    _validate.instance("model", model, nn.Module)
    bits = _validate.positive_int("bits", bits)
    clone = copy.deepcopy(model)
    target = clone if only is None else clone.get_submodule(only)
    with torch.no_grad():
        for p in target.parameters():
            p.copy_(round_significand(p.to(torch.float64), bits).to(p.dtype))
    return clone


def min_precision_bits(model: nn.Module, keys, values, facts, *, max_bits: int = 53) -> int | None:
    """The fewest significand bits at which the rounded model (evaluated in float64) still
    stores every fact, scanning up from 1; None if even ``max_bits`` fails."""
    _validate.instance("model", model, nn.Module)
    max_bits = _validate.positive_int("max_bits", max_bits)
    for bits in range(1, max_bits + 1):
        if recall(rounded(model, bits), keys, values, facts)[0] == 1.0:
            return bits
    return None


def exponent_bits(model: nn.Module, bits: int) -> int:
    """Bits needed to index the binary exponents of the model's non-zero weights at ``bits``."""
    _validate.instance("model", model, nn.Module)
    bits = _validate.positive_int("bits", bits)
    exps = [torch.frexp(round_significand(p.detach().to(torch.float64), bits))[1][p != 0]
            for p in model.parameters()]
    exps = torch.cat([e.flatten() for e in exps])
    if exps.numel() == 0:
        return 0
    span = int(exps.max() - exps.min()) + 1
    return math.ceil(math.log2(span)) if span > 1 else 0


def counting_bound(bits: int, exponent: int) -> float:
    r"""Bits per parameter any model at this precision can store: a weight with ``bits``
    significand bits (hidden bit included), a sign and ``exponent`` exponent bits, or zero, takes
    at most :math:`2^{\text{bits} + \text{exponent}} + 1` values, so :math:`P` weights realise at
    most :math:`(2^{b+e}+1)^P` functions, and storing every one of the :math:`|V|^F` fact maps
    needs :math:`F\log_2|V| \le P\log_2(2^{b+e}+1)`."""
    bits = _validate.positive_int("bits", bits)
    exponent = _validate.positive_int("exponent", exponent, minimum=0)
    return math.log2(2.0 ** (bits + exponent) + 1)
