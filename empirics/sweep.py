"""Run many (config, seed) points of an experiment in parallel, and aggregate over seeds.

``sweep(fn, points)`` calls ``fn(point)`` for every point and returns the results in the
order of ``points``. ``fn`` must be a picklable top-level function taking one dict and
returning a JSON-ready dict. Backends:

* ``"process"`` (default): a local process pool. The worker count is capped at the number of
  cores this process may use, and each worker limits torch to ``threads_per_worker`` threads,
  so ``workers * threads_per_worker`` never oversubscribes the machine.
* ``"serial"``: in this process, in order (also used whenever one worker would do).
* ``"ray"``: the same points as Ray tasks (``pip install 'transformer-theorems[ray]'``). It
  connects to the cluster named by ``RAY_ADDRESS`` when that is set, and otherwise starts a
  local Ray with ``workers`` CPUs. Each task reserves ``threads_per_worker`` CPUs.

**Start method.** Workers are started with ``forkserver`` (``spawn`` where that is missing),
never ``fork``. Forking a process after torch has run copies its OpenMP/MKL thread pools and
any CUDA context in a broken state: the CUDA runtime does not support ``fork``, and a forked
child can deadlock on a lock held by a pool thread that does not exist in the child. The
fork server is itself a fresh process that imports torch once (``set_forkserver_preload``)
before any thread pool exists, so workers fork from a clean state and do not pay the torch
import each (which ``spawn`` would).

**Nesting.** A sweep called inside a sweep worker runs serially: the outer pool already uses
every core, and nested pools would oversubscribe them.

``aggregate(rows, by=..., metrics=...)`` groups rows (for example one per seed) and reports
mean, standard deviation, standard error and count per metric; ``errorbar_figure`` plots them.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from tqdm.auto import tqdm

from empirics.plots import pyplot

BACKENDS = ("process", "serial", "ray")
_IN_WORKER = "EMPIRICS_SWEEP_WORKER"  # set in every sweep worker, so nested sweeps go serial


def _init_worker(threads: int) -> None:
    import torch

    os.environ[_IN_WORKER] = "1"
    torch.set_num_threads(threads)


def default_workers() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def in_worker() -> bool:
    """True inside a sweep worker (where a nested sweep runs serially)."""
    return os.environ.get(_IN_WORKER) == "1"


def process_context() -> multiprocessing.context.BaseContext:
    """The multiprocessing context of the pool: ``forkserver`` with torch preloaded, or
    ``spawn`` where there is no fork server (see the module docstring for why not ``fork``)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torch"])
        return context
    return multiprocessing.get_context("spawn")


def sweep(fn: Callable[[dict], dict], points: Sequence[dict], *, workers: int | None = None,
          backend: str = "process", threads_per_worker: int = 1, progress: bool = True,
          desc: str = "sweep") -> list[dict[str, Any]]:
    """Evaluate ``fn`` on every point with ``backend``; results come back in point order."""
    points = list(points)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    for name, value in (("workers", workers), ("threads_per_worker", threads_per_worker)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")
    if backend == "ray":
        return _ray_sweep(fn, points, workers, threads_per_worker, progress, desc)
    cores = default_workers()
    workers = min(workers or cores, max(1, cores // threads_per_worker), max(1, len(points)))
    if backend == "serial" or workers == 1 or in_worker():
        return [fn(p) for p in tqdm(points, desc=desc, disable=not progress, leave=False)]
    results: list[Any] = [None] * len(points)
    with ProcessPoolExecutor(workers, mp_context=process_context(), initializer=_init_worker,
                             initargs=(threads_per_worker,)) as pool:
        futures = {pool.submit(fn, p): i for i, p in enumerate(points)}
        for future in tqdm(as_completed(futures), total=len(points), desc=desc,
                           disable=not progress, leave=False):
            results[futures[future]] = future.result()
    return results


def _ray_task(fn: Callable[[dict], dict], point: dict, threads: int) -> dict:
    _init_worker(threads)
    return fn(point)


def _ray_sweep(fn, points, workers, threads_per_worker, progress, desc) -> list[dict]:
    try:
        import ray
    except ImportError as error:
        raise ImportError("backend='ray' needs Ray: pip install 'transformer-theorems[ray]'"
                          ) from error
    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):
            ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
        else:
            # A local Ray: its workers get this process's sys.path, as pool workers do, so a
            # point function defined outside an installed package still unpickles there.
            ray.init(num_cpus=workers or default_workers(), include_dashboard=False,
                     log_to_driver=False, configure_logging=False,
                     runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}})
    task = ray.remote(num_cpus=threads_per_worker)(_ray_task)
    refs = [task.remote(fn, p, threads_per_worker) for p in points]
    index = {ref: i for i, ref in enumerate(refs)}
    results: list[Any] = [None] * len(points)
    pending = list(refs)
    with tqdm(total=len(points), desc=desc, disable=not progress, leave=False) as bar:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                results[index[ref]] = ray.get(ref)
                bar.update(1)
    return results


# --- aggregation over seeds -------------------------------------------------------------------

def summary(values: Iterable[float]) -> dict[str, float]:
    """Mean, sample standard deviation, standard error of the mean, and count.

    With one value the spread is unknown and reported as NaN (not 0, which would claim
    certainty that one run cannot give). Non-finite values are kept, so a diverged seed shows.
    """
    values = [float(v) for v in values]
    n = len(values)
    if n == 0:
        raise ValueError("summary needs at least one value")
    mean = math.fsum(values) / n
    std = (math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1
           else float("nan"))
    return {"mean": mean, "std": std, "sem": std / math.sqrt(n), "n": n}


def aggregate(rows: Sequence[dict], *, by: Sequence[str] = (),
              metrics: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Group ``rows`` by the keys in ``by`` and summarise each metric per group.

    Returns one dict per group, in order of first appearance: the ``by`` values, then
    ``{metric: {"mean", "std", "sem", "n"}}``. ``metrics`` defaults to every numeric key
    that is not in ``by`` and is present in every row.
    """
    rows = list(rows)
    if not rows:
        return []
    if metrics is None:
        common = set.intersection(*(set(r) for r in rows)) - set(by)
        metrics = sorted(k for k in common if all(_is_number(r[k]) for r in rows))
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in by), []).append(row)
    return [{**dict(zip(by, key, strict=True)),
             **{m: summary(r[m] for r in members if m in r) for m in metrics
                if any(m in r for r in members)}}
            for key, members in groups.items()]


def errorbar_figure(groups: Sequence[dict], *, x: str, metrics: Sequence[str],
                    spread: str = "std", logx: bool = False, logy: bool = False,
                    title: str = "", ylabel: str = ""):
    """Plot ``mean ± spread`` of each metric against ``x`` (one line per metric).

    ``groups`` is the output of :func:`aggregate` grouped by ``x`` (plus optionally other
    keys, which then get separate lines). ``spread`` is ``"std"`` (seed-to-seed variation)
    or ``"sem"`` (uncertainty of the mean).
    """
    plt = pyplot()

    if spread not in ("std", "sem"):
        raise ValueError(f"spread must be 'std' or 'sem', got {spread!r}")
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for metric in metrics:
        points = sorted((g[x], g[metric]) for g in groups if metric in g)
        xs = [p[0] for p in points]
        means = [p[1]["mean"] for p in points]
        errors = [0.0 if math.isnan(p[1][spread]) else p[1][spread] for p in points]
        n = points[0][1]["n"] if points else 0
        ax.errorbar(xs, means, yerr=errors, marker="o", capsize=3,
                    label=f"{metric} (mean ± {spread}, n={n})")
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
