"""Functional models with several inputs and outputs export (outputs named by the model's output names, or as
asked), onnxruntime runs them like the model, and ``magmadnn.onnx.load`` reads them back; every layer class
magmadnn registers has an ONNX form or a named refusal."""

from __future__ import annotations

import numpy as np
import pytest

import magmadnn as m
from magmadnn import layers as L
from magmadnn.layers import registry
from magmadnn.onnx.exporters import EXPORTERS
from tests.magmadnn._onnx_helpers import monnx, ort


def _session(path):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _two_by_two(keys):
    """Inputs a (6,), b (3,); a shared Dense used twice; outputs a list or a dict (``keys``)."""
    a, b = L.Input((6,), name="a"), L.Input((3,), name="b")
    shared = L.Dense(3, activation="swish", name="shared")
    h = shared(L.Dense(3, name="project")(a))
    joined = L.Concatenate(name="join")([h, shared(b)])
    first, second = L.Dense(2, name="first")(joined), L.Dense(1, activation="sigmoid", name="second")(h)
    outputs = dict(zip(keys, [first, second])) if keys else [first, second]
    return m.Model([a, b], outputs, seed=0)


def _values(result):
    return list(result.values()) if isinstance(result, dict) else list(result)


@pytest.mark.parametrize("keys", [None, ("scores", "gate")])
def test_several_inputs_and_outputs(keys, tmp_path):
    model = _two_by_two(keys)
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((4, 6)).astype(np.float32), "b": rng.standard_normal((4, 3)).astype(np.float32)}
    expected = _values(model.predict([feeds["a"], feeds["b"]], verbose=0))
    path = model.export(tmp_path / "m.onnx")
    session = _session(path)
    assert [o.name for o in session.get_outputs()] == list(keys or ("first", "second"))
    for got, want in zip(session.run(None, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    back = monnx.load(path).predict([feeds["a"], feeds["b"]], verbose=0)
    assert list(back) == list(keys or ("first", "second"))  # the graph's output names
    for got, want in zip(_values(back), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_output_names_as_asked_and_an_input_given_out(tmp_path):
    x = L.Input((3,), name="x")
    model = m.Model(x, [L.Dense(2, name="d")(x), x])
    path = model.export(tmp_path / "m.onnx", output_name=["logits", "echo"])
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    logits, echo = _session(path).run(None, {"x": data})
    np.testing.assert_array_equal(echo, data)
    np.testing.assert_allclose(logits, model.predict(data, verbose=0)[0], rtol=1e-6)
    with pytest.raises(monnx.OnnxExportError, match="2 distinct names"):
        model.export(tmp_path / "bad.onnx", output_name=["only"])
    with pytest.raises(monnx.OnnxExportError, match="output name 'x' is an input's name"):
        model.export(tmp_path / "bad.onnx", output_name=["x", "y"])


def test_every_registered_layer_has_an_onnx_form_or_a_named_refusal():
    """A new layer class fails here until it has an exporter (or a reason it cannot have one)."""
    handled = {"Input", "Operation", "Lambda"}  # the graph's entries; op nodes by source; Python functions refused
    missing = sorted(name for name, cls in registry._REGISTRY.items()  # magmadnn's own: tests register theirs too
                     if cls.__module__.startswith("magmadnn.") and cls not in EXPORTERS and name not in handled)
    assert not missing, f"layers without an ONNX exporter: {missing}"


def test_a_lambda_layer_is_refused_naming_it(tmp_path):
    x = L.Input((3,), name="x")
    model = m.Model(x, L.Lambda(lambda t: t * 2.0, name="twice")(x))
    with pytest.raises(monnx.OnnxExportError, match=r"layer 'twice' \(Lambda\) has no ONNX form: it computes a "
                                                    "Python function"):
        model.export(tmp_path / "m.onnx")


def test_a_model_subclass_is_refused_naming_it(tmp_path):
    class Head(m.Model):
        def __init__(self):
            super().__init__(name="head")
            self.dense = L.Dense(2)

        def call(self, x, training=None):
            return self.dense(x)

    model = Head()
    model.predict(np.ones((2, 3), np.float32), verbose=0)
    with pytest.raises(monnx.OnnxExportError, match=r"model 'head' \(Head\) is a Model subclass"):
        model.export(tmp_path / "m.onnx")
