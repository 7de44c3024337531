r"""A benchmark case for circuit discovery: a model, its ground-truth circuit, a corruption and a
metric, in one record; and the registry the cases add themselves to.

A :class:`CircuitCase` is what a discovery method needs to be scored on a construction: a
builder of the model at a size (``size``, keyword arguments of the builder), the ground-truth
:class:`~constructions.circuits.Circuit` *relative to the case's corruption*, a sampler of
(clean, corrupted) prompt batches that meet the corruption's conditions, and the metric
``metric(logits, clean, corrupted) -> (B,)`` the circuit is defined for. A case registers
itself in :data:`CASES` (:meth:`CircuitCase.register`) when the module that defines it is
imported; :mod:`constructions.circuits.cases` imports every such module by name, so
:func:`~constructions.circuits.all_cases` holds them all.

Torch only; nothing here imports TransformerLens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from constructions import _validate
from constructions.circuits.graph import Circuit

Sampler = Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor]]


@dataclasses.dataclass(frozen=True)
class CircuitCase:
    r"""One benchmark case.

    ``build(**size)`` returns the model, ``circuit(**size)`` its ground-truth circuit under the
    corruption; ``sample(generator, batch, **size)`` returns ``(clean, corrupted)`` token
    batches ``(B, m)``; ``metric(logits, clean, corrupted)`` is ``(B,)``. ``builder`` and
    ``circuit_builder`` name the two functions as ``"module:name"`` (the claims' and the
    bundle's spelling), and ``corruption`` states in words which causal variable the corruption
    changes; ``native`` is set for a model that does not export to TransformerLens.

    ``minimal_circuits`` and ``dont_care`` are declared, by edge name, where every minimal
    circuit of the case has been enumerated (empty: not declared). A set :math:`K` of edges is
    a *minimal circuit* when patching every edge outside :math:`K` leaves the metric bit for
    bit unchanged on every prompt and no proper subset of :math:`K` does so; an edge :math:`e`
    is *don't-care* when patching it never changes the metric, whatever set :math:`P` of other
    edges is patched with it (:math:`m(P \cup \{e\}) = m(P)`). The ``circuit`` is then the
    union of the minimal circuits, and a method that includes or leaves out a don't-care edge
    is neither right nor wrong about it. Which
    claims check a case's circuit is said by the circuits area of ``theorems``
    (``theorems/areas/circuits/_cases.py``), not here: a construction knows no claim.
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
    # None: the model exports to TransformerLens. Otherwise model -> (module to run, edge name
    # -> its hook point path or None for a zero map, in forward order): the discovery harness
    # patches those native hook points (constructions.circuits.native_cases)
    native: Callable[[nn.Module], tuple[nn.Module, Mapping[str, str | None]]] | None = None
    # every minimal circuit and every don't-care edge, by edge name, where enumerated
    minimal_circuits: tuple[tuple[str, ...], ...] = ()
    dont_care: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        missing = [c for c in ("smoke", "full") if c not in self.sizes]
        if missing:
            raise ValueError(f"sizes must name the smoke and full sizes, {missing} missing")
        if bool(self.minimal_circuits) != bool(self.dont_care):
            raise ValueError("minimal_circuits and dont_care must be declared together")
        for circuit in self.minimal_circuits:
            if not circuit or set(circuit) & set(self.dont_care):
                raise ValueError(f"minimal_circuits must be non-empty and disjoint from "
                                 f"dont_care, got {circuit!r}")

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


# Every registered case, by name, in registration order (constructions.circuits.cases imports
# the modules that register them).
CASES: dict[str, CircuitCase] = {}
