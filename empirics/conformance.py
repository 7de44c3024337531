r"""Hook conformance: what each hook of each interpretability tool holds, measured against the
exact activations of the exportable circuit constructions.

Every exportable circuit case (:func:`constructions.circuits.all_cases`; the induction
constructions and their variants) is run on a few of its clean prompts through

* ``torch``: the construction itself, reading its own hook points (named as in
  TransformerLens, :mod:`constructions.layers`) with ``register_forward_hook``, per-head
  results on (:func:`~constructions.circuits.per_head_results`);
* ``nnsight``: ``NNsight`` wrapping the construction, saving the same hook points;
* ``bridge (compatibility)`` and ``bridge (native names)``: TransformerLens's
  ``TransformerBridge`` (3.9, 4.x) built from the export's layout, with and without
  ``enable_compatibility_mode(no_processing=True)``, every hook of ``run_with_cache``;
* ``HookedTransformer``: where TransformerLens < 4 is installed,
  ``to_transformer_lens(model, circuit_hooks=True)``, every hook of ``run_with_cache``.

**The exact values.** Two evaluations of the same function, each in the convention of its
weights, computed in numpy's ``longdouble`` (64-bit significand on x86, so their own rounding
is :math:`2^{-11}` of float64's): the construction's (:math:`q = xW_Q`, scores
:math:`s\,qk^\top` unmasked, per-head results :math:`z_hW_O^h`) and the TransformerLens
export's (:math:`W_Q^{TL} = s\sqrt{d_{head}}W_Q`, heads padded to one :math:`d_{head}`, scores
:math:`qk^\top/\sqrt{d_{head}}` with the causal mask as :math:`-\infty`), plus the embeddings,
the residual stream before and after each layer, the attention output with and without the
residual, and the logits.

**What a hook means** is the exact quantity it matches best: each cached tensor is compared
with every exact quantity of the same size (reshaped; heads concatenated or not) and the one
with the smallest norm-wise relative deviation :math:`r = \max|T - Q| / \max|Q|` (over the
finite entries; an infinite entry must be infinite in both) names it. :math:`r` is reported
in units of float64's :math:`u = 2^{-53}`, with bands for reading the table, not verdicts:
*float64* (:math:`r \le 2^{10}u`), *float32* (:math:`r \le 2^{10}u_{32}`, :math:`u_{32} =
2^{-24}`), *drift* (larger), *unmatched* (no quantity within :math:`10^{-3}`). *As named*
says whether the quantity is the one the hook's name promises (:data:`PROMISES`).

Run ``python -m theorems.conformance`` (or :func:`report`); it prints one row per tool, hook
and meaning, merged over the cases, with the worst deviation and the case it came from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from constructions.circuits import all_cases, per_head_results
from constructions.interop.files import installed_version
from constructions.interop.layout import transformer_lens_layout
from constructions.residual_layout import UnsupportedConstructionError

U64, U32 = 2.0 ** -53, 2.0 ** -24
Exact = dict[str, np.ndarray]


def _ld(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().double().numpy().astype(np.longdouble)


def _softmax(scores: np.ndarray) -> np.ndarray:
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - top)
    return e / e.sum(axis=-1, keepdims=True)


def _causal(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


def exact_native(model, with_bos: torch.Tensor) -> Exact:
    """The construction's quantities (its weights and conventions), in ``longdouble``."""
    W_E, W_pos, W_U = _ld(model.W_E), _ld(model.W_pos), _ld(model.W_U)
    tokens = with_bos.cpu().numpy()
    n = tokens.shape[1]
    x = W_E[tokens] + W_pos[:n]
    out: Exact = {"embed": W_E[tokens], "pos_embed": np.broadcast_to(W_pos[:n], x.shape)}
    for i, layer in enumerate(model.layers):
        WQ, WK, WV, WO = (_ld(w) for w in (layer.W_Q, layer.W_K, layer.W_V, layer.W_O))
        q, k = np.einsum("bnd,hdk->bnhk", x, WQ), np.einsum("bnd,hdk->bnhk", x, WK)
        v = np.einsum("bnd,hdv->bnhv", x, WV)
        scores = layer.scale * np.einsum("bihk,bjhk->bhij", q, k)
        pattern = _softmax(np.where(_causal(n), scores, -np.inf))
        z = np.einsum("bhij,bjhv->bihv", pattern, v)
        result = np.einsum("bihv,hvo->biho", z, WO)
        attn = result.sum(axis=2)
        out.update({f"{i}.resid_pre": x, f"{i}.q (construction: x W_Q)": q,
                    f"{i}.k": k, f"{i}.v": v, f"{i}.scores, unmasked (construction)": scores,
                    f"{i}.pattern": pattern, f"{i}.z": z, f"{i}.result (per head)": result,
                    f"{i}.attn_out (no residual)": attn,
                    f"{i}.attn_out + residual": attn + x})
        x = x + attn
        out[f"{i}.resid_post"] = x
    out["logits"] = x @ W_U
    return out


