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
from constructions.induction_heads import compact_induction, two_layer_induction

Sampler = Callable[[torch.Generator, int], tuple[torch.Tensor, torch.Tensor]]


@dataclasses.dataclass(frozen=True)
class CircuitCase:
    r"""One benchmark case.

    ``build(**size)`` returns the model, ``circuit(**size)`` its ground-truth circuit under the
    corruption; ``sample(generator, batch, **size)`` returns ``(clean, corrupted)`` token
    batches ``(B, m)``; ``metric(logits, clean, corrupted)`` is ``(B,)``. ``builder`` and
    ``circuit_builder`` name the two functions as ``"module:name"`` (the claims' and the
    bundle's spelling), ``corruption`` states in words which causal variable the corruption
    changes, and ``claims`` lists the registered claims that check the circuit; ``native``
    is set for a model that does not export to TransformerLens.
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
    # None: the model exports to TransformerLens. Otherwise model -> (module to run, edge name
    # -> its hook point path or None for a zero map, in forward order): the discovery harness
    # patches those native hook points (constructions.native_cases)
    native: Callable[[nn.Module], tuple[nn.Module, Mapping[str, str | None]]] | None = None

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


def case_for_claim(claim_id: str) -> CircuitCase | None:
    """The case whose checked claims include ``claim_id``."""
    if not isinstance(claim_id, str):
        raise TypeError(f"claim_id must be a claim id string, got {type(claim_id).__name__}")
    for case in all_cases().values():
        if claim_id in case.claims:
            return case
    return None


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


# --- the compact induction case (circle codes), next-token resampling ---------------------------

COMPACT_INDUCTION = CircuitCase(
    name="compact-induction",
    title="Compact induction (width 11, circle codes), next-token resampling",
    builder="constructions.induction_heads:compact_induction",
    circuit_builder="constructions.circuits:induction_circuit",
    build=compact_induction,
    circuit=lambda vocab_size, max_len: induction_circuit("compact", vocab_size, max_len),
    sample=sample_next_token_pairs,
    metric=logit_difference,
    corruption=("resample_next_token, as for the one-hot case: it changes what the induction "
                "head copies. The circle codes are not one-hot, so two edges outside the "
                "circuit (input -> L0H0 value, L0H0 -> L1H0 key) move the metric by a small "
                "derived amount (at most 2 eps |u_tau - u_tau'|): the circuit is sufficient "
                "within that bound, not exactly, and every circuit edge moves the metric by "
                "more."),
    sizes={"smoke": {"vocab_size": 4, "max_len": 8},
           "full": {"vocab_size": 16, "max_len": 32}},
    claims=("circuits.compact-sufficient", "circuits.compact-necessary",
            "circuits.compact-minimal"),
).register()


# --- the two-layer induction case under the earlier-occurrence corruption, and its variants ----

def sample_earlier_occurrence_pairs(generator: torch.Generator, batch: int, *, vocab_size: int,
                                    max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Clean prompts of length ``max_len`` with exactly one earlier occurrence of the final
    token, and their :func:`~constructions.circuits.resample_earlier_occurrence` corruptions.

    The earlier occurrence :math:`j^\star \le m - 3` is uniform; every other position before
    the end is uniform over the tokens other than the final one :math:`a`; the replacement
    :math:`a'` is uniform over the tokens other than :math:`a` and :math:`\tau =
    \sigma_{j^\star+1}` (hence :math:`S \ge 3`).
    """
    from constructions.circuits import resample_earlier_occurrence

    _validate.generator("generator", generator)
    batch = _validate.positive_int("batch", batch)
    S = _validate.positive_int("vocab_size", vocab_size, minimum=3)
    m = _validate.positive_int("max_len", max_len, minimum=3)
    clean = torch.empty(batch, m, dtype=torch.long)
    replacement = torch.empty(batch, dtype=torch.long)
    for b in range(batch):
        a = int(torch.randint(S, (1,), generator=generator))
        # every non-final position draws from the S - 1 tokens other than a
        others = torch.randint(S - 1, (m,), generator=generator)
        clean[b] = others + (others >= a).long()
        j = int(torch.randint(m - 2, (1,), generator=generator))
        clean[b, j] = clean[b, -1] = a
        allowed = [t for t in range(S) if t not in (a, int(clean[b, j + 1]))]
        replacement[b] = allowed[int(torch.randint(len(allowed), (1,), generator=generator))]
    return clean, resample_earlier_occurrence(clean, replacement, S)


