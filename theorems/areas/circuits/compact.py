r"""The compact induction circuits under both corruptions: sufficient within a derived bound.

The compact construction (:func:`~constructions.induction_heads.compact_induction`, width 11,
circle codes) has the same 8 non-zero edges as the one-hot one and, under
:func:`~constructions.circuits.resample_next_token`, the same circuit
:math:`C = \{\text{input} \to a_1\langle v\rangle, a_1 \to \text{logits}\}`; but because the
codes are not one-hot, two edges outside :math:`C` move the metric by a small derived amount.

**Derivation** (positions of the model, BOS at 0; :math:`i` the final one, :math:`j^\star` the
latest earlier occurrence of :math:`a = \sigma_i` in the prompt, so model position
:math:`j^\star + 1`; :math:`c = j^\star + 2` the induction key, holding :math:`\tau` clean and
:math:`\tau'` corrupted; :math:`\tau, \tau' \ne a`, and
:math:`\tau \ne a` because :math:`j^\star` is the latest occurrence). The embeddings differ in
the tok block at row :math:`c` only.

* ``input -> a0.h0<q>``, ``<k>`` and ``input -> a1.h0<k>`` read pos, rec and bos, where the runs
  agree: the patched difference times the read map is an exact zero.
* ``input -> a1.h0<q>`` changes the query of row :math:`c` only, not of row :math:`i`.
* ``a0.h0 -> a1.h0<q>``, ``<v>``, ``input -> logits``, ``a0.h0 -> logits`` are zero maps.
* ``input -> a0.h0<v>`` and ``a0.h0 -> a1.h0<k>``: layer 1's pattern reads positions only, so
  prev changes by :math:`A^1_{jc}(u_{\tau'} - u_\tau)` at every key :math:`j \ge c`, and the
  induction head's score :math:`\beta_2\langle u_a, \mathrm{prev}_j\rangle` moves:
  :math:`\langle u_a, u_{\tau'} - u_\tau\rangle \ne 0` on the circle (it is 0 for one-hot
  codes). With both patched (the complement) the induction head's keys are the corrupted run's, so
  its row :math:`i` is the corrupted pattern :math:`A'`; the construction's guarantee holds
  for the corrupted prompt too (same :math:`j^\star`), so the wrong mass of both :math:`A` and
  :math:`A'` is at most :math:`\bar\varepsilon = \omega/(1+\omega)`, with :math:`\omega` the
  sum of the left sides of (A′), (B′), (C′) of :func:`~constructions.induction_heads.
  compact_conditions` (they bound the odds of older matches, non-matching keys and the sink
  against :math:`c`). Then :math:`\sum_j|A_j - A'_j| \le |\varepsilon - \varepsilon'| +
  \varepsilon + \varepsilon' \le 2\bar\varepsilon`, and with the clean values (unit vectors)
  the metric :math:`m = \sum_j A_j\langle v_j, d\rangle`, :math:`d = u_\tau - u_{\tau'}`,
  moves by at most :math:`2\bar\varepsilon|d|`: **sufficiency within** :math:`2\bar\varepsilon
  |d|`.
* ``input -> a1.h0<v>`` alone: only the value at :math:`c` changes, :math:`|\Delta m| = A_c
  |d|^2 \ge (1-\bar\varepsilon)|d|^2`. ``a1.h0 -> logits`` alone (and either circuit edge
  with the whole complement, which reproduces the corrupted run's output): :math:`m` becomes
  the corrupted metric, and :math:`\langle u_\tau, d\rangle = |d|^2/2 = -\langle u_{\tau'},
  d\rangle` give :math:`m \ge (1-\bar\varepsilon)|d|^2/2 - \bar\varepsilon|d|` clean and
  :math:`\le -(1-\bar\varepsilon)|d|^2/2 + \bar\varepsilon|d|` corrupted: **necessity**
  :math:`|\Delta m| \ge |d|((1-\bar\varepsilon)|d| - 2\bar\varepsilon)`, which exceeds
  the sufficiency bound iff :math:`(1-\bar\varepsilon)|d| > 4\bar\varepsilon`; with
  :math:`|d| = 2\sin(\pi|\tau-\tau'|/N) \ge 2\rho` this holds whenever :math:`\rho >
  2\omega` (checked for every size drawn). Over all pairs the least necessity move is at
  :math:`|d| = 2\rho`.

**Under** :func:`~constructions.circuits.resample_earlier_occurrence` (the one earlier
:math:`a` at :math:`j^\star` becomes :math:`a' \notin \{a, \tau\}`; target :math:`\bot`,
:math:`d = |u_\tau - u_\bot|`) the circuit is the one-hot one's 3 edges. Off it, the q/k edges
of the first paragraph are exact as before, and only ``input -> a1.h0<v>`` moves the metric:
the value at model position :math:`j^\star + 1` (a non-induction key of the clean pattern,
weight :math:`\le\bar\varepsilon`) goes from :math:`u_a` to :math:`u_{a'}`, so
:math:`|\Delta m| \le 2\bar\varepsilon d`. Patching ``input -> a0.h0<v>`` or ``a0.h0 ->
a1.h0<k>`` gives the induction head the corrupted keys, whose pattern puts weight
:math:`\ge 1 - \bar\varepsilon_D` on BOS (value :math:`u_\bot`, condition (D′)), and
``a1.h0 -> logits`` the corrupted output: the same necessity bound as above with
:math:`\omega = \max((A')+(B')+(C'), (D'))`.

Rounding is composed in :func:`rounding_allowance`. Sources: see the area's introduction.
"""

