r"""The circuit cases that do not export to TransformerLens, and what they need: prompt samplers,
metrics, and each edge's native hook point.

The LayerNorm majority head (LayerNorm on the embeddings alone, no residual) and the linear
self-attention of one-step GD (linear attention) have no ``HookedTransformer`` form, but both
are plain torch modules with TransformerLens-named hook points, so a library that patches any
module's activations (nnsight) can run activation patching and attribution on them. In a
1-layer graph every head input has one source (``input``), so *patching the edge*
:math:`\mathrm{input} \to a_h\langle x\rangle` is replacing the activation at one hook point by
the corrupted run's, and so is patching :math:`a_h \to \mathrm{logits}` (the head's output):
:func:`majority_hooks` and :func:`lsa_hooks` map each edge to that hook point (``None`` for a
zero map with no activation of its own), in the order the forward reaches them.

* Majority head: ``input -> a0.h0<q>``, ``<k>``, ``<v>`` are ``attention.hook_q``,
  ``hook_k``, ``hook_v`` (the projected query, key, value of the LayerNormed embedding, which
  is what the patched input gives), ``a0.h0 -> logits`` is the attention module's output (the
  model's output), ``input -> logits`` a zero map (no residual).
* One-step GD and its variants: the hook points of :class:`~constructions.circuits.
  LSAEdgeView`.

:data:`NATIVE_CASES` are the cases (the majority head, one-step GD and their dense variants),
registered by :mod:`constructions.circuits.cases`.
"""

from __future__ import annotations

import torch
from torch import nn

from constructions import _validate
from constructions.circuits import icl_variants
from constructions.circuits.case import CircuitCase
from constructions.circuits.graph import Circuit
from constructions.circuits.icl import icl_circuit, null_space_variant
from constructions.circuits.majority import majority_circuit
from constructions.circuits.majority_variants import ln_rotation_variant, qk_gauge_variant
from constructions.icl_regression import one_step_gd, prompt
from constructions.layernorm import MajorityHead, majority_head


def majority_hooks(model: nn.Module) -> tuple[nn.Module, dict[str, str | None]]:
    """(the module to run, edge name -> hook point path) for a majority head."""
    _validate.instance("model", model, MajorityHead)
    return model, {"input->a0.h0<q>": "attention.hook_q", "input->a0.h0<k>": "attention.hook_k",
                   "input->a0.h0<v>": "attention.hook_v", "a0.h0->logits": "attention",
                   "input->logits": None}


def lsa_hooks(model: nn.Module) -> tuple[nn.Module, dict[str, str | None]]:
    """(the edge view of a one-step-GD model, edge name -> hook point path)."""
    view = icl_variants.LSAEdgeView(model)
    return view, view.hook_names()


