"""Tests of the empirics engine: trainer, experiment interface, CLI, sweeps, comparisons."""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import re
import sys

import pytest
import torch
from torch import nn

from empirics import compare
from empirics.__main__ import main as empirics_main
from empirics.experiment import (
    CONFIG_NAMES,
    EXPERIMENTS,
    PUBLISHED_CONFIGS,
    Experiment,
    Result,
    is_stale,
    load_all,
    load_result,
    published,
    reuse_or_run,
    run_seeds,
)
from empirics.sweep import aggregate, errorbar_figure, in_worker, summary, sweep
from empirics.training import (
    TrainConfig,
    TrainResult,
    held_out_batch,
    learning_rate_factor,
    pick_device,
    to_device,
    train,
)
from theorems.numerics import gamma

# --- a least-squares problem whose gradient descent is known in closed form ----------------

N_ROWS, N_COLS = 32, 4


def regression_data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1234)
    X = torch.randn(N_ROWS, N_COLS, generator=generator, dtype=torch.float64)
    y = X @ torch.arange(1.0, N_COLS + 1, dtype=torch.float64) + 0.1 * torch.randn(
        N_ROWS, generator=generator, dtype=torch.float64)
    return X, y


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(N_COLS, dtype=torch.float64))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X @ self.w


def squared_loss(model: nn.Module, batch) -> torch.Tensor:
    X, y = batch
    return 0.5 * (model(X) - y).pow(2).mean()


def fixed_batch(step: int, generator: torch.Generator):
    return regression_data()


def sgd_config(**overrides) -> TrainConfig:
    values = {"steps": 200, "lr": 0.1, "optimizer": "sgd", "dtype": "float64",
              "progress": False, "eval_every": 50}
    return TrainConfig(**(values | overrides))


# --- the trainer ---------------------------------------------------------------------------

def test_sgd_in_float64_matches_a_bare_loop_bit_for_bit():
    model = Linear()
    train(model, squared_loss, fixed_batch, sgd_config(), device="cpu")
    reference = Linear()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(200):
        loss = squared_loss(reference, regression_data())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert torch.equal(model.w, reference.w)


def test_sgd_converges_to_least_squares_within_the_derived_bound():
    X, y = regression_data()
    model = Linear()
    steps, lr = 400, 0.1
    train(model, squared_loss, fixed_batch, sgd_config(steps=steps, lr=lr), device="cpu")
    w_star = torch.linalg.lstsq(X, y, driver="gelsd").solution
    H = X.T @ X / N_ROWS  # Hessian of the loss
    eigenvalues = torch.linalg.eigvalsh(H)
    contraction = float((1 - lr * eigenvalues).abs().max())
    assert contraction < 1
    # GD error contracts by `contraction` per step from |w0 - w*| = |w*|; each step also adds
    # rounding of at most gamma(N_ROWS + N_COLS) relative to |w*| (the matrix-vector products),
    # summed geometrically over the steps.
    bound = (contraction ** steps * float(w_star.norm())
             + gamma(N_ROWS + N_COLS) * float(w_star.norm()) / (1 - contraction))
    assert float((model.w.detach() - w_star).norm()) <= bound


def test_same_seed_gives_the_same_run_and_another_seed_does_not():
    def noisy(step, generator):
        X, y = regression_data()
        return X, y + torch.randn(N_ROWS, generator=generator, dtype=torch.float64)

    def run(seed):
        model = Linear()
        result = train(model, squared_loss, noisy, sgd_config(steps=60, seed=seed), device="cpu")
        return model.w.detach().clone(), result.history

    (w0, h0), (w0_again, h0_again), (w1, _) = run(0), run(0), run(1)
    assert torch.equal(w0, w0_again) and h0 == h0_again
    assert not torch.equal(w0, w1)


def test_early_stop_on_an_evaluation_metric_and_the_history_record(tmp_path):
    X, y = regression_data()

    def evaluate(model):
        return {"residual": float((model(X) - y).pow(2).mean())}

    config = sgd_config(steps=1000, eval_every=10, target=0.02, target_metric="residual",
                        eval_at_start=True)
    result = train(Linear(), squared_loss, fixed_batch, config, evaluate=evaluate,
                   device="cpu")
    assert result.stopped_early and not result.diverged
    assert result.steps < 1000 and result.steps % 10 == 0
    assert result.history[0]["step"] == 0 and math.isnan(result.history[0]["loss"])
    assert result.final["residual"] <= 0.02 < result.history[-2]["residual"]
    assert {"step", "lr", "loss", "residual"} <= set(result.final)
    saved = json.loads(result.save(tmp_path / "history.json").read_text())
    assert saved["steps"] == result.steps and saved["history"][0]["loss"] == "nan"