from __future__ import annotations

import math

import torch
from hypothesis import example, given

from constructions.circuits import (
    edge_patched_logits,
    induction_circuit,
    logit_difference,
    resample_earlier_occurrence,
    resample_next_token,
)
from constructions.induction_heads import compact_conditions, compact_induction, compact_parameters
from theorems.areas.circuits._shared import (
    GRAPH,
    PATCHING,
    SHT,
    assert_each_edge_moves,
    cached,
)
from theorems.areas.circuits.earlier_occurrence import occurrence_cases
from theorems.areas.circuits.next_token import corruption_cases
from theorems.claims import Claim, Source
from theorems.evidence import check, evidence
from theorems.numerics import gamma, unit_roundoff
from theorems.profiles import budget

# The claims are about the circuit, like every circuits claim; the bundle finds the compact case
# (and so the compact model) by the claim id (theorems.areas.circuits._cases.case_for_claim).
CIRCUIT = "constructions.circuits:induction_circuit"

CORRUPTION = (r"Let $f = \texttt{compact\_induction}(S, n)$ with $S \ge 3$ (circle codes "
              r"$u_b = (\cos 2\pi b/N, \sin 2\pi b/N)$, $N = S + 1$, $\rho = \sin(\pi/N)$), "
              r"$\sigma$ a prompt of length $m \le n$ whose final token $\sigma_i$ has a latest "
              r"earlier occurrence $j^\star$ with $j^\star + 1 < i$, $\tau = "
              r"\sigma_{j^\star+1}$, and $\sigma'$ the prompt with $\sigma_{j^\star+1}$ "
              r"replaced by $\tau' \notin \{\tau, \sigma_i\}$; $d = |u_\tau - u_{\tau'}|$. "
              r"The circuit is $C = \{\text{input} \to a_1\langle v\rangle,\ a_1 \to "
              r"\text{logits}\}$; the metric is $m(P) = \ell^P_{i,\tau} - \ell^P_{i,\tau'}$. "
              r"Let $\omega$ be the sum of the left sides of (A$'$), (B$'$), (C$'$) of "
              r"$\texttt{compact\_conditions}$ at the default temperatures, $\bar\varepsilon "
              r"= \omega/(1+\omega)$, and $r(S, n)$ the float64 rounding allowance of "
              r"$\texttt{rounding\_allowance}$. ")

CC_SUFFICIENT = Claim(
    id="circuits.compact-sufficient",
    title="Compact induction, next-token resampling: patching every non-circuit edge moves "
          "the metric by at most 2 eps |d|",
    statement=(GRAPH + PATCHING + CORRUPTION + r"Then patching the 10 edges outside $C$ moves "
               r"the metric by $|m(\bar C) - m(\emptyset)| \le 2\bar\varepsilon d + r(S, n)$ "
               r"in float64 (in exact arithmetic by $\le 2\bar\varepsilon d$; only input "
               r"$\to a_0\langle v\rangle$ and $a_0 \to a_1\langle k\rangle$ contribute)."),
    source=Source(where="circuit of the compact construction under this corruption "
                  "(this project)", tag="D", **SHT),
    kind="bound",
    construction=CIRCUIT,
    depends_on=("induction-heads.compact-exact", "circuits.induction-mechanism"),
)

