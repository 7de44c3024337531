r"""Stress cases for circuit discovery: backup heads, a distractor sub-circuit and superposed
features in one head, on a saturated induction construction whose every number is exact in
floating point.

**The saturated induction model** (:func:`backup_induction`, :func:`distractor_induction`,
:func:`superposed_induction`): two
layers of two heads, one-hot residual blocks tok (:math:`S+1`, BOS last), pos
(:math:`n+1`), prev (:math:`S+1`), out (:math:`S+1`), const (1), and, in the distractor, cur
(:math:`S+1`) and where (:math:`n+1`). Every score gap is a multiple of :math:`G = 2048`:

* a previous-token head ``a0.h0``: score :math:`G[j = t-1]`, value tok, output into prev;
* the induction head ``a1.h0``: score :math:`\beta\,\mathrm{prev}_j[\sigma_i] + Gj +
  \theta[j=0]` with :math:`\theta = G(n+1)`, :math:`\beta = G(n+2)`, value tok (BOS
  :math:`\mapsto \bot`) into out, which the unembedding reads.

The row maximum of every score row beats every other visible key by at least :math:`G`, so
softmax gives weight exactly 1 to it and exactly 0 elsewhere: :math:`e^{0} = 1` and
:math:`e^{-x} = 0` for :math:`x \ge 2048` (far below the least subnormal,
:math:`e^{-745.2}`; glibc and Sleef return 0). Scores are integers below :math:`2^{53}`, values
0 or 1, so every sum is exact, and the final logits are exactly one-hot: :math:`e_\tau` when
the final token occurred before (:math:`\tau` the token after its latest occurrence), else
:math:`e_\bot`.

* :func:`backup_induction`: ``a0.h1`` is a **backup** previous-token head, identical to
  ``a0.h0`` and writing into the same prev block; ``a1.h1`` is inert (zero weights). A key
  after the occurrence then has :math:`\mathrm{prev}_j[a] = 2`; with one of the two heads'
  records corrupted it is still 1, which still beats every other key by :math:`\ge G`. So
  each previous-token head alone suffices, neither is necessary alone, and the pair is.
* :func:`distractor_induction`: ``a0.h1`` is a current-token head (score :math:`G[j = t]`,
  tok into cur), ``a1.h1`` a duplicate-token head that attends to the *earliest* key holding
  the current token (score :math:`\beta[\mathrm{cur}_j = \mathrm{cur}_i] - Gj`) and copies
  its position into where; the unembedding maps where's coordinate :math:`j` to
  :math:`j/8` on *every* class. The distractor is active (its output moves with the earliest
  occurrence) but unused: it adds the same exact dyadic number to every logit, so every logit
  difference is unchanged bit for bit.

* :func:`superposed_induction`: ``a0.h1`` and ``a1.h1`` are inert, and the induction head's
  value carries a second feature beside the token: the flag :math:`b = w\cdot\mathrm{prev}_j`
  of the attended key's record, :math:`w = (1, \dots, 1, -1, 0)` (:math:`+1` for a token
  below the marker :math:`\mu = S-1`, :math:`-1` for :math:`\mu`, 0 for BOS), which
  :math:`W_O` writes along :math:`\mathbf 1`, the all-ones direction of the very out block
  that holds the token: :math:`S+2` feature directions (:math:`e_0, \dots, e_S` and
  :math:`\mathbf 1`) in :math:`S+1` dimensions, :math:`\langle \mathbf 1, e_c\rangle = 1`.
  The final logits are :math:`e_\tau + b\mathbf 1`, and both features decode exactly: a
  logit difference :math:`\ell_x - \ell_y` annihilates :math:`\mathbf 1`, and the logit sum
  is :math:`1 + (S+1)b` because the token feature is one-hot (its coordinates sum to exactly
  1: the sparsity that makes superposition lossless). The earlier-occurrence corruption moves
  *where* the head attends (the token and the flag with it); :func:`mark_final_token`
  renames the repeated token :math:`a` to :math:`\mu` at both of its positions, so the head
  attends to the same key and copies the same token, and only the flag turns to :math:`-1`.
  Their circuits have the same nodes and differ in one input of ``a1.h0``: its key (the
  record's match) or its value (the record's flag), :data:`SUPERPOSED_CIRCUITS`.

Sources: backup heads (Wang et al. 2022, "Interpretability in the Wild", arXiv 2211.00593,
the backup name movers), distractors as stress tests of circuit discovery, and superposition
(Elhage et al. 2022, "Toy Models of Superposition", arXiv 2209.10652: more features than
dimensions, decodable when the features are sparse) are the field's; these constructions are
ours.
"""

from __future__ import annotations

import torch

from constructions import _validate
from constructions.induction_heads.model import InductionTransformer
from constructions.layers import Attention, resolve

GAP = 2048.0  # every score gap; e^-2048 = 0 exactly in float64 and float32

