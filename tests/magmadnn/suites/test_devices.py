"""Devices in the user API: names, compile(device=), Model.to, saving across devices, the fit first line, the
one-read-per-progress-update rule, the CLI --device.

Until a GPU runs here, "gpu"/"gpu:N" resolve (through a monkeypatch of ``backend._load_device``) to stand-ins built
on the strict backend of tests/magmadnn/backends.py: arrays that refuse Python operators and indexing, so everything
below proves the device path only touches the op set. Being host ops underneath, the stand-ins must give exactly
the host's numbers. The last tests run the real device backend on pymagma's simulator once both exist.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types

import numpy as np
import pytest

from magmadnn import backend, cli, models, optimizers
from magmadnn import layers as L
from magmadnn.callbacks import TerminateOnNaN
from tests.magmadnn.backends import STRICT, StrictArray

HOST = backend.get("host")


def stand_in(index: int):
    module = types.ModuleType(f"gpu_{index}")
    module.__dict__.update({k: v for k, v in vars(STRICT).items() if not k.startswith("__")})
    module.name = f"gpu:{index}"
    module.reads = 0

    def to_numpy(a):
        module.reads += 1
        return STRICT.to_numpy(a)

    module.to_numpy = to_numpy
    return module


@pytest.fixture
def gpu(monkeypatch):
    """Two stand-in GPUs; returns the loader ``index -> backend`` ("gpu" is GPU 0)."""
    made = {}

    def load(index):
        index = 0 if index is None else index
        if index not in made:
            made[index] = stand_in(index)
        return made[index]

    monkeypatch.setattr(backend, "_load_device", load)
    monkeypatch.setattr(backend, "probe", lambda: backend.GpuProbe(True, False, 2, None))
    return load


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.delenv("PYMAGMA_SIMULATOR", raising=False)
    monkeypatch.setattr(backend, "probe", lambda: backend.GpuProbe(False, False, 0, "pymagma found no CUDA device "
                                                                                    "(test) and the simulator is off"))


def data(n=48, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = (rng.normal(size=(n, 1, 4, 4)) * 0.5).astype(np.float32)
    x[np.arange(n), 0, y, y] += 2.0
    return x, y


def net(seed=0, device=None, **kwargs):
    """Conv, BatchNorm (running statistics), Dropout (a random stream), Dense: every kind of state a move carries."""
    return models.Sequential([L.Input((1, 4, 4)), L.Conv2D(4, 3, padding="same", activation="relu"), L.BatchNorm(),
                              L.Flatten(), L.Dropout(0.25), L.Dense(3)], seed=seed, device=device, **kwargs)


def compiled(device=None, seed=0):
    model = net(seed, device)
    model.compile(optimizers.Adam(0.01), metrics=["accuracy", "top2"])
    return model


def assert_same_weights(a, b):
    for u, v in zip(a.get_weights(), b.get_weights(), strict=True):
        np.testing.assert_array_equal(u, v)


# ------------------------------------------------------------------------------------------------------ names


def test_every_name_resolves(gpu):
    assert backend.get("host") is HOST and backend.get("cpu") is HOST and backend.get("numpy") is HOST
    assert backend.get("gpu") is gpu(0) and backend.get("device") is gpu(0) and backend.get("GPU") is gpu(0)
    assert backend.get("gpu:1") is gpu(1) and backend.get("gpu:1").name == "gpu:1"
    assert backend.get("auto") is gpu(0)
    assert [backend.resolve_device(n) for n in ("host", "cpu", "gpu", "device", "gpu:1", "auto")] == \
        ["host", "host", "gpu", "gpu", "gpu:1", "gpu"]
    assert backend.available() == ["host", "gpu", "gpu:0", "gpu:1"]
    assert backend.get(gpu(1)) is gpu(1)  # a backend object passes through


@pytest.mark.parametrize("name", ["tpu", "gpu:", "gpu:-1", "gpu:a", "host:0"])
def test_unknown_names_list_the_valid_ones(name):
    with pytest.raises(ValueError, match=rf"unknown backend '{name}'.*host, cpu, gpu, gpu:N, auto"):
        backend.get(name)


def test_auto_is_the_host_without_a_gpu(no_gpu):
    assert backend.resolve_device("auto") == "host" and backend.get("auto") is HOST
    assert backend.available() == ["host"]


def test_gpu_without_a_gpu_says_what_was_checked(no_gpu, monkeypatch):
    monkeypatch.setitem(sys.modules, "magmadnn.backend.device", types.ModuleType("magmadnn.backend.device"))
    with pytest.raises(backend.DeviceUnavailableError, match=r"no CUDA device \(test\).*'host'.*PYMAGMA_SIMULATOR=1"):
        backend.get("gpu")


def test_real_probe_reports_a_reason_when_unusable(monkeypatch):
    monkeypatch.delenv("PYMAGMA_SIMULATOR", raising=False)
    found = backend.probe()
    assert found.usable == (found.reason is None)
    if not found.usable:
        assert "PYMAGMA_SIMULATOR" in found.reason or "pymagma" in found.reason


def test_importing_magmadnn_does_not_import_pymagma():
    code = "import sys, magmadnn, magmadnn.models, magmadnn.cli; print('pymagma' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ------------------------------------------------------------------------------------------- moving a model


def test_device_and_backend_keywords(gpu):
    assert net(device="gpu").xp is gpu(0) and net(backend="gpu:1").xp is gpu(1)
    assert net(device="gpu:1").device == "gpu:1" and net().device == "host"
    with pytest.raises(ValueError, match="disagree"):
        net(device="host", backend="gpu")


def test_compile_device_after_the_weights_exist_moves_them(gpu):
    x, y = data()
    on_host, moved = compiled(), net(0)
    assert moved.parameters()  # weights exist before compile chooses the device
    moved.compile(optimizers.Adam(0.01), metrics=["accuracy", "top2"], device="gpu")
    assert moved.xp is gpu(0) and all(isinstance(p.data, StrictArray) for p in moved.parameters())
    assert_same_weights(moved, on_host)
    runs = [m.fit(x, y, batch_size=8, epochs=2, verbose=0).history for m in (on_host, moved)]
    assert runs[0] == runs[1]
    assert_same_weights(moved, on_host)


def test_to_and_back_carries_optimizer_state_and_training_goes_on_identically(gpu):
    x, y = data()
    stay, travel = compiled(), compiled()
    for model in (stay, travel):
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert travel.to("gpu:1") is travel and travel.device == "gpu:1"
    slots = [a for s in travel.optimizer.slot_arrays.values() for a in s.values()]
    assert slots and all(isinstance(a, StrictArray) for a in slots)
    assert all(isinstance(a, StrictArray) for layer in travel.layers for a in layer.state.values())
    for _ in range(2):  # same next-step losses as staying on the host (Adam moments, BN statistics, dropout stream)
        assert travel.train_on_batch(x[:8], y[:8]) == stay.train_on_batch(x[:8], y[:8])
    travel.to("host")
    assert travel.xp is HOST and all(type(p.data) is np.ndarray for p in travel.parameters())
    assert travel.fit(x, y, batch_size=8, verbose=0).history == stay.fit(x, y, batch_size=8, verbose=0).history
    assert_same_weights(travel, stay)


def test_save_on_one_device_load_on_the_other(gpu, tmp_path):
    x, y = data()
    trained = compiled("gpu")
    trained.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = trained.save(tmp_path / "m.npz")
    on_host = models.load(path, device="host")
    assert on_host.xp is HOST
    np.testing.assert_array_equal(on_host.predict(x), trained.predict(x))
    back = models.load(on_host.save(tmp_path / "h.safetensors"), device="gpu:1")
    assert back.xp is gpu(1)
    np.testing.assert_array_equal(back.predict(x), trained.predict(x))


def test_checkpoint_on_gpu_resumes_on_host_like_uninterrupted(gpu, tmp_path):
    x, y = data()
    straight = compiled()
    straight.fit(x, y, batch_size=8, epochs=2, verbose=0)
    first = compiled("gpu")
    first.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = first.save_checkpoint(tmp_path / "ck.npz")
    resumed = net(0)
    epoch = resumed.load_checkpoint(path)
    resumed.fit(x, y, batch_size=8, epochs=2, initial_epoch=epoch, verbose=0)
    assert_same_weights(resumed, straight)


# --------------------------------------------------------------------------------------------- fit on a device


def test_fit_first_line_names_the_device(gpu, capsys, monkeypatch):
    x, y = data(16)
    compiled().fit(x, y, batch_size=8, verbose=2)
    assert capsys.readouterr().out.splitlines()[0] == "Training on host (NumPy)"
    compiled("gpu:1").fit(x, y, batch_size=8, verbose=1)
    assert capsys.readouterr().out.splitlines()[0] == "Training on gpu:1"
    monkeypatch.setattr(backend, "_simulator_enabled", lambda: True)
    compiled("gpu").fit(x, y, batch_size=8, verbose=1)
    assert capsys.readouterr().out.splitlines()[0] == "Training on gpu:0 (pymagma simulator)"
    compiled("gpu").fit(x, y, batch_size=8, verbose=0)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("interval, reads_per_epoch", [(math.inf, 1), (0.0, 6 + 1)])
def test_fit_reads_the_device_once_per_progress_update(gpu, interval, reads_per_epoch):
    """48 samples in batches of 8: 6 batches. A progress update is due every ``interval`` seconds (never / every
    batch) and at each epoch end; validation is part of the epoch-end read."""
    x, y = data()
    model = compiled("gpu")
    model.progress_interval = interval
    xp = gpu(0)
    xp.reads = 0
    history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(x[:16], y[:16]), verbose=0)
    assert xp.reads == 2 * reads_per_epoch
    assert set(history.history) == {"loss", "accuracy", "top2_accuracy", "val_loss", "val_accuracy",
                                    "val_top2_accuracy"}
    reference = compiled()
    assert reference.fit(x, y, batch_size=8, epochs=2, validation_data=(x[:16], y[:16]), verbose=0).history == \
        history.history


def test_evaluate_on_a_device_reads_once(gpu):
    x, y = data()
    model = compiled("gpu")
    gpu(0).reads = 0
    assert model.evaluate(x, y, batch_size=8) == compiled().evaluate(x, y, batch_size=8)
    assert gpu(0).reads == 1


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("interval", [math.inf, 0.0])
def test_non_finite_loss_on_a_device_is_never_applied(gpu, interval):
    """The guard rides on the progress read: the device model rolls back and replays to the bad batch, ending with
    exactly the host's weights (batches 1..2 applied, batch 3 not)."""
    x, y = data()
    x[20] = np.finfo(np.float32).max  # batch 3 of 8 samples (finite, overflows)
    ends = []
    for device in ("host", "gpu"):
        model = compiled(device)
        model.progress_interval = interval
        with pytest.raises(models.NonFiniteLossError, match=r"loss became nan at epoch 1, batch 3"):
            model.fit(x, y, batch_size=8, shuffle=False, verbose=0)
        ends.append(model)
    assert all(np.isfinite(w).all() for w in ends[1].get_weights())
    assert_same_weights(*ends)
    stopped = compiled("gpu")
    history = stopped.fit(x, y, batch_size=8, epochs=3, shuffle=False, callbacks=[TerminateOnNaN()], verbose=0)
    assert stopped.stop_reason.startswith("TerminateOnNaN: loss is nan at epoch 1, batch 3")
    assert len(history.epoch) == 1 and np.isnan(history.history["loss"][0])
    assert_same_weights(stopped, ends[0])