def test_a_non_finite_loss_stops_the_run_as_diverged():
    def exploding(model, batch):
        return squared_loss(model, batch) * float("inf")

    result = train(Linear(), exploding, fixed_batch, sgd_config(steps=100, eval_every=5),
                   device="cpu")
    assert result.diverged and result.steps == 5


def test_gradient_clipping_bounds_the_update():
    model = Linear()
    lr, clip = 0.1, 1e-3
    train(model, squared_loss, fixed_batch, sgd_config(steps=1, lr=lr, grad_clip=clip),
          device="cpu")
    # one SGD step from 0 moves by lr * clipped gradient, whose norm is at most clip
    # (clip_grad_norm_ scales by clip / (norm + 1e-6), so the bound holds without slack)
    assert 0 < float(model.w.detach().norm()) <= lr * clip


@pytest.mark.parametrize("schedule, step, expected", [
    ("constant", 500, 1.0), ("cosine", 10, 1.0), ("cosine", 55, 0.5), ("cosine", 100, 0.0),
    ("linear", 55, 0.5), ("linear", 100, 0.0), ("step", 250, 0.3 ** 2), ("cosine", 4, 0.5),
])
def test_learning_rate_schedules(schedule, step, expected):
    # a handful of float64 operations on numbers <= 1: 1e-12 is thousands of ulps of slack
    config = TrainConfig(steps=100, lr=1.0, schedule=schedule, warmup=10, step_every=100,
                         progress=False)
    assert learning_rate_factor(step, config) == pytest.approx(expected, abs=1e-12)


def test_the_history_records_the_scheduled_rate():
    config = sgd_config(steps=100, eval_every=50, schedule="linear")
    result = train(Linear(), squared_loss, fixed_batch, config, device="cpu")
    assert [h["lr"] for h in result.history] == pytest.approx([0.05, 0.0], abs=1e-12)


def test_held_out_batch_is_fixed_and_not_a_training_batch():
    def sample(step, generator):
        return torch.randn(3, generator=generator)

    first, again = held_out_batch(sample, 7), held_out_batch(sample, 7)
    training = sample(0, torch.Generator().manual_seed(7))
    assert torch.equal(first, again) and not torch.equal(first, training)


def test_to_device_casts_floats_and_keeps_integers():
    batch = {"x": [torch.zeros(2, dtype=torch.float32)], "tokens": (torch.arange(3),)}
    moved = to_device(batch, torch.device("cpu"), torch.float64)
    assert moved["x"][0].dtype == torch.float64 and moved["tokens"][0].dtype == torch.int64
    assert isinstance(moved["tokens"], tuple) and isinstance(moved["x"], list)


@pytest.mark.parametrize("bad, match", [
    ({"steps": 0}, "steps"), ({"steps": 1.5}, "steps"), ({"lr": -1.0}, "lr"),
    ({"lr": float("nan")}, "lr"), ({"optimizer": "lion"}, "optimizer"),
    ({"schedule": "cyclic"}, "schedule"), ({"dtype": "float16"}, "dtype"),
    ({"eval_every": 0}, "eval_every"), ({"grad_clip": 0.0}, "grad_clip"),
    ({"warmup": -1}, "warmup"), ({"seed": -3}, "seed"), ({"momentum": 1.0}, "momentum"),
    ({"autocast_bf16": True, "dtype": "float64"}, "autocast_bf16"),
])
def test_train_config_rejects_bad_values(bad, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**({"steps": 10, "lr": 0.1} | bad))


def test_train_rejects_a_model_without_trainable_parameters_and_a_bad_config():
    frozen = Linear().requires_grad_(False)
    with pytest.raises(ValueError, match="requires_grad"):
        train(frozen, squared_loss, fixed_batch, sgd_config(), device="cpu")
    with pytest.raises(TypeError, match="config"):
        train(Linear(), squared_loss, fixed_batch, {"steps": 1}, device="cpu")


def test_pick_device():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device("auto").type == expected
    assert pick_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="device"):
        pick_device("tpu")
    with pytest.raises(TypeError, match="device"):
        pick_device(0)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            pick_device("cuda")


# --- the experiment interface ----------------------------------------------------------------

def _toy_run(config: dict, device: torch.device, seed: int) -> Result:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    generator = torch.Generator().manual_seed(seed)
    value = config["scale"] * float(torch.rand((), generator=generator, dtype=torch.float64))
    result = Result("toy-engine-test", config, seed, str(device))
    result.metrics = {"value": value, "nan_metric": float("nan")}
    result.table("values", ["seed", "value"], [[seed, value]])
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, value])
    result.figures["line"] = fig
    return result


