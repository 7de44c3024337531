r"""CoT2: continuous chain of thought on the minimum non-negative sum (MNNS) task.

Gozeten, Ildiz, Zhang, Harutyunyan, Rawat, Oymak (2025), "Continuous Chain of Thought Enables
Parallel Exploration and Reasoning", arXiv:2505.23648. The task, the CSFT targets and the loss
follow the authors' code (alperengozeten/CoT2: ``data/generate_data.py``,
``train/continuous_train.py``), re-implemented here; the one-layer construction is this
project's (the paper's theorem was not readable).

Task (MNNS). Digits :math:`a_1,\dots,a_m \in \{0,\dots,9\}`; the label is the smallest
non-negative value of :math:`\pm a_1 \pm\dots\pm a_m` over the :math:`2^m` sign patterns. Partial
sums live in :math:`[-S, S]`, :math:`S = 9m`; a distribution over them is a vector of length
:math:`v = 2S + 1` indexed by :math:`s + S`.

CSFT targets (the code's ``FourDigitsSoftDataset``):

* ``uniform``: at step t mass :math:`2^{-t}` on the partial sum of each of the :math:`2^t` sign
  prefixes, duplicates accumulating. Equivalently
  :math:`\alpha^*_{t+1} = M_{a_{t+1}}\alpha^*_t`, :math:`M_a = (S_{+a} + S_{-a})/2`.
* ``beam``: the K sign patterns with non-negative final sum and the smallest final sums (ties by
  the sign tuple in Python's order, so -1 before +1), per-step visit counts normalised;
* ``beam_minabs``: the K patterns with the smallest :math:`|`final sum:math:`|` (ties:
  non-negative first, then the value, then the sign tuple).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_with_axes
from constructions._roles import oracle
from constructions.layers import HookPoint, HookPoints

MAX_DIGIT = 9
NUM_DIGITS = MAX_DIGIT + 1


# --- the task ------------------------------------------------------------------------------------

def digit_tuple(digits: object, *, name: str = "digits") -> tuple[int, ...]:
    """Validate a digit string: a non-empty sequence (or 1-d integer tensor) of ints in 0..9."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if isinstance(digits, torch.Tensor):
        if digits.ndim != 1 or digits.dtype.is_floating_point or digits.is_complex():
            raise TypeError(f"{name} must be a 1-d integer tensor, got {digits.dtype} "
                            f"of shape {tuple(digits.shape)}")
        digits = digits.tolist()
    if isinstance(digits, (str, bytes)) or not hasattr(digits, "__iter__"):
        raise TypeError(f"{name} must be a sequence of ints, got {type(digits).__name__}")
    digits = tuple(digits)
    if len(digits) < 1:
        raise ValueError(f"{name} must hold m >= 1 digits, got m = 0")
    for a in digits:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"{name} must hold ints, got {type(a).__name__}")
        if not 0 <= a <= MAX_DIGIT:
            raise ValueError(f"{name} must lie in 0..{MAX_DIGIT}, got {a}")
    return tuple(int(a) for a in digits)


def max_sum(m: int) -> int:
    """:math:`S = 9m`, the largest partial sum of m digits."""
    return MAX_DIGIT * _validate.positive_int("m", m)


def num_sums(m: int) -> int:
    """:math:`v = 2S + 1`, the number of partial-sum tokens for m digits."""
    return 2 * max_sum(m) + 1


def sign_paths(m: int) -> np.ndarray:
    """All :math:`2^m` sign tuples in ``itertools.product((1, -1))`` order, shape (2^m, m)."""
    m = _validate.positive_int("m", m)
    return np.array(list(itertools.product((1, -1), repeat=m)), dtype=np.int64)


def mnns_label(digits) -> int | None:
    """The MNNS label: min over sign patterns of the non-negative signed sums (None if none)."""
    digits = digit_tuple(digits)
    finals = sign_paths(len(digits)) @ np.array(digits)
    nonneg = finals[finals >= 0]
    return int(nonneg.min()) if nonneg.size else None