CC_NECESSARY = Claim(
    id="circuits.compact-necessary",
    title="Compact induction, next-token resampling: patching either circuit edge moves the "
          "metric by more than the sufficiency bound",
    statement=(GRAPH + PATCHING + CORRUPTION + r"For each $e \in C$, $|m(\emptyset) - "
               r"m(\{e\})| \ge d((1-\bar\varepsilon)d - 2\bar\varepsilon) - r(S, n)$, which "
               r"exceeds the sufficiency bound $2\bar\varepsilon d + r(S, n)$ whenever "
               r"$\rho > 2\omega$ (true at every size checked)."),
    source=Source(where="from the compact construction's margin conditions (this project)",
                  tag="D", **SHT),
    kind="bound",
    construction=CIRCUIT,
    depends_on=("induction-heads.compact-margins", "induction-heads.compact-exact"),
    notes=(r"Over all pairs the least move is $4\rho((1-\bar\varepsilon)\rho - \bar\varepsilon) "
           r"- r(S, n)$ (at $d = 2\rho$; least_necessity_move, checked by "
           r"tests/test_circuits.py::test_the_compact_bounds_separate, not by the claim's "
           r"check)."),
)

CC_MINIMAL = Claim(
    id="circuits.compact-minimal",
    title="No edge of the compact induction circuit can be dropped",
    statement=(GRAPH + PATCHING + CORRUPTION + r"For each $e \in C$, patching $\bar C \cup "
               r"\{e\}$ (the complement of $C \setminus \{e\}$) moves the metric by at least "
               r"the necessity bound $d((1-\bar\varepsilon)d - 2\bar\varepsilon) - r(S, n)$, "
               r"more than $C \setminus \{e\}$'s sufficiency would allow."),
    source=Source(where="from sufficiency and necessity (this project)", tag="D", **SHT),
    kind="bound",
    construction=CIRCUIT,
    depends_on=("circuits.compact-sufficient", "circuits.compact-necessary"),
)


NEXT, EARLIER = "resample_next_token", "resample_earlier_occurrence"

OCCURRENCE = (r"Let $f = \texttt{compact\_induction}(S, n)$ with $S \ge 3$ (circle codes "
              r"$u_b$, $b \le S$, $N = S + 1$, $\rho = \sin(\pi/N)$; $\bot = S$), $\sigma$ a "
              r"prompt of length $m \le n$ whose final token $a = \sigma_i$ occurs exactly once "
              r"before, at $j^\star$ with $j^\star + 1 < i$, $\tau = \sigma_{j^\star+1}$, and "
              r"$\sigma'$ the prompt with $\sigma_{j^\star}$ replaced by $a' \notin \{a, "
              r"\tau\}$ (no earlier $a$: target $\bot$); $d = |u_\tau - u_\bot|$. The circuit "
              r"is $C = \{\text{input} \to a_0\langle v\rangle,\ a_0 \to a_1\langle k\rangle,"
              r"\ a_1 \to \text{logits}\}$; the metric is $m(P) = \ell^P_{i,\tau} - "
              r"\ell^P_{i,\bot}$. Let $\omega = \max((A')+(B')+(C'), (D'))$ of "
              r"$\texttt{compact\_conditions}$ at the default temperatures, $\bar\varepsilon = "
              r"\omega/(1+\omega)$, and $r(S, n)$ the rounding allowance of "
              r"$\texttt{rounding\_allowance}$. ")

CE_SUFFICIENT = Claim(
    id="circuits.compact-earlier-occurrence-sufficient",
    title="Compact induction, earlier-occurrence resampling: patching every non-circuit edge "
          "moves the metric by at most 2 eps d",
    statement=(GRAPH + PATCHING + OCCURRENCE + r"Then patching the 9 edges outside $C$ moves "
               r"the metric by $|m(\bar C) - m(\emptyset)| \le 2\bar\varepsilon d + r(S, n)$ "
               r"in float64 (only input $\to a_1\langle v\rangle$ contributes in exact "
               r"arithmetic: $\langle u_{a'} - u_a, u_\tau - u_\bot\rangle \ne 0$ on the "
               r"circle, times the clean weight $\le \bar\varepsilon$ on the key after "
               r"$j^\star$)."),
    source=Source(where="circuit of the compact construction under this corruption "
                  "(this project)", tag="D", **SHT),
    kind="bound",
    construction=CIRCUIT,
    depends_on=("induction-heads.compact-exact", "circuits.induction-mechanism"),
)

