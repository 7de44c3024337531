r"""The induction transformer and the two explicit-weight constructions (Sanford, Hsu, Telgarsky
2024): two layers, and the compact one.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions.induction_heads._shared import NO_MATCH, Rounding
from constructions.induction_heads.margins import (
    InductionParameters,
    compact_parameters,
    two_layer_parameters,
)
from constructions.layers import Attention, HookPoint, causal_mask, fixed, resolve
from constructions.recording import recorded
from constructions.residual_layout import (
    Interface,
    ResidualLayout,
    attention_block,
    fixed_context_length,
)

# --- the model --------------------------------------------------------------------------------

class InductionTransformer(nn.Module):
    r"""A BOS-prefixed, attention-only transformer with explicit weights.

    .. math::

        x^{(0)}_t = W_E[\sigma_t] + W_{pos}[t],\quad
        x^{(\ell)} = x^{(\ell-1)} + \mathrm{Attn}_\ell(x^{(\ell-1)}),\quad
        \mathrm{logits}_t = x^{(L)}_t W_U,

    with :math:`\sigma_0 = \mathrm{BOS}` (token id ``vocab_size``) and causal softmax attention.
    These are exactly the weights a standard attention-only transformer holds (per-layer
    :math:`W_Q, W_K, W_V, W_O`, embeddings, unembedding; no biases, no normalisation), so the
    model exports one-to-one, e.g. to TransformerLens with an attention scale of 1.

    ``forward(tokens)`` maps ``(B, n)`` (or ``(n,)``) tokens to ``(B, n, vocab_size + 1)``
    logits for the real positions; :meth:`attention_patterns` returns what the checks
    inspect; :meth:`run` does both, optionally in emulated low precision.
    """

    def __init__(self, W_E: torch.Tensor, W_pos: torch.Tensor, layers: list[Attention],
                 W_U: torch.Tensor) -> None:
        super().__init__()
        self.W_E, self.W_pos, self.W_U = fixed(W_E), fixed(W_pos), fixed(W_U)
        self.layers = nn.ModuleList(layers)
        # the residual stream before and after each layer (TransformerLens's
        # blocks.L.hook_resid_pre/post), (B, n + 1, d_model) with the BOS at position 0
        self.hook_resid_pre = nn.ModuleList(HookPoint() for _ in layers)
        self.hook_resid_post = nn.ModuleList(HookPoint() for _ in layers)

    @property
    def vocab_size(self) -> int:
        """Real tokens; the embedding has one more row, the BOS."""
        return self.W_E.shape[0] - 1

    @property
    def max_len(self) -> int:
        return self.W_pos.shape[0] - 1

    @property
    def d_model(self) -> int:
        return self.W_E.shape[1]

    def residual_layout(self, name: str, n_ctx: int | None) -> ResidualLayout:
        """The TransformerLens layout (:mod:`constructions.residual_layout`): embeddings,
        attention layers on the residual stream, unembedding; one-to-one, BOS passed
        explicitly."""
        D = self.d_model
        fixed_context_length(name, n_ctx, self.max_len + 1)
        every = slice(None)
        blocks = tuple((attention_block(name, layer, D, every, every), None)
                       for layer in self.layers)
        return ResidualLayout(name, D, self.W_E.detach(), self.W_pos.detach(),
                              self.W_U.detach(), blocks,
                              Interface("tokens", vocab_size=self.vocab_size,
                                        max_len=self.max_len, bos=self.vocab_size))

    def _validated(self, tokens: object) -> torch.Tensor:
        tokens = _validate.token_tensor("tokens", tokens, vocab_size=self.vocab_size,
                                        max_len=self.max_len)
        return tokens if tokens.ndim == 2 else tokens.unsqueeze(0)

    def run(self, tokens: torch.Tensor, *, rounding: Rounding | None = None
            ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        r"""Logits ``(B, n, vocab_size + 1)`` and the patterns ``[(B, H, n+1, n+1)]`` per layer.

        ``rounding``, if given, is applied to every weight when it is read, to the embedded
        residual stream, to each query, key, value, score, attention weight and head output,
        and to each residual sum: every number the forward pass stores. The arithmetic
        inside one operation is float64 (a wide accumulator), so with
        :func:`round_significand` this emulates p-bit storage with exact accumulation.
        """
        tokens = self._validated(tokens)
        r = rounding if rounding is not None else (lambda t: t)
        batch, n = tokens.shape
        bos = torch.full((batch, 1), self.vocab_size, dtype=torch.long, device=tokens.device)
        with_bos = torch.cat([bos, tokens.to(self.W_E.device)], dim=1)
        x = r(r(self.W_E)[with_bos] + r(self.W_pos)[: n + 1])
        patterns = []
        for layer, pre, post in zip(self.layers, self.hook_resid_pre, self.hook_resid_post,
                                    strict=True):
            x = pre(x)
            if rounding is None:
                out, pattern = layer(x, return_pattern=True)
            else:
                out, pattern = _rounded_attention(layer, x, r)
            patterns.append(pattern)
            x = post(r(x + out))
        return r(x[:, 1:] @ r(self.W_U)), patterns

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        squeeze = isinstance(tokens, torch.Tensor) and tokens.ndim == 1
        logits = self.run(tokens)[0]
        return logits[0] if squeeze else logits

    def attention_patterns(self, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r"""One ``(B, H, n+1, n+1)`` tensor per layer: :math:`A^{(\ell)}_{h,t,j}`, rows = queries.

        Index 0 is the BOS the model prepends; index :math:`t \ge 1` is ``tokens[:, t-1]``.
        """
        return tuple(self.run(tokens)[1])

    def predict(self, tokens: torch.Tensor) -> torch.Tensor:
        """Argmax predictions in the oracle's convention: a token id, or -1 for the last class."""
        classes = self(tokens).argmax(-1)
        return torch.where(classes == self.vocab_size, NO_MATCH, classes)


