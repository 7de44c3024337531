"""Finding experiments: importing every experiment module of :mod:`empirics` registers its
experiments (:func:`load_all`), and :func:`get` looks one up by name."""

from __future__ import annotations

import importlib
import pkgutil

from empirics.experiment.interface import EXPERIMENTS, Experiment


def load_all() -> dict[str, Experiment]:
    """Import every experiment module of the ``empirics`` package and return the registry."""
    import empirics

    for module in pkgutil.iter_modules(empirics.__path__):
        # experiments register themselves on import; engine modules register nothing
        if not module.name.startswith("_"):
            importlib.import_module(f"empirics.{module.name}")
    return EXPERIMENTS


def get(name: str) -> Experiment:
    """The registered experiment called ``name`` (loading every experiment module first)."""
    experiments = load_all()
    if name not in experiments:
        raise ValueError(f"unknown experiment {name!r}; known: {sorted(experiments)}")
    return experiments[name]
