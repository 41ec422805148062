"""The whole GPU path on the CPU simulator, as a user runs it: the example, the CLI and the demo with
``--device gpu`` under ``PYMAGMA_SIMULATOR=1``, and a training loop that never leaves the device (host reads counted
per step, the memory pool flat after the second step)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from magmadnn import layers as L
from magmadnn import models, optimizers, zoo
from tests.magmadnn.dataset_files import write_mnist_folder

pytestmark = pytest.mark.native  # the simulator reads real cuDNN descriptors

ROOT = Path(__file__).resolve().parents[3]


def run(args, tmp_path, timeout=240):
    # the demo script runs in the venv of this test run (scripts/test.sh's), not one of its own
    env = {**os.environ, "PYMAGMA_SIMULATOR": "1", "MPLBACKEND": "Agg", "MAGMADNN_VENV": sys.prefix}
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_lenet5_example_trains_on_the_simulated_gpu(tmp_path):
    write_mnist_folder(tmp_path, n_train=400, n_test=100)
    out = run([sys.executable, "examples/lenet5.py", "--data", str(tmp_path), "--device", "gpu", "--max-steps", "50",
               "--batch-size", "8", "--epochs", "1"], tmp_path)
    assert "Training on gpu:0 (pymagma simulator)" in out and "model lenet5 on gpu:0" in out
    assert "test accuracy" in out and "throughput" in out


@pytest.mark.slow
def test_cli_and_demo_train_on_the_simulated_gpu(tmp_path):
    out = run([sys.executable, "-m", "magmadnn", "train", "--model", "mlp", "--dataset", "digits", "--device",
               "gpu", "--epochs", "1", "--max-steps", "10", "--quiet"], tmp_path)
    assert "on gpu:0" in out and "test accuracy" in out
    out = run(["bash", "scripts/demo.sh", "--epochs", "1", "--max-steps", "5", "--plot", str(tmp_path / "c.png")],
              tmp_path)
    assert "Training on gpu:0 (pymagma simulator)" in out  # --device auto picks the simulated GPU


@pytest.fixture
def simulated():
    from pymagma import simulator

    with simulator.simulated():
        yield


def test_training_steps_read_the_device_only_at_progress_updates(simulated, monkeypatch):
    from pymagma import memory, runtime

    reads = []
    copy = runtime.memcpy_dtoh
    monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                        or copy(dst, src, stream))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 1, 12, 12)).astype(np.float32), rng.integers(0, 10, 64)
    model = zoo.small_cnn((1, 12, 12), 10, filters=(4, 8), dense=16, batch_norm=True, dropout=0.2, seed=1)
    model.compile(optimizers.Adam(1e-3), metrics=["accuracy"], seed=2, device="gpu")
    model.progress_interval = float("inf")  # one progress update: the epoch end
    pools = []
    for _ in range(3):
        reads.clear()
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
        stats = memory.pool_stats()
        pools.append((stats["mallocs"], stats["cached_bytes"], stats["in_use_bytes"]))
        assert len(reads) == 1, f"{len(reads)} device-to-host copies in one epoch of 4 steps: {reads}"
    assert pools[1] == pools[2], f"the pool grew after the second epoch (mallocs, cached, in use): {pools}"


def test_weights_move_between_host_and_simulated_gpu_with_the_optimizer_state(simulated, tmp_path):
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(32, 6)).astype(np.float32), rng.integers(0, 3, 32)

    def fresh():
        model = models.Sequential([L.Input((6,)), L.Dense(8, activation="gelu"), L.Dense(3)], seed=0)
        return model.compile(optimizers.Adam(1e-2), seed=4)

    stay, move = fresh(), fresh().to("gpu")
    for model in (stay, move):
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    move.to("host")
    assert stay.train_on_batch(x[:8], y[:8]) == pytest.approx(move.train_on_batch(x[:8], y[:8]), rel=1e-5)
    on_gpu = models.load(stay.save(tmp_path / "m.npz"), device="gpu")
    np.testing.assert_allclose(on_gpu.predict(x), stay.predict(x), rtol=1e-5, atol=1e-6)
