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


# ------------------------------------------------------------- add_weight and initializers (round three)
class _Weighted(L.Layer):
    """A Keras-style layer whose build makes one weight with the given add_weight arguments (``shape`` may be a
    function of build's input_shape)."""

    def __init__(self, make=None, **kwargs):
        super().__init__(**kwargs)
        self.make = make

    def build(self, input_shape):
        args = dict(self.make)
        if callable(args.get("shape")):
            args["shape"] = args["shape"](input_shape)
        self.w = self.add_weight(**args)

    def call(self, x):
        return x


class _WrongShape:
    def __call__(self, shape, dtype, xp, rng):
        return xp.zeros(tuple(reversed(shape)), dtype)


def _wrong_shape_initializer():
    from magmadnn import initializers

    return type("WrongShape", (_WrongShape, initializers.Initializer), {})()


def _float64_initializer():
    from magmadnn import initializers

    return type("Float64", (initializers.Initializer,), {
        "__call__": lambda self, shape, dtype, xp, rng: xp.ones(shape, np.float64)})()


ADD_WEIGHT_ROWS = [  # (id, add_weight arguments, error or None, words / expected (shape, dtype))
    ("shape-4.5", dict(shape=(4.5, 3)), ValueError, ["'mine'", "integers", "4.5"]),
    ("shape-4.0", dict(shape=(4.0, 3)), ValueError, ["'mine'", "integers", "4.0"]),
    ("shape-none-batch", dict(shape=lambda s: s), ValueError, ["'mine'", "None axis", "input_shape[-1]"]),
    ("shape-negative", dict(shape=(-1, 3)), ValueError, ["'mine'", ">= 0", "(-1, 3)"]),
    ("shape-str-entry", dict(shape=("4", 3)), ValueError, ["'mine'", "integers", "'4'"]),
    ("shape-bool-entry", dict(shape=(True, 3)), ValueError, ["'mine'", "integers", "True"]),
    ("shape-set", dict(shape={3}), TypeError, ["'mine'", "tuple of integers", "set"]),
    ("shape-numpy-ints", dict(shape=(np.int64(4), np.int32(3))), None, ((4, 3), np.float32)),
    ("shape-int", dict(shape=3), None, ((3,), np.float32)),
    ("shape-zero", dict(shape=(0, 3)), None, ((0, 3), np.float32)),
    ("shape-from-input", dict(shape=lambda s: s[1:]), None, ((4,), np.float32)),
    ("int32-trainable", dict(shape=(2,), dtype="int32"), TypeError, ["'mine'", "floating dtype", "trainable=False"]),
    ("int32-frozen", dict(shape=(2,), dtype="int32", trainable=False), None, ((2,), np.int32)),
    ("int32-glorot", dict(shape=(2,), dtype="int32", trainable=False, initializer="glorot_uniform"), TypeError,
     ["'mine'", "GlorotUniform", "int32", "'zeros'"]),
    ("dtype-unknown", dict(shape=(2,), dtype="floaty"), TypeError, ["'mine'", "'floaty'", "not a dtype"]),
    ("dtype-complex", dict(shape=(2,), dtype="complex64"), TypeError, ["'mine'", "complex64"]),
    ("initializer-wrong-shape", dict(shape=(2, 3), initializer=_wrong_shape_initializer()), ValueError,
     ["'mine'", "WrongShape", "shape (3, 2)", "(2, 3)"]),
    ("initializer-float64", dict(shape=(2, 3), initializer=_float64_initializer()), None, ((2, 3), np.float32)),
    ("initializer-unknown", dict(shape=(2,), initializer="lecunx"), ValueError, ["initializer", "lecunx"]),
    ("trainable-str", dict(shape=(2,), trainable="yes"), TypeError, ["trainable", "True or False"]),
]


