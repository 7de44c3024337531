"""Run many (config, seed) points of an experiment in parallel.

``sweep(fn, points)`` calls ``fn(point)`` for every point and returns the results in the
order of ``points``. ``fn`` must be a picklable top-level function taking one dict and
returning a JSON-ready dict. Locally a process pool runs one point per worker, with the
worker count capped at the core count and torch limited to ``threads_per_worker`` threads
in each worker, so that workers do not oversubscribe the cores.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from tqdm.auto import tqdm


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)


def sweep(fn: Callable[[dict], dict], points: Sequence[dict], *, workers: int | None = None,
          backend: str = "process", threads_per_worker: int = 1, progress: bool = True,
          desc: str = "sweep") -> list[dict[str, Any]]:
    """Evaluate ``fn`` on every point; ``backend`` is ``"process"`` or ``"serial"``."""
    points = list(points)
    if backend not in ("process", "serial"):
        raise ValueError(f"backend must be 'process' or 'serial', got {backend!r}")
    workers = min(workers or default_workers(), default_workers(), max(1, len(points)))
    if backend == "serial" or workers == 1:
        _init_worker(threads_per_worker)
        return [fn(p) for p in tqdm(points, desc=desc, disable=not progress, leave=False)]
    results: list[Any] = [None] * len(points)
    with ProcessPoolExecutor(workers, initializer=_init_worker,
                             initargs=(threads_per_worker,)) as pool:
        futures = {pool.submit(fn, p): i for i, p in enumerate(points)}
        for future in tqdm(as_completed(futures), total=len(points), desc=desc,
                           disable=not progress, leave=False):
            results[futures[future]] = future.result()
    return results
