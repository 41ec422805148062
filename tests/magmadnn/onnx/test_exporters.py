"""ONNX forms of the modern-networks layers: grouped and transposed convolutions, global max pooling, joins and
shape layers, nearest upsampling, layer/group/RMS normalisation, embeddings, attention, LSTM and GRU. Imported
graphs (host and simulated device) predict what onnxruntime computes; exported models run in onnxruntime and read
back; PyTorch's LSTM and GRU import, predict and fine-tune."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import magmadnn as m
from magmadnn import layers as L
from tests.conftest import examples
from tests.magmadnn._onnx_helpers import (
    RTOL,
    TensorProto,
    assert_matches_ort,
    graph,
    helper,
    imported,
    loads_like_ort,
    monnx,
    onnx,
    run_ort,
)
from tests.magmadnn.backends import open_backend

REUSE = [HealthCheck.function_scoped_fixture]
ATOL = 5e-5


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def _x(rng, shape, n=3):
    return rng.standard_normal((n, *shape)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------- import


@st.composite
def image_cases(draw):
    """One operator on (N, C, H, W) with drawn attributes: (nodes, per-sample shape, initializers, opset)."""
    op = draw(st.sampled_from(["GroupConv", "Depthwise", "ConvTranspose", "GlobalMaxPool", "Concat", "Transpose",
                               "Reshape", "Resize", "GroupNormalization"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    g = draw(st.integers(1, 3))
    c, h, w = g * draw(st.integers(1, 2)), draw(st.integers(2, 5)), draw(st.integers(2, 5))
    inits, opset, tail = {}, 17, []
    if op in ("GroupConv", "Depthwise"):
        k = c * draw(st.integers(1, 2)) if op == "Depthwise" else g * draw(st.integers(1, 2))
        groups = c if op == "Depthwise" else g
        inits = {"W": rng.standard_normal((k, c // groups, 2, 2)), "B": rng.standard_normal(k)}
        nodes = [helper.make_node("Conv", ["x", "W", "B"], ["y"], group=groups, pads=[1, 0, 1, 0],
                                  strides=[draw(st.integers(1, 2)), 1])]
    elif op == "ConvTranspose":
        s, d = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        p = draw(st.integers(0, 1))
        inits = {"W": rng.standard_normal((c, draw(st.integers(1, 3)), 2, 3))}
        nodes = [helper.make_node("ConvTranspose", ["x", "W"], ["y"], strides=[s, s], dilations=[d, 1],
                                  pads=[p, 0, p, 0], output_padding=[draw(st.integers(0, s - 1)), 0])]
    elif op == "GlobalMaxPool":
        nodes = [helper.make_node("GlobalMaxPool", ["x"], ["p"]), helper.make_node("Flatten", ["p"], ["y"])]
    elif op == "Concat":
        axis = draw(st.integers(1, 3))
        inits = {"W": rng.standard_normal((c, c, 1, 1))}
        nodes = [helper.make_node("Conv", ["x", "W"], ["c"]), helper.make_node("Concat", ["x", "c"], ["y"],
                                                                               axis=axis - 4 * draw(st.integers(0, 1)))]
    elif op == "Transpose":
        perm = [0, *draw(st.permutations([1, 2, 3]))]
        nodes = [helper.make_node("Transpose", ["x"], ["y"], perm=perm)]
    elif op == "Reshape":
        target = draw(st.sampled_from([[0, -1, w], [-1, h, c * w], [0, c * h, w, 1], [0, 0, -1]]))
        inits = {"s": np.array(target, np.int64)}
        nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    elif op == "Resize":
        sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        where, rounding = draw(st.sampled_from([("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
                                                ("pytorch_half_pixel", "round_prefer_ceil")]))
        inits = {"scales": np.array([1, 1, sh, sw], np.float32)}
        nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                                  coordinate_transformation_mode=where, nearest_mode=rounding)]
    else:
        opset, inits = 21, {"s": rng.standard_normal(c), "b": rng.standard_normal(c)}
        nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=g, epsilon=1e-3)]
    out = (c, h, w) if op == "GroupNormalization" else None  # shape inference leaves it out
    return op, nodes + tail, (c, h, w), inits, opset, out, rng


@settings(max_examples=examples(30), deadline=None, suppress_health_check=REUSE)
@given(case=image_cases())
def test_image_operators(case, device):
    op, nodes, shape, inits, opset, out, rng = case
    proto = graph(nodes, {"x": shape}, inits, opset=opset, output_shape=out)
    assert_matches_ort(proto, _x(rng, shape), device)


@st.composite
def sequence_cases(draw):
    op = draw(st.sampled_from(["LayerNormalization", "RMSNormalization", "MatMul+Add", "PositionAdd", "LSTM",
                               "GRU"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    t, f, u = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    inits, opset = {}, 17
    if op == "LayerNormalization":
        inits = {"s": rng.standard_normal(f), "b": rng.standard_normal(f)}
        nodes = [helper.make_node(op, ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-3)]
    elif op == "RMSNormalization":
        opset, inits = 23, {"s": rng.standard_normal(f)}
        nodes = [helper.make_node(op, ["x", "s"], ["y"], axis=-1, epsilon=1e-3)]
    elif op == "MatMul+Add":
        inits = {"W": rng.standard_normal((f, u)), "B": rng.standard_normal(u)}
        nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["y"])]
    elif op == "PositionAdd":
        inits = {"P": rng.standard_normal((1, t, f) if draw(st.booleans()) else (t, f))}
        nodes = [helper.make_node("Add", ["x", "P"], ["y"])]
    else:
        gates = 4 if op == "LSTM" else 3
        inits = {"W": rng.standard_normal((1, gates * u, f)) * 0.5, "R": rng.standard_normal((1, gates * u, u)) * 0.5,
                 "B": rng.standard_normal((1, 2 * gates * u)) * 0.5}
        extra = {"linear_before_reset": 1} if op == "GRU" else {}
        nodes = [helper.make_node("Transpose", ["x"], ["tm"], perm=[1, 0, 2]),
                 helper.make_node(op, ["tm", "W", "R", "B"], ["Y", "Y_h"], hidden_size=u, **extra)]
        if draw(st.booleans()):  # every step, batch first again
            inits["axes"] = np.array([1], np.int64)
            nodes += [helper.make_node("Squeeze", ["Y", "axes"], ["s"]),
                      helper.make_node("Transpose", ["s"], ["y"], perm=[1, 0, 2])]
        else:  # the last state
            inits["axes"] = np.array([0], np.int64)
            nodes[-1].output[0] = ""
            nodes += [helper.make_node("Squeeze", ["Y_h", "axes"], ["y"])]
    return nodes, (t, f), inits, opset, rng


@settings(max_examples=examples(30), deadline=None, suppress_health_check=REUSE)
@given(case=sequence_cases())
def test_sequence_operators(case, device):
    nodes, shape, inits, opset, rng = case
    assert_matches_ort(graph(nodes, {"x": shape}, inits, opset=opset), _x(rng, shape), device, atol=1e-4)


def test_gather_of_integer_ids_is_an_embedding(device):
    rng = np.random.default_rng(0)
    ids = helper.make_tensor_value_info("x", TensorProto.INT64, ["N", 5])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5, 3])
    table = onnx.numpy_helper.from_array(rng.standard_normal((7, 3)).astype(np.float32), "table")
    proto = helper.make_model(helper.make_graph([helper.make_node("Gather", ["table", "x"], ["y"])], "g", [ids],
                                                [out], [table]), opset_imports=[helper.make_opsetid("", 17)])
    x = rng.integers(0, 7, (4, 5))
    model = imported(proto, device)
    np.testing.assert_allclose(model.predict(x), run_ort(proto, {"x": x}), rtol=RTOL, atol=1e-6)
    assert [type(layer).__name__ for layer in model.layers] == ["Input", "Embedding"]


# ---------------------------------------------------------------------------------------------------- export


def image_model(device=None):
    x = L.Input((4, 6, 6), name="image")
    h = L.Conv2D(6, 3, padding="same", groups=2, activation="relu", name="grouped")(x)
    d = L.DepthwiseConv2D(3, depth_multiplier=2, padding=1, name="depthwise")(x)
    h = L.Concatenate(axis=1, name="join")([h, L.Conv2D(6, 1, name="mix")(d)])
    h = L.GroupNorm(3, name="gn")(h)
    up = L.UpSampling2D(2, name="up")(h)
    h = L.Conv2DTranspose(3, 3, strides=2, padding=1, output_padding=1, name="deconv")(h)
    h = L.Add(name="skip")([h, L.Conv2D(3, 1, name="proj")(up)])
    g = L.GlobalMaxPool2D(name="gmp")(h)
    h = L.Permute((2, 3, 1), name="nhwc")(h)
    h = L.Reshape((144, 3), name="tokens")(h)
    h = L.LayerNorm(name="ln")(h)
    h = L.Flatten(name="flat")(h)
    h = L.Concatenate(name="features")([h, g])
    return m.Model(x, L.Dense(5, name="logits")(h), seed=4, device=device)


def sequence_model(device=None):
    ids = L.Input((6,), dtype="int64", name="tokens")
    h = L.Embedding(11, 8, name="embed")(ids)
    h = L.PositionEmbedding(name="pos")(h)
    a = L.MultiHeadAttention(2, 4, causal=True, name="attn")(h)
    h = L.Add(name="res")([h, a])
    h = L.RMSNorm(name="rms")(h)
    h = L.Dense(8, activation="gelu", name="ffn")(h)
    h = L.LSTM(5, return_sequences=True, name="lstm")(h)
    h = L.GRU(4, name="gru")(h)
    return m.Model(ids, L.Dense(3, name="logits")(h), seed=5, device=device)


def cross_model(device=None):
    """Cross-attention (queries from one projection of the input, keys and values from another), no mask."""
    x = L.Input((5, 6), name="seq")
    memory = L.Dense(7, name="memory")(x)
    h = L.MultiHeadAttention(3, 2, value_dim=4, name="cross")([x, memory])
    return m.Model(x, L.Flatten(name="flat")(h), seed=9, device=device)


@pytest.mark.parametrize("build, shape", [(image_model, (4, 6, 6)), (sequence_model, (6,)), (cross_model, (5, 6))],
                         ids=["image", "seq", "cross"])
def test_modern_layers_round_trip_through_onnxruntime(build, shape, device, tmp_path):
    model = build(device)
    rng = np.random.default_rng(6)
    x = rng.integers(0, 11, (4, *shape)) if build is sequence_model else _x(rng, shape, 4)
    path = model.export(tmp_path / "m.onnx")
    onnx.checker.check_model(onnx.load(path), full_check=True)
    expected = model.predict(x)
    got = run_ort(path, {model.inputs[0].layer.name: x})
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    back = monnx.load(path, device=device)  # every layer, attention included, reads back as itself
    np.testing.assert_allclose(back.predict(x), expected, rtol=RTOL, atol=ATOL)
    assert sorted(type(layer).__name__ for layer in back.layers) == sorted(
        type(layer).__name__ for layer in model.layers)


# ---------------------------------------------------------------------------------------------------- PyTorch


def test_pytorch_lstm_and_gru_import_predict_and_fine_tune(device, tmp_path):
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.gru = nn.LSTM(4, 6, batch_first=True), nn.GRU(6, 5, batch_first=True)
            self.head = nn.Linear(5, 3)

        def forward(self, x):
            y, _ = self.lstm(x)
            _, h = self.gru(y)
            return self.head(h[-1])

    torch.manual_seed(0)
    module = Net().eval()
    path = str(tmp_path / "rnn.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(2, 7, 4),), path, input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 7, 4)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    model = monnx.load(path, device=device, seed=0)
    assert [type(layer).__name__ for layer in model.layers] == ["Input", "LSTM", "GRU", "Dense"]
    np.testing.assert_allclose(model.predict(x), expected, rtol=1e-4, atol=1e-5)
    labels = rng.integers(0, 3, 8)
    model.compile(m.optimizers.Adam(1e-2), "cross_entropy", device=device)
    before = model.evaluate(x, labels, return_dict=True)["loss"]
    model.fit(x, labels, batch_size=8, epochs=3, verbose=0)
    assert model.evaluate(x, labels, return_dict=True)["loss"] < before


def test_recurrent_layers_read_back_as_themselves(device, tmp_path):
    x_in = L.Input((5, 3), name="seq")
    h = L.LSTM(4, return_sequences=True, name="lstm")(x_in)
    h = L.GRU(3, name="gru")(h)
    model = m.Model(x_in, L.Dense(2, name="out")(h), seed=8, device=device)
    x = np.random.default_rng(8).standard_normal((4, 5, 3)).astype(np.float32)
    back = monnx.load(model.export(tmp_path / "rnn.onnx"), device=device)
    assert [type(layer).__name__ for layer in back.layers] == ["Input", "LSTM", "GRU", "Dense"]
    np.testing.assert_allclose(back.predict(x), model.predict(x), rtol=RTOL, atol=ATOL)


def _torch_export(module, x, path):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (x,), str(path), input_names=["x"], output_names=["y"], opset_version=17,
                          dynamo=False, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        with torch.no_grad():
            return str(path), module(x).numpy()


def test_pytorch_decoder_and_token_models_import(device, tmp_path):
    """Depthwise and transposed convolutions, nearest upsampling and a join; Embedding, LayerNorm and a GRU's last
    step (y[:, -1]) as PyTorch writes them."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.depthwise = nn.Conv2d(4, 8, 3, padding=1, groups=4)
            self.deconv = nn.ConvTranspose2d(8, 3, 3, stride=2, padding=1, output_padding=1)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")

        def forward(self, x):
            return torch.cat([self.deconv(torch.relu(self.depthwise(x))), self.up(x)], 1).flatten(1)

    class Tokens(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.norm = nn.Embedding(11, 8), nn.LayerNorm(8)
            self.gru, self.head = nn.GRU(8, 6, batch_first=True), nn.Linear(6, 3)

        def forward(self, x):
            y, _ = self.gru(self.norm(self.embed(x)))
            return self.head(y[:, -1])

    torch.manual_seed(2)
    cases = [(Decoder(), torch.randn(3, 4, 5, 5), ["Input", "DepthwiseConv2D", "Conv2DTranspose", "UpSampling2D",
                                                    "Concatenate", "Flatten"]),
             (Tokens(), torch.randint(0, 11, (3, 7)), ["Input", "Embedding", "LayerNorm", "GRU", "Dense"])]
    for i, (module, x, kinds) in enumerate(cases):
        path, expected = _torch_export(module, x, tmp_path / f"m{i}.onnx")
        model = monnx.load(path, device=device)
        assert [type(layer).__name__ for layer in model.layers] == kinds
        np.testing.assert_allclose(model.predict(x.numpy()), expected, rtol=1e-4, atol=1e-5)


def test_group_normalization_opset_18_scales_per_group(device):
    """Opset 18 gives GroupNormalization one scale and bias a group (21: a channel). onnx.checker calls that
    version deprecated, so the graph is built unchecked and converted in memory."""
    rng = np.random.default_rng(3)
    inits = [onnx.numpy_helper.from_array(rng.uniform(0.5, 1.5, 3).astype(np.float32), "s"),
             onnx.numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")]
    spec = helper.make_graph(
        [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-3)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6, 4, 5])], inits)
    proto = helper.make_model(spec, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    x = rng.standard_normal((4, 6, 4, 5)).astype(np.float32)
    assert_matches_ort(proto, x, device)


def test_instance_normalization_is_group_norm_with_a_group_a_channel(device):
    rng = np.random.default_rng(4)
    proto = graph([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)],
                  {"x": (5, 3, 4)}, {"s": rng.uniform(0.5, 1.5, 5), "b": rng.standard_normal(5)},
                  output_shape=(5, 3, 4))
    x = rng.standard_normal((3, 5, 3, 4)).astype(np.float32)
    assert_matches_ort(proto, x, device)


