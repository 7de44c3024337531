r"""In-context deep learning (Wu, Su, Hu, Song, Liu 2025, arXiv:2411.16549), toy case N = 2.

The paper builds a (2N+4)L-layer transformer that runs L gradient-descent steps on an N-layer
ReLU network through in-context learning (abstract [V]; the construction itself was not read).
This module is this project's explicit construction for N = 2,

.. math:: f(x; W_1, w_2) = w_2^\top\mathrm{relu}(W_1 x), \qquad
   \mathcal L = \tfrac1{2n}\textstyle\sum_i (f(x_i) - y_i)^2,
   \qquad \theta \leftarrow \theta - \eta\nabla_\theta\mathcal L,

with :math:`W_1 \in \mathbb R^{H\times d}`, :math:`w_2 \in \mathbb R^H`, no biases.
Tokens: the weight token (index 0) carries :math:`W_1, w_2`; data token i carries
:math:`(x_i, y_i)`. A *layer* is one residual sublayer, a ReLU attention
(:math:`\sum_j \mathrm{relu}(q_i^\top k_j)\,W_{OV}h_j`, no normalisation) or a ReLU MLP; one GD
step takes 2N + 4 = 8 of them (our split; the paper's is unread):

1. attention, forward layer 1: :math:`h_{ir} = \mathrm{relu}(u_{ir})`, :math:`u = W_1x_i`, and
   :math:`t_{ir} = \mathrm{relu}(u_{ir}/\epsilon)` (keys :math:`W_{1,r}` and
   :math:`W_{1,r}/\epsilon` on the weight token, values its indicator);
2. attention, forward layer 2:
   :math:`f_i = \mathrm{relu}(w_2^\top h_i) - \mathrm{relu}(-w_2^\top h_i)`;
3. MLP, loss derivative and gate: :math:`r_i = f_i - y_i`,
   :math:`\bar s_{ir} = \mathrm{relu}(1 - t_{ir})` (1 for an inactive unit, 0 for an active one);
4. attention, backward through layer 2: :math:`g_{ir} = r_iw_{2,r}` (two signed heads);
5. MLP, backward through the ReLU: :math:`\delta_{ir} = \mathrm{relu}(g_{ir} - M\bar s_{ir})
   - \mathrm{relu}(-g_{ir} - M\bar s_{ir})`;
6. attention, aggregation: the weight token collects
   :math:`G_2 = \frac1n\sum_i r_ih_i` and :math:`G_1 = \frac1n\sum_i\delta_ix_i^\top`;
7. MLP, update: :math:`\theta \leftarrow \theta - \eta G`, and the gradient and scratch
   slots are cleared (pairs :math:`\mathrm{relu}(\pm s)` written back with :math:`\mp 1`);
8. MLP, clean-up: the same slots are cleared a second time (so the block can be looped).

Exactness (derived here): :math:`\bar s_{ir}` equals the autograd gate
:math:`\mathbb 1[u_{ir} > 0]` and :math:`\delta_{ir} = g_{ir}\mathbb 1[u_{ir} > 0]` whenever no
pre-activation lies in :math:`(0, \epsilon)` and :math:`|g_{ir}| < M`; then each step is the GD
step up to floating-point rounding. Inside the gap :math:`(0, \epsilon)` the gate is
fractional and the step is not exact: the claim holds on the gap condition only.

Why two clearing passes (issue 14): with exact weights one pass is exact (:math:`1\cdot s` is
exact and :math:`s - s = 0`), and the second adds 0. With weights off by a relative u (an
equivalent construction that floating point cannot tell apart) a pass leaves
:math:`|s|\gamma_4`; a gate :math:`\bar s_{ir} = 1` cleared once left :math:`2^{-52}`, and
where the unit turned active at the next step layer 5 multiplied it by M: an error
:math:`M 2^{-52}` in :math:`\delta_{ir}`, :math:`1.4\cdot 10^{-11}` in :math:`W_1` at
:math:`M = 2^{20}`, growing linearly in M (independent of L: every block clears what the
previous left). The second pass leaves :math:`\gamma_4^2|s|`, which meets M as
:math:`\sim 2^{-84}`.
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_transposed
from constructions.layers import HookPoint

DEPTH = 2


def layer_count(depth: int, steps: int) -> int:
    """The paper's formula (2N + 4)L for N network layers and L GD steps."""
    depth = _validate.positive_int("depth", depth)
    steps = _validate.positive_int("steps", steps)
    return (2 * depth + 4) * steps


