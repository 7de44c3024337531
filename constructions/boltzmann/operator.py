r"""The Boltzmann operator, rank-one heads, tokenwise separation and the projection direction.
"""

from __future__ import annotations

import math

import torch

from constructions import _validate
from constructions._roles import oracle
from constructions.layers import Attention, resolve

# --- the Boltzmann operator ------------------------------------------------------------------


@oracle
def boltzmann(a, beta=1.0, dim: int = -1) -> torch.Tensor:
    r""":math:`\mathrm{boltz}_\beta(a) = \sum_i a_i e^{\beta a_i}/\sum_j e^{\beta a_j}`, along
    ``dim``.

    ``beta`` is a real number or a tensor that broadcasts against the output (``a`` with
    ``dim`` removed), so a batch may carry one inverse temperature per row. The weights are a
    max-shifted softmax, and the sum is taken relative to the entry of largest weight,
    :math:`\mathrm{boltz}_\beta(a) = a_m + \sum_i (a_i - a_m)\,p_i`, so that nothing overflows
    for any finite :math:`\beta a` (checked up to :math:`|\beta a| = 10^4`) and the result
    keeps full relative accuracy near :math:`\max a` at large :math:`\beta`.
    """
    a = _validate.real_tensor("a", a)
    if a.ndim == 0:
        raise ValueError("a must have at least one dimension, got a scalar")
    dim = _validate.positive_int("dim", dim, minimum=-a.ndim)
    if not -a.ndim <= dim < a.ndim:
        raise ValueError(f"dim must be in [{-a.ndim}, {a.ndim}), got {dim}")
    if a.shape[dim] == 0:
        raise ValueError(f"a must have at least one entry along dim={dim}")
    dim = dim % a.ndim
    if isinstance(beta, torch.Tensor):
        beta = _validate.real_tensor("beta", beta).to(a)
        out_shape = a.shape[:dim] + a.shape[dim + 1:]
        try:
            beta = torch.broadcast_to(beta, out_shape).unsqueeze(dim)
        except RuntimeError:
            raise ValueError(f"beta of shape {tuple(beta.shape)} does not broadcast to the "
                             f"output shape {tuple(out_shape)}") from None
    else:
        beta = _validate.finite_float("beta", beta)
    scores = beta * a
    if not torch.isfinite(scores).all():
        raise ValueError("beta * a overflows the dtype; rescale a or beta")
    weights = scores.softmax(dim=dim)
    anchor = a.gather(dim, scores.argmax(dim=dim, keepdim=True))
    return (anchor + ((a - anchor) * weights).sum(dim=dim, keepdim=True)).squeeze(dim)


def rank_one_head(w, rho: float, *, u=None, out_scale: float = 1.0,
                  dtype: torch.dtype = torch.float64, device=None) -> Attention:
    r"""The single head :math:`W_Q = \rho w`, :math:`W_K = W_V = w`, :math:`W_O = c\,u^\top`.

    Its output at query :math:`q` is :math:`c\,u\,\mathrm{boltz}_{\rho s_q}(p)` with
    :math:`s_q = w^\top x_q` and :math:`p_k = w^\top x_k`: the score vector of query :math:`q`
    is :math:`\rho s_q p`, and the values are :math:`p`. ``w`` need not be a unit vector; ``u``
    defaults to ``w``.
    """
    w = _validate.nonempty("w", _validate.real_tensor("w", w, ndim=1)).to(torch.float64)
    u = w if u is None else _validate.real_tensor("u", u, shape=(len(w),)).to(torch.float64)
    rho = _validate.finite_float("rho", rho)
    out_scale = _validate.finite_float("out_scale", out_scale)
    kw = resolve(dtype, device)
    column = w[:, None]
    return Attention(*(t.to(**kw) for t in (rho * column, column, column,
                                             out_scale * u[None, :])))


# --- tokenwise separation and the projection direction ------------------------------------------


def pairwise_distances(points: torch.Tensor) -> torch.Tensor:
    """Pairwise distances with ``inf`` on the diagonal, from exact differences (the default
    matrix-product form of ``cdist`` cancels small distances to 0 beyond 25 rows)."""
    distances = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
    return distances.fill_diagonal_(math.inf)


def separation(vocabulary: torch.Tensor) -> tuple[float, float, float]:
    r"""``(r_min, r_max, eps)``: the smallest and largest token norm and the smallest distance
    between two distinct tokens (:math:`\infty` for a single token)."""
    vocabulary = _points("vocabulary", vocabulary)
    norms = vocabulary.norm(dim=-1)
    if len(vocabulary) < 2:
        return float(norms.min()), float(norms.max()), math.inf
    distances = pairwise_distances(vocabulary)
    return float(norms.min()), float(norms.max()), float(distances.min())


