"""Models of op nodes (``magmadnn.onnx.load(..., layers=False)``) written back to ONNX: the file onnxruntime runs
predicts what the model predicts (and what onnxruntime computes from the original file), carries fine-tuned
parameters, and loads again into the same model; what cannot be written is an OnnxExportError naming it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as m
from magmadnn import layers as L
from magmadnn.layers.operation import Operation
from tests.magmadnn._onnx_helpers import TensorProto, helper, monnx, numpy_helper, onnx, ort
from tests.magmadnn.backends import model_device

torch = pytest.importorskip("torch")
nn, tF = torch.nn, torch.nn.functional


class Gated(nn.Module):
    """A mean buffer subtracted, HardSwish, torch.chunk, a sigmoid gate, two outputs: op nodes only."""

    def __init__(self):
        super().__init__()
        self.c, self.f = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(4 * 6 * 6, 5)
        self.register_buffer("mean", torch.linspace(-0.5, 0.5, 3).view(1, 3, 1, 1))

    def forward(self, x):
        y = tF.hardswish(self.c(x - self.mean))
        a, b = y.chunk(2, 1)
        y = torch.cat([a * torch.sigmoid(b), tF.mish(b)], 1)
        return self.f(y.flatten(1)), y.mean((2, 3))


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """The torch model exported with dynamo=False (a dynamic batch), its file, a batch and PyTorch's outputs."""
    torch.manual_seed(0)
    path = str(tmp_path_factory.mktemp("gated") / "gated.onnx")
    x, module = torch.randn(3, 3, 6, 6), Gated().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), path, dynamo=False, input_names=["x"],
                          output_names=["logits", "features"], dynamic_axes={"x": {0: "n"}})
    with torch.no_grad():
        expected = dict(zip(["logits", "features"], (t.numpy() for t in module(x))))
    return path, x.numpy(), expected


def _session(path):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _close(a, b, atol=2e-5):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=atol)