@pytest.mark.parametrize("make, error, expected", [pytest.param(*r[1:], id=r[0]) for r in ADD_WEIGHT_ROWS])
def test_add_weight_checks_its_arguments_naming_the_layer(make, error, expected):
    """Fault list, add_weight and initializers (Keras 3 refuses non-integer and None shape entries with a
    ValueError; PyTorch refuses gradients of integer tensors):
      shape (4.5, 3) / (4.0, 3) / ("4", 3) / (True, 3)  ValueError naming the layer and the entry (was: truncated)
      shape = build's input_shape, None batch axis       ValueError: use input_shape[1:] (was int() of NoneType)
      shape (-1, 3)                                      ValueError naming the layer
      shape {3}                                          TypeError: a tuple of integers
      NumPy integer sizes, a plain int, a 0 size         accepted (Keras accepts these too; an int is 1-D)
      dtype int32, trainable                             TypeError: floating dtype or trainable=False
      dtype int32, trainable=False                       accepted, zeros (Keras' default for integers)
      dtype int32 with glorot_uniform                    TypeError naming the initializer
      dtype "floaty" / complex64                         TypeError naming the dtype
      an initializer returning the transposed shape      ValueError naming the initializer and both shapes (was:
                                                         blamed on the next layer)
      an initializer returning float64 for float32       cast, as Keras casts initial values
      initializer "lecunx", trainable "yes"              ValueError / TypeError naming them
    """
    layer = _Weighted(make, name="mine")
    if error is not None:
        with pytest.raises(error) as caught:
            Sequential([L.Input((4,)), layer])
        missing = [w for w in expected if w not in str(caught.value)]
        assert not missing, f"{caught.value!r} lacks {missing}"
        return
    Sequential([L.Input((4,)), layer])
    shape, dtype = expected
    assert layer.w.shape == shape and layer.w.data.dtype == dtype


def test_keras_refuses_the_same_shapes():
    layer = keras.layers.Layer()
    for shape in ((4.5, 3), (4.0, 3), (None, 3), (-1, 3), ("4", 3)):
        with pytest.raises(ValueError):
            layer.add_weight(shape=shape)
    assert tuple(layer.add_weight(shape=(np.int64(4), 3)).shape) == (4, 3)


# ------------------------------------------------------------- custom layers' outputs and declared shapes
class _BatchMean(L.Layer):
    def call(self, x):
        return F.mean(x, 0, True)


class _DeclaredBatchMean(_BatchMean):
    def compute_output_shape(self, input_shape):
        return input_shape


class _Liar(L.Layer):
    def compute_output_shape(self, input_shape):
        return (input_shape[0], 7)

    def call(self, x):
        return x


class _NoneAxis(L.Layer):
    def compute_output_shape(self, input_shape):
        return (input_shape[0], None)

    def call(self, x):
        return x


class _ReturnsNumpy(L.Layer):
    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, x):
        return np.zeros(x.shape, np.float32)


class _Scalar(L.Layer):
    def call(self, x):
        return F.sum(x)


class _Flatten(L.Layer):
    def call(self, x):
        return F.reshape(x, (-1,))


class _Raises(L.Layer):
    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, x):
        return x @ np.zeros((5, 5), np.float32)


class _Good(L.Layer):
    def compute_output_shape(self, input_shape):
        return (input_shape[0], 2)

    def call(self, x):
        return F.reshape(F.sum(F.reshape(x, (-1, 2, 2)), -1), (-1, 2))


def _predict(layer, batch=24):
    return Sequential([L.Input((4,)), layer]).predict(X[:batch], batch_size=16)


OUTPUT_ROWS = [
    ("batch-mean", lambda: _predict(_BatchMean(name="c")), ValueError, ["'c'", "batch of 2", "axis 0"]),
    ("declared-batch-mean", lambda: _predict(_DeclaredBatchMean(name="c")), ValueError,
     ["'c'", "(1, 4)", "batch of 16", "axis 0"]),
    ("liar", lambda: Sequential([L.Input((4,)), _Liar(name="c"), L.Dense(2)]).predict(X), ValueError,
     ["_Liar layer 'c'", "(4,)", "compute_output_shape declared (7,)"]),
    ("liar-eager", lambda: _Liar(name="c")(X), ValueError, ["'c'", "declared (7,)"]),
    ("none-axis", lambda: Sequential([L.Input((4,)), _NoneAxis(name="c")]), ValueError,
     ["'c'", "compute_output_shape returned (None, None)", "None"]),
    ("returns-numpy", lambda: _predict(_ReturnsNumpy(name="c")), TypeError, ["'c'", "must return a Tensor",
                                                                             "ndarray"]),
    ("scalar", lambda: Sequential([L.Input((4,)), _Scalar(name="c")]), ValueError, ["'c'", "one row per sample"]),
    ("flatten-batch", lambda: Sequential([L.Input((4,)), _Flatten(name="c")]), ValueError,
     ["'c'", "(8,)", "batch of 2"]),
    ("error-inside-call", lambda: _predict(_Raises(name="c")), ValueError, ["matmul"]),
    ("fit-liar", lambda: Sequential([L.Input((4,)), _Liar(name="c")]).compile("sgd", "mse").fit(
        X, np.zeros((24, 7), np.float32), verbose=0), ValueError, ["'c'", "declared (7,)"]),
]


