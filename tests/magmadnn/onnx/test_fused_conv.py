"""The convolution fusions of the op graph (``magmadnn.onnx.op_nodes.fused_conv``): chains Conv -> Relu and
Conv -> Add -> Relu become one op node that predicts what the nodes one by one predict (bit for bit on the host) and
onnxruntime, trains with their gradients, and exports as the chain again; what may not be fused is left as it is."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import Tensor
from magmadnn.layers.operation import Operation
from magmadnn.onnx.load import convert

from .._onnx_helpers import graph, helper, onnx, run_ort

RNG = np.random.default_rng(0)


def _w(*shape):
    return (RNG.standard_normal(shape) * 0.4).astype(np.float32)


WEIGHTS = {"W1": _w(4, 4, 3, 3), "B1": _w(4), "W2": _w(4, 4, 3, 3), "W3": _w(6, 4, 3, 3), "B3": _w(6),
           "W4": _w(6, 4, 1, 1)}


def resnet_block():
    """x -> Conv+Relu -> Conv (no bias) + x -> Relu -> a strided Conv and a 1x1 strided shortcut Conv added -> Relu:
    the residual on the left and on the right, an Add of two convolutions (the later one fuses)."""
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "W2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["x", "c2"], ["a2"]),
             helper.make_node("Relu", ["a2"], ["y2"]),
             helper.make_node("Conv", ["y2", "W3", "B3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Conv", ["y2", "W4"], ["c4"], strides=[2, 2]),
             helper.make_node("Add", ["c3", "c4"], ["a4"]),
             helper.make_node("Relu", ["a4"], ["y"])]
    return graph(nodes, {"x": (4, 7, 7)}, WEIGHTS)


def _ops(model):
    return [layer.op_type for layer in model.layers if isinstance(layer, Operation)]


X = RNG.standard_normal((5, 4, 7, 7)).astype(np.float32)


def test_chains_fuse_and_predict_what_the_nodes_one_by_one_predict():
    proto = resnet_block()
    fused, apart = convert(proto, layers=False), convert(proto, layers=False, fuse=False)
    assert _ops(fused) == ["Conv+Relu", "Conv+Add+Relu", "Conv", "Conv+Add+Relu"]
    assert _ops(apart) == [n.op_type for n in proto.graph.node]
    got = fused.predict(X, batch_size=5)
    np.testing.assert_array_equal(got, apart.predict(X, batch_size=5))  # the same float operations, in order
    np.testing.assert_allclose(got, run_ort(proto, {"x": X}), rtol=2e-4, atol=2e-5)
    assert [w.shape for w in fused.get_weights()] == [w.shape for w in apart.get_weights()]  # the Conv's weights


def test_fused_chains_train_with_the_gradients_of_the_nodes():
    proto = resnet_block()
    fused, apart = convert(proto, layers=False), convert(proto, layers=False, fuse=False)
    u = RNG.standard_normal((5, 6, 4, 4)).astype(np.float32)
    grads = []
    for model in (fused, apart):
        x = Tensor(X.copy(), requires_grad=True)
        out = model(x)
        (out * Tensor(u)).sum().backward()
        grads.append([np.asarray(g) for g in [x.grad] + [w.grad for w in model.trainable_weights]])
    assert len(grads[0]) == len(grads[1]) == 1 + len(WEIGHTS)
    for mine, theirs in zip(*grads):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    t = {k: torch.tensor(v, requires_grad=True) for k, v in WEIGHTS.items()}
    tx = torch.tensor(X, requires_grad=True)
    y2 = tF.relu(tx + tF.conv2d(tF.relu(tF.conv2d(tx, t["W1"], t["B1"], padding=1)), t["W2"], padding=1))
    y = tF.relu(tF.conv2d(y2, t["W3"], t["B3"], stride=2, padding=1) + tF.conv2d(y2, t["W4"], stride=2))
    (y * torch.tensor(u)).sum().backward()
    np.testing.assert_allclose(grads[0][0], tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    fused.compile(optimizer="sgd", loss="mse")
    before = [w.copy() for w in fused.get_weights()]
    history = fused.fit(X, u, batch_size=5, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert all(not np.array_equal(a, b) for a, b in zip(before, fused.get_weights()))  # every weight trained


def test_a_fused_model_exports_the_chain_back(tmp_path):
    proto = resnet_block()
    model = convert(proto, layers=False)
    path = str(tmp_path / "out.onnx")
    model.export(path)
    written = onnx.load(path)
    assert sorted(n.op_type for n in written.graph.node) == sorted(n.op_type for n in proto.graph.node)
    expected = model.predict(X, batch_size=5)
    np.testing.assert_allclose(run_ort(path, {written.graph.input[0].name: X}), expected, rtol=2e-4, atol=2e-5)
    again = convert(written, layers=False)
    assert _ops(again) == _ops(model)
    np.testing.assert_array_equal(again.predict(X, batch_size=5), expected)


def _conv(x, w, out, **attrs):
    return helper.make_node("Conv", [x, w], [out], pads=[1, 1, 1, 1], **attrs)


@pytest.mark.parametrize("case", ["graph_output", "constant_operand", "broadcast", "read_twice"])
def test_what_is_not_fused_stays_node_by_node(case):
    """A value of the chain that is also a graph output or read twice, an Add of a constant (a bias, a weight of
    its own) or of a broadcast operand: those nodes stay apart, and the model still predicts onnxruntime's values."""
    w = {"W": _w(4, 4, 3, 3)}
    outputs = None
    if case == "graph_output":  # c is an output too: the Conv stays apart; Add -> Relu are plain nodes
        nodes = [_conv("x", "W", "c"), helper.make_node("Add", ["c", "x"], ["a"]),
                 helper.make_node("Relu", ["a"], ["y"])]
        outputs = ["y", "c"]
        expected = ["Conv", "Add", "Relu"]
    elif case == "constant_operand":  # the Add's other operand is an initializer: Conv, then Add -> Relu apart
        w["K"] = _w(4, 1, 1)
        nodes = [_conv("x", "W", "c"), helper.make_node("Add", ["c", "K"], ["a"]),
                 helper.make_node("Relu", ["a"], ["y"])]
        expected = ["Conv", "Add", "Relu"]
    elif case == "broadcast":  # a per-channel mean added: not the output's shape
        nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=1), _conv("x", "W", "c"),
                 helper.make_node("Add", ["c", "m"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
        expected = ["ReduceMean", "Conv", "Add", "Relu"]
    else:  # the Add's output is read by the Relu and by a second Add: Conv + Add fuse, the rest apart
        nodes = [_conv("x", "W", "c"), helper.make_node("Add", ["c", "x"], ["a"]),
                 helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Add", ["r", "a"], ["y"])]
        expected = ["Conv+Add", "Relu", "Add"]
    proto = graph(nodes, {"x": (4, 5, 5)}, w, opset=17)
    if outputs:
        proto.graph.output.append(helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, ["N", 4, 5, 5]))
    model = convert(proto, layers=False)
    assert sorted(_ops(model)) == sorted(expected)
    x = RNG.standard_normal((3, 4, 5, 5)).astype(np.float32)
    got = model.predict(x, batch_size=3)
    got = got[model.output_names[0]] if isinstance(got, dict) else got
    np.testing.assert_allclose(got, run_ort(proto, {"x": x}), rtol=2e-4, atol=2e-5)