def _counts(partials: np.ndarray, S: int) -> np.ndarray:
    """Per-step visit counts of paths: ``partials`` (paths, m) -> (m, 2S + 1)."""
    m = partials.shape[1]
    counts = np.zeros((m, 2 * S + 1))
    for t in range(m):
        np.add.at(counts[t], partials[:, t] + S, 1.0)
    return counts


@oracle
def uniform_targets(digits) -> torch.Tensor:
    r"""The code's ``uniform`` targets :math:`\alpha^*_1..\alpha^*_m`, by enumerating paths.

    Shape (m, v); row t-1 puts :math:`2^{-t}` on each prefix sum. Dyadic, so exact in float64.
    """
    digits = digit_tuple(digits)
    m, S = len(digits), max_sum(len(digits))
    partials = np.cumsum(sign_paths(m) * np.array(digits), axis=1)      # (2^m, m)
    # a prefix of length t is shared by 2^(m-t) full paths: count / 2^m = count_t / 2^t
    return torch.from_numpy(_counts(partials, S) / 2.0**m)


def shift_average_matrix(a: int, v: int, *, dtype=torch.float64) -> torch.Tensor:
    r""":math:`M_a = (S_{+a} + S_{-a})/2` on vectors indexed by :math:`s + S`, shape (v, v).

    :math:`(M_a\alpha)(s) = \tfrac12(\alpha(s - a) + \alpha(s + a))`; mass shifted past
    :math:`\pm S` is dropped (it never arises from digits in range).
    """
    v = _validate.positive_int("v", v)
    a = _validate.positive_int("a", a, minimum=0)
    if a > v:
        raise ValueError(f"a must be <= v = {v}, got {a}")
    dtype = _validate.float_dtype("dtype", dtype)
    eye = torch.eye(v, dtype=dtype)
    if a == 0:
        return eye
    up = torch.diag(torch.ones(v - a, dtype=dtype), -a)    # (S_{+a} alpha)(s) = alpha(s - a)
    down = torch.diag(torch.ones(v - a, dtype=dtype), a)   # (S_{-a} alpha)(s) = alpha(s + a)
    return (up + down) / 2


def delta_zero(m: int, *, dtype=torch.float64) -> torch.Tensor:
    """:math:`\\alpha_0 = \\delta_0`, the distribution of the empty prefix."""
    alpha = torch.zeros(num_sums(m), dtype=_validate.float_dtype("dtype", dtype))
    alpha[max_sum(m)] = 1.0
    return alpha


def uniform_recursion(digits, transition=shift_average_matrix) -> torch.Tensor:
    r""":math:`\alpha^*_{t+1} = M_{a_{t+1}}\alpha^*_t` from :math:`\delta_0`, shape (m, v)."""
    digits = digit_tuple(digits)
    if not callable(transition):
        raise TypeError(f"transition must be callable (a, v) -> (v, v), got "
                        f"{type(transition).__name__}")
    alpha, rows = delta_zero(len(digits)), []
    for a in digits:
        alpha = transition(a, alpha.shape[0]) @ alpha
        rows.append(alpha)
    return torch.stack(rows)


def label_from_distribution(alpha: torch.Tensor, *, threshold: float = 0.0) -> int | None:
    r""":math:`\min\{s \ge 0 : \alpha(s) > \text{threshold}\}` for a vector indexed by s + S."""
    alpha = _validate.real_tensor("alpha", alpha, ndim=1)
    threshold = _validate.finite_float("threshold", threshold)
    if alpha.shape[0] % 2 != 1:
        raise ValueError(f"alpha must have odd length 2S + 1, got {alpha.shape[0]}")
    S = alpha.shape[0] // 2
    hits = torch.nonzero(alpha[S:] > threshold)
    return int(hits[0]) if hits.numel() else None


