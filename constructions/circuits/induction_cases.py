r"""The circuit cases of the induction constructions: the one-hot and the compact one under each
of the two corruptions, and their dense variants under the earlier-occurrence corruption.

Each case is a :class:`~constructions.circuits.CircuitCase`; the prompt samplers draw (clean,
corrupted) batches that meet the conditions of :func:`~constructions.circuits.
resample_next_token` and :func:`~constructions.circuits.resample_earlier_occurrence`. The
cases are registered, in the order of :data:`INDUCTION_CASES` and then
:data:`GAUGE_VARIANTS`, by :mod:`constructions.circuits.cases`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from constructions import _validate
from constructions.circuits import gauges
from constructions.circuits.case import CircuitCase
from constructions.circuits.corruptions import (
    logit_difference,
    resample_earlier_occurrence,
    resample_next_token,
)
from constructions.circuits.graph import Circuit, other_edges
from constructions.circuits.induction import induction_circuit
from constructions.circuits.variants import (
    SPURIOUS_HEADS,
    spurious_head_variant,
    value_gauge_variant,
)
from constructions.induction_heads import compact_induction, two_layer_induction

# --- the two-layer induction case --------------------------------------------------------------

def _edge_names(corruption: str) -> tuple[str, ...]:
    """The one-hot construction's circuit under ``corruption``, by edge name (the names do not
    depend on the size)."""
    return tuple(e.name for e in induction_circuit("two_layer", 3, 3, corruption).edges)



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
    # unique, and every other edge never matters (circuits.minimal-circuits)
    minimal_circuits=(_edge_names("resample_next_token"),),
    dont_care=other_edges(2, 1, _edge_names("resample_next_token")),
)


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
)


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
    # unique, and every other edge never matters, input -> L1H0 value included: it moves the
    # logits of the replaced tokens, not the metric (circuits.minimal-circuits)
    minimal_circuits=(_edge_names("resample_earlier_occurrence"),),
    dont_care=other_edges(2, 1, _edge_names("resample_earlier_occurrence")),
)


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
)


def _spurious_model(vocab_size: int, max_len: int) -> nn.Module:
    return spurious_head_variant(two_layer_induction(vocab_size, max_len))


def _spurious_circuit(vocab_size: int, max_len: int) -> Circuit:
    model = _spurious_model(vocab_size, max_len)
    return _earlier_occurrence_circuit(vocab_size, max_len).relabelled(
        SPURIOUS_HEADS, model.layers[0].n_heads, model.d_model)


def _gauge_model(vocab_size: int, max_len: int) -> nn.Module:
    return value_gauge_variant(two_layer_induction(vocab_size, max_len))


def _gauge_circuit(vocab_size: int, max_len: int) -> Circuit:
    model = _gauge_model(vocab_size, max_len)
    base = _earlier_occurrence_circuit(vocab_size, max_len)
    return Circuit(base.name, base.n_layers, model.layers[0].n_heads, model.d_model,
                   base.edges, base.corruption)


SPURIOUS_HEAD_VARIANT = CircuitCase(
    name="two-layer-induction-spurious-heads",
    title="Two-layer induction with a dense spurious head per layer (earlier occurrence)",
    builder="constructions.circuits:spurious_head_variant",
    circuit_builder="constructions.circuits:induction_circuit",
    build=_spurious_model, circuit=_spurious_circuit, sample=sample_earlier_occurrence_pairs,
    metric=logit_difference, corruption=EARLIER_OCCURRENCE, sizes=EARLIER_SIZES,
)
VALUE_GAUGE_VARIANT = CircuitCase(
    name="two-layer-induction-value-gauge",
    title="Two-layer induction with a dense Hadamard gauge of W_V, W_O (earlier occurrence)",
    builder="constructions.circuits:value_gauge_variant",
    circuit_builder="constructions.circuits:induction_circuit",
    build=_gauge_model, circuit=_gauge_circuit, sample=sample_earlier_occurrence_pairs,
    metric=logit_difference, corruption=EARLIER_OCCURRENCE, sizes=EARLIER_SIZES,
)


INDUCTION_CASES = (TWO_LAYER_INDUCTION, COMPACT_INDUCTION, TWO_LAYER_EARLIER_OCCURRENCE,
                   COMPACT_EARLIER_OCCURRENCE, SPURIOUS_HEAD_VARIANT, VALUE_GAUGE_VARIANT)


# --- gauge variants of both induction constructions (constructions.circuits.gauges) ----------

def _gauged(kind: str, variant: str) -> tuple[Callable[..., nn.Module], Callable[..., Circuit]]:
    """(model builder, circuit builder) of a gauge variant of the ``kind`` construction under
    the earlier-occurrence corruption: the circuit is the construction's, on the variant's
    graph (its heads renamed for the permutation)."""
    base = {"two_layer": two_layer_induction, "compact": compact_induction}[kind]

    def build(vocab_size: int, max_len: int) -> nn.Module:
        return getattr(gauges, variant)(base(vocab_size, max_len))

    def circuit(vocab_size: int, max_len: int) -> Circuit:
        model = build(vocab_size, max_len)
        original = induction_circuit(kind, vocab_size, max_len, "resample_earlier_occurrence")
        heads = gauges.PERMUTED_HEADS if variant == "permuted_variant" else {}
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
GAUGE_VARIANTS: dict[str, CircuitCase] = {}
for _name, _kind, _variant, _title in _GAUGE_CASES:
    _build, _circuit = _gauged(_kind, _variant)
    GAUGE_VARIANTS[_name] = CircuitCase(
        name=_name, title=_title + " (earlier occurrence)",
        builder=f"constructions.circuits:{_variant}",
        circuit_builder="constructions.circuits:induction_circuit",
        build=_build, circuit=_circuit, sample=sample_earlier_occurrence_pairs,
        metric=logit_difference,
        corruption=EARLIER_OCCURRENCE + (" The gauge is exact in real arithmetic; in float64 "
                                         "the circuit holds within the derived running "
                                         "rounding bound." if _variant != "permuted_variant"
                                         else " The permutation is exact in real "
                                         "arithmetic, and within the running rounding "
                                         "bound in float64."),
        sizes=EARLIER_SIZES,
    )