CE_NECESSARY = Claim(
    id="circuits.compact-earlier-occurrence-necessary",
    title="Compact induction, earlier-occurrence resampling: patching any circuit edge moves "
          "the metric by more than the sufficiency bound",
    statement=(GRAPH + PATCHING + OCCURRENCE + r"For each $e \in C$, $|m(\emptyset) - "
               r"m(\{e\})| \ge d((1-\bar\varepsilon)d - 2\bar\varepsilon) - r(S, n)$, more "
               r"than the sufficiency bound whenever $\rho > 2\omega$ (true at every size "
               r"checked)."),
    source=Source(where="from the compact construction's margin conditions (this project)",
                  tag="D", **SHT),
    kind="bound",
    construction=CIRCUIT,
    depends_on=("induction-heads.compact-margins", "induction-heads.compact-exact"),
)

CE_MINIMAL = Claim(
    id="circuits.compact-earlier-occurrence-minimal",
    title="No edge of the compact earlier-occurrence circuit can be dropped",
    statement=(GRAPH + PATCHING + OCCURRENCE + r"For each $e \in C$, patching $\bar C \cup "
               r"\{e\}$ moves the metric by at least $d((1-\bar\varepsilon)d - "
               r"2\bar\varepsilon) - r(S, n)$."),
    source=Source(where="from sufficiency and necessity (this project)", tag="D", **SHT),
    kind="bound",
    construction=CIRCUIT,
    depends_on=("circuits.compact-earlier-occurrence-sufficient",
                "circuits.compact-earlier-occurrence-necessary"),
)


# --- bounds -----------------------------------------------------------------------------------

def wrong_mass(vocab_size: int, max_len: int, corruption: str = NEXT) -> tuple[float, float]:
    r"""(:math:`\bar\varepsilon`, :math:`\omega`) for the default ``compact_induction``,
    both rounded up. Under the earlier-occurrence corruption :math:`\omega` is
    :math:`\max(\omega, \omega_D)`, with :math:`\omega_D` = (D′) (the corrupted run has no
    match, and (D′) bounds the odds of the real keys against the BOS sink).

    :math:`\omega = (A') + (B') + (C')` bounds the odds against the induction key (see
    :func:`~constructions.induction_heads.compact_induction`), each term :math:`n e^{z}` or
    :math:`e^{z}`. The float64 evaluation (the temperatures are the model's own floats;
    :math:`\rho, g^\star, g_{pos}, \delta` are recomputed) takes at most 32 rounded
    operations along any path into an exponent :math:`z`, on terms whose magnitudes sum to at
    most :math:`Z = \beta_1 g_{pos} + \beta_2(2 + 6\delta) + \lambda(n+3) + \theta` (an
    exponential's 1-ulp error, :math:`2u` relative, counts as two operations), so
    :math:`|\hat z - z| \le \gamma_{32} Z`; then :math:`e^{\hat z}` and the product by
    :math:`n` are within a factor :math:`e^{\gamma_{32}Z}(1+\gamma_3)` of the exact term,
    and the sum of three adds :math:`\gamma_2`. :math:`\bar\varepsilon = \omega/(1+\omega)`
    (increasing in :math:`\omega`) adds :math:`\gamma_2`. (D′)'s exponent terms sum to at
    most :math:`2\beta_2 + \lambda n + \theta \le Z`.
    """
    p = compact_parameters(vocab_size, max_len)
    conditions = compact_conditions(max_len, p)
    n = max_len
    delta = n * math.exp(-p.beta1 * p.position_gap)
    Z = p.beta1 * p.position_gap + p.beta2 * (2 + 6 * delta) + p.recency * (n + 3) + p.sink
    factor = (1 + math.expm1(gamma(32) * Z)) * (1 + gamma(3)) * (1 + gamma(2))
    omega = sum(conditions[k][0] for k in "ABC") * factor
    if corruption == EARLIER:
        omega = max(omega, conditions["D"][0] * factor)  # (D') is one term: within factor
    return omega / (1 + omega) * (1 + gamma(2)), omega


