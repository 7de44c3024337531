r"""Fact-storing MLPs and associative memories.

Sources: Dugan et al. (2025, arXiv:2512.00207), "Constructing Efficient Fact-Storing MLPs for
Transformers"; Nichani, Lee, Bietti (2024, arXiv:2412.06538); Cabannes, Dohmatob, Bietti
(2024, arXiv:2310.02984); Meng et al. (2022, arXiv:2202.05262, ROME; code kmeng01/rome).

The task (the oracle every check and experiment shares)
--------------------------------------------------------
Keys :math:`k_1, \dots, k_F \in \mathbb R^d`, values :math:`v_1, \dots, v_{|V|} \in \mathbb
R^{d_v}` and a fact map :math:`f: [F] \to [|V|]`. A map :math:`g: \mathbb R^d \to \mathbb
R^{d_v}` *stores* the facts iff every key decodes to its value under dot-product decoding,

.. math::

    \mu_i(g) = \langle g(k_i), v_{f(i)}\rangle - \max_{j \ne f(i)} \langle g(k_i), v_j\rangle > 0
    \quad\text{for every } i,

which is what a transformer's unembedding does with the MLP output. ``_storage_margins``
returns the :math:`\mu_i` and :func:`recall` the fraction stored and the smallest margin.

Constructions
-------------
* :func:`linear_associative_memory`: :math:`W = \sum_i q_i\, v_{f(i)} k_i^\top` (Hebbian outer
  products; Nichani et al., Cabannes et al.), with optional weights :math:`q_i`.
* :func:`encoder_decoder_mlp`: the encoder-decoder MLP of Dugan et al. in its single-bucket
  form (see its docstring for the derivation of the threshold sizes).
* :func:`fact_transformer`: a one-layer transformer whose MLP is a swappable fact store.
* :func:`rome_edit` and :func:`rome_edit_as_coded`: ROME's rank-one update, as in the paper and
  as in the released code.

Everything is float64 by default; the builders take ``dtype=`` and ``device=``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions.layers import MLP, Attention, fixed, resolve
from constructions.residual_layout import NO_SEQUENCE

# The projected-value decoding margin below which a code dimension is rejected, relative to
# max_j |P v_j|^2. The encoder's exact solve carries a relative error of order gamma_n ~ 1e-12
# (n ~ 1e4 operations at u = 1.1e-16); sqrt(u) = 1.05e-8 keeps the decoding margin four orders
# of magnitude above it, so a correct solve can never flip an answer.
DECODE_FLOOR = math.sqrt(torch.finfo(torch.float64).eps / 2)


# --- the task ---------------------------------------------------------------------------------

def _fact_set(keys, values, facts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate a fact set: keys ``(F, d)``, values ``(|V|, d_v)``, facts ``(F,)`` in ``[0, |V|)``.

    Returns float64 keys and values and long facts. Raises ``ValueError`` naming the argument
    whose shape, range or finiteness is wrong.
    """
    keys = _validate.real_tensor("keys", keys, ndim=2).to(torch.float64)
    values = _validate.real_tensor("values", values, ndim=2).to(torch.float64)
    if keys.shape[0] < 1 or keys.shape[1] < 1:
        raise ValueError(f"keys must have at least one row and one column, got {tuple(keys.shape)}")
    if values.shape[0] < 1 or values.shape[1] < 1:
        raise ValueError(f"values must have at least one row and one column, "
                         f"got {tuple(values.shape)}")
    facts = _validate.token_tensor("facts", facts, vocab_size=values.shape[0], ndim=1)
    if facts.shape[0] != keys.shape[0]:
        raise ValueError(f"facts must have one entry per key ({keys.shape[0]}), "
                         f"got shape {tuple(facts.shape)}")
    return keys, values, facts.to(keys.device)


def _conflicting_keys(keys: torch.Tensor, facts: torch.Tensor) -> tuple[int, int] | None:
    """A pair ``(i, j)`` of identical keys with different facts (an infeasible set), or None."""
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    first: dict[int, int] = {}
    for i, group in enumerate(inverse.tolist()):
        j = first.setdefault(group, i)
        if facts[i] != facts[j]:
            return j, i
    return None


def _storage_margins(model, keys, values, facts) -> torch.Tensor:
    r"""Per-key margins :math:`\mu_i = \langle g(k_i), v_{f(i)} - v_j\rangle` minimised over
    :math:`j \ne f(i)`; ``+inf`` when there is a single value. Positive means stored."""
    if not callable(model):
        raise TypeError(f"model must be callable (an nn.Module), got {type(model).__name__}")
    keys, values, facts = _fact_set(keys, values, facts)
    with torch.no_grad():
        try:
            out = model(keys)
        except (ValueError, RuntimeError) as error:
            raise ValueError(f"model cannot be applied to keys of shape {tuple(keys.shape)}: "
                             f"{error}") from None
        out = out.to(torch.float64)
    if out.shape != (keys.shape[0], values.shape[1]):
        raise ValueError(f"model must map keys {tuple(keys.shape)} to outputs of width "
                         f"{values.shape[1]} (that of values), got shape {tuple(out.shape)}")
    scores = out @ values.T
    correct = scores.gather(1, facts[:, None]).squeeze(1)
    rivals = scores.scatter(1, facts[:, None], float("-inf"))
    return correct - rivals.amax(dim=1)


