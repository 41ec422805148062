"""Activations written as element-wise chains read back as one activation layer: SiLU as ``x * sigmoid(x)``
(magmadnn's export of "silu"/"swish" and PyTorch's ``F.silu``); a gate ``x * sigmoid(y)`` is not SiLU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as m
from magmadnn import layers as L
from tests.magmadnn._onnx_helpers import TensorProto, helper, monnx, numpy_helper, onnx, run_ort

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("kind", ["silu", "swish"])
def test_magmadnn_silu_reads_back_as_layers(kind, tmp_path):
    x_in = L.Input((5,), name="x")
    model = m.Model(x_in, L.Activation(kind)(L.Dense(4, activation=kind)(x_in)), seed=0)
    path = model.export(tmp_path / "m.onnx")
    back = monnx.load(path, layers=True)  # the layer pass reads it, no op nodes needed
    assert [getattr(layer, "kind", None) for layer in back.layers if type(layer) is L.Activation] == ["silu", "silu"]
    x = np.random.default_rng(0).uniform(-4, 4, (6, 5)).astype(np.float32)
    np.testing.assert_allclose(back.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6, atol=1e-7)


def test_pytorch_silu_reads_as_an_activation(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.SiLU(), torch.nn.Linear(4, 2)).eval()
    x = torch.randn(5, 3)
    path = str(tmp_path / "silu.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), path, dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "n"}})
    model = monnx.load(path, layers=True)
    assert any(getattr(layer, "kind", None) == "silu" for layer in model.layers)
    with torch.no_grad():
        np.testing.assert_allclose(model.predict(x.numpy(), verbose=0), net(x).numpy(), rtol=1e-5, atol=1e-6)


def test_a_sigmoid_gate_of_another_tensor_is_not_silu():
    w = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["g"]), helper.make_node("Sigmoid", ["g"], ["s"]),
             helper.make_node("Mul", ["x", "s"], ["y"])]
    g = helper.make_graph(nodes, "gate", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
                          [numpy_helper.from_array(w, "W")])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(proto, full_check=True)
    from magmadnn.onnx.load import convert  # noqa: PLC0415

    model = convert(proto, seed=0)
    assert not any(getattr(layer, "kind", None) == "silu" for layer in model.layers)
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(model.predict(x, verbose=0), run_ort(proto, {"x": x}), rtol=1e-5, atol=1e-6)
