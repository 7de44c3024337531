r"""Benchmark cases for circuit discovery: a model, its ground-truth circuit, a corruption and a
metric, in one record each.

A :class:`CircuitCase` is what a discovery method needs to be scored on a construction: a
builder of the model at a size (``size``, keyword arguments of the builder), the ground-truth
:class:`~constructions.circuits.Circuit` *relative to the case's corruption*, a sampler of
(clean, corrupted) prompt batches that meet the corruption's conditions, and the metric
``metric(logits, clean, corrupted) -> (B,)`` the circuit is defined for. Cases register
themselves in :data:`CASES` (:meth:`CircuitCase.register`); the discovery harness
(:mod:`empirics.circuit_discovery`), the docs and the bundle iterate over it, so a new case (a
gauge variant, another construction) plugs in by calling ``CircuitCase(...).register()`` in
its own module and adding that module to :data:`CASE_MODULES` (or here).

Torch only; nothing here imports TransformerLens.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from constructions import _validate
from constructions.circuits import Circuit, induction_circuit, logit_difference
from constructions.induction_heads import two_layer_induction

Sampler = Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor]]


@dataclasses.dataclass(frozen=True)
class CircuitCase:
    r"""One benchmark case.

    ``build(**size)`` returns the model, ``circuit(**size)`` its ground-truth circuit under the
    corruption; ``sample(generator, batch, **size)`` returns ``(clean, corrupted)`` token
    batches ``(B, m)``; ``metric(logits, clean, corrupted)`` is ``(B,)``. ``builder`` and
    ``circuit_builder`` name the two functions as ``"module:name"`` (the claims' and the
    bundle's spelling), ``corruption`` states in words which causal variable the corruption
    changes, and ``claims`` lists the registered claims that check the circuit.
    """

    name: str
    title: str
    builder: str
    circuit_builder: str
    build: Callable[..., nn.Module]
    circuit: Callable[..., Circuit]
    sample: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    metric: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    corruption: str
    sizes: Mapping[str, Mapping[str, Any]]  # "smoke" and "full" builder keyword arguments
    claims: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        missing = [c for c in ("smoke", "full") if c not in self.sizes]
        if missing:
            raise ValueError(f"sizes must name the smoke and full sizes, {missing} missing")

    def register(self) -> CircuitCase:
        """Add this case to :data:`CASES` (names are unique); returns it."""
        if self.name in CASES:
            raise ValueError(f"name {self.name!r} is already a registered case")
        CASES[self.name] = self
        return self

    def instance(self, size: str | Mapping[str, Any] = "smoke") -> tuple[nn.Module, Circuit]:
        """(model, circuit) at a named size or explicit builder keyword arguments."""
        kwargs = self._size(size)
        return self.build(**kwargs), self.circuit(**kwargs)

    def prompts(self, generator: torch.Generator, batch: int,
                size: str | Mapping[str, Any] = "smoke") -> tuple[torch.Tensor, torch.Tensor]:
        """A (clean, corrupted) batch at that size."""
        _validate.generator("generator", generator)
        batch = _validate.positive_int("batch", batch)
        return self.sample(generator, batch, **self._size(size))

    def _size(self, size: str | Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(size, str):
            if size not in self.sizes:
                raise ValueError(f"size must be one of {sorted(self.sizes)} or a dict, "
                                 f"got {size!r}")
            return dict(self.sizes[size])
        if not isinstance(size, Mapping):
            raise TypeError(f"size must be a size name or a dict, got {type(size).__name__}")
        return dict(size)


CASES: dict[str, CircuitCase] = {}
# Modules that register further cases on import (other topics append theirs here).
CASE_MODULES: list[str] = []


def all_cases() -> dict[str, CircuitCase]:
    """Every registered case, after importing the modules of :data:`CASE_MODULES`."""
    for module in CASE_MODULES:
        importlib.import_module(module)
    return CASES


def case_for_builder(path: str) -> CircuitCase | None:
    """The case whose model builder or circuit builder is ``path`` (``"module:name"``)."""
    if not isinstance(path, str):
        raise TypeError(f"path must be a 'module:name' string, got {type(path).__name__}")
    for case in all_cases().values():
        if path in (case.builder, case.circuit_builder):
            return case
    return None


# --- the two-layer induction case --------------------------------------------------------------

def sample_next_token_pairs(generator: torch.Generator, batch: int, *, vocab_size: int,
                            max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Clean prompts of length ``max_len`` and their :func:`~constructions.circuits.
    resample_next_token` corruptions, ``(B, max_len)`` each.

    Each clean prompt is uniform over tokens except: a uniform earlier occurrence
    :math:`j^\star \le m - 3` of the final token, no occurrence of it between :math:`j^\star`
    and the end (those are moved to the next token mod :math:`S`), so :math:`j^\star` is the
    latest; the replacement is uniform over the tokens other than :math:`\tau` and
    :math:`\sigma_m` (hence :math:`S \ge 3`).
    """
    from constructions.circuits import resample_next_token

    _validate.generator("generator", generator)
    batch = _validate.positive_int("batch", batch)
    S = _validate.positive_int("vocab_size", vocab_size, minimum=3)
    m = _validate.positive_int("max_len", max_len, minimum=3)
    clean = torch.randint(S, (batch, m), generator=generator)
    replacement = torch.empty(batch, dtype=torch.long)
    for b in range(batch):
        j = int(torch.randint(m - 2, (1,), generator=generator))
        a = int(clean[b, j])
        clean[b, -1] = a
        later = clean[b, j + 1:m - 1]
        later[later == a] = (a + 1) % S
        allowed = [t for t in range(S) if t not in (a, int(clean[b, j + 1]))]
        replacement[b] = allowed[int(torch.randint(len(allowed), (1,), generator=generator))]
    return clean, resample_next_token(clean, replacement, S)


TWO_LAYER_INDUCTION = CircuitCase(
    name="two-layer-induction",
    title="Two-layer induction (one-hot), next-token resampling",
    builder="constructions.induction_heads:two_layer_induction",
    circuit_builder="constructions.circuits:induction_circuit",
    build=two_layer_induction,
    circuit=lambda vocab_size, max_len: induction_circuit("two_layer", vocab_size, max_len),
    sample=sample_next_token_pairs,
    metric=logit_difference,
    corruption=("resample_next_token: the token after the latest earlier occurrence of the "
                "final token is replaced by another one (neither the old token nor the final "
                "one). It changes one causal variable, what the induction head copies, not "
                "where it attends; the metric is the final-position logit difference "
                "between the clean and the corrupted target."),
    sizes={"smoke": {"vocab_size": 4, "max_len": 8},
           "full": {"vocab_size": 16, "max_len": 32}},
    claims=("circuits.induction-sufficient", "circuits.induction-necessary",
            "circuits.induction-minimal"),
).register()
