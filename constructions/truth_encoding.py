r"""Linear truth encodings: the data process and its three exact loss levels (Ravfogel,
Yehudai, Linzen, Bruna, Bietti 2025, arXiv:2510.15804).

The paper's toy data, from a secondary summary [S]: each example is four tokens
:math:`(s, a, s', a')`; with probability :math:`\rho` (the true-attribute rate) both attributes
are the ground truth, :math:`a = g(s)`, :math:`a' = g(s')`; otherwise (the summary is cut off
here, so this is our assumption [R]) both are uniform over the attribute set :math:`A`,
independently. Truth co-occurs: the two attributes are true together or random together.

Per attribute token, with :math:`u = 1/|A|`, :math:`q = \rho + (1-\rho)u` (the probability that
an attribute is the true one), :math:`\pi = \rho/q` (the posterior that the example is true
after seeing a true first attribute) and :math:`q_2 = \pi + (1-\pi)u`, the cross-entropies of
three predictors are (catalogue TS.3, ours):

* before memorisation (uniform): :math:`L_0 = \log|A|`;
* facts memorised, truth not inferred: :math:`L_{mem} = H_{mix} = -q\log q - (1-q)\log((1-\rho)u)`;
* Bayes, truth inferred from :math:`(s, a)`: the first attribute still costs :math:`H_{mix}`;
  the second costs :math:`H_{match} = -q_2\log q_2 - (1-q_2)\log((1-\pi)u)` when
  :math:`a = g(s)` (probability :math:`q`) and :math:`\log|A|` otherwise (then the example is
  false for sure), so :math:`L_{truth} = \frac12[H_{mix} + qH_{match} + (1-q)\log|A|]`.

The ordering :math:`L_0 \ge L_{mem} \ge L_{truth}` is information theory: the first gap is
:math:`\mathrm{KL}(P_{mix}\,\Vert\,\mathrm{uniform})`, the second half the mutual information
between "the first attribute is true" and the second attribute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from constructions._roles import oracle
from constructions._validate import positive_int, token_tensor


def _check(rho: object, n_attributes: object) -> tuple[float, int]:
    if isinstance(rho, bool) or not isinstance(rho, (int, float)):
        raise TypeError(f"rho must be a real number, got {type(rho).__name__}")
    if not 0 < float(rho) < 1:
        raise ValueError(f"rho must lie in (0, 1), got {rho!r}")
    return float(rho), positive_int("n_attributes", n_attributes, minimum=2)


def truth_levels(rho: float, n_attributes: int) -> tuple[float, float, float]:
    """``(L_0, L_mem, L_truth)`` in nats per attribute token (see the module docstring)."""
    rho, n = _check(rho, n_attributes)
    u = 1 / n
    q = rho + (1 - rho) * u
    post = rho / q
    q2 = post + (1 - post) * u
    h_mix = -q * math.log(q) - (1 - q) * math.log((1 - rho) * u)
    h_match = -q2 * math.log(q2) - (1 - q2) * math.log((1 - post) * u)
    return math.log(n), h_mix, 0.5 * (h_mix + q * h_match + (1 - q) * math.log(n))


@dataclass(frozen=True)
class TruthProcess:
    """Subjects ``0..n_subjects-1`` with ground-truth attributes ``truth[s]``; attributes are
    ``0..n_attributes-1``. :meth:`sample` draws ``(s, a, s', a')`` rows and the truth bit."""

    n_subjects: int
    n_attributes: int
    rho: float
    truth: torch.Tensor

    def sample(self, batch: int, generator: torch.Generator
               ) -> tuple[torch.Tensor, torch.Tensor]:
        batch = positive_int("batch", batch)
        subjects = torch.randint(self.n_subjects, (batch, 2), generator=generator)
        true = torch.rand(batch, generator=generator) < self.rho
        random = torch.randint(self.n_attributes, (batch, 2), generator=generator)
        attributes = torch.where(true[:, None], self.truth[subjects], random)
        rows = torch.stack([subjects[:, 0], attributes[:, 0], subjects[:, 1],
                            attributes[:, 1]], 1)
        return rows, true


@oracle
def truth_process(n_subjects: int = 100, n_attributes: int = 50, rho: float = 0.5, *,
                  seed: int = 0) -> TruthProcess:
    """The TS.2 process with a random ground truth ``g`` (seeded)."""
    rho, n_attributes = _check(rho, n_attributes)
    n_subjects = positive_int("n_subjects", n_subjects)
    generator = torch.Generator().manual_seed(positive_int("seed", seed, minimum=0))
    truth = torch.randint(n_attributes, (n_subjects,), generator=generator)
    return TruthProcess(n_subjects, n_attributes, rho, truth)


def bayes_log_probs(process: TruthProcess, rows: torch.Tensor) -> torch.Tensor:
    r"""Log-probabilities ``(B, 2)`` that the Bayes predictor assigns to ``a`` given ``s`` and
    to ``a'`` given ``(s, a, s')``, by Bayes' rule on the generative model:
    :math:`p(a'\mid s,a,s') = \sum_{t} P(t\mid s,a)P(a'\mid t, s')`."""
    if not isinstance(process, TruthProcess):
        raise TypeError(f"process must be a TruthProcess, got {type(process).__name__}")
    rows = token_tensor("rows", rows, vocab_size=max(process.n_subjects, process.n_attributes),
                        ndim=(1, 2))
    if rows.shape[-1] != 4:
        raise ValueError(f"rows must have shape (B, 4): (s, a, s', a'), got {tuple(rows.shape)}")
    if bool((rows[..., [0, 2]] >= process.n_subjects).any()) or bool(
            (rows[..., [1, 3]] >= process.n_attributes).any()):
        raise ValueError(f"rows must hold subjects in [0, {process.n_subjects}) and attributes "
                         f"in [0, {process.n_attributes})")
    u, rho = 1 / process.n_attributes, process.rho
    s, a, s2, a2 = rows.unbind(-1)
    match1 = (a == process.truth[s]).double()
    match2 = (a2 == process.truth[s2]).double()
    p_a_given_true = match1                      # P(a | s, true) = [a = g(s)]
    p_a_given_false = torch.full_like(match1, u)
    p_a = rho * p_a_given_true + (1 - rho) * p_a_given_false
    post_true = rho * p_a_given_true / p_a
    p_a2 = post_true * match2 + (1 - post_true) * u
    return torch.stack([p_a.log(), p_a2.log()], -1)
