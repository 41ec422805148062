"""Initializers and the convolutions' default kernels against Keras 3: the same names, defaults and configs, and
draws of the same distribution (Keras draws with its own generator, so the quantiles of large draws are compared,
not values); seeded initializers repeat; the host and the simulated device draw the same bits."""

from __future__ import annotations

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import backend, initializers
from magmadnn import layers as L
from tests.keras_reference import keras

XP = backend.get("host")


@pytest.fixture(autouse=True)
def _seeded_keras():
    keras.utils.set_random_seed(0)  # Keras' draws repeat, so the statistical comparisons below are deterministic


def same_distribution(ours, theirs):
    """Two draws pass a two-sample Kolmogorov-Smirnov test at the 0.1 % level (as the same distribution) and have
    standard deviations within 6 %."""
    ours, theirs = np.sort(np.ravel(ours).astype(np.float64)), np.sort(np.ravel(theirs).astype(np.float64))
    grid = np.concatenate([ours, theirs])
    cdf = [np.searchsorted(draw, grid, "right") / draw.size for draw in (ours, theirs)]
    gap = np.abs(cdf[0] - cdf[1])
    critical = 1.95 * np.sqrt((ours.size + theirs.size) / (ours.size * theirs.size))
    assert gap.max() < critical, (gap.max(), critical)
    assert ours.std() == pytest.approx(theirs.std(), rel=0.06)


def keras_kernel(layer, input_shape):
    keras.Sequential([keras.Input(input_shape), layer])
    return keras.ops.convert_to_numpy(layer.weights[0])


@pytest.mark.parametrize("name", ["glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "lecun_normal",
                                  "lecun_uniform", "truncated_normal", "random_normal", "random_uniform",
                                  "TruncatedNormal", "HeNormal", "VarianceScaling", "orthogonal"])
def test_named_initializers_draw_keras_distribution_with_keras_config(name):
    shape = (300, 200)
    theirs = keras.ops.convert_to_numpy(keras.initializers.get(name)(shape))
    ours = np.asarray(initializers.get(name)(shape, np.float64, XP, XP.rng(0)))
    same_distribution(ours, theirs)
    config = keras.initializers.get(name).get_config()
    mine = initializers.get(name).get_config()
    for key in ("input_axes", "output_axes"):
        config.pop(key, None)
    assert mine == config
    assert initializers.get(name).to_config()["class_name"] == type(keras.initializers.get(name)).__name__


@pytest.mark.parametrize("init", ["he_normal", "glorot_normal", "lecun_normal"])
def test_normal_variance_scaling_is_truncated_at_two_standard_deviations_as_keras(init):
    w = np.asarray(initializers.get(init)((400, 250), np.float64, XP, XP.rng(1)))
    fan_in, fan_out = 400, 250
    variance = {"he_normal": 2 / fan_in, "glorot_normal": 2 / (fan_in + fan_out), "lecun_normal": 1 / fan_in}[init]
    bound = 2 * np.sqrt(variance) / 0.87962566103423978  # Keras widens the normal so the truncated draw keeps it
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.99 * bound
    assert w.var() == pytest.approx(variance, rel=0.03)
    plain = np.asarray(initializers.VarianceScaling(2.0, "fan_in", "untruncated_normal")((400, 250), np.float64, XP,
                                                                                         XP.rng(1)))
    assert np.abs(plain).max() > bound  # the untruncated form has tails beyond it


def test_truncated_normal_keeps_mean_and_stddev_as_keras():
    w = np.asarray(initializers.TruncatedNormal(mean=1.0, stddev=0.5)((20000,), np.float64, XP, XP.rng(2)))
    assert w.min() >= 0.0 and w.max() <= 2.0
    theirs = keras.ops.convert_to_numpy(keras.initializers.TruncatedNormal(mean=1.0, stddev=0.5)((20000,)))
    same_distribution(w, theirs)


@pytest.mark.parametrize("ours, theirs, input_shape", [
    (lambda: L.Conv2D(64, 3), lambda: keras.layers.Conv2D(64, 3), (32, 12, 12)),
    (lambda: L.Conv2D(64, 3, kernel_initializer="he_normal"),
     lambda: keras.layers.Conv2D(64, 3, kernel_initializer="he_normal"), (32, 12, 12)),
    (lambda: L.Conv1D(48, 5), lambda: keras.layers.Conv1D(48, 5), (40, 20)),  # (T, F) as Keras
    (lambda: L.Conv2DTranspose(40, 3), lambda: keras.layers.Conv2DTranspose(40, 3), (24, 8, 8)),
    (lambda: L.Conv2DTranspose(40, 3, kernel_initializer="he_uniform"),
     lambda: keras.layers.Conv2DTranspose(40, 3, kernel_initializer="he_uniform"), (24, 8, 8)),
    (lambda: L.DepthwiseConv2D(3, depth_multiplier=4), lambda: keras.layers.DepthwiseConv2D(3, depth_multiplier=4),
     (64, 8, 8)),
    (lambda: L.DepthwiseConv2D(5, depthwise_initializer="he_normal"),
     lambda: keras.layers.DepthwiseConv2D(5, depthwise_initializer="he_normal"), (256, 8, 8)),
])
def test_convolution_kernels_initialise_as_keras(ours, theirs, input_shape):
    layer = ours()
    mdnn.Sequential([L.Input(input_shape), layer], seed=0)
    mine = layer.get_weights()[0]
    conv1d = isinstance(layer, L.Conv1D)
    keras_shape = input_shape if conv1d else (*input_shape[1:], input_shape[0])  # images channels last
    ref = keras_kernel(theirs(), keras_shape)
    same_distribution(mine, ref)
    name = "depthwise_initializer" if isinstance(layer, L.DepthwiseConv2D) else "kernel_initializer"
    assert layer.get_config()[name]["class_name"] == theirs().get_config()[name]["class_name"]


