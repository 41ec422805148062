"""Every activation magmadnn has (its registry, ``geometry.ACTIVATION_NAMES``: a new one joins these tests and fails
until it has an ONNX form) exports, in Dense, Conv2D and Activation layers: onnxruntime runs the file like the model,
and ``magmadnn.onnx.load`` reads it back to the same predictions."""

from __future__ import annotations

import numpy as np
import pytest

import magmadnn as m
from magmadnn import layers as L
from magmadnn.backend import geometry
from magmadnn.onnx.exporters import ACTIVATION_OPS
from tests.magmadnn._onnx_helpers import monnx, ort


def _session(path):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _round_trip(model, x, tmp_path):
    path = model.export(tmp_path / "m.onnx")
    expected = model.predict(x, verbose=0)
    np.testing.assert_allclose(_session(path).run(None, {"x": x})[0], expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(monnx.load(path).predict(x, verbose=0), expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("kind", geometry.ACTIVATION_NAMES)
def test_every_activation_exports_in_dense_and_activation_layers(kind, tmp_path):
    x_in = L.Input((5,), name="x")
    y = L.Activation(kind, name="act")(L.Dense(4, activation=kind, name="dense")(x_in))
    x = np.random.default_rng(0).uniform(-3, 3, (6, 5)).astype(np.float32)
    _round_trip(m.Model(x_in, y, seed=1), x, tmp_path)


@pytest.mark.parametrize("kind", geometry.ACTIVATION_NAMES)
def test_every_activation_exports_in_a_convolution(kind, tmp_path):
    """Rank 4: softmax runs over the channels (axis 1) in the model and in the file."""
    x_in = L.Input((2, 5, 5), name="x")
    y = L.Conv2D(3, 3, activation=kind, name="conv")(x_in)
    x = np.random.default_rng(1).uniform(-2, 2, (2, 2, 5, 5)).astype(np.float32)
    _round_trip(m.Model(x_in, y, seed=2), x, tmp_path)


@pytest.mark.parametrize("kind, alpha", [("leaky_relu", 0.05), ("elu", 0.7)])
def test_activation_slopes_are_written(kind, alpha, tmp_path):
    x_in = L.Input((4,), name="x")
    layer = L.LeakyReLU(negative_slope=alpha) if kind == "leaky_relu" else L.Activation(kind, alpha=alpha)
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    _round_trip(m.Model(x_in, layer(x_in)), x, tmp_path)


def test_the_activation_table_covers_the_registry():
    assert set(geometry.ACTIVATIONS) <= set(ACTIVATION_OPS)
