"""A model of op nodes in magmadnn's own model files: ``save`` keeps its graph as ONNX bytes beside the weights,
``load_model`` rebuilds it (predictions, names, compiled state, frozen layers); ``load_weights`` and checkpoints
work as for any model."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import magmadnn as m
from magmadnn.models import graph_archive
from magmadnn.saving import ModelFileError, read_file, write_file
from tests.magmadnn._onnx_helpers import TensorProto, helper, monnx, numpy_helper, onnx
from tests.magmadnn.backends import model_device


def _graph(tmp_path):
    """x (N, 4) -> Gemm -> Sigmoid and x * a learnt-free scale: two outputs, op nodes (Sigmoid * Mul: no layer)."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["h"], transB=1),
             helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Mul", ["h", "s"], ["silu"]),
             helper.make_node("ReduceMax", ["x"], ["peak"], axes=[1], keepdims=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("silu", TensorProto.FLOAT, ["N", 3]),
                           helper.make_tensor_value_info("peak", TensorProto.FLOAT, ["N", 1])],
                          [numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "W"),
                           numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "B")])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "g.onnx")
    onnx.save(proto, path)
    return path


def _data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    return x, {"silu": rng.standard_normal((8, 3)).astype(np.float32),
               "peak": rng.standard_normal((8, 1)).astype(np.float32)}


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_a_trained_model_of_op_nodes_saves_and_resumes(tmp_path, suffix):
    x, y = _data()
    model = monnx.load(_graph(tmp_path), layers=False, seed=3)
    model.compile(optimizer="adam", loss={"silu": "mse", "peak": "mse"})
    model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    path = model.save(tmp_path / f"m{suffix}")
    tensors, meta = read_file(path)
    assert meta["model"]["graph"] == {"format": "onnx", "array": graph_archive.ARRAY}
    assert tensors[graph_archive.ARRAY].dtype == np.uint8
    back = m.load_model(path)
    assert [layer.name for layer in back.layers] == [layer.name for layer in model.layers]
    assert back.compiled and back.epoch == model.epoch
    expected, got = model.predict(x, verbose=0), back.predict(x, verbose=0)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])
    model.fit(x, y, epochs=1, batch_size=4, verbose=0)  # both continue alike: optimizer slots, RNG states
    back.fit(x, y, epochs=1, batch_size=4, verbose=0)
    for key in expected:
        np.testing.assert_allclose(back.predict(x, verbose=0)[key], model.predict(x, verbose=0)[key], rtol=1e-6)


def test_load_weights_checkpoints_and_frozen_layers(tmp_path):
    x, y = _data()
    source = _graph(tmp_path)
    model = monnx.load(source, layers=False, seed=0)
    gemm = next(layer for layer in model.layers if getattr(layer, "op_type", "") == "Gemm")
    model.compile(optimizer="sgd", loss={"silu": "mse", "peak": "mse"})
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    gemm.trainable = False
    path = model.save(tmp_path / "m.safetensors")
    back = m.load_model(path, compile=False)
    assert not back.get_layer(gemm.name).trainable and back.trainable
    fresh = monnx.load(source, layers=False, seed=0)
    fresh.set_weights([w * 0 for w in fresh.get_weights()])
    fresh.load_weights(path)  # the graph array is not a weight
    np.testing.assert_array_equal(fresh.predict(x, verbose=0)["silu"], model.predict(x, verbose=0)["silu"])
    checkpoint = model.save_checkpoint(tmp_path / "c.safetensors")
    resumed = m.load_model(checkpoint)
    assert resumed.compiled
    np.testing.assert_array_equal(resumed.predict(x, verbose=0)["peak"], model.predict(x, verbose=0)["peak"])


def test_a_damaged_graph_entry_is_a_model_file_error(tmp_path):
    model = monnx.load(_graph(tmp_path), layers=False)
    tensors, meta = read_file(model.save(tmp_path / "m.safetensors"))
    del tensors[graph_archive.ARRAY]
    write_file(tmp_path / "broken.safetensors", tensors, meta)
    with pytest.raises(ModelFileError, match="graph array is missing"):
        m.load_model(tmp_path / "broken.safetensors")
    meta["model"]["graph"]["format"] = "tflite"
    write_file(tmp_path / "other.safetensors", tensors, meta)
    with pytest.raises(ModelFileError, match="format 'tflite'"):
        m.load_model(tmp_path / "other.safetensors")


@pytest.mark.slow
def test_the_cli_imports_op_nodes_and_a_fresh_process_loads_them(tmp_path):
    """``python -m magmadnn import`` saves a graph that loads as op nodes; ``load_model`` in a process that never
    imported ``magmadnn.onnx`` reads it (the format's package is imported on first need)."""
    source = _graph(tmp_path)
    saved = str(tmp_path / "m.safetensors")
    subprocess.run([sys.executable, "-m", "magmadnn", "import", source, saved], check=True, capture_output=True)
    x, _ = _data()
    np.save(tmp_path / "x.npy", x)
    code = ("import sys, numpy as np, magmadnn\n"
            "assert 'magmadnn.onnx' not in sys.modules\n"
            f"out = magmadnn.load_model({saved!r}).predict(np.load({str(tmp_path / 'x.npy')!r}), verbose=0)\n"
            f"np.save({str(tmp_path / 'y.npy')!r}, out['silu'])\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    expected = monnx.load(source).predict(x, verbose=0)["silu"]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)


@pytest.fixture
def simulated():
    yield from model_device("simulator")


@pytest.mark.native
def test_a_model_of_op_nodes_saved_on_the_simulated_device_loads_there(tmp_path, simulated):
    x, y = _data()
    model = monnx.load(_graph(tmp_path), layers=False, device=simulated, seed=0)
    model.compile(optimizer="sgd", loss={"silu": "mse", "peak": "mse"})
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    back = m.load_model(model.save(tmp_path / "m.safetensors"), device=simulated)
    assert back.xp is model.xp
    for key, value in model.predict(x, verbose=0).items():
        np.testing.assert_array_equal(back.predict(x, verbose=0)[key], value)