@pytest.mark.parametrize("call, error, words", [pytest.param(*r[1:], id=r[0]) for r in OUTPUT_ROWS])
def test_a_custom_layers_output_is_checked_against_the_batch_and_its_declared_shape(call, error, words):
    """Fault list, custom layers' outputs and declared shapes (Keras: a wrong symbolic shape is the user's bug and
    surfaces later; magmadnn names the layer at its call):
      call reducing over the batch, no compute_output_shape   ValueError at build: a batch of 2 gave 1 row (was:
                                                               predict copied the one row into every row)
      the same with compute_output_shape declared             ValueError at the first batch naming the layer
      output (4,) against a declared (7,), in predict / eagerly / in fit   ValueError naming the layer and both
                                                               shapes (was: blamed on the next Dense)
      compute_output_shape returning None after the batch     ValueError naming the entry
      call returning a NumPy array                            TypeError naming the layer
      call returning a scalar / a flattened batch             ValueError: one row per sample
      an error raised inside call                             the error, with a note naming the layer
      a correct layer with compute_output_shape               unchanged results (test below)
    """
    with pytest.raises(error) as caught:
        call()
    text = str(caught.value) + "".join(getattr(caught.value, "__notes__", []))
    missing = [w for w in words if w not in text]
    assert not missing, f"{caught.value!r} lacks {missing}"


def test_an_error_inside_a_custom_call_names_the_layer():
    with pytest.raises(ValueError) as caught:
        _predict(_Raises(name="mine"))
    assert any("_Raises layer 'mine'" in note for note in caught.value.__notes__)


def test_a_correct_custom_layer_predicts_as_numpy():
    got = _predict(_Good(name="ok"))
    np.testing.assert_allclose(got, X.reshape(24, 2, 2).sum(-1), rtol=1e-6)


@pytest.mark.parametrize("kind", ["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_a_custom_layers_output_is_checked_on_the_device_too(kind):
    for device in model_device(kind):
        model = Sequential([L.Input((4,)), _Liar(name="c")]).compile("sgd", "mse", device=device)
        with pytest.raises(ValueError, match="'c'.*declared \\(7,\\)"):
            model.fit(X, np.zeros((24, 7), np.float32), verbose=0)
        reducer = Sequential([L.Input((4,)), _DeclaredBatchMean(name="c")]).compile("sgd", "mse", device=device)
        with pytest.raises(ValueError, match="'c'.*batch of 16"):
            reducer.predict(X, batch_size=16)


# -- a built layer called again on a batch of the shape it was built on (a subclassed model's step) skips the checks
# and conversions its first call made; every other call takes the full path, whose errors stay as they were
def test_a_repeated_call_on_the_built_shape_equals_the_full_call_and_other_shapes_are_refused():
    from magmadnn.autograd import Tensor
    from magmadnn.layers.base import ShapeMismatchError

    layer = L.Dense(4, seed=2)
    data = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    full = layer(data).numpy()  # a NumPy batch: built, then the full path
    again = layer(Tensor(data)).numpy()
    np.testing.assert_array_equal(again, full)
    with pytest.raises(ShapeMismatchError, match=r"expects per-sample input shape .*5.* \(the shape it was built "
                       r"with\); got per-sample shape .*2, 5"):
        layer(Tensor(np.zeros((3, 2, 5), np.float32)))  # (another rank: refused, as before any repeated call)
    with pytest.raises(TypeError, match="training must be True, False or None"):
        layer(Tensor(data), "yes")


def test_a_repeated_call_starts_the_activity_penalties_anew():
    from magmadnn import regularizers
    from magmadnn.autograd import Tensor

    layer = L.Dense(2, seed=1, activity_regularizer=regularizers.L2(0.1))
    x = Tensor(np.ones((2, 3), np.float32))
    for _ in range(3):
        layer(x)
    assert len(layer.losses) == 1  # the last call's penalty only, as Keras
