"""A saved compiled model comes back compiled: ``load_model`` restores the optimizer and its slots, the loss, the
metrics, the trainable flags and the random streams, so ``evaluate`` works at once and training resumes exactly."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import layers as L
from magmadnn import models
from magmadnn import optimizers as O
from magmadnn.models import Sequential
from tests.magmadnn.backends import model_device

RNG = np.random.default_rng(11)
X = RNG.standard_normal((40, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 40)


@pytest.fixture(params=["host", "simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


def _model(device):
    model = Sequential([L.Input((6,)), L.Dense(8, activation="relu"), L.Dropout(0.3), L.BatchNorm(),
                        L.Dense(3)], seed=4, device=device)
    model.compile(O.Adam(0.01), "cross_entropy", ["accuracy"])
    return model


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_two_epochs_equal_one_then_save_load_and_one_more_bit_for_bit(tmp_path, device, suffix):
    straight = _model(device)
    straight.fit(X, Y, batch_size=8, epochs=2, verbose=0)  # shuffled batches, dropout: the streams must resume

    first = _model(device)
    first.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    before = first.evaluate(X, Y, verbose=0)
    first.save(tmp_path / f"m{suffix}")
    loaded = models.load_model(tmp_path / f"m{suffix}", device=device)
    assert loaded.compiled and type(loaded.optimizer).__name__ == "Adam"
    assert loaded.optimizer.iterations == first.optimizer.iterations
    assert loaded.evaluate(X, Y, verbose=0) == before  # right after loading: no "call compile first"
    loaded.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    for a, b in zip(straight.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    for index, slots in straight.optimizer.slot_arrays.items():
        for name, array in slots.items():
            np.testing.assert_array_equal(straight.xp.to_numpy(array),
                                          loaded.xp.to_numpy(loaded.optimizer.slot_arrays[index][name]))


def test_trainable_flags_are_saved_and_loaded(tmp_path):
    model = _model("host")
    model.layers[0].trainable = False
    model.layers[2].trainable = False
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    model.save(tmp_path / "m.npz")
    loaded = models.load_model(tmp_path / "m.npz")
    assert [la.trainable for la in loaded.layers] == [False, True, False, True]
    assert len(loaded.trainable_weights) == len(model.trainable_weights) == 2
    frozen = loaded.layers[0].get_weights()
    loaded.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    for a, b in zip(loaded.layers[0].get_weights(), frozen):
        np.testing.assert_array_equal(a, b)
    whole = _model("host")
    whole.trainable = False
    whole.save(tmp_path / "w.npz")
    again = models.load_model(tmp_path / "w.npz")
    assert not again.trainable and again.trainable_weights == [] and len(again.non_trainable_weights) == 8
    plain = _model("host")  # a file's flags never stop load_weights into a model frozen otherwise
    plain.load_weights(tmp_path / "m.npz")


def test_a_compiled_state_that_cannot_be_written_is_left_out_with_a_warning(tmp_path):
    model = _model("host")
    model.optimizer.lr = lambda step: 0.01  # a plain function: not JSON
    with pytest.warns(RuntimeWarning, match="saved without its compiled state"):
        model.save(tmp_path / "m.npz")
    loaded = models.load_model(tmp_path / "m.npz")
    assert not loaded.compiled
    with pytest.raises(RuntimeError, match="compile"):
        loaded.evaluate(X, Y, verbose=0)


def test_load_model_compile_false_and_keras_compile_arguments(tmp_path):
    model = _model("host")
    model.compile(O.Adam(0.01), "cross_entropy", ["accuracy"], run_eagerly=True, jit_compile=False)
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    model.save(tmp_path / "m.npz")
    bare = models.load_model(tmp_path / "m.npz", compile=False)
    assert not bare.compiled
    np.testing.assert_array_equal(bare.predict(X), model.predict(X))
    with pytest.raises(TypeError, match="jit_compile must be"):
        model.compile("sgd", jit_compile="xla")
