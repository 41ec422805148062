"""SpatialDropout1D/2D and GaussianNoise side by side with Keras 3 (torch backend): the draws differ, so their
behaviour is compared (identity at inference, whole channels dropped with Keras' scale, the noise's statistics);
bad inputs; save/reload; the simulated device and graph replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import close

K = keras.layers
RNG = np.random.default_rng(5)
IMG = RNG.standard_normal((64, 6, 5, 4)).astype(np.float32)
SEQ = RNG.standard_normal((64, 7, 5)).astype(np.float32)


def _np(t):
    return keras.ops.convert_to_numpy(t)


def _dropped_whole(y, x, rate, axes):
    """Every (sample, channel) slice is either all zero or x / (1 - rate); the fraction dropped."""
    kept = np.all(np.isclose(y, x / (1 - rate), rtol=1e-6, atol=1e-7), axis=axes)
    dropped = np.all(y == 0, axis=axes)
    assert np.all(kept ^ dropped)
    return dropped.mean()


@pytest.mark.parametrize("name, x, keras_x, axes", [
    ("SpatialDropout2D", IMG, IMG.transpose(0, 2, 3, 1), (2, 3)),
    ("SpatialDropout1D", SEQ, SEQ, (1,)),
])
def test_spatial_dropout_drops_whole_channels_as_keras(name, x, keras_x, axes):
    rate = 0.4
    ours, theirs = getattr(L, name)(rate, seed=3), getattr(K, name)(rate, seed=3)
    close(ours(x).numpy(), x)  # identity at inference, as Keras'
    close(_np(theirs(keras_x)), keras_x)
    keras_axes = (1, 2) if name == "SpatialDropout2D" else axes
    fractions = [_dropped_whole(ours(x, training=True).numpy(), x, rate, axes),
                 _dropped_whole(_np(theirs(keras_x, training=True)), keras_x, rate, keras_axes)]
    for f in fractions:  # 384 / 320 Bernoulli(0.4) draws: within 5 standard deviations
        assert abs(f - rate) < 5 * np.sqrt(rate * (1 - rate) / 320)
    assert not np.array_equal(ours(x, training=True).numpy(), ours(x, training=True).numpy())  # fresh draws


def test_gaussian_noise_has_keras_statistics_and_is_identity_at_inference():
    x = np.zeros((200, 50), np.float32)
    ours, theirs = L.GaussianNoise(0.3, seed=1), K.GaussianNoise(0.3, seed=1)
    close(L.GaussianNoise(0.3)(IMG).numpy(), IMG)
    close(_np(K.GaussianNoise(0.3)(IMG)), IMG)
    for noise in (ours(x, training=True).numpy(), _np(theirs(x, training=True))):
        assert abs(noise.mean()) < 5 * 0.3 / 100
        assert abs(noise.std() - 0.3) < 0.01
    assert L.GaussianNoise(0.3)(IMG, training=True).dtype == IMG.dtype


def test_a_model_with_noise_trains_as_keras_when_the_noise_is_off():
    """rate 0 / stddev 0: the layers are identities while training too, so the training matches Keras'."""
    from tests.magmadnn.suites.test_keras_day_one import compile_both, fit_both, same_weights, twins

    y = RNG.standard_normal((64, 2)).astype(np.float32)
    ours, theirs = twins([L.Input((7, 5)), L.SpatialDropout1D(0.0), L.GaussianNoise(0.0), L.Flatten(), L.Dense(2)],
                         [keras.Input((7, 5)), K.SpatialDropout1D(0.0), K.GaussianNoise(0.0), K.Flatten(),
                          K.Dense(2)])
    compile_both(ours, theirs, "adam", "mse")
    fit_both(ours, theirs, SEQ, y, epochs=2, batch_size=16)
    same_weights(ours, theirs)


def test_the_gradient_flows_through_the_kept_channels_only():
    layer = L.SpatialDropout2D(0.5, seed=2)
    x = mdnn.Tensor(IMG[:4], requires_grad=True)
    y = layer(x, training=True)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad if isinstance(x.grad, np.ndarray) else np.asarray(x.grad),
                                  y.numpy() / np.where(IMG[:4] == 0, 1, IMG[:4]))


@pytest.mark.parametrize("make, error, words", [
    (lambda: L.SpatialDropout2D(1.0), ValueError, "rate"),
    (lambda: L.SpatialDropout1D("a"), TypeError, "rate must be a real number"),
    (lambda: L.SpatialDropout2D(0.5, data_format="channels_last"), ValueError, "NCHW"),
    (lambda: L.SpatialDropout2D(0.5)(SEQ), ValueError, r"\(C, H, W\)"),
    (lambda: L.SpatialDropout1D(0.5)(IMG), ValueError, r"\(time, features\)"),
    (lambda: L.GaussianNoise(-0.1), ValueError, "stddev"),
    (lambda: L.GaussianNoise(None), TypeError, "stddev must be a real number"),
])
def test_bad_inputs_to_the_noise_layers_are_clear_errors(make, error, words):
    with pytest.raises(error, match=words):
        make()


def _model(stddev=0.1):
    a = L.Input((6, 5, 4))
    x = L.SpatialDropout2D(0.3)(L.Conv2D(3, 3, padding="same")(a))
    x = L.GaussianNoise(stddev)(L.Flatten()(x))
    s = L.Input((7, 5))
    t = L.Flatten()(L.SpatialDropout1D(0.2)(s))
    return mdnn.Model([a, s], L.Dense(2)(L.Concatenate()([x, t])), seed=4)


def test_a_model_of_the_noise_layers_saves_and_reloads_bit_for_bit(tmp_path):
    model = _model()
    model.compile("adam", "mse")
    model.fit([IMG[:16], SEQ[:16]], IMG[:16, 0, 0, :2], epochs=2, batch_size=8, verbose=0)
    again = mdnn.load_model(model.save(tmp_path / "m.safetensors"))
    assert [la.get_config() for la in again.layers] == [la.get_config() for la in model.layers]
    np.testing.assert_array_equal(again.predict([IMG[:16], SEQ[:16]], verbose=0),
                                  model.predict([IMG[:16], SEQ[:16]], verbose=0))


@pytest.mark.native
def test_the_noise_layers_on_the_simulated_device_and_replay():
    from pymagma import simulator

    def run(device, graph=False, stddev=0.0):
        model = _model(stddev)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.compile(mdnn.optimizers.Adam(0.01), "mse", device=device, graph=graph)
            history = model.fit([IMG[:16], SEQ[:16]], IMG[:16, 0, 0, :2], epochs=3, batch_size=8, verbose=0,
                                shuffle=False).history
        return history, model.get_weights(), [str(w.message) for w in caught]

    with simulator.simulated("full"):
        device, device_weights, _ = run("gpu")
        replayed, replayed_weights, said = run("gpu", graph=True)  # spatial dropout is replayed as drawn eagerly
        assert not said
        _, _, noisy = run("gpu", graph=True, stddev=0.1)
        assert any("random draw" in s for s in noisy)  # trains eagerly, said
    assert np.all(np.isfinite(device["loss"]))
    assert device == replayed
    for x, y in zip(device_weights, replayed_weights, strict=True):
        np.testing.assert_array_equal(x, y)
