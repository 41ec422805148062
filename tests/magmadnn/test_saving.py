"""Saving: round trips in both containers, architecture checks, damaged files, atomic writes, resumable checkpoints."""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile

import numpy as np
import pytest

from magmadnn import layers as L
from magmadnn import models, saving
from magmadnn.models import ArchitectureMismatchError, Model, ModelFileError, Sequential

FORMATS = ["npz", "safetensors"]


def data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2, 6, 6)).astype(np.float32)
    y = (x[:, 0].mean(axis=(1, 2)) > x[:, 1].mean(axis=(1, 2))).astype(np.int64) + 2 * (x[:, 0, 0, 0] > 0)
    return x, y


def cnn(seed=0, dropout=0.25, units=4):
    return Sequential([L.Input((2, 6, 6)), L.Conv2D(4, 3, padding="same", activation="relu"), L.BatchNorm(),
                       L.MaxPool2D(2), L.Flatten(), L.Dropout(dropout), L.Dense(units)], seed=seed)


def residual(seed=0):
    a, b = L.Input((5,)), L.Input((5,))
    h = L.Add()([L.Dense(5, activation="elu")(a), b])
    return Model([a, b], L.Dense(3)(L.BatchNorm()(h)), seed=seed)


def trained_cnn():
    x, y = data()
    model = cnn(seed=1)
    model.compile("adam", metrics=["accuracy"])
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)  # BatchNorm running stats are no longer 0 / 1
    return model, x


@pytest.mark.parametrize("fmt", FORMATS)
def test_save_load_round_trip_gives_identical_predictions(tmp_path, fmt):
    model, x = trained_cnn()
    path = model.save(tmp_path / f"m.{fmt}")
    loaded = models.load(path)
    assert type(loaded) is Sequential and loaded.name == model.name
    assert [type(a).__name__ for a in loaded.layers] == [type(b).__name__ for b in model.layers]
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    fresh = cnn(seed=99)
    assert not np.array_equal(fresh.predict(x), model.predict(x))
    fresh.load_weights(path)
    np.testing.assert_array_equal(fresh.predict(x), model.predict(x))


@pytest.mark.parametrize("fmt", FORMATS)
def test_functional_model_round_trip(tmp_path, fmt):
    model = residual(seed=3)
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(4, 5)), rng.normal(size=(4, 5))]
    loaded = models.load(model.save(tmp_path / f"r.{fmt}"))
    assert type(loaded) is Model
    np.testing.assert_array_equal(loaded.predict(xs), model.predict(xs))
    assert loaded.summary(print_fn=None) == model.summary(print_fn=None)


