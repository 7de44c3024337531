"""Mutants of the closed-form population loss (theorems/areas/icl_regression/population_loss.py):
each drops one term of H = E[s s^T] or of the loss, which the Monte Carlo check must detect."""

import pytest
import torch

from constructions.icl_regression import population_loss
from theorems.areas.icl_regression.population_loss import population_loss_check
from theorems.evidence import expect_failure


def _without_fourth_moment_correction(Gamma, n, sigma2, Sigma, Omega=None):
    """H with (n+1)/n replaced by 1 (the data treated as if s were E[s|w])."""
    Omega = torch.eye(Sigma.shape[0], dtype=torch.float64) if Omega is None else Omega
    extra = torch.trace(Gamma.T @ Sigma @ Gamma @ (Sigma @ Omega @ Sigma)) / n
    return population_loss(Gamma, n, sigma2, Sigma, Omega) - float(extra)


def _without_noise(Gamma, n, sigma2, Sigma, Omega=None):
    """The label noise dropped from the loss (sigma^2 = 0 everywhere)."""
    return population_loss(Gamma, n, 0.0, Sigma, Omega)


@pytest.mark.mutant("icl-regression.population-loss")
@pytest.mark.parametrize("mutant", [_without_fourth_moment_correction, _without_noise])
def test_a_population_loss_missing_a_term_fails(mutant):
    expect_failure(population_loss_check(loss=mutant))
