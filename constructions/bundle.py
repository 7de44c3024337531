"""Public path of :mod:`constructions.interop.bundle`, where the code lives (the interop wing)."""

from constructions.interop.bundle import CARD, CONFIG, WEIGHTS, load_bundle, write_bundle

__all__ = ["CARD", "CONFIG", "WEIGHTS", "load_bundle", "write_bundle"]
