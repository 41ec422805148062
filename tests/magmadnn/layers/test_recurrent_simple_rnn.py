"""SimpleRNN side by side with Keras 3 (torch backend) from identical weights: outputs, return_sequences,
return_state, go_backwards, masks, initial states, activations, use_bias and training; Bidirectional over it; bad
inputs; save/reload; the simulated device and graph replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import close, compile_both, fit_both, same_weights, twins

K = keras.layers
RNG = np.random.default_rng(31)
SEQ = RNG.standard_normal((24, 6, 3)).astype(np.float32)
Y = RNG.standard_normal((24, 2)).astype(np.float32)


@pytest.mark.parametrize("kwargs", [
    {}, {"return_sequences": True}, {"go_backwards": True, "return_sequences": True},
    {"activation": "relu", "use_bias": False}, {"return_state": True}, {"return_sequences": True,
                                                                         "return_state": True, "go_backwards": True},
])
def test_simple_rnn_outputs_as_keras(kwargs):
    ours, theirs = L.SimpleRNN(4, seed=0, **kwargs), K.SimpleRNN(4, **kwargs)
    mine = ours(SEQ)
    theirs.build(SEQ.shape)
    theirs.set_weights(ours.get_weights())
    ref = theirs(SEQ)
    mine, ref = (mine, ref) if kwargs.get("return_state") else ([mine], [ref])
    assert len(mine) == len(ref)
    for a, b in zip(mine, ref, strict=True):
        close(a.numpy(), keras.ops.convert_to_numpy(b))
    assert [w.shape for w in ours.get_weights()] == [tuple(w.shape) for w in theirs.get_weights()]


def test_simple_rnn_initial_state_and_masks_as_keras():
    ids = np.array([[3, 1, 0, 0], [2, 2, 4, 0], [1, 0, 0, 0]], np.int64)
    ours = mdnn.Sequential([L.Input((4,), dtype="int64"), L.Embedding(5, 3, mask_zero=True),
                            L.SimpleRNN(3, return_sequences=True), L.SimpleRNN(2)], seed=0)
    theirs = keras.Sequential([keras.Input((4,), dtype="int64"), K.Embedding(5, 3, mask_zero=True),
                               K.SimpleRNN(3, return_sequences=True), K.SimpleRNN(2)])
    theirs.set_weights(ours.get_weights())
    close(ours.predict(ids, verbose=0), theirs.predict(ids, verbose=0))
    h0 = RNG.standard_normal((24, 4)).astype(np.float32)
    layer, ref = L.SimpleRNN(4, seed=1), K.SimpleRNN(4)
    out = layer(SEQ, initial_state=[h0])
    ref.build(SEQ.shape)
    ref.set_weights(layer.get_weights())
    close(out.numpy(), keras.ops.convert_to_numpy(ref(SEQ, initial_state=[h0])))


def test_simple_rnn_and_a_bidirectional_one_train_as_keras():
    ours, theirs = twins([L.Input((6, 3)), L.Bidirectional(L.SimpleRNN(4, return_sequences=True)),
                          L.SimpleRNN(3), L.Dense(2)],
                         [keras.Input((6, 3)), K.Bidirectional(K.SimpleRNN(4, return_sequences=True)),
                          K.SimpleRNN(3), K.Dense(2)])
    close(ours.predict(SEQ, verbose=0), theirs.predict(SEQ, verbose=0))
    compile_both(ours, theirs, "adam", "mse")
    fit_both(ours, theirs, SEQ, Y, epochs=2, batch_size=8)
    same_weights(ours, theirs)


def test_simple_rnn_defaults_are_keras():
    ours, theirs = L.SimpleRNN(4).get_config(), K.SimpleRNN(4).get_config()
    for key in ("activation", "use_bias", "return_sequences"):
        assert ours[key] == theirs[key]
    for key in ("kernel_initializer", "recurrent_initializer", "bias_initializer"):
        assert ours[key]["class_name"].lower().replace("_", "") == theirs[key]["class_name"].lower().replace("_", "")


@pytest.mark.parametrize("make, error, words", [
    (lambda: L.SimpleRNN(0), ValueError, "units"),
    (lambda: L.SimpleRNN(2, activation="nope"), ValueError, "nope"),
    (lambda: L.SimpleRNN(2, use_bias=1), TypeError, "use_bias must be True or False"),
    (lambda: L.SimpleRNN(2, dropout=0.5), TypeError, "Dropout layer"),
    (lambda: L.SimpleRNN(2)(np.zeros((3, 4), np.float32)), ValueError, r"\(time, features\)"),
    (lambda: L.SimpleRNN(2)(SEQ, initial_state=[np.zeros((24, 2)), np.zeros((24, 2))]), ValueError, r"\[h\]"),
])
def test_bad_inputs_to_simple_rnn_are_clear_errors(make, error, words):
    with pytest.raises(error, match=words):
        make()


def _model():
    return mdnn.Sequential([L.Input((6, 3)), L.SimpleRNN(5, return_sequences=True, go_backwards=True),
                            L.SimpleRNN(4, activation="relu", use_bias=False), L.Dense(2)], seed=5)


def test_simple_rnn_saves_and_reloads_bit_for_bit(tmp_path):
    model = _model()
    model.compile("adam", "mse")
    model.fit(SEQ, Y, epochs=2, batch_size=8, verbose=0)
    again = mdnn.load_model(model.save(tmp_path / "m.safetensors"))
    assert [la.get_config() for la in again.layers] == [la.get_config() for la in model.layers]
    np.testing.assert_array_equal(again.predict(SEQ, verbose=0), model.predict(SEQ, verbose=0))


@pytest.mark.native
def test_simple_rnn_on_the_simulated_device_matches_the_host_and_replays():
    from pymagma import simulator

    def run(device, graph=False):
        model = _model()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing keeps the step from being captured
            model.compile(mdnn.optimizers.Adam(0.01), "mse", device=device, graph=graph)
            history = model.fit(SEQ, Y, epochs=3, batch_size=8, verbose=0, shuffle=False).history
        return history, model.get_weights()

    host, host_weights = run("host")
    with simulator.simulated("full"):
        device, device_weights = run("gpu")
        replayed, replayed_weights = run("gpu", graph=True)
    np.testing.assert_allclose(device["loss"], host["loss"], rtol=1e-5)
    for x, y in zip(host_weights, device_weights, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    assert device == replayed
    for x, y in zip(device_weights, replayed_weights, strict=True):
        np.testing.assert_array_equal(x, y)