def exact_transformer_lens(layout, with_bos: torch.Tensor) -> Exact:
    """The TransformerLens export's quantities (its weights and conventions), in
    ``longdouble``."""
    s = {k: _ld(v) for k, v in layout.state_dict.items()}
    tokens = with_bos.cpu().numpy()
    n = tokens.shape[1]
    x = s["embed.W_E"][tokens] + s["pos_embed.W_pos"][:n]
    out: Exact = {}
    d_head = layout.config["d_head"]
    for i in range(layout.config["n_layers"]):
        a = f"blocks.{i}.attn"
        q = np.einsum("bnd,hdk->bnhk", x, s[f"{a}.W_Q"]) + s[f"{a}.b_Q"]
        k = np.einsum("bnd,hdk->bnhk", x, s[f"{a}.W_K"]) + s[f"{a}.b_K"]
        v = np.einsum("bnd,hdk->bnhk", x, s[f"{a}.W_V"]) + s[f"{a}.b_V"]
        scores = np.einsum("bihk,bjhk->bhij", q, k) / np.sqrt(np.longdouble(d_head))
        masked = np.where(_causal(n), scores, -np.inf)
        pattern = _softmax(masked)
        z = np.einsum("bhij,bjhv->bihv", pattern, v)
        result = np.einsum("bihv,hvo->biho", z, s[f"{a}.W_O"])
        attn = result.sum(axis=2) + s[f"{a}.b_O"]
        heads = q.shape[2]
        out.update({f"{i}.resid_pre, one copy per head (split QKV input)":
                    np.broadcast_to(x[:, :, None, :], (*x.shape[:2], heads, x.shape[-1])),
                    f"{i}.q (export: x W_Q^TL, scale folded in)": q,
                    f"{i}.k (export, padded heads)": k, f"{i}.v (export, padded heads)": v,
                    f"{i}.scores, causal mask -inf (export)": masked,
                    f"{i}.z (export, padded heads)": z})
        x = x + attn
    out["logits (export)"] = x @ s["unembed.W_U"] + s["unembed.b_U"]
    return out


# --- the tools ------------------------------------------------------------------------------

def _native_names(model) -> dict[str, Any]:
    """TransformerLens hook name -> the construction's hook point."""
    names = {}
    for i, layer in enumerate(model.layers):
        names[f"blocks.{i}.hook_resid_pre"] = model.hook_resid_pre[i]
        names[f"blocks.{i}.hook_resid_post"] = model.hook_resid_post[i]
        for hook in ("hook_q", "hook_k", "hook_v", "hook_attn_scores", "hook_pattern",
                     "hook_z", "hook_result"):
            names[f"blocks.{i}.attn.{hook}"] = getattr(layer, hook)
    return names