def test_depthwise_old_kernel_initializer_spelling_still_works():
    layer = L.DepthwiseConv2D(3, kernel_initializer="zeros")
    mdnn.Sequential([L.Input((4, 6, 6)), layer], seed=0)
    np.testing.assert_array_equal(layer.get_weights()[0], 0.0)
    assert layer.get_config()["depthwise_initializer"]["class_name"] == "Zeros"


@pytest.mark.parametrize("init", [initializers.HeNormal(seed=5), initializers.GlorotUniform(seed=5),
                                  initializers.TruncatedNormal(seed=5), initializers.RandomUniform(seed=5),
                                  initializers.RandomNormal(seed=5), initializers.Orthogonal(seed=5)])
def test_a_seeded_initializer_repeats_its_draw_and_ignores_the_layers_stream(init):
    a = np.asarray(init((6, 7), np.float64, XP, XP.rng(1)))
    b = np.asarray(init((6, 7), np.float64, XP, XP.rng(2)))
    np.testing.assert_array_equal(a, b)
    other = type(init)(seed=6)
    assert not np.array_equal(a, np.asarray(other((6, 7), np.float64, XP, XP.rng(1))))
    assert initializers.get(init.to_config()).get_config() == init.get_config()
    x = L.Input((6,))
    m1 = mdnn.Model(x, L.Dense(7, kernel_initializer=init)(x), seed=1)
    m2 = mdnn.Model(x, L.Dense(7, kernel_initializer=type(init)(seed=5))(x), seed=2)
    np.testing.assert_array_equal(m1.get_weights()[0], m2.get_weights()[0])


def test_keras_serialized_initializers_and_class_names_resolve():
    for init in (keras.initializers.HeNormal(seed=3), keras.initializers.TruncatedNormal(0.1, 0.2, seed=4),
                 keras.initializers.VarianceScaling(2.0, "fan_out", "uniform")):
        mine = initializers.get(keras.initializers.serialize(init))
        assert type(mine).__name__ == type(init).__name__
        config = init.get_config()
        for key in ("input_axes", "output_axes"):
            config.pop(key, None)
        assert mine.get_config() == config


@pytest.mark.parametrize("bad, match", [
    (lambda: initializers.HeNormal(seed="1"), "seed must be None or an integer"),
    (lambda: initializers.VarianceScaling(mode="fan"), "mode must be 'fan_in', 'fan_out' or 'fan_avg'"),
    (lambda: initializers.VarianceScaling(distribution="gamma"), "distribution must be"),
    (lambda: initializers.VarianceScaling(scale=0), "scale must be positive"),
    (lambda: initializers.get("Glorot"), "unknown initializer 'Glorot'"),
    (lambda: initializers.Identity()((2, 2, 2), np.float32, XP, None), "must be 2-D"),
])
def test_bad_initializer_arguments_name_the_problem(bad, match):
    with pytest.raises((TypeError, ValueError), match=match):
        bad()


def test_identity_as_keras():
    theirs = keras.ops.convert_to_numpy(keras.initializers.Identity(gain=2.0)((3, 4)))
    np.testing.assert_array_equal(np.asarray(initializers.get({"class_name": "Identity", "config": {"gain": 2.0}})(
        (3, 4), np.float32, XP, None)), theirs)


@pytest.mark.native
def test_the_simulated_device_draws_the_hosts_bits_and_a_model_reloads_them(tmp_path):
    from pymagma import simulator

    def build(device):
        model = mdnn.Sequential([L.Input((3, 8, 8)), L.Conv2D(4, 3, kernel_initializer="he_normal"),
                                 L.DepthwiseConv2D(3, depth_multiplier=2), L.Flatten(),
                                 L.Dense(2, kernel_initializer=initializers.TruncatedNormal(seed=3))], seed=7)
        model.compile("sgd", "mse", device=device)
        return model

    host = build("host").get_weights()
    with simulator.simulated():
        model = build("gpu")
        for a, b in zip(host, model.get_weights(), strict=True):
            np.testing.assert_array_equal(a, b)
        model.save(tmp_path / "m.safetensors")
    again = mdnn.models.load_model(tmp_path / "m.safetensors")
    for a, b in zip(host, again.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert again.layers[-1].kernel_initializer.get_config() == {"seed": 3, "mean": 0.0, "stddev": 0.05}