def projection_constant(points: torch.Tensor, w: torch.Tensor) -> float:
    r""":math:`c_w = \min_{x\ne x'} |w^\top(x - x')|/\lVert x - x'\rVert` over the rows of
    ``points`` and the origin: how well the direction ``w`` keeps them apart."""
    points = _points("points", points)
    w = checked_direction("w", w, points.shape[1], "points").to(points.dtype)
    points = torch.cat([points, points.new_zeros(1, points.shape[1])])
    diffs = points[:, None, :] - points[None, :, :]
    norms = diffs.norm(dim=-1)
    keep = norms > 0
    return float(((diffs @ w).abs()[keep] / norms[keep]).min())


def theorem_projection_constant(vocab_size: int, d: int) -> float:
    r""":math:`\sqrt{8/(\pi d)}/(|\mathcal V| + 1)^2`: the constant the projection lemma
    guarantees for :math:`|\mathcal V| + 1` points in :math:`\mathbb R^d`."""
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    d = _validate.positive_int("d", d)
    return math.sqrt(8.0 / (math.pi * d)) / (vocab_size + 1) ** 2


def _points(name: str, points: object) -> torch.Tensor:
    """A non-empty ``(V, d)`` matrix of finite points."""
    return _validate.nonempty(name, _validate.real_tensor(name, points, ndim=2))


def checked_direction(name: str, w: object, d: int, to: str) -> torch.Tensor:
    """A direction ``(d,)`` matching the width of ``to``."""
    w = _validate.real_tensor(name, w, ndim=1)
    return _validate.matching(name, w, d, to=to)


def _candidates(d: int, trials: int, seed: int) -> torch.Tensor:
    """The coordinate axes and ``trials`` seeded Gaussian directions, as unit rows."""
    trials = _validate.positive_int("trials", trials)
    seed = _validate.seed("seed", seed)
    generator = torch.Generator().manual_seed(seed)
    candidates = torch.cat([torch.eye(d, dtype=torch.float64),
                            torch.randn(trials, d, generator=generator, dtype=torch.float64)])
    return candidates / candidates.norm(dim=-1, keepdim=True)


# Entries of the (pairs x candidates) block evaluated at once by best_direction.
_BLOCK = 1 << 22


def best_direction(points: torch.Tensor, *, trials: int = 512, seed: int = 0
                   ) -> tuple[torch.Tensor, float]:
    """The unit vector with the largest projection constant among ``trials`` seeded Gaussian
    directions (and the coordinate axes), with that constant. Pairs are taken from the rows of
    ``points`` and the origin, in blocks of candidates, so memory stays bounded."""
    points = _points("points", points).to(torch.float64)
    d = points.shape[1]
    candidates = _candidates(d, trials, seed)
    augmented = torch.cat([points, points.new_zeros(1, d)])
    i, j = torch.triu_indices(len(augmented), len(augmented), offset=1)
    diffs = augmented[i] - augmented[j]
    norms = diffs.norm(dim=-1)
    diffs, norms = diffs[norms > 0], norms[norms > 0]
    chunk = max(1, _BLOCK // max(1, len(diffs)))
    constants = torch.cat([((diffs @ block.T).abs() / norms[:, None]).amin(dim=0)
                           for block in candidates.split(chunk)])
    best = int(constants.argmax())
    return candidates[best], float(constants[best])


def best_spacing_direction(points: torch.Tensor, *, trials: int = 512, seed: int = 0
                           ) -> tuple[torch.Tensor, float]:
    r"""The candidate unit vector (as in :func:`best_direction`) whose projections of the rows
    of ``points`` and of the origin are furthest apart, with that smallest spacing. Sorting
    makes this :math:`O(V\log V)` per direction, for vocabularies of any size."""
    points = _points("points", points).to(torch.float64)
    candidates = _candidates(points.shape[1], trials, seed)
    augmented = torch.cat([points, points.new_zeros(1, points.shape[1])])
    chunk = max(1, _BLOCK // len(augmented))
    spacings = torch.cat([(augmented @ block.T).sort(dim=0).values.diff(dim=0).amin(dim=0)
                          if len(augmented) > 1 else torch.full((len(block),), math.inf)
                          for block in candidates.split(chunk)])
    best = int(spacings.argmax())
    return candidates[best], float(spacings[best])


def checked_unit_vector(name: str, value: object, d: int) -> torch.Tensor:
    """``value`` as a float64 vector of shape ``(d,)``, normalised to unit length (a zero
    vector is a ``ValueError`` naming ``name``)."""
    value = _validate.real_tensor(name, value, shape=(d,)).to(torch.float64)
    norm = float(value.norm())
    if norm == 0:
        raise ValueError(f"{name} must be a nonzero vector")
    return value / norm


