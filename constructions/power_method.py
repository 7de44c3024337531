r"""Looped linear attention with ℓ2 normalisation is the power method (Wu, Zhang, Cao 2026,
arXiv:2606.00605).

The task (principal component prediction)
-----------------------------------------
Data :math:`X = [x_1, \dots, x_n] \in \mathbb R^{d\times n}` with unit-norm columns, and
:math:`S = XX^\top` with eigenvalues :math:`\lambda_1 = \dots = \lambda_r > \lambda_{r+1}
\ge \dots \ge \lambda_d \ge 0`. The principal subspace :math:`\mathcal V(X)` is the
eigenspace of :math:`\lambda_1` (multiplicity :math:`r`), with orthogonal projection
:math:`P_{\mathcal V}`. Given a query :math:`a` (uniform on the unit sphere), predict a
direction :math:`y` close to :math:`\mathcal V(X)`, scored by
:math:`\mathrm{Dist}(y, \mathcal V(X)) = \lVert (I - P_{\mathcal V})\,y\rVert_2`, which is
:math:`\sin\varphi` for the angle :math:`\varphi` between a unit :math:`y` and
:math:`\mathcal V(X)` (:func:`principal_subspace`, :func:`principal_distance`).

The reference algorithm is the power method (:func:`power_iteration`):
:math:`y_{k+1} = My_k/\lVert My_k\rVert` with :math:`M = S`, or with the *shift*
:math:`\rho`, :math:`M = I + \rho S`, whose eigenvectors are those of :math:`S` and whose
eigenvalues are :math:`1 + \rho\lambda_i`.

The model (our reconstruction of the paper's layout, tag D)
----------------------------------------------------------
The paper writes tokens as columns: the input is

.. math::

    E = \begin{pmatrix} X & 0 \\ 0 & a \end{pmatrix} \in \mathbb R^{2d\times(n+1)},\qquad
    \mathrm{TF}(E; V, W) = \mathrm{N}\big(E + V E E^\top W E\big),

a linear-attention layer with a residual connection, where :math:`\mathrm N` divides each
*column* by its ℓ2 norm. The paper calls :math:`\mathrm N` "LN"; it has no mean-centring and
no gain, so it is :class:`constructions.layers.L2Norm`, not LayerNorm. The same
:math:`\theta = (V, W)` is applied in every loop. The block weights

.. math::

    W = \begin{pmatrix} 0 & wI \\ 0 & 0 \end{pmatrix},\qquad
    V = \begin{pmatrix} 0 & 0 \\ vI & 0 \end{pmatrix},\qquad \rho = wv,

give :math:`EE^\top = \mathrm{diag}(S, aa^\top)` and
:math:`VEE^\top WE = \begin{pmatrix} 0 & 0 \\ 0 & \rho Sa\end{pmatrix}`: the data columns
receive exactly zero, so they stay unit vectors and :math:`\mathrm N` leaves them alone,
while the query column becomes :math:`(I + \rho S)a/\lVert (I + \rho S)a\rVert`, one step of
the shifted power method. After :math:`L` loops it is
:math:`(I + \rho S)^L a / \lVert\cdot\rVert`, which tends to the unshifted power method's
:math:`S^L a/\lVert S^L a\rVert` as :math:`\rho \to \infty` at rate :math:`O(1/\rho)`.

In this package a sequence is ``(B, tokens, width)``, so the model stores the transpose
:math:`Z = E^\top`: rows ``0..n-1`` are :math:`(x_j, 0)` and row ``n`` is :math:`(0, a)`.
Then :math:`(VEE^\top WE)^\top = (Z W^\top Z^\top)(Z V^\top)`, which is
:class:`constructions.layers.Attention` with ``kind="linear"``, :math:`W_Q = W^\top`,
:math:`W_K = I`, :math:`W_V = V^\top`, :math:`W_O = I` and no normaliser.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from constructions import _validate
from constructions._roles import oracle
from constructions.layers import Attention, L2Norm, Residual, resolve
from constructions.numerics import gamma, unit_roundoff
from constructions.residual_layout import LINEAR_ATTENTION, LOOPED

# --- the task (the oracle) -----------------------------------------------------------------


def unit_norm_tolerance(d: int, *dtypes: torch.dtype) -> float:
    r"""How far from 1 the norm of a correctly normalised column may be.

    Normalising :math:`x/\lVert x\rVert` in a dtype with unit roundoff :math:`u` and then
    recomputing the norm costs a :math:`d`-term sum of squares, a square root and a division
    twice over: at most :math:`\gamma_{2d+4}` relative error (Higham, §3), in the coarsest
    of the dtypes involved.
    """
    d = _validate.positive_int("d", d)
    if not dtypes:
        raise TypeError("dtypes must name at least one dtype")
    for dtype in dtypes:
        _validate.float_dtype("dtypes", dtype)
    return gamma(2 * d + 4, max(dtypes, key=unit_roundoff))


def normalize_columns(X: torch.Tensor) -> torch.Tensor:
    """Divide every column of ``X`` (shape ``(..., d, n)``) by its ℓ2 norm."""
    X = _validate.nonempty("X", _validate.real_tensor("X", X, ndim=(2, 3)))
    norms = X.norm(dim=-2, keepdim=True)
    if (norms == 0).any():
        raise ValueError("X must have no zero column (it cannot be normalised)")
    return X / norms


def sample_data(batch: int, d: int, n: int, *, generator: torch.Generator | None = None,
                dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The in-distribution task: ``X`` with i.i.d. columns uniform on the unit sphere
    :math:`S^{d-1}` (normalised Gaussians) and a query ``a`` uniform on :math:`S^{d-1}`.

    Returns ``X`` of shape ``(batch, d, n)`` and ``a`` of shape ``(batch, d)``. The top
    eigenvalue of :math:`XX^\top` is simple with probability one (:math:`r = 1`).
    """
    batch = _validate.positive_int("batch", batch)
    d = _validate.positive_int("d", d, minimum=2)
    n = _validate.positive_int("n", n)
    dtype = _validate.float_dtype("dtype", dtype)
    X = torch.randn(batch, d, n, generator=generator, dtype=torch.float64)
    a = torch.randn(batch, d, generator=generator, dtype=torch.float64)
    return (normalize_columns(X).to(dtype), (a / a.norm(dim=-1, keepdim=True)).to(dtype))