def _beam(digits, num_beams: int, key) -> tuple[torch.Tensor, list[tuple]]:
    digits = digit_tuple(digits)
    num_beams = _validate.positive_int("num_beams", num_beams)
    m, S = len(digits), max_sum(len(digits))
    signs = sign_paths(m)
    partials = np.cumsum(signs * np.array(digits), axis=1)
    paths = [(int(p[-1]), tuple(int(x) for x in s), p)
             for s, p in zip(signs, partials, strict=True)]
    return S, sorted(paths, key=key), num_beams


def beam_targets(digits, num_beams: int = 8) -> torch.Tensor | None:
    """The code's ``beam`` targets (m, v): the K kept non-negative paths' normalised counts.

    None when no sign pattern ends non-negative (the code skips such strings).
    """
    S, paths, K = _beam(digits, num_beams, key=lambda p: (p[0], p[1]))
    kept = [p for p in paths if p[0] >= 0][:K]
    if not kept:
        return None
    counts = _counts(np.stack([p[2] for p in kept]), S)
    return torch.from_numpy(counts / len(kept))


def beam_minabs_targets(digits, num_beams: int = 8) -> torch.Tensor:
    """The code's ``beam_minabs`` targets (m, v): the K paths of smallest |final sum|."""
    S, paths, K = _beam(digits, num_beams,
                        key=lambda p: (abs(p[0]), 0 if p[0] >= 0 else 1, p[0], p[1]))
    kept = paths[:K]
    return torch.from_numpy(_counts(np.stack([p[2] for p in kept]), S) / len(kept))


