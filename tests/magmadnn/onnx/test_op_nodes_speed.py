"""What makes op nodes fast, and the same on the device. Shape arithmetic at run time (a dynamic batch) is computed
by onnx's reference evaluator once per distinct batch size, then remembered. The models of ``scripts/bench.py
--onnx`` (a ResNet-style CNN and a transformer encoder, exported by PyTorch with a static and a dynamic batch) loaded
as op nodes predict on the simulated device what they predict on the host and what PyTorch computes, through the
same op nodes, with one device-to-host copy a batch (the output's) as the same model built from magmadnn layers: the
shape arithmetic of a dynamic batch stays on the host."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest

from magmadnn.layers.operation import Operation
from tests.magmadnn._onnx_helpers import monnx

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]


def _bench_onnx():
    spec = importlib.util.spec_from_file_location("bench_onnx_for_test", ROOT / "scripts" / "_bench_onnx.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


B = _bench_onnx()


@pytest.fixture(scope="module", params=B.MODELS)
def exported(request, tmp_path_factory):
    """(size, PyTorch module, batch, its output, {form: path}) of one bench model, tiny (the dry-run size)."""
    name, folder = request.param, tmp_path_factory.mktemp(request.param)
    torch.manual_seed(0)
    size = dict(B.DRY_SIZES[name], batch=3)
    net = B.BUILDERS[name][0](**size)
    x = B.sample(name, size, seed=1)
    with torch.inference_mode():
        reference = net(torch.from_numpy(x)).numpy()
    paths = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on dynamo=False
        for form in ("static", "dynamic"):
            paths[form] = str(folder / f"{name}_{form}.onnx")
            B.export(net, x, paths[form], dynamic=form == "dynamic")
    return name, size, net, x, reference, paths


def _reshape_by_batch(path, scaled: bool = False) -> None:
    """x (N, 6) reshaped to (N, 2, 3) by a shape computed at run time: Shape, Gather, Unsqueeze, Concat (``scaled``:
    the batch size multiplied by one on the way, arithmetic the import does not follow)."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["n0"], axis=0),
             helper.make_node("Mul" if scaled else "Identity", ["n0", "one"] if scaled else ["n0"], ["n"]),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
             helper.make_tensor("rest", TensorProto.INT64, [2], [2, 3])]
    if scaled:
        inits.append(helper.make_tensor("one", TensorProto.INT64, [], [1]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 3])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_reshape_target_of_batch_size_and_known_sizes_is_a_constant(tmp_path):
    """The arithmetic a dynamic-batch export writes for a Reshape (Shape, Gather, Unsqueeze, Concat) becomes the
    constant target (-1, 2, 3): no node runs it, and the model exports that target."""
    import onnx

    _reshape_by_batch(tmp_path / "m.onnx")
    model = monnx.load(tmp_path / "m.onnx", layers=False)
    assert _op_types(model) == ["Reshape"]
    layer = model.layers[-1]
    np.testing.assert_array_equal(next(iter(layer.host.values())), [-1, 2, 3])
    for n in (4, 1, 3):
        x = np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)
        np.testing.assert_array_equal(model.predict(x, batch_size=2), x.reshape(n, 2, 3))
    monnx.export(model, tmp_path / "back.onnx")
    assert [n.op_type for n in onnx.load(tmp_path / "back.onnx").graph.node] == ["Reshape"]


def test_run_time_shape_arithmetic_is_computed_once_per_batch_size(tmp_path, monkeypatch):
    from onnx.reference import ReferenceEvaluator

    _reshape_by_batch(tmp_path / "m.onnx", scaled=True)
    model = monnx.load(tmp_path / "m.onnx", layers=False)
    runs = []
    evaluate = ReferenceEvaluator.run
    monkeypatch.setattr(ReferenceEvaluator, "run", lambda self, *a, **k: runs.append(1) or evaluate(self, *a, **k))
    rng = np.random.default_rng(0)
    counts = {}
    for n in (4, 2, 4, 3, 2, 4):
        x = rng.standard_normal((n, 6)).astype(np.float32)
        before = len(runs)
        np.testing.assert_array_equal(model.predict(x, batch_size=n), x.reshape(n, 2, 3))
        counts.setdefault(n, []).append(len(runs) - before)
    assert all(c[0] > 0 and not any(c[1:]) for c in counts.values()), counts  # a batch size seen: nothing evaluated


def _op_types(model) -> list[str]:
    return [layer.op_type for layer in model.layers if isinstance(layer, Operation)]


@pytest.mark.native
@pytest.mark.parametrize("form", ["static", "dynamic"])
def test_bench_models_predict_alike_on_the_simulated_device(exported, form, monkeypatch):
    name, size, net, x, reference, paths = exported
    host = monnx.load(paths[form], layers=False)
    expected = host.predict(x, batch_size=len(x))
    np.testing.assert_allclose(expected, reference, rtol=1e-4, atol=1e-5)
    from pymagma import runtime, simulator

    with simulator.simulated():
        reads = []
        copy = runtime.memcpy_dtoh
        monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                            or copy(dst, src, stream))
        device = monnx.load(paths[form], layers=False, device="gpu")
        assert device.xp.name != "host"
        assert _op_types(device) == _op_types(host) and _op_types(host)  # the same op nodes (the same chains fused)
        device.predict(x, batch_size=len(x))  # the first run makes what is made once (kernels, constants)
        del reads[:]
        got = device.predict(x, batch_size=len(x))
        op_node_reads = list(reads)
        layers = B.BUILDERS[name][1](net, device="gpu", **size)
        layers.predict(x, batch_size=len(x))
        del reads[:]
        by_layers = layers.predict(x, batch_size=len(x))
        layer_reads = list(reads)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(by_layers, reference, rtol=1e-4, atol=1e-5)
    assert op_node_reads == layer_reads == [got.nbytes]  # one copy to the host: the output's