@pytest.fixture
def toy():
    experiment = Experiment(name="toy-engine-test", description="a toy for the engine tests",
                            configs={"smoke": {"scale": 1.0}, "full": {"scale": 10.0}},
                            run=_toy_run)
    yield experiment
    EXPERIMENTS.pop(experiment.name, None)


def test_the_record_names_missing_interop_packages_as_none(toy, monkeypatch):
    real = importlib.metadata.version

    def without_nnsight(name):
        if name == "nnsight":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)
    monkeypatch.setattr(importlib.metadata, "version", without_nnsight)
    record = toy("smoke", device="cpu", seed=0).record
    assert "nnsight" in record and record["nnsight"] is None


def test_an_experiment_run_carries_its_record_and_saves_json_and_png(toy, tmp_path):
    result = toy("smoke", device="cpu", seed=3)
    record = result.record
    assert {"device", "torch", "python", "git_sha", "date", "wall_time",
            "code_fingerprint"} <= set(record)
    for key, distribution in {"transformer_lens": "transformer-lens",
                              "nnsight": "nnsight"}.items():  # None where not installed
        try:
            assert record[key] == importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            assert record[key] is None
    assert result.config_name == "smoke" and result.seed == 3
    path = result.save(tmp_path)
    assert path == tmp_path / "toy-engine-test" / "smoke-seed3.json"
    data = load_result(path)
    assert data["metrics"]["nan_metric"] == "nan"
    assert (path.parent / data["figures"]["line"]).stat().st_size > 0
    assert not is_stale(data)
    assert is_stale(data | {"record": {**record, "code_fingerprint": "0" * 16}})
    assert is_stale(data | {"experiment": "no-such-experiment"})
    assert [e["stale"] for e in published(tmp_path)] == []  # per-seed files are not listed
    result0 = toy("full", device="cpu", seed=0)
    result0.save(tmp_path)
    (entry,) = published(tmp_path)
    assert entry["config"] == "full" and entry["stale"] is False


def test_experiment_configs_and_overrides_are_validated(toy):
    assert toy("smoke", device="cpu", scale=2.0).config["scale"] == 2.0
    with pytest.raises(ValueError, match="unknown config keys"):
        toy("smoke", device="cpu", width=3)
    with pytest.raises(ValueError, match="config must be one of"):
        toy("medium", device="cpu")
    with pytest.raises(ValueError, match="seed"):
        toy("smoke", device="cpu", seed=-1)
    with pytest.raises(ValueError, match="lacks configs"):
        Experiment(name="toy-no-full", description="", configs={"smoke": {}}, run=_toy_run)
    with pytest.raises(ValueError, match="duplicate"):
        Experiment(name="toy-engine-test", description="", configs=toy.configs, run=_toy_run)


def test_run_seeds_aggregates_mean_and_spread(toy, tmp_path):
    data = run_seeds(toy, "smoke", seeds=3, device="cpu", out=tmp_path, backend="serial",
                     progress=False)
    values = [toy("smoke", device="cpu", seed=s).metrics["value"] for s in range(3)]
    stats = data["spread"]["value"]
    assert stats["n"] == 3
    # the same three numbers summed in another order (fsum vs float): gamma(3)-level rounding
    assert data["metrics"]["value"] == pytest.approx(sum(values) / 3, rel=1e-12)
    spread = torch.tensor(values, dtype=torch.float64).std().item()
    assert stats["std"] == pytest.approx(spread, rel=1e-12)
    assert "nan_metric" not in data["metrics"]  # non-finite per-seed metrics are not averaged
    directory = tmp_path / "toy-engine-test"
    assert sorted(p.name for p in directory.glob("*.json")) == [
        "smoke-seed0.json", "smoke-seed1.json", "smoke-seed2.json", "smoke.json"]
    assert (directory / "smoke-seeds.png").stat().st_size > 0
    assert json.loads((directory / "smoke.json").read_text())["seeds"] == [0, 1, 2]