@pytest.fixture(params=["host", pytest.param("simulator", marks=pytest.mark.native),
                        pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


def test_a_loaded_graph_exports_and_predicts_the_same(gated, tmp_path, device):
    source, x, torch_out = gated
    model = monnx.load(source, layers=False, device=device)
    assert all(type(layer).__name__ in ("Input", "Operation") for layer in model.layers)
    mine = model.predict(x, verbose=0)
    original = dict(zip(["logits", "features"], _session(source).run(None, {"x": x})))
    path = model.export(tmp_path / "again.onnx")
    session = _session(path)
    assert [o.name for o in session.get_outputs()] == ["logits", "features"]
    assert session.get_inputs()[0].shape[0] == "batch"
    written = dict(zip(["logits", "features"], session.run(None, {"x": x})))
    again = monnx.load(path, layers=False, device=device)
    assert [layer.name for layer in again.layers] == [layer.name for layer in model.layers]
    back = again.predict(x, verbose=0)
    for key in ("logits", "features"):
        _close(original[key], torch_out[key])
        _close(mine[key], original[key])
        _close(written[key], original[key])
        _close(back[key], mine[key])


def test_the_export_carries_fine_tuned_parameters(gated, tmp_path, device):
    source, x, _ = gated
    model = monnx.load(source, layers=False, device=device, seed=0)
    before = model.predict(x, verbose=0)
    model.compile(optimizer="adam", loss={"logits": "mse", "features": "mse"})
    rng = np.random.default_rng(1)
    y = {"logits": rng.standard_normal((3, 5)).astype(np.float32),
         "features": rng.standard_normal((3, 4)).astype(np.float32)}
    model.fit(x, y, epochs=3, batch_size=3, verbose=0)
    after = model.predict(x, verbose=0)
    assert np.abs(after["logits"] - before["logits"]).max() > 1e-3  # it trained
    path = model.export(tmp_path / "tuned.onnx")
    written = dict(zip(["logits", "features"], _session(path).run(None, {"x": x})))
    for key in after:
        _close(written[key], after[key])
    stored = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    params = [p for p in model.trainable_weights]
    assert params and all(any(v.shape == p.shape and np.allclose(v, p.numpy()) for v in stored.values())
                          for p in params)


class Block(nn.Module):
    """LayerNorm, a Linear, Mish and softmax over (N, T, F): the dynamo exporter's forms (opset 18)."""

    def __init__(self):
        super().__init__()
        self.n, self.f = nn.LayerNorm(6), nn.Linear(6, 3)

    def forward(self, x):
        return tF.mish(self.f(self.n(x))).softmax(-1)


@pytest.mark.slow
def test_a_dynamo_export_round_trips(tmp_path):
    torch.manual_seed(0)
    module, x = Block().eval(), torch.randn(2, 4, 6)
    source = str(tmp_path / "block.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), source, dynamic_shapes=({0: torch.export.Dim("batch")},))
    model = monnx.load(source, layers=False)
    path = model.export(tmp_path / "again.onnx")
    name = _session(source).get_inputs()[0].name
    with torch.no_grad():
        expected = module(x).numpy()
    _close(_session(path).run(None, {name: x.numpy()})[0], expected)
    _close(monnx.load(path, layers=False).predict(x.numpy(), verbose=0), expected)


def _checked(proto):
    proto = onnx.shape_inference.infer_shapes(proto)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def _round_trip(proto, feeds, tmp_path):
    """The graph loaded as op nodes and exported: onnxruntime on both files and the model agree; the export."""
    source = str(tmp_path / "source.onnx")
    onnx.save(_checked(proto), source)
    model = monnx.load(source, layers=False)
    path = model.export(tmp_path / "again.onnx")
    expected, written = _session(source).run(None, feeds), _session(path).run(None, feeds)
    for a, b in zip(expected, written):
        assert a.dtype == b.dtype
        _close(b, a)
    return model, onnx.load(path)


def test_inputs_without_a_batch_axis_and_axes_as_inputs_keep_their_opset(tmp_path):
    """A weight fed as a graph input (no batch axis: its first axis differs from the data's) and ReduceSum's axes
    as an input (opset 18) are written as they were read."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("ReduceSum", ["m", "axes"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                                       helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
                          [numpy_helper.from_array(np.array([0], np.int64), "axes")])
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32), "w": rng.standard_normal((4, 2)).astype(np.float32)}
    _, written = _round_trip(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), feeds, tmp_path)
    assert written.opset_import[0].version == 18
    assert [d.dim_value for d in written.graph.input[1].type.tensor_type.shape.dim] == [4, 2]


def test_shape_arithmetic_of_a_dynamic_batch_and_an_old_opset(tmp_path):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (run on the host at run time), TopK's two outputs, opset 13
    (older than the layers' exports): written at opset 13."""
    const = {"zero": np.array(0, np.int64), "zeros": np.array([0], np.int64), "six": np.array([6], np.int64),
             "k": np.array([2], np.int64)}
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zeros"], ["n1"]),
             helper.make_node("Concat", ["n1", "six"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("TopK", ["r", "k"], ["values", "indices"], axis=-1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])],
                          [helper.make_tensor_value_info("values", TensorProto.FLOAT, ["N", 2]),
                           helper.make_tensor_value_info("indices", TensorProto.INT64, ["N", 2])],
                          [numpy_helper.from_array(v, k) for k, v in const.items()])
    x = np.random.default_rng(1).standard_normal((5, 2, 3)).astype(np.float32)
    model, written = _round_trip(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), {"x": x},
                                 tmp_path)
    assert written.opset_import[0].version == 13
    assert [o.type.tensor_type.elem_type for o in written.graph.output] == [TensorProto.FLOAT, TensorProto.INT64]
    with pytest.raises(monnx.OnnxExportError, match="opset 13.*opset=13"):
        model.export(tmp_path / "newer.onnx", opset=17)


def test_an_operation_without_onnx_source_is_named(tmp_path):
    x = L.Input((3,), name="x")
    double = Operation(lambda a: m.F.multiply(a, 2.0), [("input", 0)], name="double", output_shapes=[(3,)])
    model = m.Model(x, L.Dense(2)(double(x)))
    with pytest.raises(monnx.OnnxExportError, match=r"Operation 'double'.*no ONNX form"):
        model.export(tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_op_nodes_of_an_old_opset_do_not_mix_with_layers(tmp_path):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    source = str(tmp_path / "relu.onnx")
    onnx.save(_checked(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])), source)
    loaded = monnx.load(source, layers=False)
    model = m.Model(loaded.inputs[0], L.Dense(2, name="head")(loaded.outputs[0]))
    with pytest.raises(monnx.OnnxExportError, match="opset 13 with layers"):
        model.export(tmp_path / "m.onnx")