def _earlier_occurrence_circuit(vocab_size: int, max_len: int) -> Circuit:
    return induction_circuit("two_layer", vocab_size, max_len, "resample_earlier_occurrence")


EARLIER_OCCURRENCE = ("resample_earlier_occurrence: the one earlier occurrence of the final "
                      "token is replaced by a token that is neither it nor the token after it. "
                      "It changes one causal variable, where the induction head attends (the "
                      "previous-token head's record of that position); the corrupted prompt "
                      "has no earlier occurrence, so its target is the no-match class and the "
                      "metric is the logit difference between the copied token and it.")
EARLIER_SIZES = {"smoke": {"vocab_size": 4, "max_len": 8},
                 "full": {"vocab_size": 16, "max_len": 32}}

TWO_LAYER_EARLIER_OCCURRENCE = CircuitCase(
    name="two-layer-induction-earlier-occurrence",
    title="Two-layer induction (one-hot), earlier-occurrence resampling",
    builder="constructions.induction_heads:two_layer_induction",
    circuit_builder="constructions.circuits:induction_circuit",
    build=two_layer_induction,
    circuit=_earlier_occurrence_circuit,
    sample=sample_earlier_occurrence_pairs,
    metric=logit_difference,
    corruption=EARLIER_OCCURRENCE,
    sizes=EARLIER_SIZES,
    claims=("circuits.earlier-occurrence-sufficient", "circuits.earlier-occurrence-necessary",
            "circuits.earlier-occurrence-minimal"),
).register()


COMPACT_EARLIER_OCCURRENCE = CircuitCase(
    name="compact-induction-earlier-occurrence",
    title="Compact induction (width 11, circle codes), earlier-occurrence resampling",
    builder="constructions.induction_heads:compact_induction",
    circuit_builder="constructions.circuits:induction_circuit",
    build=compact_induction,
    circuit=lambda vocab_size, max_len: induction_circuit("compact", vocab_size, max_len,
                                                          "resample_earlier_occurrence"),
    sample=sample_earlier_occurrence_pairs,
    metric=logit_difference,
    corruption=(EARLIER_OCCURRENCE + " The circle codes let one edge outside the circuit "
                "(input -> L1H0 value) move the metric by a small derived amount (at most "
                "2 eps |u_tau - u_bot|): sufficient within that bound."),
    sizes=EARLIER_SIZES,
    claims=("circuits.compact-earlier-occurrence-sufficient",
            "circuits.compact-earlier-occurrence-necessary",
            "circuits.compact-earlier-occurrence-minimal"),
).register()


def _spurious_model(vocab_size: int, max_len: int) -> nn.Module:
    from constructions.circuit_variants import spurious_head_variant

    return spurious_head_variant(two_layer_induction(vocab_size, max_len))


def _spurious_circuit(vocab_size: int, max_len: int) -> Circuit:
    from constructions.circuit_variants import SPURIOUS_HEADS

    model = _spurious_model(vocab_size, max_len)
    return _earlier_occurrence_circuit(vocab_size, max_len).relabelled(
        SPURIOUS_HEADS, model.layers[0].n_heads, model.d_model)


def _gauge_model(vocab_size: int, max_len: int) -> nn.Module:
    from constructions.circuit_variants import value_gauge_variant

    return value_gauge_variant(two_layer_induction(vocab_size, max_len))


def _gauge_circuit(vocab_size: int, max_len: int) -> Circuit:
    model = _gauge_model(vocab_size, max_len)
    base = _earlier_occurrence_circuit(vocab_size, max_len)
    return Circuit(base.name, base.n_layers, model.layers[0].n_heads, model.d_model,
                   base.edges, base.corruption)