def test_files_hold_json_architecture_and_no_pickle(tmp_path):
    model, _ = trained_cnn()
    path = model.save(tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as archive:
        assert all(archive[k].dtype != object for k in archive.files)
        meta = json.loads(archive["__magmadnn__"].tobytes())
    assert meta["kind"] == "model" and meta["model"]["class_name"] == "Sequential"
    assert [e["class_name"] for e in meta["model"]["layers"]][:3] == ["Input", "Conv2D", "BatchNorm"]
    with open(model.save(tmp_path / "m.safetensors"), "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_len))
    assert json.loads(header["__metadata__"]["magmadnn"])["model"] == meta["model"]
    assert header["layers.1.kernel"]["shape"] == [4, 2, 3, 3] and header["layers.1.kernel"]["dtype"] == "F32"


@pytest.mark.parametrize("fmt", FORMATS)
def test_weights_of_another_architecture_are_refused(tmp_path, fmt):
    path = cnn().save(tmp_path / f"m.{fmt}")
    units = r"layer 6 is Dense 'dense.*kernel \(36, 4\).*kernel \(36, 5\).*units: 4 in the file, 5 here"
    with pytest.raises(ArchitectureMismatchError, match=units):
        cnn(units=5).load_weights(path)
    count = r"7 layers \(Input, Conv2D.*but model .* has 6 \(Input, Input, Dense, Add"
    with pytest.raises(ArchitectureMismatchError, match=count):
        residual().load_weights(path)
    other = Sequential([L.Input((2, 6, 6)), L.Conv2D(4, 3, padding="valid", activation="relu"), L.BatchNorm(),
                        L.MaxPool2D(2), L.Flatten(), L.Dropout(0.25), L.Dense(4)])
    with pytest.raises(ArchitectureMismatchError, match="layer 1 is Conv2D.*'same'.*'valid'"):
        other.load_weights(path)


def test_initializers_are_not_part_of_the_architecture(tmp_path):
    path = cnn().save(tmp_path / "m.npz")
    other = Sequential([L.Input((2, 6, 6)), L.Conv2D(4, 3, padding="same", activation="relu",
                                                     kernel_initializer="glorot_normal", bias_initializer="ones"),
                        L.BatchNorm(), L.MaxPool2D(2), L.Flatten(), L.Dropout(0.25), L.Dense(4)], seed=7)
    other.load_weights(path)
    x, _ = data(8)
    np.testing.assert_array_equal(other.predict(x), models.load(path).predict(x))


def test_damaged_or_foreign_files(tmp_path):
    model = cnn()
    path = model.save(tmp_path / "m.npz")
    blob = open(path, "rb").read()
    (tmp_path / "cut.npz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ModelFileError, match="not a valid .npz"):
        models.load(tmp_path / "cut.npz")
    st_path = model.save(tmp_path / "m.safetensors")
    blob = open(st_path, "rb").read()
    (tmp_path / "cut.safetensors").write_bytes(blob[:100])
    with pytest.raises(ModelFileError, match="truncated"):
        models.load(tmp_path / "cut.safetensors")
    np.savez(tmp_path / "plain.npz", w=np.ones(3))
    with pytest.raises(ModelFileError, match="not written by magmadnn"):
        models.load(tmp_path / "plain.npz")
    np.savez(tmp_path / "pickled.npz", w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ModelFileError, match="object arrays"):
        models.load(tmp_path / "pickled.npz")
    with pytest.raises(ValueError, match="'.safetensors' or '.npz'"):
        model.save(tmp_path / "m.pkl")
    with pytest.raises(FileNotFoundError):
        models.load(tmp_path / "absent.npz")


def test_safetensors_missing_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(ImportError, match="needs the 'safetensors' package.*'.npz'"):
        cnn().save(tmp_path / "m.safetensors")


def test_writes_are_atomic(tmp_path):
    target = tmp_path / "w.npz"
    saving.write_file(target, {"a": np.ones(3)}, {"kind": "x"})
    with pytest.raises(TypeError, match="object"):
        saving.write_file(target, {"a": np.array([None], dtype=object)}, {"kind": "x"})
    tensors, meta = saving.read_file(target)  # the old file is intact
    np.testing.assert_array_equal(tensors["a"], np.ones(3))
    assert os.listdir(tmp_path) == ["w.npz"]  # no temporary left behind
    with zipfile.ZipFile(io.BytesIO(target.read_bytes())) as z:
        assert sorted(z.namelist()) == ["__magmadnn__.npy", "a.npy"]


def test_a_write_that_fails_midway_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "w.safetensors"
    saving.write_file(target, {"a": np.ones(3)}, {"kind": "x"})

    def crash(fd):
        raise OSError("disk full")

    monkeypatch.setattr(saving.os, "fsync", crash)  # the new bytes are written under a temporary name, then this
    with pytest.raises(OSError, match="disk full"):
        saving.write_file(target, {"a": np.zeros(5)}, {"kind": "y"})
    tensors, meta = saving.read_file(target)
    np.testing.assert_array_equal(tensors["a"], np.ones(3))
    assert meta["kind"] == "x" and os.listdir(tmp_path) == ["w.safetensors"]


# ------------------------------------------------------------------------------------------------ checkpoints


@pytest.mark.parametrize("fmt", FORMATS)
def test_resume_from_checkpoint_matches_uninterrupted_training(tmp_path, fmt):
    """Adam state, dropout stream, shuffling order and BatchNorm statistics all carry over."""
    x, y = data(80)
    reference = cnn(seed=5)
    reference.compile("adam", metrics=["accuracy"])
    reference.fit(x, y, batch_size=16, epochs=1, verbose=0)
    path = reference.save_checkpoint(tmp_path / f"ckpt.{fmt}")
    expected = reference.fit(x, y, batch_size=16, epochs=3, initial_epoch=1, verbose=0).history
    next_loss = reference.train_on_batch(x[:16], y[:16])

    resumed = cnn(seed=123)  # different initial weights and streams, not compiled
    epoch = resumed.load_checkpoint(path)
    assert epoch == 1 and isinstance(resumed.optimizer, type(reference.optimizer))
    assert resumed.optimizer.iterations == 5
    got = resumed.fit(x, y, batch_size=16, epochs=3, initial_epoch=epoch, verbose=0).history
    assert got["loss"] == expected["loss"] and got["accuracy"] == expected["accuracy"]
    assert resumed.train_on_batch(x[:16], y[:16]) == next_loss
    for a, b in zip(resumed.get_weights(), reference.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_next_step_loss_after_resume_equals_uninterrupted(tmp_path):
    x, y = data(32)
    model = cnn(seed=2)
    model.compile("sgd")
    model.optimizer = type(model.optimizer)(0.05, momentum=0.9, nesterov=True)
    for _ in range(3):
        model.train_on_batch(x, y)
    model.save_checkpoint(tmp_path / "c.npz")
    expected = [model.train_on_batch(x, y) for _ in range(2)]
    other = cnn(seed=8)
    other.compile(model.optimizer.to_config())
    other.load_checkpoint(tmp_path / "c.npz")
    assert [other.train_on_batch(x, y) for _ in range(2)] == expected


def test_model_checkpoint_callback_writes_resumable_files(tmp_path):
    from magmadnn.callbacks import ModelCheckpoint

    x, y = data(48)
    model = cnn(seed=4)
    model.compile("adam")
    saver = ModelCheckpoint(tmp_path / "e{epoch}.npz", monitor="loss")
    model.fit(x, y, batch_size=16, epochs=2, callbacks=[saver], verbose=0)
    assert sorted(os.listdir(tmp_path)) == ["e1.npz", "e2.npz"]
    assert cnn(seed=0).load_checkpoint(tmp_path / "e2.npz") == 2


def test_checkpoint_errors(tmp_path):
    x, y = data(16)
    model = cnn()
    model.compile("adam")
    model.train_on_batch(x, y)
    cnn().save(tmp_path / "plain.npz")  # never compiled: no training state (a compiled model saves its own)
    with pytest.raises(ModelFileError, match="without training state"):
        cnn().load_checkpoint(tmp_path / "plain.npz")
    model.save_checkpoint(tmp_path / "c.npz")
    sgd_model = cnn()
    sgd_model.compile("sgd")
    with pytest.raises(ArchitectureMismatchError, match="trained with Adam.*compiled with SGD"):
        sgd_model.load_checkpoint(tmp_path / "c.npz")
    with pytest.raises(ArchitectureMismatchError):
        cnn(units=3).load_checkpoint(tmp_path / "c.npz")
    with pytest.raises(RuntimeError, match="compile"):
        cnn().save_checkpoint(tmp_path / "d.npz")
    assert models.load(tmp_path / "c.npz").predict(x).shape == (16, 4)  # a checkpoint is also a model file


# ------------------------------------------------------------- file paths (round three)
def _small():
    model = Sequential([L.Input((4,)), L.Dense(3)], seed=0)
    model.compile("sgd", "cross_entropy")
    return model


def _edited(tmp_path, key, value):
    path = _small().save(tmp_path / "m.npz")
    tensors, meta = saving.read_file(path)
    meta = {k: v for k, v in meta.items() if k not in ("format", "version")}
    if value is KeyError:
        del meta[key]
    else:
        meta[key] = value
    return saving.write_file(tmp_path / "edited.npz", tensors, meta)


def _cli_export(tmp_path, target):
    from magmadnn import cli

    pytest.importorskip("onnx")
    source = _small().save(tmp_path / "m.npz")
    return cli.main(["export", str(source), str(tmp_path / target)])


PATH_ROWS = [
    ("load-folder", lambda t: models.load_model(t), IsADirectoryError, ["is a folder", "not a model file"]),
    ("load-folder-named-npz", lambda t: (os.mkdir(t / "f.npz"), models.load_model(t / "f.npz")), IsADirectoryError,
     ["f.npz", "is a folder"]),
    ("load-weights-folder", lambda t: _small().load_weights(t), IsADirectoryError, ["is a folder"]),
    ("load-checkpoint-folder", lambda t: _small().load_checkpoint(t), IsADirectoryError, ["is a folder"]),
    ("load-checkpoint-model-file", lambda t: _small().load_checkpoint(_small().save(t / "m.npz")), ModelFileError,
     ["is a model file", "not a checkpoint", "load_model"]),
    ("load-checkpoint-uncompiled-model-file", lambda t: _small().load_checkpoint(
        Sequential([L.Input((4,)), L.Dense(3)], seed=0).save(t / "m.npz")), ModelFileError,
     ["without training state", "not a checkpoint"]),
    ("model-null", lambda t: models.load_model(_edited(t, "model", None)), ModelFileError,
     ["model configuration", "is null"]),
    ("architecture-null", lambda t: models.load_model(_edited(t, "architecture", None)), ModelFileError,
     ["architecture", "is null"]),
    ("architecture-missing", lambda t: models.load_model(_edited(t, "architecture", KeyError)), ModelFileError,
     ["architecture", "is missing"]),
    ("architecture-dict", lambda t: models.load_model(_edited(t, "architecture", {})), ModelFileError,
     ["architecture", "a dict"]),
    ("load-missing-file", lambda t: models.load_model(t / "nope.npz"), FileNotFoundError, ["does not exist"]),
    ("save-onto-folder", lambda t: (os.mkdir(t / "f.npz"), _small().save(t / "f.npz")), IsADirectoryError,
     ["it is a folder"]),
]


@pytest.mark.parametrize("call, error, words", [pytest.param(*r[1:], id=r[0]) for r in PATH_ROWS])
def test_file_paths_a_user_gets_wrong_are_named(call, error, words, tmp_path):
    """Fault list, file paths (each against what it was):
      load_model(folder), load_model("f.npz" that is a folder)   IsADirectoryError "is a folder" (was: "must end in
                                                                 .npz" / "does not exist")
      load_weights(folder), load_checkpoint(folder)              IsADirectoryError
      load_checkpoint(a compiled model's Model.save file)        ModelFileError: a model file, not a checkpoint,
                                                                 load it with load_model (was: accepted silently)
      load_checkpoint(an uncompiled model's file)                ModelFileError naming both
      a model file whose configuration / architecture is null    ModelFileError naming which is null (was: "not a
                                                                 model or checkpoint (kind 'model')")
      ... whose architecture is missing / a dict                 ModelFileError naming it
      load_model(missing file)                                   FileNotFoundError (unchanged)
      save onto a folder                                         IsADirectoryError (unchanged)
      magmadnn export m.npz missing/m.onnx                       exit 2, one line naming the missing folder (test
                                                                 below)
      a cuDNN tensor of 9 dimensions                             ValueError naming the limit 8 (CUDNN_DIM_MAX) (test
                                                                 below; was CUDNN_STATUS_NOT_SUPPORTED)
    """
    with pytest.raises(error) as caught:
        call(tmp_path)
    missing = [w for w in words if w not in str(caught.value)]
    assert not missing, f"{caught.value!r} lacks {missing}"


def test_the_cli_names_a_missing_output_folder(tmp_path, capsys):
    assert _cli_export(tmp_path, "missing/m.onnx") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "missing") in err and "does not exist" in err


def test_a_cudnn_descriptor_of_nine_dimensions_names_the_limit():
    from pymagma import _cudnn, simulator

    with simulator.simulated("full"), pytest.raises(ValueError, match="at most 8 dimensions.*CUDNN_DIM_MAX.*got 9"):
        _cudnn.TensorDescriptor((1,) * 9, _cudnn.DataType(0))
