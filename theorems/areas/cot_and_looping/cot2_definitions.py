r"""CoT2: the definitions the claims of :mod:`.cot2` state, checked by plain enumeration.

The CSFT targets against the kept multisets of sign patterns their definition names, and the
one-layer construction's attention against the stated off-target mass :math:`\rho_t`, read
from its hook points.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.cot2 import beam_minabs_targets, beam_targets, cot2_layer, uniform_targets
from theorems.areas.cot_and_looping.cot2 import COT2_ONE_LAYER, COT2_TASK, digit_strings
from theorems.evidence import check, evidence
from theorems.numerics import gamma
from theorems.profiles import budget


def kept_patterns(digits, kind: str, K: int) -> list[tuple[int, ...]]:
    """The multiset Pi of the statement, by a plain sort of all 2^m sign tuples: ``uniform``
    all of them; ``beam`` the K with a non-negative final sum, smallest sums first, ties by the
    tuple (-1 before +1); ``beam_minabs`` the K of smallest |sum|, non-negative first, then by
    the tuple."""
    final = {sigma: sum(g * a for g, a in zip(sigma, digits, strict=True))
             for sigma in itertools.product((-1, 1), repeat=len(digits))}
    if kind == "uniform":
        return list(final)
    if kind == "beam":
        return sorted((p for p in final if final[p] >= 0), key=lambda p: (final[p], p))[:K]
    return sorted(final, key=lambda p: (abs(final[p]), final[p] < 0, p))[:K]


def targets_definition_check(beam=beam_targets, minabs=beam_minabs_targets,
                             uniform=uniform_targets):
    @given(digits=digit_strings(), num_beams=st.integers(1, 70))
    @example(digits=(1, 1), num_beams=1)    # two patterns end at 0: the tie-break decides
    @example(digits=(2, 1, 1), num_beams=3)
    def run(digits, num_beams):
        m, S = len(digits), 9 * len(digits)
        for kind, got in (("uniform", uniform(digits)), ("beam", beam(digits, num_beams)),
                          ("beam_minabs", minabs(digits, num_beams))):
            kept = kept_patterns(digits, kind, num_beams)
            want = torch.zeros(m, 2 * S + 1, dtype=torch.float64)
            for t in range(m):
                for sigma in kept:
                    want[t, S + sum(g * a for g, a in zip(sigma[:t + 1], digits[:t + 1],
                                                          strict=True))] += 1
            # counts / |Pi|: an integer count over an integer, one correctly rounded division
            # on either side, so the two agree bit for bit
            want = torch.tensor([[float(Fraction(int(c), len(kept))) for c in row]
                                 for row in want.tolist()], dtype=torch.float64)
            assert torch.equal(got, want), (
                f"{kind} targets of {digits} (K = {num_beams}) are not the normalised visit "
                f"counts of the kept patterns {kept}")
    return run


test_targets_are_the_kept_patterns = check(COT2_TASK, "property")(
    budget(0.3)(targets_definition_check()))


def attention_check(build=cot2_layer, beta: float = 40.0, clamp: float = 30.0):
    r"""At step t the pattern has :math:`n_t = m + t + 1` keys and puts at most
    :math:`\rho_t` off digit :math:`a_{t+1}`.

    Tolerance: the target's score is :math:`\beta` through three weights (the query's
    :math:`\beta`, two one-hots; each exact, or off by :math:`u` when re-rounded) and a
    rounded product, so at least :math:`\beta(1 - \gamma_4)`; every other score is an exact 0
    (a zero factor). So the exact off-target mass is at most :math:`\rho_t` evaluated at
    :math:`\beta(1 - \gamma_4)`. The softmax rounds each :math:`e^{s}` (2u), its
    :math:`n_t`-term sum and the division; the check sums :math:`n_t - 1` of them: relative
    :math:`\gamma_{2n_t + 4}` on that bound.
    """
    @given(digits=digit_strings())
    @example(digits=(9, 9, 9, 9, 9, 9))
    def run(digits):
        m = len(digits)
        model, patterns = build(m, beta=beta, clamp=clamp), []
        hook = model.attn.hook_pattern.register_forward_hook(
            lambda module, args, out: patterns.append(out.detach().reshape(-1)))
        try:
            model.rollout(digits)
        finally:
            hook.remove()
        assert len(patterns) == m, f"{len(patterns)} attention patterns for m = {m} steps"
        for t, pattern in enumerate(patterns):
            n = m + t + 1
            assert pattern.numel() == n, f"step {t + 1}: {pattern.numel()} keys, not {n}"
            off = float(torch.cat([pattern[:t], pattern[t + 1:]]).sum())   # n >= 2 keys
            others = (n - 1) * math.exp(-beta * (1 - gamma(4)))
            rho = others / (1 + others) * (1 + gamma(2 * n + 4))
            evidence.margin(rho - off)
            assert off <= rho, (
                f"step {t + 1}: mass {off:.3e} off digit a_{t + 1} exceeds rho_t = {rho:.3e}")
        evidence.cases(m)
    return run


test_attention_fetches_the_next_digit = check(COT2_ONE_LAYER, "property")(
    budget(0.2)(attention_check()))
