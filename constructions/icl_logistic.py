r"""In-context logistic regression by looped softmax attention (normalized gradient descent).

Source: Zhang, Cao (2026), "Transformers Efficiently Perform In-Context Logistic Regression
via Normalized Gradient Descent", arXiv:2605.06609. Only the abstract was available: a
softmax construction in which every layer performs exactly one normalized gradient step, and
the same model obtained by training one layer on one-step targets and looping it. No code was
found. The explicit weights below are derived here, for the exponential loss, and are checked
in ``theorems/areas/icl_logistic.py``.

The task
--------
Examples :math:`(x_i, y_i)`, :math:`x_i \in \mathbb R^d`, :math:`y_i \in \{\pm1\}`,
:math:`i = 1..n`; write :math:`z_i = y_i x_i`. The exponential loss and its logarithm are

.. math::

    L(w) = \frac1n\sum_i e^{-\langle w, z_i\rangle},\qquad
    \psi(w) = \log L(w),\qquad \nabla\psi = \frac{\nabla L}{L}
    = -\sum_i \mathrm{softmax}_i(-\langle w, z\rangle)\, z_i .

*Normalized* gradient descent (normalized by the loss) is
:math:`w_{t+1} = w_t - \eta\nabla L(w_t)/L(w_t) = w_t - \eta\nabla\psi(w_t)`, from
:math:`w_0 = 0` (:func:`ngd_step` is the oracle, computed by autograd of :math:`\psi`).

The construction (:func:`looped_ngd`)
-------------------------------------
Tokens are :math:`h_i = (z_i, 0)` for the examples and :math:`h_q = (0, w)` for the query;
one softmax head lets the query attend to the example tokens (the query is not a key), with

.. math::

    W_Q = I_d \ (\text{reads } w),\qquad W_K = -I_d\ (\text{reads } z),\qquad
    W_V = \eta I_d\ (\text{reads } z, \text{ writes into the } w \text{ slot}),

and a residual: :math:`w \leftarrow w + \sum_i \mathrm{softmax}_i\big((wW_Q)\cdot(z_iW_K)
\big)\, z_i W_V = w + \eta\sum_i\mathrm{softmax}_i(-\langle w, z_i\rangle) z_i`, which is one
normalized step, exactly. Looping the layer :math:`t` times gives :math:`w_t`
(:meth:`LoopedNGD.iterates`). The softmax normalisation is what divides by :math:`L`:
without it (``normalize=False``, an ablation) the layer adds
:math:`\eta\sum_i e^{-\langle w,z_i\rangle}z_i = -\eta n\nabla L`, plain gradient descent.

On separable data the iterates converge in direction to the hard-margin SVM
:math:`w^* = \arg\min\{\lVert w\rVert : \langle w, z_i\rangle \ge 1\ \forall i\}`
(:func:`max_margin_direction`, solved with cvxpy), whose normalized margin
:math:`\gamma^* = 1/\lVert w^*\rVert` bounds every :math:`\gamma(w) = \min_i\langle w,
z_i\rangle/\lVert w\rVert` from above.
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions._kernels import hook_with_axes
from constructions.layers import HookPoints, fixed, resolve
from constructions.residual_layout import LOOPED

# --- the task ----------------------------------------------------------------------------------

def _task_inputs(X: object, y: object) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Validated ``(X, y)`` as batched ``(B, n, d)``, ``(B, n)`` and whether a batch was given."""
    X = _validate.real_tensor("X", X, ndim=(2, 3))
    y = _validate.real_tensor("y", y, ndim=(1, 2))
    if y.ndim != X.ndim - 1 or y.shape != X.shape[:-1]:
        raise ValueError(f"y must have shape {tuple(X.shape[:-1])} to match X, "
                         f"got {tuple(y.shape)}")
    if X.shape[-2] < 1:
        raise ValueError("X must hold at least one example")
    if X.shape[-1] < 1:
        raise ValueError(f"X must have d >= 1 features, got shape {tuple(X.shape)}")
    if not bool((y.abs() == 1).all()):
        raise ValueError("y must hold labels in {-1, +1}")
    batched = X.ndim == 3
    if not batched:
        X, y = X.unsqueeze(0), y.unsqueeze(0)
    return X, y.to(X.dtype), batched


def _weights(w: object, Z: torch.Tensor) -> torch.Tensor:
    """``w`` validated against the signed examples ``Z`` ``(..., n, d)``: shape ``(..., d)``."""
    w = _validate.real_tensor("w", w).to(Z.dtype)
    if w.shape != Z.shape[:-2] + Z.shape[-1:]:
        raise ValueError(f"w must have shape {tuple(Z.shape[:-2] + Z.shape[-1:])} to match X, "
                         f"got {tuple(w.shape)}")
    return w