# --- the oracle: gradient descent by autograd ----------------------------------------------------

def _check_net(X, W1, w2) -> tuple[torch.Tensor, ...]:
    X = _validate.nonempty("X", _validate.real_tensor("X", X, ndim=2))
    W1 = _validate.nonempty("W1", _validate.real_tensor("W1", W1, ndim=2))
    if W1.shape[1] != X.shape[1]:
        raise ValueError(f"W1 must have shape (H, d = {X.shape[1]}), got {tuple(W1.shape)}")
    w2 = _validate.real_tensor("w2", w2, shape=(W1.shape[0],))
    return X, W1, w2


def _check_problem(X, y, W1, w2) -> tuple[torch.Tensor, ...]:
    X, W1, w2 = _check_net(X, W1, w2)
    y = _validate.real_tensor("y", y, shape=(X.shape[0],))
    return X, y, W1, w2


def two_layer_net(X: torch.Tensor, W1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """:math:`f(x_i) = w_2^\\top\\mathrm{relu}(W_1x_i)` for the rows of X, shape (n,)."""
    X, W1, w2 = _check_net(X, W1, w2)
    return torch.relu(X @ W1.T) @ w2


def gd_step_reference(X, y, W1, w2, eta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One GD step on :math:`\\frac1{2n}\\sum_i(f(x_i) - y_i)^2`, gradients by autograd."""
    X, y, W1, w2 = _check_problem(X, y, W1, w2)
    eta = _validate.positive_float("eta", eta)
    W1 = W1.detach().clone().requires_grad_(True)
    w2 = w2.detach().clone().requires_grad_(True)
    loss = 0.5 * ((two_layer_net(X, W1, w2) - y) ** 2).mean()
    g1, g2 = torch.autograd.grad(loss, (W1, w2))
    return (W1 - eta * g1).detach(), (w2 - eta * g2).detach()


def gd_reference(X, y, W1, w2, eta: float, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The iterates :math:`\\theta_0, \\dots, \\theta_L` of autograd GD."""
    steps = _validate.positive_int("steps", steps)
    out = [(W1, w2)]
    for _ in range(steps):
        out.append(gd_step_reference(X, y, *out[-1], eta))
    return out


# --- the construction ----------------------------------------------------------------------------

class ReluAttention(nn.Module):
    """Heads :math:`\\sum_j\\mathrm{relu}(q_i^\\top k_j)W_{OV}h_j`: W_Q, W_K (heads, dk, D),
    W_OV (heads, D, D), with the residual.

    Hook points (TransformerLens names, positions before heads; tokens ``(T, D)`` carry no
    batch axis): ``hook_resid_pre``/``hook_resid_post`` ``(T, D)``; ``hook_q``, ``hook_k``
    ``(T, heads, dk)``; ``hook_v`` (values in the output space, ``W_OV`` folds ``W_O``)
    ``(T, heads, D)``; ``hook_attn_scores`` (after the ReLU, which is the normalisation here)
    ``(heads, T, T)``; ``hook_result`` the per-head outputs ``(T, heads, D)``."""

    def __init__(self, W_Q: torch.Tensor, W_K: torch.Tensor, W_OV: torch.Tensor):
        super().__init__()
        self.register_buffer("W_Q", W_Q)
        self.register_buffer("W_K", W_K)
        self.register_buffer("W_OV", W_OV)
        self.hook_resid_pre, self.hook_resid_post = HookPoint(), HookPoint()
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_attn_scores, self.hook_result = HookPoint(), HookPoint()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.hook_resid_pre(h)
        # the arithmetic keeps heads first; the hooks see (T, heads, width) views
        q = hook_transposed(self.hook_q, torch.einsum("hkD,tD->htk", self.W_Q, h), 0, 1)
        k = hook_transposed(self.hook_k, torch.einsum("hkD,tD->htk", self.W_K, h), 0, 1)
        v = hook_transposed(self.hook_v, torch.einsum("hED,tD->htE", self.W_OV, h), 0, 1)
        scores = self.hook_attn_scores(torch.relu(q @ k.transpose(1, 2)))  # (heads, T, T)
        result = hook_transposed(self.hook_result, scores @ v, 0, 1)             # (heads, T, D)
        return self.hook_resid_post(h + result.sum(0))                    # (T, D)


class ReluMLP(nn.Module):
    """:math:`h + W_{out}\\mathrm{relu}(W_{in}h + b)`.

    Hook points: ``hook_resid_pre``/``hook_resid_post`` ``(T, D)``, ``hook_pre`` (before the
    ReLU) and ``hook_post`` ``(T, hidden)``, ``hook_mlp_out`` ``(T, D)``."""

    def __init__(self, W_in: torch.Tensor, b_in: torch.Tensor, W_out: torch.Tensor):
        super().__init__()
        self.register_buffer("W_in", W_in)
        self.register_buffer("b_in", b_in)
        self.register_buffer("W_out", W_out)
        self.hook_resid_pre, self.hook_resid_post = HookPoint(), HookPoint()
        self.hook_pre, self.hook_post, self.hook_mlp_out = HookPoint(), HookPoint(), HookPoint()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.hook_resid_pre(h)
        hidden = self.hook_post(torch.relu(self.hook_pre(h @ self.W_in.T + self.b_in)))
        return self.hook_resid_post(h + self.hook_mlp_out(hidden @ self.W_out.T))  # (T, D)


class ICDLTransformer(nn.Module):
    """The looped (2N + 4)L-layer GD transformer for N = 2; see the module docstring."""

    def __init__(self, layers: list[nn.Module], blocks: dict[str, slice], n: int, d: int,
                 hidden: int, steps: int):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.blocks, self.n, self.d, self.hidden, self.steps = blocks, n, d, hidden, steps
        self.d_model = max(s.stop for s in blocks.values())
        self.per_step = len(layers) // steps

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def embed(self, X, y, W1, w2) -> torch.Tensor:
        """Tokens (n + 1, D): the weight token first, then the data tokens."""
        X, y, W1, w2 = _check_problem(X, y, W1, w2)
        if X.shape != (self.n, self.d) or W1.shape[0] != self.hidden:
            raise ValueError(f"X must be ({self.n}, {self.d}) and W1 ({self.hidden}, {self.d}),"
                             f" got {tuple(X.shape)} and {tuple(W1.shape)}")
        b = self.blocks
        H = torch.zeros(self.n + 1, self.d_model, dtype=self.layers[0].W_Q.dtype,
                        device=self.layers[0].W_Q.device)
        H[0, b["is_w"]] = 1.0
        H[0, b["W1"]] = W1.reshape(-1).to(H)
        H[0, b["w2"]] = w2.to(H)
        H[1:, b["x"]] = X.to(H)
        H[1:, b["y"]] = y.to(H)[:, None]
        return H

    def read_weights(self, H: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = self.blocks
        return H[0, b["W1"]].reshape(self.hidden, self.d), H[0, b["w2"]]

    def iterates(self, X, y, W1, w2) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The weights read from the weight token after every (2N + 4)-layer block."""
        H = self.embed(X, y, W1, w2)
        out = [self.read_weights(H)]
        for index, layer in enumerate(self.layers):
            H = layer(H)
            if (index + 1) % self.per_step == 0:
                out.append(self.read_weights(H))
        return out

    def forward(self, X, y, W1, w2) -> tuple[torch.Tensor, torch.Tensor]:
        return self.iterates(X, y, W1, w2)[-1]


def _layout(d: int, H: int) -> dict[str, slice]:
    sizes = {"x": d, "y": 1, "is_w": 1, "W1": H * d, "w2": H, "h": H, "t": H, "f": 1,
             "r": 1, "sbar": H, "g": H, "delta": H, "G1": H * d, "G2": H}
    blocks, start = {}, 0
    for name, size in sizes.items():
        blocks[name] = slice(start, start + size)
        start += size
    return blocks


def _gd_block(n: int, d: int, H: int, eta: float, gap: float, big: float,
              kw: dict) -> list[nn.Module]:
    b = _layout(d, H)
    D = max(s.stop for s in b.values())

    def idx(name: str, i: int = 0) -> int:
        return b[name].start + i

    def zeros(*shape):
        return torch.zeros(*shape, **kw)

    # 1. forward layer 1: h = relu(W1 x), t = relu(W1 x / gap); 2H heads, dk = d
    Q, K, OV = zeros(2 * H, d, D), zeros(2 * H, d, D), zeros(2 * H, D, D)
    for r in range(H):
        for head, (scale, out) in enumerate(((1.0, "h"), (1.0 / gap, "t"))):
            e = 2 * r + head
            Q[e, :, b["x"]] = torch.eye(d, **kw)
            for c in range(d):
                K[e, c, idx("W1", r * d + c)] = scale
            OV[e, idx(out, r), idx("is_w")] = 1.0
    layers: list[nn.Module] = [ReluAttention(Q, K, OV)]

    # 2. forward layer 2: f = relu(w2.h) - relu(-w2.h); 2 heads, dk = H
    Q, K, OV = zeros(2, H, D), zeros(2, H, D), zeros(2, D, D)
    for e, sign in enumerate((1.0, -1.0)):
        Q[e, :, b["h"]] = torch.eye(H, **kw)
        K[e, :, b["w2"]] = sign * torch.eye(H, **kw)
        OV[e, idx("f"), idx("is_w")] = sign
    layers.append(ReluAttention(Q, K, OV))

    # 3. loss derivative r = f - y and the inactive gate sbar = relu(1 - t)
    W_in, b_in, W_out = zeros(2 + H, D), zeros(2 + H), zeros(D, 2 + H)
    W_in[0, idx("f")], W_in[0, idx("y")] = 1.0, -1.0
    W_in[1, idx("f")], W_in[1, idx("y")] = -1.0, 1.0
    W_out[idx("r"), 0], W_out[idx("r"), 1] = 1.0, -1.0
    for r in range(H):
        W_in[2 + r, idx("t", r)], b_in[2 + r] = -1.0, 1.0
        W_out[idx("sbar", r), 2 + r] = 1.0
    layers.append(ReluMLP(W_in, b_in, W_out))

    # 4. backward through layer 2: g_r = r w2_r; 2H heads, dk = 1
    Q, K, OV = zeros(2 * H, 1, D), zeros(2 * H, 1, D), zeros(2 * H, D, D)
    for r in range(H):
        for sign_index, sign in enumerate((1.0, -1.0)):
            e = 2 * r + sign_index
            Q[e, 0, idx("r")] = sign
            K[e, 0, idx("w2", r)] = 1.0
            OV[e, idx("g", r), idx("is_w")] = sign
    layers.append(ReluAttention(Q, K, OV))

    # 5. backward through the ReLU: delta = g * 1[active], exact for |g| < big
    W_in, W_out = zeros(2 * H, D), zeros(D, 2 * H)
    for r in range(H):
        for sign_index, sign in enumerate((1.0, -1.0)):
            unit = 2 * r + sign_index
            W_in[unit, idx("g", r)], W_in[unit, idx("sbar", r)] = sign, -big
            W_out[idx("delta", r), unit] = sign
    layers.append(ReluMLP(W_in, zeros(2 * H), W_out))

    # 6. aggregation at the weight token: G2 = (1/n) sum r h, G1_r = (1/n) sum delta_r x
    heads = 2 + 2 * H
    Q, K, OV = zeros(heads, 1, D), zeros(heads, 1, D), zeros(heads, D, D)
    for sign_index, sign in enumerate((1.0, -1.0)):
        Q[sign_index, 0, idx("is_w")] = 1.0
        K[sign_index, 0, idx("r")] = sign
        OV[sign_index, b["G2"], b["h"]] = sign / n * torch.eye(H, **kw)
        for r in range(H):
            e = 2 + 2 * r + sign_index
            Q[e, 0, idx("is_w")] = 1.0
            K[e, 0, idx("delta", r)] = sign
            OV[e, idx("G1", r * d):idx("G1", r * d) + d, b["x"]] = sign / n * torch.eye(d, **kw)
    layers.append(ReluAttention(Q, K, OV))

    # 7. update theta <- theta - eta G, and the first clearing pass of G and of every scratch
    #    slot (each last read by layer 6 at the latest): pairs relu(s), relu(-s) written back
    #    with -1, +1. With exact weights the pass is exact (1 * s is exact, s - s = 0); with
    #    weights off by a relative u it leaves a residue |s| gamma_4 (two weights, two rounded
    #    products; the final s - s(1 + theta) is exact by Sterbenz), which layer 8 clears again.
    scratch = [i for name in ("h", "t", "f", "r", "sbar", "g", "delta")
               for i in range(b[name].start, b[name].stop)]
    grads = [(g, w) for g, w in zip(range(b["G1"].start, b["G1"].stop),
                                    range(b["W1"].start, b["W1"].stop), strict=True)]
    grads += list(zip(range(b["G2"].start, b["G2"].stop),
                      range(b["w2"].start, b["w2"].stop), strict=True))
    units = len(grads) + len(scratch)
    W_in, W_out = zeros(2 * units, D), zeros(D, 2 * units)
    for unit, (g, w) in enumerate(grads):
        W_in[2 * unit, g], W_in[2 * unit + 1, g] = 1.0, -1.0
        W_out[w, 2 * unit], W_out[w, 2 * unit + 1] = -eta, eta
        W_out[g, 2 * unit], W_out[g, 2 * unit + 1] = -1.0, 1.0
    for unit, i in enumerate(scratch, start=len(grads)):
        W_in[2 * unit, i], W_in[2 * unit + 1, i] = 1.0, -1.0
        W_out[i, 2 * unit], W_out[i, 2 * unit + 1] = -1.0, 1.0
    layers.append(ReluMLP(W_in, zeros(2 * units), W_out))

    # 8. clean-up, the second clearing pass of the same slots (exact weights: all are 0 already
    #    and it adds 0): the residue left for the next block is at most gamma_4^2 |s|, so the
    #    gate's M meets M gamma_4^2 ~ 2^-84 instead of a single pass's M gamma_4 ~ 2^-31
    #    (issue 14: re-rounded weights made the single pass a 4e3-fold false alarm)
    cleared = [g for g, _ in grads] + scratch
    W_in, W_out = zeros(2 * len(cleared), D), zeros(D, 2 * len(cleared))
    for unit, i in enumerate(cleared):
        W_in[2 * unit, i], W_in[2 * unit + 1, i] = 1.0, -1.0
        W_out[i, 2 * unit], W_out[i, 2 * unit + 1] = -1.0, 1.0
    layers.append(ReluMLP(W_in, zeros(2 * len(cleared)), W_out))
    return layers


def icdl_transformer(n: int, d: int, hidden: int, steps: int, eta: float, *,
                     depth: int = DEPTH, gap: float = 2.0**-20, big: float = 2.0**20,
                     dtype: torch.dtype = torch.float64,
                     device: str | torch.device = "cpu") -> ICDLTransformer:
    r"""The explicit (2N + 4)L-layer transformer for N = ``depth`` = 2, L = ``steps``.

    ``gap`` is :math:`\epsilon` (a power of two, so :math:`u/\epsilon` is exact) and ``big``
    is M: the step equals the GD step when no pre-activation lies in
    :math:`(0, \epsilon)` and every :math:`|r_iw_{2,r}| < M`.
    """
    n = _validate.positive_int("n", n)
    d = _validate.positive_int("d", d)
    hidden = _validate.positive_int("hidden", hidden)
    steps = _validate.positive_int("steps", steps)
    depth = _validate.positive_int("depth", depth)
    if depth != DEPTH:
        raise ValueError(f"depth must be {DEPTH}: only the N = 2 construction is built, "
                         f"got {depth}")
    eta = _validate.positive_float("eta", eta)
    gap = _validate.positive_float("gap", gap)
    big = _validate.positive_float("big", big)
    dtype = _validate.float_dtype("dtype", dtype)
    kw = {"dtype": dtype, "device": _validate.device("device", device)}
    layers = [layer for _ in range(steps)
              for layer in _gd_block(n, d, hidden, eta, gap, big, kw)]
    return ICDLTransformer(layers, _layout(d, hidden), n, d, hidden, steps)
