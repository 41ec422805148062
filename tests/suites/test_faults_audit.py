"""The fault audit's families of data loss, silent results and crashes, each with the test that proves it fixed.

Faults (one line each; grep for the tag):
  [atomic-export]      Model.export wrote the target in place: a failed write (disk full, file-size limit) truncated a
                       good .onnx file that was there.
  [atomic-every-file]  model files, checkpoints, CSV logs, plots, benchmark JSON and the kernel cache go through one
                       atomic write (temporary file in the same folder, fsync, rename); a failure leaves no temporary.
  [cli-same-file]      `magmadnn export m.safetensors m.safetensors` exited 0 and overwrote the model with ONNX bytes.
  [cli-one-line]       the CLI printed tracebacks for swapped arguments, an .onnx import target, a missing output
                       folder, a missing input, a failed write; now one line on stderr saying what was expected
                       (exit status 2).
  [cli-opset-message]  `--opset 5` said "cannot be written with opset 5:" and nothing after the colon.
  [onnx-opset-range]   a file stamped with an opset newer than the installed onnx knows (or older than 7) imported
                       without a word; now UnsupportedOnnxError at load and in info.
  [onnx-feed-dict]     predict({input_name: array}) (onnxruntime's feed) failed with a dtype=object TypeError.
  [ignore-empty-batch] an evaluation batch whose targets were all ignore_index made the whole result NaN, and fit said
                       "lower the learning rate"; now figures are over counted targets of the whole set.
  [ignore-empty-set]   a set with no counted target at all is a ValueError naming ignore_index.
  [ignore-in-replay]   with ignore_index a replayed step fixed the first batch's count of targets (now fed per batch).
  [dlpack-error]       np.from_dlpack(device_array) ended in SystemError (the capsule destructor ran Python code while
                       NumPy's error was pending); now NumPy's own error.
  [strided-gemm]       a[::2] @ b[:, ::2] was refused; operands BLAS cannot address are copied to contiguous work
                       arrays (CuPy's way).
  [lstsq-rank]         lstsq(method="qr") of a rank-deficient matrix returned entries of 1e15 without a word; now a
                       LinAlgError naming the rank.
  [array-eq]           DeviceArray == DeviceArray compared identity; == and != are now elementwise (bool arrays).
"""

from __future__ import annotations

import csv
import errno
import gc
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import _atomic, cli, layers, losses, metrics
from magmadnn.models import replay
from pymagma import simulator

ROOT = Path(__file__).resolve().parents[2]
onnx = pytest.importorskip("onnx")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _disk_full(monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_atomic.os, "fsync", full)


def _mlp(name="mlp"):
    model = mdnn.Sequential([layers.Input((4,), name="pixels"), layers.Dense(3)], name=name, seed=0)
    model.compile("sgd", "cross_entropy")
    return model