# ------------------------------------------------------------------------------------------------------- CLI


def test_cli_device_option_is_checked():
    parser = cli.build_parser()
    for name in ("host", "cpu", "gpu", "gpu:3", "auto"):
        assert parser.parse_args(["train", "--device", name]).device == name
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--device", "tpu"])


def test_cli_train_on_the_gpu_stand_in(gpu, tmp_path, capsys):
    from tests.magmadnn.dataset_files import write_mnist_folder

    write_mnist_folder(tmp_path, n_train=24, n_test=16)
    argv = ["train", "--model", "mlp", "--dataset", "mnist", "--data", str(tmp_path), "--epochs", "1",
            "--batch-size", "8", "--max-steps", "2", "--device", "gpu", "--quiet"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "model mlp on gpu:0" in out and "test accuracy" in out


@pytest.mark.parametrize("example", ["lenet5", "mnist_mlp"])
def test_examples_run_on_the_gpu_stand_in(gpu, example, tmp_path, capsys):
    from tests.magmadnn.dataset_files import write_mnist_folder
    from tests.magmadnn.suites.test_examples import load_example

    write_mnist_folder(tmp_path, n_train=24, n_test=16)
    gpu(0).reads = 0
    report = load_example(example).main(["--data", str(tmp_path), "--epochs", "1", "--batch-size", "8",
                                         "--max-steps", "2", "--device", "gpu", "--quiet"])
    assert 0.0 <= report["test_accuracy"] <= 1.0 and "on gpu:0" in capsys.readouterr().out
    assert 1 <= gpu(0).reads <= 4  # fit's epoch end (+ progress updates, if a slow machine makes any), evaluate


def test_cli_gpu_without_a_gpu_is_a_one_line_error(no_gpu, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "magmadnn.backend.device", types.ModuleType("magmadnn.backend.device"))
    assert cli.main(["train", "--model", "mlp", "--device", "gpu", "--epochs", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("magmadnn: error:") and "PYMAGMA_SIMULATOR=1" in err


# ---------------------------------------------------------------------------------- the real device backend

_REAL = importlib.util.find_spec("magmadnn.backend.device") is not None


@pytest.fixture
def simulator():
    if not _REAL:
        pytest.skip("magmadnn.backend.device is not part of this build yet")
    sim = pytest.importorskip("pymagma.simulator")
    with sim.simulated():
        yield sim


def test_simulated_gpu_trains_a_tiny_model_like_the_host(simulator, capsys):
    x, y = data(24)
    runs = []
    for device in ("host", "gpu"):
        model = models.Sequential([L.Input((1, 4, 4)), L.Flatten(), L.Dense(8, activation="relu"), L.Dense(3)],
                                  seed=0, device=device)
        model.compile(optimizers.SGD(0.1, momentum=0.9), metrics=["accuracy", "top2"])
        runs.append((model.fit(x, y, batch_size=8, epochs=1, verbose=1).history, model))
    assert "Training on gpu:0 (pymagma simulator)" in capsys.readouterr().out
    (host, on_host), (device, on_device) = runs
    assert device["loss"][0] == pytest.approx(host["loss"][0], rel=1e-4)
    assert device["accuracy"] == host["accuracy"] and device["top2_accuracy"] == host["top2_accuracy"]
    np.testing.assert_allclose(on_device.to("host").predict(x), on_host.predict(x), rtol=1e-4, atol=1e-5)
