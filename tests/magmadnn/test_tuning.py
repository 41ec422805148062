"""magmadnn.tuning: grid and random search, failing trials, the same results serially, over local processes and
(marker ``mpi``) over 2 MPI ranks."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from magmadnn import tuning

from . import _mpi_worker as worker


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "serial.npz"
    return worker.tune(out, "serial"), np.load(out)


def test_grid_covers_every_combination_sorted_by_the_objective(serial):
    result, _ = serial
    assert len(result.trials) == 8 and sorted(t.index for t in result.trials) == list(range(8))
    assert [tuning.expand_grid(worker.TUNE_GRID)[t.index] for t in result.trials] == [t.params for t in result.trials]
    ok = [t for t in result.trials if t.error is None]
    assert len(ok) == 4 and result.trials[:4] == ok  # failures last
    losses = [t.metrics["val_loss"] for t in ok]
    assert losses == sorted(losses) and all(math.isfinite(v) for v in losses)
    assert len({t.seed for t in result.trials}) == 8
    assert "val_accuracy" in result.table().splitlines()[0]


def test_failing_trials_are_reported_not_fatal(serial):
    result, _ = serial
    assert [t.params["fail"] for t in result.failed] == [True] * 4
    assert all("RuntimeError: this configuration fails on purpose" in t.error for t in result.failed)
    assert "failed: RuntimeError" in result.table()


def test_best_weights_reproduce_the_best_validation_loss(serial):
    result, _ = serial
    best = result.best
    model = worker.tune_build(best.params, best.seed)
    model.set_weights(result.best_weights)
    _, _, x_val, y_val = worker.problem(24)
    assert model.evaluate(x_val, y_val, return_dict=True)["loss"] == pytest.approx(best.metrics["val_loss"], rel=1e-12)


def test_processes_give_the_serial_results(serial, tmp_path):
    _, want = serial
    worker.tune(tmp_path / "procs.npz", "processes", workers=2)
    got = np.load(tmp_path / "procs.npz")
    for key in want.files:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.mpi
def test_two_mpi_ranks_give_the_serial_results(serial, tmp_path):
    _, want = serial
    out = tmp_path / "mpi.npz"
    cmd = [worker.mpiexec(), "-n", "2", sys.executable, worker.__file__, "tune", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    got = np.load(out)
    for key in want.files:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_random_search_draws_from_the_seed_within_bounds():
    x, y, x_val, y_val = worker.problem(16)
    space = {"units": tuning.randint(3, 5), "lr": tuning.loguniform(1e-3, 1e-1), "fail": [False]}

    def run(seed):
        return tuning.random_search(worker.tune_build, space, ((x, y), (x_val, y_val)), 5, seed=seed,
                                    fit_kwargs={"batch_size": 8, "epochs": 1}, parallel="serial", keep_weights=False)

    first, again, other = run(1), run(1), run(2)
    params = sorted((t.index, tuple(t.params.items())) for t in first.trials)
    assert params == sorted((t.index, tuple(t.params.items())) for t in again.trials)
    assert params != sorted((t.index, tuple(t.params.items())) for t in other.trials)
    for t in first.trials:
        assert 3 <= t.params["units"] <= 5 and 1e-3 <= t.params["lr"] <= 1e-1
    assert first.best_weights is None


@pytest.mark.parametrize("call, match", [
    (lambda d: tuning.grid_search(worker.tune_build, {}, d), "non-empty dict"),
    (lambda d: tuning.grid_search(worker.tune_build, {"units": []}, d), r"param_grid\['units'\]"),
    (lambda d: tuning.grid_search(worker.tune_build, {"units": [4]}, d, mode="best"), "mode"),
    (lambda d: tuning.grid_search(worker.tune_build, {"units": [4]}, d, parallel="threads"), "parallel"),
    (lambda d: tuning.random_search(worker.tune_build, {"units": [4]}, d, 0), "n_trials"),
    (lambda d: tuning.random_search(worker.tune_build, {"units": 4}, d, 1), "choices or a distribution"),
    (lambda d: tuning.grid_search(worker.tune_build, {"units": [4], "lr": [0.1]}, d, objective="val_auc",
                                  parallel="serial"), "val_auc"),
])
def test_bad_arguments_are_named(call, match):
    x, y, x_val, y_val = worker.problem(8)
    with pytest.raises((ValueError, TypeError), match=match):
        call(((x, y), (x_val, y_val)))


def test_grid_search_example_prints_the_table(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "grid_search.py"
    spec = importlib.util.spec_from_file_location("example_grid_search", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--epochs", "1", "--workers", "1", "--max-steps", "4", "--batch-size", "16"])
    out = capsys.readouterr().out
    assert len(result.trials) == 8 and not result.failed
    assert out.splitlines()[0].startswith("# | params") and "best: " in out