def _tanh_gelu_nodes(x="x", out="y"):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with the 0.5 x first (an order PyTorch does not write)."""
    mk = helper.make_node
    return [mk("Mul", [x, "half"], ["hx"]), mk("Pow", [x, "three"], ["x3"]), mk("Mul", ["x3", "k"], ["kx3"]),
            mk("Add", ["kx3", x], ["inner"]), mk("Mul", ["c", "inner"], ["arg"]), mk("Tanh", ["arg"], ["t"]),
            mk("Add", ["one", "t"], ["t1"]), mk("Mul", ["hx", "t1"], [out])]


_GELU_CONSTANTS = {"half": np.float32(0.5), "three": np.float32(3.0), "k": np.float32(0.044715),
                   "c": np.float32(np.sqrt(2 / np.pi)), "one": np.float32(1.0)}


def test_a_tanh_gelu_chain_in_any_order_is_one_activation(device):
    rng = np.random.default_rng(5)
    proto = graph(_tanh_gelu_nodes(), {"x": (4, 6)}, _GELU_CONSTANTS)
    model = assert_matches_ort(proto, rng.standard_normal((3, 4, 6)).astype(np.float32) * 3, device)
    assert [type(layer).__name__ for layer in model.layers] == ["Input", "Activation"]


def test_a_chain_whose_inside_is_read_elsewhere_is_not_taken_for_gelu():
    """x^3 also feeds the output: the chain cannot become one layer, and its nodes report their own errors."""
    nodes = _tanh_gelu_nodes(out="g") + [helper.make_node("Add", ["g", "x3"], ["y"])]
    proto = graph(nodes, {"x": (6,)}, _GELU_CONSTANTS)
    with pytest.raises(monnx.UnsupportedOnnxError, match=r"ONNX node .* \((Mul|Pow)\)") as caught:
        imported(proto, layers=True)
    assert "GELU" not in str(caught.value)
    loads_like_ort(proto)  # as op nodes


_UNIT_AXES = {  # name -> (nodes, per-sample input shape, constants, per-sample output shape or None: inferred)
    "GlobalAveragePool": ([helper.make_node("GlobalAveragePool", ["x"], ["y"])], (3, 4, 5), {}, (3, 1, 1)),
    "GlobalMaxPool": ([helper.make_node("GlobalMaxPool", ["x"], ["y"])], (3, 4, 5), {}, (3, 1, 1)),
    "Unsqueeze": ([helper.make_node("Unsqueeze", ["x", "a"], ["y"])], (3, 4), {"a": np.array([1, -1])}, None),
    "Squeeze": ([helper.make_node("Squeeze", ["x", "a"], ["y"])], (3, 1, 4, 1), {"a": np.array([2, -1])}, None),
    "Unsqueeze+Relu": ([helper.make_node("Unsqueeze", ["x", "a"], ["u"]), helper.make_node("Relu", ["u"], ["y"])],
                       (3, 4), {"a": np.array([2])}, None),
}


@pytest.mark.parametrize("case", list(_UNIT_AXES))
def test_unit_axes_kept_to_the_graph_output(case, device):
    """A (N, C, 1, 1) pooling or a Squeeze/Unsqueeze result as the graph's output has the ONNX shape."""
    nodes, shape, constants, out = _UNIT_AXES[case]
    proto = graph(nodes, {"x": shape}, constants, output_shape=out)
    x = np.random.default_rng(6).standard_normal((3, *shape)).astype(np.float32)
    expected = run_ort(proto, {"x": x})
    got = imported(proto, device).predict(x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=1e-5)