def _dot(terms: int, x: float, ex: float, y: float, ey: float) -> float:
    r"""Error of a computed :math:`\mathrm{fl}(\hat x\cdot\hat y)` against the exact
    :math:`x\cdot y` over ``terms`` non-zero terms, :math:`|x_l| \le x`, :math:`|y_l| \le y`,
    :math:`|\hat x_l - x_l| \le e_x`, :math:`|\hat y_l - y_l| \le e_y`:
    :math:`L(e_x y + e_y x + e_x e_y) + \gamma_L L (x+e_x)(y+e_y)` (exact zero terms add
    nothing: :math:`\mathrm{fl}(0\cdot t) = 0`, :math:`\mathrm{fl}(s + 0) = s`)."""
    return terms * (ex * y + ey * x + ex * ey) + gamma(terms) * terms * (x + ex) * (y + ey)


def _patched(e: float, size: float) -> float:
    r"""Error of :math:`\mathrm{fl}(\hat a + \mathrm{fl}(\hat b' - \hat b))` against
    :math:`a + b' - b` when each hat errs by :math:`\le e` and entries are :math:`\le` size:
    :math:`3e + u(2(size+e)) + u(size + 3e + 2u(size+e)) \le 3e + 4u(size + 3e)`."""
    return 3 * e + 4 * unit_roundoff() * (size + 3 * e)


def rounding_allowance(vocab_size: int, max_len: int) -> float:
    r"""The float64 allowance :math:`r` on a computed move :math:`\hat m(P) - \hat m(\emptyset)`
    of the default ``compact_induction(vocab_size, max_len)``, against the same move of the
    *ideal* construction (exact circle points, exact arithmetic, the same float temperatures).

    Composed per operation (:func:`_dot` for each inner product; every patched input is
    :func:`_patched`; a softmax whose scores err by :math:`\le\eta` has weights within a factor
    :math:`e^{\pm 2\eta}(1\pm\gamma_{n+4})` of the ideal, as in
    :func:`~theorems.areas.circuits._shared.rounding_terms`):

    * stored circle coordinates (tok, pos, the rotation, the BOS value, :math:`W_U`): the angle
      :math:`\mathrm{fl}(\mathrm{fl}(2\pi)k/N)` errs by :math:`\le 2\pi\gamma_3`, cos/sin add
      :math:`\le 1` ulp (:math:`2u`): :math:`\xi = 2\pi\gamma_3 + 2u`. rec
      :math:`\mathrm{fl}(t/n)` and :math:`\mathrm{fl}(\lambda n)`: relative :math:`u` each.
    * layer 1: query :math:`\hat q = \hat x W^1_Q` (2 terms, :math:`|x| \le 1`,
      :math:`|W| \le \beta_1`, entries :math:`\mathrm{fl}(\beta_1 b)` within
      :math:`\beta_1(\xi + 2u)`), key a copy of pos (error :math:`\xi`), score (2 terms) errs
      by :math:`\eta_1`; weights relative :math:`r_1`; prev :math:`= \sum_j \hat A_j \hat v_j`
      (:math:`n+1` terms, values within :math:`e_v = \_patched(\xi, 1)`, unit size):
      :math:`e_p = r_1(1+e_v) + e_v + \gamma_{n+1}(1+r_1)(1+e_v)`; the copy through the
      identity :math:`W_O` and the residual sum with a zero block are exact.
    * layer 2: query tok block :math:`\beta_2\hat x` (error :math:`\beta_2(\xi+u(1+\xi))`) and
      the exact constant 1; key prev within :math:`e_k = \_patched(e_p, 1)`, and
      :math:`\mathrm{fl}(t/n)\mathrm{fl}(\lambda n)` within :math:`\gamma_3\lambda n` (or the
      exact sink); score: two circle terms (:math:`\beta_2`, 1) and one bias term
      (:math:`\max(\lambda n, \theta)`), error :math:`\eta_2`; weights relative :math:`r_2`.
    * output :math:`z = \sum_j \hat A_j \hat v_j` (:math:`n+1` terms, values within
      :math:`e_v`): :math:`e_z` as :math:`e_p`; a patched output
      :math:`e_o = \_patched(e_z, 1)`; a logit :math:`\hat x W_U` (2 terms):
      :math:`e_\ell = \_dot(2, 1, e_o, 1, \xi)`; the metric (a difference of logits of size
      :math:`\le 1`): :math:`e_m = 2e_\ell + u(2 + 2e_\ell)`; a move (difference of two
      metrics of size :math:`\le 2`): :math:`r = 2e_m + u(4 + 2e_m)`.

    Assumption, stated not proved: torch's float64 cos, sin and exp are within 1 ulp
    (:math:`2u`) of the exact values, as glibc's are. The allowance is about :math:`10^{-10}`
    at the sizes checked, against derived bounds of order :math:`10^{-2}`.
    """
    p = compact_parameters(vocab_size, max_len)
    n, u = max_len, unit_roundoff()
    xi = 2 * math.pi * gamma(3) + 2 * u
    e_v = _patched(xi, 1.0)
    # layer 1
    e_q1 = _dot(2, 1.0, xi, p.beta1, p.beta1 * (xi + 2 * u))
    eta1 = _dot(2, p.beta1, e_q1, 1.0, xi)
    r1 = (1 + math.expm1(2 * eta1)) * (1 + gamma(n + 4)) - 1
    e_p = r1 * (1 + e_v) + e_v + gamma(n + 1) * (1 + r1) * (1 + e_v)
    # layer 2
    e_k = _patched(e_p, 1.0)
    bias = max(p.recency * n, p.sink)
    e_qa = p.beta2 * (xi + u * (1 + xi))             # a query coordinate beta2 * x_tok
    eta2 = (2 * (e_qa * (1 + e_k) + p.beta2 * e_k)    # the two circle terms
            + gamma(3) * p.recency * n                # the bias term (query 1, exact)
            + gamma(3) * (2 * (p.beta2 + e_qa) * (1 + e_k) + bias * (1 + gamma(3))))
    r2 = (1 + math.expm1(2 * eta2)) * (1 + gamma(n + 4)) - 1
    e_z = r2 * (1 + e_v) + e_v + gamma(n + 1) * (1 + r2) * (1 + e_v)
    e_o = _patched(e_z, 1.0)
    e_l = _dot(2, 1.0, e_o, 1.0, xi)
    e_m = 2 * e_l + u * (2 + 2 * e_l)
    return 2 * e_m + u * (4 + 2 * e_m)


