"""TimeDistributed side by side with Keras 3 (torch backend) from identical weights: Dense, Conv2D (NCHW here,
NHWC there) and BatchNormalization (its moving statistics) applied to every step; bad inputs; save/reload; the
simulated device and graph replay (a wrapped Dropout's draws replayed)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import close, compile_both, fit_both, same_weights, twins

K = keras.layers
RNG = np.random.default_rng(21)
SEQ = RNG.standard_normal((24, 5, 3)).astype(np.float32)
CLIPS = RNG.standard_normal((8, 4, 2, 6, 5)).astype(np.float32)  # (N, T, C, H, W)
Y = RNG.standard_normal((24, 2)).astype(np.float32)


def _conv_to_keras(ws):
    return [w.transpose(2, 3, 1, 0) if w.ndim == 4 else w for w in ws]


def test_time_distributed_dense_and_batch_norm_train_as_keras():
    ours, theirs = twins([L.Input((5, 3)), L.TimeDistributed(L.Dense(4, activation="tanh")),
                          L.TimeDistributed(L.BatchNormalization()), L.Flatten(), L.Dense(2)],
                         [keras.Input((5, 3)), K.TimeDistributed(K.Dense(4, activation="tanh")),
                          K.TimeDistributed(K.BatchNormalization()), K.Flatten(), K.Dense(2)])
    assert ours.layers[0].output_shape == tuple(theirs.layers[0].output.shape[1:])
    close(ours.predict(SEQ, verbose=0), theirs.predict(SEQ, verbose=0))
    compile_both(ours, theirs, "adam", "mse")
    fit_both(ours, theirs, SEQ, Y, epochs=2, batch_size=8)
    same_weights(ours, theirs)  # the moving mean and variance included


def test_time_distributed_conv2d_on_clips_as_keras():
    ours, theirs = twins([L.Input((4, 2, 6, 5)), L.TimeDistributed(L.Conv2D(3, 3, activation="relu")),
                          L.TimeDistributed(L.GlobalAveragePooling2D()), L.LSTM(3), L.Dense(2)],
                         [keras.Input((4, 6, 5, 2)), K.TimeDistributed(K.Conv2D(3, 3, activation="relu")),
                          K.TimeDistributed(K.GlobalAveragePooling2D()), K.LSTM(3), K.Dense(2)], _conv_to_keras)
    nhwc = CLIPS.transpose(0, 1, 3, 4, 2)
    close(ours.predict(CLIPS, verbose=0), theirs.predict(nhwc, verbose=0))
    compile_both(ours, theirs, "sgd", "mse")
    for _ in range(2):
        close(ours.train_on_batch(CLIPS, Y[:8]), theirs.train_on_batch(nhwc, Y[:8]))
    same_weights(ours, theirs, _conv_to_keras)


def test_a_mask_passes_through_time_distributed_as_keras():
    ids = np.array([[3, 1, 0, 0], [2, 2, 4, 0]], np.int64)
    ours = mdnn.Sequential([L.Input((4,), dtype="int64"), L.Embedding(5, 3, mask_zero=True),
                            L.TimeDistributed(L.Dense(2)), L.LSTM(2)], seed=0)
    theirs = keras.Sequential([keras.Input((4,), dtype="int64"), K.Embedding(5, 3, mask_zero=True),
                               K.TimeDistributed(K.Dense(2)), K.LSTM(2)])
    theirs.set_weights(ours.get_weights())
    close(ours.predict(ids, verbose=0), theirs.predict(ids, verbose=0))


@pytest.mark.parametrize("make, error, words", [
    (lambda: L.TimeDistributed("dense"), TypeError, "wraps a layer"),
    (lambda: L.TimeDistributed(L.Dense(2))(np.zeros((4, 3), np.float32)), ValueError, r"\(time, \.\.\.\)"),
    (lambda: L.TimeDistributed(L.Conv2D(2, 3))(SEQ), ValueError, r"\(C, H, W\)"),
    (lambda: L.TimeDistributed(L.LSTM(2, return_state=True))(CLIPS[:, :, 0]), ValueError, "one output"),
])
def test_bad_inputs_to_time_distributed_are_clear_errors(make, error, words):
    with pytest.raises(error, match=words):
        make()


def _model():
    return mdnn.Sequential([L.Input((5, 3)), L.TimeDistributed(L.Dense(4, activation="relu")),
                            L.TimeDistributed(L.Dropout(0.3)), L.TimeDistributed(L.BatchNormalization()),
                            L.Flatten(), L.Dense(2)], seed=3)


def test_time_distributed_saves_and_reloads_bit_for_bit(tmp_path):
    model = _model()
    model.compile("adam", "mse")
    model.fit(SEQ, Y, epochs=2, batch_size=8, verbose=0)
    again = mdnn.load_model(model.save(tmp_path / "m.safetensors"))
    assert [la.get_config() for la in again.layers] == [la.get_config() for la in model.layers]
    np.testing.assert_array_equal(again.predict(SEQ, verbose=0), model.predict(SEQ, verbose=0))
    for x, y in zip(model.get_weights(), again.get_weights(), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.native
def test_time_distributed_on_the_simulated_device_matches_the_host_and_replays():
    from pymagma import simulator

    def run(device, graph=False, model=_model):
        model = model()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing keeps the step from being captured
            model.compile(mdnn.optimizers.Adam(0.01), "mse", device=device, graph=graph)
            history = model.fit(SEQ, Y, epochs=3, batch_size=8, verbose=0, shuffle=False).history
        return history, model.get_weights()

    def no_dropout():
        return mdnn.Sequential([L.Input((5, 3)), L.TimeDistributed(L.Dense(4, activation="relu")),
                                L.TimeDistributed(L.BatchNormalization()), L.Flatten(), L.Dense(2)], seed=3)

    host, host_weights = run("host", model=no_dropout)
    with simulator.simulated("full"):
        device_plain, device_plain_weights = run("gpu", model=no_dropout)
        device, device_weights = run("gpu")
        replayed, replayed_weights = run("gpu", graph=True)
    np.testing.assert_allclose(device_plain["loss"], host["loss"], rtol=1e-5)
    for x, y in zip(host_weights, device_plain_weights, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    assert device == replayed
    for x, y in zip(device_weights, replayed_weights, strict=True):
        np.testing.assert_array_equal(x, y)
