r"""One softmax read-out erases what lies outside the patterns' span (Sargolzaei 2026,
arXiv:2604.03190; code and LaTeX: salehsargolzaee/boosted-attention).

Tolerances. :math:`T(\xi) = Xp` with :math:`p = \mathrm{softmax}(\beta X^\top\xi)`. The
softmax Jacobian :math:`J = \mathrm{diag}(p) - pp^\top` satisfies
:math:`\lVert Jv\rVert_1 \le 2\lVert v\rVert_\infty`, so a score perturbation
:math:`\delta` moves :math:`T` by at most :math:`2\lVert\delta\rVert_\infty \max_i\lVert x_i\rVert`.
Scores are :math:`d`-term dot products scaled by :math:`\beta`, accurate to
:math:`\gamma_{d+1}\,\beta\,|X|^\top|\xi|`; the computed projection :math:`XX^+\xi` is
certified a-posteriori from the returned least-squares solution (:func:`projection_error`).
Hull membership is certified from a separating hyperplane (:func:`hull_distance_lower_bound`),
not from the conic solver's tolerances.
"""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.hopfield import hopfield_update, twicing
from theorems.certificates import frobenius_upper, sigma_min_lower_bound
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence, expect_failure
from theorems.numerics import gamma
from theorems.profiles import budget
from theorems.proof_statements import Scope
from theorems.proving import coq_proof
from theorems.strategies import gaussian_matrices

SARGOLZAEI = {"arxiv": "2604.03190", "ref": "Sargolzaei (2026)"}

HP_CONVEX = Claim(
    id="hopfield.convex-hull",
    title="One Hopfield step lands in the convex hull of the stored patterns",
    statement=(
        r"For patterns $X = [x_1, \dots, x_N] \in \mathbb R^{d\times N}$, inverse temperature "
        r"$\beta > 0$ and state $\xi \in \mathbb R^d$, the update "
        r"$T(\xi) = X\,\mathrm{softmax}(\beta X^\top\xi)$ has weights "
        r"$p = \mathrm{softmax}(\beta X^\top\xi)$ with $p_i \ge 0$, $\sum_i p_i = 1$, so "
        r"$T(\xi) \in \mathrm{conv}(X) \subseteq \mathrm{col}(X)$."),
    source=Source(where="Proposition 1(a) (one-step projection)", tag="V", **SARGOLZAEI),
    kind="identity",
    construction="constructions.hopfield:hopfield_update",
)

HP_ERASURE = Claim(
    id="hopfield.orthogonal-erasure",
    title="One Hopfield step erases the component orthogonal to the patterns",
    statement=(
        r"With $X$, $\beta$, $T$ as in the convex-hull claim, write "
        r"$\xi = \xi_\parallel + \xi_\perp$ with $\xi_\parallel = XX^+\xi \in \mathrm{col}(X)$ "
        r"($X^+$ the pseudo-inverse) and $\xi_\perp \perp \mathrm{col}(X)$. Then "
        r"$T(\xi) = T(\xi_\parallel)$: the orthogonal part is erased in one step."),
    source=Source(where="Proposition 1(b) (one-step projection)", tag="V", **SARGOLZAEI),
    kind="identity",
    construction="constructions.hopfield:hopfield_update",
    depends_on=("hopfield.convex-hull",),
)

HP_FIXED_POINTS = Claim(
    id="hopfield.fixed-points",
    title="Every fixed point of the Hopfield update lies in the patterns' convex hull",
    statement=(
        r"With $T$ as in the convex-hull claim, every $\xi^\star$ with "
        r"$T(\xi^\star) = \xi^\star$ lies in $\mathrm{conv}(X)$."),
    source=Source(where="Proposition 1(c) (one-step projection)", tag="V", **SARGOLZAEI),
    kind="identity",
    construction="constructions.hopfield:hopfield_update",
    depends_on=("hopfield.convex-hull",),
)