def code_distance(tau: int, tau_prime: int, vocab_size: int) -> tuple[float, float]:
    r"""(lower, upper) bounds on :math:`d = |u_\tau - u_{\tau'}| = 2\sin(\pi|\tau-\tau'|/N)`:
    the float64 value :math:`\pm (2\pi\gamma_3 + 4u)` (angle error, 1-ulp sin, doubling)."""
    N = vocab_size + 1
    value = 2 * math.sin(math.pi * abs(tau - tau_prime) / N)
    slack = 2 * math.pi * gamma(3) + 4 * unit_roundoff()
    return value - slack, value + slack


def sufficiency_bound(vocab_size: int, max_len: int, d_upper: float,
                      corruption: str = NEXT) -> float:
    """:math:`2\\bar\\varepsilon d + r`: the most a complement patch may move the metric."""
    eps, _ = wrong_mass(vocab_size, max_len, corruption)
    return 2 * eps * d_upper + rounding_allowance(vocab_size, max_len)


def necessity_bound(vocab_size: int, max_len: int, d_lower: float,
                    corruption: str = NEXT) -> float:
    """:math:`d((1-\\bar\\varepsilon)d - 2\\bar\\varepsilon) - r`: the least move of a circuit
    edge (an increasing function of d for d above 2 eps, so the lower end of d is sound)."""
    eps, _ = wrong_mass(vocab_size, max_len, corruption)
    return (d_lower * ((1 - eps) * d_lower - 2 * eps)
            - rounding_allowance(vocab_size, max_len))


def least_necessity_move(vocab_size: int, max_len: int, corruption: str = NEXT) -> float:
    r"""The necessity bound over all pairs, at :math:`d = 2\rho` (:math:`|\tau - \tau'| = 1`,
    or :math:`\tau = S - 1` against :math:`\bot = S`)."""
    return necessity_bound(vocab_size, max_len, code_distance(0, 1, vocab_size)[0],
                           corruption)


# --- checks -----------------------------------------------------------------------------------

