"""The layers a Keras user reaches for after the first day, side by side with Keras 3 (torch backend) from identical
weights: Subtract/Multiply/Average/Maximum/Minimum, RepeatVector, ZeroPadding2D, Cropping2D, Rescaling,
Normalization (with adapt) and Conv2D's ``dilation_rate=``; bad inputs; save/reload; the simulated device."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import close, compile_both, fit_both, same_weights, twins

K = keras.layers
RNG = np.random.default_rng(11)
XA = RNG.standard_normal((32, 4)).astype(np.float32)
XB = RNG.standard_normal((32, 4)).astype(np.float32)
YR = RNG.standard_normal((32, 2)).astype(np.float32)
IMG = RNG.standard_normal((16, 2, 7, 6)).astype(np.float32)


def _conv_to_keras(ws):
    return [w.transpose(2, 3, 1, 0) if w.ndim == 4 else w for w in ws]


@pytest.mark.parametrize("name", ["Subtract", "Multiply", "Average", "Maximum", "Minimum", "Add"])
def test_merging_layers_train_as_keras(name):
    def build(lib, inputs):
        a, b = inputs((4,)), inputs((4,))
        merged = getattr(lib, name)()([lib.Dense(3, activation="tanh")(a), lib.Dense(3, activation="tanh")(b)])
        return [a, b], lib.Dense(2)(merged)

    ours = mdnn.Model(*build(L, L.Input), seed=0)
    theirs = keras.Model(*build(K, keras.Input))
    theirs.set_weights(ours.get_weights())
    compile_both(ours, theirs, "adam", "mse")
    close(ours.predict([XA, XB], verbose=0), theirs.predict([XA, XB], verbose=0))
    fit_both(ours, theirs, [XA, XB], YR, epochs=2, batch_size=8)
    same_weights(ours, theirs)


def test_three_inputs_average_maximum_minimum_as_keras():
    xs = [RNG.standard_normal((5, 3, 4)).astype(np.float32) for _ in range(3)]
    for name in ("Average", "Maximum", "Minimum", "Multiply"):
        ours = getattr(L, name)()(xs).numpy()
        close(ours, keras.ops.convert_to_numpy(getattr(K, name)()(xs)))


def test_repeat_vector_into_an_lstm_as_keras():
    ours, theirs = twins([L.Input((4,)), L.Dense(3), L.RepeatVector(5), L.LSTM(2, return_sequences=True),
                          L.Flatten(), L.Dense(2)],
                         [keras.Input((4,)), K.Dense(3), K.RepeatVector(5), K.LSTM(2, return_sequences=True),
                          K.Flatten(), K.Dense(2)])
    compile_both(ours, theirs, "adam", "mse")
    fit_both(ours, theirs, XA, YR, epochs=2, batch_size=8)
    same_weights(ours, theirs)


@pytest.mark.parametrize("padding, cropping", [(1, ((1, 0), (2, 1))), ((2, 1), 1),
                                               (((0, 2), (1, 3)), ((1, 1), (0, 2)))])
def test_zero_padding_and_cropping_around_a_dilated_conv_as_keras(padding, cropping):
    ours, theirs = twins([L.Input((2, 7, 6)), L.ZeroPadding2D(padding), L.Conv2D(3, 3, dilation_rate=2),
                          L.Cropping2D(cropping), L.Flatten(), L.Dense(2)],
                         [keras.Input((7, 6, 2)), K.ZeroPadding2D(padding), K.Conv2D(3, 3, dilation_rate=2),
                          K.Cropping2D(cropping), K.Permute((3, 1, 2)), K.Flatten(), K.Dense(2)], _conv_to_keras)
    assert ours.layers[0].output_shape == tuple(np.roll(theirs.layers[0].output.shape[1:], 1))
    nhwc = IMG.transpose(0, 2, 3, 1)
    close(ours.predict(IMG, verbose=0), theirs.predict(nhwc, verbose=0))
    compile_both(ours, theirs, "sgd", "mse")
    for _ in range(2):
        close(ours.train_on_batch(IMG, YR[:16]), theirs.train_on_batch(nhwc, YR[:16]))
    same_weights(ours, theirs, _conv_to_keras)


def test_rescaling_and_an_adapted_normalization_as_keras():
    data = (RNG.standard_normal((32, 4)) * [1.0, 5.0, 0.1, 3.0] + [0.0, 2.0, -1.0, 7.0]).astype(np.float32)
    mine, ref = L.Normalization(), K.Normalization()
    mine.adapt(data)
    ref.adapt(data)
    for a, b in zip(mine.get_weights(), ref.get_weights(), strict=True):
        close(a, b)
    ours = mdnn.Sequential([L.Input((4,)), L.Rescaling(0.5, offset=1.0), mine, L.Dense(2)], seed=0)
    theirs = keras.Sequential([keras.Input((4,)), K.Rescaling(0.5, offset=1.0), ref, K.Dense(2)])
    theirs.layers[-1].set_weights(ours.layers[-1].get_weights())
    close(ours.predict(data, verbose=0), theirs.predict(data, verbose=0))
    compile_both(ours, theirs, "adam", "mse")
    fit_both(ours, theirs, data, YR, epochs=2, batch_size=8)
    same_weights(ours, theirs)
    given = L.Normalization(axis=1, mean=[1.0, -1.0], variance=[4.0, 0.25])
    close(given(IMG).numpy(), (IMG - np.array([1.0, -1.0]).reshape(1, 2, 1, 1)) / np.array([2.0, 0.5]).reshape(
        1, 2, 1, 1))
    inverse = L.Normalization(axis=1, mean=[1.0, -1.0], variance=[4.0, 0.25], invert=True)
    close(inverse(given(IMG)).numpy(), IMG)
    close(K.Normalization(axis=-1, mean=[1.0, -1.0], variance=[4.0, 0.25])(IMG.transpose(0, 2, 3, 1)),
          given(IMG).numpy().transpose(0, 2, 3, 1))


@pytest.mark.parametrize("make, error, words", [
    (lambda: L.Subtract()([XA, XA, XA]), ValueError, "exactly two inputs"),
    (lambda: L.Maximum()([XA, XB[:, :3]]), ValueError, "needs inputs of one shape"),
    (lambda: L.Multiply()(XA), ValueError, "a list of at least two inputs"),
    (lambda: L.RepeatVector(0), ValueError, "n"),
    (lambda: L.RepeatVector(2)(IMG), ValueError, r"a per-sample vector \(features,\)"),
    (lambda: L.ZeroPadding2D(-1), ValueError, "padding must be an int >= 0"),
    (lambda: L.ZeroPadding2D((1, 2, 3)), ValueError, r"\(\(top, bottom\), \(left, right\)\)"),
    (lambda: L.ZeroPadding2D(1, data_format="channels_last"), ValueError, "NCHW"),
    (lambda: L.ZeroPadding2D(1)(XA), ValueError, r"a per-sample image \(C, H, W\)"),
    (lambda: L.Cropping2D(4)(IMG), ValueError, "larger than the cropping"),
    (lambda: L.Rescaling("half"), TypeError, "scale must be a real number"),
    (lambda: L.Normalization(axis=0), ValueError, "batch axis"),
    (lambda: L.Normalization(mean=[1.0]), ValueError, "both mean and variance"),
    (lambda: L.Normalization(mean=[0.0], variance=[1.0]).adapt(XA), ValueError, "were given"),
    (lambda: L.Normalization(axis=3)(XA), ValueError, "axis 3"),
    (lambda: L.Normalization().adapt(np.zeros((0, 4))), ValueError, "non-empty"),
    (lambda: L.Conv2D(2, 3, dilation=2, dilation_rate=3), ValueError, "differ; give one"),
])
def test_bad_inputs_to_the_new_layers_are_clear_errors(make, error, words):
    with pytest.raises(error, match=words):
        make()


def _all_new_layers():
    a, b = L.Input((2, 7, 6)), L.Input((4,))
    image = L.Cropping2D(((1, 0), (0, 1)))(L.Conv2D(3, 3, dilation_rate=2)(L.ZeroPadding2D(1)(L.Rescaling(0.1)(a))))
    flat = L.Dense(4)(L.Flatten()(image))
    vector = L.Normalization()(b)
    merged = [m()([flat, vector]) for m in (L.Subtract, L.Multiply, L.Average, L.Maximum, L.Minimum)]
    joined = L.Concatenate()(merged)
    seq = L.LSTM(3)(L.RepeatVector(2)(joined))
    return mdnn.Model([a, b], L.Dense(2)(seq), seed=4)


def test_a_model_of_the_new_layers_saves_and_reloads_bit_for_bit(tmp_path):
    model = _all_new_layers()
    model.layers[[type(la).__name__ for la in model.layers].index("Normalization")].adapt(XA)
    model.compile("adam", "mse")
    model.fit([IMG, XA[:16]], YR[:16], epochs=2, batch_size=8, verbose=0)
    again = mdnn.load_model(model.save(tmp_path / "m.safetensors"))
    np.testing.assert_array_equal(again.predict([IMG, XA[:16]], verbose=0), model.predict([IMG, XA[:16]], verbose=0))
    for x, y in zip(model.get_weights(), again.get_weights(), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.native
def test_the_new_layers_on_the_simulated_device_match_the_host_and_replay():
    from pymagma import simulator

    def run(device, graph=False):
        model = _all_new_layers()
        norm = model.layers[[type(la).__name__ for la in model.layers].index("Normalization")]
        norm.adapt(XA)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing keeps the step from being captured
            model.compile(mdnn.optimizers.Adam(0.01), "mse", device=device, graph=graph)
            history = model.fit([IMG, XA[:16]], YR[:16], epochs=3, batch_size=8, verbose=0, shuffle=False).history
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
