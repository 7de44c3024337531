"""``python -m empirics``: list the experiments, run one, and show the published results.

::

    python -m empirics list [--json]
    python -m empirics run NAME [--config smoke|cpu|full] [--device auto|cpu|cuda] [--seeds K]
                                [--out DIR] [--workers N] [--backend process|serial|ray]
                                [--resume] [--set KEY=VALUE ...]
    python -m empirics results [--dir DIR] [--json]
    python -m empirics run-all [--config full] [--device cuda] [--seeds 3] [--out DIR]
                               [--only NAME,...] [--resume] [--dry-run]

``run`` writes ``<out>/<name>/<config>.json`` and its PNG figures (default ``--out
build/empirics``). With ``--seeds K > 1`` the seeds run as a sweep (a local process pool, or
Ray with ``--backend ray``); each seed is saved as ``<config>-seed<k>.json`` and
``<config>.json`` holds the mean and spread over seeds, with an error-bar figure. To publish
a full-config result, run it with ``--out empirics/results`` and commit what it writes; an
experiment that defines a ``cpu`` config (sized for a few CPU-minutes a seed) can be published
the same way with ``--config cpu``. ``results`` lists the published results (each row names its
config) and marks those whose code has changed since, and counts per experiment its largest
published config (``full``, else ``cpu``) as current or stale, and the missing ones.
``--resume`` reuses the seeds already saved under ``--out`` by the same code (fingerprint),
config and device, so an interrupted sweep, or ``run-all`` on a GPU, continues where it
stopped.

``run-all`` is the GPU path in one command: every registered experiment's config (``full`` by
default) with ``--seeds`` seeds each, one after the other, written where ``--out`` says
(``empirics/results`` to publish), then a summary with each experiment's wall time. For
example, on one GPU: ``python -m empirics run-all --config full --device cuda --seeds 3
--out empirics/results``. The test suite runs it at smoke size on the CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from empirics.experiment import (
    PUBLISHED_CONFIGS,
    RESULTS_DIR,
    get,
    load_all,
    published,
    run_seeds,
)
from empirics.sweep import BACKENDS

DEFAULT_OUT = Path("build") / "empirics"


def parse_override(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` with VALUE read as JSON where it parses (numbers, lists, true), else text."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set needs KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def cmd_list(args: argparse.Namespace) -> int:
    experiments = load_all()
    status = {(e["experiment"], e["config"]): e for e in published()}
    rows = []
    for name, experiment in sorted(experiments.items()):
        states = {}
        for config in PUBLISHED_CONFIGS:  # full, and cpu where the experiment defines it
            entry = status.get((name, config))
            if config == "full" or config in experiment.configs or entry is not None:
                states[config] = ("none" if entry is None else
                                  "stale" if entry["stale"] else "current")
        rows.append({"name": name, "description": experiment.description,
                     "configs": sorted(experiment.configs), "claims": list(experiment.claims),
                     **{f"published_{config}": state for config, state in states.items()}})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    width = max((len(row["name"]) for row in rows), default=0) + 2
    for row in rows:
        print(f"{row['name']:<{width}}{row['description']}")
        print(f"{'':<{width}}configs: {', '.join(row['configs'])}; claims: "
              f"{', '.join(row['claims']) or '-'}; published: "
              + ", ".join(f"{config} {row[f'published_{config}']}"
                          for config in PUBLISHED_CONFIGS if f"published_{config}" in row))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import torch

    experiment = get(args.name)
    overrides = dict(args.set or [])
    if args.seeds < 1:
        raise SystemExit("--seeds must be >= 1")
    # this process's torch threads: a single seed, or seeds run serially here (--workers 1 or
    # --backend serial), run with --threads; pool and Ray workers set their own (one each)
    torch.set_num_threads(args.threads)
    if args.seeds == 1 and args.backend != "ray":
        result = experiment(args.config, device=args.device, seed=args.seed, **overrides)
        path = result.save(args.out)
        metrics = result.metrics
        print(f"{experiment.name} [{args.config}] seed {args.seed} on "
              f"{result.record['device_name']}: {result.record['wall_time']:.1f} s")
        for name, value in sorted(metrics.items()):
            print(f"  {name:<40} {value:.6g}" if isinstance(value, float)
                  else f"  {name:<40} {value}")
        print(f"wrote {path} and {len(result.figures)} figure(s)")
        return 0
    data = run_seeds(experiment, args.config, seeds=list(range(args.seed, args.seed + args.seeds)),
                     device=args.device, out=args.out, workers=args.workers,
                     backend=args.backend, resume=args.resume, **overrides)
    print(f"{experiment.name} [{args.config}] {args.seeds} seeds on {data['device']} "
          f"({data['record']['backend']}): {data['record']['wall_time']:.1f} s")
    for name, mean in sorted(data["metrics"].items()):
        spread = data["spread"][name]
        print(f"  {name:<40} {mean:.6g} ± {spread['std']:.2g} (std, n={spread['n']})")
    print(f"wrote {data['path']} and {len(data['figures'])} figure(s)")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from empirics.census import census, summary_line

    entries = published(args.dir)
    if args.json:
        print(json.dumps(entries, indent=1))
        return 0
    if not entries:
        print(f"no published results under {args.dir}")
    for e in entries:  # each row names its config: full (GPU-sized), cpu, or another
        mark = "STALE" if e["stale"] else "current"
        print(f"{e['experiment']:<22} {e['config']:<6} {mark:<8} {e['device']} {e['date']} "
              f"seeds={e['seeds']} {e['path']}")
    counts = census(args.dir)
    print(summary_line(counts))
    at_cpu = sorted(name for name, config in counts["counted"].items() if config == "cpu")
    if at_cpu:
        print(f"at cpu size only (no full result): {', '.join(at_cpu)}")
    if counts["missing"]:
        print(f"missing: {', '.join(counts['missing'])}")
    return 0


def cmd_run_all(args: argparse.Namespace) -> int:
    import time

    experiments = load_all()
    names = sorted(experiments) if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = sorted(set(names) - set(experiments))
    if unknown:
        raise ValueError(f"--only names unknown experiments {unknown}")
    plan = [name for name in names if args.config in experiments[name].configs]
    if args.missing_first:  # what has no current result under --out runs first
        state = {e["experiment"]: "stale" if e["stale"] else "current"
                 for e in published(args.out) if e["config"] == args.config}
        rank = {"missing": 0, "stale": 1, "current": 2}
        plan.sort(key=lambda name: rank[state.get(name, "missing")])
    skipped = sorted(set(names) - set(plan))
    print(f"run-all: {len(plan)} experiments, config {args.config}, {args.seeds} seed(s) each, "
          f"device {args.device}, into {args.out}"
          + (f"; no {args.config} config: {', '.join(skipped)}" if skipped else ""))
    if args.dry_run:
        for name in plan:
            print(f"  {name}")
        return 0
    summary, started = [], time.perf_counter()
    for index, name in enumerate(plan):
        if args.deadline is not None and time.perf_counter() - started >= args.deadline:
            # between experiments: a clean stop; --resume continues with what is left
            left = plan[index:]
            print(f"run-all: deadline of {args.deadline:g} s reached; not started: "
                  f"{', '.join(left)}", flush=True)
            summary += [{"experiment": n, "seconds": None, "device": None, "path": None}
                        for n in left]
            break
        start = time.perf_counter()
        data = run_seeds(experiments[name], args.config,
                         seeds=list(range(args.seed, args.seed + args.seeds)),
                         device=args.device, out=args.out, workers=args.workers,
                         backend=args.backend, progress=False, resume=args.resume,
                         **dict(args.set or []))
        seconds = time.perf_counter() - start
        summary.append({"experiment": name, "seconds": round(seconds, 1),
                        "device": data["device"], "path": str(data["path"])})
        print(f"  {name:<24} {seconds:8.1f} s on {data['device']}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"run-all-{args.config}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"run-all: {sum(s['seconds'] or 0.0 for s in summary):.1f} s in all")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m empirics", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="the experiments, their configs, claims and published state")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_list)

    p = sub.add_parser("run", help="run one experiment and save its JSON and PNG figures")
    p.add_argument("name")
    p.add_argument("--config", default="smoke",
                   help="smoke (seconds on a CPU), cpu (minutes on a CPU, where the experiment "
                        "defines it) or full (a GPU)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda[:k]")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds (a sweep when > 1)")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"output folder (default {DEFAULT_OUT}; publish with {RESULTS_DIR.name})")
    p.add_argument("--workers", type=int, default=None,
                   help="parallel seeds (default: the core count)")
    p.add_argument("--backend", choices=BACKENDS, default="process")
    p.add_argument("--resume", action="store_true",
                   help="reuse seeds already saved under --out from the current code and config")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads for a single seed, or for seeds run one after the "
                        "other in this process (--workers 1, --backend serial); default 1: "
                        "small models are fastest single-threaded")
    p.add_argument("--set", action="append", type=parse_override, metavar="KEY=VALUE",
                   help="override one config value (repeatable), e.g. --set steps=100")
    p.set_defaults(run=cmd_run)

    p = sub.add_parser("run-all", help="every experiment's config, with several seeds: the "
                                       "GPU path in one command")
    p.add_argument("--config", default="full")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda[:k]")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"output folder (default {DEFAULT_OUT}; publish with {RESULTS_DIR})")
    p.add_argument("--workers", type=int, default=1,
                   help="parallel seeds per experiment (default 1: one GPU)")
    p.add_argument("--backend", choices=BACKENDS, default="serial")
    p.add_argument("--only", default=None, help="comma-separated experiment names")
    p.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    p.add_argument("--resume", action="store_true",
                   help="reuse seeds already saved under --out from the current code and config")
    p.add_argument("--set", action="append", type=parse_override, metavar="KEY=VALUE",
                   help="override one config value of every experiment run (with --only)")
    p.add_argument("--missing-first", action="store_true",
                   help="run the experiments with no result under --out first, then the "
                        "stale ones, then the current ones")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                   help="start no experiment after this many seconds (a clean stop between "
                        "experiments; --resume continues)")
    p.set_defaults(run=cmd_run_all)

    p = sub.add_parser("results", help="published results and whether they are stale")
    p.add_argument("--dir", type=Path, default=RESULTS_DIR)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_results)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ValueError as error:  # bad names, configs or overrides: a message, not a traceback
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