def _case(case, corruption: str) -> tuple[int, int, torch.Tensor, torch.Tensor, float, float]:
    S, n, sequence, replacement = case
    clean = torch.tensor([sequence])
    j = max(t for t in range(len(sequence) - 1) if sequence[t] == sequence[-1])
    if corruption == NEXT:
        corrupted = resample_next_token(clean, replacement, S)
        d_lower, d_upper = code_distance(sequence[j + 1], replacement, S)
    else:  # the corrupted target is the no-match class S, at u_S on the circle
        corrupted = resample_earlier_occurrence(clean, replacement, S)
        d_lower, d_upper = code_distance(sequence[j + 1], S, S)
    return S, n, clean, corrupted, d_lower, d_upper


# n - 2 older matches before the key, and the nearest replacement (|tau - tau'| = 1).
EXAMPLES = {NEXT: ((3, 12, [0] * 10 + [1, 0], 2), (3, 3, [0, 1, 0], 2),
                   (8, 16, [3, 5, 1, 3, 2, 7, 3], 6)),
            # tau = S - 1 next to bot = S on the circle (d = 2 rho), a long prompt, the shortest
            EARLIER: ((3, 12, [0, 2] + [1] * 9 + [0], 1), (3, 3, [0, 2, 0], 1),
                      (8, 16, [1, 4, 7, 2, 5, 4], 3))}


def _cases(corruption: str, max_vocab: int = 8, max_len: int = 12):
    strategy = corruption_cases if corruption == NEXT else occurrence_cases
    return strategy(max_vocab=max_vocab, max_len=max_len)


def _with_examples(corruption: str, test):
    for case in EXAMPLES[corruption]:
        test = example(case=case)(test)
    return test


def sufficiency_check(build=compact_induction, circuit=induction_circuit,
                      bound=sufficiency_bound, corruption=NEXT):
    """``bound(S, n, d_upper, corruption)``: the allowed move (a mutant tightens it)."""
    build = cached(build)

    @given(case=_cases(corruption))
    @budget(0.2)  # two tiny forward passes per example; few examples keep the default run cheap
    def test_compact_sufficient(case):
        S, n, clean, corrupted, _, d_upper = _case(case, corruption)
        model, kept = build(S, n), circuit("compact", S, n, corruption)
        base = logit_difference(edge_patched_logits(model, clean, corrupted, ()), clean,
                                corrupted)
        patched = logit_difference(edge_patched_logits(model, clean, corrupted,
                                                       kept.complement()), clean, corrupted)
        moved = float((patched - base).abs().max())
        allowed = bound(S, n, d_upper, corruption)
        assert moved <= allowed, (f"S={S} n={n}: patching the complement moved the metric by "
                                  f"{moved} > the derived {allowed}")
        evidence.margin(allowed - moved)
        evidence.cases(1)
    return _with_examples(corruption, test_compact_sufficient)


def necessity_check(build=compact_induction, circuit=induction_circuit, minimal=False,
                    corruption=NEXT):
    """Patch each circuit edge alone (necessity) or with the whole complement (minimality)."""
    build = cached(build)

    @given(case=_cases(corruption))
    @budget(0.2)  # three or four tiny forward passes per example
    def test_compact_necessary(case):
        S, n, clean, corrupted, d_lower, d_upper = _case(case, corruption)
        model, kept = build(S, n), circuit("compact", S, n, corruption)
        _, omega = wrong_mass(S, n, corruption)
        rho = compact_parameters(S, n).readout
        assert rho > 2 * omega, f"S={S} n={n}: rho={rho} <= 2 omega={2 * omega}"
        bound = necessity_bound(S, n, d_lower, corruption)
        assert bound > sufficiency_bound(S, n, d_upper, corruption), (
            "necessity must exceed sufficiency")
        assert_each_edge_moves(model, kept, clean, corrupted, bound, minimal=minimal,
                               label=f"S={S} n={n}: ")
        evidence.cases(1)
    return _with_examples(corruption, test_compact_necessary)


test_compact_sufficient = check(CC_SUFFICIENT, "property")(sufficiency_check())
test_compact_necessary = check(CC_NECESSARY, "property")(necessity_check())
test_compact_minimal = check(CC_MINIMAL, "property")(necessity_check(minimal=True))
test_compact_occurrence_sufficient = check(CE_SUFFICIENT, "property")(
    sufficiency_check(corruption=EARLIER))
test_compact_occurrence_necessary = check(CE_NECESSARY, "property")(
    necessity_check(corruption=EARLIER))
test_compact_occurrence_minimal = check(CE_MINIMAL, "property")(
    necessity_check(minimal=True, corruption=EARLIER))
