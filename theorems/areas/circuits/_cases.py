"""Which circuit case each claim of this area checks.

The cases are :mod:`constructions.circuits`' and know no claim; the claims are this area's, so
the map between them is kept here. The bundle (:mod:`theorems.bundle`) uses it to bundle a
claim's case, and the area's page (:mod:`._page`) to list under each case the claims that
check its circuit.
"""

from __future__ import annotations

from constructions.circuits import CircuitCase, all_cases

# the head-level ground truth checks every case but the four stress ones (.head_level the
# InductionTransformer ones, .head_level_native the native ones; the stress cases' head level
# is enumerated by circuits.minimal-circuits)
_HEAD_LEVEL = ("circuits.head-level-sufficient", "circuits.head-level-necessary",
               "circuits.head-level-promotion")
_VARIANTS = ("circuits.variants-same-function", "circuits.variants-circuit", *_HEAD_LEVEL)
# every minimal circuit and the don't-care edges, enumerated (.minimal_circuits)
_ENUMERATED = "circuits.minimal-circuits"
_MAJORITY_VARIANTS = ("circuits.majority-variants-same-function",
                      "circuits.majority-variants-circuit", *_HEAD_LEVEL)

# Case name -> the claims that check its circuit, in the order the page lists them.
CHECKED_BY: dict[str, tuple[str, ...]] = {
    "two-layer-induction": ("circuits.induction-sufficient", "circuits.induction-necessary",
                            "circuits.induction-minimal", "circuits.induction-zero-ablation",
                            "circuits.induction-mean-ablation", *_HEAD_LEVEL, _ENUMERATED),
    "compact-induction": ("circuits.compact-sufficient", "circuits.compact-necessary",
                          "circuits.compact-minimal", *_HEAD_LEVEL),
    "two-layer-induction-earlier-occurrence": ("circuits.earlier-occurrence-sufficient",
                                               "circuits.earlier-occurrence-necessary",
                                               "circuits.earlier-occurrence-minimal",
                                               *_HEAD_LEVEL, _ENUMERATED),
    "compact-induction-earlier-occurrence": ("circuits.compact-earlier-occurrence-sufficient",
                                             "circuits.compact-earlier-occurrence-necessary",
                                             "circuits.compact-earlier-occurrence-minimal",
                                             *_HEAD_LEVEL),
    "two-layer-induction-spurious-heads": _VARIANTS,
    "two-layer-induction-value-gauge": _VARIANTS,
    "majority-head": ("circuits.majority-sufficient", "circuits.majority-necessary",
                      "circuits.majority-minimal", *_HEAD_LEVEL),
    "majority-head-qk-gauge": _MAJORITY_VARIANTS,
    "majority-head-ln-rotation": _MAJORITY_VARIANTS,
    "one-step-gd": ("circuits.icl-sufficient", "circuits.icl-necessary", "circuits.icl-minimal",
                    *_HEAD_LEVEL),
    "one-step-gd-null-space": ("circuits.icl-variant", *_HEAD_LEVEL),
    "one-step-gd-spurious-head": ("circuits.icl-spurious-head", *_HEAD_LEVEL),
    "two-layer-induction-rotated": _VARIANTS,
    "compact-induction-rotated": _VARIANTS,
    "two-layer-induction-reparametrised": _VARIANTS,
    "compact-induction-reparametrised": _VARIANTS,
    "two-layer-induction-permuted-heads": _VARIANTS,
    "backup-heads": ("circuits.backup-heads", _ENUMERATED),
    "distractor-sub-circuit": ("circuits.distractor", _ENUMERATED),
    "superposed-features-match": ("circuits.superposed-features", _ENUMERATED),
    "superposed-features-flag": ("circuits.superposed-features", _ENUMERATED),
}


def claims_of(case: CircuitCase) -> tuple[str, ...]:
    """The claims that check ``case``'s circuit (none for a case no claim checks)."""
    if not isinstance(case, CircuitCase):
        raise TypeError(f"case must be a CircuitCase, got {type(case).__name__}")
    return CHECKED_BY.get(case.name, ())


def case_for_claim(claim_id: str) -> CircuitCase | None:
    """The first case, in :func:`~constructions.circuits.all_cases` order, whose circuit the
    claim ``claim_id`` checks, or None."""
    if not isinstance(claim_id, str):
        raise TypeError(f"claim_id must be a claim id string, got {type(claim_id).__name__}")
    for case in all_cases().values():
        if claim_id in CHECKED_BY.get(case.name, ()):
            return case
    return None
