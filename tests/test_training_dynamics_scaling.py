"""Mutants of the training-dynamics area's trend claims (theorems/areas/training_dynamics/): each
check reads a published scaling study (empirics.scaling); a mutant reverses each seed's values in
size order, and, where the published interval holds 0 (reversal alone stays undecided), also
lowers them by the interval's width per doubling (theorems.trends.sizes_reversed)."""

from __future__ import annotations

from functools import partial

import pytest
from killed import failed_assertion

from theorems.areas.training_dynamics import conditioned_init as conditioning
from theorems.areas.training_dynamics import grokking_lazy_rich as grokking
from theorems.areas.training_dynamics import scan_snap
from theorems.areas.training_dynamics import truth_encoding as truth
from theorems.trends import sizes_reversed, trend_check, trend_refutation


@pytest.mark.mutant("training-dynamics.grokking-delay-scaling")
def test_a_delay_reversed_in_dimension_breaks_the_refutation():
    """The published delays, each seed's in reverse order of D: the delay now rises with D
    (the paper's direction), so the measured fall is not seen and the statement holds."""
    report = failed_assertion(trend_refutation(grokking.DELAY_STUDY, grokking.DELAY, "up",
                                               load=sizes_reversed))
    assert "passed, but it was expected to fail" in report, report  # the statement holds


@pytest.mark.mutant("training-dynamics.truth-plateau-scaling")
def test_a_plateau_that_shortens_with_the_world_fails():
    """The published plateau fractions, each seed's in reverse order of N and lowered by the
    width of the published slope interval per doubling of N: the published study is undecided
    (its reversal alone stays so), and this one falls with N, decided, so the check fails."""
    report = failed_assertion(trend_check(truth.PLATEAU_STUDY, truth.PLATEAU, "up",
                                          load=partial(sizes_reversed,
                                                       falling=truth.PLATEAU)))
    assert "mem_plateau_fraction moves down with n_subjects" in report, report


@pytest.mark.mutant("training-dynamics.scan-snap-scaling")
def test_a_combination_that_moves_more_with_training_fails():
    """The published ratios r, each seed's in reverse order of the length: r now rises with
    the length of training (steady scanning speeding up), decided, so the check fails."""
    report = failed_assertion(trend_check(scan_snap.SNAP_STUDY, scan_snap.SNAP, "down",
                                          load=sizes_reversed))
    assert "z_doubling_ratio_max moves up with steps" in report, report


@pytest.mark.mutant("training-dynamics.conditioned-init-scaling")
def test_a_saving_that_shrinks_with_the_width_fails():
    """The published savings, each seed's in reverse order of d and lowered by the width of
    the published slope interval per doubling of d: the published study is undecided (its
    reversal alone stays so), and this one falls with d, decided, so the check fails."""
    report = failed_assertion(trend_check(conditioning.SAVING_STUDY, conditioning.SAVING, "up",
                                          load=partial(sizes_reversed,
                                                       falling=conditioning.SAVING)))
    assert "steps_saved_mean moves down with d_model" in report, report