@pytest.mark.parametrize(("nodes", "shape", "constants", "out", "message"), [
    ([helper.make_node("Squeeze", ["x"], ["y"])], (3, 1), {}, (3,), "no axes"),
    ([helper.make_node("Squeeze", ["x", "a"], ["y"])], (1,), {"a": np.array([1])}, None, r"shape \(N,\)"),
    ([helper.make_node("Squeeze", ["x", "a"], ["y"])], (1, 3), {"a": np.array([0])}, None, r"axes \[0\]"),
    ([helper.make_node("Unsqueeze", ["x", "a"], ["y"])], (3,), {"a": np.array([0])}, None, "before the batch"),
])
def test_refused_unit_axes_say_what(nodes, shape, constants, out, message):
    proto = graph(nodes, {"x": shape}, constants, output_shape=out)
    with pytest.raises(monnx.UnsupportedOnnxError, match=message):
        imported(proto, layers=True)  # the layer pass's words (op nodes read some of these as ONNX does)


@pytest.mark.parametrize(("shape", "axes", "keepdims"), [
    ((3, 4, 5), [2, 3], 1), ((3, 4, 5), [-1, -2], 0), ((5, 6), [1], 0), ((5, 6), [1], 1), ((5, 6), [2], 0),
    ((3, 4, 5), [1, 3], 0), ((3, 4, 5), [2], 1)])
def test_reduce_mean_over_non_batch_axes(shape, axes, keepdims, device):
    """Any proper subset of the non-batch axes (the mean over the tokens of (N, T, F) included)."""
    proto = graph([helper.make_node("ReduceMean", ["x", "a"], ["y"], keepdims=keepdims)], {"x": shape},
                  {"a": np.array(axes, np.int64)}, opset=18)
    x = np.random.default_rng(7).standard_normal((3, *shape)).astype(np.float32)
    expected = run_ort(proto, {"x": x})
    got = imported(proto, device).predict(x)
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=RTOL, atol=1e-5)


def test_reduce_mean_over_the_batch_or_every_axis_is_refused():
    for axes in ([0, 1], [1, 2, 3]):
        proto = graph([helper.make_node("ReduceMean", ["x", "a"], ["y"], keepdims=0)], {"x": (3, 4, 5)},
                      {"a": np.array(axes, np.int64)}, opset=18)
        with pytest.raises(monnx.UnsupportedOnnxError, match="ReduceMean"):
            imported(proto, layers=True)
        loads_like_ort(proto, batch=3)  # as op nodes