def _rounded_attention(layer: Attention, x: torch.Tensor, r: Rounding
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal softmax attention of ``layer`` with every stored intermediate passed through r."""
    q = r(torch.einsum("bnd,hdk->bhnk", x, r(layer.W_Q)))
    k = r(torch.einsum("bnd,hdk->bhnk", x, r(layer.W_K)))
    scores = r(layer.scale * q @ k.transpose(-1, -2))
    mask = causal_mask(x.shape[-2], x.device)
    pattern = r(scores.masked_fill(~mask, float("-inf")).softmax(dim=-1))
    values = r(torch.einsum("bnd,hdv->bhnv", x, r(layer.W_V)))
    # The same contractions, in the same order, as Attention.forward: with the identity as
    # ``r`` this path is the plain forward bit for bit (a test asserts it).
    heads = r(torch.einsum("bhij,bhjv->bhiv", pattern, values))
    if layer.use_attn_result:
        return r(torch.einsum("bhiv,hvo->biho", heads, r(layer.W_O)).sum(dim=2)), pattern
    return r(torch.einsum("bhiv,hvo->bio", heads, r(layer.W_O))), pattern


def _blocks(**sizes: int) -> dict[str, slice]:
    """Consecutive slices of the residual stream, one per named block."""
    out, start = {}, 0
    for name, size in sizes.items():
        out[name] = slice(start, start + size)
        start += size
    return out


def _temperatures(default: InductionParameters, beta1, beta2, recency, sink
                  ) -> InductionParameters:
    """The defaults, with any explicit override validated (recency and sink may be 0)."""
    return InductionParameters(
        beta1=default.beta1 if beta1 is None else _validate.positive_float("beta1", beta1),
        beta2=default.beta2 if beta2 is None else _validate.positive_float("beta2", beta2),
        recency=(default.recency if recency is None
                 else _validate.positive_float("recency", recency, allow_zero=True)),
        sink=default.sink if sink is None else _validate.finite_float("sink", sink),
        readout=default.readout, token_gap=default.token_gap,
        position_gap=default.position_gap)


def _attention(W_Q, W_K, W_V, W_O, kw: dict) -> Attention:
    return Attention(*(w.to(**kw) for w in (W_Q, W_K, W_V, W_O)), causal=True)


@recorded  # records its arguments, so that constructions.export.save can rebuild it
def two_layer_induction(vocab_size: int, max_len: int, *, beta1: float | None = None,
                        beta2: float | None = None, recency: float | None = None,
                        sink: float | None = None, dtype: torch.dtype = torch.float64,
                        device=None) -> InductionTransformer:
    r"""Exact two-layer induction head with one-hot blocks (width :math:`3S + n + 5`).

    Residual blocks: tok (:math:`S+1`, BOS last), pos (:math:`n+1`), prev (:math:`S+1`),
    out (:math:`S+1`), const (1); :math:`x_t = [e_{\sigma_t}; e_t; 0; 0; 1]`.

    * Layer 1: :math:`W^1_Q: e_t \mapsto \beta_1 e_{t-1}`, :math:`W^1_K: e_j \mapsto e_j`, so
      the score is :math:`\beta_1[j = t-1]`; the value copies tok into prev. Query
      :math:`t \ge 1` sees :math:`t+1` keys, so
      :math:`\alpha_t = e^{\beta_1}/(e^{\beta_1} + t) \ge \alpha = e^{\beta_1}/(e^{\beta_1} + n)`,
      and :math:`\mathrm{prev}_t[a] \ge \alpha` if :math:`\sigma_{t-1} = a`, else
      :math:`\le 1 - \alpha`; :math:`\mathrm{prev}_0 = e_{BOS}`.
    * Layer 2: score :math:`s_{ij} = \beta_2\,\mathrm{prev}_j[\sigma_i] + \lambda j + \theta[j=0]`
      (query: :math:`\beta_2 e_a` and const; key: prev and
      :math:`\lambda j + \theta[j=0]` from pos); the value copies tok into out
      (:math:`e_{BOS} \mapsto \bot`); the unembedding reads out.

    *Why every input is solved.* Let :math:`c` be the key after the latest earlier occurrence
    of :math:`a = \sigma_i` (:math:`c \ge 2`): :math:`s_c \ge \beta_2\alpha + \lambda c`. An
    older matching key :math:`j < c` has :math:`s_j - s_c \le \beta_2(1-\alpha) - \lambda`, a
    non-matching key :math:`s_j - s_c \le \beta_2(1-2\alpha) + \lambda(n-1)`, and BOS
    :math:`s_0 - s_c \le \theta - \beta_2\alpha - \lambda`. With at most :math:`n` keys of each
    kind, (A)–(C) of :func:`two_layer_conditions` make the odds against :math:`c` below 1, so
    :math:`A_{ic} > 1/2`, and the one-hot output puts more than half its mass on
    :math:`\sigma_c = \tau_i`. With no match every real key has
    :math:`s_j - s_0 \le \beta_2(1-\alpha) + \lambda n - \theta`, and (D) gives BOS
    weight :math:`> 1/2`, i.e. :math:`\bot`.

    *Defaults* (:func:`two_layer_parameters`): :math:`\lambda = \ln(3n)+2`,
    :math:`\theta = \lambda n + \ln n + 2`, :math:`\beta_2 = 2\theta + 10`,
    :math:`\beta_1 = \ln(n\beta_2) + 1`. Then :math:`1 - \alpha \le ne^{-\beta_1} = 1/(e\beta_2)`,
    so :math:`\beta_2(1-\alpha) \le 1/e` and the left sides of (A) and (D) are at most
    :math:`e^{1/e-2}/3` and :math:`e^{1/e-2}`, for every :math:`n`. Scores are
    :math:`O(n\log n)`, hence :math:`p = \log_2 n + O(\log\log n)` bits suffice
    (:func:`required_bits`). Passing ``beta1``/``beta2``/``recency``/``sink`` overrides a
    default (``recency=0`` or ``sink=0`` ablate the bias or the sink).
    """
    S = _validate.positive_int("vocab_size", vocab_size)
    n = _validate.positive_int("max_len", max_len)
    kw = resolve(dtype, device)
    p = _temperatures(two_layer_parameters(n), beta1, beta2, recency, sink)
    b = _blocks(tok=S + 1, pos=n + 1, prev=S + 1, out=S + 1, const=1)
    d = b["const"].stop
    f64 = {"dtype": torch.float64}

    W_E = torch.zeros(S + 1, d, **f64)
    W_E[:, b["tok"]] = torch.eye(S + 1, **f64)
    W_E[:, b["const"]] = 1.0
    W_pos = torch.zeros(n + 1, d, **f64)
    W_pos[:, b["pos"]] = torch.eye(n + 1, **f64)

    # Layer 1: the query of position t is beta1 * e_{t-1}; the key of position j is e_j.
    Q1 = torch.zeros(d, n + 1, **f64)
    Q1[b["pos"]] = p.beta1 * torch.eye(n + 1, **f64).roll(-1, dims=1)
    Q1[b["pos"].start, n] = 0.0  # position 0 (BOS) has no previous token: no roll-over
    K1 = torch.zeros(d, n + 1, **f64)
    K1[b["pos"]] = torch.eye(n + 1, **f64)
    V1 = torch.zeros(d, S + 1, **f64)
    V1[b["tok"]] = torch.eye(S + 1, **f64)
    O1 = torch.zeros(S + 1, d, **f64)
    O1[:, b["prev"]] = torch.eye(S + 1, **f64)

    # Layer 2: query [beta2 e_a ; 1] against key [prev_j ; lambda j + theta [j = 0]].
    Q2 = torch.zeros(d, S + 2, **f64)
    Q2[b["tok"].start:b["tok"].start + S, :S] = p.beta2 * torch.eye(S, **f64)
    Q2[b["const"], S + 1] = 1.0
    K2 = torch.zeros(d, S + 2, **f64)
    K2[b["prev"], : S + 1] = torch.eye(S + 1, **f64)
    K2[b["pos"], S + 1] = p.recency * torch.arange(n + 1, **f64)
    K2[b["pos"].start, S + 1] = p.sink
    V2 = V1.clone()
    O2 = torch.zeros(S + 1, d, **f64)
    O2[:, b["out"]] = torch.eye(S + 1, **f64)
    W_U = torch.zeros(d, S + 1, **f64)
    W_U[b["out"]] = torch.eye(S + 1, **f64)

    layers = [_attention(Q1, K1, V1, O1, kw), _attention(Q2, K2, V2, O2, kw)]
    return InductionTransformer(W_E.to(**kw), W_pos.to(**kw), layers, W_U.to(**kw))


COMPACT_WIDTH = 11


@recorded
def compact_induction(vocab_size: int, max_len: int, *, beta1: float | None = None,
                      beta2: float | None = None, recency: float | None = None,
                      sink: float | None = None, dtype: torch.dtype = torch.float64,
                      device=None) -> InductionTransformer:
    r"""Exact two-layer induction head of width 11, independent of :math:`S` and :math:`n`.

    Circles: token :math:`a` (and :math:`\bot = S`) is
    :math:`u_a = (\cos 2\pi a/N, \sin 2\pi a/N)` with :math:`N = S+1`; position :math:`t` is
    :math:`p_t = (\cos 2\pi t/(n+1), \sin 2\pi t/(n+1))`. Residual blocks: tok (2; 0 for BOS),
    bos (1), const (1), pos (2), rec (1, :math:`t/n`), prev (2), out (2).

    * Layer 1: the query is :math:`\beta_1 p_t` rotated back by one step, the key :math:`p_j`:
      score :math:`\beta_1\cos(2\pi(j - t + 1)/(n+1))`, maximal at :math:`j = t-1` and at least
      :math:`\beta_1 g_{pos}` lower elsewhere (:math:`|j - t + 1| \le n - 1`). So the weight off
      :math:`t-1` is :math:`\delta_t \le n e^{-\beta_1 g_{pos}} =: \delta`, and
      :math:`\mathrm{prev}_t = \sum_j A_{tj}\,\mathrm{tok}_j`.
    * Layer 2: score :math:`\beta_2\langle u_{\sigma_i}, \mathrm{prev}_j\rangle + \lambda j +
      \theta[j=0]` (rec carries :math:`j/n`, bos carries the sink); the value is
      :math:`u_{\sigma_j}`, or :math:`u_\bot` for BOS; the logits are :math:`\langle
      \mathrm{out}, u_c\rangle`.

    *Why every input is solved.* A matching key has
    :math:`\langle u_a, \mathrm{prev}_j\rangle \ge 1 - 2\delta`; a non-matching one at most
    :math:`1 - (1-\delta)g^\star` (:math:`g^\star = \min(1-\cos(2\pi/N), 1)`, the 1 covering
    the BOS, whose tok is 0); BOS has 0. As in :func:`two_layer_induction` this bounds the score
    gaps, and (A′)–(D′) of :func:`compact_conditions` make the odds against the correct key
    below :math:`\rho = \sin(\pi/N)`. That suffices for the circular readout: with correct
    weight :math:`w` and the rest anywhere in the unit disc,
    :math:`\langle\mathrm{out}, u_c - u_b\rangle \ge 2\sin x\,(w\sin x - (1-w))` with
    :math:`x = \pi|c-b|/N`, positive when :math:`(1-w)/w < \sin(\pi/N) \le \sin x`.

    *Defaults* (:func:`compact_parameters`): :math:`\lambda = \ln(3n/\rho) + 2`,
    :math:`\beta_2 = (\lambda n + \ln(3n/\rho^2) + 4)/g^\star`,
    :math:`\theta = \beta_2(1-g^\star) + \lambda n + \ln(n/\rho) + 2`,
    :math:`\beta_1 = (\ln(n\beta_2)+1)/g_{pos}`, so that :math:`\delta\beta_2 \le 1/e`.

    *Precision needed.* :math:`\beta_1 \approx (n+1)^2\ln(n\beta_2)/(2\pi^2)` dominates the
    scores (for fixed :math:`S`; :math:`\beta_2` grows as :math:`S^2 n\log n`): a score error
    must stay below the :math:`O(1)` slack while scores are :math:`M = O(n^2\log n)`. So
    :math:`p = \lceil\log_2 M + 6\rceil = 2\log_2 n + O(\log\log n)` significand bits
    suffice (:func:`required_bits`): 16 bits at :math:`n = 16`, 22 at :math:`n = 256`, 26 at
    :math:`n = 1024` (:math:`S = 8`), so the bound certifies float32 (24 bits) up to
    :math:`n \approx 500`; measured on stress inputs, about 13 bits suffice at
    :math:`n = 256`. Width 11 times :math:`O(\log n)` bits is the Sanford–Hsu–Telgarsky
    two-layer size :math:`O(1)\cdot O(1)\cdot O(\log n)`.
    """
    S = _validate.positive_int("vocab_size", vocab_size)
    n = _validate.positive_int("max_len", max_len)
    kw = resolve(dtype, device)
    p = _temperatures(compact_parameters(S, n), beta1, beta2, recency, sink)
    b = _blocks(tok=2, bos=1, const=1, pos=2, rec=1, prev=2, out=2)
    d = b["out"].stop
    f64 = {"dtype": torch.float64}

    def circle(count: int, points: int) -> torch.Tensor:
        angle = 2 * math.pi * torch.arange(count, **f64) / points
        return torch.stack([angle.cos(), angle.sin()], dim=-1)

    token_points = circle(S + 1, S + 1)  # row S is the point of \bot
    W_E = torch.zeros(S + 1, d, **f64)
    W_E[:S, b["tok"]] = token_points[:S]
    W_E[S, b["bos"]] = 1.0
    W_E[:, b["const"]] = 1.0
    W_pos = torch.zeros(n + 1, d, **f64)
    W_pos[:, b["pos"]] = circle(n + 1, n + 1)
    W_pos[:, b["rec"]] = (torch.arange(n + 1, **f64) / n).unsqueeze(-1)

    # Layer 1: rotating p_t back by one step, phi = 2 pi / (n + 1): p_t M = p_{t-1}.
    phi = 2 * math.pi / (n + 1)
    back = torch.tensor([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]], **f64)
    Q1 = torch.zeros(d, 2, **f64)
    Q1[b["pos"]] = p.beta1 * back
    K1 = torch.zeros(d, 2, **f64)
    K1[b["pos"]] = torch.eye(2, **f64)
    V1 = torch.zeros(d, 2, **f64)
    V1[b["tok"]] = torch.eye(2, **f64)
    O1 = torch.zeros(2, d, **f64)
    O1[:, b["prev"]] = torch.eye(2, **f64)

    # Layer 2: query [beta2 u_a ; 1] against key [prev_j ; lambda j + theta [j = 0]].
    Q2 = torch.zeros(d, 3, **f64)
    Q2[b["tok"], :2] = p.beta2 * torch.eye(2, **f64)
    Q2[b["const"], 2] = 1.0
    K2 = torch.zeros(d, 3, **f64)
    K2[b["prev"], :2] = torch.eye(2, **f64)
    K2[b["rec"], 2] = p.recency * n
    K2[b["bos"], 2] = p.sink
    V2 = torch.zeros(d, 2, **f64)
    V2[b["tok"]] = torch.eye(2, **f64)
    V2[b["bos"]] = token_points[S]
    O2 = torch.zeros(2, d, **f64)
    O2[:, b["out"]] = torch.eye(2, **f64)
    W_U = torch.zeros(d, S + 1, **f64)
    W_U[b["out"]] = token_points.T

    layers = [_attention(Q1, K1, V1, O1, kw), _attention(Q2, K2, V2, O2, kw)]
    return InductionTransformer(W_E.to(**kw), W_pos.to(**kw), layers, W_U.to(**kw))


def guarantees(model_kind: str, vocab_size: int, max_len: int) -> dict[str, float]:
    r"""What the theory promises for the *default* construction of this size.

    ``layer1``: the least weight on the previous token (:math:`\alpha`, or
    :math:`1 - \delta`); ``layer2``: the least weight on the induction key at which the argmax
    is right, :math:`1/(1+\rho)` (1/2 for one-hot). Checks compare the model against these,
    not against anything read from the model, so a mis-built model cannot lower its own bar.
    """
    vocab_size = _validate.positive_int("vocab_size", vocab_size)
    if model_kind == "two_layer":
        params = two_layer_parameters(max_len)
        layer1 = math.exp(params.beta1) / (math.exp(params.beta1) + max_len)
    elif model_kind == "compact":
        params = compact_parameters(vocab_size, max_len)
        layer1 = 1 - max_len * math.exp(-params.beta1 * params.position_gap)
    else:
        raise ValueError(f"model_kind must be 'two_layer' or 'compact', got {model_kind!r}")
    return {"layer1": layer1, "layer2": 1 / (1 + params.readout), "readout": params.readout}