HP_RESIDUAL = Claim(
    id="hopfield.residual-keeps-orthogonal",
    title="With a residual stream nothing is erased",
    statement=(
        r"With the residual update $R(\xi) = \xi + T(\xi)$, "
        r"$R(\xi) - R(\xi_\parallel) = \xi_\perp$ for every $\xi$ (notation as in the "
        r"orthogonal-erasure claim): the orthogonal component passes through unchanged."),
    source=Source(where="caveat to the one-step projection, derived here", tag="D",
                  **SARGOLZAEI),
    kind="identity",
    construction="constructions.hopfield:hopfield_update",
    depends_on=("hopfield.orthogonal-erasure",),
)

HP_TWICING = Claim(
    id="hopfield.twicing-identity",
    title="Twicing attention is one attention step plus one step on its residual",
    statement=(
        r"For any $A \in \mathbb R^{n\times n}$ and $V \in \mathbb R^{n\times d_v}$, "
        r"$(2A - A^2)V = AV + A(V - AV)$."),
    source=Source(where="Section on boosted attention (twicing)", tag="V", **SARGOLZAEI),
    kind="identity",
    construction="constructions.hopfield:twicing",
)


HP_TWICING_HULL = Claim(
    id="hopfield.twicing-convex-hull",
    title="Twicing's output stays in the convex hull of the values (false)",
    statement=(
        r"For a row-stochastic attention matrix $A = \mathrm{softmax}(QK^\top/\sqrt{d_h}) "
        r"\in \mathbb R^{n\times n}$ (softmax over each row) and values $V \in \mathbb "
        r"R^{n\times d_v}$ with rows $V_1, \dots, V_n$, every row of the Twicing output "
        r"$(2A - A^2)V$ lies in $\mathrm{conv}(V_1, \dots, V_n)$, because $2A - A^2$ is doubly "
        r"stochastic with nonnegative entries."),
    source=Source(where="Proposition 3 (limitation of shared attention in Twicing) and its "
                        "proof, in the paper/main.tex of commit 0f7d4ee of "
                        "salehsargolzaee/boosted-attention; the release commit fd75980 and "
                        "later no longer state it", tag="V", **SARGOLZAEI),
    kind="identity",
    construction="constructions.hopfield:twicing",
    depends_on=("hopfield.twicing-identity",),
    correction=(
        r"The rows of $W = 2A - A^2$ sum to one ($A\mathbf 1 = \mathbf 1$ gives "
        r"$A^2\mathbf 1 = \mathbf 1$) but their entries can be negative: "
        r"$W_{ij} = 2A_{ij} - \sum_k A_{ik}A_{kj} \ge 2A_{ij} - 1 \ge -1$. So each output row "
        r"is an affine combination $\sum_j W_{ij}V_j$ of the values with weights summing to "
        r"one and $\lVert W_{i\cdot}\rVert_1 \le 2 + 1 = 3$: it lies in the affine hull of "
        r"the values, not in general in their convex hull. With $A = \mathrm{softmax}"
        r"\begin{pmatrix}0&5\\5&0\end{pmatrix}$ and $V = I_2$ the first output row is "
        r"$(-0.973, 1.973)$, outside $\mathrm{conv}(e_1, e_2)$, whose coordinates lie in "
        r"$[0, 1]$."),
    refutes="as-written",
)


@st.composite
def hopfield_cases(draw):
    """Fewer patterns than dimensions (so col(X) is a proper subspace) and beta in [0.01, 50]."""
    d = draw(st.integers(2, 10))
    N = draw(st.integers(1, d - 1))
    X = draw(gaussian_matrices(d, N))
    xi = draw(gaussian_matrices(1, d, scale=draw(st.sampled_from([0.1, 1.0, 3.0]))))[0]
    beta = draw(st.floats(0.01, 50.0))
    return X, xi, beta


