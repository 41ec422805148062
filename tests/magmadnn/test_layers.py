"""Layers: finite-difference gradient checks (float64), forward references in plain NumPy, shape inference and the
shape/rank errors naming both layers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from magmadnn import Tensor, no_grad
from magmadnn import layers as L
from magmadnn.models import Model, Sequential
from tests.reference import conv2d_ref, same_pads

from ._gradcheck import numerical_gradient, spread_values

RNG = np.random.default_rng(1234)


def built(layer, input_shape, seed=0):
    """``layer`` built for a per-sample ``input_shape`` in float64."""
    layer.configure("host", "float64", seed)
    layer.build(input_shape)
    return layer


def check_layer_gradients(layer, x, training=False, reset=None, atol=1e-6, rtol=1e-5):
    """Backprop a random projection of ``layer(x)``; compare d/dx and d/dparam with central differences."""
    x = np.array(x, dtype=np.float64)
    if reset:
        reset()
    xt = Tensor(x.copy(), requires_grad=True)
    out = layer.call(xt, training=training)
    u = np.random.default_rng(0).standard_normal(out.shape)
    out.backward(u)

    def scalar(arrays):
        if reset:
            reset()
        with no_grad():
            return float(np.sum(layer.call(Tensor(arrays[0]), training=training).numpy() * u))

    np.testing.assert_allclose(xt.grad, numerical_gradient(scalar, [x], 0), atol=atol, rtol=rtol, err_msg="d/dx")
    for name, param in layer.params.items():
        assert param.grad is not None, f"{name} got no gradient"
        expected = numerical_gradient(lambda _: scalar([x]), [param.data], 0)
        np.testing.assert_allclose(param.grad, expected, atol=atol, rtol=rtol, err_msg=f"d/d{name}")
        param.grad = None


# ---------------------------------------------------------------------------------------------- gradient checks


@pytest.mark.parametrize("activation", [None, "sigmoid", "tanh", "relu", "leaky_relu", "elu", "gelu", "softmax"])
def test_dense_gradients(activation):
    layer = built(L.Dense(3, activation=activation, bias_initializer="glorot_uniform"), (4,))
    check_layer_gradients(layer, spread_values(RNG, (5, 4), gap=0.05))


def test_dense_without_bias_has_only_a_kernel():
    layer = built(L.Dense(3, use_bias=False), (4,))
    assert list(layer.params) == ["kernel"]
    check_layer_gradients(layer, RNG.normal(size=(2, 4)))


@pytest.mark.parametrize("kwargs", [
    {"kernel_size": 3},
    {"kernel_size": 3, "strides": 2, "padding": "same"},
    {"kernel_size": (2, 3), "padding": 1, "dilation": 2},
    {"kernel_size": 3, "padding": "same", "use_bias": False, "activation": "tanh"},
])
def test_conv2d_gradients(kwargs):
    layer = built(L.Conv2D(3, bias_initializer="he_uniform", **kwargs), (2, 6, 5))
    check_layer_gradients(layer, RNG.normal(size=(2, 2, 6, 5)))


@pytest.mark.parametrize("shape", [(3,), (2, 3, 3)])
@pytest.mark.parametrize("training", [True, False])
def test_batchnorm_gradients(shape, training):
    layer = built(L.BatchNorm(), shape)
    layer.params["gamma"].data[...] = RNG.uniform(0.5, 1.5, size=shape[0])
    layer.params["beta"].data[...] = RNG.normal(size=shape[0])
    layer._state["running_var"][...] = RNG.uniform(0.5, 2.0, size=shape[0])
    check_layer_gradients(layer, RNG.normal(size=(4, *shape)), training=training, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["sigmoid", "tanh", "relu", "leaky_relu", "elu", "gelu", "softmax"])
def test_activation_gradients(kind):
    check_layer_gradients(built(L.Activation(kind), (6,)), spread_values(RNG, (3, 6), gap=0.07))


@pytest.mark.parametrize("layer", [
    L.MaxPool2D(2), L.AvgPool2D(2, strides=1), L.AvgPool2D(3, strides=2, padding="same"), L.GlobalAvgPool2D(),
    L.Flatten(),
], ids=lambda layer: type(layer).__name__)
def test_parameter_free_layer_gradients(layer):
    built(layer, (2, 4, 5))
    check_layer_gradients(layer, spread_values(RNG, (2, 2, 4, 5)))


def test_dropout_gradient_uses_the_forward_mask():
    layer = built(L.Dropout(0.4), (10,))

    def reset():
        layer.rng = layer.xp.rng(7)

    check_layer_gradients(layer, RNG.normal(size=(3, 10)), training=True, reset=reset)


def test_add_gradients_reach_every_input():
    layer = built(L.Add(), [(3,), (3,), (3,)])
    xs = [Tensor(RNG.normal(size=(2, 3)), requires_grad=True) for _ in range(3)]
    u = RNG.normal(size=(2, 3))
    layer.call(xs).backward(u)
    for x in xs:
        np.testing.assert_allclose(x.grad, u)


# ---------------------------------------------------------------------------------------------- forward references


def conv_reference(x, w, b, stride, pads, dilation):
    """The convolution reference plus the bias."""
    return conv2d_ref(x, w, stride, pads, dilation) + b[None, :, None, None]


@pytest.mark.parametrize("padding, stride, dilation, pads", [
    ("valid", 1, 1, ((0, 0), (0, 0))),
    ("same", 1, 1, ((1, 1), (1, 1))),
    ("same", 2, 1, ((0, 1), (1, 1))),  # H=6: total pad 1 (bottom); W=5: total pad 2
    (1, 1, 2, ((1, 1), (1, 1))),
])
def test_conv2d_forward_matches_direct_loops(padding, stride, dilation, pads):
    layer = built(L.Conv2D(4, 3, strides=stride, padding=padding, dilation=dilation,
                           bias_initializer="glorot_uniform"), (2, 6, 5))
    x = RNG.normal(size=(3, 2, 6, 5))
    expected = conv_reference(x, layer.params["kernel"].data, layer.params["bias"].data, (stride, stride), pads,
                              (dilation, dilation))
    y = layer(x)
    assert layer.output_shape == expected.shape[1:]
    np.testing.assert_allclose(y.numpy(), expected, atol=1e-10)


@given(c=st.integers(1, 2), k=st.integers(1, 3), h=st.integers(3, 7), w=st.integers(3, 7), r=st.integers(1, 3),
       stride=st.integers(1, 2), dilation=st.integers(1, 2), padding=st.sampled_from(["valid", "same", 0, 1]))
def test_conv2d_layer_forward_property(c, k, h, w, r, stride, dilation, padding):
    if padding == "same":
        pads = (same_pads(h, r, stride, dilation), same_pads(w, r, stride, dilation))
    else:
        p = 0 if padding == "valid" else padding
        pads = ((p, p), (p, p))
    if min(h + sum(pads[0]), w + sum(pads[1])) < dilation * (r - 1) + 1:
        return
    layer = built(L.Conv2D(k, r, strides=stride, padding=padding, dilation=dilation,
                           bias_initializer="glorot_uniform"), (c, h, w))
    x = np.random.default_rng(h * w).normal(size=(2, c, h, w))
    expected = conv_reference(x, layer.params["kernel"].data, layer.params["bias"].data, (stride, stride), pads,
                              (dilation, dilation))
    assert layer.output_shape == expected.shape[1:]
    np.testing.assert_allclose(layer(x).numpy(), expected, atol=1e-10)


@given(n=st.integers(1, 3), c=st.integers(1, 3), h=st.integers(1, 4), w=st.integers(1, 4))
def test_pooling_layers_forward_property(n, c, h, w):
    x = np.random.default_rng(n * 100 + h * 10 + w).normal(size=(n, c, 2 * h, 2 * w))
    blocks = x.reshape(n, c, h, 2, w, 2)
    np.testing.assert_allclose(built(L.MaxPool2D(2), (c, 2 * h, 2 * w))(x).numpy(), blocks.max(axis=(3, 5)))
    np.testing.assert_allclose(built(L.AvgPool2D(2), (c, 2 * h, 2 * w))(x).numpy(), blocks.mean(axis=(3, 5)))
    np.testing.assert_allclose(built(L.GlobalAvgPool2D(), (c, 2 * h, 2 * w))(x).numpy(), x.mean(axis=(2, 3)))
    np.testing.assert_array_equal(built(L.Flatten(), (c, 2 * h, 2 * w))(x).numpy(), x.reshape(n, -1))


def test_dense_forward_matches_numpy():
    layer = built(L.Dense(5, activation="relu", bias_initializer="glorot_normal"), (3,))
    x = RNG.normal(size=(4, 3))
    expected = np.maximum(x @ layer.params["kernel"].data + layer.params["bias"].data, 0.0)
    np.testing.assert_allclose(layer(x).numpy(), expected, atol=1e-12)


def test_batchnorm_train_and_eval_modes():
    layer = built(L.BatchNorm(momentum=0.8, eps=1e-5), (2, 3, 3))
    x = RNG.normal(loc=3.0, scale=2.0, size=(5, 2, 3, 3))
    y = layer(x, training=True).numpy()
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0.0, atol=1e-10)
    np.testing.assert_allclose(y.var(axis=(0, 2, 3)), 1.0, atol=1e-3)
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3), ddof=1)  # running variance is the unbiased one
    np.testing.assert_allclose(layer.state["running_mean"], 0.2 * mean, atol=1e-12)
    np.testing.assert_allclose(layer.state["running_var"], 0.8 + 0.2 * var, atol=1e-12)
    rm, rv = layer.state["running_mean"], layer.state["running_var"]
    expected = (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(layer(x, training=False).numpy(), expected, atol=1e-10)


def test_dropout_train_and_eval():
    layer = built(L.Dropout(0.25), (1000,))
    x = np.ones((4, 1000))
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x)
    y = layer(x, training=True).numpy()
    dropped = np.mean(y == 0)
    assert 0.2 < dropped < 0.3
    np.testing.assert_allclose(y[y != 0], 1 / 0.75)


def test_dropout_masks_are_seeded_by_the_model():
    def masks(seed):
        model = Sequential([L.Input((50,)), L.Dropout(0.5)], seed=seed)
        return model(np.ones((2, 50)), training=True).numpy()

    np.testing.assert_array_equal(masks(3), masks(3))
    assert not np.array_equal(masks(3), masks(4))


# ---------------------------------------------------------------------------------------------- shape inference


@given(h=st.integers(3, 12), w=st.integers(3, 12), k=st.integers(1, 3), s=st.integers(1, 3), d=st.integers(1, 2),
       padding=st.sampled_from(["same", "valid", 0, 1, 2]))
def test_conv2d_output_shape_formula(h, w, k, s, d, padding):
    extent = d * (k - 1) + 1
    if padding == "same":
        expected = (-(-h // s), -(-w // s))
    else:
        p = 0 if padding == "valid" else padding
        expected = ((h + 2 * p - extent) // s + 1, (w + 2 * p - extent) // s + 1)
    if min(expected) < 1:
        with pytest.raises(L.ShapeMismatchError, match="Conv2D"):
            L.Conv2D(2, k, strides=s, padding=padding, dilation=d)(L.Input((1, h, w)))
        return
    y = L.Conv2D(2, k, strides=s, padding=padding, dilation=d)(L.Input((1, h, w)))
    assert y.shape == (2, *expected)


def test_pooling_and_flatten_shapes():
    x = L.Input((3, 7, 9))
    assert L.MaxPool2D(2)(x).shape == (3, 3, 4)
    assert L.AvgPool2D(3, strides=1)(x).shape == (3, 5, 7)
    assert L.MaxPool2D(2, padding="same")(x).shape == (3, 4, 5)
    assert L.GlobalAvgPool2D()(x).shape == (3,)
    assert L.Flatten()(x).shape == (189,)


def test_dense_after_conv_without_flatten_acts_on_the_last_axis_and_the_loss_names_flatten():
    model = Sequential([L.Input((1, 8, 8)), L.Conv2D(4, 3, name="features"), L.Dense(10, name="classifier")])
    assert model.output_shape == (4, 6, 10)  # Keras: Dense on the last axis of any rank
    model.compile("sgd")
    with pytest.raises(ValueError) as info:
        model.fit(np.zeros((2, 1, 8, 8), np.float32), np.zeros(2, int), verbose=0)
    assert "Flatten" in str(info.value)


def test_conv_on_flat_input_is_a_rank_error():
    with pytest.raises(L.ShapeMismatchError, match=r"Conv2D layer 'conv'.*\(C, H, W\).*\(64,\).*'inp'"):
        Sequential([L.Input((64,), name="inp"), L.Conv2D(4, 3, name="conv")])


def test_add_of_different_shapes_names_the_inputs():
    a, b = L.Input((4,), name="left"), L.Input((5,), name="right")
    with pytest.raises(L.ShapeMismatchError, match=r"Add layer 'join'.*\(4,\).*\(5,\).*'left'.*'right'"):
        L.Add(name="join")([a, b])
    with pytest.raises(L.ShapeMismatchError, match="at least two"):
        L.Add()([a])


def test_window_larger_than_input():
    with pytest.raises(L.ShapeMismatchError, match="MaxPool2D"):
        L.MaxPool2D(4)(L.Input((1, 3, 3)))


def test_built_layer_rejects_another_input_shape():
    dense = L.Dense(3, name="shared")
    dense(L.Input((4,)))
    with pytest.raises(L.ShapeMismatchError, match=r"'shared'.*\(4,\).*built with.*\(5,\)"):
        dense(L.Input((5,)))


def test_layer_called_eagerly_builds_from_the_data():
    layer = L.Dense(2)
    y = layer(np.ones((3, 7), dtype=np.float32))
    assert y.shape == (3, 2) and layer.input_shape == (7,) and y.dtype == np.float32


@pytest.mark.parametrize("make, match", [
    (lambda: L.Dense(0), "units"),
    (lambda: L.Dense(3, activation="mish"), "unknown activation"),
    (lambda: L.Activation("nope"), "unknown activation"),
    (lambda: L.Dropout(1.0), "rate"),
    (lambda: L.Conv2D(3, 0), "kernel_size"),
    (lambda: L.Conv2D(3, 3, padding="full"), "padding"),
    (lambda: L.Conv2D(3, 3, strides=(1, 2, 3)), "strides"),
    (lambda: L.BatchNorm(momentum=1.5), "momentum"),
    (lambda: L.Input((0, 3)), "shape"),
    (lambda: L.Dense(3, kernel_initializer="magic"), "initializer"),
])
def test_bad_layer_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_functional_graph_of_shared_and_residual_layers_runs():
    x = L.Input((4,))
    dense = L.Dense(4)
    y = L.Add()([dense(x), x])
    model = Model(x, dense(y), seed=0)  # the same Dense layer used twice
    assert len(model.parameters()) == 2
    out = model(np.ones((2, 4))).numpy()
    w, b = (p.numpy() for p in dense.parameters())
    first = np.ones((2, 4)) @ w + b + 1.0
    np.testing.assert_allclose(out, first @ w + b, rtol=1e-6)


@pytest.mark.parametrize("cls, expected", [("Conv2DTranspose", "conv2d_transpose"), ("BatchNorm", "batch_norm"),
                                           ("GlobalMaxPool2D", "global_max_pool2d"), ("Dense", "dense")])
def test_default_layer_names_follow_keras(cls, expected):
    from magmadnn.layers.base import _snake

    assert _snake(cls) == expected
