r"""What the circuits topics share: the source, the statement fragments, the rounding terms."""

from __future__ import annotations

import functools
import math

from constructions.circuits import edge_patched_logits, logit_difference
from constructions.induction_heads import two_layer_parameters
from constructions.numerics import gamma, unit_roundoff
from theorems.evidence import evidence

SHT = {"arxiv": "2408.14332", "ref": "Sanford, Hsu, Telgarsky (2024)"}
CONSTRUCTIONS = "constructions.circuits"

GRAPH = (r"The graph of a 2-layer, 1-head attention-only model has nodes input (embedding), "
         r"$a_0$ (L0H0), $a_1$ (L1H0) and logits, and the 12 edges $u \to v\langle x\rangle$ "
         r"from input to the query, key and value ($x \in \{q,k,v\}$) of $a_0$ and $a_1$, from "
         r"$a_0$ to those of $a_1$, and from each of input, $a_0$, $a_1$ to logits. ")

PATCHING = (r"Patching a set $P$ of edges means running the clean prompt with each "
            r"$u \to v\langle x\rangle \in P$ carrying the corrupted run's output of $u$ in "
            r"$v$'s $x$-input (or in the final residual stream for $v$ = logits), every node "
            r"recomputed from its inputs; $\ell^P_i$ are the final-position logits. ")


def assert_each_edge_moves(model, kept, clean, corrupted, bound: float, *, minimal: bool,
                           label: str = "") -> None:
    """Necessity (each edge of the circuit ``kept`` patched alone) or, with ``minimal``,
    minimality (each edge patched with the whole complement): the logit-difference metric
    moves by at least ``bound`` on every prompt of the batch; the slack is recorded."""
    base = logit_difference(edge_patched_logits(model, clean, corrupted, ()), clean, corrupted)
    for edge in kept.edges:
        patched = [edge, *kept.complement()] if minimal else [edge]
        moved = float((base - logit_difference(
            edge_patched_logits(model, clean, corrupted, patched), clean, corrupted)).abs().min())
        assert moved >= bound, (f"{label}patching {edge.name}"
                                f"{' and the complement' if minimal else ''} moved the metric "
                                f"by {moved} < {bound}")
        evidence.margin(moved - bound)


def cached(build):
    return functools.lru_cache(maxsize=32)(build)


def rounding_terms(vocab_size: int, max_len: int, *, mixing: int = 0,
                   patched_keys: bool = False) -> tuple[float, float]:
    r"""``(e_weight, e_logit)`` for the default ``two_layer_induction(vocab_size, max_len)``
    run in float64, or its value gauge (:func:`~constructions.circuits.
    value_gauge_variant`) with head value width ``mixing`` :math:`= m` (0: no gauge).

    ``e_weight`` bounds the relative error of every computed layer-2 attention weight against
    the exact pattern of the exact model; ``e_logit`` the absolute error of a logit
    :math:`\hat\ell_b` against :math:`\sum_j \hat A_{ij}[v_j = b]`, the exact sum over the
    *computed* weights (so :math:`|\hat\ell_b - \ell_b| \le e_{weight} + e_{logit}`).

    *prev.* Layer-1 scores are exact (one non-zero product :math:`\beta_1\cdot 1`), its
    weights err by :math:`\le\gamma_{n+4}` relatively, so :math:`\sum_t|\hat A^1 - A^1| \le
    (n+1)\gamma_{n+4}`; the value sum (:math:`n+1` terms, weights summing to :math:`\le 2`)
    adds :math:`2\gamma_{n+1}`, and with the gauge each prev coordinate is a further
    :math:`m`-term mixture :math:`\sum_c \hat h_c B_{bc}`, :math:`|\hat h_c| \le 2^{-k}\sum\hat
    A`, :math:`|B_{bc}| = 2^{-k}`, :math:`m = 4^k`, adding :math:`2\gamma_m(1+\gamma_{n+1})`:
    :math:`e_p = (n+1)\gamma_{n+4} + 2(\gamma_{n+1} + \gamma_m(1+\gamma_{n+1}))`. A patched
    key :math:`\mathrm{fl}(p + \mathrm{fl}(p' - p))` (entries :math:`0 \le p, p' \le 1 + e_p`)
    lies within :math:`3u(1 + e_p)` of :math:`\hat p'` (``patched_keys``).

    *Scores.* A layer-2 score is an :math:`(S+2)`-term inner product of the exact query
    :math:`(\beta_2 e_{\sigma_i}, 1)` with a key whose prev part errs by :math:`e_k`:
    :math:`\eta \le \gamma_{S+2}(\beta_2(1+e_k) + \lambda n + \theta) + \beta_2 e_k`. Scores off
    by :math:`\le\eta` move an exact softmax weight by a factor within :math:`e^{\pm 2\eta}`,
    and the float softmax by a further factor :math:`1 \pm \gamma_{n+4}`:
    :math:`e_{weight} = (1 + \mathrm{expm1}(2\eta))(1 + \gamma_{n+4}) - 1`.

    *Logits.* A logit is the :math:`(n+1)`-term sum of the computed weights (total
    :math:`\le 2`) times exact values (one-hot, or :math:`\pm 2^{-k}` under the gauge, then
    an :math:`m`-term mixture as for prev), read through one-hot :math:`W_O, W_U` (exact), plus
    a patch's subtraction and addition on entries of size :math:`\le 2` (:math:`6\gamma_2`):
    :math:`e_{logit} = 2(\gamma_{n+1} + \gamma_m(1+\gamma_{n+1})) + 6\gamma_2`.
    """
    p = two_layer_parameters(max_len)
    n, S, u = max_len, vocab_size, unit_roundoff()
    g_mix = gamma(mixing) * (1 + gamma(n + 1)) if mixing else 0.0
    e_prev = (n + 1) * gamma(n + 4) + 2 * (gamma(n + 1) + g_mix)
    e_key = e_prev + 3 * u * (1 + e_prev) if patched_keys else e_prev
    eta = gamma(S + 2) * (p.beta2 * (1 + e_key) + p.recency * n + p.sink) + p.beta2 * e_key
    e_weight = (1 + math.expm1(2 * eta)) * (1 + gamma(n + 4)) - 1
    e_logit = 2 * (gamma(n + 1) + g_mix) + 6 * gamma(2)
    return e_weight, e_logit
