r"""Out-of-context reasoning (OCR) and the nuclear-norm bias of a factorized output-value map.

Source: Huang, Zhu, Guo, Jiao, Sojoudi, Jordan, Russell, Mei (2025), "Generalization or
Hallucination? Understanding Out-of-Context Reasoning in Transformers", NeurIPS 2025,
arXiv:2506.10887. The abstract was read; the task follows the authors' code
(yixiao-huang/OCR-Theory, ``src/data_utils.py``, ``ImplicitReasoningTask``); the reduction to a
linear map and every margin below were derived here and are checked in ``theorems/areas/ocr/``.

The task (:func:`fact_implication_task`)
----------------------------------------
:math:`C` cities, each with one animal (city :math:`j \mapsto` animal :math:`j`), and
:math:`N = C(m + k)` names; name :math:`i` lives in city :math:`i \bmod C` (as in the code).
The first :math:`Cm` names are *train* names (:math:`m` per city), the last :math:`Ck` are
*test* names (:math:`k` per city). Two relation tokens: :math:`r_1` ("lives in", answered by
a city) and :math:`r_2` (the implication, answered by the city's animal). Training data: the
facts :math:`(n, r_1) \to` city for every name, and the implications
:math:`(n, r_2) \to` animal for the train names only (the code's ``mixed_finetune`` mode).
OCR is answering the implications of the *test* names, never seen with :math:`r_2`.

The reduced model
-----------------
A one-layer attention-only transformer with linear attention over the name and the relation
token outputs :math:`W_{OV}` applied to the mean of their embeddings; with orthonormal
embeddings this is, up to a factor, the linear map

.. math::

    \mathrm{logits}(n, r) = W\,(e_n + e_r),\qquad W \in \mathbb R^{A\times I},

from the :math:`I = 2 + N` input tokens to the :math:`A = 2C` answer tokens (cities, then
animals). The *margin* of a pair with answer :math:`a` is
:math:`\mathrm{logit}_a - \max_{b \ne a}\mathrm{logit}_b` over the answer tokens. The combined
parameterisation trains :math:`W`; the factorized one trains :math:`W = W_O W_V`. (Keeping
every vocabulary token as an input and an output changes none of the test margins below; it
only makes the convex programs larger.)

The minimum-norm solutions (:func:`min_norm_solution`)
-------------------------------------------------------
:math:`\min \lVert W\rVert` subject to margin :math:`\ge 1` on every training pair, for the
Frobenius norm (the limit direction of gradient descent on :math:`W`) and the nuclear norm
(that of gradient descent on :math:`W_OW_V`). Derived here: the Frobenius solution leaves every
test implication an exact tie (the animal entries of a test name's column meet identical
constraints, and the relation column treats all animals alike), while the nuclear solution
answers every test implication with margin :math:`\min(1, \sqrt{m/k})`, which is
:math:`1/\sqrt k` for one train name per city.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from constructions import _validate
from constructions._roles import oracle

NORMS = ("nuclear", "fro")
FACT, IMPLICATION = 0, 1  # the relation tokens r_1 and r_2 are inputs 0 and 1


@dataclass(frozen=True)
class FactImplicationTask:
    """The OCR task (module docstring). Inputs: ``0, 1`` relations, ``2..`` names. Answers:
    ``0..C-1`` cities, ``C..2C-1`` animals."""

    cities: int
    train_names_per_city: int
    test_names_per_city: int

    @property
    def names(self) -> int:
        return self.cities * (self.train_names_per_city + self.test_names_per_city)

    @property
    def inputs(self) -> int:
        return 2 + self.names

    @property
    def answers(self) -> int:
        return 2 * self.cities

    def name_token(self, name: int) -> int:
        return 2 + name

    def city(self, name: int) -> int:
        """The answer index of the city name ``name`` (0-based) lives in: ``name mod C``."""
        return name % self.cities

    def animal(self, name: int) -> int:
        """The answer index of the animal implied for ``name``."""
        return self.cities + self.city(name)

    @property
    def train_names(self) -> range:
        return range(self.cities * self.train_names_per_city)

    @property
    def test_names(self) -> range:
        return range(self.cities * self.train_names_per_city, self.names)

    def pairs(self, names, relation: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One-hot-sum inputs ``(P, I)`` for ``(name, relation)`` and their answers ``(P,)``."""
        names = list(names)
        X = torch.zeros(len(names), self.inputs, dtype=torch.float64)
        rows = torch.arange(len(names))
        X[rows, [self.name_token(n) for n in names]] = 1.0
        X[rows, relation] = 1.0
        answer = self.city if relation == FACT else self.animal
        return X, torch.tensor([answer(n) for n in names])

    @cached_property
    def training_pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Facts for every name, then implications for the train names."""
        facts = self.pairs(range(self.names), FACT)
        implications = self.pairs(self.train_names, IMPLICATION)
        return torch.cat([facts[0], implications[0]]), torch.cat([facts[1], implications[1]])

    @cached_property
    def test_pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The implications of the test names: the out-of-context questions."""
        return self.pairs(self.test_names, IMPLICATION)