BACKUP_PATHS = {
    "primary": ("input->a0.h0<v>", "a0.h0->a1.h0<k>"),
    "backup": ("input->a0.h1<v>", "a0.h1->a1.h0<k>"),
}
OUTPUT_EDGE = "a1.h0->logits"
DISTRACTOR_EDGES = ("input->a0.h1<v>", "a0.h1->a1.h1<q>", "a0.h1->a1.h1<k>", "a1.h1->logits")
SUPERPOSED_CIRCUITS = {    # per feature: its corruption's one minimal circuit (same nodes)
    "match": ("input->a0.h0<v>", "a0.h0->a1.h0<k>", "a1.h0->logits"),
    "flag": ("input->a0.h0<v>", "a0.h0->a1.h0<v>", "a1.h0->logits"),
}


def _blocks(**sizes: int) -> dict[str, slice]:
    out, start = {}, 0
    for name, size in sizes.items():
        out[name] = slice(start, start + size)
        start += size
    return out


def _sizes(vocab_size: object, max_len: object) -> tuple[int, int]:
    S = _validate.positive_int("vocab_size", vocab_size)
    n = _validate.positive_int("max_len", max_len)
    if n > 1000:
        raise ValueError(f"max_len must be at most 1000 (scores stay exact integers), got {n}")
    return S, n