def test_a_resumed_sweep_reuses_only_current_seeds(toy, tmp_path):
    """An interrupted sweep continues: saved seeds of the same code, config and device are read
    back (a marked seed file shows it was not rerun); a changed config or fingerprint reruns."""
    run_seeds(toy, "smoke", seeds=2, device="cpu", out=tmp_path, backend="serial",
              progress=False)
    seed1 = tmp_path / "toy-engine-test" / "smoke-seed1.json"
    marked = json.loads(seed1.read_text())
    marked["metrics"]["value"] = 123.0
    seed1.write_text(json.dumps(marked))
    data = run_seeds(toy, "smoke", seeds=3, device="cpu", out=tmp_path, backend="serial",
                     progress=False, resume=True)
    assert data["record"]["resumed"] == [0, 1] and data["seeds"] == [0, 1, 2]
    assert [d["seed"] for d in data["per_seed"]] == [0, 1, 2]
    assert data["per_seed"][1]["metrics"]["value"] == 123.0
    assert data["record"]["wall_time"] >= marked["record"]["wall_time"]  # counts resumed seeds
    rerun = run_seeds(toy, "smoke", seeds=3, device="cpu", out=tmp_path, backend="serial",
                      progress=False, resume=True, scale=2.0)   # another config: all rerun
    assert rerun["record"]["resumed"] == []
    marked["record"]["code_fingerprint"] = "0" * 16          # older code: rerun
    marked["config"] = {"scale": 2.0}
    seed1.write_text(json.dumps(marked))
    again = run_seeds(toy, "smoke", seeds=2, device="cpu", out=tmp_path, backend="serial",
                      progress=False, resume=True, scale=2.0)
    assert again["record"]["resumed"] == [0]
    with pytest.raises(ValueError, match="resume needs out"):
        run_seeds(toy, "smoke", seeds=2, device="cpu", resume=True, progress=False)

def _toy_cpu_run(config: dict, device: torch.device, seed: int) -> Result:
    result = _toy_run(config, device, seed)
    result.experiment = "toy-cpu-test"
    return result


@pytest.fixture
def toy_cpu(toy):
    """The toy with a ``cpu`` config between its smoke and full ones."""
    experiment = Experiment(name="toy-cpu-test", description="", run=_toy_cpu_run,
                            configs={**toy.configs, "cpu": {"scale": 5.0}})
    yield experiment
    EXPERIMENTS.pop(experiment.name, None)


def test_a_published_seed_stands_for_a_run_of_the_same_code_and_config(toy, tmp_path,
                                                                        monkeypatch):
    """reuse_or_run reads a published seed back only for the same fingerprint, config values,
    device and seed; anything else runs afresh, and a reused result holds the run's metrics,
    tables and figure files."""
    run_seeds(toy, "smoke", seeds=2, device="cpu", out=tmp_path, backend="serial",
              progress=False)
    fresh = toy("smoke", device="cpu", seed=1)
    reused = reuse_or_run(toy, "smoke", seed=1, directory=tmp_path)
    assert reused.record["reused"].endswith("smoke-seed1.json")
    assert reused.metrics["value"] == fresh.metrics["value"]  # JSON keeps a float exactly
    assert math.isnan(reused.metrics["nan_metric"]) and reused.tables == fresh.tables
    assert reused.figures["line"].is_file()
    for other in (reuse_or_run(toy, "smoke", seed=1, directory=tmp_path, scale=2.0),
                  reuse_or_run(toy, "smoke", seed=2, directory=tmp_path)):
        assert "reused" not in other.record
    monkeypatch.setattr(Experiment, "fingerprint", lambda self: "changed")
    assert "reused" not in reuse_or_run(toy, "smoke", seed=1, directory=tmp_path).record


def test_a_cpu_config_is_optional_and_runs_like_any_other(toy, toy_cpu, tmp_path):
    """``cpu`` is a third config an experiment may define, between smoke and full; one that
    does not define it still registers, and asking it for ``cpu`` is a bad config name."""
    assert "cpu" in PUBLISHED_CONFIGS and "cpu" not in CONFIG_NAMES
    with pytest.raises(ValueError, match="config must be one of"):
        toy("cpu", device="cpu")
    result = toy_cpu("cpu", device="cpu", seed=0)
    assert result.config_name == "cpu" and result.config["scale"] == 5.0
    assert result.save(tmp_path) == tmp_path / "toy-cpu-test" / "cpu.json"


def test_a_published_cpu_result_counts_as_present_and_full_is_preferred(toy, toy_cpu, tmp_path):
    """The census counts an experiment at its largest published config, full else cpu: a
    current cpu result makes it present (at cpu size), a full one is preferred over it; a
    smoke result, or none, leaves it missing."""
    from empirics.census import census, largest_config, summary_line

    assert largest_config(["smoke", "cpu", "full"]) == "full"
    assert largest_config(["cpu", "smoke"]) == "cpu" and largest_config(["smoke"]) is None
    toy_cpu("smoke", device="cpu").save(tmp_path)
    counts = census(tmp_path)
    assert {"toy-cpu-test", toy.name} <= set(counts["missing"])  # smoke is not published
    assert counts["current"] == [] and counts["counted"] == {}
    toy_cpu("cpu", device="cpu").save(tmp_path)
    counts = census(tmp_path)
    assert counts["current"] == ["toy-cpu-test"] and counts["counted"] == {"toy-cpu-test": "cpu"}
    assert "toy-cpu-test" not in counts["missing"] and toy.name in counts["missing"]
    assert "1 current, 0 stale" in summary_line(counts) and "1 at cpu size" in summary_line(
        counts)
    toy_cpu("full", device="cpu").save(tmp_path)
    assert census(tmp_path)["counted"] == {"toy-cpu-test": "full"}
    assert "0 at cpu size" in summary_line(census(tmp_path))
    assert census(tmp_path, config="cpu")["counted"] == {"toy-cpu-test": "cpu"}