VARIANT_CLAIMS = ("circuits.variants-same-function", "circuits.variants-circuit")
SPURIOUS_HEAD_VARIANT = CircuitCase(
    name="two-layer-induction-spurious-heads",
    title="Two-layer induction with a dense spurious head per layer (earlier occurrence)",
    builder="constructions.circuit_variants:spurious_head_variant",
    circuit_builder="constructions.circuits:induction_circuit",
    build=_spurious_model, circuit=_spurious_circuit, sample=sample_earlier_occurrence_pairs,
    metric=logit_difference, corruption=EARLIER_OCCURRENCE, sizes=EARLIER_SIZES,
    claims=VARIANT_CLAIMS,
).register()
VALUE_GAUGE_VARIANT = CircuitCase(
    name="two-layer-induction-value-gauge",
    title="Two-layer induction with a dense Hadamard gauge of W_V, W_O (earlier occurrence)",
    builder="constructions.circuit_variants:value_gauge_variant",
    circuit_builder="constructions.circuits:induction_circuit",
    build=_gauge_model, circuit=_gauge_circuit, sample=sample_earlier_occurrence_pairs,
    metric=logit_difference, corruption=EARLIER_OCCURRENCE, sizes=EARLIER_SIZES,
    claims=VARIANT_CLAIMS,
).register()


# --- cases that do not export to TransformerLens: the majority head and one-step GD -----------
# (scored through their native hook points, CircuitCase.native; constructions.native_cases)

def _majority_case(name: str, title: str, builder: str, variant, claims: tuple[str, ...]
                   ) -> CircuitCase:
    from constructions.layernorm_geometry import majority_head
    from constructions.majority_circuit import majority_circuit
    from constructions.native_cases import majority_hooks, sample_token_resamplings, token_metric

    def build(vocab_size: int, d: int, length: int | None = None) -> nn.Module:
        model = majority_head(vocab_size, d)
        return model if variant is None else variant(model)

    def circuit(vocab_size: int, d: int, length: int | None = None) -> Circuit:
        return majority_circuit(d)

    return CircuitCase(
        name=name, title=title, builder=builder,
        circuit_builder="constructions.majority_circuit:majority_circuit",
        build=build, circuit=circuit, sample=sample_token_resamplings, metric=token_metric,
        corruption=("resample_token: one token is replaced by another. It changes one causal "
                    "variable, that token; the attention is uniform whatever the tokens (every "
                    "key is orthogonal to the queries' direction after the LayerNorm), so only "
                    "the value edge and the head's output carry the change; the metric is the "
                    "final-position output difference between the old and the new token."),
        sizes={"smoke": {"vocab_size": 4, "d": 8, "length": 8},
               "full": {"vocab_size": 16, "d": 32, "length": 64}},
        claims=claims, native=majority_hooks,
    ).register()


def _lsa_case(name: str, title: str, builder: str, variant, claims: tuple[str, ...],
              heads: dict[str, str] | None = None) -> CircuitCase:
    from constructions.icl_circuit import icl_circuit
    from constructions.icl_regression import one_step_gd
    from constructions.native_cases import lsa_hooks, prediction_metric, sample_label_shifts

    def build(d: int, eta: float, n: int | None = None) -> nn.Module:
        model = one_step_gd(d, eta)
        return model if variant is None else variant(model)

    def circuit(d: int, eta: float, n: int | None = None) -> Circuit:
        base = icl_circuit(d)
        return base.relabelled(heads, 2, d + 1) if heads else base

    return CircuitCase(
        name=name, title=title, builder=builder,
        circuit_builder="constructions.icl_circuit:icl_circuit",
        build=build, circuit=circuit, sample=sample_label_shifts, metric=prediction_metric,
        corruption=("shift_label: one context label y_k (whose x_k the query repeats) is "
                    "shifted by delta. It changes one causal variable, that example's label; "
                    "the query column and the keys' x part are unchanged and the key's label "
                    "meets W_KQ's zero label row, so only the label value edge and the head's "
                    "read-out carry the change; the metric is the prediction."),
        sizes={"smoke": {"d": 3, "eta": 0.5, "n": 8}, "full": {"d": 16, "eta": 0.1, "n": 64}},
        claims=claims, native=lsa_hooks,
    ).register()