def sample_token_resamplings(generator: torch.Generator, batch: int, *, vocab_size: int,
                             d: int, length: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Clean prompts ``(B, length)`` uniform over the ``vocab_size`` tokens, and their
    corruptions: one uniform position :math:`r` per row resampled to a uniform token
    :math:`b \ne t_r` (:func:`~constructions.circuits.resample_token`, row by row).
    ``d`` is the model's (unused here)."""
    _validate.generator("generator", generator)
    batch = _validate.positive_int("batch", batch)
    V = _validate.positive_int("vocab_size", vocab_size, minimum=2)
    _validate.positive_int("d", d)
    n = _validate.positive_int("length", length)
    clean = torch.randint(V, (batch, n), generator=generator)
    corrupted = clean.clone()
    rows = torch.arange(batch)
    r = torch.randint(n, (batch,), generator=generator)
    shift = torch.randint(1, V, (batch,), generator=generator)       # b = t_r + shift mod V
    corrupted[rows, r] = (clean[rows, r] + shift) % V
    return clean, corrupted


def token_metric(output: torch.Tensor, clean: torch.Tensor, corrupted: torch.Tensor
                 ) -> torch.Tensor:
    r"""The majority circuit's metric :math:`o_{n,t_r} - o_{n,b}` per row, ``(B,)``:
    ``output`` ``(B, n, V)``; :math:`r` is the one position where ``clean`` and ``corrupted``
    ``(B, n)`` differ, :math:`t_r` and :math:`b` the two tokens there."""
    output = _validate.real_tensor("output", output, ndim=3)
    if 0 in output.shape[:2] or output.shape[2] < 2:
        raise ValueError(f"output must have shape (B, n, V) with B, n >= 1 and V >= 2, got "
                         f"{tuple(output.shape)}")
    clean = _validate.token_tensor("clean", clean, vocab_size=output.shape[-1], ndim=2)
    corrupted = _validate.token_tensor("corrupted", corrupted, vocab_size=output.shape[-1],
                                       ndim=2)
    if clean.shape != corrupted.shape or clean.shape != output.shape[:2]:
        raise ValueError(f"corrupted must have the shape of clean {tuple(clean.shape)} and "
                         f"of output's (B, n) {tuple(output.shape[:2])}")
    differs = clean != corrupted
    if bool((differs.sum(-1) != 1).any()):
        raise ValueError("corrupted must differ from clean at exactly one position per row")
    r = differs.long().argmax(-1, keepdim=True).to(output.device)        # (B, 1)
    a, b = clean.to(output.device).gather(-1, r), corrupted.to(output.device).gather(-1, r)
    final = output[:, -1]                                                # (B, V)
    return (final.gather(-1, a) - final.gather(-1, b)).squeeze(-1)


def sample_label_shifts(generator: torch.Generator, batch: int, *, d: int, eta: float,
                        n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Clean regression prompts ``(B, d+1, n+1)`` (:func:`~constructions.icl_regression.
    prompt`: Gaussian :math:`x_j`, Gaussian labels, the query a copy of a uniform context
    example :math:`x_k`, as the circuit claims have it) and their corruptions: label
    :math:`y_k` shifted by :math:`\delta` uniform in :math:`[1/2, 2]`
    (:func:`~constructions.circuits.shift_label`, row by row). :math:`\delta > 0` in every
    row, so every row's prediction moves the same way (by :math:`\delta\eta\|x_k\|^2/n`) and
    the batch mean of the metric, which the harness scores, does not cancel. ``eta`` is the
    model's (unused here)."""
    _validate.generator("generator", generator)
    batch = _validate.positive_int("batch", batch)
    d = _validate.positive_int("d", d)
    _validate.finite_float("eta", eta)
    n = _validate.positive_int("n", n)
    X = torch.randn(batch, n, d, generator=generator, dtype=torch.float64)
    y = torch.randn(batch, n, generator=generator, dtype=torch.float64)
    rows = torch.arange(batch)
    k = torch.randint(n, (batch,), generator=generator)
    clean = prompt(X, y, X[rows, k])
    delta = 0.5 + 1.5 * torch.rand(batch, generator=generator, dtype=torch.float64)
    corrupted = clean.clone()
    corrupted[rows, -1, k] += delta
    return clean, corrupted


def prediction_metric(output: torch.Tensor, clean: torch.Tensor, corrupted: torch.Tensor
                      ) -> torch.Tensor:
    """The one-step-GD circuit's metric: the prediction itself, ``(B,)``; ``clean`` and
    ``corrupted`` are the ``(B, d+1, n+1)`` prompts (the metric does not read them)."""
    output = _validate.real_tensor("output", output, ndim=1)
    if output.shape[0] == 0:
        raise ValueError("output must hold at least one prediction, got shape (0,)")
    shapes = []
    for name, Z in (("clean", clean), ("corrupted", corrupted)):
        Z = _validate.real_tensor(name, Z, ndim=3)
        if Z.shape[0] != output.shape[0] or Z.shape[1] < 2 or Z.shape[2] < 2:
            raise ValueError(f"{name} must have shape (B, d + 1, n + 1) with B = "
                             f"{output.shape[0]} and d, n >= 1, got {tuple(Z.shape)}")
        shapes.append(Z.shape)
    if shapes[0] != shapes[1]:
        raise ValueError(f"corrupted must have the shape of clean {tuple(shapes[0])}, got "
                         f"{tuple(shapes[1])}")
    return output


# --- the cases: the majority head and one-step GD, and their variants ---------------------------

def _majority_case(name: str, title: str, builder: str, variant) -> CircuitCase:
    def build(vocab_size: int, d: int, length: int | None = None) -> nn.Module:
        model = majority_head(vocab_size, d)
        return model if variant is None else variant(model)

    def circuit(vocab_size: int, d: int, length: int | None = None) -> Circuit:
        return majority_circuit(d)

    return CircuitCase(
        name=name, title=title, builder=builder,
        circuit_builder="constructions.circuits:majority_circuit",
        build=build, circuit=circuit, sample=sample_token_resamplings, metric=token_metric,
        corruption=("resample_token: one token is replaced by another. It changes one causal "
                    "variable, that token; the attention is uniform whatever the tokens (every "
                    "key is orthogonal to the queries' direction after the LayerNorm), so only "
                    "the value edge and the head's output carry the change; the metric is the "
                    "final-position output difference between the old and the new token."),
        sizes={"smoke": {"vocab_size": 4, "d": 8, "length": 8},
               "full": {"vocab_size": 16, "d": 32, "length": 64}},
        native=majority_hooks,
    )


def _lsa_case(name: str, title: str, builder: str, variant,
              heads: dict[str, str] | None = None) -> CircuitCase:
    def build(d: int, eta: float, n: int | None = None) -> nn.Module:
        model = one_step_gd(d, eta)
        return model if variant is None else variant(model)

    def circuit(d: int, eta: float, n: int | None = None) -> Circuit:
        base = icl_circuit(d)
        return base.relabelled(heads, 2, d + 1) if heads else base

    return CircuitCase(
        name=name, title=title, builder=builder,
        circuit_builder="constructions.circuits:icl_circuit",
        build=build, circuit=circuit, sample=sample_label_shifts, metric=prediction_metric,
        corruption=("shift_label: one context label y_k (whose x_k the query repeats) is "
                    "shifted by delta. It changes one causal variable, that example's label; "
                    "the query column and the keys' x part are unchanged and the key's label "
                    "meets W_KQ's zero label row, so only the label value edge and the head's "
                    "read-out carry the change; the metric is the prediction."),
        sizes={"smoke": {"d": 3, "eta": 0.5, "n": 8}, "full": {"d": 16, "eta": 0.1, "n": 64}},
        native=lsa_hooks,
    )


NATIVE_CASES = (
    _majority_case("majority-head", "LayerNorm majority head, token resampling",
                   "constructions.layernorm:majority_head", None),
    _majority_case("majority-head-qk-gauge",
                   "Majority head with a dense query/key gauge (M fixing 1^T)",
                   "constructions.circuits:qk_gauge_variant", qk_gauge_variant),
    _majority_case("majority-head-ln-rotation",
                   "Majority head with its residual stream rotated (R 1 = 1, commutes with LN)",
                   "constructions.circuits:ln_rotation_variant", ln_rotation_variant),
    _lsa_case("one-step-gd", "One-step-GD linear self-attention, label shift",
              "constructions.icl_regression:one_step_gd", None),
    _lsa_case("one-step-gd-null-space",
              "One-step GD with dense weights in the read-out's null space",
              "constructions.circuits:null_space_variant", null_space_variant),
    _lsa_case("one-step-gd-spurious-head",
              "One-step GD with a dense spurious head before the real one",
              "constructions.circuits.icl_variants:spurious_head_variant",
              icl_variants.spurious_head_variant, heads=icl_variants.SPURIOUS_HEADS),
)