def recall(model, keys, values, facts) -> tuple[float, float]:
    """``(accuracy, minimum margin)``: the fraction of keys stored and the smallest margin."""
    margins = _storage_margins(model, keys, values, facts)
    return float((margins > 0).double().mean()), float(margins.min())


# --- the linear associative memory ------------------------------------------------------------

class LinearAssociativeMemory(nn.Module):
    r""":math:`g(k) = W k` with :math:`W \in \mathbb R^{d_v\times d}` (row inputs: ``k @ W.T``)."""

    def __init__(self, W: torch.Tensor) -> None:
        super().__init__()
        self.W = fixed(_validate.real_tensor("W", W, ndim=2))

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return [f"{NO_SEQUENCE} (a linear map on single vectors)"]

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        if k.shape[-1] != self.W.shape[1]:
            raise ValueError(f"k must have width {self.W.shape[1]}, got shape {tuple(k.shape)}")
        return k.to(self.W.dtype) @ self.W.T


def linear_associative_memory(keys, values, facts, *, weights=None,
                              dtype: torch.dtype = torch.float64,
                              device=None) -> LinearAssociativeMemory:
    r"""The Hebbian memory :math:`W = \sum_i q_i\, v_{f(i)} k_i^\top` (default :math:`q_i = 1`).

    Key :math:`i` scores value :math:`j` by
    :math:`\langle Wk_i, v_j\rangle = q_i\lVert k_i\rVert^2\langle v_{f(i)}, v_j\rangle +
    \sum_{i' \ne i} q_{i'}\langle k_{i'}, k_i\rangle\langle v_{f(i')}, v_j\rangle`: a signal
    plus crosstalk. With random near-orthogonal unit embeddings the crosstalk is a sum of about
    :math:`F` terms of size :math:`1/d`, so recall is exact while :math:`F \lesssim d^2/\log`
    (Nichani et al. 2024); weights :math:`q` implement the thresholded and frequency-weighted
    memories of Cabannes et al. (2024).
    """
    keys, values, facts = _fact_set(keys, values, facts)
    if weights is None:
        weights = torch.ones(keys.shape[0], dtype=torch.float64)
    weights = _validate.real_tensor("weights", weights, shape=(keys.shape[0],)).to(torch.float64)
    W = (values[facts] * weights[:, None]).T @ keys
    return LinearAssociativeMemory(W.to(**resolve(dtype, device)))


# --- the encoder-decoder MLP -----------------------------------------------------------------

def value_margin(values: torch.Tensor, used: torch.Tensor | None = None) -> float:
    r""":math:`\gamma = \min_{k \in U,\, j \ne k} (\lVert v_k\rVert^2 - \langle v_k, v_j\rangle)
    / \max_j \lVert v_j\rVert^2` over the used values :math:`U` (all by default).

    :math:`\gamma > 0` iff every used value decodes itself: :math:`\arg\max_j\langle v_k,
    v_j\rangle = k`. It is the margin in the Johnson-Lindenstrauss bound of
    :func:`jl_code_dim`; ``+inf`` for a single value.
    """
    values = _validate.nonempty("values", _validate.real_tensor("values", values, ndim=2))
    values = values.to(torch.float64)
    if used is not None:
        used = _validate.nonempty("used", _validate.token_tensor(
            "used", used, vocab_size=values.shape[0], ndim=1))
    if values.shape[0] < 2:
        return math.inf
    gram = values @ values.T
    gaps = gram.diagonal()[:, None] - gram
    gaps.fill_diagonal_(math.inf)
    if used is not None:
        gaps = gaps[torch.unique(used)]
    return float(gaps.min() / gram.diagonal().max())


def _projection_decoding_margin(values: torch.Tensor, projection: torch.Tensor,
                               used: torch.Tensor | None = None) -> float:
    r"""The relative decoding margin of projected values,
    :math:`\min_{k\in U,\, j\ne k}\langle Pv_k, P(v_k - v_j)\rangle / \max_j\lVert Pv_j\rVert^2`.

    Positive iff every used code :math:`c = Pv_k` decodes to :math:`k` through
    :math:`\arg\max_j\langle c, Pv_j\rangle` (``+inf`` for a single value, ``-inf`` when all
    projected values vanish).
    """
    if values.shape[0] < 2:
        return math.inf
    projected = values @ projection.T
    if float(projected.pow(2).sum(1).max()) == 0:
        return -math.inf
    return value_margin(projected, used)


def orthonormal_projection(d_v: int, m: int, seed: int) -> torch.Tensor:
    """The first ``m`` rows of a Haar-random orthogonal ``(d_v, d_v)`` matrix (seeded).

    Rows are orthonormal, so ``P @ P.T = I_m`` and ``m = d_v`` gives ``P.T @ P = I``: no
    compression. Smaller ``m`` is a random projection, with the Johnson-Lindenstrauss
    guarantees of a Gaussian one (Dasgupta & Gupta 2003). Nested: row r never depends on m.
    """
    d_v = _validate.positive_int("d_v", d_v)
    m = _validate.positive_int("m", m)
    seed = _validate.seed("seed", seed)
    if m > d_v:
        raise ValueError(f"m must be <= d_v = {d_v}, got {m}")
    generator = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(d_v, d_v, generator=generator, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r))).T[:m].contiguous()