@oracle
def fact_implication_task(cities: int = 4, train_names_per_city: int = 1,
                          test_names_per_city: int = 2) -> FactImplicationTask:
    """The OCR task with ``cities`` cities and ``m``/``k`` train/test names per city."""
    return FactImplicationTask(
        _validate.positive_int("cities", cities, minimum=2),
        _validate.positive_int("train_names_per_city", train_names_per_city),
        _validate.positive_int("test_names_per_city", test_names_per_city))


def margins(W: torch.Tensor, X: torch.Tensor, answers: torch.Tensor, *,
            among: slice = slice(None)) -> torch.Tensor:
    r"""Per pair :math:`\mathrm{logit}_a - \max_{b\ne a}\mathrm{logit}_b` with
    :math:`\mathrm{logits} = XW^\top`: ``(P,)``. ``among`` restricts the answers compared
    (for example ``slice(C, 2C)``, the animals); the true answer must lie in it."""
    W = _validate.nonempty("W", _validate.real_tensor("W", W, ndim=2))
    X = _validate.real_tensor("X", X, shape=(None, W.shape[1]))
    answers = _validate.token_tensor("answers", answers, vocab_size=W.shape[0], ndim=1)
    if answers.shape[0] != X.shape[0]:
        raise ValueError(f"answers must have one entry per row of X ({X.shape[0]}), "
                         f"got shape {tuple(answers.shape)}")
    _validate.instance("among", among, slice)
    if answers.numel() and not all(int(a) in range(W.shape[0])[among] for a in answers):
        raise ValueError(f"answers must lie in the answers compared, range({W.shape[0]})"
                         f"[{among}]")
    logits = (X.to(W.dtype) @ W.T)[:, among]
    offset = range(W.shape[0])[among]
    answers = torch.as_tensor([offset.index(int(a)) for a in answers])
    rows = torch.arange(len(answers))
    true = logits[rows, answers]
    others = logits.clone()
    others[rows, answers] = -torch.inf
    return true - others.amax(-1)


def min_norm_solution(task: FactImplicationTask, norm: str = "nuclear", *,
                      eps: float = 1e-9) -> torch.Tensor:
    r""":math:`\arg\min\lVert W\rVert` s.t. margin :math:`\ge 1` on every training pair, by cvxpy
    (imported here, not at module load): ``(A, I)`` float64.

    ``norm="fro"`` is a quadratic program, solved by Clarabel (interior point, tolerances
    1e-8); ``norm="nuclear"`` is a semidefinite program, solved by SCS with
    ``eps_abs = eps_rel = eps`` (its default 1e-4 is far too loose for margin checks; see
    ``../shared/MEASURED.md``).
    """
    if not isinstance(task, FactImplicationTask):
        raise TypeError(f"task must be a FactImplicationTask, got {type(task).__name__}")
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    eps = _validate.positive_float("eps", eps)
    import cvxpy as cp
    import numpy as np

    X, answers = (t.numpy() for t in task.training_pairs)
    Y = np.zeros((len(answers), task.answers))
    Y[np.arange(len(answers)), answers] = 1.0
    W = cp.Variable((task.answers, task.inputs))
    logits = X @ W.T
    true = cp.sum(cp.multiply(Y, logits), axis=1, keepdims=True)
    # margin >= 1 against every other answer; on the answer itself both sides are 0
    constraints = [cp.multiply(1 - Y, true @ np.ones((1, task.answers)) - logits) >= 1 - Y]
    if norm == "fro":
        problem = cp.Problem(cp.Minimize(cp.sum_squares(W)), constraints)
        problem.solve(solver="CLARABEL")
    else:
        problem = cp.Problem(cp.Minimize(cp.normNuc(W)), constraints)
        problem.solve(solver="SCS", eps_abs=eps, eps_rel=eps, max_iters=200_000)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or W.value is None:
        raise RuntimeError(f"the {norm} min-norm problem was not solved ({problem.status})")
    return torch.as_tensor(W.value, dtype=torch.float64)


def nuclear_margin(task: FactImplicationTask) -> float:
    r"""The derived test margin of the nuclear-norm solution, :math:`\min(1, \sqrt{m/k})`."""
    _validate.instance("task", task, FactImplicationTask)
    return min(1.0, (task.train_names_per_city / task.test_names_per_city) ** 0.5)
