"""Small ONNX graphs built with onnx.helper, and onnxruntime as the reference that runs them."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from magmadnn import onnx as monnx  # noqa: E402

RTOL, ATOL = 2e-4, 2e-5


def graph(nodes, inputs: dict, initializers: dict | None = None, output: str = "y", opset: int = 17,
          output_shape=None):
    """A checked ModelProto: ``inputs`` name -> per-sample shape (a dynamic batch axis "N" is put first); the
    output's shape is inferred unless given (per sample)."""
    ins = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", *shape]) for name, shape in inputs.items()]
    inits = [numpy_helper.from_array(np.asarray(v, np.float32) if np.asarray(v).dtype.kind == "f" else np.asarray(v),
                                     k) for k, v in (initializers or {}).items()]
    out = helper.make_tensor_value_info(output, TensorProto.FLOAT, None if output_shape is None
                                        else ["N", *output_shape])
    proto = helper.make_model(helper.make_graph(nodes, "g", ins, [out], inits),
                              opset_imports=[helper.make_opsetid("", opset)], ir_version=9 if opset >= 19 else 8)
    proto = onnx.shape_inference.infer_shapes(proto, strict_mode=True)  # gives the output its shape
    onnx.checker.check_model(proto, full_check=True)
    return proto


def run_ort(proto_or_path, feeds: dict) -> np.ndarray:
    source = proto_or_path if isinstance(proto_or_path, str) else proto_or_path.SerializeToString()
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: shape-inference notes on ceil_mode outputs are expected
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def save(proto, tmp_path, name: str = "m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(proto, path)
    return path


def imported(proto, device="host", layers="auto"):
    """The magmadnn model of ``proto`` (through the in-memory conversion load uses after reading the file)."""
    from magmadnn.onnx.load import convert

    return convert(proto, device=device, seed=0, layers=layers)


def assert_matches_ort(proto, x: np.ndarray, device="host", rtol=RTOL, atol=ATOL):
    """Imported on ``device``, the model predicts what onnxruntime computes from the same graph."""
    expected = run_ort(proto, {"x": x})
    model = imported(proto, device)
    got = model.predict(x, batch_size=len(x))
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=rtol, atol=atol)
    return model


def loads_like_ort(proto_or_path, batch: int = 2, seed: int = 0):
    """Loaded with the default (layers, else op nodes), the model predicts onnxruntime's outputs on random inputs
    drawn from the graph's input specs (a dynamic axis takes ``batch``)."""
    proto = onnx.load(proto_or_path) if isinstance(proto_or_path, str) else proto_or_path
    rng = np.random.default_rng(seed)
    weights = {i.name for i in proto.graph.initializer}
    feeds = {}
    for spec in proto.graph.input:
        if spec.name in weights:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else batch for d in spec.type.tensor_type.shape.dim]
        feeds[spec.name] = rng.standard_normal(dims).astype(np.float32)
    expected = run_ort(proto_or_path, feeds)
    from magmadnn.onnx.load import convert

    got = convert(proto, seed=0).predict(feeds if len(feeds) > 1 else next(iter(feeds.values())))
    got = next(iter(got.values())) if isinstance(got, dict) else got
    np.testing.assert_allclose(np.asarray(got).reshape(expected.shape), expected, rtol=1e-4, atol=1e-4)


__all__ = ["onnx", "ort", "helper", "numpy_helper", "TensorProto", "monnx", "graph", "run_ort", "save", "imported",
           "assert_matches_ort", "loads_like_ort"]
