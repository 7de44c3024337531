r"""Universal approximation of equivariant functions: FFN_2 o SA o FFN_1 with a quantiser.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from constructions import _validate
from constructions.boltzmann.memorization import MemorizingTransformer, memorizing_transformer
from constructions.layers import MLP, resolve
from constructions.residual_layout import (
    Interface,
    ResidualLayout,
    context_length,
    mlp_block,
    placed,
)

# --- universal approximation: FFN_2 o SA o FFN_1 -------------------------------------------------


def quantizer(grid: int, d: int, *, ramp: float | None = None, dtype: torch.dtype = torch.float64,
              device=None) -> MLP:
    r"""FFN\ :sub:`1`: a ReLU staircase sending each coordinate of :math:`x\in[0,1]^d` to the
    centre :math:`(\lfloor gx\rfloor + \tfrac12)/g` of its grid cell.

    Per coordinate and interior boundary :math:`j/g` two units form
    :math:`\mathrm{clamp}((x - j/g)/\eta + \tfrac12, 0, 1)`; the output is
    :math:`\tfrac1{2g} + \tfrac1g\sum_j\mathrm{clamp}_j`. It is exact except within
    :math:`\eta/2` of a boundary, a set of measure at most :math:`(g - 1)\eta` per coordinate;
    a continuous network cannot do better, which is why the approximation theorem is stated in
    :math:`L^p` and not in the sup norm. ``ramp`` (:math:`\eta`) defaults to :math:`1/(16g^2)`,
    so that the inexact set has measure below :math:`1/(16g)` per coordinate.
    """
    grid = _validate.positive_int("grid", grid)
    d = _validate.positive_int("d", d)
    eta = 1.0 / (16 * grid**2) if ramp is None else _validate.positive_float("ramp", ramp)
    if eta >= 1.0 / grid:
        raise ValueError(f"ramp must be < 1/grid = {1 / grid:.4g} so that ramps do not overlap, "
                         f"got {eta}")
    boundaries = torch.arange(1, grid, dtype=torch.float64) / grid
    units = 2 * len(boundaries)
    hidden = max(units * d, 1)
    W_in = torch.zeros(d, hidden, dtype=torch.float64)
    b_in = torch.zeros(hidden, dtype=torch.float64)
    W_out = torch.zeros(hidden, d, dtype=torch.float64)
    for c in range(d):
        block = slice(c * units, (c + 1) * units)
        W_in[c, block] = 1.0 / eta
        b_in[block] = torch.stack([-boundaries / eta + 0.5,
                                   -boundaries / eta - 0.5], dim=1).reshape(-1)
        W_out[block, c] = torch.tensor([1.0 / grid, -1.0 / grid],
                                       dtype=torch.float64).repeat(len(boundaries))
    b_out = torch.full((d,), 0.5 / grid, dtype=torch.float64)
    return MLP(*(t.to(**resolve(dtype, device)) for t in (W_in, b_in, W_out, b_out)))


class EquivariantApproximator(nn.Module):
    r"""FFN\ :sub:`2` :math:`\circ` SA :math:`\circ` FFN\ :sub:`1`: :func:`quantizer`, then a
    :class:`MemorizingTransformer` fitted to the target on every multiset of grid-cell centres.

    ``forward(x)`` maps ``(B, n, d)`` with entries in :math:`[0, 1]` to ``(B, n)``.
    ``inexact(x)`` marks the inputs with a coordinate within :math:`\eta/2` of an interior
    cell boundary, where FFN\ :sub:`1` ramps and no error bound beyond the label range holds.
    """

    def __init__(self, quantize: MLP, memorizer: MemorizingTransformer, grid: int,
                 ramp: float) -> None:
        super().__init__()
        self.quantize = quantize
        self.memorizer = memorizer
        self.grid = grid
        self.ramp = ramp

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        """The TransformerLens layout of ``FFN_2(SA(FFN_1(x)))``: block 1 has no attention
        and the quantiser FFN writing ``FFN_1(x)`` into fresh coordinates; block 2 is the
        memorizer on those coordinates."""
        d = self.memorizer.d_model
        D = 2 * d + 1
        quantize = mlp_block(name, self.quantize, D, slice(0, d), slice(d, 2 * d))
        block, out, _ = self.memorizer.residual_blocks(name, offset=d, width=D)
        W = self.memorizer.w
        W_U = placed(torch.ones(1, 1, dtype=W.dtype, device=W.device), (D, 1), out)
        W_pos = W.new_zeros(context_length(name, n_ctx, self.memorizer.seq_len), D)
        return ResidualLayout(name, D, W.new_zeros(1, D), W_pos, W_U, ((None, quantize), block),
                              Interface("residual", width=D, scalar=True, dtype=W.dtype))

    def inexact(self, x: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: some coordinate lies within ``ramp / 2`` of an interior boundary."""
        scaled = x * self.grid
        nearest = scaled.round().clamp(1, self.grid - 1)
        near = (scaled - nearest).abs() <= self.grid * self.ramp / 2
        return near.flatten(1).any(dim=1) if self.grid > 1 else torch.zeros(
            len(x), dtype=torch.bool, device=x.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _validate.real_tensor("x", x, ndim=3).to(self.memorizer.w)
        return self.memorizer(self.quantize(x))


def _grid_multisets(grid: int, d: int, seq_len: int) -> torch.Tensor:
    """Every multiset of ``seq_len`` grid-cell centres in ``[0, 1]^d``, one sorted sequence each."""
    centres = (torch.arange(grid, dtype=torch.float64) + 0.5) / grid
    tokens = torch.cartesian_prod(*([centres] * d)).reshape(-1, d)
    index = torch.combinations(torch.arange(len(tokens)), seq_len, with_replacement=True)
    return tokens[index.reshape(-1, seq_len)]


def equivariant_approximator(f: Callable[[torch.Tensor], torch.Tensor], seq_len: int, d: int,
                             grid: int, *, ramp: float | None = None,
                             max_sequences: int = 20_000, dtype: torch.dtype = torch.float64,
                             device=None) -> EquivariantApproximator:
    r"""Approximate a permutation-equivariant :math:`f:[0,1]^{n\times d}\to\mathbb R^n` in
    :math:`L^p` by FFN\ :sub:`2` :math:`\circ` SA :math:`\circ` FFN\ :sub:`1` (Kajitsuka & Sato,
    Theorem 4 as summarised in the abstract).

    ``f`` maps ``(B, n, d)`` to ``(B, n)``. FFN\ :sub:`1` quantises to ``grid`` cells per
    coordinate; the attention layer and FFN\ :sub:`2` memorize :math:`f` at the cell centres of
    every multiset (duplicates allowed: cells repeat). Off the ramp set the error is at most
    :math:`\omega_f(1/(2g))`, the modulus of continuity in the sup norm over entries; on it the
    output stays within the range of the memorized values.
    """
    if not callable(f):
        raise TypeError(f"f must be callable, got {type(f).__name__}")
    seq_len = _validate.positive_int("seq_len", seq_len)
    d = _validate.positive_int("d", d)
    grid = _validate.positive_int("grid", grid)
    count = math.comb(grid**d + seq_len - 1, seq_len)
    if count > _validate.positive_int("max_sequences", max_sequences):
        raise ValueError(f"grid={grid} gives {count} multisets of grid cells, more than "
                         f"max_sequences={max_sequences}")
    quantize = quantizer(grid, d, ramp=ramp)
    eta = 1.0 / (16 * grid**2) if ramp is None else float(ramp)
    sequences = _grid_multisets(grid, d, seq_len)
    values = f(sequences)
    if not isinstance(values, torch.Tensor) or tuple(values.shape) != (len(sequences), seq_len):
        raise ValueError(f"f must map a (B, {seq_len}, {d}) tensor to shape (B, {seq_len}), got "
                         f"{getattr(values, 'shape', type(values).__name__)}")
    memorizer = memorizing_transformer(sequences, values.detach().to(torch.float64),
                                       allow_duplicates=True)
    kw = resolve(dtype, device)
    return EquivariantApproximator(quantize.to(**kw), memorizer.to(**kw), grid, eta)