def _coefficients(X: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
    # gelsd: the default gelsy driver of the CPU build gives run-to-run different last bits
    return torch.linalg.lstsq(X, xi.unsqueeze(-1), driver="gelsd").solution.squeeze(-1)


def parallel_part(X: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
    return X @ _coefficients(X, xi)


def projection_error(X: torch.Tensor, xi: torch.Tensor) -> float:
    r"""A certified bound on :math:`\lVert\hat\xi_\parallel - XX^+\xi\rVert` for the computed
    :func:`parallel_part` (``X`` of full column rank, certified here; ``inf`` otherwise).

    With :math:`\hat a` the returned coefficients and :math:`r = X\hat a - \xi`,
    :math:`X\hat a - XX^+\xi = X(X^\top X)^{-1}X^\top r`, and :math:`X(X^\top X)^{-1}` has norm
    :math:`1/\sigma_{\min}`: so it is at most :math:`\lVert X^\top r\rVert/\sigma_{\min}`,
    where :math:`\mathrm{fl}(X^\top\hat r)` errs by :math:`\gamma_d|X|^\top|\hat r|` and
    :math:`\hat r` by :math:`\delta = \gamma_{N+1}(|X||\hat a| + |\xi|)`, whose part moves
    the projection by at most :math:`\lVert\delta\rVert` (an orthogonal projector). Forming
    :math:`X\hat a` adds :math:`\gamma_N|X||\hat a|`. :math:`\sigma_{\min}` is certified by
    :func:`theorems.certificates.sigma_min_lower_bound`: no solver constant enters."""
    d, N = X.shape
    sigma = sigma_min_lower_bound(X)
    if sigma <= 0:
        return float("inf")
    a = _coefficients(X, xi)
    r = X @ a - xi
    normal = frobenius_upper(X.T @ r) + gamma(d) * frobenius_upper(X.abs().T @ r.abs())
    delta = gamma(N + 1) * frobenius_upper(X.abs() @ a.abs() + xi.abs())
    forming = gamma(N) * frobenius_upper(X.abs() @ a.abs())
    return normal / sigma + delta + forming


def update_tolerance(X: torch.Tensor, xi: torch.Tensor, beta: float) -> float:
    r"""Bound on |T(xi) - T(xi_par)| from rounding only (see the module docstring).

    Scores are ``(beta * xi) @ X``: one rounding of beta xi, then a d-term dot product, so
    with :math:`|x_i \cdot v| \le \lVert x_i\rVert\lVert v\rVert` (Cauchy-Schwarz) each
    evaluation errs by :math:`\gamma_{d+1}\beta c\lVert\xi\rVert`, :math:`c = \max_i\lVert
    x_i\rVert` (:math:`\lVert\xi_\parallel\rVert \le \lVert\xi\rVert`); the computed
    :math:`\xi_\parallel` adds :math:`\beta c` times its own certified error
    (:func:`projection_error`). The Jacobian bound turns
    the two score errors into :math:`2c(\delta_\xi + \delta_{\xi_\parallel})`. The softmax's
    own rounding, per evaluation: the max shift's subtraction moves each exponent by
    :math:`\le u\cdot 2\max|\hat s|` (another score perturbation, :math:`2c` times it), and
    exp (1 ulp), the N-term sum and the division move each weight by a relative
    :math:`\gamma_{N+3}`, the output by :math:`\le\gamma_{N+3}c`; the product :math:`Xp`
    adds :math:`\gamma_N c(1 + \gamma_{N+3})`. Both evaluations count.
    """
    d, N = X.shape
    column_norm = float(X.norm(dim=0).max())
    score_error = beta * column_norm * (2 * gamma(d + 1) * float(xi.norm())
                                        + projection_error(X, xi))
    max_score = beta * column_norm * float(xi.norm()) * (1 + gamma(d + 1))
    shift_error = 2 * gamma(1) * max_score
    softmax_rounding = 2 * (2 * shift_error * column_norm + gamma(N + 3) * column_norm)
    product_rounding = 2 * gamma(N) * (1 + gamma(N + 3)) * column_norm
    return 2 * score_error * column_norm + softmax_rounding + product_rounding


def convex_hull_check(build=hopfield_update):
    @given(case=hopfield_cases())
    def run(case):
        X, xi, beta = case
        T = build(X, beta)
        p = T.weights(xi)
        N = X.shape[1]
        # The weights are exp values divided by their own computed N-term sum (gamma_{N+1}
        # off 1 in total: gamma_2 per weight, gamma_{N-1} in the sum), summed here with N - 1
        # more roundings: gamma_{2N}.
        sum_tol = gamma(2 * N)
        sum_err = abs(float(p.sum()) - 1)
        evidence.margin((sum_tol - sum_err) / sum_tol)
        assert float(p.min()) >= 0 and sum_err <= sum_tol, f"weights {p.tolist()}"
        # Two N-term products of the same weights (T's and this one), each within gamma_N
        # max|X| sum(p) <= gamma_N max|X| (1 + gamma_{2N}).
        err = float((T(xi) - X @ p).abs().max())
        assert err <= 2 * gamma(N) * (1 + sum_tol) * float(X.abs().max()), "T(xi) is not X p"
    return run


test_update_is_a_convex_combination = check(HP_CONVEX, "property")(convex_hull_check())


def erasure_check(build=hopfield_update):
    @given(case=hopfield_cases())
    def run(case):
        X, xi, beta = case
        T = build(X, beta)
        xi_par = parallel_part(X, xi)
        err = float((T(xi) - T(xi_par)).norm())
        tol = update_tolerance(X, xi, beta)
        evidence.margin((tol - err) / tol)
        evidence.metric("|xi_perp| / |xi|", float((xi - xi_par).norm() / xi.norm()),
                        worse="lower")
        assert err <= tol, f"|T(xi) - T(xi_par)| = {err:.3g} > {tol:.3g}"
    return run


test_one_step_erases_the_orthogonal_part = check(HP_ERASURE, "property")(erasure_check())


def distance_to_hull(X: torch.Tensor, point: torch.Tensor) -> tuple[float, float]:
    r"""Certified ``(lower, upper)`` bounds on :math:`\mathrm{dist}(\xi, \mathrm{conv}(X))`,
    from the solution that cvxpy (Clarabel) returns for :math:`\min_p\lVert Xp - \xi\rVert`
    over the simplex, whatever its accuracy:

    - upper: :math:`q = \max(p, 0)/\sum\max(p, 0)` is exactly in the simplex, so
      :math:`\mathrm{dist} \le \lVert Xq - \xi\rVert`, computed within
      :math:`\gamma_{N+1}(|X|q + |\xi|)` (and the normalisation's :math:`\gamma_{N+1}` on q);
    - lower (a separating hyperplane): for any unit :math:`y`, :math:`\mathrm{dist} \ge
      y^\top\xi - \max_i y^\top x_i`; here :math:`y \propto \xi - Xp`, each inner product a
      :math:`d`-term sum within :math:`\gamma_d|y|^\top|\cdot|` (one more :math:`u` for the
      difference), and :math:`\lVert y\rVert \le
      1 + \gamma_{d+2}` after normalising (so the bound is divided by that)."""
    import cvxpy as cp

    p = cp.Variable(X.shape[1])
    problem = cp.Problem(cp.Minimize(cp.norm(X.numpy() @ p - point.numpy())),
                         [p >= 0, cp.sum(p) == 1])
    problem.solve(solver=cp.CLARABEL)
    d, N = X.shape
    weights = torch.from_numpy(p.value).to(X.dtype).clamp_min(0)
    q = weights / weights.sum()
    q_abs = q * (1 + gamma(N + 1))
    upper = frobenius_upper(X @ q - point) + gamma(N + 1) * frobenius_upper(
        X.abs() @ q_abs + point.abs())
    gap = point - X @ q
    if float(gap.norm()) == 0:
        return 0.0, upper
    y = gap / gap.norm()
    rounding = gamma(d + 1) * float((y.abs() @ point.abs()) + (y.abs() @ X.abs()).max())
    lower = (float(y @ point) - float((y @ X).max()) - rounding) / (1 + gamma(d + 2))
    return max(lower, 0.0), upper


def hull_rounding(X: torch.Tensor) -> float:
    r"""How far the computed :math:`T(\xi) = \mathrm{fl}(X\hat p)` can lie from
    :math:`\mathrm{conv}(X)`: the computed weights are :math:`\ge 0` with
    :math:`|\sum\hat p - 1| \le \gamma_{N+1}` (convex_hull_check), so
    :math:`X\hat p/\sum\hat p` is a hull point within :math:`c\gamma_{N+1}` of
    :math:`X\hat p` (:math:`c = \max_i\lVert x_i\rVert`), and forming the product adds
    :math:`\gamma_N c(1 + \gamma_{N+1})`."""
    N = X.shape[1]
    c = float(X.norm(dim=0).max()) * (1 + gamma(X.shape[0] + 2))
    return c * (gamma(N + 1) + gamma(N) * (1 + gamma(N + 1)))


def fixed_point_check(build=hopfield_update):
    @budget(0.1)  # each example solves a conic program (about 0.1 s)
    @given(case=hopfield_cases())
    def run(case):
        X, xi, beta = case
        T = build(X, beta)
        # which point is tested, not a tolerance: iterate until the step is at the rounding
        # level of T's output (1e-13 relative); the assertion below is sound for every
        # computed T(xi) of a correct construction, fixed point or not
        for _ in range(500):  # the update is a contraction near its attracting fixed points
            xi_next = T(xi)
            if float((xi_next - xi).norm()) <= 1e-13 * (1 + float(xi.norm())):
                break
            xi = xi_next
        else:
            return  # no fixed point reached from this start: nothing to check
        evidence.cases(1)
        lower, upper = distance_to_hull(X, xi_next)
        allowed = hull_rounding(X)
        evidence.metric("certified distance to the hull (upper bound)", upper)
        evidence.margin(1 - lower / allowed)
        # fails only on a certificate: a separating hyperplane puts the point outside the hull
        # by more than T's own rounding
        assert lower <= allowed, f"fixed point at distance >= {lower:.3g} from the hull"
    return run


test_fixed_points_lie_in_the_hull = check(HP_FIXED_POINTS, "numeric")(fixed_point_check())


def residual_check(residual: bool = True):
    @given(case=hopfield_cases())
    def run(case):
        X, xi, beta = case
        R = hopfield_update(X, beta, residual=residual)
        xi_par = parallel_part(X, xi)
        err = float((R(xi) - R(xi_par) - (xi - xi_par)).norm())
        # On top of the two updates: the residual additions xi + T round by u(|xi| + c) each
        # (|T| <= c, a convex combination of columns), and this check's three subtractions by
        # u |xi| at most each (|xi - xi_par| <= |xi|): gamma_5 (|xi| + c) covers them.
        column_norm = float(X.norm(dim=0).max())
        tol = update_tolerance(X, xi, beta) + gamma(5) * (float(xi.norm()) + column_norm)
        evidence.margin((tol - err) / tol)
        assert err <= tol, f"R(xi) - R(xi_par) differs from xi_perp by {err:.3g}"
    return run


test_residual_stream_keeps_the_orthogonal_part = check(HP_RESIDUAL, "property")(
    residual_check())


@st.composite
def attention_matrices(draw):
    n = draw(st.integers(1, 12))
    A = draw(gaussian_matrices(n, n)).softmax(-1) if draw(st.booleans()) else draw(
        gaussian_matrices(n, n))
    return A, draw(gaussian_matrices(n, draw(st.integers(1, 6))))


def twicing_check(boost=twicing):
    @given(case=attention_matrices())
    def run(case):
        A, V = case
        n = A.shape[0]
        left, right = boost(A, V), A @ V + A @ (V - A @ V)
        # left = fl(fl(2A - fl(AA)) V): the n-term AA, the subtraction (2A exact) and the
        # n-term product: gamma_{2n+1} (2|A| + |A||A|)|V|; right = fl(AV + fl(A fl(V - AV))):
        # gamma_{2n+2} (|A||V| + |A|(|V| + |A||V|)) = gamma_{2n+2}(2|A||V| + |A||A||V|). The
        # absolute chain, evaluated in float64 (at most 2n + 2 roundings of positive terms),
        # is within 1 + gamma_{4n+4} of its exact value.
        scale = 2 * A.abs() @ V.abs() + A.abs() @ (A.abs() @ V.abs())
        tol = 2 * gamma(2 * n + 2) * scale * (1 + gamma(4 * n + 4))
        err = (left - right).abs()
        evidence.margin(float(((tol - err) / tol.clamp_min(1e-300)).min()))
        assert (err <= tol).all(), f"twicing identity off by {float(err.max()):.3g}"
    return run


test_twicing_identity = check(HP_TWICING, "property")(twicing_check())


# --- Twicing and the convex hull (false as stated) -----------------------------------------

def pinned_twicing_case() -> tuple[torch.Tensor, torch.Tensor]:
    """A two-token attention that looks almost entirely at the other token, and V = I."""
    scores = torch.tensor([[0.0, 5.0], [5.0, 0.0]], dtype=torch.float64)
    return scores.softmax(-1), torch.eye(2, dtype=torch.float64)


@st.composite
def softmax_attention(draw):
    """A row-stochastic A = softmax(scores), sharp or flat, and Gaussian values."""
    n = draw(st.integers(1, 8))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    A = draw(gaussian_matrices(n, n, scale=scale)).softmax(-1)
    return A, draw(gaussian_matrices(n, draw(st.integers(1, 4))))


def twicing_hull_check(boost=twicing):
    """The claim as stated, through a necessary condition: each coordinate of an output row
    lies between the smallest and largest value of that coordinate over the rows of V (the
    projection of conv(V) onto a coordinate axis). A point outside that interval is outside
    the hull, so a failure here is a genuine counterexample.

    Tolerance: the computed (2A - A^2)V differs from the exact one entrywise by at most
    gamma_{2n+2} (2|A| + |A|^2)|V| (an n-term product for A^2, one subtraction, an n-term
    product with V), and the interval ends are exact (min and max of stored entries).
    """
    @given(case=softmax_attention())
    @example(case=pinned_twicing_case())
    def run(case):
        A, V = case
        n = A.shape[0]
        out = boost(A, V)
        tol = gamma(2 * n + 2) * ((2 * A.abs() + A.abs() @ A.abs()) @ V.abs())
        low, high = V.min(0).values, V.max(0).values
        excess = torch.maximum(low - out, out - high) - tol
        evidence.margin(float(-excess.max()) / float(V.abs().max() + 1e-300))
        assert float(excess.max()) <= 0, (
            f"(2A - A^2)V leaves the values' coordinate range by {float(excess.max()):.4g}: "
            f"rows {out.tolist()} against ranges {low.tolist()}..{high.tolist()}")
    return run


def twicing_hull_refutation(boost=twicing):
    """The as-stated check fails, and the pinned case leaves the hull by exactly
    2(1 - e)^2 - 1 with e = 1/(1 + e^5): its first output row is (1 - 2(1-e)^2, 2(1-e)^2)."""
    def run():
        report = expect_failure(twicing_hull_check(boost))
        evidence.counterexample(report)
        A, V = pinned_twicing_case()
        out = boost(A, V)
        e = 1 / (1 + torch.exp(torch.tensor(5.0, dtype=torch.float64)))
        exact = torch.stack([1 - 2 * (1 - e) ** 2, 2 * (1 - e) ** 2])
        # rounding: gamma_6 (n = 2) times (2|A| + |A|^2)|V| <= 3, plus the exact value's own
        # evaluation (a few operations on e, well inside 8 u)
        tol = 3 * gamma(6) + gamma(8)
        err = float((out[0] - exact).abs().max())
        evidence.metric("first output row, coordinate 1", float(out[0, 0]), worse="higher")
        evidence.metric("distance outside [0, 1]", float(-out[0, 0]), worse="lower")
        assert err <= tol, f"pinned output {out[0].tolist()} is not {exact.tolist()}"
        assert float(out[0, 0]) < -0.97, "the pinned output should leave [0, 1] by 0.97"
    return run


test_twicing_leaves_the_convex_hull = check(HP_TWICING_HULL, "refutation")(
    twicing_hull_refutation())


# --- proved (appended: machine-checked proofs, see theorems/proving.py) ----------------------


# (2A - A^2)V = AV + A(V - AV) for every n, d_v and ring: MathComp matrices.
test_twicing_identity_proved = check(HP_TWICING, "proved")(
    coq_proof("proofs/coq/hopfield_twicing_identity.v", theorem="twicing_identity",
              scope=Scope("statement", "the whole statement: (2A - A^2)V = AV + A(V - AV) for "
                          "every n, d_v, A and V, over any ring (so over the reals)")))