def _saturated(S: int, n: int, kind: str, kw: dict) -> InductionTransformer:
    """The saturated two-layer, two-head model (see the module docstring); ``kind`` is
    ``"backup"``, ``"distractor"`` or ``"superposed"``."""
    distractor, superposed = kind == "distractor", kind == "superposed"
    extra = {"cur": S + 1, "where": n + 1} if distractor else {}
    b = _blocks(tok=S + 1, pos=n + 1, prev=S + 1, out=S + 1, const=1, **extra)
    d = max(s.stop for s in b.values())
    f64 = {"dtype": torch.float64}
    eye = torch.eye
    W_E = torch.zeros(S + 1, d, **f64)
    W_E[:, b["tok"]] = eye(S + 1, **f64)
    W_E[:, b["const"]] = 1.0
    W_pos = torch.zeros(n + 1, d, **f64)
    W_pos[:, b["pos"]] = eye(n + 1, **f64)

    def head(width_qk: int, width_v: int):
        return (torch.zeros(d, width_qk, **f64), torch.zeros(d, width_qk, **f64),
                torch.zeros(d, width_v, **f64), torch.zeros(width_v, d, **f64))

    # the previous-token head: query e_t -> G e_{t-1}, key e_j; tok -> prev
    prev_head = head(n + 1, S + 1)
    prev_head[0][b["pos"]] = GAP * eye(n + 1, **f64).roll(-1, dims=1)
    prev_head[0][b["pos"].start, n] = 0.0      # BOS has no previous token
    prev_head[1][b["pos"]] = eye(n + 1, **f64)
    prev_head[2][b["tok"]] = eye(S + 1, **f64)
    prev_head[3][:, b["prev"]] = eye(S + 1, **f64)
    if distractor:   # the current-token head: query e_t -> G e_t, key e_j; tok -> cur
        second = head(n + 1, S + 1)
        second[0][b["pos"]] = GAP * eye(n + 1, **f64)
        second[1][b["pos"]] = eye(n + 1, **f64)
        second[2][b["tok"]] = eye(S + 1, **f64)
        second[3][:, b["cur"]] = eye(S + 1, **f64)
    elif superposed:  # inert
        second = head(n + 1, S + 1)
    else:            # the backup previous-token head: the same maps
        second = tuple(w.clone() for w in prev_head)

    # the induction head: query [beta e_a ; 1], key [prev_j ; G j + theta [j = 0]]
    beta, theta = GAP * (n + 2), GAP * (n + 1)
    induction = head(S + 2, S + 2 if superposed else S + 1)
    induction[0][b["tok"].start:b["tok"].start + S, :S] = beta * eye(S, **f64)
    induction[0][b["const"], S + 1] = 1.0
    induction[1][b["prev"], : S + 1] = eye(S + 1, **f64)
    induction[1][b["pos"], S + 1] = GAP * torch.arange(n + 1, **f64)
    induction[1][b["pos"].start, S + 1] = theta
    induction[2][b["tok"], : S + 1] = eye(S + 1, **f64)
    induction[3][: S + 1, b["out"]] = eye(S + 1, **f64)
    if superposed:   # the flag b: +1 on an unmarked token's record, -1 on the marker's, 0 on
        # BOS's, written along the all-ones direction of out (superposed on every token's)
        induction[2][b["prev"], S + 1] = torch.tensor([1.0] * (S - 1) + [-1.0, 0.0], **f64)
        induction[3][S + 1, b["out"]] = 1.0
    if distractor:   # the duplicate-token head: the earliest key holding the current token
        other = head(S + 2, n + 1)
        other[0][b["cur"], : S + 1] = beta * eye(S + 1, **f64)
        other[0][b["const"], S + 1] = 1.0
        other[1][b["cur"], : S + 1] = eye(S + 1, **f64)
        other[1][b["pos"], S + 1] = -GAP * torch.arange(n + 1, **f64)
        other[2][b["pos"]] = eye(n + 1, **f64)
        other[3][:, b["where"]] = eye(n + 1, **f64)
    else:            # inert
        other = head(S + 2, S + 1)

    W_U = torch.zeros(d, S + 1, **f64)
    W_U[b["out"]] = eye(S + 1, **f64)
    if distractor:   # position j of where adds j/8 to every class: exact dyadic
        W_U[b["where"]] = (torch.arange(n + 1, **f64) / 8).unsqueeze(-1).expand(n + 1, S + 1)

    def stacked(x: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
        # heads of one layer share the value width: zero-pad the narrower (exact zeros)
        width = max(x.shape[dim], y.shape[dim])
        pad = [torch.cat([w, w.new_zeros(*(width - w.shape[dim] if k == dim else w.shape[k]
                                            for k in range(2)))], dim) for w in (x, y)]
        return torch.stack(pad).to(**kw)

    def layer(h0, h1) -> Attention:
        return Attention(*(stacked(x, y, 0 if k == 3 else 1)
                           for k, (x, y) in enumerate(zip(h0, h1, strict=True))), causal=True)
    return InductionTransformer(W_E.to(**kw), W_pos.to(**kw),
                                [layer(prev_head, second), layer(induction, other)],
                                W_U.to(**kw))


def backup_induction(vocab_size: int, max_len: int, *, dtype: torch.dtype = torch.float64,
                     device=None) -> InductionTransformer:
    r"""The saturated induction model with a backup previous-token head ``a0.h1`` (identical
    to ``a0.h0``, writing into the same prev block) and an inert ``a1.h1``; exact in
    floating point (module docstring). Under :func:`~constructions.circuits.
    resample_earlier_occurrence` its two minimal circuits are :data:`BACKUP_PATHS` ``primary``
    or ``backup``, each with :data:`OUTPUT_EDGE`."""
    S, n = _sizes(vocab_size, max_len)
    return _saturated(S, n, "backup", resolve(dtype, device))


def distractor_induction(vocab_size: int, max_len: int, *,
                         dtype: torch.dtype = torch.float64, device=None
                         ) -> InductionTransformer:
    r"""The saturated induction model with a distractor sub-circuit: a current-token head
    ``a0.h1`` feeding a duplicate-token head ``a1.h1`` whose output adds
    :math:`j/8` to every logit, :math:`j` the earliest position holding the current token;
    exact in floating point (module docstring). Active under
    :func:`~constructions.circuits.resample_earlier_occurrence` (:math:`j` moves from the
    occurrence to the final position), unused by any logit difference."""
    S, n = _sizes(vocab_size, max_len)
    return _saturated(S, n, "distractor", resolve(dtype, device))


def superposed_induction(vocab_size: int, max_len: int, *,
                         dtype: torch.dtype = torch.float64, device=None
                         ) -> InductionTransformer:
    r"""The saturated induction model whose induction head ``a1.h0`` carries two features in
    superposition (module docstring): the token it copies, :math:`e_\tau` in out, and a flag
    :math:`b` of the token it matched (:math:`+1` for a token below the marker
    :math:`\mu = S - 1`, :math:`-1` for :math:`\mu`, 0 at BOS), written along the all-ones
    direction of the same out block; ``a0.h1`` and ``a1.h1`` are inert. The final logits are
    :math:`e_\tau + b\mathbf 1`: a logit difference reads the copied token, the logit sum
    :math:`1 + (S+1)b` the flag. Exact in floating point. On a prompt without the marker, the
    one minimal circuit under :func:`~constructions.circuits.resample_earlier_occurrence` (for
    either readout) is :data:`SUPERPOSED_CIRCUITS` ``match``, and under
    :func:`mark_final_token` (for the logit sum; the logit difference does not move) ``flag``."""
    S, n = _sizes(vocab_size, max_len)
    return _saturated(S, n, "superposed", resolve(dtype, device))


def mark_final_token(tokens: torch.Tensor, vocab_size: int) -> torch.Tensor:
    r"""The corrupted prompt: every occurrence of the final token :math:`a` replaced by the
    marker :math:`\mu = S - 1` (``vocab_size - 1``), which the prompt must not hold.

    ``tokens`` ``(B, n)`` or ``(n,)``. The induction head of :func:`superposed_induction` still
    matches the same key (query and record change together) and copies the same token; only
    the flag of the matched token turns from :math:`+1` to :math:`-1`."""
    S = _validate.positive_int("vocab_size", vocab_size)
    tokens = _validate.token_tensor("tokens", tokens, vocab_size=S)
    batch = tokens if tokens.ndim == 2 else tokens.unsqueeze(0)
    if batch.shape[0] == 0 or batch.shape[-1] == 0:
        raise ValueError(f"tokens must hold at least one non-empty prompt, got shape "
                         f"{tuple(tokens.shape)}")
    if bool((batch == S - 1).any()):
        raise ValueError(f"tokens must not hold the marker {S - 1} (vocab_size - 1)")
    corrupted = torch.where(batch == batch[:, -1:], S - 1, batch)
    return corrupted if tokens.ndim == 2 else corrupted[0]