def frame_data(d: int, r: int, copies: int, rest: int, *,
               generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64) -> torch.Tensor:
    r"""Out-of-distribution data whose top eigenvalue has multiplicity ``r``: shape ``(d, n)``.

    Let :math:`Q` be a random orthogonal matrix with :math:`Q = [Q_A, Q_B]`, :math:`Q_A`
    spanning ``r`` dims. The first ``r * copies`` columns are :math:`Q_A O_1, \dots,
    Q_A O_{copies}` for random ``r``-by-``r`` orthogonal :math:`O_i`, which contribute
    exactly ``copies`` times :math:`Q_AQ_A^\top` to :math:`S`. The last ``rest`` columns are
    random unit vectors in :math:`\mathrm{span}(Q_B)`, whose Gram matrix has top eigenvalue at
    most ``rest``. With ``rest < copies`` the top eigenvalue of :math:`S` is ``copies``, with
    multiplicity ``r`` and eigenspace :math:`\mathrm{span}(Q_A)`; every column has unit norm.
    """
    d = _validate.positive_int("d", d, minimum=2)
    r = _validate.positive_int("r", r)
    copies = _validate.positive_int("copies", copies)
    rest = _validate.positive_int("rest", rest, minimum=0)
    dtype = _validate.float_dtype("dtype", dtype)
    if r >= d:
        raise ValueError(f"r must be < d = {d} so that an eigengap exists, got {r}")
    if rest >= copies:
        raise ValueError(f"rest must be < copies = {copies} so that the top eigenvalue is "
                         f"copies, got {rest}")

    def orthogonal(k: int) -> torch.Tensor:
        q, upper = torch.linalg.qr(torch.randn(k, k, generator=generator, dtype=torch.float64))
        return q * torch.sign(torch.diagonal(upper))

    Q = orthogonal(d)
    QA, QB = Q[:, :r], Q[:, r:]
    frames = [QA @ orthogonal(r) for _ in range(copies)]
    tail = QB @ torch.randn(d - r, rest, generator=generator, dtype=torch.float64)
    X = torch.cat([*frames, normalize_columns(tail) if rest else tail], dim=1)
    return X.to(dtype)


