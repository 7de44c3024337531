r"""Dugan et al.'s encoder-decoder fact MLP, as a single bucket: the encoder's exact solve at the
threshold sizes, the decoder, and the parameter count.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions.fact_mlps._shared import DECODE_FLOOR
from constructions.fact_mlps.task import _conflicting_keys, _fact_set
from constructions.layers import HookPoint, fixed, resolve
from constructions.residual_layout import NO_SEQUENCE

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


#: Refinement steps of the encoder's solve (see ``_solve_encoder``): two take its residual to
#: the rounding of A itself for any condition number up to about 1e15 / C, C the solver's
#: backward-error constant.
REFINEMENT_STEPS = 2
#: Working precision (bits) of the exact residual: every product of two doubles is exact
#: (106 bits) and each of the at most hd + 1 additions errs by 2^-256 relative to its partial
#: sum, far below the u = 2^-53 the residual is rounded to.
RESIDUAL_BITS = 256


def _exact_residual(M: torch.Tensor, a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    r""":math:`c - Ma` of float64 data, evaluated in ball arithmetic (python-flint ``arb``) at
    :data:`RESIDUAL_BITS` bits and rounded to float64: within :math:`u|c - Ma| + (hd+1)
    2^{-256}(|M||a| + |c|)` of the exact residual of the stored numbers (each double converts
    to an ``arb`` exactly)."""
    import flint

    with flint.ctx.workprec(RESIDUAL_BITS):
        exact = flint.arb_mat(c.tolist()) - flint.arb_mat(M.tolist()) * flint.arb_mat(a.tolist())
        rows = [float(exact[i, 0].mid()) for i in range(exact.nrows())]
    return torch.tensor(rows, dtype=torch.float64).reshape(-1, 1)


def _solve_encoder(keys: torch.Tensor, codes: torch.Tensor, gate: torch.Tensor,
                  down: torch.Tensor) -> tuple[torch.Tensor, dict]:
    r"""Solve :math:`M\,\mathrm{vec}(A) = \mathrm{vec}(C)` for the minimum-norm :math:`A`.

    Returns ``A`` of shape ``(h, d)`` and a report: the residual
    :math:`\lVert M a - c\rVert`, the scale :math:`\lVert M\rVert_F\lVert a\rVert + \lVert
    c\rVert` it is measured against, the numerical rank and the system's shape.

    **Solve.** LAPACK's ``gelsd`` (an SVD) returns the minimum-norm least-squares solution
    :math:`a_0` backward stably: :math:`\lVert c - Ma_0\rVert \le Cu(\lVert M\rVert
    \lVert a_0\rVert + \lVert c\rVert)` for a consistent system, with a constant
    :math:`C` that LAPACK does not state (Higham, *Accuracy and Stability*, ch. 20; about 30
    was seen on a 4x4 system with keys of size 1e-3: 30 times the rounding of :math:`a`).

    **Refinement** (Wilkinson's, with the residual in extended precision; Higham, sec. 12.1).
    :data:`REFINEMENT_STEPS` times: :math:`\hat r = \mathrm{fl}(c - Ma)` from the exact
    residual (:func:`_exact_residual`, :math:`|\hat r - r| \le u|r|` up to
    :math:`2^{-256}` terms), :math:`\hat\delta` the ``gelsd`` solution of :math:`M\delta =
    \hat r`, and :math:`a \leftarrow \mathrm{fl}(a + \hat\delta)`. The new exact residual
    is :math:`(r - M\hat\delta) - M\epsilon` with :math:`|\epsilon| \le u|a|` (the one
    rounding of the sum), and :math:`\lVert r - M\hat\delta\rVert \le u\lVert r\rVert +
    Cu(\lVert M\rVert\lVert\hat\delta\rVert + \lVert\hat r\rVert) \le
    (2 + C(\kappa + 1))u\lVert r\rVert` (:math:`\lVert\hat\delta\rVert \le
    (1+u)\lVert r\rVert/\sigma_{\min}` on the row space, :math:`\kappa =
    \lVert M\rVert/\sigma_{\min}`). So each step maps the residual to at most
    :math:`u\lVert|M||a|\rVert + (2 + C(\kappa+1))u\lVert r\rVert`: after two steps it is
    :math:`u\lVert|M||a|\rVert\,(1 + O(C\kappa u))`, the rounding of the stored
    :math:`a` itself, as long as :math:`C\kappa u \ll 1` (the checks keep
    :math:`\kappa \le 10^8`). That is what the storage check asserts a-posteriori: the
    residual within the rounding of :math:`M`'s own entries, which is at least
    :math:`\gamma_2|M|` entrywise (``system_error``), twice the first-order term.
    A singular (below-threshold) system keeps the least-squares residual of the first solve:
    the corrections then solve for the residual's component in the range of :math:`M`, which
    is already at rounding level.
    """
    M = encoder_system(keys, gate, down)
    c = codes.reshape(-1, 1)
    solution = torch.linalg.lstsq(M, c, driver="gelsd")
    a = solution.solution
    for _ in range(REFINEMENT_STEPS):
        a = a + torch.linalg.lstsq(M, _exact_residual(M, a, c), driver="gelsd").solution
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

    Hook points, named as in TransformerLens's gated MLP: ``hook_mlp_in`` (``k``, ``(..., d)``),
    ``hook_pre`` (:math:`Gk`, before the sigmoid) and ``hook_pre_linear`` (:math:`Ak`),
    ``hook_post`` (the hidden layer, ``(..., h)``) and ``hook_mlp_out`` (the code :math:`z`,
    ``(..., m)``), which the linear decoder :math:`P` then reads.
    """

    def __init__(self, gate, up, down, decoder) -> None:
        super().__init__()
        gate = _validate.real_tensor("gate", gate, ndim=2)
        up = _validate.real_tensor("up", up, shape=tuple(gate.shape))
        down = _validate.real_tensor("down", down, shape=(None, gate.shape[0]))
        decoder = _validate.real_tensor("decoder", decoder, shape=(down.shape[0], None))
        self.gate, self.up, self.down, self.decoder = map(fixed, (gate, up, down, decoder))
        self.hook_mlp_in, self.hook_pre, self.hook_pre_linear = (HookPoint(), HookPoint(),
                                                                 HookPoint())
        self.hook_post, self.hook_mlp_out = HookPoint(), HookPoint()

    @property
    def sizes(self) -> dict[str, int]:
        return {"d": self.gate.shape[1], "hidden": self.gate.shape[0],
                "code_dim": self.down.shape[0], "d_v": self.decoder.shape[1]}

    def hidden(self, k: torch.Tensor) -> torch.Tensor:
        """The gated hidden layer :math:`\\sigma(Gk) \\odot Ak`, shape ``(..., h)``."""
        if k.shape[-1] != self.gate.shape[1]:
            raise ValueError(f"k must have width {self.gate.shape[1]}, got shape {tuple(k.shape)}")
        k = self.hook_mlp_in(k.to(self.gate.dtype))
        return self.hook_post(torch.sigmoid(self.hook_pre(k @ self.gate.T))
                              * self.hook_pre_linear(k @ self.up.T))

    def encode(self, k: torch.Tensor) -> torch.Tensor:
        return self.hook_mlp_out(self.hidden(k) @ self.down.T)

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


