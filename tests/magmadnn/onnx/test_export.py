"""ONNX export and round trips: every zoo model and every exportable layer, written by ``Model.export``, passes
onnx.checker's full check and runs in onnxruntime with magmadnn's predictions (host and simulated device); read back
with ``magmadnn.onnx.load`` it predicts the same again."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import magmadnn as m
from magmadnn import layers as L
from magmadnn import zoo
from tests.magmadnn._onnx_helpers import RTOL, monnx, onnx, run_ort
from tests.magmadnn.backends import open_backend

ATOL = 5e-5


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def every_layer_model(device=None):
    """One model with every layer that has an ONNX form, in the forms it takes (asymmetric padding included)."""
    x = L.Input((2, 11, 10), name="image")
    h = L.Conv2D(4, 3, padding="same", activation="relu", name="conv_same")(x)
    h = L.BatchNorm(momentum=0.8, eps=1e-3, name="bn")(h)
    h = L.MaxPool2D(2, name="max")(h)
    branch = L.Conv2D(4, (3, 1), padding=((1, 1), (0, 0)), dilation=(1, 2), activation="tanh", name="conv_b")(h)
    branch = L.Conv2D(4, (1, 3), padding=(0, 2), dilation=(1, 2), activation="sigmoid", name="conv_c")(branch)
    h = L.Add(name="residual")([h, branch])
    pooled = L.GlobalAvgPool2D(name="gap")(h)
    h = L.AvgPool2D(3, strides=2, padding=((1, 0), (0, 1)), name="avg")(h)
    h = L.Softmax(axis=1, name="channel_softmax")(h)
    h = L.Flatten(name="flat")(h)
    h = L.Dense(12, activation="gelu", name="fc1")(h)
    h = L.BatchNorm(name="bn_features")(h)
    h = L.Activation("linear", name="identity")(h)
    h = L.Activation("elu", alpha=0.5, name="elu")(h)
    h = L.Dropout(0.3, name="drop")(h)
    h = L.Dense(4, name="fc2")(h)
    p = L.Dense(4, activation="leaky_relu", use_bias=False, name="fc_pooled")(pooled)
    h = L.Add(name="join")([h, p])
    y = L.LogSoftmax(name="log_probs")(h)
    return m.Model(x, y, name="every_layer", seed=3, device=device)


def _export_and_compare(model, x, tmp_path, name="m.onnx"):
    path = model.export(tmp_path / name)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    expected = model.predict(x, batch_size=len(x))
    got = run_ort(path, {model.inputs[0].layer.name: x})
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    return path, expected


def test_every_layer_round_trips_through_onnxruntime(device, tmp_path):
    model = every_layer_model(device)
    x = np.random.default_rng(0).standard_normal((5, 2, 11, 10)).astype(np.float32)
    path, expected = _export_and_compare(model, x, tmp_path)
    proto = onnx.load(path)
    assert proto.opset_import[0].version == 20  # GELU needs opset 20
    assert [i.name for i in proto.graph.input] == ["image"] and proto.graph.output[0].name == "output"
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    back = monnx.load(path, device=device)
    np.testing.assert_allclose(back.predict(x), expected, rtol=RTOL, atol=ATOL)
    kinds = sorted(type(layer).__name__ for layer in back.layers)
    # activations fold back into their layers; the linear activation (an Identity node) leaves no layer
    assert kinds == sorted(type(layer).__name__ for layer in model.layers if layer.name != "identity")
    assert back.count_params() == model.count_params()


#: per zoo model: a small input shape and options that keep it small
ZOO = {"lenet5": ((1, 28, 28), {}), "mlp": ((1, 12, 12), {}), "cnn": ((1, 12, 12), {}),
       "resnet": ((3, 16, 16), {}), "vgg": ((3, 32, 32), {"width": 0.125}),
       "alexnet": ((3, 32, 32), {"width": 0.125, "dense": (32, 32)}),
       "char_transformer": ((8,), {"dim": 16, "heads": 2, "blocks": 1}),
       "vit_tiny": ((3, 16, 16), {"dim": 16, "heads": 2}), "lstm": ((1, 6, 5), {"units": 4, "layers": 2})}


@pytest.mark.parametrize("name", sorted(zoo.BUILDERS))
def test_zoo_models_export(name, tmp_path):
    assert name in ZOO, f"zoo model {name!r} has no entry in this test: give it a small input shape"
    shape, options = ZOO[name]
    model = zoo.build(name, shape, 5, **options)
    rng = np.random.default_rng(1)
    integer = np.dtype(model.inputs[0].layer.dtype).kind in "iu"
    x = rng.integers(0, 5, (3, *shape)) if integer else rng.standard_normal((3, *shape)).astype(np.float32)
    path, expected = _export_and_compare(model, x, tmp_path)
    back = monnx.load(path)  # and reads back (attention as MultiHeadAttention, not its parts)
    np.testing.assert_allclose(back.predict(x), expected, rtol=RTOL, atol=ATOL)
    attention = [[type(layer).__name__ for layer in mdl.layers].count("MultiHeadAttention") for mdl in (model, back)]
    assert attention[0] == attention[1]


def test_a_trained_model_runs_in_onnxruntime_after_fit(tmp_path):
    model = zoo.build("cnn", (1, 12, 12), 3, filters=(4, 8), dense=16, batch_norm=True, dropout=0.2)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((16, 1, 12, 12)).astype(np.float32), rng.integers(0, 3, 16)
    model.compile(m.optimizers.Adam(1e-2), "cross_entropy", seed=0)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # running statistics and weights move away from init
    _export_and_compare(model, x[:6], tmp_path)


def test_float64_models_export_as_double(tmp_path):
    x_in = L.Input((3,), name="features")
    model = m.Model(x_in, L.Dense(2, activation="tanh")(x_in), dtype="float64", seed=0)
    x = np.random.default_rng(3).standard_normal((4, 3))
    _, expected = _export_and_compare(model, x, tmp_path)
    assert monnx.load(tmp_path / "m.onnx").dtype == np.float64


def test_a_layer_without_onnx_form_is_named(tmp_path):
    class Doubler(L.Layer):
        def call(self, x, training=False):
            return m.F.multiply(x, 2.0)

    x = L.Input((3,))
    model = m.Model(x, Doubler(name="twice")(L.Dense(3)(x)))
    with pytest.raises(monnx.OnnxExportError, match=r"layer 'twice' \(Doubler\) has no ONNX form; exportable"):
        model.export(tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_batch_normalization_of_a_sequences_features_is_refused_not_misexported(tmp_path):
    """ONNX's BatchNormalization normalises axis 1; a Keras BatchNormalization of (N, T, F) features (axis -1) is
    refused, and nothing is written."""
    x = L.Input((5, 3))
    model = m.Model(x, L.BatchNormalization(name="bn")(x))
    with pytest.raises(monnx.OnnxExportError, match=r"layer 'bn': normalising axis 2 of a rank-3 input"):
        model.export(tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_an_opset_too_old_for_a_layer_is_refused(tmp_path):
    x = L.Input((3,))
    model = m.Model(x, L.Dense(3, activation="gelu", name="g")(x))
    with pytest.raises(monnx.OnnxExportError, match=r"opset 17: Dense layer 'g' \(activation gelu\) needs opset 20"):
        model.export(tmp_path / "m.onnx", opset=17)
    path = model.export(tmp_path / "m.onnx", opset=21, output_name="scores")
    proto = onnx.load(path)
    assert proto.opset_import[0].version == 21 and proto.graph.output[0].name == "scores"


def test_without_onnx_installed_export_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    x = L.Input((3,))
    with pytest.raises(ImportError, match=r"pip install 'magmadnn\[onnx\]'"):
        m.Model(x, L.Dense(2)(x)).export(tmp_path / "m.onnx")
    with pytest.raises(ImportError, match=r"pip install 'magmadnn\[onnx\]'"):
        monnx.load(tmp_path / "m.onnx")


def test_cli_exports_imports_and_describes(tmp_path, capsys):
    from magmadnn.cli import main

    model = zoo.build("cnn", (1, 12, 12), 3, filters=(4, 8), dense=16)
    saved = model.save(tmp_path / "cnn.npz")
    onnx_path, back = str(tmp_path / "cnn.onnx"), str(tmp_path / "back.safetensors")
    assert main(["export", saved, onnx_path]) == 0
    assert main(["info", onnx_path]) == 0
    assert main(["import", onnx_path, back]) == 0
    out = capsys.readouterr().out
    assert "importable: yes" in out and "opset 17" in out and f"wrote {back}" in out
    x = np.random.default_rng(4).standard_normal((2, 1, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(m.load_model(back).predict(x), model.predict(x), rtol=RTOL, atol=ATOL)
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    assert main(["import", str(tmp_path / "junk.onnx"), back]) == 2  # one line on stderr, no traceback
    assert "is not a readable ONNX file" in capsys.readouterr().err


@pytest.mark.native
def test_an_imported_model_trains_on_the_device_without_host_reads(tmp_path, monkeypatch):
    """Every layer an import makes (Softmax/LogSoftmax included) keeps training on the device: one read an epoch."""
    path = every_layer_model().export(tmp_path / "m.onnx")
    from pymagma import runtime, simulator

    with simulator.simulated():
        model = monnx.load(path, device="gpu", seed=0)
        reads = []
        copy = runtime.memcpy_dtoh
        monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                            or copy(dst, src, stream))
        rng = np.random.default_rng(5)
        x, y = rng.standard_normal((16, 2, 11, 10)).astype(np.float32), rng.integers(0, 4, 16)
        model.compile(m.optimizers.SGD(1e-2), "cross_entropy", device="gpu")
        model.progress_interval = float("inf")
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        assert len(reads) == 1, f"{len(reads)} device-to-host copies in one epoch of 2 steps: {reads}"


@pytest.mark.parametrize("opset", [17, 18, 20, 21])
def test_group_norm_exports_in_the_opsets_own_form(opset, device, tmp_path):
    """Below opset 21, GroupNorm is written as PyTorch writes it there (Reshape, InstanceNormalization, Reshape, Mul,
    Add); from 21 as GroupNormalization. Either runs in onnxruntime and reads back as one GroupNorm layer."""
    model = m.Sequential([L.Input((6, 4, 5)), L.GroupNorm(3, eps=1e-3, name="norm"), L.Flatten()], device=device)
    rng = np.random.default_rng(8)
    norm = model.get_layer("norm")
    model._assign({f"layers.1.{key}": rng.uniform(0.5, 1.5, 6) if key == "gamma" else rng.standard_normal(6)
                   for key in norm.params}, "test")
    x = rng.standard_normal((3, 6, 4, 5)).astype(np.float32)
    path = model.export(tmp_path / "g.onnx", opset=opset)
    ops = [node.op_type for node in onnx.load(path).graph.node]
    assert ("GroupNormalization" in ops) == (opset >= 21) and ("InstanceNormalization" in ops) == (opset < 21)
    np.testing.assert_allclose(run_ort(path, {onnx.load(path).graph.input[0].name: x}),
                               model.predict(x), rtol=RTOL, atol=1e-5)
    back = monnx.load(path, device=device)
    assert [type(layer).__name__ for layer in back.layers] == ["Input", "GroupNorm", "Flatten"]
    np.testing.assert_allclose(back.predict(x), model.predict(x), rtol=RTOL, atol=1e-5)
