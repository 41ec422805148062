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


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed_mnist.py"


def run_example(tmp_path, *options):
    """``mpiexec -n 2`` the example for one epoch on a tiny MNIST folder (40 train / 16 test, batch 4 per rank)."""
    from .dataset_files import write_mnist_folder

    write_mnist_folder(tmp_path, n_train=40, n_test=16)
    cmd = [worker.mpiexec(), "-n", "2", sys.executable, str(EXAMPLE), "--data", str(tmp_path), "--epochs", "1",
           "--batch-size", "4", "--device", "host", "--quiet", *options]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.mpi
def test_distributed_mnist_example_reports_on_rank_0_only(tmp_path):
    done = run_example(tmp_path)
    assert done.stdout.count("test accuracy") == 1 and "over 2 rank(s)" in done.stdout
    assert "batch 4 per rank (8 per step)" in done.stdout and "5 steps" in done.stdout


@pytest.mark.mpi
def test_distributed_mnist_example_takes_the_distributed_options(tmp_path):
    done = run_example(tmp_path, "--model", "cnn", "--sync-bn", "--bucket-mb", "0.1", "--overlap")
    assert "sync BatchNorm, buckets of 0.1 MiB, overlap" in done.stdout
    buckets = int(done.stdout.split(" buckets, ")[0].rsplit(" ", 1)[1])
    assert buckets >= 3 and "5 steps" in done.stdout
    done = subprocess.run([sys.executable, str(EXAMPLE), "--data", str(tmp_path), "--sync-bn", "--model", "mlp"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and "--sync-bn needs a model with BatchNorm layers" in done.stderr


@pytest.mark.mpi
def test_bench_distributed_compares_fused_and_bucketed_reduction_in_one_run():
    import json

    bench = Path(__file__).resolve().parents[2] / "scripts" / "bench_distributed.py"
    done = subprocess.run([sys.executable, str(bench), "--data", os.devnull, "--train-size", "64", "--epochs", "2",
                           "--batch", "16", "--bucket-mb", "fused", "--compare-buckets", "0.25", "--overlap"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(r["ranks"], r["bucket_mb"], r["overlap"]) for r in rows] == [(1, None, True), (2, None, True),
                                                                          (2, 0.25, True)]
    assert rows[0]["buckets"] == rows[1]["buckets"] == 1 and rows[2]["buckets"] >= 3
    assert all(r["allreduce_ms_per_step"] >= 0 and r["samples_per_s"] > 0 for r in rows)
    assert rows[1]["steps_per_epoch"] == rows[2]["steps_per_epoch"] == 2


@pytest.mark.mpi
def test_a_user_error_on_one_rank_ends_the_whole_job(tmp_path):
    """--download fails on rank 0 only (the rank that downloads; no network through a closed proxy port): the
    example prints the one-line error and must end every rank, not leave rank 1 waiting at its barrier."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "https_proxy", "http_proxy")}
    env.update(https_proxy="http://127.0.0.1:9", http_proxy="http://127.0.0.1:9")
    cmd = [worker.mpiexec(), "-n", "2", sys.executable, str(EXAMPLE), "--data", str(tmp_path), "--download",
           "--device", "host", "--quiet"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode != 0
    assert "magmadnn: error: " in done.stderr and "could not download" in done.stderr


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


def test_nothing_below_distributed_imports_it():
    """The layering: data parallelism joins the models' training step through a hook registered on import; the
    models, layers, functional, autograd, callbacks and backends never import ``magmadnn.distributed``."""
    import ast

    root = Path(distributed.__file__).resolve().parents[1]
    below = [*root.glob("models/*.py"), *root.glob("layers/*.py"), *root.glob("backend/*.py"),
             *root.glob("functional/*.py"),
             *(root / f"{name}.py" for name in ("autograd", "callbacks", "losses", "metrics",
                                                 "optimizers", "initializers", "schedules", "saving"))]
    offenders = []
    for path in below:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module or ''}.{a.name}" for a in node.names]
            else:
                continue
            if any("distributed" in name.split(".") for name in names):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert len(below) > 10 and not offenders


def test_only_rank_0_runs_the_file_writing_callbacks(tmp_path):
    from magmadnn.callbacks import CSVLogger, EarlyStopping, ModelCheckpoint

    given = [ModelCheckpoint(str(tmp_path / "c.npz")), CSVLogger(str(tmp_path / "log.csv")), EarlyStopping()]
    for rank, kept in ((0, given), (1, given[2:])):
        parallel = object.__new__(distributed.DataParallel)
        parallel.rank = rank
        assert parallel.callbacks(given) == kept


# ------------------------------------------------------------------------------------------------ sync BatchNorm,
# buckets, staging: the pieces without MPI


@given(sizes=st.lists(st.integers(0, 9), min_size=1, max_size=5), channels=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_combined_moments_are_those_of_the_concatenated_groups(sizes, channels, seed):
    rng = np.random.default_rng(seed)
    groups = [rng.normal(3.0, 2.0, size=(n, channels)) for n in sizes]
    counts = [len(g) for g in groups]
    means = [g.mean(axis=0) if len(g) else np.zeros(channels) for g in groups]
    m2s = [((g - g.mean(axis=0)) ** 2).sum(axis=0) if len(g) else np.zeros(channels) for g in groups]
    n, mean, m2 = distributed.combine_moments(counts, means, m2s)
    everything = np.concatenate(groups)
    assert n == len(everything)
    if n:
        np.testing.assert_allclose(mean, everything.mean(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(m2, ((everything - everything.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-10,
                                   atol=1e-10)
    else:
        assert not mean.any() and not m2.any()


class OneRank:
    """A BatchNorm group of one rank (what BatchNormGroup computes for a world of size 1)."""

    weight = 1.0

    def moments(self, count, mean, m2):
        return distributed.combine_moments([count], [mean], [m2])

    def sum(self, values):
        return np.array(values, dtype=np.float64)


@pytest.mark.parametrize("device", ["host", "gpu"])
@pytest.mark.parametrize("shape", [(7, 3), (4, 2, 3, 3)])
def test_sync_batch_norm_of_one_rank_is_batch_norm(device, shape):
    """The op-set implementation (every backend) against each backend's own batch-norm ops."""
    import contextlib

    from magmadnn import backend
    from magmadnn import functional as F
    from magmadnn.autograd import Tensor

    with (_simulator() if device == "gpu" else contextlib.nullcontext()):
        xp = backend.get(device)
        rng = np.random.default_rng(1)
        c = shape[1]
        x0, dy = rng.normal(1.0, 2.0, shape), rng.normal(size=shape)
        g0, b0 = rng.normal(1.0, 0.3, c), rng.normal(size=c)
        results = []
        for sync in (None, OneRank()):
            x, gamma, beta = (Tensor(xp.asarray(a), requires_grad=True, backend=xp) for a in (x0, g0, b0))
            mean, var = xp.asarray(np.full(c, 0.5)), xp.asarray(np.full(c, 2.0))
            y = F.batch_norm(x, gamma, beta, mean, var, True, momentum=0.8, eps=1e-3, sync=sync)
            y.backward(xp.asarray(dy))
            results.append([xp.to_numpy(a) for a in (y.data, mean, var, x.grad, gamma.grad, beta.grad)])
        for name, want, got in zip(["y", "running_mean", "running_var", "dx", "dgamma", "dbeta"], *results):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=name)


def test_sync_batch_norm_in_inference_uses_the_running_statistics_and_no_collective():
    from magmadnn import functional as F

    class Refuses(OneRank):
        def moments(self, *args):
            raise AssertionError("a collective in inference")

        sum = moments

    rng = np.random.default_rng(2)
    x, gamma, beta = rng.normal(size=(5, 3)), rng.normal(size=3), rng.normal(size=3)
    mean, var = rng.normal(size=3), rng.uniform(0.5, 2.0, 3)
    got = F.batch_norm(x, gamma, beta, mean, var, False, sync=Refuses())
    np.testing.assert_allclose(got.data, (x - mean) / np.sqrt(var + 1e-5) * gamma + beta, rtol=1e-12)


def _simulator():
    from pymagma import simulator

    return simulator.simulated()


def test_sync_batch_norm_checks_the_global_count():
    from magmadnn import functional as F

    class Alone(OneRank):
        weight = 0.0  # a rank without samples, and no other rank: no value per channel at all

    with pytest.raises(ValueError, match="more than one value per channel over the ranks, got 0"):
        F.batch_norm(np.ones((1, 2)), np.ones(2), np.zeros(2), np.zeros(2), np.ones(2), True, sync=Alone())
    with pytest.raises(ValueError, match="got 1"):  # one sample of 2 features
        F.batch_norm(np.arange(2.0).reshape(1, 2), np.ones(2), np.zeros(2), np.zeros(2), np.ones(2), True,
                     sync=OneRank())


def test_buckets_take_the_parameters_last_first_up_to_the_size():
    # sizes in values, 8 bytes each; buckets of 100 bytes hold 12 values
    assert distributed.plan_buckets([3, 4, 20, 5, 6], 8, 100) == [[4, 3], [2], [1, 0]]
    assert distributed.plan_buckets([3, 4, 20, 5, 6], 8, float("inf")) == [[4, 3, 2, 1, 0]]
    assert distributed.plan_buckets([1], 4, 1) == [[0]]
    with pytest.raises(ValueError, match="bucket_mb"):
        distributed.Options(bucket_mb=0)
    with pytest.raises(TypeError, match="sync_batchnorm"):
        distributed.Options(sync_batchnorm="yes")
    assert distributed.Options(bucket_mb=None).bucket_bytes == float("inf")
    assert distributed.Options(bucket_mb=25).bucket_bytes == 25 * 2**20
    assert distributed.Options(bucket_mb=np.float32(0.5)).bucket_mb == 0.5  # a value from a NumPy grid
    assert distributed.Options(bucket_mb=np.int64(4)).bucket_mb == 4.0
    for bad in (True, np.bool_(True), "4", float("nan")):
        with pytest.raises(ValueError, match="bucket_mb"):
            distributed.Options(bucket_mb=bad)


def test_bucket_size_flag_takes_mib_or_fused():
    import argparse

    from magmadnn import cli

    assert cli.bucket_mb("fused") is None and cli.bucket_mb("None") is None and cli.bucket_mb("0.5") == 0.5
    for bad in ("0", "-1", "inf", "big"):
        with pytest.raises(argparse.ArgumentTypeError, match="size in MiB"):
            cli.bucket_mb(bad)


def test_fit_refuses_a_distributed_value_that_is_not_options():
    x, y, _, _ = worker.problem(8)
    with pytest.raises(TypeError, match="distributed must be True, False or a magmadnn.distributed.Options"):
        worker.build().fit(x, y, batch_size=4, verbose=0, distributed="sync")


@pytest.mark.parametrize("kinds, want", [("mpi,system", False), ("mpi,system,cuda", True), ("cuda:device", True),
                                         ("system,cuda:host", False), ("cuda:host:device,mpi", True),
                                         ("rocm:device", False), ("", False)])
def test_memory_alloc_kinds_admit_cuda_device_memory(kinds, want):
    assert distributed.cuda_aware._alloc_kinds_have_cuda_device(kinds) is want


@pytest.mark.mpi
def test_cuda_aware_detection_reports_this_mpi_and_follows_the_override(monkeypatch):
    pytest.importorskip("mpi4py")
    monkeypatch.delenv("MAGMADNN_CUDA_AWARE_MPI", raising=False)
    aware, why = distributed.cuda_aware_mpi()
    assert aware is False and why  # the MPICH wheel of the mpi extra is built without CUDA
    for value, want in (("1", True), ("0", False)):
        monkeypatch.setenv("MAGMADNN_CUDA_AWARE_MPI", value)
        assert distributed.cuda_aware_mpi() == (want, f"MAGMADNN_CUDA_AWARE_MPI={value}")


@pytest.mark.mpi
def test_after_fit_stats_keep_neither_the_parameters_nor_the_buffers_alive():
    """One rank in this process: stats() outlives fit, the model's tensors and the gradient buckets do not."""
    import gc
    import weakref

    pytest.importorskip("mpi4py")
    x, y, _, _ = worker.problem(16)
    model = worker.build()
    model.fit(x, y, batch_size=4, verbose=0, distributed=distributed.Options(bucket_mb=0.0001))
    param = weakref.ref(model.parameters()[0])
    del model
    gc.collect()
    assert param() is None
    figures = distributed.stats()
    assert figures["steps"] == 4 and figures["buckets"] >= 2 and figures["ranks"] == 1


def test_device_backend_stages_through_page_locked_memory_and_packs_flat_buffers():
    from magmadnn import backend

    with _simulator() as sim:
        xp = backend.get("gpu")
        host = xp.host_empty((5,), np.float64)
        assert isinstance(host, np.ndarray) and host.shape == (5,)
        a = xp.asarray(np.arange(6.0).reshape(2, 3))
        out = xp.host_empty((6,), np.float64)
        assert xp.copy_to_host(xp.multiply(a, 2.0), out) is out  # waits for the queued kernel
        np.testing.assert_array_equal(out, 2 * np.arange(6.0))
        with pytest.raises(ValueError, match="C-contiguous float64 host array of 6 values"):
            xp.copy_to_host(a, np.empty(5))
        flat = xp.zeros((8,), np.float64)
        xp.flat_pack([a, xp.asarray(np.array([7.0, 8.0]))], 3.0, flat)
        np.testing.assert_array_equal(xp.to_numpy(flat), 3 * np.array([0, 1, 2, 3, 4, 5, 7, 8.0]))
        parts = xp.flat_unpack(flat, [(2, 3), (2,)], 3.0)
        np.testing.assert_array_equal(xp.to_numpy(parts[0]), np.arange(6.0).reshape(2, 3))
        np.testing.assert_array_equal(xp.to_numpy(parts[1]), [7.0, 8.0])
        with pytest.raises(ValueError, match="hold 6 values, out 8"):
            xp.flat_pack([a], 1.0, flat)
        assert sim is not None


@pytest.mark.mpi
def test_device_buffers_come_back_to_the_host_as_the_header_only(monkeypatch):
    """A CUDA-aware MPI (forced, one rank): the summed gradients stay on the device; the host reads the loss and
    the sample count, not the bucket that holds them."""
    MPI = pytest.importorskip("mpi4py.MPI")  # noqa: N806
    from magmadnn import backend
    from magmadnn.autograd import Tensor

    with _simulator():
        xp = backend.get("gpu")
        params = [Tensor(xp.asarray(np.zeros((50, 4))), requires_grad=True, backend=xp) for _ in range(2)]
        for k, p in enumerate(params):
            p.grad = xp.asarray(np.full((50, 4), k + 1.0))
        averager = distributed.GradientAverager(params, np.float64, MPI.COMM_SELF, xp=xp, direct=True)
        assert len(averager.buckets) == 1
        to_numpy, reads = xp.to_numpy, []
        monkeypatch.setattr(xp, "to_numpy", lambda a: reads.append(a.size) or to_numpy(a))
        averager.start(4.0, xp.asarray(np.float64(0.5)))
        grads, loss = averager.finish(mean=True)
        assert loss == 0.5 and reads and max(reads) <= 2
        for k, g in enumerate(grads):
            np.testing.assert_array_equal(to_numpy(g), np.full((50, 4), k + 1.0))


@pytest.mark.mpi
def test_overlapped_buckets_are_posted_in_bucket_order_whatever_order_the_hook_fires():
    MPI = pytest.importorskip("mpi4py.MPI")  # noqa: N806
    from magmadnn.autograd import Tensor

    posted = []

    class Recorder:  # one rank; records which buffer each Iallreduce gets
        def Iallreduce(self, sendbuf, recvbuf, op):  # noqa: N802
            posted.append(recvbuf[0])
            return MPI.COMM_SELF.Iallreduce(sendbuf, recvbuf, op=op)

    params = [Tensor(np.zeros(4), requires_grad=True) for _ in range(4)]
    averager = distributed.GradientAverager(params, np.float64, Recorder(), bucket_bytes=64, overlap=True)
    assert [b.positions for b in averager.buckets] == [[3, 2], [1, 0]]
    for k, p in enumerate(params):
        p.grad = np.full(4, float(k))
    averager.start(1.0, np.float64(0.5))
    for k in (0, 1, 3):  # the second bucket complete first: nothing may go before the first
        averager.ready(params[k])
    assert posted == []
    averager.ready(params[2])
    assert [id(b) for b in posted] == [id(b.buffer) for b in averager.buckets]
    grads, loss = averager.finish(mean=False)
    assert loss == 0.5 and [float(g[0]) for g in grads] == [0.0, 1.0, 2.0, 3.0]


# ------------------------------------------------------------------------------------------------ under mpiexec:
# sync BatchNorm, buckets, staging


def bn_reference(tmp_path, n, b, epochs):
    out = tmp_path / "single-bn.npz"
    worker.train(out, n, 2 * b, epochs, distributed=False, spec="bn")
    return np.load(out)


def assert_same_training(got, want, rtol=1e-10, atol=1e-12, skip_batch_losses=False):
    for key in want.files:
        if skip_batch_losses and key == "batch_losses":
            continue
        np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=atol, err_msg=key)


@pytest.mark.mpi
@pytest.mark.parametrize("n", [22, 19, 21], ids=["last-batch-4+2", "last-batch-3+0", "last-batch-4+1"])
def test_two_ranks_with_sync_batchnorm_train_like_one_process_with_twice_the_batch(tmp_path, n):
    """Conv + BatchNorm (4-D) + Dense + BatchNorm (2-D): losses, weights and running statistics of 2 ranks with batch
    4 equal one process with batch 8 over 2 epochs; the last global batch leaves rank 1 two samples, none (a
    stand-in batch joins the collectives) or one (too few for local statistics, enough for the global ones)."""
    out = tmp_path / "sync.npz"
    run_ranks(2, "train", out, n, 4, 2, "host", "bn,sync_bn")
    got, want = np.load(out), bn_reference(tmp_path, n, 4, 2)
    assert len(got["batch_losses"]) == 2 * -(-n // 8)
    assert_same_training(got, want)
    steps = len(got["batch_losses"])
    assert bool(got["stat_sync_batchnorm"]) and int(got["stat_batchnorm_sync_calls"]) == 2 * 2 * steps


@pytest.mark.mpi
def test_local_batchnorm_statistics_differ_from_one_process(tmp_path):
    out = tmp_path / "local.npz"
    run_ranks(2, "train", out, 22, 4, 1, "host", "bn")
    got, want = np.load(out), bn_reference(tmp_path, 22, 4, 1)
    assert not np.allclose(got["batch_losses"], want["batch_losses"], rtol=1e-6)


@pytest.mark.mpi
def test_buckets_with_and_without_overlap_are_bit_identical_to_one_fused_buffer(tmp_path):
    """2 ranks: each value is summed over the same two contributions whatever the bucketing (a + b = b + a)."""
    runs = {}
    for spec in ("bn,sync_bn,bucket=1000", "bn,sync_bn,bucket=0.0003", "bn,sync_bn,bucket=0.0003,overlap"):
        out = tmp_path / f"{len(runs)}.npz"
        run_ranks(2, "train", out, 19, 4, 2, "host", spec)
        runs[spec] = np.load(out)
    fused, *bucketed = runs.values()
    assert int(fused["stat_buckets"]) == 1
    for got in bucketed:
        assert int(got["stat_buckets"]) >= 3 and int(got["stat_buffer_values"]) == int(fused["stat_buffer_values"])
        for key in fused.files:
            if not key.startswith("stat_"):
                np.testing.assert_array_equal(got[key], fused[key], err_msg=key)
    assert bool(bucketed[1]["stat_overlap"])


@pytest.mark.mpi
def test_sync_batchnorm_on_the_simulated_device_stages_through_page_locked_memory(tmp_path):
    out = tmp_path / "device.npz"
    env = {**os.environ, "PYMAGMA_SIMULATOR": "1"}
    env.pop("MAGMADNN_CUDA_AWARE_MPI", None)
    run_ranks(2, "train", out, 19, 4, 2, "gpu", "bn,sync_bn,bucket=0.0003,overlap", env=env)
    got = np.load(out)
    assert str(got["stat_staging"]) == "page-locked host buffers" and not bool(got["stat_cuda_aware_mpi"])
    assert_same_training(got, bn_reference(tmp_path, 19, 4, 2), skip_batch_losses=True)


@pytest.mark.mpi
def test_a_cuda_aware_mpi_gets_device_buffers_with_the_same_sums(tmp_path):
    """Forced on the simulator (device memory is host memory there, so this MPI can read the device buffers): the
    device buffers handed to MPI give the staged run's results bit for bit."""
    env = {**os.environ, "PYMAGMA_SIMULATOR": "1", "MAGMADNN_CUDA_AWARE_MPI": "1"}
    direct, staged = tmp_path / "direct.npz", tmp_path / "staged.npz"
    run_ranks(2, "train", direct, 19, 4, 2, "gpu", "bn,sync_bn,bucket=0.0003", env=env)
    run_ranks(2, "train", staged, 19, 4, 2, "gpu", "bn,sync_bn,bucket=0.0003",
              env={**env, "MAGMADNN_CUDA_AWARE_MPI": "0"})
    got, want = np.load(direct), np.load(staged)
    assert str(got["stat_staging"]) == "device buffers (CUDA-aware MPI)"
    assert str(got["stat_cuda_aware_source"]) == "MAGMADNN_CUDA_AWARE_MPI=1"
    assert str(want["stat_staging"]) == "page-locked host buffers"
    for key in want.files:
        if not key.startswith("stat_"):
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert_same_training(got, bn_reference(tmp_path, 19, 4, 2), skip_batch_losses=True)