def run_torch(model, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """The construction's hook points through ``register_forward_hook``."""
    store: dict[str, torch.Tensor] = {}
    handles = [point.register_forward_hook(
        lambda module, args, output, name=name: store.__setitem__(name, output.clone()))
        for name, point in _native_names(model).items()]
    try:
        with per_head_results(model), torch.no_grad():
            logits = model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    store["logits (real positions)"] = logits
    return store


# the order the construction's Attention.forward reaches its hook points
FORWARD_ORDER = ("hook_q", "hook_k", "hook_attn_scores", "hook_pattern", "hook_v", "hook_z",
                 "hook_result")


def run_nnsight(model, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same hook points saved through ``nnsight.NNsight``."""
    from nnsight import NNsight

    wrapped = NNsight(model)
    saved = {}
    with per_head_results(model), torch.no_grad(), wrapped.trace(tokens):
        for i in range(len(model.layers)):
            saved[f"blocks.{i}.hook_resid_pre"] = wrapped.hook_resid_pre[i].output.save()
            for hook in FORWARD_ORDER:          # nnsight reads hooks in forward order
                saved[f"blocks.{i}.attn.{hook}"] = getattr(wrapped.layers[i], hook).output.save()
            saved[f"blocks.{i}.hook_resid_post"] = wrapped.hook_resid_post[i].output.save()
        saved["logits (real positions)"] = wrapped.output.save()
    return {k: v.clone() for k, v in saved.items()}


def _bridge(model, compatibility: bool):
    from constructions.export import to_transformer_bridge

    if compatibility:
        return to_transformer_bridge(model)
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    from constructions.interop.bridge import bridge_state_dict

    layout = transformer_lens_layout(model)
    config = dict(layout.config)
    dtype, device = config.pop("dtype"), config.pop("device")
    with torch.random.fork_rng(devices=[]):
        bridge = TransformerBridge.boot_native(TransformerBridgeConfig.from_dict(config),
                                               dtype=dtype, device=device,
                                               model_name=config["model_name"])
    state = bridge.state_dict()
    converted = {k: v for k, v in bridge_state_dict(layout).items() if k in state}
    bridge.load_state_dict({**state, **converted}, strict=True)
    return bridge.eval()


def run_bridge(model, with_bos: torch.Tensor, compatibility: bool = True
               ) -> dict[str, torch.Tensor]:
    """Every hook of a ``TransformerBridge``'s ``run_with_cache``."""
    bridge = _bridge(model, compatibility)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(with_bos)
    out = {name: value for name, value in cache.items() if isinstance(value, torch.Tensor)}
    out["logits (with BOS)"] = logits
    return out


def run_hooked_transformer(model, with_bos: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every hook of a ``HookedTransformer`` (TransformerLens < 4) with the circuit hooks."""
    from constructions.export import to_transformer_lens

    tl_model = to_transformer_lens(model, circuit_hooks=True)
    with torch.no_grad():
        logits, cache = tl_model.run_with_cache(with_bos)
    out = {name: value for name, value in cache.items()}
    out["logits (with BOS)"] = logits
    return out


# --- matching --------------------------------------------------------------------------------

def deviation(tensor: torch.Tensor, exact: np.ndarray) -> float:
    """:math:`\\max|T - Q| / \\max|Q|` over the finite entries (inf where an infinity of one
    is not an equal infinity of the other)."""
    t = tensor.detach().cpu().double().numpy().astype(np.longdouble).reshape(exact.shape)
    finite = np.isfinite(exact)
    if not np.array_equal(finite, np.isfinite(t)) or not np.array_equal(t[~finite],
                                                                          exact[~finite]):
        return math.inf
    scale = np.max(np.abs(exact[finite])) if finite.any() else 0
    diff = np.max(np.abs(t[finite] - exact[finite])) if finite.any() else 0
    return float(diff / scale) if scale > 0 else (0.0 if diff == 0 else math.inf)


def _layer(name: str) -> str | None:
    match = re.search(r"blocks\.(\d+)\.", name)
    return match[1] if match else None


def _candidates(name: str, tensor: torch.Tensor, exact: Exact) -> list[tuple[str, np.ndarray]]:
    """The exact quantities a hook may mean: those of its layer (all, for a hook outside the
    blocks), whose size equals the tensor's, less a leading BOS position where the tool
    dropped it."""
    layer = _layer(name)
    found = []
    for key, value in exact.items():
        if layer is not None and key.split(".")[0] not in (layer, str(int(layer) - 1)) \
                and not key.startswith(("logits", "embed", "pos_embed")):
            continue
        if value.size == tensor.numel():
            found.append((key, value))
        elif value.ndim >= 2 and value[:, 1:].size == tensor.numel() and key.startswith("logits"):
            found.append((key + " [real positions]", value[:, 1:]))
    return found


def band(r: float) -> str:
    if not math.isfinite(r) or r > 1e-3:
        return "unmatched"
    if r <= 2 ** 10 * U64:
        return "float64"
    return "float32" if r <= 2 ** 10 * U32 else "drift"


# What a hook's name promises, as the word of an exact quantity's name (first match wins).
PROMISES = (
    (r"hook_attn_scores$", "scores"), (r"hook_pattern$", "pattern"), (r"hook_result$", "result"),
    (r"(hook_attn_out|attn\.hook_out|attn\.o\.hook_out)$", "attn_out"),
    (r"(hook_z|attn\.o\.hook_in)$", "z"), (r"(hook_q|attn\.q\.hook_out)$", "q"),
    (r"(hook_k|attn\.k\.hook_out)$", "k"), (r"(hook_v|attn\.v\.hook_out)$", "v"),
    (r"(hook_resid_pre|hook_[qkv]_input|blocks\.\d+\.hook_in|ln1\.hook_(in|out)|attn\.(q\.|k\.|v\.)?hook_in)$",
     "resid_pre"),
    (r"(hook_resid_post|blocks\.\d+\.hook_out|ln_final\.hook_(in|out)|unembed\.hook_in)$",
     "resid_post"),
    (r"^(hook_pos_embed|pos_embed\.hook_out)$", "pos_embed"),
    (r"^(hook_embed|embed\.hook_out)$", "embed"),
    (r"(unembed\.hook_out|hook_unembed|logits)", "logits"),
)


def promise(name: str) -> str | None:
    """The quantity a hook's name promises (:data:`PROMISES`), or ``None``."""
    for pattern, word in PROMISES:
        if re.search(pattern, name):
            return word
    return None


def _keeps(key: str, word: str | None) -> bool:
    """Whether exact quantity ``key`` is what ``word`` promises (``resid_post`` of layer l is
    also ``resid_pre`` of layer l + 1 and ``attn_out + residual``, which it equals)."""
    if word is None:
        return False
    tail = key.split(".", 1)[1] if key[0].isdigit() else key
    if word == "resid_post":
        return tail.startswith(("resid_post", "attn_out + residual"))
    return tail.split(" ")[0].rstrip(",") == word


def classify(name: str, tensor: torch.Tensor, exact: Exact) -> tuple[str, float, bool]:
    """(meaning, r, as named): the exact quantity the hook holds and its relative deviation.
    Several quantities can be equal in a construction (one head's result is the layer's
    output; the last residual stream read by an identity unembedding is the logits): among
    those within the float64 band the one the name promises is taken."""
    word = promise(name)
    scored = [(deviation(tensor, value), not _keeps(key, word), key)
              for key, value in _candidates(name, tensor, exact)]
    if not scored:
        return "no quantity of this size", math.inf, False
    close = [c for c in scored if c[0] <= 2 ** 10 * U64]
    r, unnamed, key = min(close, key=lambda c: (c[1], c[0])) if close else min(scored)
    if not close and not unnamed and any(c[0] < r for c in scored):
        r, unnamed, key = min(scored)
    return (key.split(".", 1)[1] if key[0].isdigit() else key), r, not unnamed


TOOLS: dict[str, Callable] = {
    "torch": lambda model, tokens, bos: run_torch(model, tokens),
    "nnsight": lambda model, tokens, bos: run_nnsight(model, tokens),
    "bridge (compatibility)": lambda model, tokens, bos: run_bridge(model, bos, True),
    "bridge (native names)": lambda model, tokens, bos: run_bridge(model, bos, False),
    "HookedTransformer": lambda model, tokens, bos: run_hooked_transformer(model, bos),
}
VERSIONS = {"torch": "torch", "nnsight": "nnsight", "bridge (compatibility)": "transformer-lens",
            "bridge (native names)": "transformer-lens",
            "HookedTransformer": "transformer-lens"}


def case_rows(case_name: str, *, batch: int = 4, seed: int = 0) -> list[dict[str, Any]]:
    """One row per tool and hook for one case at its smoke size."""
    case = all_cases()[case_name]
    model, _ = case.instance("smoke")
    try:
        layout = transformer_lens_layout(model)
    except UnsupportedConstructionError:
        return []
    tokens, _ = case.prompts(torch.Generator().manual_seed(seed), batch, "smoke")
    bos = torch.cat([torch.full((tokens.shape[0], 1), model.vocab_size), tokens], dim=1)
    exact = {**exact_native(model, bos), **exact_transformer_lens(layout, bos)}
    rows = []
    for tool, run in TOOLS.items():
        version = installed_version(VERSIONS[tool])
        try:
            cache = run(model, tokens, bos)
        except (ImportError, NotImplementedError) as error:
            rows.append({"case": case_name, "tool": tool, "version": version, "hook": "-",
                         "meaning": f"not run: {str(error).splitlines()[0][:90]}",
                         "r": math.nan, "band": "not run", "as named": False})
            continue
        for name, tensor in sorted(cache.items()):
            if not torch.is_floating_point(tensor):
                continue
            meaning, r, named = classify(name, tensor, exact)
            rows.append({"case": case_name, "tool": tool, "version": version, "hook": name,
                         "meaning": meaning, "r": r, "band": band(r), "as named": named})
    return rows


def report(cases: list[str] | None = None, *, batch: int = 4, seed: int = 0
           ) -> list[dict[str, Any]]:
    """Rows merged over the cases, per tool and hook pattern (layer indices as ``L``): the
    meanings found (several where the cases' quantities coincide, such as one head's result
    and its layer's output), whether the hook held what its name promises in every case, the
    worst ``r`` and its case."""
    names = list(all_cases()) if cases is None else list(cases)
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for case_name in names:
        for row in case_rows(case_name, batch=batch, seed=seed):
            hook = re.sub(r"blocks\.\d+\.", "blocks.L.", row["hook"])
            seen = merged.setdefault((row["tool"], hook), {
                **row, "hook": hook, "meanings": set(), "cases": set(), "worst": case_name})
            seen["meanings"].add(row["meaning"])
            seen["cases"].add(case_name)
            seen["as named"] = seen["as named"] and row["as named"]
            if row["r"] > seen["r"] or (math.isnan(seen["r"]) and not math.isnan(row["r"])):
                seen.update(r=row["r"], band=row["band"], worst=case_name)
    return [{**row, "meaning": " / ".join(sorted(row.pop("meanings"))),
             "cases": len(row["cases"])} for row in merged.values()]


HEADER = ["tool", "version", "hook", "meaning", "as named", "r / u64", "band", "cases",
          "worst case"]


def table(rows: list[dict[str, Any]]) -> list[list[str]]:
    out = []
    for row in rows:
        r = row["r"]
        ulps = "-" if math.isnan(r) else ("inf" if math.isinf(r) else f"{r / U64:.3g}")
        out.append([row["tool"], str(row["version"]), row["hook"], row["meaning"],
                    "yes" if row["as named"] else "NO", ulps, row["band"], str(row["cases"]),
                    row["worst"]])
    return out
