r"""Knowledge acquisition and extraction: synthetic facts with controlled multiplicity, the
relation-covering law, and an explicit one-layer attention + MLP model that follows it
(Xu & Chen, arXiv:2508.00901; v4 "Provable Knowledge Acquisition and Extraction in One-Layer
Transformers", v1-v3 "Filtering with Self-Attention and Storing with MLP ...").

Only the abstracts (v1, v3, v4) were read. v4's abstract says that fine-tuning need not revisit
every stored subject-answer pair but must *cover enough latent relation-template directions
through which facts were encoded during pre-training*; that extraction improves with
pre-training multiplicity and fine-tuning coverage and gets harder as the relation-template
universe grows; and that insufficient coverage leaves facts stored but inaccessible. The data
and the law below are our formalisation of that sentence [D], not the paper's theorem.

**Facts.** People :math:`p\in[P]`, relations :math:`r\in[R]`, each relation with a universe of
:math:`M` templates and its own :math:`V` answer values. Fact :math:`(p, r)` has value
:math:`v(p, r)` and is stated in pre-training with :math:`K` distinct templates
:math:`S_{p,r}\subseteq[M]`, a uniform :math:`K`-subset drawn independently for every fact
(:math:`K` is the multiplicity). Pre-training rows are ``(p, template(r, t), value)`` for
:math:`t\in S_{p,r}`; Q&A rows are ``(Q, question(r), p, A, value)``. A set of fine-tuned
people :math:`F` (:math:`|F| = n_f`) is revisited in Q&A; the others are tested.

**The relation-covering law [D].** Call template :math:`t` of relation :math:`r` *covered* if
some fine-tuned person's fact :math:`(p, r)` was stored with it: :math:`C_r = \bigcup_{p\in F}
S_{p,r}`. A tested fact is *reachable* if :math:`S_{p,r}\cap C_r\neq\emptyset`. Given the
tested fact's set, each fine-tuned set misses it with probability
:math:`\binom{M-K}{K}/\binom{M}{K}`, independently, so

.. math:: P(\text{unreachable}) = \Bigl[\binom{M-K}{K}\Big/\binom{M}{K}\Bigr]^{n_f}
          = \Bigl[\prod_{i=0}^{K-1}\frac{M-K-i}{M-i}\Bigr]^{n_f}
          \le e^{-n_fK^2/M},

which falls with :math:`K` (while :math:`2K\le M`; it is 0 beyond) and with :math:`n_f`, and
rises with :math:`M`: the three trends of the v4 abstract.

**The construction** (:class:`StorageTransformer`, explicit weights, one-hot embeddings, no
positions). *Filtering with attention*: the last position's single head gives every content
token (person, template, question) logit 0 and the format tokens ``Q``, ``A`` logit
:math:`-g`; the value map keeps a person's and a template's one-hot vector, maps
``question(r)`` to :math:`\sum_{t\in C_r}e_{(r,t)}` (the trigger an ideal fine-tuning learns:
the covered template directions) and the format and value tokens to 0. *Storing with the MLP*:
one ReLU neuron per stored pair :math:`(p, r, t)`, :math:`t\in S_{p,r}`, with input weights
:math:`e_p + e_{(r,t)}`, bias :math:`-\theta`, :math:`\theta = 3/4`, and output
:math:`4\beta e_{v(p,r)}`. A pre-training row's content weights are :math:`1/2`, so exactly
the neuron :math:`(p,r,t)` fires, at :math:`1/4`: the answer logit is :math:`\beta`, every
other logit of the :math:`N`-token vocabulary 0, and the cross-entropy is exactly
:math:`\log(1 + (N-1)e^{-\beta})` (the Bayes level is 0: facts are deterministic). A Q&A row's
content weights are :math:`w = 1/(2+2e^{-g}) > 3/8` for :math:`g > \log 3`, so the neurons that
fire are exactly :math:`(p, r, t)`, :math:`t\in S_{p,r}\cap C_r`, all voting for
:math:`v(p,r)`: a reachable fact is extracted, an unreachable one gets all-zero logits
(chance, :math:`1/N` under a uniform tie-break). The MLP is a one-neuron-per-stored-pair lookup,
the simplest member of the ``fact-mlps`` storage family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

import torch
from torch import nn

from constructions._roles import oracle
from constructions._validate import device as device_arg
from constructions._validate import (
    float_dtype,
    instance,
    positive_float,
    positive_int,
    real_tensor,
    token_tensor,
)
from constructions._validate import seed as seed_arg

THRESHOLD = 0.75      # the MLP bias: between the one-token (<= 1/2) and two-token (> 3/4) drives


def _law_args(n_templates: object, multiplicity: object, n_finetune: object
              ) -> tuple[int, int, int]:
    M = positive_int("n_templates", n_templates)
    K = positive_int("multiplicity", multiplicity)
    n_f = positive_int("n_finetune", n_finetune, minimum=0)
    if K > M:
        raise ValueError(f"multiplicity must be <= n_templates={M}, got {K}")
    return M, K, n_f


def miss_probability(n_templates: int, multiplicity: int, n_finetune: int) -> Fraction:
    r"""Exact :math:`[\binom{M-K}{K}/\binom{M}{K}]^{n_f}`: the probability that a tested fact's
    :math:`K` templates meet none of the templates covered by :math:`n_f` fine-tuned facts of
    its relation (module docstring)."""
    M, K, n_f = _law_args(n_templates, multiplicity, n_finetune)
    return Fraction(math.comb(M - K, K), math.comb(M, K)) ** n_f


def extraction_level(n_templates: int, multiplicity: int, n_finetune: int,
                     n_vocab: int) -> Fraction:
    """Expected extraction accuracy of the covering oracle: a reachable fact is answered, an
    unreachable one is a uniform guess among ``n_vocab`` tokens."""
    miss = miss_probability(n_templates, multiplicity, n_finetune)
    return 1 - miss + miss / positive_int("n_vocab", n_vocab)


def enumerated_miss_probability(n_templates: int, multiplicity: int, n_finetune: int
                                ) -> Fraction:
    """The same probability by enumerating every tested set and every tuple of fine-tuned
    sets (exact, independent of the closed form; exponential, for small sizes only)."""
    M, K, n_f = _law_args(n_templates, multiplicity, n_finetune)
    subsets = [frozenset(c) for c in combinations(range(M), K)]
    if len(subsets) ** (n_f + 1) > 2_000_000:
        raise ValueError(f"n_templates={M}, multiplicity={K}, n_finetune={n_f}: "
                         f"{len(subsets)}^{n_f + 1} configurations is too many to enumerate")
    misses, total = 0, 0

    def walk(tested: frozenset, depth: int, covered: frozenset) -> tuple[int, int]:
        if depth == n_f:
            return int(not (tested & covered)), 1
        m = t = 0
        for s in subsets:
            a, b = walk(tested, depth + 1, covered | s)
            m, t = m + a, t + b
        return m, t

    for tested in subsets:
        a, b = walk(tested, 0, frozenset())
        misses, total = misses + a, total + b
    return Fraction(misses, total)


@dataclass(frozen=True)
class FactWorld:
    """Facts ``values[p, r]`` (in ``[0, n_values)``), stored templates ``stored[p, r]``
    (``multiplicity`` sorted distinct indices in ``[0, n_templates)``) and the fine-tuned
    people ``finetune`` (bool, ``(n_people,)``). Token layout: people, then templates
    (relation-major), then questions, ``Q``, ``A``, then the values (relation-major)."""

    n_people: int
    n_relations: int
    n_templates: int
    multiplicity: int
    n_values: int
    values: torch.Tensor       # (P, R) long
    stored: torch.Tensor       # (P, R, K) long
    finetune: torch.Tensor     # (P,) bool

    @property
    def n_vocab(self) -> int:
        R = self.n_relations
        return self.n_people + R * self.n_templates + R + 2 + R * self.n_values

    def template_token(self, r, t):
        return self.n_people + r * self.n_templates + t

    def question_token(self, r):
        return self.n_people + self.n_relations * self.n_templates + r

    @property
    def q_token(self) -> int:
        return self.n_people + self.n_relations * (self.n_templates + 1)

    @property
    def a_token(self) -> int:
        return self.q_token + 1

    def value_token(self, r, v):
        return self.a_token + 1 + r * self.n_values + v

    def covered(self) -> torch.Tensor:
        """``(R, M)`` bool: template t of relation r is covered by a fine-tuned fact."""
        cover = torch.zeros(self.n_relations, self.n_templates, dtype=torch.bool)
        for r in range(self.n_relations):
            cover[r, self.stored[self.finetune, r].flatten()] = True
        return cover

    def reachable(self) -> torch.Tensor:
        """``(P, R)`` bool: fact (p, r) was stored with a covered template."""
        cover = self.covered()
        rel = torch.arange(self.n_relations)[None, :, None]
        return cover[rel, self.stored].any(-1)

    def pretraining_rows(self) -> torch.Tensor:
        """``(P R K, 3)``: ``(person, template, value)`` for every stored pair."""
        P, R, K = self.n_people, self.n_relations, self.multiplicity
        p = torch.arange(P)[:, None, None].expand(P, R, K)
        r = torch.arange(R)[None, :, None].expand(P, R, K)
        rows = torch.stack([p, self.template_token(r, self.stored),
                            self.value_token(r, self.values[:, :, None].expand(P, R, K))], -1)
        return rows.reshape(-1, 3)

    def qa_rows(self, people: torch.Tensor | None = None) -> torch.Tensor:
        """``(|people| R, 5)``: ``(Q, question(r), person, A, value)``; default: every
        person, in person-major order."""
        people = torch.arange(self.n_people) if people is None else people
        n, R = len(people), self.n_relations
        p = people[:, None].expand(n, R)
        r = torch.arange(R)[None, :].expand(n, R)
        rows = torch.stack([torch.full_like(p, self.q_token), self.question_token(r), p,
                            torch.full_like(p, self.a_token),
                            self.value_token(r, self.values[people])], -1)
        return rows.reshape(-1, 5)


@oracle  # the task's definition: a seeded world of facts, templates and splits
def fact_world(n_people: int = 40, n_relations: int = 2, n_templates: int = 4,
               multiplicity: int = 2, n_values: int = 8, *, n_finetune: int | None = None,
               seed: int = 0) -> FactWorld:
    """A seeded :class:`FactWorld`: uniform values, a uniform ``multiplicity``-subset of the
    templates per fact, and the first ``n_finetune`` people (default half) fine-tuned."""
    P = positive_int("n_people", n_people, minimum=2)
    R = positive_int("n_relations", n_relations)
    M, K, _ = _law_args(n_templates, multiplicity, 0)
    V = positive_int("n_values", n_values, minimum=2)
    n_f = P // 2 if n_finetune is None else positive_int("n_finetune", n_finetune, minimum=0)
    if n_f >= P:
        raise ValueError(f"n_finetune must be < n_people={P} (some people are tested), got {n_f}")
    g = torch.Generator().manual_seed(seed_arg("seed", seed))
    values = torch.randint(V, (P, R), generator=g)
    stored = torch.rand(P, R, M, generator=g).argsort(-1)[..., :K].sort(-1).values
    finetune = torch.arange(P) < n_f
    return FactWorld(P, R, M, K, V, values, stored, finetune)


class StorageTransformer(nn.Module):
    """The explicit one-layer attention + MLP model of the module docstring. ``forward``
    takes token rows ``(B, T)`` and returns the next-token logits at the last position
    ``(B, N)``; ``attention`` returns the last position's weights ``(B, T)``."""

    def __init__(self, world: FactWorld, *, beta: float = 10.0, gap: float = 10.0,
                 dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu"):
        super().__init__()
        self.world = instance("world", world, FactWorld)
        self.beta = positive_float("beta", beta)
        self.gap = positive_float("gap", gap)
        if self.gap <= math.log(3):
            raise ValueError(f"gap must exceed log 3 (so a Q&A row's content weight is > 3/8),"
                             f" got {gap}")
        dtype, dev = float_dtype("dtype", dtype), device_arg("device", device)
        w, N = world, world.n_vocab
        P, R, M = w.n_people, w.n_relations, w.n_templates
        # attention: a key's logit depends only on its token's kind (content 0, format -gap)
        key_logit = torch.zeros(N, dtype=dtype)
        key_logit[[w.q_token, w.a_token]] = -self.gap
        # value map: people and templates keep their one-hot vector; a question is the sum of
        # its relation's covered template directions; format and value tokens map to 0
        value = torch.zeros(N, N, dtype=dtype)
        content = torch.arange(P + R * M)
        value[content, content] = 1.0
        cover = w.covered()
        for r in range(R):
            value[w.question_token(r), w.template_token(r, torch.nonzero(cover[r])[:, 0])] = 1.0
        # MLP: one neuron per stored pair (p, r, t)
        rows = w.pretraining_rows()                                     # (P R K, 3)
        W_in = torch.zeros(len(rows), N, dtype=dtype)
        W_in[torch.arange(len(rows)), rows[:, 0]] = 1.0
        W_in[torch.arange(len(rows)), rows[:, 1]] = 1.0
        W_out = torch.zeros(N, len(rows), dtype=dtype)
        W_out[rows[:, 2], torch.arange(len(rows))] = 4 * self.beta
        self.register_buffer("key_logit", key_logit.to(dev))
        self.register_buffer("value_map", value.to(dev))
        self.register_buffer("W_in", W_in.to(dev))
        self.register_buffer("b_in", torch.full((len(rows),), -THRESHOLD, dtype=dtype,
                                                device=dev))
        self.register_buffer("W_out", W_out.to(dev))

    def _tokens(self, tokens: object) -> torch.Tensor:
        return token_tensor("tokens", tokens, vocab_size=self.world.n_vocab, ndim=2)

    def attention(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = self._tokens(tokens).to(self.key_logit.device)
        return torch.softmax(self.key_logit[tokens], -1)                 # (B, T)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = self._tokens(tokens).to(self.key_logit.device)
        attn = torch.softmax(self.key_logit[tokens], -1)                  # (B, T)
        mixed = torch.einsum("bt,btn->bn", attn, self.value_map[tokens])  # (B, N)
        hidden = torch.relu(mixed @ self.W_in.T + self.b_in)              # (B, neurons)
        return hidden @ self.W_out.T                                      # (B, N)


def storage_transformer(world: FactWorld, *, beta: float = 10.0, gap: float = 10.0,
                        dtype: torch.dtype = torch.float64,
                        device: torch.device | str = "cpu") -> StorageTransformer:
    """Build :class:`StorageTransformer` for ``world``."""
    return StorageTransformer(world, beta=beta, gap=gap, dtype=dtype, device=device)


def pretraining_loss(n_vocab: int, beta: float) -> float:
    r"""The construction's exact per-row answer cross-entropy :math:`\log(1+(N-1)e^{-\beta})`
    (``log1p`` keeps it accurate when the loss is tiny)."""
    N = positive_int("n_vocab", n_vocab, minimum=2)
    return math.log1p((N - 1) * math.exp(-positive_float("beta", beta)))


def tie_break_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per row, the expected accuracy of a uniform tie-break among the maximal logits:
    ``[target is maximal] / #maximal``."""
    logits = real_tensor("logits", logits, ndim=2)
    if logits.shape[1] == 0:
        raise ValueError(f"logits must have at least one column, got shape {tuple(logits.shape)}")
    targets = token_tensor("targets", targets, vocab_size=logits.shape[1], ndim=1)
    if len(targets) != len(logits):
        raise ValueError(f"targets must have {len(logits)} entries (one per row of logits), "
                         f"got {len(targets)}")
    top = logits.max(-1, keepdim=True).values
    tied = logits == top
    hit = tied.gather(1, targets[:, None].to(logits.device))[:, 0]
    return hit.double() / tied.sum(-1).double()