def signed_examples(X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """:math:`z_i = y_i x_i`, the only thing the exponential loss sees: ``(..., n, d)``."""
    X, y, batched = _task_inputs(X, y)
    Z = y.unsqueeze(-1) * X
    return Z if batched else Z[0]


def separable_task(n: int, d: int, *, generator: torch.Generator | None = None,
                   batch: int | None = None, dtype: torch.dtype = torch.float64
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian :math:`x_i \\sim N(0, I_d)` labelled by a Gaussian teacher, so separable."""
    n = _validate.positive_int("n", n)
    d = _validate.positive_int("d", d)
    dtype = _validate.float_dtype("dtype", dtype)
    shape = () if batch is None else (_validate.positive_int("batch", batch),)
    X = torch.randn(*shape, n, d, generator=generator, dtype=dtype)
    teacher = torch.randn(*shape, d, generator=generator, dtype=dtype)
    y = torch.sign(torch.einsum("...nd,...d->...n", X, teacher))
    return X, torch.where(y == 0, torch.ones_like(y), y)


def _log_loss(w: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    r""":math:`\psi(w) = \log\frac1n\sum_i e^{-\langle w, z_i\rangle}` (stable via logsumexp)."""
    scores = -torch.einsum("...d,...nd->...n", w, Z)
    return torch.logsumexp(scores, dim=-1) - torch.log(torch.tensor(float(Z.shape[-2]),
                                                                    dtype=Z.dtype))


def ngd_step(w: torch.Tensor, X: torch.Tensor, y: torch.Tensor, eta: float) -> torch.Tensor:
    r"""The oracle: :math:`w - \eta\nabla L(w)/L(w) = w - \eta\nabla\psi(w)`, by autograd."""
    eta = _validate.positive_float("eta", eta)
    Z = signed_examples(X, y)
    w = _weights(w, Z)
    with torch.enable_grad():
        w_ = w.detach().clone().requires_grad_()
        (gradient,) = torch.autograd.grad(_log_loss(w_, Z).sum(), w_)
    return w - eta * gradient


def normalized_margin(w: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r""":math:`\gamma(w) = \min_i \langle w, z_i\rangle / \lVert w\rVert` (``...``-batched)."""
    Z = signed_examples(X, y)
    w = _weights(w, Z)
    return torch.einsum("...d,...nd->...n", w, Z).amin(-1) / w.norm(dim=-1)


def max_margin_direction(X: torch.Tensor, y: torch.Tensor, *, solver: str = "CLARABEL"
                         ) -> torch.Tensor:
    r"""The hard-margin SVM :math:`w^* = \arg\min \lVert w\rVert^2` s.t.
    :math:`y_i\langle w, x_i\rangle \ge 1`, by cvxpy (imported here, not at module load).

    An interior-point solution with gap tolerance :math:`\epsilon` is only accurate to about
    :math:`\sqrt\epsilon` relatively (the objective is quadratic), so it is *polished*: on the
    constraints active at the solver's point, :math:`w_p` is the minimum-norm solution of
    :math:`\langle w, z_i\rangle = 1`, kept when it satisfies the KKT conditions (feasible,
    and :math:`w_p = \sum_{i \text{ active}} \alpha_i z_i` with :math:`\alpha \ge 0`, found by
    non-negative least squares), which certify it optimal up to rounding
    (:func:`svm_kkt_residual`). Raises ``ValueError`` when the data are not separable.
    """
    import cvxpy as cp
    import numpy as np

    Z = signed_examples(X, y)
    if Z.ndim != 2:
        raise ValueError(f"X must hold one task, of shape (n, d), got {tuple(Z.shape)}")
    if not isinstance(solver, str):
        raise TypeError(f"solver must be a cvxpy solver name, got {type(solver).__name__}")
    if solver.upper() not in cp.installed_solvers():
        raise ValueError(f"solver must be an installed cvxpy solver {cp.installed_solvers()}, "
                         f"got {solver!r}")
    Zn = Z.detach().cpu().numpy().astype(np.float64)
    w = cp.Variable(Zn.shape[1])
    problem = cp.Problem(cp.Minimize(cp.sum_squares(w)), [Zn @ w >= 1])
    problem.solve(solver=solver)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or w.value is None:
        raise ValueError(f"the data are not linearly separable through the origin "
                         f"(solver status {problem.status})")
    solved = np.asarray(w.value, dtype=np.float64)
    for threshold in (1e-4, 1e-6, 1e-8):  # the active set, read at decreasing slack
        active = Zn @ solved <= 1 + threshold
        polished = np.linalg.lstsq(Zn[active], np.ones(int(active.sum())), rcond=None)[0]
        candidate = torch.as_tensor(polished, dtype=Z.dtype)
        if svm_kkt_residual(candidate, X, y) <= 1e-9:
            return candidate
    return torch.as_tensor(solved, dtype=Z.dtype)


def svm_kkt_residual(w: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> float:
    r"""How far ``w`` is from satisfying the hard-margin SVM's KKT conditions, relatively:
    the largest of the constraint violation :math:`\max_i (1 - \langle w, z_i\rangle)_+`, the
    slack of the tight constraints, and the dual residual
    :math:`\min_{\alpha\ge0}\lVert w - \sum_{i\in S}\alpha_iz_i\rVert/\lVert w\rVert` over the
    constraints :math:`S` within ``1e-7`` of tight (SciPy's NNLS, imported here)."""
    import numpy as np
    from scipy.optimize import nnls

    Z = signed_examples(X, y)
    if Z.ndim != 2:
        raise ValueError(f"X must hold one task, of shape (n, d), got {tuple(Z.shape)}")
    w = _weights(w, Z)
    Z = Z.detach().cpu().numpy().astype(np.float64)
    w = w.detach().cpu().numpy().astype(np.float64)
    margins = Z @ w
    tight = margins <= 1 + 1e-7
    if not tight.any():
        return float("inf")
    _, residual = nnls(Z[tight].T, w)
    return float(max(np.clip(1 - margins, 0, None).max(), np.abs(margins[tight] - 1).max(),
                     residual / np.linalg.norm(w)))


# --- the layer -----------------------------------------------------------------------------------

def softmax_update(w: torch.Tensor, Z: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor,
                   W_V: torch.Tensor, *, normalize: bool = True
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""One attention layer with a residual on the query token, and its pattern.

    ``w`` is ``(B, d)``, ``Z`` ``(B, n, d)``. Scores :math:`s_i = (wW_Q)\cdot(z_iW_K)`, pattern
    :math:`p = \mathrm{softmax}(s)` over the example tokens (or :math:`e^{s}` when
    ``normalize`` is false), output :math:`w + \sum_i p_i\, z_i W_V`. Like any layer it lets
    non-finite entries through (a diverging training run then reports a non-finite loss);
    shapes are checked.
    """
    w = _validate.nonempty("w", _validate.real_tensor("w", w, ndim=2, finite=False))
    B, d = w.shape
    Z = _validate.nonempty("Z", _validate.real_tensor("Z", Z, shape=(B, None, d), finite=False))
    W_Q = _validate.real_tensor("W_Q", W_Q, shape=(d, None), finite=False)
    W_Q = _validate.nonempty("W_Q", W_Q)
    W_K = _validate.real_tensor("W_K", W_K, shape=(d, W_Q.shape[1]), finite=False)
    W_V = _validate.real_tensor("W_V", W_V, shape=(d, d), finite=False)
    normalize = _validate.boolean("normalize", normalize)
    scores = torch.einsum("bk,bnk->bn", w @ W_Q, Z @ W_K)
    pattern = scores.softmax(-1) if normalize else scores.exp()
    return w + torch.einsum("bn,bnd->bd", pattern, Z @ W_V), pattern


class LoopedNGD(nn.Module):
    r"""The looped construction (module docstring): every loop is one normalized GD step.

    The weights are multiples of the identity, :math:`W_Q = qI`, :math:`W_K = kI`,
    :math:`W_V = vI` with :math:`(q, k, v) = (1, -1, \eta)`, stored as three scalars so that
    one module serves every dimension :math:`d`; :meth:`weights` returns the matrices.

    Hook points, one block per loop as TransformerLens names its blocks (the query state is one
    position, the ``n`` examples are the keys, one head): ``blocks.t.hook_resid_pre`` and
    ``blocks.t.hook_resid_post`` :math:`w_t`, ``(B, 1, d)``; ``blocks.t.attn.hook_q``
    :math:`w_tW_Q` ``(B, 1, 1, d)``, ``hook_k``/``hook_v`` :math:`z_iW_K`, :math:`z_iW_V`
    ``(B, n, 1, d)``, ``hook_attn_scores`` and ``hook_pattern`` ``(B, 1, 1, n)`` and
    ``hook_z`` :math:`\sum_i p_i z_iW_V` ``(B, 1, 1, d)``, which is added to the state (no
    :math:`W_O`). They see unbatched inputs with a batch of one.
    """

    def __init__(self, eta: float, loops: int, *, normalize: bool = True,
                 dtype: torch.dtype = torch.float64, device=None) -> None:
        super().__init__()
        self.eta = _validate.positive_float("eta", eta)
        loops = _validate.positive_int("loops", loops)
        self.blocks = nn.ModuleList(
            HookPoints("hook_resid_pre", "hook_resid_post",
                       attn=HookPoints("hook_q", "hook_k", "hook_v", "hook_attn_scores",
                                       "hook_pattern", "hook_z"))
            for _ in range(loops))
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
        self.normalize = normalize
        kw = resolve(dtype, device)
        self.scales = fixed(torch.tensor([1.0, -1.0, self.eta], **kw))

    @property
    def loops(self) -> int:
        return len(self.blocks)

    def _update(self, block: nn.Module, w: torch.Tensor, Z: torch.Tensor, W_Q: torch.Tensor,
                W_K: torch.Tensor, W_V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`softmax_update` (the same operations in the same order) through ``block``'s
        hook points; inputs already validated."""
        attn = block.attn
        w = hook_with_axes(block.hook_resid_pre, w, 1)                              # (B, d)
        q = hook_with_axes(attn.hook_q, w @ W_Q, 1, count=2)                       # (B, d)
        k = hook_with_axes(attn.hook_k, Z @ W_K, 2)                                # (B, n, d)
        scores = hook_with_axes(attn.hook_attn_scores, torch.einsum("bk,bnk->bn", q, k), 1,
                            count=2)                                           # (B, n)
        pattern = hook_with_axes(attn.hook_pattern,
                             scores.softmax(-1) if self.normalize else scores.exp(), 1, count=2)
        v = hook_with_axes(attn.hook_v, Z @ W_V, 2)                                # (B, n, d)
        z = hook_with_axes(attn.hook_z, torch.einsum("bn,bnd->bd", pattern, v), 1, count=2)
        return hook_with_axes(block.hook_resid_post, w + z, 1), pattern

    def weights(self, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(W_Q, W_K, W_V)`` for dimension ``d``."""
        eye = torch.eye(d, dtype=self.scales.dtype, device=self.scales.device)
        return self.scales[0] * eye, self.scales[1] * eye, self.scales[2] * eye

    def _run(self, X, y) -> tuple[torch.Tensor, torch.Tensor, bool]:
        X, y, batched = _task_inputs(X, y)
        Z = (y.unsqueeze(-1) * X).to(self.scales)
        W_Q, W_K, W_V = self.weights(Z.shape[-1])
        w = torch.zeros(Z.shape[0], Z.shape[-1], dtype=Z.dtype, device=Z.device)
        states, patterns = [w], []
        for block in self.blocks:
            w, pattern = self._update(block, w, Z, W_Q, W_K, W_V)
            states.append(w)
            patterns.append(pattern)
        return torch.stack(states, dim=1), torch.stack(patterns, dim=1), batched

    def iterates(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Every :math:`w_t`, :math:`t = 0..\\mathrm{loops}`: ``(loops + 1, d)`` or
        ``(B, loops + 1, d)``."""
        states, _, batched = self._run(X, y)
        return states if batched else states[0]

    def patterns(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The attention of the query on the examples at each loop: ``(loops, n)`` or
        ``(B, loops, n)``; at loop :math:`t` it is :math:`\\mathrm{softmax}(-\\langle w_{t-1},
        z\\rangle)`."""
        _, patterns, batched = self._run(X, y)
        return patterns if batched else patterns[0]

    def transformer_lens_lacks(self) -> list[str]:
        """What this construction uses that a TransformerLens ``HookedTransformer`` lacks
        (:func:`constructions.export.to_transformer_lens` names it in its error)."""
        return [LOOPED] + ([] if self.normalize else [
            "unnormalised exponential attention (exp of the scores, no softmax)"]) + [
            "cross-attention from a separate query state to fixed example tokens (only the "
            "query state is updated)"]

    def forward(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """:math:`w_{\\mathrm{loops}}`: ``(d,)`` or ``(B, d)``."""
        states, _, batched = self._run(X, y)
        return states[:, -1] if batched else states[0, -1]


def looped_ngd(eta: float, *, loops: int, normalize: bool = True,
               dtype: torch.dtype = torch.float64, device=None) -> LoopedNGD:
    r"""Softmax attention looped ``loops`` times; each loop is one normalized GD step.

    ``eta`` is the step size :math:`\eta > 0` (the value weight); ``normalize=False`` drops
    the softmax normalisation, which turns the layer into plain gradient descent on
    :math:`nL` (an ablation, see the module docstring).
    """
    return LoopedNGD(eta, loops, normalize=normalize, dtype=dtype, device=device)