def principal_subspace(S: torch.Tensor, *, rtol: float | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, int]:
    r"""Eigen-decomposition of a symmetric ``S`` (``(d, d)``): eigenvalues in decreasing
    order, the matching orthonormal eigenvectors as columns, and the multiplicity ``r`` of
    :math:`\lambda_1`.

    Eigenvalues within ``rtol * λ1`` of :math:`\lambda_1` count as equal to it. The default,
    :math:`\sqrt u` for the dtype's unit roundoff :math:`u`, sits far above ``eigh``'s error
    (backward stable: :math:`O(d\,u\lVert S\rVert)`) and far below any eigengap the checks
    use (:math:`10^{-3}\lambda_1`).
    """
    S = _validate.real_tensor("S", S, ndim=2)
    if S.shape[0] != S.shape[1]:
        raise ValueError(f"S must be square, got shape {tuple(S.shape)}")
    values, vectors = torch.linalg.eigh(S)
    values, vectors = values.flip(-1), vectors.flip(-1)
    if rtol is None:
        rtol = math.sqrt(torch.finfo(S.dtype).eps / 2)
    r = int((values >= values[0] - rtol * abs(float(values[0]))).sum())
    return values, vectors, r


def principal_distance(y: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathrm{Dist}(y, \mathcal V(X)) = \lVert (I - P_{\mathcal V})y\rVert`, the
    task's score, for ``y`` of shape ``(B, d)`` and ``X`` of shape ``(B, d, n)``.

    For a unit ``y`` it is :math:`\sin\varphi`. Computed from the eigenvectors of
    :math:`XX^\top` (:func:`principal_subspace`), example by example.
    """
    X = _validate.nonempty("X", _validate.real_tensor("X", X, ndim=3))
    y = _validate.real_tensor("y", y, shape=tuple(X.shape[:2]))
    out = []
    for yi, Xi in zip(y, X, strict=True):
        _, vectors, r = principal_subspace(Xi.double() @ Xi.double().T)
        top = vectors[:, :r]
        yi = yi.double()
        out.append((yi - top @ (top.T @ yi)).norm())
    return torch.stack(out).to(y.dtype)


@oracle
def power_iteration(S: torch.Tensor, a: torch.Tensor, steps: int, *,
                    shift: float | None = None) -> torch.Tensor:
    r"""The power method, returning every iterate :math:`y_0, \dots, y_{\text{steps}}`.

    :math:`y_0 = a/\lVert a\rVert` and :math:`y_{k+1} = My_k/\lVert My_k\rVert` with
    :math:`M = S`, or :math:`M = I + \rho S` when ``shift`` :math:`= \rho` is given, so that
    :math:`y_k = M^k a/\lVert M^k a\rVert` (normalising every step only rescales). ``S`` is
    ``(d, d)`` or a batch ``(B, d, d)``; ``a`` is ``(d,)`` or ``(B, d)``. Returns
    ``(steps + 1, d)`` or ``(B, steps + 1, d)``.
    """
    S = _validate.real_tensor("S", S, ndim=(2, 3))
    a = _validate.real_tensor("a", a, ndim=(1, 2))
    steps = _validate.positive_int("steps", steps, minimum=0)
    d = S.shape[-1]
    if S.shape[-2] != d:
        raise ValueError(f"S must be square, got shape {tuple(S.shape)}")
    if a.shape[-1] != d:
        raise ValueError(f"a must have length d = {d}, got shape {tuple(a.shape)}")
    if S.ndim == 3 and (a.ndim != 2 or a.shape[0] != S.shape[0]):
        raise ValueError(f"a must have shape ({S.shape[0]}, {d}) to match S, "
                         f"got {tuple(a.shape)}")
    if S.ndim == 2 and a.ndim != 1:
        raise ValueError(f"a must have shape ({d},) to match S, got {tuple(a.shape)}")
    norms = a.norm(dim=-1, keepdim=True)
    if (norms == 0).any():
        raise ValueError("a must be nonzero")
    if shift is not None:
        shift = _validate.finite_float("shift", shift)
    dtype = torch.promote_types(S.dtype, a.dtype)
    S, y = S.to(dtype), (a / norms).to(dtype)
    iterates = [y]
    for _ in range(steps):
        Sy = (S @ y.unsqueeze(-1)).squeeze(-1)
        y = Sy if shift is None else y + shift * Sy
        y = y / y.norm(dim=-1, keepdim=True)
        iterates.append(y)
    return torch.stack(iterates, dim=-2)


# --- the model -------------------------------------------------------------------------------


def block_weights(d: int, w: float, v: float, *, w22: float = 0.0, v22: float = 0.0,
                  dtype: torch.dtype = torch.float64, device=None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The paper's block weights in its column layout, ``(W, V)``, each ``(2d, 2d)``:

    .. math::

        W = \begin{pmatrix} 0 & wI \\ 0 & w_{22}I \end{pmatrix},\qquad
        V = \begin{pmatrix} 0 & 0 \\ vI & v_{22}I \end{pmatrix}.

    ``w22 = v22 = 0`` is the paper's block manifold; the query blocks are only used by
    :func:`residual_cancelling_layer`.
    """
    d = _validate.positive_int("d", d)
    for name, value in (("w", w), ("v", v), ("w22", w22), ("v22", v22)):
        _validate.finite_float(name, value)
    return _block_weights(d, w, v, w22, v22, resolve(dtype, device))


def _block_weights(d: int, w: float, v: float, w22: float, v22: float,
                   kw: dict) -> tuple[torch.Tensor, torch.Tensor]:
    eye = torch.eye(d, **kw)
    W = torch.zeros(2 * d, 2 * d, **kw)
    V = torch.zeros(2 * d, 2 * d, **kw)
    W[:d, d:], W[d:, d:] = w * eye, w22 * eye
    V[d:, :d], V[d:, d:] = v * eye, v22 * eye
    return W, V


def embed(X: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    r"""The input :math:`Z = E^\top`, shape ``(B, n + 1, 2d)``: rows :math:`(x_j, 0)` then
    :math:`(0, a)`."""
    X = _validate.nonempty("X", _validate.real_tensor("X", X, ndim=3))
    a = _validate.real_tensor("a", a, shape=tuple(X.shape[:2]))
    return _embed(X, a)


def _embed(X: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    B, d, n = X.shape
    Z = X.new_zeros(B, n + 1, 2 * d)
    Z[:, :n, :d] = X.transpose(-1, -2)
    Z[:, n, d:] = a
    return Z


class LoopedPowerTransformer(nn.Module):
    r"""One weight-shared layer :math:`Z \mapsto \mathrm N(Z + \mathrm{Attn}(Z))`, looped.

    ``attention`` is the linear attention :math:`Z \mapsto (ZW^\top Z^\top)(ZV^\top)`, and
    ``norm`` the row-wise (per-token, i.e. the paper's column-wise) ℓ2 normalisation, or
    ``None`` for the ablation without it. :meth:`states` exposes every embedding
    :math:`Z_0, \dots, Z_L`, which is what checks of the block structure inspect; ``forward``
    returns the query block of the last one.
    """

    def __init__(self, attention: Attention, normalize: bool = True) -> None:
        super().__init__()
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
        self.residual = Residual(attention)
        self.norm = L2Norm() if normalize else None

    @property
    def attention(self) -> Attention:
        return self.residual.block

    @property
    def normalize(self) -> bool:
        return self.norm is not None

    @property
    def d(self) -> int:
        return self.attention.d_model // 2

    @property
    def W(self) -> torch.Tensor:
        r"""The paper's :math:`W` (column layout): :math:`W_Q^\top`."""
        return self.attention.W_Q[0].T

    @property
    def V(self) -> torch.Tensor:
        r"""The paper's :math:`V` (column layout): :math:`W_V^\top`."""
        return self.attention.W_V[0].T

    @property
    def dtype(self) -> torch.dtype:
        return self.attention.W_Q.dtype

    def layer(self, Z: torch.Tensor) -> torch.Tensor:
        """One loop: residual linear attention, then the per-token ℓ2 normalisation."""
        Z = self.residual(Z)
        return self.norm(Z) if self.norm is not None else Z

    def _inputs(self, X, a, loops) -> tuple[torch.Tensor, torch.Tensor, int]:
        X = _validate.real_tensor("X", X, ndim=3)
        a = _validate.real_tensor("a", a, ndim=2)
        loops = _validate.positive_int("loops", loops)
        B, d, n = X.shape
        if d != self.d:
            raise ValueError(f"X must have shape (B, {self.d}, n), got {tuple(X.shape)}")
        if n < 1:
            raise ValueError("X must have at least one column")
        if a.shape != (B, d):
            raise ValueError(f"a must have shape ({B}, {d}) to match X, got {tuple(a.shape)}")
        if self.normalize:
            tol = unit_norm_tolerance(d, X.dtype, self.dtype)
            deviation = float((X.double().norm(dim=-2) - 1).abs().max())
            if deviation > tol:
                raise ValueError(
                    f"X must have unit-norm columns when normalize=True (a column norm is off "
                    f"by {deviation:.3g} > {tol:.3g}); use normalize_columns(X)")
            if (a.norm(dim=-1) == 0).any():
                raise ValueError("a must be nonzero when normalize=True")
        return X.to(self.dtype), a.to(self.dtype), loops

    def states(self, X: torch.Tensor, a: torch.Tensor, loops: int) -> torch.Tensor:
        r"""Every embedding :math:`Z_0 = E^\top, Z_1, \dots, Z_L`: ``(B, L + 1, n + 1, 2d)``."""
        X, a, loops = self._inputs(X, a, loops)
        states = [_embed(X, a)]
        for _ in range(loops):
            states.append(self.layer(states[-1]))
        return torch.stack(states, dim=1)

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return [LOOPED] + (["ℓ2 normalisation of each token (no mean-centring, unlike "
                            "LayerNorm)"] if self.normalize else []) + [LINEAR_ATTENTION]

    def forward(self, X: torch.Tensor, a: torch.Tensor, loops: int, *,
                return_iterates: bool = False):
        r"""The query block after ``loops`` loops, ``(B, d)``: the output direction
        :math:`y_L` (a unit vector when ``normalize=True``).

        With ``return_iterates=True`` also returns :math:`y_0 = a, y_1, \dots, y_L` as
        ``(B, loops + 1, d)``.
        """
        X, a, loops = self._inputs(X, a, loops)
        Z = _embed(X, a)
        iterates = [a]
        for _ in range(loops):
            Z = self.layer(Z)
            iterates.append(Z[:, -1, self.d:])
        if return_iterates:
            return iterates[-1], torch.stack(iterates, dim=1)
        return iterates[-1]


def from_block_weights(W: torch.Tensor, V: torch.Tensor, *, normalize: bool = True
                       ) -> LoopedPowerTransformer:
    r"""A :class:`LoopedPowerTransformer` with the paper's ``W`` and ``V`` (column layout,
    each ``(2d, 2d)``), stored as :math:`W_Q = W^\top`, :math:`W_V = V^\top`,
    :math:`W_K = W_O = I`."""
    W = _validate.real_tensor("W", W, ndim=2)
    V = _validate.real_tensor("V", V, ndim=2)
    width = W.shape[0]
    if W.shape != (width, width) or width % 2 or width < 4:
        raise ValueError(f"W must be square with an even size >= 4, got {tuple(W.shape)}")
    if V.shape != W.shape:
        raise ValueError(f"V must have the shape of W {tuple(W.shape)}, got {tuple(V.shape)}")
    eye = torch.eye(width, dtype=W.dtype, device=W.device)
    attention = Attention(W.T.clone(), eye, V.T.clone(), eye.clone(), kind="linear")
    return LoopedPowerTransformer(attention, normalize=normalize)


def looped_power_transformer(d: int, rho: float, *, normalize: bool = True,
                             dtype: torch.dtype = torch.float64,
                             device=None) -> LoopedPowerTransformer:
    r"""The looped construction whose every loop is one step of the power method shifted
    by ``rho``: :math:`y_L = (I + \rho S)^L a/\lVert\cdot\rVert`.

    ``rho`` is split evenly as :math:`w = \sqrt{|\rho|}`, :math:`v = \operatorname{sign}
    (\rho)\sqrt{|\rho|}` (only :math:`\rho = wv` matters; the split is a gauge). The theorem
    needs :math:`\rho > 0`; any finite ``rho`` is accepted (:math:`\rho = 0` is the
    identity). *Precision:* the output is within :math:`\tfrac{C}{\rho}` of the unshifted
    power method, :math:`C = L\lVert(I - y_Ly_L^\top)S^{L-1}a\rVert/\lVert S^La\rVert`, so a
    target distance :math:`\epsilon` needs :math:`\rho \gtrsim C/\epsilon` (for
    :math:`X` with a few dozen unit columns, :math:`\rho = 10^3` gives about :math:`10^{-3}`).

    ``normalize=False`` removes the ℓ2 normalisation (the paper's no-LN ablation); the
    query then grows as :math:`(I + \rho S)^L a`.
    """
    d = _validate.positive_int("d", d, minimum=2)
    rho = _validate.finite_float("rho", rho)
    w = math.sqrt(abs(rho))
    W, V = block_weights(d, w, math.copysign(w, rho), dtype=dtype, device=device)
    return from_block_weights(W, V, normalize=normalize)


def residual_cancelling_layer(d: int, rho: float, *, dtype: torch.dtype = torch.float64,
                              device=None) -> LoopedPowerTransformer:
    r"""Without normalisation, one layer that outputs exactly :math:`\rho Sa` for a unit
    query :math:`a` (the expressivity caveat).

    Add query blocks :math:`W_{22} = I`, :math:`V_{22} = -I` to the block weights. Then
    :math:`EE^\top WE` has query column :math:`(wSa,\; aa^\top a) = (wSa,\; a)` for
    :math:`\lVert a\rVert = 1`, and :math:`V` maps it to :math:`(0,\; \rho Sa - a)`, which
    cancels the residual: the query leaves as :math:`\rho Sa`, whose direction is one step of
    the *unshifted* power method. The data columns still receive zero. So a layer without
    normalisation can represent the power step's direction exactly; what it cannot do is
    match the *norm* of a normalised target for every :math:`X` (see the claims in
    ``theorems/areas/power_method/``). Use one loop: the cancellation needs a unit query.
    """
    d = _validate.positive_int("d", d, minimum=2)
    rho = _validate.finite_float("rho", rho)
    w = math.sqrt(abs(rho))
    W, V = block_weights(d, w, math.copysign(w, rho), w22=1.0, v22=-1.0, dtype=dtype,
                         device=device)
    return from_block_weights(W, V, normalize=False)


def trainable(model: LoopedPowerTransformer) -> LoopedPowerTransformer:
    r"""Make :math:`W` and :math:`V` trainable (``W_Q``, ``W_V``); :math:`W_K = W_O = I` stay
    fixed, so gradient descent runs on exactly the paper's :math:`\theta = (V, W)`."""
    _validate.instance("model", model, LoopedPowerTransformer)
    model.attention.W_Q.requires_grad_(True)
    model.attention.W_V.requires_grad_(True)
    return model


def block_coordinates(W: torch.Tensor, V: torch.Tensor) -> dict[str, float]:
    r"""How far ``(W, V)`` lies from the block manifold, and where on it.

    The nearest point of the manifold in the Frobenius norm has :math:`w` = the mean diagonal
    of :math:`W_{12}` and :math:`v` = that of :math:`V_{21}`. Returns ``w``, ``v``,
    ``rho = w v`` and ``off_ratio`` = :math:`\lVert(W, V) - \text{nearest}\rVert_F /
    \lVert\text{nearest}\rVert_F`.
    """
    W = _validate.square_matrix("W", W, finite=False)  # trained weights may have diverged
    if W.shape[0] % 2:
        raise ValueError(f"W must be square with an even size 2d, got {tuple(W.shape)}")
    V = _validate.real_tensor("V", V, shape=tuple(W.shape), finite=False)
    W, V = W.detach().double().cpu(), V.detach().double().cpu()
    d = W.shape[0] // 2
    w = float(torch.diagonal(W[:d, d:]).mean())
    v = float(torch.diagonal(V[d:, :d]).mean())
    W0, V0 = _block_weights(d, w, v, 0.0, 0.0, resolve(torch.float64, None))
    off = math.hypot(float((W - W0).norm()), float((V - V0).norm()))
    on = math.hypot(float(W0.norm()), float(V0.norm()))
    return {"w": w, "v": v, "rho": w * v, "off_ratio": off / on if on > 0 else math.inf}
