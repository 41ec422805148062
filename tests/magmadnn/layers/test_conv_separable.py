"""SeparableConv2D side by side with Keras 3 (torch backend) from identical weights (NCHW here, NHWC there): outputs
and training with strides, padding, dilation, depth_multiplier and activations; Keras' initializers and defaults;
bad inputs; save/reload; the simulated device and graph replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import close, compile_both, same_weights, twins

K = keras.layers
RNG = np.random.default_rng(51)
IMG = RNG.standard_normal((8, 3, 9, 8)).astype(np.float32)
Y = RNG.standard_normal((8, 2)).astype(np.float32)


def _to_keras(ws):
    """depthwise (C m, 1, R, S) -> (R, S, C, m); pointwise (F, C m, 1, 1) -> (1, 1, C m, F); Dense unchanged."""
    out, channels = [], 3
    for w in ws:
        if w.ndim == 4 and w.shape[1] == 1 and w.shape[2:] != (1, 1):
            m = w.shape[0] // channels
            out.append(w.reshape(channels, m, *w.shape[2:]).transpose(2, 3, 0, 1))
        elif w.ndim == 4:
            out.append(w.transpose(2, 3, 1, 0))
        else:
            out.append(w)
    return out


@pytest.mark.parametrize("kwargs", [
    {}, {"strides": 2, "padding": "same", "depth_multiplier": 2, "activation": "relu"},
    {"dilation_rate": 2, "use_bias": False, "activation": "tanh"}, {"kernel_size": (3, 2), "depth_multiplier": 3},
])
def test_separable_conv2d_trains_as_keras(kwargs):
    kwargs = {"kernel_size": 3, **kwargs}
    ours, theirs = twins([L.Input((3, 9, 8)), L.SeparableConv2D(4, **kwargs), L.Flatten(), L.Dense(2)],
                         [keras.Input((9, 8, 3)), K.SeparableConv2D(4, **kwargs), K.Permute((3, 1, 2)), K.Flatten(),
                          K.Dense(2)], _to_keras)
    assert ours.layers[0].output_shape == tuple(np.roll(theirs.layers[0].output.shape[1:], 1))
    nhwc = IMG.transpose(0, 2, 3, 1)
    close(ours.predict(IMG, verbose=0), theirs.predict(nhwc, verbose=0))
    compile_both(ours, theirs, "sgd", "mse")
    for _ in range(2):
        close(ours.train_on_batch(IMG, Y), theirs.train_on_batch(nhwc, Y))
    same_weights(ours, theirs, _to_keras)


def test_separable_conv2d_defaults_and_initial_scale_are_keras():
    ours, theirs = L.SeparableConv2D(64, 3), K.SeparableConv2D(64, 3)
    mine, ref = ours.get_config(), theirs.get_config()
    for key in ("depthwise_initializer", "pointwise_initializer", "bias_initializer"):
        assert mine[key]["class_name"] == ref[key]["class_name"]
    assert (mine["depth_multiplier"], mine["padding"], mine["use_bias"]) == (ref["depth_multiplier"], ref["padding"],
                                                                          ref["use_bias"])
    mdnn.Sequential([L.Input((32, 8, 8)), ours], seed=0)
    theirs.build((None, 8, 8, 32))
    for a, b in zip(ours.get_weights()[:2], theirs.get_weights()[:2], strict=True):
        assert a.size == b.size
        np.testing.assert_allclose(a.std(), keras.ops.convert_to_numpy(b).std(), rtol=0.15)


@pytest.mark.parametrize("make, error, words", [
    (lambda: L.SeparableConv2D(0, 3), ValueError, "filters"),
    (lambda: L.SeparableConv2D(2, 3, depth_multiplier=0), ValueError, "depth_multiplier"),
    (lambda: L.SeparableConv2D(2, 3, dilation=2, dilation_rate=3), ValueError, "differ; give one"),
    (lambda: L.SeparableConv2D(2, 3)(np.zeros((2, 5, 4), np.float32)), ValueError, r"\(C, H, W\)"),
    (lambda: L.SeparableConv2D(2, 5)(IMG[:, :, :3, :3]), ValueError, "kernel"),
])
def test_bad_inputs_to_separable_conv2d_are_clear_errors(make, error, words):
    with pytest.raises(error, match=words):
        make()


def _model():
    return mdnn.Sequential([L.Input((3, 9, 8)), L.SeparableConv2D(4, 3, depth_multiplier=2, activation="relu"),
                            L.SeparableConv2D(2, 3, strides=2, padding="same"), L.Flatten(), L.Dense(2)], seed=6)


def test_separable_conv2d_saves_and_reloads_bit_for_bit(tmp_path):
    model = _model()
    model.compile("adam", "mse")
    model.fit(IMG, Y, epochs=2, batch_size=4, verbose=0)
    again = mdnn.load_model(model.save(tmp_path / "m.safetensors"))
    assert [la.get_config() for la in again.layers] == [la.get_config() for la in model.layers]
    np.testing.assert_array_equal(again.predict(IMG, verbose=0), model.predict(IMG, verbose=0))


@pytest.mark.native
def test_separable_conv2d_on_the_simulated_device_matches_the_host_and_replays():
    from pymagma import simulator

    def run(device, graph=False):
        model = _model()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing keeps the step from being captured
            model.compile(mdnn.optimizers.Adam(0.01), "mse", device=device, graph=graph)
            history = model.fit(IMG, Y, epochs=3, batch_size=4, verbose=0, shuffle=False).history
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
