r"""Monte Carlo sufficient statistics of the lifted least-squares problem
(:class:`LiftedStatistics`, computed by :func:`lifted_statistics`): the convex optimum fitted
on sampled prompts, its sandwich covariance and the resolution a trained model is held to.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from constructions.icl_regression import lifted_features
from empirics.icl_regression.cases import RegressionCase, regression_case


@dataclass(frozen=True)
class LiftedStatistics:
    r"""Sufficient statistics of ``B`` sampled prompts in the lifted features
    :math:`\phi` (:func:`~constructions.icl_regression.lifted_features`).

    ``gram`` :math:`= \tfrac1B\Phi^\top\Phi`, ``cross`` :math:`= \tfrac1B\Phi^\top y_q`,
    ``yy`` :math:`= \tfrac1B y_q^\top y_q`, so that the empirical risk of *any* one-layer LSA
    with lifted coefficients :math:`\theta` on these prompts is exactly
    :math:`\hat L(\theta) = \theta^\top\text{gram}\,\theta - 2\theta^\top\text{cross} + \text{yy}`.
    ``theta`` is the least-squares solution (the convex optimum over all LSAs and more),
    ``covariance`` its sandwich (heteroscedasticity-robust) covariance
    :math:`(\Phi^\top\Phi)^{-1}\Phi^\top\mathrm{diag}(r^2)\Phi(\Phi^\top\Phi)^{-1}`, and
    ``loss_variance`` the per-prompt variance of the squared residual at ``theta`` (for the
    standard error of a Monte Carlo loss).
    """

    prompts: int
    gram: torch.Tensor
    cross: torch.Tensor
    yy: float
    theta: torch.Tensor
    covariance: torch.Tensor
    loss_variance: float

    @property
    def standard_errors(self) -> torch.Tensor:
        return self.covariance.diagonal().sqrt()

    def risk(self, theta: torch.Tensor) -> torch.Tensor:
        """The empirical risk on these prompts of the LSA with lifted coefficients ``theta``."""
        theta = theta.to(self.gram)
        return theta @ self.gram @ theta - 2 * theta @ self.cross + self.yy

    def excess(self, theta: torch.Tensor, reference: torch.Tensor) -> float:
        r""":math:`(\theta - \theta_r)^\top\text{gram}(\theta - \theta_r)`: the excess risk of
        ``theta`` over ``reference`` when the reference is the optimum (the lifted metric)."""
        delta = (theta - reference).to(self.gram)
        return float(delta @ self.gram @ delta)

    def resolution(self, z: float) -> float:
        r"""How far in the lifted metric the least-squares solution itself is expected to lie
        from the population optimum: its excess is a weighted sum of :math:`\chi^2_1`s with
        weights the eigenvalues of :math:`M = \text{gram}\cdot\text{covariance}`; this returns
        :math:`\mathrm{tr}M + z\sqrt{2\,\mathrm{tr}M^2}` (mean plus ``z`` standard deviations)."""
        M = self.gram @ self.covariance
        return float(torch.trace(M) + z * torch.sqrt(2 * torch.trace(M @ M)))


def _chunk_prompts(case: RegressionCase, seed: int, chunk: int, size: int, antithetic: bool):
    prompts = case.sample(size, torch.Generator().manual_seed(seed * 1_000_003 + chunk),
                          antithetic=antithetic)
    return lifted_features(prompts.Z), prompts.y_query


def mirror_parity(d: int) -> torch.Tensor:
    r"""The sign each lifted feature :math:`G_{ab}(x_q)_c` takes under the mirror
    :math:`y \to -y` (context labels and query label together), ``(P,)``: :math:`-1` where
    exactly one of :math:`a, b` is the label row :math:`d`, else :math:`+1`."""
    rows, cols = torch.triu_indices(d + 1, d + 1)
    pair = torch.where((rows == d) ^ (cols == d), -1.0, 1.0).to(torch.float64)
    return pair.repeat_interleave(d)      # lifted_features flattens (pair, c) with c fastest


def _mirror_symmetric(gram: torch.Tensor, cross: torch.Tensor, d: int
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The antithetic sums with the entries the pairing cancels set to exact zeros.

    Under the mirror a feature of parity :math:`s_j` becomes :math:`s_j\phi_j` and the label
    :math:`-y`, so over each pair :math:`\sum\phi_i\phi_j = 0` when :math:`s_i \ne s_j` and
    :math:`\sum\phi_jy = 0` when :math:`s_j = +1`, exactly. The chunked float sums leave
    there only rounding (a pair's two terms land in different blocks of the matmul); setting
    them to 0 is the exact value, and it makes the float risk exactly mirror-invariant, which
    is what keeps the odd weights exactly zero in float (``zfb_conservation_check``).
    """
    s = mirror_parity(d).to(gram)
    gram = torch.where(s[:, None] * s[None, :] < 0, 0.0, gram)
    cross = torch.where(s > 0, 0.0, cross)
    return gram, cross


@lru_cache(maxsize=16)
def lifted_statistics(name: str, n: int, d: int, prompts: int, seed: int,
                      antithetic: bool = False, chunk_size: int = 50_000) -> LiftedStatistics:
    """Monte Carlo lifted least squares on ``prompts`` fresh prompts of the case ``name``
    (:func:`regression_case`); two passes, the second regenerating each chunk from its seed,
    so memory stays at one chunk. Cached: the convex fit and the trained model share it.
    ``antithetic=True`` pairs each task with its mirror (``sample_prompts``), which makes the
    empirical risk exactly invariant under :math:`y \\to -y`, as the population risk is; the
    entries of the sums that the pairing cancels are set to their exact value 0
    (:func:`_mirror_symmetric`), so the float risk is exactly invariant too."""
    case = regression_case(name, n, d)
    sizes = [min(chunk_size, prompts - start) for start in range(0, prompts, chunk_size)]
    gram = cross = 0.0
    yy = 0.0
    for index, size in enumerate(sizes):
        Phi, y = _chunk_prompts(case, seed, index, size, antithetic)
        gram, cross, yy = gram + Phi.T @ Phi, cross + Phi.T @ y, yy + float(y @ y)
    if antithetic:
        gram, cross = _mirror_symmetric(gram, cross, d)
    theta = torch.linalg.solve(gram, cross)
    meat, sq_sum, sq_sq_sum = 0.0, 0.0, 0.0
    for index, size in enumerate(sizes):
        Phi, y = _chunk_prompts(case, seed, index, size, antithetic)
        r2 = (y - Phi @ theta).pow(2)
        meat = meat + (Phi * r2.unsqueeze(-1)).T @ Phi
        sq_sum, sq_sq_sum = sq_sum + float(r2.sum()), sq_sq_sum + float(r2.pow(2).sum())
    bread = torch.linalg.inv(gram)
    mean_sq = sq_sum / prompts
    return LiftedStatistics(prompts=prompts, gram=gram / prompts, cross=cross / prompts,
                            yy=yy / prompts, theta=theta, covariance=bread @ meat @ bread,
                            loss_variance=sq_sq_sum / prompts - mean_sq**2)

