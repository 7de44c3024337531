r"""The explicit two-layer gather-and-match circuit for spatial induction
(:class:`SpatialInductionCircuit`), its positional features, gather heads and temperatures
(:func:`gather_temperatures`): the derivation is in the package docstring,
:mod:`constructions.spatial_induction`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import nn

from constructions import _validate as check
from constructions._kernels import hook_with_axes
from constructions.layers import HookPoints
from constructions.residual_layout import (
    AttentionBlock,
    Interface,
    ResidualLayout,
    fixed_context_length,
)
from constructions.spatial_induction.task import CellularAutomaton, dirichlet_parameter

TIME_PERIOD = 3  # the time circle: a slab, its predecessor and its successor are distinguishable
REQUIRED_LOSS_SLACK = 29  # M_0 = ln P + 29: every wrong key loses at least this much
MARGIN_EXTRA = 1  # the temperatures use M = M_0 + 1, so each condition holds with slack 1


# --- the circuit -------------------------------------------------------------------------------

@dataclass(frozen=True)
class GatherTemperatures:
    """Layer-1 temperatures for ``positions`` P = TV: recency λ, time β_t, column β_s."""

    recency: float
    time: float
    space: float
    required_loss: float  # M_0: the loss every wrong key is guaranteed

    @property
    def guaranteed_mass(self) -> float:
        """Lower bound :math:`1/(1 + P e^{-M_0})` on the mass on the true neighbour, from
        at most :math:`P` competitors each losing :math:`\\ge M_0 = \\ln P + 29`."""
        return 1.0 / (1.0 + math.exp(-REQUIRED_LOSS_SLACK))


def gather_temperatures(dim: int, side: int, positions: int, *, lib=math
                        ) -> GatherTemperatures:
    """The derived temperatures for a D-dimensional grid of side L and P positions."""
    check.positive_int("dim", dim)
    check.positive_int("side", side, minimum=3)
    check.positive_int("positions", positions)
    check.math_library("lib", lib, ("log", "cos", "pi"))
    return temperatures_for(side ** dim, side, positions, lib=lib)


def temperatures_for(volume, side, positions, *, lib=math) -> GatherTemperatures:
    """The temperatures of the module docstring as expressions in V, L, P; ``lib`` may be
    ``math``, ``sympy`` or ``mpmath``, so the margin checks can evaluate them symbolically."""
    check.math_library("lib", lib, ("log", "cos", "pi"))
    check.count("volume", volume, minimum=3)
    check.count("side", side, minimum=3)
    check.count("positions", positions)
    required = lib.log(positions) + REQUIRED_LOSS_SLACK
    margin = required + MARGIN_EXTRA
    recency = margin / (3 * volume)
    time = (2 * recency * volume + margin) / (1 - lib.cos(2 * lib.pi / TIME_PERIOD))  # 1.5
    space = (2 * recency * volume + margin) / (1 - lib.cos(2 * lib.pi / side))
    return GatherTemperatures(recency=recency, time=time, space=space, required_loss=required)


def positional_dim(dim: int) -> int:
    """Number of gather features, constant excluded: own and next cell, one circle per axis
    plus the time circle each, and the scalar position: :math:`2(2D + 2) + 1 = 4D + 5`."""
    dim = check.positive_int("dim", dim)
    return 2 * (2 * dim + 2) + 1


def positional_features(task: CellularAutomaton, n_positions: int, *,
                        dtype=torch.float64, device=None) -> torch.Tensor:
    """(n_positions + 1, 4D + 6) features of positions p = -1 .. n_positions - 1 (the BOS is the
    cell before cell 0): [own circles | own time | next circles | next time | p | 1]."""
    check.instance("task", task, CellularAutomaton)
    n_positions = check.positive_int("n_positions", n_positions)
    check.float_dtype("dtype", dtype)
    p = torch.arange(-1, n_positions, dtype=torch.float64)

    def circles(q: torch.Tensor) -> list[torch.Tensor]:
        slab, cell = torch.div(q, task.volume, rounding_mode="floor"), q % task.volume
        out = []
        for a in range(task.dim):
            coord = torch.div(cell, task.side ** (task.dim - 1 - a), rounding_mode="floor")
            angle = 2 * math.pi * (coord % task.side) / task.side
            out += [torch.cos(angle), torch.sin(angle)]
        angle = 2 * math.pi * (slab % TIME_PERIOD) / TIME_PERIOD
        return [*out, torch.cos(angle), torch.sin(angle)]

    columns = circles(p) + circles(p + 1) + [p, torch.ones_like(p)]
    return torch.stack(columns, dim=-1).to(dtype=dtype, device=device)


def _rotation(angle: float) -> torch.Tensor:
    """R with (cos u, sin u) R (cos v, sin v)^T = cos(u - v - angle)."""
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]], dtype=torch.float64)


def gather_qk(task: CellularAutomaton, delta: tuple[int, ...], side: str,
              temps: GatherTemperatures) -> torch.Tensor:
    """The (F, F) bilinear form of one layer-1 head: score(p, q) = f(p) W f(q)^T.

    ``side="next"`` targets the neighbour ``delta`` of cell p+1, ``"own"`` that of cell p.
    """
    check.instance("task", task, CellularAutomaton)
    if (not isinstance(delta, tuple) or len(delta) != task.dim
            or any(isinstance(x, bool) or not isinstance(x, int) for x in delta)):
        raise TypeError(f"delta must be a tuple of {task.dim} ints, got {delta!r}")
    check.choice("side", side, ("next", "own"))
    check.instance("temps", temps, GatherTemperatures)
    width = positional_dim(task.dim) + 1
    W = torch.zeros(width, width, dtype=torch.float64)
    block = 2 * task.dim + 2  # own: [0, block), next: [block, 2 block), p, 1
    query = block if side == "next" else 0
    for a in range(task.dim):
        # key circle u = x_a(q), query circle v = x_a(target): cos(u - v - delta_a)
        rot = temps.space * _rotation(2 * math.pi * delta[a] / task.side)
        W[query + 2 * a: query + 2 * a + 2, 2 * a: 2 * a + 2] = rot.T
    t = 2 * task.dim
    # time: cos(t(q) - t(target) + 1): angle -2pi/3
    W[query + t: query + t + 2, t: t + 2] = temps.time * _rotation(-2 * math.pi / TIME_PERIOD).T
    W[width - 1, width - 2] = temps.recency  # query constant x key position p
    return W


class SpatialInductionCircuit(nn.Module):
    """The two-layer gather-and-match circuit (module docstring); ``forward`` maps (B, n)
    tokens (BOS first, n <= 1 + max_positions) to (B, n, k) predictive probabilities: row i
    has seen the BOS and cells 0..i-1 and predicts cell i.

    Hook points, TransformerLens's names and layout, one block per layer (there is no residual
    stream to hook: layer 2 reads layer 1's output, and the output is layer 2's):

    * ``blocks.0.attn`` (gather, ``2|nu|`` heads): ``hook_attn_scores`` and ``hook_pattern``
      ``(1, 2|nu|, n, n)``, scores before the causal mask; their batch axis has size 1, since
      the gather reads positions only (a patch may return ``(B, 2|nu|, n, n)``, one pattern
      per sequence); ``hook_v`` the one-hot tokens ``(B, n, 1, k)``, shared by every head;
      ``hook_z`` the gathered configurations ``(B, n, 2|nu|, k)``. Its queries and keys are
      the fixed positional features, contracted with ``W_gather`` in one step, so there is no
      ``hook_q``/``hook_k``.
    * ``blocks.1.attn`` (match, one head): ``hook_q`` the next configuration and ``hook_k`` the
      current one, ``(B, n, 1, |nu|, k)`` (``d_head`` as the (offset, state) grid),
      ``hook_attn_scores`` (the key flags included, before the mask) and ``hook_pattern``
      ``(B, 1, n, n)``, ``hook_v`` ``(B, n, 1, k)`` and ``hook_z`` the probabilities
      ``(B, n, 1, k)``.
    """

    def __init__(self, task: CellularAutomaton, max_positions: int, *,
                 alpha=None, match_beta: float = 40.0,
                 temperatures: GatherTemperatures | None = None,
                 dtype=torch.float64, device=None) -> None:
        super().__init__()
        self.task = task
        self.max_positions = check.positive_int("max_positions", max_positions)
        self.match_beta = check.positive_float("match_beta", match_beta)
        check.float_dtype("dtype", dtype)
        self.alpha = dirichlet_parameter(alpha, task.n_states)
        self.temperatures = temperatures or gather_temperatures(task.dim, task.side,
                                                                max_positions)
        feats = positional_features(task, max_positions, dtype=torch.float64)
        self.register_buffer("features", feats.to(dtype=dtype, device=device))
        heads = [gather_qk(task, d, s, self.temperatures) for s in ("next", "own")
                 for d in task.offsets]
        self.register_buffer("W_gather", torch.stack(heads).to(dtype=dtype, device=device))
        warm = (torch.arange(-1, max_positions) >= task.volume).to(torch.float64)
        self.register_buffer("warm", warm.to(dtype=dtype, device=device))
        prior = torch.from_numpy(self.alpha / self.alpha.sum())
        self.register_buffer("bos_value", prior.to(dtype=dtype, device=device))
        self.blocks = nn.ModuleList(
            [HookPoints(attn=HookPoints("hook_attn_scores", "hook_pattern", "hook_v", "hook_z")),
             HookPoints(attn=HookPoints("hook_q", "hook_k", "hook_attn_scores", "hook_pattern",
                                        "hook_v", "hook_z"))])

    def _check(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = check.token_tensor("tokens", tokens, vocab_size=self.task.n_states + 1,
                                    max_len=self.max_positions + 1, ndim=2)
        if tokens.shape[1] == 0 or (tokens[:, 0] != self.task.n_states).any():
            raise ValueError(f"tokens must start with the BOS token {self.task.n_states}")
        if (tokens[:, 1:] == self.task.n_states).any():
            raise ValueError("tokens must hold the BOS token only at position 0")
        return tokens.to(self.features.device)

    def attention(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """Attention patterns: ``"gather"`` (B, 2|nu|, n, n), next-cell heads first in the order
        of ``task.offsets``, then own-cell heads; ``"match"`` (B, n, n); plus the blocks
        ``"next_config"`` and ``"current_config"`` (B, n, |nu|, k) and the output ``"probs"``."""
        tokens = self._check(tokens)
        B, n = tokens.shape
        k, nu = self.task.n_states, len(self.task.offsets)
        gath, mat = self.blocks[0].attn, self.blocks[1].attn
        f = self.features[:n]                                           # (n, F)
        # the gather reads positions only: its hooks see a batch axis of size 1
        scores = hook_with_axes(gath.hook_attn_scores,
                            torch.einsum("pf,hfg,qg->hpq", f, self.W_gather, f), 0)  # (2nu, n, n)
        causal = torch.ones(n, n, dtype=torch.bool, device=f.device).tril()
        gather = hook_with_axes(gath.hook_pattern,
                            scores.masked_fill(~causal, -math.inf).softmax(-1), 0)  # (2nu, n, n)
        onehot = nn.functional.one_hot(tokens, k + 1)[..., :k].to(f.dtype)  # BOS value 0
        shared = hook_with_axes(gath.hook_v, onehot, 2)                     # (B, n, k)
        # a patch with one pattern per sequence comes back (B, 2nu, n, n)
        spec = "hpq,bqk->bphk" if gather.ndim == 3 else "bhpq,bqk->bphk"
        configs = gath.hook_z(torch.einsum(spec, gather, shared))       # (B, n, 2nu, k)
        nxt = hook_with_axes(mat.hook_q, configs[:, :, :nu], 2)             # (B, n, nu, k)
        cur = hook_with_axes(mat.hook_k, configs[:, :, nu:], 2)
        beta = self.match_beta
        sink = beta * nu + math.log(float(self.alpha.sum())) + beta
        cold = (1 - self.warm[:n]).expand(B, n)                          # key j < V (or BOS)
        key_flags = torch.stack([cold, (tokens == k).to(f.dtype)], -1)  # (B, n, 2)
        match = beta * torch.einsum("bphk,bqhk->bpq", nxt, cur)          # (B, n, n)
        weights = torch.tensor([-beta, sink], dtype=f.dtype, device=f.device)
        match = hook_with_axes(mat.hook_attn_scores,
                           match + (key_flags @ weights)[:, None, :], 1)  # per key j
        match = hook_with_axes(mat.hook_pattern,
                           match.masked_fill(~causal, -math.inf).softmax(-1), 1)  # (B, n, n)
        values = onehot.clone()
        values[:, 0] = self.bos_value                                   # BOS value alpha / A
        values = hook_with_axes(mat.hook_v, values, 2)                      # (B, n, k)
        probs = hook_with_axes(mat.hook_z, match @ values, 2)               # (B, n, k)
        return {"gather": gather.expand(B, -1, -1, -1), "match": match, "next_config": nxt,
                "current_config": cur, "probs": probs}

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.attention(tokens)["probs"]

    def export_blocks(self) -> dict[str, slice]:
        """The residual coordinates of the TransformerLens export, block name -> slice:
        ``onehot`` (k; the BOS is 0: layer 1's value), ``value`` (k; the BOS is alpha / A:
        layer 2's value), ``bos`` (1), ``features`` (4D + 6), ``cold`` (1: key j < V),
        ``next``/``current`` (|nu| k each: the gathered configurations), ``out`` (k)."""
        k, nu = self.task.n_states, len(self.task.offsets)
        widths = {"onehot": k, "value": k, "bos": 1, "features": self.features.shape[1],
                  "cold": 1, "next": nu * k, "current": nu * k, "out": k}
        out, start = {}, 0
        for name, width in widths.items():
            out[name] = slice(start, start + width)
            start += width
        return out

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        r"""The TransformerLens layout (:mod:`constructions.residual_layout`), blocks of
        :meth:`export_blocks`; tokens are fed with their BOS (``bos=None``), and the export's
        "logits" are the circuit's probabilities (there is no softmax on top, as here).

        Layer 1: head h has :math:`W_Q = W_{gather,h}` and :math:`W_K = I` on the features, so
        :math:`q_p \cdot k_q = f_p^\top W_h f_q`; it copies the one-hot token into slot h of
        ``next`` (h < |nu|) or ``current``. Layer 2: :math:`q_p = [\beta\,\mathrm{next}_p;
        -\beta; \mathrm{sink}]` (the last two from the constant feature), :math:`k_j =
        [\mathrm{current}_j; \mathrm{cold}_j; \mathrm{bos}_j]`, value ``value``, written to
        ``out``. Both layers' heads are :math:`4^m` wide, so the export's folding of
        :math:`\sqrt{d_{head}}` into :math:`W_Q` and TransformerLens's division by it are exact."""
        n = self.max_positions + 1
        fixed_context_length(name, n_ctx, n)
        b = self.export_blocks()
        k, nu = self.task.n_states, len(self.task.offsets)
        F, D = self.features.shape[1], b["out"].stop
        dtype, device = self.features.dtype, self.features.device
        width = 1
        while width < max(F, nu * k + 2, k):
            width *= 4
        zeros = functools.partial(torch.zeros, dtype=dtype, device=device)
        eye = functools.partial(torch.eye, dtype=dtype, device=device)
        H = 2 * nu
        W_Q, W_K, W_V, W_O = (zeros(H, D, width), zeros(H, D, width), zeros(H, D, width),
                              zeros(H, width, D))
        for h in range(H):
            W_Q[h, b["features"], :F] = self.W_gather[h]
            W_K[h, b["features"], :F] = eye(F)
            W_V[h, b["onehot"], :k] = eye(k)
            slot = b["next"] if h < nu else b["current"]
            W_O[h, :k, slot.start + (h % nu) * k: slot.start + (h % nu + 1) * k] = eye(k)
        gather = AttentionBlock(W_Q, W_K, W_V, W_O, scale=1.0, causal=True)
        beta = self.match_beta
        sink = beta * nu + math.log(float(self.alpha.sum())) + beta
        Q2, K2, V2, O2 = zeros(1, D, width), zeros(1, D, width), zeros(1, D, width), zeros(
            1, width, D)
        Q2[0, b["next"], :nu * k] = beta * eye(nu * k)
        Q2[0, b["features"].stop - 1, nu * k] = -beta  # the constant feature
        Q2[0, b["features"].stop - 1, nu * k + 1] = sink
        K2[0, b["current"], :nu * k] = eye(nu * k)
        K2[0, b["cold"], nu * k] = 1.0
        K2[0, b["bos"], nu * k + 1] = 1.0
        V2[0, b["value"], :k] = eye(k)
        O2[0, :k, b["out"]] = eye(k)
        match = AttentionBlock(Q2, K2, V2, O2, scale=1.0, causal=True)
        W_E = zeros(k + 1, D)
        W_E[:k, b["onehot"]] = eye(k)
        W_E[:k, b["value"]] = eye(k)
        W_E[k, b["value"]] = self.bos_value
        W_E[k, b["bos"]] = 1.0
        W_pos = zeros(n, D)
        W_pos[:, b["features"]] = self.features
        W_pos[:, b["cold"]] = (1 - self.warm)[:, None]
        W_U = zeros(D, k)
        W_U[b["out"]] = eye(k)
        return ResidualLayout(name, D, W_E, W_pos, W_U, ((gather, None), (match, None)),
                              Interface("tokens", vocab_size=k + 1, max_len=n, bos=None,
                                        dtype=dtype))


def spatial_induction_circuit(task: CellularAutomaton, max_positions: int, *,
                              alpha=None, match_beta: float = 40.0,
                              temperatures: GatherTemperatures | None = None,
                              dtype=torch.float64, device=None) -> SpatialInductionCircuit:
    """Builder: the circuit for ``task`` and up to ``max_positions`` cells (T V)."""
    if not isinstance(task, CellularAutomaton):
        raise TypeError(f"task must be a CellularAutomaton, got {type(task).__name__}")
    return SpatialInductionCircuit(task, max_positions, alpha=alpha, match_beta=match_beta,
                                   temperatures=temperatures, dtype=dtype, device=device)
