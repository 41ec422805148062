"""magmadnn.distributed: sharding (property tests, no MPI), the missing-mpi4py error, and, under ``mpiexec -n 2``
(marker ``mpi``), 2 ranks with per-rank batch b against one process with batch 2b, and the fault behaviour."""

from __future__ import annotations

import builtins
import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from magmadnn import distributed

from . import _mpi_worker as worker

WORKER = Path(worker.__file__)
TIMEOUT = 120


def run_ranks(n_ranks: int, *args, expect_ok=True, env=None):
    cmd = [worker.mpiexec(), "-n", str(n_ranks), sys.executable, str(WORKER), *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    if expect_ok:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


# ------------------------------------------------------------------------------------------------ no MPI needed


@given(n=st.integers(0, 60), b=st.integers(1, 7), size=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_shards_partition_every_global_batch(n, b, size, seed):
    order = np.random.default_rng(seed).permutation(n)
    shards = [list(distributed.shard_indices(order, b, r, size)) for r in range(size)]
    steps = -(-n // (b * size))
    assert all(len(s) == steps for s in shards)  # every rank takes part in every step
    for k in range(steps):
        parts = [s[k] for s in shards]
        assert all(len(p) <= b for p in parts)
        np.testing.assert_array_equal(np.concatenate(parts), order[k * b * size:(k + 1) * b * size])


def test_sharded_batches_reshuffle_each_epoch_from_the_shared_stream():
    x, y = np.arange(10.0)[:, None], np.arange(10)
    rngs = [np.random.default_rng(5) for _ in range(2)]
    ranks = [distributed.ShardedBatches([x], y, 2, True, rngs[r], r, 2) for r in range(2)]
    epochs = [[np.concatenate([yb for _, yb in batches]) for batches in ranks] for _ in range(2)]
    for e in epochs:
        assert sorted(np.concatenate(e)) == list(range(10)) and not set(e[0]) & set(e[1])
    assert not np.array_equal(epochs[0][0], epochs[1][0])


def test_without_mpi4py_the_error_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_mpi(name, *args, **kwargs):
        if name.startswith("mpi4py"):
            raise ImportError("No module named 'mpi4py'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mpi)
    module = importlib.reload(distributed)
    try:
        assert not module.is_available() and module.rank() == 0 and module.size() == 1
        with pytest.raises(module.MPIUnavailableError, match=r"pip install magmadnn\[mpi\]"):
            module.init()
        x, y, _, _ = worker.problem(8)
        with pytest.raises(ImportError, match=r"magmadnn\[mpi\]"):
            worker.build().fit(x, y, batch_size=4, verbose=0, distributed=True)
    finally:
        monkeypatch.undo()
        importlib.reload(distributed)


# ------------------------------------------------------------------------------------------------ under mpiexec


def reference(tmp_path, n, b, epochs):
    out = tmp_path / "single.npz"
    worker.train(out, n, 2 * b, epochs, distributed=False)
    return np.load(out)


@pytest.mark.mpi
@pytest.mark.parametrize("n, b, epochs", [(24, 4, 1), (22, 4, 2), (17, 4, 2)],
                         ids=["even", "uneven-last-batch", "empty-shard-on-rank-1"])
def test_two_ranks_train_like_one_process_with_twice_the_batch(tmp_path, n, b, epochs):
    out = tmp_path / "ranks.npz"
    run_ranks(2, "train", out, n, b, epochs)
    got, want = np.load(out), reference(tmp_path, n, b, epochs)
    assert sorted(k for k in got.files if not k.startswith("stat_")) == sorted(want.files)
    assert len(got["batch_losses"]) == epochs * -(-n // (2 * b))
    for key in want.files:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)


@pytest.mark.mpi
def test_two_ranks_on_the_simulated_device_stage_through_the_host_alike(tmp_path):
    """The device backend (pymagma simulator): gradients staged through host memory, no per-batch reads."""
    out = tmp_path / "device.npz"
    run_ranks(2, "train", out, 22, 4, 2, "gpu", env={**os.environ, "PYMAGMA_SIMULATOR": "1"})
    got, want = np.load(out), reference(tmp_path, 22, 4, 2)
    for key in want.files:
        if key != "batch_losses":  # per-batch losses are in the logs on the host backend only
            np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)


@pytest.mark.mpi
def test_rank_0_writes_the_checkpoint_and_every_rank_resumes_from_it(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    out = tmp_path / "resumed.npz"
    run_ranks(2, "resume", out, folder)
    got, want = np.load(out), reference(tmp_path, 22, 4, 2)
    assert list(got["files"]) == ["ckpt.npz"] and int(got["start"]) == 1
    for key in [k for k in want.files if k.startswith("w")]:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)


@pytest.mark.mpi
def test_one_rank_without_mpiexec_trains_like_plain_fit(tmp_path):
    out = tmp_path / "one.npz"
    subprocess.run([sys.executable, str(WORKER), "train", str(out), "20", "4", "1"], check=True, timeout=TIMEOUT)
    want = tmp_path / "plain.npz"
    worker.train(want, 20, 4, 1, distributed=False)
    got, want = np.load(out), np.load(want)
    for key in want.files:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-12, atol=1e-14, err_msg=key)


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["fault", "kill"])
def test_a_failing_rank_ends_the_whole_job(tmp_path, mode):
    out = tmp_path / "reached.txt"
    done = run_ranks(2, mode, out, expect_ok=False)
    assert done.returncode != 0
    assert not out.exists()  # rank 0 never got past the collective
    if mode == "fault":
        assert "[rank 1 of 2]" in done.stderr and "RuntimeError: boom on rank 1" in done.stderr


@pytest.mark.mpi
def test_distributed_mnist_example_reports_on_rank_0_only(tmp_path):
    from .dataset_files import write_mnist_folder

    write_mnist_folder(tmp_path, n_train=40, n_test=16)
    example = Path(__file__).resolve().parents[2] / "examples" / "distributed_mnist.py"
    cmd = [worker.mpiexec(), "-n", "2", sys.executable, str(example), "--data", str(tmp_path), "--epochs", "1",
           "--batch-size", "4", "--device", "host", "--quiet"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("test accuracy") == 1 and "over 2 rank(s)" in done.stdout
    assert "batch 4 per rank (8 per step)" in done.stdout and "5 steps" in done.stdout


@pytest.mark.mpi
def test_bench_distributed_dry_run_reports_both_rank_counts(tmp_path):
    import json

    bench = Path(__file__).resolve().parents[2] / "scripts" / "bench.py"
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(bench), "--distributed", "--dry-run", "--recipe", "mlp", "--json",
                           str(out)], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())["distributed"]
    assert [r["ranks"] for r in rows] == [1, 2] and all(r["cores"] == os.cpu_count() for r in rows)
    assert rows[1]["steps_per_epoch"] == -(-rows[0]["steps_per_epoch"] // 2)
    for r in rows:
        assert r["samples_per_s"] > 0 and r["allreduce_ms_per_step"] >= 0
        assert r["efficiency"] == pytest.approx(r["samples_per_s"] / (r["ranks"] * rows[0]["samples_per_s"]))
    assert "data-parallel training on" in done.stdout


def test_threads_per_rank_split_the_cores_unless_the_user_chose(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    calls = []
    monkeypatch.setattr(threadpoolctl, "threadpool_limits", calls.append)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMPI_COMM_WORLD_LOCAL_SIZE",
                 "MV2_COMM_WORLD_LOCAL_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setenv("MPI_LOCALNRANKS", "3")
    assert distributed.ranks_on_this_node() == 3
    assert distributed.limit_threads_per_rank() == 2 and calls == [2]
    assert distributed.limit_threads_per_rank(16) == 1 and calls == [2, 1]
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert distributed.limit_threads_per_rank() is None and calls == [2, 1]
    monkeypatch.delenv("MPI_LOCALNRANKS")
    assert distributed.ranks_on_this_node(default=5) == 5


def test_only_rank_0_runs_the_file_writing_callbacks(tmp_path):
    from magmadnn.callbacks import CSVLogger, EarlyStopping, ModelCheckpoint

    given = [ModelCheckpoint(str(tmp_path / "c.npz")), CSVLogger(str(tmp_path / "log.csv")), EarlyStopping()]
    for rank, kept in ((0, given), (1, given[2:])):
        parallel = object.__new__(distributed.DataParallel)
        parallel.rank = rank
        assert parallel.callbacks(given) == kept