# ------------------------------------------------------------------------------------------- [atomic-every-file]
def test_atomic_write_replaces_whole_or_keeps_the_original(tmp_path, monkeypatch):
    """[atomic-every-file] a failure at fsync (a full disk) or inside the block leaves the old bytes, no temporary."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"good old bytes")
    _atomic.write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    with pytest.raises(RuntimeError), _atomic.atomic_write(target) as handle:
        handle.write(b"half")
        raise RuntimeError("the producer failed midway")
    assert target.read_bytes() == b"new" and _leftovers(tmp_path) == []
    _disk_full(monkeypatch)
    with pytest.raises(OSError, match="No space"):
        _atomic.write_bytes(target, b"x" * 100_000)
    assert target.read_bytes() == b"new" and _leftovers(tmp_path) == []


def test_atomic_write_permissions_and_refusals(tmp_path):
    """[atomic-every-file] the new file gets 0o666 less the umask (not mkstemp's 0o600); a missing folder or a folder
    as the target is a clear error."""
    umask = os.umask(0o022)
    os.umask(umask)
    path = Path(_atomic.write_text(tmp_path / "a.txt", "x"))
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(FileNotFoundError, match="does not exist"):
        _atomic.write_bytes(tmp_path / "missing" / "a.bin", b"x")
    with pytest.raises(IsADirectoryError):
        _atomic.write_bytes(tmp_path, b"x")


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_model_save_on_a_full_disk_keeps_the_saved_model(tmp_path, monkeypatch, suffix):
    """[atomic-every-file] Model.save / checkpoints."""
    pytest.importorskip("safetensors") if suffix == ".safetensors" else None
    path = tmp_path / f"m{suffix}"
    model = _mlp()
    model.save(path)
    before = path.read_bytes()
    model.layers[-1].params["kernel"].data[...] = 7.0
    _disk_full(monkeypatch)
    with pytest.raises(OSError):
        model.save(path)
    assert path.read_bytes() == before and _leftovers(tmp_path) == []


def test_export_on_a_full_disk_keeps_the_good_onnx_file(tmp_path, monkeypatch):
    """[atomic-export]"""
    path = tmp_path / "m.onnx"
    _mlp().export(path)
    before = path.read_bytes()
    _disk_full(monkeypatch)
    with pytest.raises(OSError):
        _mlp("other").export(path)
    assert path.read_bytes() == before and _leftovers(tmp_path) == []
    assert onnx.load(str(path)).graph.name == "mlp"


def test_export_past_a_file_size_limit_keeps_the_good_onnx_file(tmp_path):
    """[atomic-export] a real failed write: the CLI under RLIMIT_FSIZE (SIGXFSZ ignored, so write raises EFBIG)."""
    resource = pytest.importorskip("resource")
    import signal

    big = mdnn.Sequential([layers.Input((64,)), layers.Dense(256), layers.Dense(3)], seed=0)
    big.compile("sgd", "cross_entropy")
    big.save(tmp_path / "big.npz")
    target = tmp_path / "m.onnx"
    _mlp().export(target)
    before = target.read_bytes()

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 512, len(before) + 512))

    done = subprocess.run([sys.executable, "-m", "magmadnn", "export", str(tmp_path / "big.npz"), str(target)],
                          preexec_fn=limit, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert target.read_bytes() == before and _leftovers(tmp_path) == []


def test_csv_logger_is_rewritten_atomically_per_epoch(tmp_path, monkeypatch):
    """[atomic-every-file] a failed write at epoch 2 leaves epoch 1's complete rows; append keeps earlier rows."""
    path = tmp_path / "log.csv"
    x, y = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32), np.arange(8) % 3
    model = _mlp()
    model.fit(x, y, epochs=1, verbose=0, callbacks=[mdnn.callbacks.CSVLogger(path)])
    first = list(csv.reader(path.open()))
    assert first[0][0] == "epoch" and len(first) == 2
    model.fit(x, y, epochs=2, verbose=0, callbacks=[mdnn.callbacks.CSVLogger(path, append=True)])
    rows = list(csv.reader(path.open()))
    assert rows[:2] == first and len(rows) == 4 and [r[0] for r in rows[2:]] == ["0", "1"]
    calls = []

    class FailSecond(mdnn.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                calls.append(epoch)
                _disk_full(monkeypatch)

    with pytest.raises(OSError):
        model.fit(x, y, epochs=2, verbose=0, callbacks=[FailSecond(), mdnn.callbacks.CSVLogger(path)])
    assert calls == [1]
    rows = list(csv.reader(path.open()))
    assert len(rows) == 2 and rows[1][0] == "0" and _leftovers(tmp_path) == []


def test_training_curve_failure_keeps_the_old_plot(tmp_path, monkeypatch):
    """[atomic-every-file] plots: savefig goes into the temporary file."""
    pytest.importorskip("matplotlib")
    history = mdnn.callbacks.History()
    history.history = {"loss": [1.0, 0.5], "accuracy": [0.3, 0.6]}
    path = tmp_path / "curve.png"
    cli.save_curve(history, path)
    before = path.read_bytes()
    assert before.startswith(b"\x89PNG")
    history.history = {"loss": [2.0, 0.1, 0.05], "accuracy": [0.1, 0.9, 0.95]}
    _disk_full(monkeypatch)
    with pytest.raises(cli.OutputError, match="No space"):
        cli.save_curve(history, path)
    assert path.read_bytes() == before and _leftovers(tmp_path) == []


def test_kernel_cache_write_is_atomic(tmp_path, monkeypatch):
    """[atomic-every-file] pymagma's own copy of the routine (it never imports magmadnn)."""
    from pymagma import _atomic as pm_atomic

    target = tmp_path / "k.cubin"
    pm_atomic.write_bytes(target, b"old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pm_atomic.os, "fsync", full)
    with pytest.raises(OSError):
        pm_atomic.write_bytes(target, b"new")
    assert target.read_bytes() == b"old" and _leftovers(tmp_path) == []


# --------------------------------------------------------------------------------------------------------- CLI
@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _mlp().save("m.safetensors" if _has_safetensors() else "m.npz")
    _mlp().save("m.npz")
    _mlp().export("m.onnx")
    return tmp_path


def _has_safetensors() -> bool:
    try:
        import safetensors  # noqa: F401
    except ImportError:
        return False
    return True


CLI_MISTAKES = [
    (["export", "m.npz", "m.npz"], ["must end in .onnx", "usage: magmadnn export"]),  # [cli-same-file]
    (["export", "m.onnx", "m.npz"], ["arguments look swapped"]),
    (["export", "m.npz", "nodir/out.onnx"], ["folder", "does not exist"]),
    (["export", "gone.npz", "out.onnx"], ["'gone.npz' is missing"]),
    (["export", "m.npz", "."], ["must end in .onnx"]),
    (["export", "m.npz", "out.onnx", "--opset", "5"], ["opset 5: magmadnn writes opset 17 or newer", "ask for 17"]),
    (["export", "m.npz", "out.onnx", "--opset", "999"], ["opset 999", "installed onnx package knows opsets up to"]),
    (["import", "m.onnx", "out.onnx"], ["must end in .safetensors or .npz", "magmadnn export"]),
    (["import", "m.npz", "out.onnx"], ["arguments look swapped"]),
    (["import", "m.onnx", "nodir/m2.npz"], ["folder", "does not exist"]),
    (["import", "gone.onnx", "m2.npz"], ["'gone.onnx' is missing"]),
    (["import", ".", "m2.npz"], ["is a folder, not a file"]),
    (["info", "m.npz"], ["not a readable ONNX file", "magmadnn model file"]),
    (["info", "gone.onnx"], ["does not exist"]),
    (["train", "--plot", "m.npz", "--epochs", "1", "--quiet"], ["--plot 'm.npz' must name an image"]),
]


@pytest.mark.parametrize("argv, words", CLI_MISTAKES, ids=[" ".join(a) for a, _ in CLI_MISTAKES])
def test_cli_mistakes_are_one_line_with_status_2(files, capsys, argv, words):
    """[cli-one-line] [cli-same-file] [cli-opset-message]"""
    before = {p.name: p.read_bytes() for p in files.iterdir() if p.is_file()}
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    after = {p.name: p.read_bytes() for p in files.iterdir() if p.is_file()}
    assert after == before  # nothing written, nothing destroyed


def test_cli_export_onto_its_input_refused_even_through_a_link(files, capsys):
    """[cli-same-file] the resolved path is compared, not the spelling."""
    os.symlink("m.npz", "alias.onnx")
    before = Path("m.npz").read_bytes()
    assert cli.main(["export", "m.npz", "alias.onnx"]) == 2
    assert "is the input file" in capsys.readouterr().err
    assert Path("m.npz").read_bytes() == before


def test_cli_bad_opset_value_is_an_argparse_error(files, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["export", "m.npz", "out.onnx", "--opset", "seventeen"])
    assert stop.value.code == 2 and "an integer such as 17" in capsys.readouterr().err


def test_cli_round_trip_still_works(files, capsys):
    assert cli.main(["export", "m.npz", "again.onnx"]) == 0
    assert cli.main(["import", "again.onnx", "back.npz"]) == 0
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(mdnn.load_model("back.npz").predict(x), _mlp().predict(x), rtol=1e-6)


def test_export_refuses_a_model_file_name(tmp_path):
    """[cli-same-file] the API too: ONNX bytes never go into a .safetensors/.npz name."""
    from magmadnn.onnx import OnnxExportError

    with pytest.raises(OnnxExportError, match="ending in .onnx"):
        _mlp().export(tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


# -------------------------------------------------------------------------------------------------------- ONNX
def _restamped(tmp_path, version: int) -> Path:
    path = tmp_path / "m.onnx"
    _mlp().export(path)
    proto = onnx.load(str(path))
    proto.opset_import[0].version = version
    out = tmp_path / f"opset{version}.onnx"
    out.write_bytes(proto.SerializeToString())
    return out


@pytest.mark.parametrize("offset", [1, 50])
def test_an_opset_newer_than_installed_onnx_is_refused(tmp_path, capsys, offset):
    """[onnx-opset-range] at load, in info, and on the CLI (one line)."""
    from magmadnn.onnx import UnsupportedOnnxError, info, load

    newest = onnx.defs.onnx_opset_version()
    path = _restamped(tmp_path, newest + offset)
    for call in (load, info):
        with pytest.raises(UnsupportedOnnxError, match=f"opset {newest + offset}.*up to {newest}"):
            call(path)
    assert cli.main(["info", str(path)]) == 2
    assert f"opset {newest + offset}" in capsys.readouterr().err


def test_an_opset_older_than_7_is_refused(tmp_path):
    """[onnx-opset-range]"""
    from magmadnn.onnx import UnsupportedOnnxError, load

    with pytest.raises(UnsupportedOnnxError, match="opset 6; magmadnn imports opsets 7 to"):
        load(_restamped(tmp_path, 6))


def test_predict_takes_an_onnxruntime_style_feed(tmp_path):
    """[onnx-feed-dict] {input_name: array} for an imported model (and any model), checked names."""
    from magmadnn.onnx import load

    path = tmp_path / "m.onnx"
    _mlp().export(path)
    model = load(path, device="host")
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_array_equal(model.predict({"pixels": x}), model.predict(x))
    np.testing.assert_array_equal(_mlp().predict({"pixels": x}), _mlp().predict(x))
    with pytest.raises(ValueError, match=r"takes the inputs \['pixels'\].*unknown name\(s\) \['input'\]"):
        model.predict({"input": x})
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(model.predict({"pixels": x}), session.run(None, {"pixels": x})[0], rtol=1e-5,
                               atol=1e-6)


# -------------------------------------------------------------------------------------------------- ignore_index
IGNORE = -100


def _token_model(device, graph=False):
    model = mdnn.Sequential([layers.Input((5,), dtype="int64"), layers.Embedding(7, 8), layers.Dense(4)], seed=0)
    model.compile("adam", losses.SoftmaxCrossEntropy(ignore_index=IGNORE),
                  metrics=[metrics.Accuracy(ignore_index=IGNORE)], device=device, graph=graph)
    return model


def _token_data():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 7, (12, 5)), rng.integers(0, 4, (12, 5))
    y[4:8] = IGNORE  # the second batch of 4: nothing counted
    y[0, :3] = IGNORE  # batches count different numbers of tokens
    return x, y


def _torch_reference(logits, y):
    torch = pytest.importorskip("torch")
    t_logits = torch.tensor(logits, dtype=torch.float64).reshape(-1, logits.shape[-1])
    t_y = torch.tensor(y).reshape(-1)
    loss = torch.nn.functional.cross_entropy(t_logits, t_y, ignore_index=IGNORE)  # mean over counted tokens
    kept = t_y != IGNORE
    accuracy = (t_logits.argmax(-1)[kept] == t_y[kept]).double().mean()
    return float(loss), float(accuracy)


@pytest.fixture(params=["host", "simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def token_device(request):
    if request.param == "simulator":
        with simulator.simulated("full"):
            yield "gpu"
    else:
        yield request.param


def test_evaluate_counts_tokens_over_the_whole_set(token_device):
    """[ignore-empty-batch] a batch with nothing counted adds nothing; the figure is PyTorch's over the whole set."""
    x, y = _token_data()
    model = _token_model(token_device)
    results = model.evaluate(x, y, batch_size=4, return_dict=True)
    loss, accuracy = _torch_reference(model.predict(x), y)
    assert results["loss"] == pytest.approx(loss, rel=1e-5)
    assert results["accuracy"] == pytest.approx(accuracy, abs=1e-12)


def test_fit_through_a_fully_ignored_batch_is_finite(token_device):
    """[ignore-empty-batch] no "lower the learning rate": the batch has zero loss and zero gradients."""
    x, y = _token_data()
    model = _token_model(token_device)
    history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, validation_data=(x, y))
    assert all(np.isfinite(v).all() for v in history.history.values())
    loss, _ = _torch_reference(model.predict(x), y)
    assert model.evaluate(x, y, batch_size=4, return_dict=True)["loss"] == pytest.approx(loss, rel=1e-5)


def test_a_set_with_no_counted_target_names_ignore_index(token_device):
    """[ignore-empty-set]"""
    x, _ = _token_data()
    nothing = np.full((12, 5), IGNORE)
    model = _token_model(token_device)
    with pytest.raises(ValueError, match="evaluate: every target .* ignore_index=-100"):
        model.evaluate(x, nothing)
    with pytest.raises(ValueError, match="fit: every target .* ignore_index=-100"):
        model.fit(x, nothing, verbose=0)
    acc = metrics.Accuracy(ignore_index=IGNORE)
    acc.update(np.zeros((2, 5, 4)), np.full((2, 5), IGNORE), mdnn.backend.get("host"))
    with pytest.raises(ValueError, match="ignore_index=-100"):
        acc.result()


def test_graph_replay_with_ignore_index_counts_each_batch():
    """[ignore-in-replay] each batch's count of targets reaches the replayed graph like the batch itself: the steps
    are captured (no warning) and give eager's figures and weights exactly."""
    x, y = _token_data()
    with simulator.simulated("full"):
        runs = []
        for graph in (False, True):
            model = _token_model("gpu", graph=graph)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                evaluated = [model.evaluate(x, y, batch_size=4) for _ in range(3)]
                history = model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0,
                                    validation_data=(x, y)).history
            runs.append((evaluated, history, [w.copy() for w in model.get_weights()]))
            if graph:
                steps = [s for s in model._graphs.steps.values() if isinstance(s, replay._Step)]
                launches = {kind: sum(s.graph.launches for s in steps if s.kind == kind)
                            for kind in ("train", "evaluate")}
                assert launches["train"] >= 5 and launches["evaluate"] >= 5, launches
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    for a, b in zip(runs[0][2], runs[1][2], strict=True):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------------------ pymagma
@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    if request.param == "simulator":
        with simulator.simulated("full"):
            yield
    else:
        yield


def test_numpy_refusing_a_device_capsule_raises_its_own_error(device):
    """[dlpack-error] NumPy's error (not SystemError), and the export is released after the capsule dies."""
    import pymagma
    from pymagma import _dlpack

    a = pymagma.asarray(np.arange(6.0))
    gc.collect()  # earlier tests' dropped capsules are released now, not during this test
    before = len(_dlpack._EXPORTED)
    for _ in range(3):
        with pytest.raises((RuntimeError, BufferError, TypeError, ValueError)) as refused:
            np.from_dlpack(a)
        assert not isinstance(refused.value, SystemError)
        assert "DLTensor" in str(refused.value) or "device" in str(refused.value).lower()
    gc.collect()
    assert len(_dlpack._EXPORTED) == before
    b = pymagma.from_dlpack(a)  # consumed by pymagma itself: released by the deleter
    np.testing.assert_array_equal(b.get(), np.arange(6.0))
    del b
    gc.collect()
    assert len(_dlpack._EXPORTED) == before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_operands_are_copied_like_cupy(device, dtype):
    """[strided-gemm] matmul, gemm and batched matmul of views BLAS cannot address, against NumPy."""
    import pymagma

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((6, 8)).astype(dtype), rng.standard_normal((8, 6)).astype(dtype)
    da, db = pymagma.asarray(a), pymagma.asarray(b)
    tol = {"rtol": 1e-5 if dtype == np.float32 else 1e-12}
    np.testing.assert_allclose((da[::2] @ db[:, ::2]).get(), a[::2] @ b[:, ::2], **tol)
    np.testing.assert_allclose(pymagma.blas.gemm(da[:, ::2], db[::2]).get(), a[:, ::2] @ b[::2], **tol)
    np.testing.assert_allclose(pymagma.blas.gemm(da[:, ::2], db[::2], trans_a=False).get(), a[:, ::2] @ b[::2], **tol)
    x, y = rng.standard_normal((3, 6, 8)).astype(dtype), rng.standard_normal((3, 8, 6)).astype(dtype)
    dx, dy = pymagma.asarray(x), pymagma.asarray(y)
    np.testing.assert_allclose((dx[:, ::2] @ dy[:, :, ::2]).get(), x[:, ::2] @ y[:, :, ::2], **tol)
    np.testing.assert_allclose((dx[:, :, ::2] @ dy[:, ::2]).get(), x[:, :, ::2] @ y[:, ::2], **tol)
    assert da[::2].shape == (3, 8)  # the views are untouched
    out = pymagma.zeros((12, 12), dtype)
    with pytest.raises(ValueError, match="out has strides"):
        pymagma.blas.gemm(da[:, ::2], db[::2], out[::2, ::2])


@pytest.mark.parametrize("method", ["qr", "hybrid"])
def test_qr_lstsq_of_a_rank_deficient_matrix_names_the_rank(device, method):
    """[lstsq-rank] rank from R's diagonal with NumPy's matrix_rank tolerance; full-rank problems still solve."""
    import pymagma

    rng = np.random.default_rng(2)
    a = rng.standard_normal((7, 4))
    a[:, 3] = a[:, 0] - 2 * a[:, 1]  # rank 3
    b = rng.standard_normal(7)
    assert np.linalg.matrix_rank(a) == 3
    with pytest.raises(pymagma.LinAlgError, match=r"rank 3 < 4 columns.*method='svd'"):
        pymagma.linalg.lstsq(pymagma.asarray(a), pymagma.asarray(b), method=method)
    a[:, 3] = rng.standard_normal(7)
    x = pymagma.linalg.lstsq(pymagma.asarray(a), pymagma.asarray(b), method=method)[0].get()
    np.testing.assert_allclose(x, np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-10, atol=1e-12)


def test_device_array_equality_is_elementwise_and_hashing_is_kept(device):
    """[array-eq]"""
    import pymagma

    host = np.arange(3.0)
    a, b = pymagma.asarray(host), pymagma.asarray(np.array([0.0, 5.0, 2.0]))
    for got, expected in ((a == b, host == [0.0, 5.0, 2.0]), (a != b, host != [0.0, 5.0, 2.0]),
                          (a == a, np.ones(3, bool)), (a == 1.0, host == 1.0), (1.0 != a, host != 1.0)):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(np.from_dlpack(got, device="cpu"), expected)
    with pytest.raises(TypeError, match="host NumPy array"):  # no silent host round trip, no identity answer
        a == host  # noqa: B015
    with pytest.raises(TypeError, match="implicit conversion"):
        host == a  # noqa: B015
    assert {a: 1, b: 2}[a] == 1 and len({a, b}) == 2 and hash(a) != hash(b)
