r"""A fact-storing MLP past gradient descent's bits per parameter: one shared route, hat gates,
and a ladder decoder in an optimised low-dimensional code space (issue 37; ours, tag D).

The task and the storage criterion are those of :mod:`constructions.fact_mlps`: key
:math:`k_i \in \mathbb R^d` is stored iff :math:`\langle g(k_i), v_{f(i)}\rangle >
\langle g(k_i), v_j\rangle` for every :math:`j \ne f(i)`.

Encoder (:class:`HatRoutedEncoder`): one route for every gadget
-------------------------------------------------------------------
The bucketed encoders of :mod:`constructions.fact_codes` give each gadget its own routing
vector :math:`w_\beta` (:math:`d` weights) beside its :math:`d` up-weights, so a bucket of at
most :math:`d` keys costs :math:`2d + 1` weights. Here every gadget reads the same scalar
:math:`s(k) = w^\top k` (``route``, :math:`d` weights paid once): the keys are sorted by
:math:`s`, cut into consecutive buckets at boundaries :math:`c_0 < c_1 < \dots < c_B`
(``bounds``) that lie in gaps between consecutive keys, and gadget :math:`\beta` fires through
the hat

.. math::

    \eta_\beta(s) = \mathrm{ReLU}\Big(1 - \frac{|s - m_\beta|}{h_\beta}\Big),\qquad
    m_\beta = \tfrac{c_{\beta-1} + c_\beta}2,\ h_\beta = \tfrac{c_\beta - c_{\beta-1}}2,

which is positive exactly on the open interval :math:`(c_{\beta-1}, c_\beta)` and equals the
three-ReLU combination :math:`(\mathrm{ReLU}(s - c_{\beta-1}) - 2\,\mathrm{ReLU}(s - m_\beta) +
\mathrm{ReLU}(s - c_\beta))/h_\beta` of an MLP layer (its input weights are the shared route, its
biases and output weights functions of the bounds: fixed wiring, not further weights). The code
is the scalar

.. math:: z(k) = \sum_\beta \eta_\beta(s(k))\,\ell_\beta^\top k,

a gated MLP whose gate matrix has rank one. Every key lies in exactly one bucket's interval, so
it meets exactly one gadget, and the system :math:`\eta_\beta(s_i)\,\ell_\beta^\top k_i = t_i`
splits into one :math:`b_\beta \times d` solve per bucket: exact for generic keys whenever
:math:`b_\beta \le d`. A bucket therefore costs :math:`d + 1` weights (its up-weights and one
bound), about one weight per stored fact.

Decoder: a ladder in an optimised code space
--------------------------------------------
The scalar code :math:`t` of value :math:`t` is decoded by the ladder
(:class:`~constructions.fact_codes.LadderDecoder`)
:math:`y(z) = Q^\top(u_0 + \sum_{t=0}^{|V|-2} s_t\mathrm{ReLU}(z - t))` through points
:math:`u_t \in \mathbb R^n`, with :math:`Q \in \mathbb R^{n\times d_v}`. It decodes
:math:`t` iff :math:`u_t` lies in the cell of :math:`t`: :math:`\langle u_t, Q(v_t - v_j)\rangle
> 0` for every :math:`j \ne t`, which needs every projected value :math:`Qv_t` to be a vertex
of the hull of all of them. A random projection needs :math:`n \approx 8` for that; the
ladder's cost :math:`(|V| - 1)(n + 1) + n + nd_v` is linear in :math:`n`, so
:func:`decodable_cells` optimises :math:`Q` and the :math:`u_t` jointly (Adam on a softplus of
the cell margins, seeded) and reaches every vertex at :math:`n = 3` or 4 on the suite's task.
Whether they decode is then checked exactly on the result, never assumed from the optimiser.

Weights: :math:`d + (B + 1) + Bd + (|V|-1)(n+1) + n + nd_v`. With :math:`B \approx F/b`
buckets of mean size :math:`b` this is :math:`F(d+1)/b + O(|V|n + nd_v)`, so bits per
parameter approach :math:`b\log_2|V|/(d + 1)`, about 5.8 at :math:`b = d = 32`.

The MLP has two hidden layers (gadgets, then the ladder's ramps); the gradient-descent baseline
of :mod:`empirics.fact_mlps` trains one.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions.fact_codes import CodedFactMLP, LadderDecoder, ladder_tolerance
from constructions.fact_mlps import DECODE_FLOOR, value_margin
from constructions.fact_mlps.task import _conflicting_keys, _fact_set
from constructions.layers import HookPoint, fixed, resolve

# Buckets are cut at the widest gap among the last WINDOW ranks before a bucket is full: a
# wider window leaves larger gaps (fewer significand bits needed, since an edge key's gate is
# half its gap over the bucket's half-width) but smaller buckets (more weights per fact).
WINDOW = 6
# Steps of the projection optimiser; 3000 reach every vertex at n = 3 on the suite's task.
PROJECTION_STEPS = 3000


# --- the encoder ---------------------------------------------------------------------------------

class HatRoutedEncoder(nn.Module):
    r""":math:`z(k) = \sum_\beta \eta_\beta(w^\top k)\,\ell_\beta^\top k` with hat gates
    :math:`\eta_\beta` on the intervals between consecutive ``bounds``.

    ``route`` is :math:`w` ``(d,)``, ``bounds`` :math:`c` ``(B + 1,)`` strictly increasing, and
    ``up`` the :math:`\ell_\beta` ``(B, d)``.

    Hook points (TransformerLens's gated-MLP names): ``hook_mlp_in`` (``k``, ``(N, d)``),
    ``hook_pre`` (the hats before their ReLU, :math:`1 - |w^\top k - m_\beta|/h_\beta`,
    ``(N, B)``), ``hook_pre_linear`` (:math:`\ell_\beta^\top k`, ``(N, B)``), ``hook_post``
    (the gadgets' neurons :math:`\eta_\beta\,\ell_\beta^\top k`, ``(N, B)``) and
    ``hook_mlp_out`` (the code :math:`z`, ``(N, 1)``).
    """

    def __init__(self, route, bounds, up) -> None:
        super().__init__()
        route = _validate.real_tensor("route", route, ndim=1)
        bounds = _validate.real_tensor("bounds", bounds, ndim=1)
        if bounds.shape[0] < 2 or not bool((bounds[1:] > bounds[:-1]).all()):
            raise ValueError(f"bounds must hold at least two strictly increasing entries, got "
                             f"{bounds.tolist() if bounds.numel() <= 8 else tuple(bounds.shape)}")
        up = _validate.real_tensor("up", up, shape=(bounds.shape[0] - 1, route.shape[0]))
        self.route, self.bounds, self.up = map(fixed, (route, bounds, up))
        self.hook_mlp_in, self.hook_pre, self.hook_pre_linear = (HookPoint(), HookPoint(),
                                                                 HookPoint())
        self.hook_post, self.hook_mlp_out = HookPoint(), HookPoint()

    def gates(self, k: torch.Tensor) -> torch.Tensor:
        r"""The hats :math:`\eta_\beta(w^\top k)`, ``(N, B)``: each key's row has one non-zero
        entry when its projection lies strictly inside one interval, none outside them all."""
        if k.ndim != 2 or k.shape[-1] != self.route.shape[0]:
            raise ValueError(f"k must have shape (N, {self.route.shape[0]}), got "
                             f"{tuple(k.shape)}")
        s = k.to(self.route.dtype) @ self.route                 # (N,)
        mid = (self.bounds[1:] + self.bounds[:-1]) / 2          # exact: a halving
        half = (self.bounds[1:] - self.bounds[:-1]) / 2
        return torch.relu(self.hook_pre(1 - (s[:, None] - mid).abs() / half))

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        k = self.hook_mlp_in(k)
        gates = self.gates(k)                                   # (N, B)
        linear = self.hook_pre_linear(k.to(self.up.dtype) @ self.up.T)   # (N, B)
        neurons = self.hook_post(gates * linear)                # (N, B)
        return self.hook_mlp_out(neurons.sum(1, keepdim=True))  # (N, 1)


def principal_route(keys: torch.Tensor) -> torch.Tensor:
    r"""The unit direction along which the keys spread most (the top right singular vector of
    the centred keys), signed so that its largest-magnitude entry is positive; :math:`e_1` when
    the keys do not spread at all. ``keys`` is a finite ``(F, d)`` tensor."""
    keys = _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=2)).to(
        torch.float64)
    centred = keys - keys.mean(0)
    if float(centred.abs().max()) == 0.0:
        route = torch.zeros(keys.shape[1], dtype=torch.float64)
        route[0] = 1.0
        return route
    route = torch.linalg.svd(centred, full_matrices=False).Vh[0]
    return route * torch.sign(route[int(route.abs().argmax())])


def split_sorted(projections: torch.Tensor, bucket_size: int) -> torch.Tensor:
    r"""Bucket bounds :math:`c_0 < \dots < c_B` for keys with these ``projections`` ``(F,)``.

    Walking up the sorted projections, each bucket ends at the widest gap among its last
    :data:`WINDOW` possible ends (sizes ``bucket_size - WINDOW + 1`` to ``bucket_size``), and
    the bound is that gap's midpoint; the first and last bounds lie half the adjacent
    bucket's width beyond the extreme keys. Every key then lies strictly inside one interval.

    Raises ``ValueError`` when some window holds no gap with room for a bound strictly inside
    it (more than ``WINDOW`` keys with one projection, up to rounding): they cannot be split.
    """
    projections = _validate.nonempty(
        "projections", _validate.real_tensor("projections", projections, ndim=1)).to(
        torch.float64)
    bucket_size = _validate.positive_int("bucket_size", bucket_size)
    ranked = torch.sort(projections).values
    F = ranked.numel()
    ends, start = [], 0
    while F - start > bucket_size:
        lo = start + max(1, bucket_size - WINDOW + 1)
        gaps = ranked[lo:start + bucket_size + 1] - ranked[lo - 1:start + bucket_size]
        best = int(torch.argmax(gaps))
        below, above = float(ranked[lo + best - 1]), float(ranked[lo + best])
        if not below < (below + above) / 2 < above:  # no room for a bound strictly between
            raise ValueError(f"keys cannot be split along the route: ranks {lo} to "
                             f"{start + bucket_size} share the projection "
                             f"{float(ranked[lo]):.6g} up to rounding")
        start = lo + best
        ends.append(start)
    inner = [float(ranked[e - 1] + ranked[e]) / 2 for e in ends]
    first_end = ends[0] if ends else F
    last_start = ends[-1] if ends else 0
    pad_low = max(float(ranked[first_end - 1] - ranked[0]) / 2, 1.0 if F == 1 else 0.0)
    pad_high = max(float(ranked[-1] - ranked[last_start]) / 2, 1.0 if F == 1 else 0.0)
    # a bucket of one key, or of keys sharing a projection, gets a pad from its neighbours
    spread = float(ranked[-1] - ranked[0]) or 1.0
    pad_low = pad_low or spread / (2 * F)
    pad_high = pad_high or spread / (2 * F)
    bounds = [float(ranked[0]) - pad_low, *inner, float(ranked[-1]) + pad_high]
    return torch.tensor(bounds, dtype=torch.float64)


def _solve_gadgets(keys: torch.Tensor, codes: torch.Tensor, route: torch.Tensor,
                  bounds: torch.Tensor) -> torch.Tensor:
    r"""The up-weights ``(B, d)``: for each bucket, the minimum-norm solution of
    :math:`\eta_\beta(s_i)\,k_i^\top\ell_\beta = t_i` over its keys (``codes`` ``(F,)``).

    Each key meets only its own bucket's gadget (the hats have disjoint supports), so the
    buckets' systems are independent, and each has full row rank for generic keys when the
    bucket holds at most :math:`d` of them.
    """
    encoder = HatRoutedEncoder(route, bounds, torch.zeros(bounds.shape[0] - 1, keys.shape[1],
                                                          dtype=torch.float64))
    gates = encoder.gates(keys)                                 # (F, B)
    owner = gates.argmax(1)
    up = torch.zeros(encoder.up.shape, dtype=torch.float64)
    for beta in range(up.shape[0]):
        rows = torch.nonzero(owner == beta).flatten()
        if rows.numel() == 0:
            continue
        system = gates[rows, beta, None] * keys[rows]
        up[beta] = torch.linalg.lstsq(system, codes[rows, None], driver="gelsd").solution[:, 0]
    return up


# --- the decoder's code space --------------------------------------------------------------------

def cell_margin(values: torch.Tensor, projection: torch.Tensor, points: torch.Tensor) -> float:
    r"""The smallest relative margin :math:`\min_t \min_{j\ne t}\langle Q^\top u_t, v_t - v_j
    \rangle / (\lVert Q^\top u_t\rVert \max_j\lVert v_j\rVert)` of the ladder's points: positive
    iff every point :math:`u_t` decodes to value :math:`t`. ``values`` ``(|V|, d_v)``,
    ``projection`` :math:`Q` ``(n, d_v)``, ``points`` ``(|V|, n)``, all finite and non-empty."""
    values = _validate.nonempty("values", _validate.real_tensor("values", values, ndim=2))
    projection = _validate.nonempty("projection", _validate.real_tensor(
        "projection", projection, ndim=2))
    _validate.matching("projection", projection, values.shape[1], to="values")
    points = _validate.real_tensor("points", points, shape=(values.shape[0],
                                                            projection.shape[0]))
    values, projection, points = (t.to(torch.float64) for t in (values, projection, points))
    if values.shape[0] < 2:
        return math.inf
    decoded = points @ projection                               # (|V|, d_v)
    scores = decoded @ values.T
    own = scores.diagonal()
    rivals = scores.clone()
    rivals.fill_diagonal_(-math.inf)
    scale = decoded.norm(dim=1) * values.norm(dim=1).max()
    relative = torch.where(scale > 0, (own - rivals.amax(1)) / scale, -math.inf)
    return float(relative.min())  # a zero point, or all-zero values, decodes nothing: -inf


def decodable_cells(values, code_dim: int, *, seed: int = 0,
                    steps: int = PROJECTION_STEPS) -> tuple[torch.Tensor, torch.Tensor, float]:
    r"""A projection :math:`Q` ``(code_dim, d_v)`` with unit rows and points :math:`u_t`
    ``(|V|, code_dim)`` of unit norm, optimised so that every :math:`u_t` lies in the cell of
    value :math:`t`, and the :func:`cell_margin` they reach.

    Adam (learning rate 0.02, ``steps`` steps, float64 on the CPU, initial :math:`Q` Gaussian
    from ``seed`` and :math:`u_t = Qv_t`) minimises the mean of
    :math:`\mathrm{softplus}(-100\,\mu_t)/100`, :math:`\mu_t = \langle \hat u_t, Qv_t\rangle -
    \max_{j\ne t}\langle\hat u_t, Qv_j\rangle` with :math:`\hat u_t` normalised: a smooth
    stand-in for "every margin positive". The margin returned is computed afresh from the
    result; a caller must treat a non-positive one as failure.
    """
    values = _validate.nonempty("values", _validate.real_tensor("values", values, ndim=2)).to(
        device="cpu", dtype=torch.float64)
    code_dim = _validate.positive_int("code_dim", code_dim)
    if code_dim > values.shape[1]:
        raise ValueError(f"code_dim must be <= d_v = {values.shape[1]}, got {code_dim}")
    steps = _validate.positive_int("steps", steps, minimum=0)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    q = torch.randn(values.shape[1], code_dim, generator=generator, dtype=torch.float64)
    u = (values @ q).clone()
    q.requires_grad_(True)
    u.requires_grad_(True)
    optimiser = torch.optim.Adam([q, u], lr=0.02)
    diagonal = torch.eye(values.shape[0], dtype=torch.bool)
    for _ in range(steps if values.shape[0] > 1 else 0):
        projected = values @ (q / q.norm(dim=0, keepdim=True))
        scores = (u / u.norm(dim=1, keepdim=True)) @ projected.T
        margins = scores.diagonal() - scores.masked_fill(diagonal, -math.inf).amax(1)
        loss = nn.functional.softplus(-100 * margins).mean() / 100
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        projection = (q / q.norm(dim=0, keepdim=True)).T.contiguous()
        points = u / u.norm(dim=1, keepdim=True)
    return projection.detach(), points.detach(), cell_margin(values, projection, points)


def _ladder(points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Knots :math:`0, \dots, T-2` and slopes of the piecewise-linear path through ``points``
    ``(T, n)`` at the integers: :math:`s_0 = u_1 - u_0`, :math:`s_t = u_{t+1} - 2u_t +
    u_{t-1}` (one slope row when :math:`T = 1`)."""
    T = points.shape[0]
    slopes = torch.zeros(max(T - 1, 1), points.shape[1], dtype=points.dtype)
    if T > 1:
        slopes[0] = points[1] - points[0]
        slopes[1:] = points[2:] - 2 * points[1:-1] + points[:-2]
    return torch.arange(slopes.shape[0], dtype=points.dtype), slopes


# --- the builder ---------------------------------------------------------------------------------

def shared_route_mlp(keys, values, facts, *, code_dim: int | None = None,
                     bucket_size: int | None = None, seed: int = 0,
                     cells: tuple[torch.Tensor, torch.Tensor] | None = None,
                     dtype: torch.dtype = torch.float64, device=None) -> CodedFactMLP:
    r"""The shared-route scalar-code MLP (ours, tag D): :class:`HatRoutedEncoder` writes the
    code :math:`z(k_i) = f(i)` exactly, and the ladder through the optimised cells of
    :func:`decodable_cells` decodes integer :math:`t` to value :math:`t`.

    ``keys`` ``(F, d)``, ``values`` ``(|V|, d_v)`` and ``facts`` ``(F,)`` form a fact set;
    ``bucket_size`` (default :math:`d`, at most :math:`d`) bounds the keys per gadget;
    ``code_dim`` is :math:`n` (default: the smallest from 3 up whose cells all decode);
    ``seed`` seeds the projection's optimiser; ``cells`` (a projection ``(n, d_v)`` and
    points ``(|V|, n)``, as :func:`decodable_cells` returns them) reuses a decoder built for the
    same values, instead of optimising one (the encoder alone depends on the keys and facts).
    Weights: :math:`d + (B+1) + Bd + (|V|-1)(n+1) + n + nd_v`. Built in float64 on the CPU,
    then moved to ``dtype`` and ``device``.

    Raises ``ValueError`` for infeasible facts (equal keys, different values), values that no
    projection decodes (some value inside the hull of the others), a ``code_dim`` whose cells
    do not all decode, ``bucket_size > d``, or keys with too many equal projections.
    """
    kw = resolve(dtype, device)
    keys, values, facts = (t.cpu() for t in _fact_set(keys, values, facts))  # built on the CPU
    seed = _validate.seed("seed", seed)
    conflict = _conflicting_keys(keys, facts)
    if conflict is not None:
        i, j = conflict
        raise ValueError(f"facts are infeasible: keys {i} and {j} are equal but map to values "
                         f"{int(facts[i])} and {int(facts[j])}")
    d, d_v = keys.shape[1], values.shape[1]
    bucket_size = d if bucket_size is None else _validate.positive_int("bucket_size",
                                                                       bucket_size)
    if bucket_size > d:
        raise ValueError(f"bucket_size must be <= d = {d}: a gadget's up-weights hit at most d "
                         f"generic targets; got {bucket_size}")
    if not value_margin(values) > DECODE_FLOOR:
        raise ValueError(f"values are not decodable: some value v_k has <v_k, v_j> >= |v_k|^2 - "
                         f"{DECODE_FLOOR:.1e} max|v|^2 for a j != k, so it lies inside the hull "
                         f"of the others and no projection decodes it")
    if code_dim is not None:
        code_dim = _validate.positive_int("code_dim", code_dim)
        if code_dim > d_v:
            raise ValueError(f"code_dim must be <= d_v = {d_v}, got {code_dim}")
    projection, points, margin = None, None, -math.inf
    if cells is not None:
        if not isinstance(cells, tuple) or len(cells) != 2:
            raise TypeError(f"cells must be a (projection, points) tuple, got "
                            f"{type(cells).__name__}")
        projection = _validate.real_tensor("cells", cells[0], shape=(code_dim, d_v)).to(
            device="cpu", dtype=torch.float64)
        points = _validate.real_tensor("cells", cells[1], shape=(
            values.shape[0], projection.shape[0])).to(device="cpu", dtype=torch.float64)
        margin = cell_margin(values, projection, points)
    for n in [] if cells is not None else [code_dim] if code_dim is not None else range(
            min(3, d_v), d_v + 1):
        projection, points, margin = decodable_cells(values, n, seed=seed)
        if margin > DECODE_FLOOR:
            break
    if cells is not None and not margin > DECODE_FLOOR:
        raise ValueError(f"cells do not decode these values: relative cell margin {margin:.3g} "
                         f"<= {DECODE_FLOOR:.1e}")
    if not margin > DECODE_FLOOR:
        raise ValueError(f"code_dim={code_dim} is too small: after optimisation some ladder point "
                         f"does not decode (relative cell margin {margin:.3g} <= "
                         f"{DECODE_FLOOR:.1e}); try a larger code_dim or code_dim=None")
    knots, slopes = _ladder(points)
    if not ladder_tolerance(points @ projection, values) > 0:
        raise ValueError("values cannot be decoded on the ladder: a ladder point leaves its cell")
    route = principal_route(keys)
    bounds = split_sorted(keys @ route, bucket_size)
    up = _solve_gadgets(keys, facts.to(torch.float64), route, bounds)
    decoder = LadderDecoder(knots.to(**kw), slopes.to(**kw), points[0].to(**kw),
                            projection.to(**kw))
    return CodedFactMLP(HatRoutedEncoder(route.to(**kw), bounds.to(**kw), up.to(**kw)), decoder)
