"""ONNX import, operator by operator: small graphs built with onnx.helper over hypothesis-drawn attributes, imported
on the host and on the simulated device, must predict what onnxruntime computes from the same graph."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tests.magmadnn._onnx_helpers import assert_matches_ort, graph, helper
from tests.magmadnn.backends import open_backend

REUSE = [HealthCheck.function_scoped_fixture]


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def _x(rng, shape, n=3):
    return rng.standard_normal((n, *shape)).astype(np.float32)


def _window_attrs(draw, in_hw, kernel, dilation=(1, 1), pool=False):
    auto = draw(st.sampled_from(["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]))
    strides = [draw(st.integers(1, 3 if pool else 2)) for _ in range(2)]
    attrs = {"kernel_shape": list(kernel), "strides": strides}
    if auto == "NOTSET":
        limit = [k - 1 if pool else 2 for k in kernel]
        attrs["pads"] = [draw(st.integers(0, limit[0])), draw(st.integers(0, limit[1])),
                         draw(st.integers(0, limit[0])), draw(st.integers(0, limit[1]))]
    else:
        attrs["auto_pad"] = auto
        if auto != "VALID":  # onnxruntime refuses the negative padding of SAME with strides past the window
            assume(all(s <= (k - 1) * d + 1 for s, k, d in zip(strides, kernel, dilation)))
    pads = attrs.get("pads", [0, 0, 0, 0])
    for axis in range(2):
        extent = (kernel[axis] - 1) * dilation[axis] + 1
        assume(in_hw[axis] + pads[axis] + pads[axis + 2] >= extent)
    return attrs


@st.composite
def conv_cases(draw):
    c, k = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    in_hw = (draw(st.integers(4, 8)), draw(st.integers(4, 8)))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    attrs = _window_attrs(draw, in_hw, kernel, dilation)
    attrs["dilations"] = list(dilation)
    if attrs.get("auto_pad", "NOTSET").startswith("SAME"):
        attrs["dilations"] = [1, 1]  # onnxruntime's SAME padding ignores dilation
    bias = draw(st.booleans())
    then = draw(st.sampled_from([None, "Relu", "Sigmoid", "Tanh", "Elu"]))
    return c, k, in_hw, kernel, attrs, bias, then, draw(st.integers(0, 2**31))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=REUSE)
@given(case=conv_cases())
def test_conv(case, device):
    c, k, in_hw, kernel, attrs, bias, then, seed = case
    rng = np.random.default_rng(seed)
    inits = {"W": rng.standard_normal((k, c, *kernel))}
    if bias:
        inits["B"] = rng.standard_normal(k)
    nodes = [helper.make_node("Conv", ["x", "W"] + (["B"] if bias else []), ["c" if then else "y"], **attrs)]
    if then:
        nodes.append(helper.make_node(then, ["c"], ["y"]))
    assert_matches_ort(graph(nodes, {"x": (c, *in_hw)}, inits), _x(rng, (c, *in_hw)), device)


@st.composite
def pool_cases(draw):
    op = draw(st.sampled_from(["MaxPool", "AveragePool"]))
    c, in_hw = draw(st.integers(1, 3)), (draw(st.integers(3, 9)), draw(st.integers(3, 9)))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    attrs = _window_attrs(draw, in_hw, kernel, pool=True)
    if attrs.get("auto_pad", "NOTSET") == "NOTSET":
        attrs["ceil_mode"] = draw(st.integers(0, 1))
    if op == "AveragePool":
        padded = any(attrs.get("pads", [])) or "auto_pad" in attrs or attrs.get("ceil_mode")  # ceil may pad
        attrs["count_include_pad"] = 0 if padded else draw(st.integers(0, 1))
    return op, c, in_hw, attrs, draw(st.integers(0, 2**31))


def _fits(in_hw, attrs) -> bool:
    """The padding (ceil_mode's extra included) is smaller than the window: what magmadnn's pooling takes."""
    from magmadnn.onnx.importers import pool_geometry

    pads = attrs.get("pads", [0, 0, 0, 0])
    for axis in range(2):
        k, s = attrs["kernel_shape"][axis], attrs["strides"][axis]
        lo, hi = pads[axis], pads[axis + 2]
        _, extra = pool_geometry(in_hw[axis], k, s, lo, hi, bool(attrs.get("ceil_mode", 0)))
        if hi + extra >= k or lo >= k:
            return False
    return True


@settings(max_examples=examples(30), deadline=None, suppress_health_check=REUSE)
@given(case=pool_cases())
def test_pooling(case, device):
    op, c, in_hw, attrs, seed = case
    auto = attrs.get("auto_pad", "NOTSET")
    if auto.startswith("SAME"):
        total = [max((math.ceil(n / s) - 1) * s + k - n, 0) for n, k, s in zip(in_hw, attrs["kernel_shape"],
                                                                             attrs["strides"])]
        assume(all(t - t // 2 < k for t, k in zip(total, attrs["kernel_shape"])))
    elif auto == "NOTSET":
        assume(_fits(in_hw, attrs))
    rng = np.random.default_rng(seed)
    proto = graph([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": (c, *in_hw)})
    assert_matches_ort(proto, _x(rng, (c, *in_hw)), device)


@st.composite
def dense_cases(draw):
    return (draw(st.sampled_from(["Gemm", "MatMul+Add", "MatMul"])), draw(st.integers(1, 6)),
            draw(st.integers(1, 5)), draw(st.integers(0, 1)), draw(st.sampled_from([1.0, 0.5])),
            draw(st.sampled_from([1.0, 2.0])), draw(st.sampled_from([None, "vector", "row", "scalar"])),
            draw(st.sampled_from([None, "Relu", "Softmax", "LeakyRelu"])), draw(st.integers(0, 2**31)))


@settings(max_examples=examples(20), deadline=None, suppress_health_check=REUSE)
@given(case=dense_cases())
def test_dense(case, device):
    form, n_in, units, trans_b, alpha, beta, bias, then, seed = case
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((units, n_in) if trans_b and form == "Gemm" else (n_in, units))
    inits, out = {"W": w}, "d" if then else "y"
    if form == "Gemm":
        bias_shape = {"vector": (units,), "row": (1, units), "scalar": (1,)}.get(bias)
        if bias_shape:
            inits["C"] = rng.standard_normal(bias_shape)
        nodes = [helper.make_node("Gemm", ["x", "W"] + (["C"] if bias_shape else []), [out], transB=trans_b,
                                  alpha=alpha, beta=beta)]
    elif form == "MatMul":
        nodes = [helper.make_node("MatMul", ["x", "W"], [out])]
    else:
        inits["C"] = rng.standard_normal((units,))
        nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "C"], [out])]
    if then:
        nodes.append(helper.make_node(then, [out], ["y"], **({"alpha": 0.2} if then == "LeakyRelu" else {})))
    assert_matches_ort(graph(nodes, {"x": (n_in,)}, inits), _x(rng, (n_in,)), device)


@st.composite
def elementwise_cases(draw):
    op = draw(st.sampled_from(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Softmax", "LogSoftmax", "Add",
                               "Flatten", "Dropout", "Identity", "Gelu"]))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    attrs = {}
    if op in ("LeakyRelu", "Elu"):
        attrs["alpha"] = draw(st.sampled_from([0.01, 0.3, 1.0, 1.7]))
    if op in ("Softmax", "LogSoftmax"):
        axis = draw(st.integers(1, len(shape)))  # any axis but the batch, positive or counted from the end
        attrs["axis"] = axis if draw(st.booleans()) else axis - (len(shape) + 1)
    if op == "Gelu":
        attrs["approximate"] = "tanh"
    return op, shape, attrs, draw(st.integers(0, 2**31))


@settings(max_examples=examples(30), deadline=None, suppress_health_check=REUSE)
@given(case=elementwise_cases())
def test_elementwise_and_shape_operators(case, device):
    op, shape, attrs, seed = case
    rng = np.random.default_rng(seed)
    inits, opset = {}, 20 if op == "Gelu" else 17
    if op == "Add":
        inputs = {"x": shape, "x2": shape}
        node = helper.make_node("Add", ["x", "x2"], ["y"])
    elif op == "Dropout":
        inputs, inits["r"] = {"x": shape}, np.array(0.25, np.float32)
        node = helper.make_node("Dropout", ["x", "r"], ["y"])
    else:
        inputs = {"x": shape}
        node = helper.make_node(op, ["x"], ["y"], **attrs)
    proto = graph([node], inputs, inits, opset=opset)
    x = _x(rng, shape)
    if op == "Add":  # the second input is fed too: run both engines on the same pair
        from tests.magmadnn._onnx_helpers import imported, run_ort

        x2 = _x(rng, shape)
        expected = run_ort(proto, {"x": x, "x2": x2})
        got = imported(proto, device).predict([x, x2])
        np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=2e-4, atol=2e-5)
        return
    assert_matches_ort(proto, x, device)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=REUSE)
@given(c=st.integers(1, 4), hw=st.integers(1, 4), eps=st.sampled_from([1e-5, 1e-3]), seed=st.integers(0, 2**31),
       spatial=st.booleans())
def test_batch_normalization(c, hw, eps, seed, spatial, device):
    rng = np.random.default_rng(seed)
    shape = (c, hw, hw) if spatial else (c,)
    inits = {"s": rng.standard_normal(c), "b": rng.standard_normal(c), "m": rng.standard_normal(c),
             "v": rng.uniform(0.5, 2.0, c)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=eps)
    assert_matches_ort(graph([node], {"x": shape}, inits), _x(rng, shape), device)


@settings(max_examples=examples(10), deadline=None, suppress_health_check=REUSE)
@given(c=st.integers(1, 4), h=st.integers(1, 5), w=st.integers(1, 5), seed=st.integers(0, 2**31),
       tail=st.sampled_from(["Flatten", "Reshape0", "Reshape-1"]))
def test_global_average_pool_then_flatten_or_reshape(c, h, w, seed, tail, device):
    rng = np.random.default_rng(seed)
    inits = {}
    if tail == "Flatten":
        last = helper.make_node("Flatten", ["p"], ["y"])
    else:
        inits["shape"] = np.array([0, -1] if tail == "Reshape0" else [-1, c], np.int64)
        last = helper.make_node("Reshape", ["p", "shape"], ["y"])
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]), helper.make_node("Relu", ["p"], ["r"]), last]
    nodes[-1].input[0] = "r"
    assert_matches_ort(graph(nodes, {"x": (c, h, w)}, inits), _x(rng, (c, h, w)), device)


@settings(max_examples=examples(8), deadline=None, suppress_health_check=REUSE)
@given(c=st.integers(1, 3), hw=st.integers(2, 4), seed=st.integers(0, 2**31), opset=st.sampled_from([13, 17]))
def test_flatten_by_the_input_shape_as_pytorch_writes_view(c, hw, seed, opset, device):
    """``x.view(x.size(0), -1)``: Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape, folded to a Flatten."""
    rng = np.random.default_rng(seed)
    inits = {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "rest": np.array([-1], np.int64)}
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    proto = graph(nodes, {"x": (c, hw, hw)}, inits, opset=opset, output_shape=(c * hw * hw,))
    model = assert_matches_ort(proto, _x(rng, (c, hw, hw)), device)
    assert [type(layer).__name__ for layer in model.layers] == ["Input", "Flatten"]


@settings(max_examples=examples(8), deadline=None, suppress_health_check=REUSE)
@given(c=st.integers(1, 3), h=st.integers(1, 4), w=st.integers(1, 4), keepdims=st.integers(0, 1),
       opset=st.sampled_from([17, 18]), seed=st.integers(0, 2**31))
def test_spatial_reduce_mean_is_global_average_pooling(c, h, w, keepdims, opset, seed, device):
    rng = np.random.default_rng(seed)
    axes = [2, 3] if rng.integers(2) else [-1, -2]
    if opset >= 18:
        node, inits = helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=keepdims), {
            "axes": np.array(axes, np.int64)}
    else:
        node, inits = helper.make_node("ReduceMean", ["x"], ["m"], axes=axes, keepdims=keepdims), {}
    nodes = [node, helper.make_node("Flatten", ["m"], ["y"])]
    assert_matches_ort(graph(nodes, {"x": (c, h, w)}, inits, opset=opset), _x(rng, (c, h, w)), device)


@settings(max_examples=examples(6), deadline=None, suppress_health_check=REUSE)
@given(t=st.integers(1, 4), f=st.integers(1, 4), seed=st.integers(0, 2**31), opset=st.sampled_from([11, 17]))
def test_unit_axes_and_time_major_round_trips(t, f, seed, opset, device):
    """Unsqueeze/Squeeze of unit axes and a time-major round trip (Transpose [1, 0, 2] twice) leave the data."""
    rng = np.random.default_rng(seed)
    if opset >= 13:
        inits = {"axes": np.array([2], np.int64)}
        unsq, sq = helper.make_node("Unsqueeze", ["r", "axes"], ["u"]), helper.make_node("Squeeze", ["e", "axes"],
                                                                                          ["s"])
    else:
        inits = {}
        unsq, sq = (helper.make_node("Unsqueeze", ["r"], ["u"], axes=[2]),
                    helper.make_node("Squeeze", ["e"], ["s"], axes=[2]))
    nodes = [helper.make_node("Transpose", ["x"], ["tm"], perm=[1, 0, 2]),
             helper.make_node("Transpose", ["tm"], ["bf"], perm=[1, 0, 2]), helper.make_node("Relu", ["bf"], ["r"]),
             unsq, helper.make_node("Elu", ["u"], ["e"]), sq, helper.make_node("Flatten", ["s"], ["y"])]
    model = assert_matches_ort(graph(nodes, {"x": (t, f)}, inits, opset=opset), _x(rng, (t, f)), device)
    assert [type(layer).__name__ for layer in model.layers] == ["Input", "Activation", "Activation", "Flatten"]
