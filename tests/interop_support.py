"""What the interop tests share: the optional packages they need, and mutant exports.

``required(module)`` imports a package of the ``interop`` extra or skips, saying why; under
``THEOREMS_REQUIRE_EXTRAS`` (``.ci/run`` installs every extra) a missing package fails instead.
A test that needs TransformerLens < 4 (its ``HookedTransformer``, which 4.0 removed) skips on
4.x with :data:`NEEDS_HOOKED_TRANSFORMER` as its reason, under ``THEOREMS_REQUIRE_EXTRAS``
too: 4.x is what the extra installs, so that test is not one the extra must run.

:func:`edited_export` builds a mutant export by editing the weights *before* they are loaded,
so that the same mutant runs on a ``HookedTransformer`` (TransformerLens 2.x/3.x) and on the
``TransformerBridge`` that ``to_transformer_lens`` returns on 4.x (whose ``W_Q`` is computed
from its ``nn.Linear`` weights, so in-place edits of it would change nothing).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable
from types import ModuleType

import pytest
import torch
from torch import nn

from constructions.interop.files import INTEROP_HINT

NEEDS_HOOKED_TRANSFORMER = "needs TransformerLens < 4 (HookedTransformer)"


def required(module: str) -> ModuleType:
    """``module`` imported, or a skip naming the extra (a failure under
    ``THEOREMS_REQUIRE_EXTRAS``)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("THEOREMS_REQUIRE_EXTRAS"):
            pytest.fail(f"{module} is missing, but THEOREMS_REQUIRE_EXTRAS says every extra "
                        "is installed")
        pytest.skip(f"{module} is not installed; it is in the interop extra: {INTEROP_HINT}")


def require_hooked_transformer() -> ModuleType:
    """TransformerLens with ``HookedTransformer`` (2.x, 3.x), or a skip saying that the test
    needs it (on 4.x, with or without ``THEOREMS_REQUIRE_EXTRAS``)."""
    from constructions.interop.layout import transformer_lens_version
    from constructions.interop.transformer_lens import _hooked_transformer_class

    module = required("transformer_lens")
    if _hooked_transformer_class() is None:
        pytest.skip(f"{NEEDS_HOOKED_TRANSFORMER}; transformer-lens {transformer_lens_version()} "
                    "is installed")
    return module


def has_hooked_transformer() -> bool:
    """Whether ``to_transformer_lens`` builds a ``HookedTransformer`` here (TransformerLens
    2.x/3.x installed), rather than a ``TransformerBridge`` (4.x)."""
    from constructions.interop.transformer_lens import _hooked_transformer_class

    return _hooked_transformer_class() is not None


def edited_export(edit: Callable[[dict[str, torch.Tensor], dict, nn.Module], None], *,
                  circuit_hooks: bool = False) -> Callable[[nn.Module], nn.Module]:
    """A mutant ``to_transformer_lens``: the layout's state dict (``HookedTransformer`` keys,
    ``W_Q`` with the folded scale) is copied, edited in place by ``edit(state, config, model)``
    and loaded as ``to_transformer_lens`` loads the real one."""
    from constructions.interop.layout import transformer_lens_layout
    from constructions.interop.transformer_lens import _export
    from constructions.recording import construction_name

    def export_model(model: nn.Module) -> nn.Module:
        layout = transformer_lens_layout(model)
        state = {k: v.clone() for k, v in layout.state_dict.items()}
        edit(state, layout.config, model)
        return _export(dataclasses.replace(layout, state_dict=state), construction_name(model),
                       circuit_hooks=circuit_hooks)
    return export_model