def csft_kl(target: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    r"""The CSFT step loss :math:`\mathrm{KL}(\alpha^* \Vert \mathrm{softmax}(\ell))` (last axis).

    The code adds ``1e-8`` inside its :math:`\log\alpha^*`; here :math:`0\log 0 = 0` exactly.
    """
    target = _validate.real_tensor("target", target)
    logits = _validate.real_tensor("logits", logits)
    if target.ndim < 1 or target.shape[-1] == 0:
        raise ValueError(f"target must have a non-empty last dim, got {tuple(target.shape)}")
    if logits.shape[-1:] != target.shape[-1:]:
        raise ValueError(f"logits must have the last dim {target.shape[-1]} of target, got "
                         f"shape {tuple(logits.shape)}")
    log_q = torch.log_softmax(logits, dim=-1)
    plogp = torch.where(target > 0, target * torch.log(target.clamp_min(1e-300)),
                        torch.zeros_like(target))
    return (plogp - target * log_q).sum(-1)


# --- multi-token sampling (MTS) ------------------------------------------------------------------

def mts_tokens(alpha: torch.Tensor, embeddings: torch.Tensor, num_tokens: int,
               num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    r"""Multi-token sampling: ``num_samples`` draws of :math:`\frac1K\sum_{k=1}^K E_{s_k}` with
    :math:`s_k \sim \alpha` i.i.d.; :math:`K = 1` is discrete CoT. Shape (num_samples, d)."""
    alpha = _validate.real_tensor("alpha", alpha, ndim=1)
    embeddings = _validate.nonempty("embeddings",
                                    _validate.real_tensor("embeddings", embeddings, ndim=2))
    if embeddings.shape[0] != alpha.shape[0]:
        raise ValueError(f"embeddings must have one row per entry of alpha ({alpha.shape[0]}), "
                         f"got {embeddings.shape[0]}")
    if bool((alpha < 0).any()) or not math.isclose(float(alpha.sum()), 1.0, abs_tol=1e-9):
        raise ValueError("alpha must be a probability vector (non-negative, summing to 1)")
    K = _validate.positive_int("num_tokens", num_tokens)
    n = _validate.positive_int("num_samples", num_samples)
    index = torch.multinomial(alpha.double(), n * K, replacement=True, generator=generator)
    return embeddings[index].reshape(n, K, -1).mean(1)                      # (n, d)


def mts_moments(alpha: torch.Tensor, embeddings: torch.Tensor,
                num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The identity: :math:`\mathbb E = \alpha^\top E` and
    :math:`\mathrm{Cov} = \mathrm{Cov}_{s\sim\alpha}(E_s)/K`."""
    alpha = _validate.real_tensor("alpha", alpha, ndim=1)
    embeddings = _validate.nonempty("embeddings",
                                    _validate.real_tensor("embeddings", embeddings, ndim=2))
    if embeddings.shape[0] != alpha.shape[0]:
        raise ValueError(f"embeddings must have one row per entry of alpha ({alpha.shape[0]}), "
                         f"got {embeddings.shape[0]}")
    K = _validate.positive_int("num_tokens", num_tokens)
    mean = alpha @ embeddings
    centred = embeddings - mean
    return mean, (centred.T * alpha) @ centred / K


# --- the one-layer CoT2 construction -------------------------------------------------------------

class CoT2Layer(nn.Module):
    r"""One attention layer and one mixture-of-experts MLP that roll out the uniform CSFT
    recursion with continuous tokens (this project's construction).

    Residual blocks (``blocks`` names their slices): ``sum`` (v: the continuous token
    :math:`\alpha_t`), ``digit`` (10: a digit token's one-hot), ``fetched`` (10: written by
    attention), ``key_pos`` (m: a digit token's position), ``pointer`` (m: thought token t
    points at digit t + 1).

    * Attention: scores :math:`\beta\langle\text{pointer}_t, \text{key\_pos}_j\rangle`, causal
      over the m digit tokens and thought tokens 0..t; values copy ``digit`` into ``fetched``.
    * MLP: expert a computes :math:`z_a = M_a\alpha` (linear), then
      :math:`\phi_a = \max(\log z_a, -B)`; a ReLU gate keeps the fetched expert,
      :math:`\ell = -\sum_a \mathrm{relu}(-\phi_a - B(1 - c_a))`, exact for one-hot
      :math:`c`; :math:`\alpha_{t+1} = \mathrm{softmax}(\ell)`, and the next input is
      :math:`\alpha_{t+1}E`, which is :math:`\alpha_{t+1}` in the ``sum`` block.

    Hook points, TransformerLens's names for one block (the model is that block, applied once
    per thought step; each :meth:`step` fires every hook once, batch 1, the last token the one
    query, one head): ``hook_resid_pre`` the context ``(1, n, d)``; ``attn.hook_q``
    ``(1, 1, 1, m)``, ``attn.hook_k`` ``(1, n, 1, m)``, ``attn.hook_v`` the context itself (the
    values are the stream, :math:`W_{OV}` is applied after mixing) ``(1, n, 1, d)``,
    ``attn.hook_attn_scores`` and ``attn.hook_pattern`` ``(1, 1, 1, n)``, ``attn.hook_z``
    ``(1, 1, 1, d)``; ``hook_attn_out`` :math:`W_{OV}z` and ``hook_resid_mid`` ``h``
    ``(1, 1, d)``; ``mlp.hook_pre`` the ReLU gate's input and ``mlp.hook_post`` its output,
    neurons indexed (expert, sum) ``(1, 1, 10, v)``, and ``hook_mlp_out`` the logits
    ``(1, 1, v)``. There is no ``hook_resid_post``: the logits are not added to a stream.
    """

    def __init__(self, m: int, beta: float, clamp: float, transition, dtype, device):
        super().__init__()
        self.m, self.beta, self.clamp = m, beta, clamp
        v = self.v = num_sums(m)
        sizes = {"sum": v, "digit": NUM_DIGITS, "fetched": NUM_DIGITS, "key_pos": m,
                 "pointer": m}
        self.blocks, start = {}, 0
        for name, size in sizes.items():
            self.blocks[name] = slice(start, start + size)
            start += size
        self.d_model = start
        kw = {"dtype": dtype, "device": device}
        b = self.blocks
        W_Q = torch.zeros(m, start, **kw)
        W_Q[:, b["pointer"]] = beta * torch.eye(m, **kw)
        W_K = torch.zeros(m, start, **kw)
        W_K[:, b["key_pos"]] = torch.eye(m, **kw)
        W_OV = torch.zeros(start, start, **kw)            # digit -> fetched
        W_OV[b["fetched"], b["digit"]] = torch.eye(NUM_DIGITS, **kw)
        experts = torch.stack([transition(a, v).to(**kw) for a in range(NUM_DIGITS)])
        self.register_buffer("W_Q", W_Q)
        self.register_buffer("W_K", W_K)
        self.register_buffer("W_OV", W_OV)
        self.register_buffer("experts", experts)       # (10, v, v): M_a
        self.hook_resid_pre, self.hook_attn_out = HookPoint(), HookPoint()
        self.hook_resid_mid, self.hook_mlp_out = HookPoint(), HookPoint()
        self.attn = HookPoints("hook_q", "hook_k", "hook_v", "hook_attn_scores", "hook_pattern",
                               "hook_z")
        self.mlp = HookPoints("hook_pre", "hook_post")

    def embed_prompt(self, digits: tuple[int, ...]) -> torch.Tensor:
        """Digit tokens: one-hot digit and one-hot position, shape (m, d_model)."""
        x = torch.zeros(self.m, self.d_model, dtype=self.W_Q.dtype, device=self.W_Q.device)
        for i, a in enumerate(digits):
            x[i, self.blocks["digit"].start + a] = 1.0
            x[i, self.blocks["key_pos"].start + i] = 1.0
        return x

    def embed_thought(self, alpha: torch.Tensor, t: int) -> torch.Tensor:
        """Thought token t: the continuous token alpha E (the sum block) and pointer e_{t+1}."""
        x = torch.zeros(self.d_model, dtype=alpha.dtype, device=alpha.device)
        x[self.blocks["sum"]] = alpha
        x[self.blocks["pointer"].start + t] = 1.0
        return x

    def step(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits over sums at the last token of ``context`` (n, d), and its attention (n,)."""
        attn = self.attn
        # hooks see TransformerLens's [batch, pos, head, d_head], batch 1 and one head
        context = hook_with_axes(self.hook_resid_pre, context, 0)    # (n, d)
        q = hook_with_axes(attn.hook_q, self.W_Q @ context[-1], 0, count=3)      # (m,)
        k = hook_with_axes(attn.hook_k, (context @ self.W_K.T).unsqueeze(1), 0).squeeze(1)  # (n, m)
        v = hook_with_axes(attn.hook_v, context.unsqueeze(1), 0).squeeze(1)     # (n, d)
        scores = hook_with_axes(attn.hook_attn_scores, k @ q, 0, count=3)         # (n,)
        attention = hook_with_axes(attn.hook_pattern, torch.softmax(scores, dim=0), 0, count=3)
        z = hook_with_axes(attn.hook_z, attention @ v, 0, count=3)               # (d,)
        h = context[-1] + hook_with_axes(self.hook_attn_out, self.W_OV @ z, 0, count=2)  # residual
        h = hook_with_axes(self.hook_resid_mid, h, 0, count=2)                   # (d,)
        alpha, c = h[self.blocks["sum"]], h[self.blocks["fetched"]]
        z = self.experts @ alpha                                 # (10, v): M_a alpha
        phi = torch.clamp(torch.log(z), min=-self.clamp)         # (10, v), log 0 = -inf -> -B
        gate = hook_with_axes(self.mlp.hook_post, torch.relu(hook_with_axes(
            self.mlp.hook_pre, -phi - self.clamp * (1 - c)[:, None], 0, count=2)), 0, count=2)
        return hook_with_axes(self.hook_mlp_out, -gate.sum(0), 0, count=2), attention  # (v,), (n,)

    def rollout(self, digits) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The continuous chain of thought: :math:`\alpha_1..\alpha_m` (m, v) and the attention
        weight each step puts on its target digit :math:`a_{t+1}` (m,)."""
        digits = digit_tuple(digits)
        if len(digits) != self.m:
            raise ValueError(f"digits must hold m = {self.m} digits, got {len(digits)}")
        context = self.embed_prompt(digits)
        alpha = delta_zero(self.m, dtype=context.dtype).to(context.device)
        alphas, weights = [], []
        for t in range(self.m):
            context = torch.cat([context, self.embed_thought(alpha, t)[None]])
            logits, attention = self.step(context)
            alpha = torch.softmax(logits, dim=0)
            alphas.append(alpha)
            weights.append(attention[t])
        return torch.stack(alphas), torch.stack(weights)

    def forward(self, digits) -> int | None:
        """The MNNS label read from :math:`\\alpha_m`: threshold :math:`2^{-m-1}`."""
        alphas, _ = self.rollout(digits)
        return label_from_distribution(alphas[-1], threshold=2.0 ** (-self.m - 1))


def attention_leak(m: int, t: int, beta: float) -> float:
    r"""A-priori bound on the attention mass off digit :math:`a_{t+1}` at step t:
    :math:`\rho_t = (n_t - 1)e^{-\beta}/(1 + (n_t - 1)e^{-\beta})` with
    :math:`n_t = m + t + 1` keys (one scores :math:`\beta`, the rest 0)."""
    m = _validate.positive_int("m", m)
    t = _validate.positive_int("t", t, minimum=0)
    beta = _validate.positive_float("beta", beta)
    others = (m + t) * math.exp(-beta)
    return others / (1 + others)


def step_leak_bound(m: int, t: int, beta: float, clamp: float) -> float:
    r"""The derived per-step bound (exact arithmetic):
    :math:`\lVert\alpha_{t+1} - M_{a_{t+1}}\alpha_t\rVert_1 \le 2(v-1)e^{-B} + 2B\rho_t`.

    Clamp: with :math:`p = M_a\alpha_t`, :math:`q = \max(p, e^{-B})`,
    :math:`\delta = \sum(q - p) \le (v-1)e^{-B}`, and
    :math:`\lVert q/(1+\delta) - p\rVert_1 \le \delta + \delta`. Attention: the fetched block
    is :math:`c = (1-\rho)e_{a} + r` with :math:`r \ge 0`, :math:`\sum r \le \rho`, so every
    logit moves by :math:`\Delta_s \in [-\rho B, \rho B]` and softmax moves by at most
    :math:`\operatorname{osc}\Delta \le 2\rho B` in :math:`\ell_1`.
    """
    v = num_sums(m)
    clamp = _validate.positive_float("clamp", clamp)
    return 2 * (v - 1) * math.exp(-clamp) + 2 * clamp * attention_leak(m, t, beta)


def cot2_layer(m: int, *, beta: float = 40.0, clamp: float = 30.0,
               transition=shift_average_matrix, dtype: torch.dtype = torch.float64,
               device: str | torch.device = "cpu") -> CoT2Layer:
    r"""The one-layer CoT2 construction for m digits.

    Defaults: with :math:`B = 30`, :math:`\beta = 40` and :math:`m \le 12` (v ≤ 217) the summed
    per-step bounds :math:`\sum_t (2(v-1)e^{-B} + 2B\rho_t) < 10^{-9}`, far below
    :math:`2^{-m-1}`, half the smallest non-zero target mass, so the threshold read-out of
    :math:`\alpha_m` returns the oracle's label.
    """
    m = _validate.positive_int("m", m)
    beta = _validate.positive_float("beta", beta)
    clamp = _validate.positive_float("clamp", clamp)
    dtype = _validate.float_dtype("dtype", dtype)
    if not callable(transition):
        raise TypeError(f"transition must be callable (a, v) -> (v, v), got "
                        f"{type(transition).__name__}")
    return CoT2Layer(m, beta, clamp, transition, dtype, _validate.device("device", device))


# --- how many superposed paths decode (C2.4) -----------------------------------------------------

def gaussian_embeddings(vocab_size: int, d: int, draws: int, seed: int) -> torch.Tensor:
    r"""``draws`` Gaussian token embeddings :math:`E \in \mathbb R^{v\times d}`, shape
    (draws, v, d): :math:`E = P^\top` for the projections :math:`P \in \mathbb R^{d\times v}`
    that :func:`constructions.fact_mlps.decoding_success_rate` draws from the same seed, so the
    two share their draws."""
    v = _validate.positive_int("vocab_size", vocab_size)
    d = _validate.positive_int("d", d)
    draws = _validate.positive_int("draws", draws)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    P = torch.randn(draws, d, v, generator=generator, dtype=torch.float64)
    return P.transpose(1, 2)                                         # (draws, v, d)


def superposition_recovered(embeddings: torch.Tensor, sets: torch.Tensor) -> torch.Tensor:
    r"""Exact-set recovery of top-K decoding: for each draw and each set :math:`A` (K token
    ids), the superposition :math:`x = \frac1K\sum_{s\in A}E_s` is decoded by its K largest
    inner products :math:`\langle x, E_j\rangle`; True iff
    :math:`\min_{i\in A}\langle x, E_i\rangle > \max_{j\notin A}\langle x, E_j\rangle`.

    ``embeddings`` (draws, v, d), ``sets`` (draws, n, K) -> (draws, n) bool.
    """
    embeddings = _validate.nonempty("embeddings",
                                    _validate.real_tensor("embeddings", embeddings, ndim=3))
    sets = _validate.nonempty("sets", _validate.token_tensor(
        "sets", sets, vocab_size=embeddings.shape[1], ndim=3))
    draws = embeddings.shape[0]
    if sets.shape[0] != draws:
        raise ValueError(f"sets must have one row per draw ({draws}), got {sets.shape[0]}")
    chosen = torch.gather(embeddings[:, None].expand(-1, sets.shape[1], -1, -1), 2,
                          sets[..., None].expand(-1, -1, -1, embeddings.shape[2]))
    x = chosen.mean(2)                                              # (draws, n, d)
    scores = x @ embeddings.transpose(1, 2)                         # (draws, n, v)
    inside = torch.zeros_like(scores, dtype=torch.bool).scatter_(2, sets, True)
    low = scores.masked_fill(~inside, float("inf")).amin(2)
    high = scores.masked_fill(inside, float("-inf")).amax(2)
    return low > high


# --- a ReLU approximation of the log (C2.3) ------------------------------------------------------

def relu_log(z: torch.Tensor, m: int, pieces: int) -> torch.Tensor:
    r"""The piecewise-linear interpolant of :math:`\log` on :math:`[2^{-m}, 1]` at the
    geometric knots :math:`k_j = 2^{-m(1 - j/P)}`, :math:`j = 0..P`, written as one ReLU layer:
    :math:`\log k_0 + s_0(z - k_0) + \sum_{j=1}^{P-1}(s_j - s_{j-1})\,\mathrm{relu}(z - k_j)`
    with :math:`s_j` the chord slopes; inputs are clamped to :math:`[k_0, 1]` (every non-zero
    CSFT mass is at least :math:`2^{-m}`).

    On :math:`[k_j, k_{j+1}]` linear interpolation of a function with
    :math:`|f''| \le 1/k_j^2` errs by at most :math:`(k_{j+1} - k_j)^2/(8k_j^2) =
    (\rho - 1)^2/8`, :math:`\rho = 2^{m/P}`: the error falls as :math:`(m\ln 2/P)^2/8`.
    """
    m = _validate.positive_int("m", m)
    P = _validate.positive_int("pieces", pieces)
    z = _validate.real_tensor("z", z)
    knots = 2.0 ** (-m * (1 - torch.arange(P + 1, dtype=z.dtype) / P))
    slopes = torch.diff(torch.log(knots)) / torch.diff(knots)        # (P,)
    z = z.clamp(float(knots[0]), 1.0)
    out = torch.log(knots[0]) + slopes[0] * (z - knots[0])
    kinks = torch.relu(z[..., None] - knots[1:-1])                   # (..., P-1)
    return out + kinks @ torch.diff(slopes)


def relu_log_bound(m: int, pieces: int) -> float:
    """The interpolation bound :math:`(2^{m/P} - 1)^2/8` of :func:`relu_log`."""
    m = _validate.positive_int("m", m)
    pieces = _validate.positive_int("pieces", pieces)
    return (2.0 ** (m / pieces) - 1) ** 2 / 8
