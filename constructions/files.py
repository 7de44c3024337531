"""Public path of :mod:`constructions.interop.files`, where the code lives (the interop wing)."""

from constructions.interop.files import (
    ARGS_PREFIX,
    FORMAT,
    FORMAT_VERSION,
    INTEROP_HINT,
    installed_version,
    load,
    save,
)

__all__ = ["ARGS_PREFIX", "FORMAT", "FORMAT_VERSION", "INTEROP_HINT", "installed_version", "load",
           "save"]
