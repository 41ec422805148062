"""Fused op nodes (``magmadnn.onnx.fusion``): a MatMul by a weight, its bias Add and an activation loaded as one op
node (``F.dense``) that predicts what onnxruntime computes, trains its weights like PyTorch's autograd, exports back
as the chain it was read from; chains whose inner values are read elsewhere, or whose bias is not a constant, stay
op node per ONNX node."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn.layers.operation import Operation

from .._onnx_helpers import graph, helper, monnx, onnx, run_ort

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)
W, B = RNG.standard_normal((6, 5)).astype(np.float32), RNG.standard_normal(5).astype(np.float32)


def _op_types(model) -> list[str]:
    return [layer.op_type for layer in model.layers if isinstance(layer, Operation)]


def _chain(tmp_path, activation=None, bias_first=True, extra_reader=False):
    nodes = [helper.make_node("MatMul", ["x", "W"], ["p"]),
             helper.make_node("Add", ["B", "p"] if bias_first else ["p", "B"], ["z"])]
    out = "z"
    if activation == "Gelu":
        nodes.append(helper.make_node("Gelu", ["z"], ["a"]))
        out = "a"
    elif activation == "Relu":
        nodes.append(helper.make_node("Relu", ["z"], ["a"]))
        out = "a"
    if extra_reader:  # the product is read again: it cannot disappear into a fused node
        nodes.append(helper.make_node("Mul", [out, "p"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [out], ["y"]))
    proto = graph(nodes, {"x": (3, 6)}, {"W": W, "B": B}, opset=20)
    path = str(tmp_path / "m.onnx")
    onnx.save(proto, path)
    return path


@pytest.mark.parametrize("activation,bias_first", [(None, True), ("Gelu", False), ("Relu", True)])
def test_matmul_bias_activation_is_one_op_node_that_predicts_and_exports_like_the_chain(tmp_path, activation,
                                                                                        bias_first):
    path = _chain(tmp_path, activation, bias_first)
    model = monnx.load(path, layers=False)
    fused = "+".join(["MatMul", "Add"] + ([activation] if activation else []))
    assert _op_types(model) == [fused, "Identity"]
    x = RNG.standard_normal((4, 3, 6)).astype(np.float32)
    want = run_ort(path, {"x": x})
    got = model.predict(x, batch_size=4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    out = str(tmp_path / "back.onnx")
    monnx.export(model, out)
    written = [n.op_type for n in onnx.load(out).graph.node]
    assert written[:len(fused.split("+"))] == fused.split("+")  # the chain it was read from, node by node
    np.testing.assert_allclose(run_ort(out, {onnx.load(out).graph.input[0].name: x}), want, rtol=1e-5,
                               atol=1e-6)
    again = monnx.load(out, layers=False)
    assert _op_types(again)[0] == fused
    np.testing.assert_allclose(again.predict(x, batch_size=4), got, rtol=0, atol=0)


def test_fused_weights_train_like_pytorch(tmp_path):
    from magmadnn import Tensor

    model = monnx.load(_chain(tmp_path, "Gelu"), layers=False)
    layer = next(layer for layer in model.layers if isinstance(layer, Operation))
    x = RNG.standard_normal((4, 3, 6)).astype(np.float32)
    u = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    out = model(Tensor(x))
    out.backward(Tensor(u))
    tw, tb = torch.tensor(W, requires_grad=True), torch.tensor(B, requires_grad=True)
    (torch.nn.functional.gelu(torch.tensor(x) @ tw + tb) * torch.tensor(u)).sum().backward()
    grads = {key: np.asarray(p.grad) for key, p in layer.params.items()}
    assert len(grads) == 2  # W and b are both trainable parameters of the fused node
    np.testing.assert_allclose(grads["in1"], tw.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads["in2"], tb.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_a_chain_read_elsewhere_or_with_a_computed_bias_is_not_fused(tmp_path):
    model = monnx.load(_chain(tmp_path, extra_reader=True), layers=False)
    assert _op_types(model) == ["MatMul", "Add", "Mul"]
    x = RNG.standard_normal((2, 3, 6)).astype(np.float32)
    np.testing.assert_allclose(model.predict(x, batch_size=2), run_ort(_chain(tmp_path, extra_reader=True),
                                                                         {"x": x}), rtol=1e-5, atol=1e-5)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "c"], ["y"])]
    proto = graph(nodes, {"x": (3, 6), "c": (3, 5)}, {"W": W}, opset=20)
    path = str(tmp_path / "computed.onnx")
    onnx.save(proto, path)
    assert _op_types(monnx.load(path, layers=False)) == ["MatMul", "Add"]


def test_scaled_scores_and_their_softmax_are_one_op_node(tmp_path):
    from magmadnn import Tensor

    nodes = [helper.make_node("Mul", ["c", "x"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=-1)]
    path = str(tmp_path / "softmax.onnx")
    onnx.save(graph(nodes, {"x": (2, 3, 5)}, {"c": np.float32(0.25)}, opset=17), path)
    model = monnx.load(path, layers=False)
    assert _op_types(model) == ["Mul+Softmax"]
    x = (RNG.standard_normal((4, 2, 3, 5)) * 3).astype(np.float32)
    np.testing.assert_allclose(model.predict(x, batch_size=2), run_ort(path, {"x": x}), rtol=1e-5, atol=1e-6)
    monnx.export(model, tmp_path / "back.onnx")
    back = onnx.load(str(tmp_path / "back.onnx"))
    assert [n.op_type for n in back.graph.node] == ["Mul", "Softmax"]
    np.testing.assert_allclose(run_ort(str(tmp_path / "back.onnx"), {back.graph.input[0].name: x}),
                               run_ort(path, {"x": x}), rtol=1e-6, atol=1e-7)
    ours = Tensor(x, requires_grad=True)
    u = RNG.standard_normal(x.shape).astype(np.float32)
    model(ours).backward(Tensor(u))
    theirs = torch.tensor(x, requires_grad=True)
    (torch.softmax(theirs * 0.25, -1) * torch.tensor(u)).sum().backward()
    np.testing.assert_allclose(np.asarray(ours.grad), theirs.grad.numpy(), rtol=1e-4, atol=1e-6)
    other = [helper.make_node("Mul", ["x", "c"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=1)]
    onnx.save(graph(other, {"x": (2, 3, 5)}, {"c": np.float32(0.25)}, opset=17), path)
    assert _op_types(monnx.load(path, layers=False)) == ["Mul", "Softmax"]  # not over the keys: left alone


@pytest.mark.parametrize("dynamic", [False, True])
def test_nanogpt_attention_from_a_packed_projection_is_one_op_node(tmp_path, dynamic):
    from magmadnn import Tensor

    torch.manual_seed(0)
    dim, heads, steps = 8, 2, 5

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(dim, 3 * dim)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in self.qkv(x).split(d, dim=2))
            a = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / (d // heads) ** 0.5), dim=-1)
            return (a @ v).transpose(1, 2).contiguous().view(b, t, d)

    net = Attention().eval()
    x = RNG.standard_normal((3, steps, dim)).astype(np.float32)
    path = str(tmp_path / "attention.onnx")
    extra = {"dynamic_axes": {"x": {0: "batch"}, "y": {0: "batch"}}} if dynamic else {}
    with torch.no_grad():
        torch.onnx.export(net, (torch.from_numpy(x),), path, input_names=["x"], output_names=["y"], dynamo=False,
                          **extra)
    model = monnx.load(path, layers=False)
    assert _op_types(model) == ["MatMul+Add", "PackedAttention"]
    want = net(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(model.predict(x, batch_size=3), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_ort(path, {"x": x}), want, rtol=1e-5, atol=1e-6)
    monnx.export(model, tmp_path / "back.onnx")
    written = [n.op_type for n in onnx.load(str(tmp_path / "back.onnx")).graph.node]
    assert written.count("Transpose") == 4 and written.count("Reshape") == 4 and "Softmax" in written
    np.testing.assert_allclose(run_ort(str(tmp_path / "back.onnx"), {onnx.load(str(tmp_path / "back.onnx"))
                                                                     .graph.input[0].name: x}), want, rtol=1e-5,
                               atol=1e-6)
    ours = Tensor(x, requires_grad=True)  # the gradient through the fused node, against PyTorch's autograd
    u = RNG.standard_normal(want.shape).astype(np.float32)
    model(ours).backward(Tensor(u))
    theirs = torch.tensor(x, requires_grad=True)
    (net(theirs) * torch.tensor(u)).sum().backward()
    np.testing.assert_allclose(np.asarray(ours.grad), theirs.grad.numpy(), rtol=1e-4, atol=1e-5)
