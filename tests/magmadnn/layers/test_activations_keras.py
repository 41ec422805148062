"""Keras 3's activations by name, against Keras itself (torch backend; gradients by torch autograd through Keras'
function), on the host and the simulated device, in Dense/Activation/LeakyReLU layers and through ONNX."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import magmadnn as m
from magmadnn import F
from magmadnn import layers as L
from magmadnn.autograd import Tensor
from tests.keras_reference import keras
from tests.magmadnn.backends import open_backend

#: Keras' activation names magmadnn takes, with the Keras function each means (Keras' own defaults).
KERAS_NAMES = ("relu", "sigmoid", "tanh", "elu", "selu", "gelu", "silu", "swish", "softplus", "softsign",
               "hard_sigmoid", "exponential", "leaky_relu", "linear")


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def _inputs(seed=0):
    x = np.random.default_rng(seed).uniform(-5, 5, (4, 7))
    x[0, :5] = [-3.0, 3.0, 0.5, -0.5, 2.9]  # hard_sigmoid's corners and points near them
    return x


def _keras(name, x, dy):
    """Keras' activation of float64 ``x`` and the gradient of ``sum(y * dy)`` by torch autograd."""
    t = torch.tensor(x, requires_grad=True)
    y = keras.activations.get(name)(t)
    (y * torch.tensor(dy)).sum().backward()
    return y.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("name", KERAS_NAMES)
def test_each_name_is_keras_function_and_gradient(device, name):
    x, dy = _inputs(), np.random.default_rng(1).standard_normal((4, 7))
    expected_y, expected_dx = _keras(name, x, dy)
    t = Tensor(x, requires_grad=True, backend=device)
    y = L.Activation(name, dtype="float64")(t)
    F.sum(F.multiply(y, Tensor(dy, backend=device))).backward()
    np.testing.assert_allclose(y.numpy(), expected_y, rtol=1e-12, atol=1e-12)
    # PyTorch's CPU hardsigmoid gradient is 1/6 rounded to float32 (1.6666667e-1) even in float64
    rtol = 1e-7 if name == "hard_sigmoid" else 1e-10
    np.testing.assert_allclose(device.to_numpy(t.grad), expected_dx, rtol=rtol, atol=1e-12)


def test_gelu_is_exact_by_default_and_approximate_is_the_tanh_form():
    x, dy = _inputs(2), np.ones((4, 7))
    exact, _ = _keras("gelu", x, dy)
    tanh_form = keras.activations.gelu(torch.tensor(x), approximate=True).numpy()
    assert np.abs(exact - tanh_form).max() > 1e-5  # the two forms differ: the test can tell them apart
    np.testing.assert_allclose(F.gelu(x).numpy(), exact, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(F.gelu(x, approximate=True).numpy(), tanh_form, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(L.Activation("gelu_tanh", dtype="float64")(x).numpy(), tanh_form, rtol=1e-12)
    np.testing.assert_allclose(F.gelu(x, approximate="tanh").numpy(), torch.nn.functional.gelu(
        torch.tensor(x), approximate="tanh").numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="approximate must be True, False, 'tanh' or 'none'"):
        F.gelu(x, approximate="fast")


def test_numpy_only_erf_is_within_4e_15_of_math_erf(monkeypatch):
    import math

    from magmadnn.backend import _erf
    from magmadnn.backend._erf import _PiecewiseErf

    monkeypatch.setattr(_erf, "_impl", _PiecewiseErf())  # what an install without scipy and numba uses
    x = _inputs(7)
    np.testing.assert_allclose(F.gelu(x).numpy(), _keras("gelu", x, np.ones_like(x))[0], rtol=0, atol=1e-14)

    x = np.concatenate([np.linspace(-8, 8, 40001), np.random.default_rng(6).standard_normal(1000) * 3,
                        [0.0, -0.0, 6.0, -6.0, 5.9999, 1e-300, np.inf, -np.inf]])
    got = _PiecewiseErf()(x)
    np.testing.assert_allclose(got, [math.erf(v) for v in x], rtol=0, atol=4e-15)
    assert np.isnan(_PiecewiseErf()(np.array([np.nan]))).all()
    assert _PiecewiseErf()(np.array([0.5], np.float32)).dtype == np.float64  # erf() casts back to x's dtype


def test_leaky_relu_slopes_are_keras():
    x = _inputs(3).astype(np.float32)
    np.testing.assert_allclose(L.Activation("leaky_relu")(x).numpy(), keras.activations.leaky_relu(x).numpy(),
                               rtol=1e-6)  # 0.2
    np.testing.assert_allclose(L.LeakyReLU()(x).numpy(), keras.layers.LeakyReLU()(x).numpy(), rtol=1e-6)  # 0.3
    np.testing.assert_allclose(L.LeakyReLU(negative_slope=0.05)(x).numpy(),
                               keras.layers.LeakyReLU(negative_slope=0.05)(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(F.leaky_relu(x).numpy(), torch.nn.functional.leaky_relu(torch.tensor(x)).numpy(),
                               rtol=1e-6)  # the functional form keeps PyTorch's 0.01
    layer = L.LeakyReLU(negative_slope=0.1)
    assert type(L.layer_class("LeakyReLU")(**layer.get_config())) is L.LeakyReLU
    assert L.LeakyReLU(**layer.get_config()).negative_slope == 0.1


@pytest.mark.parametrize("name", ["gelu", "silu", "swish", "softplus", "softsign", "selu", "elu", "hard_sigmoid",
                                  "exponential", "leaky_relu"])
def test_dense_with_a_keras_activation_predicts_as_keras(device, name):
    x = np.random.default_rng(4).standard_normal((6, 5)).astype(np.float32)
    k = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3, activation=name)])
    model = m.Sequential([L.Input((5,)), L.Dense(3, activation=name)], seed=0, device=device)
    kernel, bias = (w.astype(np.float32) for w in k.get_weights())
    _set(model, kernel, bias)
    np.testing.assert_allclose(model.predict(x), k.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


def _set(model, kernel, bias):
    dense = [layer for layer in model.layers if isinstance(layer, L.Dense)][0]
    dense._params["kernel"].data = dense.xp.asarray(kernel)
    dense._params["bias"].data = dense.xp.asarray(bias)


def test_an_unknown_activation_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown activation 'mish'.*'silu'.*'swish'"):
        L.Dense(3, activation="mish")


onnx = pytest.importorskip("onnx")


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "softplus", "softsign", "selu", "hard_sigmoid",
                                  "exponential", "leaky_relu", "elu"])
def test_onnx_export_runs_in_onnxruntime_and_reads_back(name, tmp_path):
    from magmadnn import onnx as monnx
    from tests.magmadnn._onnx_helpers import run_ort

    x = L.Input((5,), name="x")
    h = L.Dense(4, activation=name, name="fc")(x)
    y = L.Activation(name, name="act")(h)
    model = m.Model(x, y, seed=1)
    data = np.random.default_rng(5).standard_normal((3, 5)).astype(np.float32)
    path = model.export(tmp_path / "a.onnx")
    onnx.checker.check_model(onnx.load(path), full_check=True)
    expected = model.predict(data)
    np.testing.assert_allclose(run_ort(path, {"x": data}), expected, rtol=2e-5, atol=2e-6)
    if name == "silu":  # exported as Sigmoid and Mul, a decomposition the importer does not fold
        return
    back = monnx.load(path)
    np.testing.assert_allclose(back.predict(data), expected, rtol=2e-5, atol=2e-6)