def test_cli_results_names_the_config_each_experiment_is_counted_at(toy, toy_cpu, tmp_path,
                                                                      capsys):
    toy("full", device="cpu").save(tmp_path)
    toy_cpu("cpu", device="cpu").save(tmp_path)
    assert empirics_main(["results", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"toy-cpu-test +cpu +current", out)
    assert re.search(r"toy-engine-test +full +current", out)
    assert "at cpu size only (no full result): toy-cpu-test\n" in out
    assert re.search(r"missing: .*ln-majority", out) and "toy-cpu-test," not in out


def test_seeds_run_one_after_the_other_use_the_threads_asked_for(toy, tmp_path, capsys):
    """``--workers 1`` runs the seeds in this process: with ``--threads`` torch threads (default
    1), not every core's, as a single seed does (pool workers set their own)."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert empirics_main(["run", toy.name, "--seeds", "2", "--workers", "1", "--device",
                              "cpu", "--out", str(tmp_path)]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert "2 seeds on cpu" in capsys.readouterr().out


def test_every_registered_experiment_has_smoke_and_full_configs():
    experiments = load_all()
    assert {"ln-majority", "prenorm-gradients"} <= set(experiments)
    for experiment in experiments.values():
        assert {"smoke", "full"} <= set(experiment.configs)
        assert len(experiment.fingerprint()) == 16


# --- the command line --------------------------------------------------------------------------

def test_cli_list_and_results(capsys, tmp_path):
    assert empirics_main(["list"]) == 0
    out = capsys.readouterr().out
    assert "ln-majority" in out and "prenorm-gradients" in out
    assert empirics_main(["results", "--dir", str(tmp_path)]) == 0
    assert "no published results" in capsys.readouterr().out


def test_cli_run_writes_json_and_png(tmp_path, capsys):
    code = empirics_main(["run", "ln-majority", "--device", "cpu", "--out", str(tmp_path),
                          "--set", "steps=4", "--set", "eval_every=2", "--set", "batch=8",
                          "--set", "eval_size=16", "--set", 'variants=["layernorm"]'])
    assert code == 0
    data = load_result(tmp_path / "ln-majority" / "smoke.json")
    assert data["config"]["steps"] == 4 and data["device"] == "cpu"
    assert all((tmp_path / "ln-majority" / name).stat().st_size > 0
               for name in data["figures"].values())
    assert "wrote" in capsys.readouterr().out


@pytest.mark.integration
def test_cli_two_seed_sweep_through_the_process_pool(tmp_path, capsys):
    code = empirics_main(["run", "prenorm-gradients", "--seeds", "2", "--workers", "2",
                          "--device", "cpu", "--out", str(tmp_path), "--set", "d=8",
                          "--set", "trials=4", "--set", "chunk=4", "--set", "depths=[1,2]"])
    assert code == 0
    directory = tmp_path / "prenorm-gradients"
    data = json.loads((directory / "smoke.json").read_text())
    assert data["record"]["backend"] == "process" and data["spread"]["pre/slope"]["n"] == 2
    assert {"smoke-seeds.png", "smoke-pre-seeds.png", "smoke-post-seeds.png"} <= {
        p.name for p in directory.glob("*.png")}


def test_cli_reports_bad_input_without_a_traceback(capsys):
    assert empirics_main(["run", "no-such-experiment"]) == 2
    assert "unknown experiment" in capsys.readouterr().err
    assert empirics_main(["run", "ln-majority", "--set", "nonsense=1"]) == 2
    with pytest.raises(SystemExit):
        empirics_main(["run", "ln-majority", "--set", "no-equals-sign"])


# --- sweeps ------------------------------------------------------------------------------------

def probe(point: dict) -> dict:
    """A sweep point that reports where and how it ran."""
    return {"index": point["index"], "square": point["index"] ** 2, "pid": os.getpid(),
            "threads": torch.get_num_threads(), "in_worker": in_worker(),
            "nested": sweep(abs, [-1, 2], progress=False)}


def test_process_sweep_keeps_order_and_sets_threads_per_worker():
    points = [{"index": i} for i in range(6)]
    results = sweep(probe, points, workers=2, backend="process", progress=False)
    assert [r["square"] for r in results] == [i * i for i in range(6)]
    assert all(r["threads"] == 1 and r["in_worker"] for r in results)
    assert all(r["nested"] == [1, 2] for r in results)  # a nested sweep runs serially
    assert os.getpid() not in {r["pid"] for r in results}


def test_serial_sweep_and_bad_arguments():
    assert [r["square"] for r in sweep(probe, [{"index": 3}], backend="serial",
                                       progress=False)] == [9]
    with pytest.raises(ValueError, match="backend"):
        sweep(probe, [], backend="dask")
    with pytest.raises(ValueError, match="workers"):
        sweep(probe, [], workers=0)
    with pytest.raises(TypeError, match="fn"):
        sweep(None, [])


@pytest.mark.integration
def test_ray_backend_runs_a_tiny_sweep_on_a_local_ray():
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install "
                                            "'transformer-theorems[ray]' to run this test")
    try:
        # one CPU: Ray's start-up (its GCS, raylet and a worker importing torch) dominates
        results = sweep(probe, [{"index": i} for i in range(3)], workers=1, backend="ray",
                        progress=False)
    finally:
        ray.shutdown()
    assert [r["square"] for r in results] == [0, 1, 4]
    assert all(r["threads"] == 1 and r["in_worker"] for r in results)


def test_summary_and_aggregate_over_seeds():
    stats = summary([1.0, 2.0, 3.0])
    assert stats == {"mean": 2.0, "std": 1.0, "sem": pytest.approx(1 / math.sqrt(3)), "n": 3}
    assert math.isnan(summary([5.0])["std"])
    with pytest.raises(ValueError):
        summary([])
    rows = [{"L": 1, "seed": s, "g": 1.0 + s} for s in range(3)] + [
        {"L": 2, "seed": s, "g": 2.0 * s} for s in range(3)]
    groups = aggregate(rows, by=("L",), metrics=("g",))
    assert [g["L"] for g in groups] == [1, 2]
    assert groups[0]["g"]["mean"] == 2.0 and groups[1]["g"]["std"] == 2.0
    assert set(aggregate(rows, by=("L",))[0]) == {"L", "g", "seed"}
    fig = errorbar_figure(groups, x="L", metrics=("g",), logx=True)
    assert len(fig.axes[0].lines) >= 1


# --- comparisons -------------------------------------------------------------------------------

def test_effective_maps_are_gauge_invariant():
    generator = torch.Generator().manual_seed(0)
    W_Q, W_K = (torch.randn(5, 3, generator=generator, dtype=torch.float64) for _ in range(2))
    A = torch.randn(3, 3, generator=generator, dtype=torch.float64) + 3 * torch.eye(3,
                                                                                 dtype=torch.float64)
    original = compare.effective_map(W_Q, W_K.T)
    gauged = compare.effective_map(W_Q @ A, torch.linalg.inv(A) @ W_K.T)
    # two 3-term products and a 3x3 inverse: a few gamma(3)'s relative to the entry sizes
    tolerance = 50 * gamma(3) * float(torch.linalg.cond(A)) * float(original.abs().max())
    assert compare.relative_distance(gauged, original) <= tolerance
    assert compare.cosine(gauged, original) == pytest.approx(1.0, abs=tolerance)
    assert compare.cosine(original, -original) == pytest.approx(-1.0)


def test_line_angle_ignores_sign_and_measures_degrees():
    ones = torch.ones(4, dtype=torch.float64)
    u = torch.stack([ones, -2 * ones, torch.tensor([1.0, -1.0, 0.0, 0.0], dtype=torch.float64),
                     torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)])
    angles = compare.line_angle(u, ones)
    # exact: the dot products (4, -8, 0, 1) and norms (2, 4, sqrt 2, 1; |ones| = 2) are
    # small integers or a square root, and 4/(2*2) = |-8/(4*2)| = 1, 0/(..) = 0, 1/(1*2) = 1/2
    # are exact; acos(1) = 0 exactly, so the first two angles are exactly 0
    assert angles[:2].tolist() == [0.0, 0.0]
    # acos(0) and acos(1/2) within 1 ulp (2u relative, assumed) of pi/2 and pi/3, times the
    # rounded 180/pi and rounded once more: gamma_4 relative of 90 and 60
    assert abs(float(angles[2]) - 90.0) <= gamma(4) * 90.0
    assert abs(float(angles[3]) - 60.0) <= gamma(4) * 60.0  # cos = 1/2
    assert math.isnan(float(compare.line_angle(torch.zeros(4), ones)))


def test_attention_and_function_comparisons():
    uniform = torch.full((2, 3, 3), 1 / 3, dtype=torch.float64)
    onehot = torch.eye(3, dtype=torch.float64).expand(2, 3, 3)
    assert compare.pattern_distance(uniform, uniform) == 0.0
    assert compare.pattern_distance(onehot, uniform) == pytest.approx(2 / 3)
    assert compare.attention_mass(onehot, torch.tensor([[0, 1, 2], [0, 1, -1]])) == 1.0
    assert math.isnan(compare.attention_mass(onehot, torch.full((2, 3), -1)))
    with pytest.raises(ValueError, match="same shape"):
        compare.pattern_distance(uniform, uniform[0])
    x = torch.randn(10, 2, dtype=torch.float64)
    assert compare.function_distance(lambda v: 2 * v, lambda v: 2 * v, x) == 0.0
    assert compare.function_distance(lambda v: 3 * v, lambda v: 2 * v, x) == pytest.approx(0.5)
    logits = torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert compare.recall_accuracy(logits, torch.tensor([1, 1, -1])) == 0.5


def test_train_result_series_and_rates():
    result = TrainResult(history=[{"step": 10, "loss": 1.0}, {"step": 20, "loss": 0.5,
                                                               "acc": 0.9}],
                         steps=20, wall_time=2.0)
    assert result.series("loss") == ([10, 20], [1.0, 0.5])
    assert result.series("acc") == ([20], [0.9]) and result.steps_per_second == 10.0
    assert math.isnan(TrainResult().steps_per_second)


def test_the_benchmark_runs_both_loops_on_identical_work():
    from empirics.bench import benchmark

    report = benchmark(steps=3, repeats=1, device="cpu", progress=False, warmup=1)
    # identical arithmetic: a speed ratio between the two loops compares like with like
    assert report["identical_weights"]
    assert report["ratio"] > 0 and math.isfinite(report["ratio"])


def test_run_all_plans_every_experiment_and_runs_at_smoke_size(tmp_path, capsys):
    from empirics.census import census, summary_line

    assert empirics_main(["run-all", "--config", "full", "--device", "cuda", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert all(f"  {name}\n" in plan for name in load_all())  # the GPU path covers them all
    assert empirics_main(["run-all", "--config", "smoke", "--device", "cpu", "--seeds", "2",
                          "--only", "prenorm-gradients", "--out", str(tmp_path),
                          "--set", "d=8", "--set", "trials=4", "--set", "chunk=4",
                          "--set", "depths=[1,2]"]) == 0
    data = json.loads((tmp_path / "prenorm-gradients" / "smoke.json").read_text())
    assert data["spread"]["pre/slope"]["n"] == 2
    summary = json.loads((tmp_path / "run-all-smoke.json").read_text())
    assert [s["experiment"] for s in summary] == ["prenorm-gradients"]
    counts = census(tmp_path, config="smoke")
    assert counts["current"] == ["prenorm-gradients"] and "prenorm-gradients" not in counts[
        "missing"] and len(counts["missing"]) == counts["experiments"] - 1
    assert "1 current, 0 stale" in summary_line(counts)
    # the GPU script's order and stop: what has no result first, and nothing after the deadline
    only = ["--config", "smoke", "--out", str(tmp_path), "--only", "prenorm-gradients,ln-majority"]
    capsys.readouterr()
    assert empirics_main(["run-all", *only, "--missing-first", "--dry-run"]) == 0
    assert capsys.readouterr().out.endswith("  ln-majority\n  prenorm-gradients\n")
    assert empirics_main(["run-all", *only, "--deadline", "0"]) == 0
    assert "deadline of 0 s reached; not started: prenorm-gradients, ln-majority" in (
        capsys.readouterr().out)
    left = json.loads((tmp_path / "run-all-smoke.json").read_text())
    assert [s["seconds"] for s in left] == [None, None]


def test_figure_files_have_plain_names():
    """A figure named after a metric key (spaces, slashes) is saved under a name that a wheel
    listing, a shell and a figure directive read as one path; no published figure has another."""
    from empirics.experiment import RESULTS_DIR
    from empirics.experiment.result import figure_file

    assert figure_file("cpu", "scaling-csft - sft/d=16/val accuracy") == (
        "cpu-scaling-csft_-_sft_d=16_val_accuracy.png")
    assert figure_file("full-seed0", "loss") == "full-seed0-loss.png"
    odd = [p.name for p in RESULTS_DIR.glob("*/*.png") if not re.fullmatch(r"[\w.=+-]+", p.name)]
    assert not odd, odd


def test_metric_keys_are_spelled_in_one_place():
    """The writer and the reader of a metric build its key with the same function, so a float
    and an int name the same metric and a missing one is reported with the keys there are."""
    from empirics.experiment import Result, metric_key

    assert metric_key("factorized", ("wd", 0.0), "margin") == "factorized/wd=0/margin"
    assert metric_key(("alpha", 1.0)) == metric_key(("alpha", 1)) == "alpha=1"
    assert metric_key(("n", 1_000_000)) == "n=1000000"          # not :g's 1e+06
    assert metric_key(metric_key("sgd", "post"), "slope") == "sgd/post/slope"
    result = Result("toy", {}, 0, "cpu", metrics={"alpha=0.3/delay": 2.0})
    assert result.metric(("alpha", 0.3), "delay") == 2.0
    with pytest.raises(KeyError, match=r"alpha=0\.3/delay"):
        result.metric(("alpha", 0.3), "loss")
    for bad in ((), ("",), (True,), (None,)):
        with pytest.raises((TypeError, ValueError), match="metric_key"):
            metric_key(*bad)


def test_a_fingerprint_ignores_docstrings_and_comments_but_not_code():
    """Documenting an experiment (its measured times) leaves its published results current."""
    from empirics.experiment import code_without_docs

    base = 'def run(x):\n    """Doc."""\n    return x + 1\n'
    documented = ('"""Module doc: full config 40 s per seed on a CPU."""\n'
                  'def run(x):  # why\n    """Other doc."""\n\n    return x + 1\n')
    assert code_without_docs(base) == code_without_docs(documented)
    assert code_without_docs(base) != code_without_docs(base.replace("x + 1", "x + 2"))
    # a string that is not the first statement is code, not a docstring
    assert code_without_docs(base) != code_without_docs(base.replace("return", "'s'\n    return"))


def test_a_fingerprint_covers_every_module_of_a_named_package(tmp_path, monkeypatch):
    """A package in ``code`` is hashed with its modules: a construction re-exported by an
    ``__init__`` that does not change still makes the results stale when it changes."""
    for package, constant in (("fp_pkg_a", 1), ("fp_pkg_b", 2)):
        folder = tmp_path / package
        folder.mkdir()
        (folder / "__init__.py").write_text("from .solve import solve\n")
        (folder / "solve.py").write_text(f"def solve(x):\n    return x + {constant}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fingerprints = set()
    for package in ("fp_pkg_a", "fp_pkg_b"):
        experiment = Experiment(name=f"toy-{package}", description="",
                                configs={"smoke": {}, "full": {}},
                                run=_toy_run, code=(package,))
        fingerprints.add(experiment.fingerprint())
        EXPERIMENTS.pop(experiment.name, None)
        for name in (package, f"{package}.solve"):
            sys.modules.pop(name, None)
    assert len(fingerprints) == 2


def test_a_published_seed_is_read_from_beside_its_aggregate(tmp_path):
    from empirics.experiment import published_result

    folder = tmp_path / "exp"
    folder.mkdir()
    record = {"code_fingerprint": "x"}
    aggregate = {"experiment": "exp", "config_name": "full", "record": record,
                 "per_seed": [{"seed": 0}, {"seed": 1}]}
    (folder / "full.json").write_text(json.dumps(aggregate))
    seed1 = {"experiment": "exp", "config_name": "full", "record": record, "seed": 1,
             "tables": {"t": 1}}
    (folder / "full-seed1.json").write_text(json.dumps(seed1))
    assert published_result("exp", directory=tmp_path)["per_seed"]
    assert published_result("exp", seed=1, directory=tmp_path)["tables"] == {"t": 1}
    with pytest.raises(FileNotFoundError, match="seed 2"):
        published_result("exp", seed=2, directory=tmp_path)
    (folder / "full.json").write_text(json.dumps(seed1))  # a one-seed publication
    assert published_result("exp", seed=1, directory=tmp_path)["seed"] == 1
    with pytest.raises(FileNotFoundError, match="is seed 1, not 0"):
        published_result("exp", seed=0, directory=tmp_path)


def test_an_aggregate_shows_its_first_seeds_tables_and_figures(toy, tmp_path):
    """A mean over seeds cannot average a table: the aggregate carries seed 0's, labelled."""
    data = run_seeds(toy, "smoke", seeds=2, device="cpu", out=tmp_path, backend="serial",
                     progress=False)
    saved = json.loads((tmp_path / "toy-engine-test" / "smoke.json").read_text())
    first = json.loads((tmp_path / "toy-engine-test" / "smoke-seed0.json").read_text())
    assert saved["tables"] == first["tables"] == data["tables"] and saved["tables_seed"] == 0
    assert saved["figures"]["line"] == first["figures"]["line"] == "smoke-seed0-line.png"
    assert saved["figures"]["seeds"] == "smoke-seeds.png"
