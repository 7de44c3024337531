"""Third-party tools in virtual environments of their own: where each is, and running a module
of this project in it.

Some tools pin what the project cannot install beside its own stack (circuitkit pins
TransformerLens 3.8; auto-circuit needs TransformerLens 2.x), so an experiment that runs them
runs a module of this repository with the tool's interpreter (``PYTHONPATH`` set to the
repository) and reads what it prints or writes. A tool's environment is

* ``$THEOREMS_VENV_<NAME>`` (the name upper-cased, ``-`` as ``_``: ``THEOREMS_VENV_AUTO_CIRCUIT``)
  when set, else
* ``$THEOREMS_VENVS/<name>`` (default ``~/.venvs/<name>``).

A missing environment is reported by :func:`missing` as one sentence naming the path looked
at, the variables that move it and the install commands, never as an import error.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def variable(name: str) -> str:
    """The environment variable that names tool ``name``'s environment."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty tool name, got {name!r}")
    return "THEOREMS_VENV_" + name.upper().replace("-", "_")


def venv(name: str) -> Path:
    """Where tool ``name``'s environment is looked for (module docstring)."""
    explicit = os.environ.get(variable(name))
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("THEOREMS_VENVS", "~/.venvs")).expanduser() / name


def python(name: str) -> Path:
    """The interpreter of tool ``name``'s environment (it may not exist: see :func:`missing`)."""
    return venv(name) / "bin" / "python"


def missing(name: str, install: str) -> str | None:
    """``None`` when tool ``name``'s interpreter exists, else why not and how to make it."""
    path = python(name)
    if path.is_file():
        return None
    return (f"no virtual environment for {name} at {venv(name)} (set {variable(name)} or "
            f"THEOREMS_VENVS; install: {install})")


@dataclass(frozen=True)
class Run:
    """A finished module run: its exit status, output, wall seconds and the CPU seconds
    (user + system) of the child processes it took."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float


def run_module(name: str, module: str, *args: str, timeout: float = 3600) -> Run:
    """``python -m module args`` in tool ``name``'s environment, from the repository, with
    the repository on ``PYTHONPATH`` and progress bars off."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1",
           "PYTHONWARNINGS": "ignore"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([str(python(name)), "-m", module, *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=timeout, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(done.returncode, done.stdout, done.stderr,
               round(time.perf_counter() - started, 1), round(cpu, 1))


def version(name: str, distributions: tuple[str, ...]) -> dict[str, str | None]:
    """The versions of ``distributions`` installed in tool ``name``'s environment (``None``
    for one that is not)."""
    code = ("import json, importlib.metadata as m\n"
            "def v(d):\n"
            "    try:\n        return m.version(d)\n"
            "    except m.PackageNotFoundError:\n        return None\n"
            f"print(json.dumps({{d: v(d) for d in {list(distributions)!r}}}))")
    import json

    done = subprocess.run([str(python(name)), "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout)


def runner_main(prog: str, methods: tuple[str, ...], run_case, argv=None) -> int:
    """The command line of a runner module that a tool's environment executes
    (``python -m empirics.third_party OUT [--size] [--batch] [--seed] [--case] [--method]``):
    ``run_case(case, size, batch, seed, out, methods)`` for each chosen case, printing the
    lines it returns."""
    from constructions.circuits import all_cases

    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("out")
    parser.add_argument("--size", default="full", choices=("smoke", "full"))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--case", action="append")
    parser.add_argument("--method", action="append", choices=methods)
    args = parser.parse_args(argv)
    for name in args.case or list(all_cases()):
        for line in run_case(all_cases()[name], args.size, args.batch, args.seed,
                             Path(args.out), tuple(args.method or methods)):
            print(line, flush=True)
    return 0
