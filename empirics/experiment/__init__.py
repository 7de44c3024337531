"""The experiment interface: a name, a ``smoke`` and a ``full`` config (and optionally a
``cpu`` one), and ``run``.

An area's experiment module defines one or more :class:`Experiment` objects at import time::

    LN_MAJORITY = Experiment(
        name="ln-majority",
        description="LayerNorm makes majority learnable",
        claims=("layernorm.majority-learnable",),
        configs={"smoke": {...}, "full": {...}},
        run=run_ln_majority,           # (config: dict, device: torch.device, seed: int) -> Result
    )

``run`` trains with :func:`empirics.training.train`, compares the trained model with the
construction through gauge-invariant quantities, and returns a :class:`Result` holding those
metrics, its figures and tables. :meth:`Result.save` writes ``<out>/<name>/<config>.json``
plus one PNG per figure. The record carries the config, seed, device, versions, git SHA and
wall time, and a fingerprint of the experiment's source code.

Several seeds
-------------
:func:`run_seeds` runs seeds ``0..K-1`` of one config as a :func:`empirics.sweep.sweep`
(process pool or Ray), saves each as ``<config>-seed<k>.json``, and writes the aggregate as
``<config>.json``: per metric the mean, standard deviation, standard error and count over
seeds (:func:`empirics.sweep.aggregate`), with an error-bar figure. An experiment may add its
own aggregate figures with ``summarize(per_seed_dicts) -> {name: Figure}``. The aggregate's
``metrics`` are the means (numbers, like a one-seed result's) and ``spread`` holds the standard
deviation, standard error and count of each.

Published results and staleness
-------------------------------
Full-config results, and where an experiment defines one, ``cpu``-config results (sized for a
few CPU-minutes a seed, for a machine without a GPU), are published by running with ``--out
empirics/results`` and committing what it writes; :data:`PUBLISHED_CONFIGS` lists them, largest
first, and an experiment counts as published at the largest one it has. A published result
is *stale* when its ``record.code_fingerprint`` differs from :meth:`Experiment.fingerprint`,
i.e. the code it ran on has changed since; :func:`is_stale` decides it and :func:`published`
lists them (the docs use both).

Modules, one job each: :mod:`.result` (a result and its file), :mod:`.interface` (an
experiment, its registry and its code fingerprint), :mod:`.discovery` (finding the registered
experiments), :mod:`.seeds` (several seeds, aggregated) and :mod:`.published` (published
results and their staleness). This package re-exports their public names, so
``from empirics.experiment import ...`` reads any of them.
"""

from __future__ import annotations

from empirics.experiment.discovery import get, load_all
from empirics.experiment.interface import (
    CONFIG_NAMES,
    EXPERIMENTS,
    PUBLISHED_CONFIGS,
    Experiment,
    code_without_docs,
    package_modules,
    run_record,
)
from empirics.experiment.published import (
    RESULTS_DIR,
    is_stale,
    load_result,
    published,
    published_result,
    reuse_or_run,
)
from empirics.experiment.result import MetricPart, Result, metric_key, save_figures
from empirics.experiment.seeds import run_seeds, seeds_figure

__all__ = [
    "CONFIG_NAMES",
    "EXPERIMENTS",
    "PUBLISHED_CONFIGS",
    "RESULTS_DIR",
    "Experiment",
    "MetricPart",
    "Result",
    "code_without_docs",
    "get",
    "is_stale",
    "load_all",
    "load_result",
    "metric_key",
    "package_modules",
    "published",
    "published_result",
    "reuse_or_run",
    "run_record",
    "run_seeds",
    "save_figures",
    "seeds_figure",
]
