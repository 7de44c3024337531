r"""The spatial-induction task (the oracle): neighbourhoods on the torus, the cellular automaton's
rules and sampler, the row-major reading of a trajectory, and what the Bayes predictor needs
(configuration ids, the Dirichlet posterior predictive and which cells have a configuration seen
before). The definitions are in the package docstring, :mod:`constructions.spatial_induction`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from constructions import _validate as check
from constructions._roles import oracle

# --- neighbourhoods and the task -----------------------------------------------------------------

def neighbourhood(dim: int, kind: str = "moore", radius: int = 1) -> tuple[tuple[int, ...], ...]:
    """Offsets :math:`\\nu \\subset \\mathbb{Z}^D`: ``"moore"`` (the cube of side 2r+1) or
    ``"von-neumann"`` (the l1 ball of radius r); in one dimension both are {-r..r}."""
    dim = check.positive_int("dim", dim)
    if dim > 2:
        raise ValueError(f"dim must be 1 or 2, got {dim}")
    radius = check.positive_int("radius", radius)
    if kind not in ("moore", "von-neumann"):
        raise ValueError(f"kind must be 'moore' or 'von-neumann', got {kind!r}")
    cube = itertools.product(range(-radius, radius + 1), repeat=dim)
    return tuple(d for d in cube if kind == "moore" or sum(map(abs, d)) <= radius)


def _offsets(name: str, offsets, dim: int, side: int) -> tuple[tuple[int, ...], ...]:
    """Validate a neighbourhood: non-empty tuples of ints of length ``dim``, distinct mod L."""
    if not isinstance(offsets, (tuple, list)) or not offsets:
        raise TypeError(f"{name} must be a non-empty tuple of offsets")
    result = []
    for delta in offsets:
        if (not isinstance(delta, (tuple, list)) or len(delta) != dim
                or not all(isinstance(c, int) and not isinstance(c, bool) for c in delta)):
            raise ValueError(f"{name} entries must be tuples of {dim} ints, got {delta!r}")
        result.append(tuple(delta))
    if len({tuple(c % side for c in d) for d in result}) != len(result):
        raise ValueError(f"{name} offsets must be distinct modulo side={side}, got {result}")
    return tuple(result)


def _coords(index: np.ndarray, dim: int, side: int) -> np.ndarray:
    """Row-major cell index -> (..., D) coordinates (the last axis varies fastest)."""
    return np.stack([(index // side ** (dim - 1 - a)) % side for a in range(dim)], axis=-1)


def _index(coords: np.ndarray, side: int) -> np.ndarray:
    dim = coords.shape[-1]
    return sum(coords[..., a] * side ** (dim - 1 - a) for a in range(dim))


@dataclass(frozen=True)
@oracle  # the task: rules, sampler and the Bayes predictor's data
class CellularAutomaton:
    """A CA task: ``dim``, grid ``side`` L, ``n_states`` k, neighbourhood ``offsets``."""

    dim: int
    side: int
    n_states: int
    offsets: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        check.positive_int("dim", self.dim)
        if self.dim > 2:
            raise ValueError(f"dim must be 1 or 2, got {self.dim}")
        check.positive_int("side", self.side, minimum=3)
        check.positive_int("n_states", self.n_states, minimum=2)
        object.__setattr__(self, "offsets", _offsets("offsets", self.offsets, self.dim,
                                                     self.side))

    @property
    def volume(self) -> int:
        return self.side ** self.dim

    @property
    def n_configs(self) -> int:
        return self.n_states ** len(self.offsets)

    def configurations(self, slab: np.ndarray) -> np.ndarray:
        """Config id of every cell of the next slab: (..., V) states -> (..., V) ids in
        [0, k^|nu|), the neighbours' states read as base-k digits in the order of ``offsets``."""
        cells = _coords(np.arange(self.volume), self.dim, self.side)  # (V, D)
        ids = np.zeros(slab.shape, dtype=np.int64)
        for delta in self.offsets:
            source = _index((cells + np.array(delta)) % self.side, self.side)  # (V,)
            ids = ids * self.n_states + slab[..., source]
        return ids

    def sample_rules(self, batch: int, generator: np.random.Generator, *,
                     alpha: np.ndarray | None = None, deterministic: bool = False) -> np.ndarray:
        """(batch, k^|nu|, k) rule tables: Dirichlet(alpha) rows, or one-hot rows."""
        configs, k = self.n_configs, self.n_states
        if deterministic:
            return np.eye(k)[generator.integers(0, k, size=(batch, configs))]
        alpha = dirichlet_parameter(alpha, k)
        return generator.dirichlet(alpha, size=(batch, configs))

    def sample(self, rules: np.ndarray, horizon: int,
               generator: np.random.Generator) -> np.ndarray:
        """(batch, T, V) trajectories under ``rules`` (batch, k^|nu|, k); slab 0 uniform."""
        horizon = check.positive_int("horizon", horizon)
        rules = np.asarray(rules, dtype=float)
        if rules.ndim != 3 or rules.shape[1:] != (self.n_configs, self.n_states):
            raise ValueError(f"rules must have shape (batch, {self.n_configs}, "
                             f"{self.n_states}), got {rules.shape}")
        if (rules < 0).any() or not np.allclose(rules.sum(-1), 1.0, rtol=0, atol=1e-9):
            raise ValueError("rules rows must be probability vectors (>= 0, summing to 1)")
        batch = rules.shape[0]
        grid = np.empty((batch, horizon, self.volume), dtype=np.int64)
        grid[:, 0] = generator.integers(0, self.n_states, size=(batch, self.volume))
        rows = np.arange(batch)[:, None]
        for t in range(1, horizon):
            probs = rules[rows, self.configurations(grid[:, t - 1])]  # (batch, V, k)
            u = generator.random((batch, self.volume, 1))
            grid[:, t] = np.minimum((probs.cumsum(-1) < u).sum(-1), self.n_states - 1)
        return grid

    def flatten(self, grid: np.ndarray) -> torch.Tensor:
        """(batch, T, V) -> (batch, 1 + TV) long tokens: the BOS (id k), then row-major cells."""
        grid = np.asarray(grid)
        if grid.ndim != 3 or grid.shape[2] != self.volume:
            raise ValueError(f"grid must have shape (batch, T, {self.volume}), got {grid.shape}")
        if grid.size and (grid.min() < 0 or grid.max() >= self.n_states):
            raise ValueError(f"grid states must lie in [0, {self.n_states})")
        flat = grid.reshape(grid.shape[0], -1)
        bos = np.full((grid.shape[0], 1), self.n_states)
        return torch.from_numpy(np.concatenate([bos, flat], axis=1).astype(np.int64))

    def neighbours(self, cells: np.ndarray) -> np.ndarray:
        """(..., |nu|) flat index of each neighbour (slab t-1, cell i + delta) of each flat cell
        index in ``cells``; cells of slab 0 get negative indices (no neighbour exists)."""
        cells = np.asarray(cells)
        slab, cell = np.divmod(cells, self.volume)
        coords = _coords(cell, self.dim, self.side)  # (..., D)
        out = [(slab - 1) * self.volume + _index((coords + np.array(d)) % self.side, self.side)
               for d in self.offsets]
        return np.stack(out, axis=-1)

    def config_ids(self, grid: np.ndarray) -> np.ndarray:
        """(batch, T, V) config id of every cell; -1 in slab 0 (no configuration)."""
        ids = np.full(grid.shape, -1, dtype=np.int64)
        ids[:, 1:] = self.configurations(grid[:, :-1])
        return ids

    def bayes(self, grid: np.ndarray, alpha: np.ndarray | None = None) -> np.ndarray:
        """Dirichlet posterior predictive of every cell, (batch, T, V, k); slab 0 uniform."""
        alpha = dirichlet_parameter(alpha, self.n_states)
        batch, horizon, volume = grid.shape
        ids = self.config_ids(grid).reshape(batch, -1)
        values = grid.reshape(batch, -1)
        out = np.full((batch, horizon * volume, self.n_states), 1.0 / self.n_states)
        for b in range(batch):
            counts = np.zeros((self.n_configs, self.n_states))
            for n in range(volume, horizon * volume):
                c = ids[b, n]
                out[b, n] = (counts[c] + alpha) / (counts[c].sum() + alpha.sum())
                counts[c, values[b, n]] += 1
        return out.reshape(batch, horizon, volume, self.n_states)

    def seen(self, grid: np.ndarray) -> np.ndarray:
        """(batch, T, V) bool: the cell's configuration occurred at an earlier cell of slab >= 1."""
        batch = grid.shape[0]
        ids = self.config_ids(grid).reshape(batch, -1)
        out = np.zeros(ids.shape, dtype=bool)
        for b in range(batch):
            known: set[int] = set()
            for n in range(self.volume, ids.shape[1]):
                out[b, n] = ids[b, n] in known
                known.add(int(ids[b, n]))
        return out.reshape(grid.shape)


def dirichlet_parameter(alpha, n_states: int) -> np.ndarray:
    """``alpha`` as a positive (k,) array; a scalar means a symmetric prior; None means 1."""
    n_states = check.positive_int("n_states", n_states, minimum=2)
    if alpha is None:
        return np.ones(n_states)
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool):
        alpha = np.full(n_states, float(alpha))
    alpha = np.asarray(alpha, dtype=float)
    if alpha.shape != (n_states,) or not np.isfinite(alpha).all() or (alpha <= 0).any():
        raise ValueError(f"alpha must be a positive scalar or {n_states} positive values")
    return alpha
