"""Initializers: variance from the real fan-in/fan-out, bounds, seeded determinism through models and layers."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import backend, initializers
from magmadnn import layers as L
from magmadnn.models import Sequential

XP = backend.get("host")


def draw(init, shape, seed=0, dtype=np.float64):
    return np.asarray(initializers.get(init)(shape, dtype, XP, XP.rng(seed)))


@pytest.mark.parametrize("shape, fan_in, fan_out", [
    ((300, 200), 300, 200),            # Dense kernel (in, out)
    ((16, 8, 3, 5), 8 * 15, 16 * 15),  # Conv2D kernel (K, C, R, S): fan_in = C*R*S, fan_out = K*R*S
    ((7,), 7, 7),
])
def test_fans(shape, fan_in, fan_out):
    assert initializers.compute_fans(shape) == (fan_in, fan_out)


@pytest.mark.parametrize("name, variance, uniform", [
    ("glorot_uniform", lambda fi, fo: 2.0 / (fi + fo), True),
    ("glorot_normal", lambda fi, fo: 2.0 / (fi + fo), False),
    ("he_uniform", lambda fi, fo: 2.0 / fi, True),
    ("he_normal", lambda fi, fo: 2.0 / fi, False),
])
@pytest.mark.parametrize("shape", [(400, 250), (64, 32, 3, 3)])
def test_variance_matches_the_formula(name, variance, uniform, shape):
    if len(shape) == 2:
        fan_in, fan_out = shape
    else:
        fan_in, fan_out = shape[1] * shape[2] * shape[3], shape[0] * shape[2] * shape[3]
    expected = variance(fan_in, fan_out)
    w = draw(name, shape)
    assert w.shape == shape
    assert abs(w.mean()) < 4 * np.sqrt(expected / w.size)
    assert w.var() == pytest.approx(expected, rel=0.03)
    if uniform:
        limit = np.sqrt(3 * expected)
        assert np.abs(w).max() <= limit
        assert np.abs(w).max() > 0.99 * limit


def test_constant_initializers():
    np.testing.assert_array_equal(draw("zeros", (2, 3)), np.zeros((2, 3)))
    np.testing.assert_array_equal(draw("ones", (4,)), np.ones(4))
    np.testing.assert_array_equal(draw(initializers.Constant(0.5), (2, 2)), np.full((2, 2), 0.5))
    assert draw("ones", (3,), dtype=np.float32).dtype == np.float32


def test_seeded_draws_are_deterministic():
    np.testing.assert_array_equal(draw("he_normal", (5, 5), seed=1), draw("he_normal", (5, 5), seed=1))
    assert not np.array_equal(draw("he_normal", (5, 5), seed=1), draw("he_normal", (5, 5), seed=2))


def test_layers_use_their_real_fans():
    conv = L.Conv2D(64, 3, kernel_initializer="he_normal")
    dense = L.Dense(300)
    Sequential([L.Input((32, 20, 20)), conv, L.Flatten(), L.Dense(500), dense], seed=0)
    assert conv.params["kernel"].data.var() == pytest.approx(2.0 / (32 * 9), rel=0.05)
    assert dense.params["kernel"].data.var() == pytest.approx(2.0 / (500 + 300), rel=0.05)
    np.testing.assert_array_equal(dense.params["bias"].data, 0.0)
    assert dense.params["kernel"].dtype == np.float32


def stack():
    return [L.Input((6,)), L.Dense(5), L.Dense(5), L.Dense(2)]


def test_model_seed_gives_deterministic_distinct_layer_seeds():
    a = Sequential(stack(), seed=11).get_weights()
    b = Sequential(stack(), seed=11).get_weights()
    c = Sequential(stack(), seed=12).get_weights()
    for wa, wb in zip(a, b):
        np.testing.assert_array_equal(wa, wb)
    assert not np.array_equal(a[0], c[0])
    twins = Sequential([L.Input((5,)), L.Dense(5), L.Dense(5)], seed=11)
    first, second = (layer.params["kernel"].data for layer in twins.layers)
    assert not np.allclose(first, second)  # equal-shaped layers of one model draw from distinct streams


def test_compile_seed_reinitializes_and_layer_seed_wins():
    model = Sequential(stack(), seed=1)
    model.compile("sgd", seed=11)
    for wa, wb in zip(model.get_weights(), Sequential(stack(), seed=11).get_weights()):
        np.testing.assert_array_equal(wa, wb)
    pinned = [L.Input((6,)), L.Dense(5, seed=99), L.Dense(2)]
    first = Sequential(pinned, seed=1).layers[0].params["kernel"].data.copy()
    other = Sequential([L.Input((6,)), L.Dense(5, seed=99), L.Dense(2)], seed=2).layers[0].params["kernel"].data
    np.testing.assert_array_equal(first, other)


def test_unknown_initializer():
    with pytest.raises(ValueError, match="unknown initializer 'lecun'"):
        initializers.get("lecun")
    with pytest.raises(TypeError):
        initializers.get(3)


@pytest.mark.parametrize("shape", [(4, 4), (3, 12), (12, 3), (2, 3, 5)])
def test_orthogonal_rows_or_columns_are_orthonormal_times_the_gain(shape):
    from magmadnn.backend import host

    w = initializers.Orthogonal(gain=1.5)(shape, np.float64, host, host.rng(3))
    flat = w.reshape(-1, shape[-1])
    small = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(small, 2.25 * np.eye(len(small)), atol=1e-12)
    again = initializers.Orthogonal(gain=1.5)(shape, np.float64, host, host.rng(3))
    np.testing.assert_array_equal(w, again)  # seeded: the same draw
    assert initializers.get("orthogonal").to_config() == {"class_name": "Orthogonal",
                                                         "config": {"seed": None, "gain": 1.0}}


def test_lstm_defaults_follow_keras_orthogonal_recurrent_kernel_and_unit_forget_bias():
    from magmadnn import layers as L
    from magmadnn import models

    x = L.Input((5, 3))
    model = models.Model(x, L.LSTM(4)(L.GRU(4, return_sequences=True)(x)), seed=2)
    gru, lstm = model.layers[1], model.layers[2]
    for layer in (gru, lstm):
        u = layer._params["recurrent_kernel"].data
        np.testing.assert_allclose(u @ u.T, np.eye(4), atol=1e-6)  # (units, G units): orthonormal rows
    bias = lstm._params["bias"].data
    np.testing.assert_array_equal(bias, np.r_[np.zeros(4), np.ones(4), np.zeros(8)])
    assert not L.LSTM(4, unit_forget_bias=False).get_config()["unit_forget_bias"]
    with pytest.raises(TypeError, match="unit_forget_bias must be True or False"):
        L.LSTM(4, unit_forget_bias=1)