def _node_suite_sample():
    """One ONNX node test per operator (the first of each), as onnx generates them."""
    from onnx.backend.test.case.node import collect_testcases  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [case for case in collect_testcases(None) if case.model.graph.node]
    first = {}
    for case in cases:
        first.setdefault(case.model.graph.node[-1].op_type, case)
    return list(first.values())


def _arrays(values):
    if not all(hasattr(v, "dims") or isinstance(v, np.ndarray) for v in values):
        return None
    return [numpy_helper.to_array(v) if hasattr(v, "dims") else v for v in values]


def _ort_runs(proto, feeds):
    try:
        session = ort.InferenceSession(proto.SerializeToString(), _quiet(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    except Exception:  # noqa: BLE001 - an operator or type onnxruntime has no kernel for: nothing to compare with
        return None


def _quiet():
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return options


@pytest.mark.slow
def test_the_node_suite_round_trips_through_export():
    """One node test per operator: every one that loads and predicts right exports; where onnxruntime runs the
    original and agrees with ONNX's expected outputs, it runs the export to the model's predictions, and the export
    loads back to the same predictions."""
    from magmadnn.onnx.export import to_proto  # noqa: PLC0415
    from magmadnn.onnx.load import convert  # noqa: PLC0415

    compared, problems = 0, []
    for case in _node_suite_sample():
        inputs, expected = (_arrays(values) for values in case.data_sets[0])
        if inputs is None or expected is None:  # sequences, optionals: no tensor operator of magmadnn's
            continue
        try:  # export checks what it writes as onnx does; a case whose own graph fails that (onnx's function body
            onnx.checker.check_model(case.model, full_check=True)  # of MeanVarianceNormalization) proves nothing
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
            continue
        feed = inputs[0] if len(inputs) == 1 else list(inputs)
        batch = max(len(inputs[0]) if inputs and np.ndim(inputs[0]) else 1, 1)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                model = convert(case.model, seed=0)
                got = model.predict(feed, batch_size=batch, verbose=0)
            except monnx.OnnxImportError:
                continue
            got = list(got.values()) if isinstance(got, dict) else [got]
            names = [i.name for i in case.model.graph.input]
            original = _ort_runs(case.model, dict(zip(names, inputs)))
            if original is None or not all(np.allclose(o, e, rtol=1e-4, atol=1e-5, equal_nan=True)
                                           for o, e in zip(original, expected)) or not all(
                    np.allclose(np.reshape(g, np.shape(e)), e, rtol=1e-4, atol=1e-5, equal_nan=True)
                    for g, e in zip(got, expected)):
                continue
            proto = to_proto(model, output_name=model.output_names if len(model.outputs) > 1 else "output")
            feeds = dict(zip([i.name for i in proto.graph.input], inputs))
            written = _ort_runs(proto, feeds)
            again = convert(proto, seed=0).predict(feed, batch_size=batch, verbose=0)
        again = list(again.values()) if isinstance(again, dict) else [again]
        if written is None or not all(np.allclose(w, np.reshape(g, np.shape(w)), rtol=1e-4, atol=1e-5, equal_nan=True)
                                      for w, g in zip(written, got)):
            problems.append(f"{case.name}: onnxruntime on the export")
        elif not all(np.array_equal(a, g, equal_nan=True) for a, g in zip(again, got)):
            problems.append(f"{case.name}: loaded back")
        compared += 1
    assert not problems, problems
    assert compared >= 100, compared