def _register_native_cases() -> None:
    from constructions.icl_circuit import null_space_variant
    from constructions.icl_variants import SPURIOUS_HEADS, spurious_head_variant
    from constructions.majority_variants import ln_rotation_variant, qk_gauge_variant

    majority_claims = ("circuits.majority-sufficient", "circuits.majority-necessary",
                       "circuits.majority-minimal")
    majority_variants = ("circuits.majority-variants-same-function",
                         "circuits.majority-variants-circuit")
    _majority_case("majority-head", "LayerNorm majority head, token resampling",
                   "constructions.layernorm_geometry:majority_head", None, majority_claims)
    _majority_case("majority-head-qk-gauge",
                   "Majority head with a dense query/key gauge (M fixing 1^T)",
                   "constructions.majority_variants:qk_gauge_variant", qk_gauge_variant,
                   majority_variants)
    _majority_case("majority-head-ln-rotation",
                   "Majority head with its residual stream rotated (R 1 = 1, commutes with LN)",
                   "constructions.majority_variants:ln_rotation_variant", ln_rotation_variant,
                   majority_variants)
    _lsa_case("one-step-gd", "One-step-GD linear self-attention, label shift",
              "constructions.icl_regression:one_step_gd", None,
              ("circuits.icl-sufficient", "circuits.icl-necessary", "circuits.icl-minimal"))
    _lsa_case("one-step-gd-null-space",
              "One-step GD with dense weights in the read-out's null space",
              "constructions.icl_circuit:null_space_variant", null_space_variant,
              ("circuits.icl-variant",))
    _lsa_case("one-step-gd-spurious-head",
              "One-step GD with a dense spurious head before the real one",
              "constructions.icl_variants:spurious_head_variant", spurious_head_variant,
              ("circuits.icl-spurious-head",), heads=SPURIOUS_HEADS)


_register_native_cases()

# --- gauge variants of both induction constructions (constructions.circuit_gauges) -----------

def _gauged(kind: str, variant: str) -> tuple[Callable[..., nn.Module], Callable[..., Circuit]]:
    """(model builder, circuit builder) of a gauge variant of the ``kind`` construction under
    the earlier-occurrence corruption: the circuit is the construction's, on the variant's
    graph (its heads renamed for the permutation)."""
    from constructions import circuit_gauges

    base = {"two_layer": two_layer_induction, "compact": compact_induction}[kind]

    def build(vocab_size: int, max_len: int) -> nn.Module:
        return getattr(circuit_gauges, variant)(base(vocab_size, max_len))

    def circuit(vocab_size: int, max_len: int) -> Circuit:
        model = build(vocab_size, max_len)
        original = induction_circuit(kind, vocab_size, max_len, "resample_earlier_occurrence")
        heads = circuit_gauges.PERMUTED_HEADS if variant == "permuted_variant" else {}
        return original.relabelled(heads, model.layers[0].n_heads, model.d_model)
    return build, circuit


_GAUGE_CASES = (
    ("two-layer-induction-rotated", "two_layer", "rotation_variant",
     "Two-layer induction, residual stream rotated by a dense random orthogonal R"),
    ("compact-induction-rotated", "compact", "rotation_variant",
     "Compact induction, residual stream rotated by a dense random orthogonal R"),
    ("two-layer-induction-reparametrised", "two_layer", "reparametrised_variant",
     "Two-layer induction, W_Q/W_K and W_V/W_O reparametrised by a dense dyadic gauge"),
    ("compact-induction-reparametrised", "compact", "reparametrised_variant",
     "Compact induction, W_Q/W_K and W_V/W_O reparametrised by a dense dyadic gauge"),
    ("two-layer-induction-permuted-heads", "two_layer", "permuted_variant",
     "Two-layer induction with spurious heads, heads permuted within layer 1"),
)
GAUGE_VARIANTS = {}
for _name, _kind, _variant, _title in _GAUGE_CASES:
    _build, _circuit = _gauged(_kind, _variant)
    GAUGE_VARIANTS[_name] = CircuitCase(
        name=_name, title=_title + " (earlier occurrence)",
        builder=f"constructions.circuit_gauges:{_variant}",
        circuit_builder="constructions.circuits:induction_circuit",
        build=_build, circuit=_circuit, sample=sample_earlier_occurrence_pairs,
        metric=logit_difference,
        corruption=EARLIER_OCCURRENCE + (" The gauge is exact in real arithmetic; in float64 "
                                         "the circuit holds within the derived running "
                                         "rounding bound." if _variant != "permuted_variant"
                                         else " The permutation is exact in real "
                                         "arithmetic, and within the running rounding "
                                         "bound in float64."),
        sizes=EARLIER_SIZES, claims=VARIANT_CLAIMS,
    ).register()