def smallest_code_dim(values: torch.Tensor, used: torch.Tensor, seed: int) -> int | None:
    """The smallest ``m`` at which the seeded projection decodes every used value, or None."""
    values = _validate.nonempty("values", _validate.real_tensor("values", values, ndim=2))
    used = _validate.nonempty("used", _validate.token_tensor(
        "used", used, vocab_size=values.shape[0], ndim=1))
    full = orthonormal_projection(values.shape[1], values.shape[1], seed)
    for m in range(1, values.shape[1] + 1):
        if _projection_decoding_margin(values, full[:m], used) > DECODE_FLOOR:
            return m
    return None


def threshold_hidden(num_keys: int, d: int, code_dim: int) -> int:
    r"""The smallest hidden width the exact solve allows: :math:`\max(m, \lceil Fm/d\rceil)`."""
    num_keys = _validate.positive_int("num_keys", num_keys)
    d = _validate.positive_int("d", d)
    code_dim = _validate.positive_int("code_dim", code_dim)
    return max(code_dim, -(-num_keys * code_dim // d))


def encoder_system(keys: torch.Tensor, gate: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    r"""The matrix :math:`M` of the linear system in :math:`A`: rows :math:`(i, o)`, columns
    :math:`(h, j)`, :math:`M_{(i,o),(h,j)} = D_{oh}\,\sigma(Gk_i)_h\,k_{ij}`.

    ``gate`` is :math:`G \in \mathbb R^{h\times d}` and ``down`` is
    :math:`D \in \mathbb R^{m\times h}`;
    the encoder output for key :math:`i` is :math:`M_{(i,\cdot)}\,\mathrm{vec}(A)`.
    """
    keys = _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=2))
    gate = _validate.nonempty("gate", _validate.real_tensor("gate", gate, ndim=2))
    down = _validate.nonempty("down", _validate.real_tensor("down", down, ndim=2))
    if gate.shape[1] != keys.shape[1]:
        raise ValueError(f"gate must have shape (h, {keys.shape[1]}) to match keys, "
                         f"got {tuple(gate.shape)}")
    if down.shape[1] != gate.shape[0]:
        raise ValueError(f"down must have shape (m, {gate.shape[0]}) to match gate, "
                         f"got {tuple(down.shape)}")
    gates = torch.sigmoid(keys @ gate.T)
    F, d = keys.shape
    m, h = down.shape
    return torch.einsum("oh,ih,ij->iohj", down, gates, keys).reshape(F * m, h * d)


def _solve_encoder(keys: torch.Tensor, codes: torch.Tensor, gate: torch.Tensor,
                  down: torch.Tensor) -> tuple[torch.Tensor, dict]:
    r"""Solve :math:`M\,\mathrm{vec}(A) = \mathrm{vec}(C)` for the minimum-norm :math:`A`.

    Returns ``A`` of shape ``(h, d)`` and a report: the residual
    :math:`\lVert M a - c\rVert`, the scale :math:`\lVert M\rVert_F\lVert a\rVert + \lVert
    c\rVert` it is measured against, the numerical rank and the system's shape. A
    backward-stable solver (LAPACK ``gelsy``: a complete orthogonal factorisation) makes the
    residual at most :math:`\tilde\gamma_{rc}` times the scale when the system is consistent
    (Higham, Thm. 20.3); a rank-deficient system leaves a residual of the order of
    :math:`\lVert c\rVert`.
    """
    M = encoder_system(keys, gate, down)
    c = codes.reshape(-1, 1)
    solution = torch.linalg.lstsq(M, c, driver="gelsd")
    a = solution.solution
    residual = float((M @ a - c).norm())
    scale = float(M.norm() * a.norm() + c.norm())
    report = {"residual": residual, "scale": scale, "rank": int(solution.rank),
              "rows": M.shape[0], "cols": M.shape[1]}
    return a.reshape(down.shape[1], keys.shape[1]), report


class GatedEncoderDecoder(nn.Module):
    r"""A gated MLP with a linear decoder,
    :math:`g(k) = P^\top D\big(\sigma(Gk) \odot Ak\big)` (row inputs: ``((σ(k Gᵀ) ⊙ k Aᵀ) Dᵀ) P``).

    ``gate`` :math:`G` and ``up`` :math:`A` are ``(h, d)``, ``down`` :math:`D` is ``(m, h)``
    and ``decoder`` :math:`P` is ``(m, d_v)``. :meth:`encode` returns the code
    :math:`z = D(\sigma(Gk)\odot Ak) \in \mathbb R^m` that the checks compare with the
    target code :math:`P v_{f(i)}`.
    """

    def __init__(self, gate, up, down, decoder) -> None:
        super().__init__()
        gate = _validate.real_tensor("gate", gate, ndim=2)
        up = _validate.real_tensor("up", up, shape=tuple(gate.shape))
        down = _validate.real_tensor("down", down, shape=(None, gate.shape[0]))
        decoder = _validate.real_tensor("decoder", decoder, shape=(down.shape[0], None))
        self.gate, self.up, self.down, self.decoder = map(fixed, (gate, up, down, decoder))

    @property
    def sizes(self) -> dict[str, int]:
        return {"d": self.gate.shape[1], "hidden": self.gate.shape[0],
                "code_dim": self.down.shape[0], "d_v": self.decoder.shape[1]}

    def hidden(self, k: torch.Tensor) -> torch.Tensor:
        """The gated hidden layer :math:`\\sigma(Gk) \\odot Ak`, shape ``(..., h)``."""
        if k.shape[-1] != self.gate.shape[1]:
            raise ValueError(f"k must have width {self.gate.shape[1]}, got shape {tuple(k.shape)}")
        k = k.to(self.gate.dtype)
        return torch.sigmoid(k @ self.gate.T) * (k @ self.up.T)

    def encode(self, k: torch.Tensor) -> torch.Tensor:
        return self.hidden(k) @ self.down.T

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return ["a sigmoid-gated MLP (TransformerLens's gated MLP has no sigmoid activation)",
                f"{NO_SEQUENCE} (a map on single vectors)"]

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        return self.encode(k) @ self.decoder


def encoder_decoder_mlp(keys, values, facts, *, hidden: int | None = None,
                        code_dim: int | None = None, seed: int = 0,
                        dtype: torch.dtype = torch.float64, device=None) -> GatedEncoderDecoder:
    r"""The encoder-decoder fact-storing MLP (Dugan et al. 2025, Sec. 4), single bucket.

    **Decoder.** A projection :math:`P \in \mathbb R^{m\times d_v}` with orthonormal rows
    (:func:`orthonormal_projection`) gives every value a code :math:`Pv_j`. Decoding a code
    :math:`z` by :math:`P^\top z` scores value :math:`j` by :math:`\langle z, Pv_j\rangle`, so
    the target code of key :math:`i` is :math:`c_i = Pv_{f(i)}` and it decodes correctly iff
    :math:`\langle Pv_k, P(v_k - v_j)\rangle > 0` for all :math:`j \ne k`
    (``_projection_decoding_margin``). At :math:`m = d_v` this is :math:`\gamma > 0` of
    :func:`value_margin`; for smaller :math:`m` it holds with probability at least ½ once
    :math:`m \ge` :func:`jl_code_dim`, i.e. :math:`m = O(\log|V|/\gamma^2)`.

    **Encoder.** A gated layer :math:`z = D(\sigma(Gk) \odot Ak)` with seeded Gaussian gate
    :math:`G \in \mathbb R^{h\times d}` (scaled by the keys' RMS norm so that gates see unit
    inputs), logistic :math:`\sigma`, and Gaussian :math:`D \in \mathbb R^{m\times h}`. With
    :math:`G, D` fixed, :math:`z_i = c_i` for all :math:`i` is the linear system
    :math:`M\,\mathrm{vec}(A) = \mathrm{vec}(C)` of :func:`encoder_system`: :math:`Fm`
    equations in :math:`hd` unknowns.

    **Threshold sizes.** Row block :math:`i` of :math:`M` is :math:`D\,\mathrm{diag}(\sigma(G
    k_i)) \otimes k_i^\top`, of rank at most :math:`\min(m, h)`, so full row rank needs
    :math:`h \ge m` and :math:`hd \ge Fm`: ``hidden=None`` takes
    :math:`h = \max(m, \lceil Fm/d\rceil)` (:func:`threshold_hidden`). Every minor of
    :math:`M` is an analytic function of the keys (σ is analytic), so it is either identically
    zero or non-zero off a measure-zero set: the system is solvable for all but a measure-zero
    set of keys as soon as it is solvable for one. The logistic gate is our choice (the
    paper's gate nonlinearity is unconfirmed here): with a ReLU gate a key whose gates are
    mostly off makes the system singular with *positive* probability.

    ``code_dim=None`` takes the smallest :math:`m` whose seeded projection decodes every used
    value with relative margin above :data:`DECODE_FLOOR`.

    Raises ``ValueError`` when two equal keys carry different facts (infeasible), when no
    :math:`m \le d_v` decodes the used values (some used :math:`v_k` is beaten by another
    value's score :math:`\langle v_k, v_j\rangle \ge \lVert v_k\rVert^2`: outside what dot-product
    decoding of projected values can store), when ``hidden``/``code_dim`` are below the
    thresholds, or when the keys are in degenerate position and the system is singular.
    """
    keys, values, facts = _fact_set(keys, values, facts)
    kw = resolve(dtype, device)
    conflict = _conflicting_keys(keys, facts)
    if conflict is not None:
        i, j = conflict
        raise ValueError(f"facts are infeasible: keys {i} and {j} are equal but map to values "
                         f"{int(facts[i])} and {int(facts[j])}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    keys_unique, index = torch.unique(keys, dim=0, return_inverse=True)
    facts_unique = torch.empty(keys_unique.shape[0], dtype=torch.long).scatter_(0, index, facts)
    F, d = keys_unique.shape
    d_v = values.shape[1]
    projection = orthonormal_projection(d_v, d_v, seed)
    smallest = smallest_code_dim(values, facts_unique, seed)
    if smallest is None:
        gamma = value_margin(values, facts_unique)
        raise ValueError(f"values are not decodable: some used value v_k has "
                         f"<v_k, v_j> >= |v_k|^2 - {DECODE_FLOOR:.1e} max|v|^2 for a j != k "
                         f"(margin gamma = {gamma:.3g}), so no projection of the values "
                         f"decodes it")
    if code_dim is None:
        code_dim = smallest
    code_dim = _validate.positive_int("code_dim", code_dim)
    if code_dim > d_v:
        raise ValueError(f"code_dim must be <= d_v = {d_v}, got {code_dim}")
    margin = _projection_decoding_margin(values, projection[:code_dim], facts_unique)
    if margin <= DECODE_FLOOR:
        raise ValueError(f"code_dim={code_dim} is too small: the projected values do not decode "
                         f"(relative margin {margin:.3g}); the smallest working code_dim for "
                         f"seed={seed} is {smallest}")
    least = threshold_hidden(F, d, code_dim)
    if hidden is None:
        hidden = least
    hidden = _validate.positive_int("hidden", hidden)
    if hidden < least:
        raise ValueError(f"hidden must be >= max(code_dim, ceil(F*code_dim/d)) = {least} for "
                         f"F={F} distinct keys, d={d}, code_dim={code_dim}; got {hidden}")
    model, report = assemble_encoder_decoder(keys_unique, values, facts_unique, hidden=hidden,
                                             code_dim=code_dim, seed=seed)
    if report["rank"] < report["rows"]:
        raise ValueError(f"keys are in degenerate position: the encoder system is singular at "
                         f"hidden={hidden}, rank {report['rank']} < F*code_dim = {report['rows']} "
                         f" (for example a zero key, or more keys than "
                         f"hidden*rank(keys)/code_dim in a subspace); increase hidden")
    return model.to(**kw)


def assemble_encoder_decoder(keys: torch.Tensor, values: torch.Tensor, facts: torch.Tensor, *,
                             hidden: int, code_dim: int,
                             seed: int = 0) -> tuple[GatedEncoderDecoder, dict]:
    """Build the encoder-decoder at the given sizes with no feasibility or size checks.

    The seeded weights are those :func:`encoder_decoder_mlp` uses; ``up`` is the minimum-norm
    least-squares solution of the encoder system, and the report is ``_solve_encoder``'s.
    Below the threshold sizes, or for degenerate keys, the system is singular and the
    returned model misses some codes: this is how such inputs are studied.
    """
    keys, values, facts = _fact_set(keys, values, facts)
    hidden = _validate.positive_int("hidden", hidden)
    code_dim = _validate.positive_int("code_dim", code_dim)
    seed = _validate.seed("seed", seed)
    d_v = values.shape[1]
    if code_dim > d_v:
        raise ValueError(f"code_dim must be <= d_v = {d_v}, got {code_dim}")
    decoder = orthonormal_projection(d_v, d_v, seed)[:code_dim]
    generator = torch.Generator().manual_seed(seed + 1)
    key_scale = float(keys.pow(2).sum(1).mean().sqrt()) or 1.0
    gate = torch.randn(hidden, keys.shape[1], generator=generator, dtype=torch.float64)
    gate /= key_scale
    down = torch.randn(code_dim, hidden, generator=generator, dtype=torch.float64)
    down /= math.sqrt(hidden)
    codes = values[facts] @ decoder.T
    up, report = _solve_encoder(keys, codes, gate, down)
    return GatedEncoderDecoder(gate, up, down, decoder), report


def parameter_count(model: nn.Module) -> int:
    """Number of scalar weights of a construction (fixed or trainable)."""
    _validate.instance("model", model, nn.Module)
    return sum(p.numel() for p in model.parameters())


# --- decodability (FM.4) ----------------------------------------------------------------------

def jl_code_dim(num_values: int, gamma: float) -> int:
    r"""A code dimension at which a Gaussian projection decodes every value with probability
    at least ½ (our derivation; the paper's own decodability formula is unconfirmed).

    Let :math:`a = v_k/\lVert v_k\rVert`, :math:`b = (v_k - v_j)/\lVert v_k - v_j\rVert`.
    Decoding fails for the pair iff :math:`\langle Pa, Pb\rangle \le 0`, while
    :math:`\langle a, b\rangle \ge \gamma M^2/(M\cdot 2M) = \gamma/2` with
    :math:`M = \max\lVert v\rVert`. By polarisation,
    :math:`|\langle Pa, Pb\rangle - \langle a, b\rangle| \le \epsilon` whenever
    :math:`\lVert P(a\pm b)\rVert^2` are within :math:`1\pm\epsilon` of
    :math:`\lVert a\pm b\rVert^2`, which fails with probability at most
    :math:`2e^{-m(\epsilon^2 - \epsilon^3)/4}` each (Dasgupta & Gupta 2003). With
    :math:`\epsilon = \min(\gamma/2, 1/2)` and a union bound over fewer than :math:`|V|^2`
    ordered pairs, failure has probability at most
    :math:`4|V|^2 e^{-m(\epsilon^2-\epsilon^3)/4} \le 1/2` once
    :math:`m \ge 4\ln(8|V|^2)/(\epsilon^2 - \epsilon^3) = O(\log|V|/\gamma^2)`.
    """
    num_values = _validate.positive_int("num_values", num_values)
    gamma = _validate.positive_float("gamma", gamma)
    eps = min(gamma / 2, 0.5)
    return math.ceil(4 * math.log(8 * num_values**2) / (eps**2 - eps**3))


def decoding_success_rate(values: torch.Tensor, m: int, *, draws: int = 64,
                          seed: int = 0) -> float:
    r"""Fraction of ``draws`` Gaussian projections :math:`P \in \mathbb R^{m\times d_v}` under
    which every value decodes itself: :math:`\arg\max_j\langle Pv_j, Pv_k\rangle = k` for all
    :math:`k` (strictly). All draws are evaluated in one batched product."""
    values = _validate.nonempty("values", _validate.real_tensor("values", values, ndim=2))
    values = values.to(torch.float64)
    m = _validate.positive_int("m", m)
    draws = _validate.positive_int("draws", draws)
    generator = torch.Generator().manual_seed(_validate.seed("seed", seed))
    P = torch.randn(draws, m, values.shape[1], generator=generator, dtype=torch.float64)
    projected = values @ P.transpose(1, 2)                      # (draws, |V|, m)
    gram = projected @ projected.transpose(1, 2)                # (draws, |V|, |V|)
    gaps = gram.diagonal(dim1=1, dim2=2)[:, :, None] - gram
    gaps.diagonal(dim1=1, dim2=2).fill_(math.inf)
    return float((gaps.flatten(1).amin(1) > 0).double().mean())


def decodability(values: torch.Tensor, *, draws: int = 64, seed: int = 0,
                 max_dim: int | None = None) -> int | None:
    r"""The proxy :math:`m^*(V)`: the smallest :math:`m` at which a Gaussian projection decodes
    every value with (estimated) probability at least ½, by doubling then bisection on
    :math:`m`.

    The success probability is monotone in :math:`m` only on average, so this is the
    bisection point of the estimated curve; ``None`` when even ``max_dim`` (default
    :func:`jl_code_dim`, or ``4 d_v`` when :math:`\gamma \le 0`) fails.
    """
    values = _validate.nonempty("values", _validate.real_tensor("values", values, ndim=2))
    values = values.to(torch.float64)
    seed = _validate.seed("seed", seed)
    draws = _validate.positive_int("draws", draws)
    gamma = value_margin(values)
    if max_dim is None:
        max_dim = jl_code_dim(values.shape[0], gamma) if gamma > 0 else 4 * values.shape[1]
    max_dim = _validate.positive_int("max_dim", max_dim)

    def decodes(m: int) -> bool:
        return decoding_success_rate(values, m, draws=draws, seed=seed) >= 0.5

    lo, hi = 0, 1  # success(lo) < 1/2 (m = 0 never decodes); hi is the next candidate
    while not decodes(hi):
        if hi == max_dim:
            return None
        lo, hi = hi, min(2 * hi, max_dim)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if decoding_success_rate(values, mid, draws=draws, seed=seed) >= 0.5:
            hi = mid
        else:
            lo = mid
    return hi


# --- a one-layer fact transformer (FM.5) --------------------------------------------------------

class FactTransformer(nn.Module):
    r"""Embedding, one hardmax attention head, a swappable MLP, and a value unembedding.

    The residual stream has width :math:`2d + 2 + d_v`, in blocks
    ``[token key (d) | subject flag | one | moved key (d) | MLP out (d_v)]``. Subject tokens
    embed as :math:`(k_s, 1, 1, 0, 0)`, other tokens as :math:`(e, 0, 1, 0, 0)`. The head
    scores every key by its subject flag (query = the "one" coordinate), so with exactly one
    subject in the prompt every position at or after it attends to it alone, and copies its
    key into the "moved key" block. The MLP reads that block and writes its output
    :math:`g(k_s)` into the last block, and the logits at the last position are
    :math:`\langle v_j, g(k_s)\rangle`: the model answers :math:`\arg\max_j` of the fact store.
    Attention and everything upstream of the MLP do not involve the MLP, so
    :meth:`swap_mlp` changes the answers and nothing else.
    """

    def __init__(self, embeddings: torch.Tensor, attention: Attention, mlp: nn.Module,
                 values: torch.Tensor, num_subjects: int) -> None:
        super().__init__()
        self.embeddings = fixed(embeddings)
        self.attention = attention
        self.values = fixed(values)
        self.num_subjects = num_subjects
        self.d = (embeddings.shape[1] - 2 - values.shape[1]) // 2
        self.mlp = self._checked(mlp)

    @property
    def vocab_size(self) -> int:
        return self.embeddings.shape[0]

    @property
    def query_token(self) -> int:
        """The relation token that ends every prompt."""
        return self.vocab_size - 1

    def _checked(self, mlp: nn.Module) -> nn.Module:
        if not isinstance(mlp, nn.Module):
            raise TypeError(f"mlp must be an nn.Module, got {type(mlp).__name__}")
        probe = torch.zeros(1, self.d, dtype=self.embeddings.dtype,
                            device=self.embeddings.device)
        with torch.no_grad():
            try:
                shape = tuple(mlp(probe).shape)
            except (ValueError, RuntimeError) as error:
                raise ValueError(f"mlp must map width {self.d} to width {self.values.shape[1]} "
                                 f"(those of keys and values): {error}") from None
        if shape != (1, self.values.shape[1]):
            raise ValueError(f"mlp must map width {self.d} to width {self.values.shape[1]} "
                             f"(those of keys and values), "
                             f"got output shape {shape} for input shape (1, {self.d})")
        return mlp

    def swap_mlp(self, mlp: nn.Module) -> nn.Module:
        """Replace the MLP in place and return the previous one (to swap back)."""
        previous, self.mlp = self.mlp, self._checked(mlp)
        return previous

    def residual(self, tokens: torch.Tensor) -> torch.Tensor:
        """The residual stream after attention and before the MLP, ``(B, n, width)``."""
        tokens = _validate.token_tensor("tokens", tokens, vocab_size=self.vocab_size, ndim=2)
        x = self.embeddings[tokens]
        return x + self.attention(x)

    def attention_pattern(self, tokens: torch.Tensor) -> torch.Tensor:
        """Attention weights ``(B, n, n)`` of the single head; rows are queries."""
        tokens = _validate.token_tensor("tokens", tokens, vocab_size=self.vocab_size, ndim=2)
        return self.attention(self.embeddings[tokens], return_pattern=True)[1][:, 0]

    def mlp_input(self, tokens: torch.Tensor) -> torch.Tensor:
        """What the MLP reads at the last position: the moved subject key, ``(B, d)``."""
        d = self.d
        return self.residual(tokens)[:, -1, d + 2:2 * d + 2]

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        features = []
        if self.attention.kind == "hardmax":
            features.append("hardmax (average-hard) attention")
        if not (isinstance(self.mlp, MLP) and self.mlp.activation in ("relu", "gelu")):
            features.append("a fact-store MLP other than a ReLU/GELU MLP (linear, gated or "
                            "encoder-decoder)")
        return features

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits over the values at the last position, ``(B, |V|)``."""
        d = self.d
        h = self.residual(tokens)[:, -1]
        out = h[:, 2 * d + 2:] + self.mlp(h[:, d + 2:2 * d + 2]).to(h.dtype)
        return out @ self.values.T

    def answer(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.forward(tokens).argmax(-1)


def fact_transformer(keys, values, mlp: nn.Module, *, num_fillers: int = 2, seed: int = 0,
                     dtype: torch.dtype = torch.float64, device=None) -> FactTransformer:
    """A one-layer transformer over subjects ``0..F-1``, ``num_fillers`` filler tokens and a
    final query token, with ``mlp`` (width d to d_v) as its fact store (see
    :class:`FactTransformer`). Prompts are built by :func:`fact_prompts`."""
    keys = _validate.real_tensor("keys", keys, ndim=2).to(torch.float64)
    values = _validate.real_tensor("values", values, ndim=2).to(torch.float64)
    num_fillers = _validate.positive_int("num_fillers", num_fillers, minimum=0)
    seed = _validate.seed("seed", seed)
    kw = resolve(dtype, device)
    F, d = keys.shape
    d_v = values.shape[1]
    width = 2 * d + 2 + d_v
    generator = torch.Generator().manual_seed(seed)
    others = torch.randn(num_fillers + 1, d, generator=generator, dtype=torch.float64)
    embeddings = torch.zeros(F + num_fillers + 1, width, dtype=torch.float64)
    embeddings[:F, :d] = keys
    embeddings[F:, :d] = others
    embeddings[:F, d] = 1.0           # subject flag
    embeddings[:, d + 1] = 1.0        # constant coordinate: every query scores the flag
    W_Q = torch.zeros(width, 1, dtype=torch.float64)
    W_Q[d + 1, 0] = 1.0
    W_K = torch.zeros(width, 1, dtype=torch.float64)
    W_K[d, 0] = 1.0
    W_V = torch.zeros(width, d, dtype=torch.float64)
    W_V[:d] = torch.eye(d, dtype=torch.float64)
    W_O = torch.zeros(d, width, dtype=torch.float64)
    W_O[:, d + 2:2 * d + 2] = torch.eye(d, dtype=torch.float64)
    attention = Attention(*(w.to(**kw) for w in (W_Q, W_K, W_V, W_O)), kind="hardmax",
                          causal=True)
    return FactTransformer(embeddings.to(**kw), attention, mlp, values.to(**kw), F)


def fact_prompts(subjects: torch.Tensor, positions: torch.Tensor, *, num_subjects: int,
                 num_fillers: int, length: int) -> torch.Tensor:
    """Prompts of ``length`` tokens: fillers, with subject ``subjects[b]`` at ``positions[b]``
    (before the last position) and the query token last. The oracle answer is
    ``facts[subjects[b]]``."""
    num_subjects = _validate.positive_int("num_subjects", num_subjects)
    subjects = _validate.token_tensor("subjects", subjects, vocab_size=num_subjects, ndim=1)
    length = _validate.positive_int("length", length, minimum=2)
    num_fillers = _validate.positive_int("num_fillers", num_fillers, minimum=0)
    positions = _validate.token_tensor("positions", positions, vocab_size=length - 1, ndim=1)
    if positions.shape != subjects.shape:
        raise ValueError(f"positions must match subjects' shape {tuple(subjects.shape)}")
    batch = subjects.shape[0]
    fillers = num_subjects + torch.arange(length).remainder(max(num_fillers, 1))
    tokens = fillers.expand(batch, length).clone()
    tokens[:, -1] = num_subjects + num_fillers
    tokens[torch.arange(batch), positions] = subjects
    return tokens


# --- ROME (FM.7) ------------------------------------------------------------------------------

def second_moment(keys) -> torch.Tensor:
    r"""The uncentred second moment :math:`C = \frac1n\sum_t k_tk_t^\top` of keys ``(n, d_k)``."""
    keys = _validate.nonempty("keys", _validate.real_tensor("keys", keys, ndim=2))
    keys = keys.to(torch.float64)
    return keys.T @ keys / keys.shape[0]


def _rome_arguments(W, C, k_star, v_star, *, key_name: str = "k_star"):
    W = _validate.nonempty("W", _validate.real_tensor("W", W, ndim=2)).to(torch.float64)
    d_v, d_k = W.shape
    C = _validate.real_tensor("C", C, ndim=2).to(torch.float64)
    if C.shape != (d_k, d_k):
        raise ValueError(f"C must have shape ({d_k}, {d_k}) to match W of shape {(d_v, d_k)}, "
                         f"got {tuple(C.shape)}")
    # A symmetric matrix computed in floating point (say Q diag Q^T) is symmetric only to
    # about d u max|C|; accept that, reject anything further, and symmetrise.
    asymmetry = float((C - C.T).abs().max())
    if asymmetry > 8 * d_k * torch.finfo(torch.float64).eps * float(C.abs().max()):
        raise ValueError(f"C must be symmetric (max |C - C^T| = {asymmetry:.3g})")
    C = (C + C.T) / 2
    factor, info = torch.linalg.cholesky_ex(C)
    if int(info) != 0:
        raise ValueError("C must be positive definite (its Cholesky factorisation failed)")
    k_star = _validate.real_tensor(key_name, k_star, shape=(d_k,)).to(torch.float64)
    v_star = _validate.real_tensor("v_star", v_star, shape=(d_v,)).to(torch.float64)
    return W, factor, k_star, v_star


def rome_edit(W, C, k_star, v_star) -> torch.Tensor:
    r"""ROME's rank-one edit (Meng et al. 2022, Eq. 2):
    :math:`W' = W + \Lambda(C^{-1}k_*)^\top` with
    :math:`\Lambda = (v_* - Wk_*)/((C^{-1}k_*)^\top k_*)`.

    ``W`` is ``(d_v, d_k)`` and maps keys to values (:math:`v = Wk`); ``C`` is the keys'
    uncentred second moment (symmetric positive definite; its scale cancels). :math:`W'`
    inserts the fact (:math:`W'k_* = v_*`) while minimising
    :math:`\mathrm{tr}(\Delta C\Delta^\top) = \mathbb E\lVert\Delta k\rVert^2` among all
    :math:`\Delta` with :math:`\Delta k_* = v_* - Wk_*`.
    """
    W, factor, k_star, v_star = _rome_arguments(W, C, k_star, v_star)
    u = torch.cholesky_solve(k_star[:, None], factor)[:, 0]
    denominator = float(u @ k_star)
    if not denominator > 0:
        raise ValueError("k_star must be non-zero")
    return W + torch.outer((v_star - W @ k_star) / denominator, u)


def rome_edit_as_coded(W, C, k_bar, k_prompt, v_star) -> torch.Tensor:
    r"""The update as the released code computes it (kmeng01/rome, ``compute_u.py`` and
    ``compute_v.py``).

    The left vector is built from :math:`\bar k`, the subject's key averaged over random
    prefixes: :math:`u = C^{-1}\bar k/\lVert C^{-1}\bar k\rVert`; the right vector uses the
    raw prompt's key :math:`k_p`: :math:`r = (v_* - Wk_p)/(u^\top k_p)`; and
    :math:`W' = W + ru^\top`. So :math:`W'k_p = v_*` exactly, but
    :math:`W'\bar k = W\bar k + (v_* - Wk_p)\,u^\top\bar k/u^\top k_p`, which is not
    :math:`v_*` unless :math:`\bar k` and :math:`k_p` agree on the relevant directions.
    """
    W, factor, k_bar, v_star = _rome_arguments(W, C, k_bar, v_star, key_name="k_bar")
    k_prompt = _validate.real_tensor("k_prompt", k_prompt, shape=k_bar.shape).to(torch.float64)
    u = torch.cholesky_solve(k_bar[:, None], factor)[:, 0]
    u = u / u.norm()
    denominator = float(u @ k_prompt)
    if denominator == 0:
        raise ValueError("k_prompt must not be C-orthogonal to k_bar (u^T k_prompt = 0)")
    return W + torch.outer((v_star - W @ k_prompt) / denominator, u)


# --- Zipf-distributed associative memories (Cabannes et al.) ------------------------------------

def zipf_probabilities(n: int, alpha: float) -> torch.Tensor:
    r""":math:`p(x) \propto x^{-\alpha}` for :math:`x = 1, \dots, n`."""
    n = _validate.positive_int("n", n)
    alpha = _validate.positive_float("alpha", alpha)
    weights = torch.arange(1, n + 1, dtype=torch.float64).pow(-alpha)
    return weights / weights.sum()


def population_error(model, keys, values, facts, probabilities) -> float:
    r""":math:`\sum_x p(x)\,[\mu_x \le 0]`: the probability that a token drawn from :math:`p`
    is not stored."""
    margins = _storage_margins(model, keys, values, facts)
    probabilities = _validate.probability_vector("probabilities", probabilities,
                                                 size=margins.shape[0])
    return float(probabilities[margins <= 0].sum())
