"""Custom layers the Keras way: ``build(input_shape)`` with ``add_weight(shape=, initializer=, trainable=, name=)``,
``call(inputs)`` (``training`` optional), ``get_config``, registration or ``custom_objects`` at load; checked against
the same layer written for Keras 3."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn import models
from magmadnn import optimizers as O
from magmadnn.models import Model, Sequential
from tests.keras_reference import keras
from tests.magmadnn.backends import model_device

RNG = np.random.default_rng(8)
X = RNG.standard_normal((24, 4)).astype(np.float32)
Y = RNG.standard_normal((24, 2)).astype(np.float32)


@L.register()
class Linear(L.Layer):
    def __init__(self, units=3, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.seen = input_shape
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform", name="w")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=True, name="b")
        self.calls = self.add_weight(shape=(), initializer="zeros", trainable=False, name="calls")

    def call(self, inputs):
        return F.tanh(inputs @ self.w + self.b)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


class KerasLinear(keras.layers.Layer):
    def __init__(self, units=3, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform", name="w")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=True, name="b")
        self.calls = self.add_weight(shape=(), initializer="zeros", trainable=False, name="calls")

    def call(self, inputs):
        return keras.ops.tanh(inputs @ self.w + self.b)


class Doubled(L.Layer):
    """No weights, no compute_output_shape: the output shape comes from a call; ``training`` taken."""

    def call(self, inputs, training=None):
        self.last_training = training
        return F.concatenate([inputs, inputs], axis=-1)


@pytest.fixture(params=["host", "simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


def test_a_keras_style_layer_trains_as_in_keras(device):
    model = Sequential([L.Input((4,)), Linear(5), Doubled(), L.Dense(2)], seed=0, device=device)
    k = keras.Sequential([keras.Input((4,)), KerasLinear(5),
                          keras.layers.Lambda(lambda t: keras.ops.concatenate([t, t], axis=-1)), keras.layers.Dense(2)])
    assert model.layers[0].seen == (None, 4)  # Keras' shapes in build: the batch included
    assert model.layers[1].output_shape == (10,) and model.layers[2].input_shape == (10,)
    start = model.get_weights()
    assert [a.shape for a in start] == [a.shape for a in k.get_weights()]  # w, b, calls (non-trainable last)
    k.set_weights(start)
    assert model.count_params() == k.count_params()
    assert (len(model.trainable_weights), len(model.non_trainable_weights)) == \
        (len(k.trainable_weights), len(k.non_trainable_weights))
    model.compile(O.Adam(0.01, eps=1e-7), "mse")
    k.compile(keras.optimizers.Adam(0.01, epsilon=1e-7), "mse")
    model.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    k.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), k.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(model.get_weights()[2], 0.0)  # the non-trainable weight: never trained


def test_the_training_flag_reaches_a_call_that_takes_it():
    layer = Doubled()
    model = Sequential([L.Input((3,)), layer, L.Dense(2)])
    model.compile("sgd", "mse")
    model.train_on_batch(X[:4, :3], np.zeros((4, 2), np.float32))
    assert layer.last_training is True
    model.predict(X[:4, :3])
    assert layer.last_training is False


def test_save_and_load_a_registered_layer_and_one_given_by_custom_objects(tmp_path):
    class Scale(L.Layer):  # not registered
        def build(self, input_shape):
            self.k = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="k")

        def call(self, inputs):
            return inputs * self.k

    x = L.Input((4,))
    model = Model(x, L.Dense(2)(Scale(name="scale")(Linear(4, name="lin")(x))), seed=1)
    model.compile("sgd", "mse")
    model.fit(X, Y, epochs=1, verbose=0)
    model.save(tmp_path / "m.npz")
    with pytest.raises(ValueError, match=r"unknown layer class 'Scale': decorate its class with "
                                         r"@magmadnn.layers.register .* custom_objects=\{'Scale': Scale\}"):
        models.load_model(tmp_path / "m.npz")
    loaded = models.load_model(tmp_path / "m.npz", custom_objects={"Scale": Scale})
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.get_layer("lin").units == 4


def test_add_weight_forms_and_errors():
    class Both(L.Layer):
        def build(self, input_shape):
            self.a = self.add_weight((2, 3), "zeros")  # Keras' positional shape, initializer
            self.b = self.add_weight(shape=(3,))  # glorot_uniform, auto-named
            self.c = self.add_weight(shape=(1,), initializer="ones")

        def call(self, inputs):
            return inputs

    layer = Both()
    layer(np.zeros((1, 2), np.float32))
    assert list(layer.params) == ["variable", "variable_1", "variable_2"]
    np.testing.assert_array_equal(layer.params["variable_2"].numpy(), [1.0])
    dense = L.Dense(3)
    dense(np.zeros((1, 2), np.float32))
    assert list(dense.params) == ["kernel", "bias"]  # magmadnn's own add_weight(name, shape, initializer) form

    class Bad(L.Layer):
        def build(self, input_shape):
            self.add_weight(shape=(2,), synchronization="on_read")

        def call(self, inputs):
            return inputs

    with pytest.raises(TypeError, match=r"\['synchronization'\] are not supported"):
        Bad()(np.zeros((1, 2), np.float32))


def test_register_keeps_the_built_in_names():
    class Dense(L.Layer):
        def call(self, inputs):
            return inputs

    with pytest.raises(ValueError, match="'Dense' is magmadnn's built-in"):
        L.register(Dense)
    with pytest.raises(TypeError, match="expected a Layer subclass"):
        L.register(int)
    assert L.layer_class("Dense") is L.Dense
    assert L.register(name="LinearAlias")(Linear) is Linear
    assert L.layer_class("LinearAlias") is L.layer_class("Linear") is Linear


class InitLinear(L.Layer):
    """Keras' subclassing guide's first layer: weights made in ``__init__``, no build."""

    def __init__(self, units=3, input_dim=4):
        super().__init__()
        self.w = self.add_weight(shape=(input_dim, units), initializer="random_normal", trainable=True)
        self.b = self.add_weight(shape=(units,), initializer="zeros", trainable=True)

    def call(self, inputs):
        return F.matmul(inputs, self.w) + self.b


class KerasInitLinear(keras.layers.Layer):
    def __init__(self, units=3, input_dim=4):
        super().__init__()
        self.w = self.add_weight(shape=(input_dim, units), initializer="random_normal", trainable=True)
        self.b = self.add_weight(shape=(units,), initializer="zeros", trainable=True)

    def call(self, inputs):
        return keras.ops.matmul(inputs, self.w) + self.b


def test_weights_made_in_init_train_as_in_keras_and_follow_the_model(device):
    layer = InitLinear(2)
    model = Sequential([L.Input((4,)), layer], seed=3, device=device)
    k = keras.Sequential([keras.Input((4,)), KerasInitLinear(2)])
    assert layer.w.xp is model.xp and [p is q for p, q in zip(model.parameters(), (layer.w, layer.b))] == [True] * 2
    assert abs(float(np.std(layer.w.numpy())) - 0.05) < 0.04  # Keras' random_normal: stddev 0.05
    k.set_weights(model.get_weights())
    model.compile(O.SGD(0.1), "mse")
    k.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    k.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), k.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    trained = model.get_weights()
    model.reinitialize(3)  # drawn again from the model's seed, into the same Parameters the layer uses
    assert not np.allclose(layer.w.numpy(), trained[0]) and model.parameters()[0] is layer.w
    twin = Sequential([L.Input((4,)), InitLinear(2)], seed=3, device=device)
    np.testing.assert_array_equal(twin.get_weights()[0], model.get_weights()[0])


def test_build_called_by_hand_with_a_keras_shape():
    layer = Linear(3)
    layer.build((None, 4))
    assert layer.built and layer.input_shape == (4,) and layer.output_shape == (3,) and layer.seen == (None, 4)
    assert layer(np.ones((2, 4), np.float32)).shape == (2, 3)
    assert len(layer.weights) == 3


def test_a_constructor_that_rejects_its_config_is_named_at_load(tmp_path):
    model = Sequential([L.Input((4,)), InitLinear(2)], seed=0)
    model.save(tmp_path / "m.npz")
    with pytest.raises(ValueError, match=r"InitLinear.from_config: its constructor does not take the configuration "
                                         r".*\*\*kwargs"):
        models.load_model(tmp_path / "m.npz", custom_objects={"InitLinear": InitLinear})
