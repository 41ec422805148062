"""ONNX files magmadnn cannot take: each is one clear error (the node, its op type and what is supported; or what is
wrong with the file), never a crash, and no half-built model."""

from __future__ import annotations

import numpy as np
import pytest

from tests.magmadnn._onnx_helpers import TensorProto, graph, helper, monnx, onnx, save

Unsupported = monnx.UnsupportedOnnxError


def _conv_graph(**attrs):
    w = np.ones((2, 2, 3, 3), np.float32)
    return graph([helper.make_node("Conv", ["x", "W"], ["y"], name="conv_1", **attrs)], {"x": (4, 6, 6)},
                 {"W": w})


@pytest.mark.parametrize("proto, message", [
    (lambda: graph([helper.make_node("Cos", ["x"], ["y"], name="cosine")], {"x": (3,)}),
     r"ONNX node 'cosine' \(Cos\): this operator is not supported; supported: .*Conv.*Gemm"),
    (lambda: graph([helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="up", group=2)], {"x": (4, 3, 3)},
                   {"W": np.ones((4, 1, 2, 2))}), r"'up' \(ConvTranspose\): group != 1 .* supported: group=1"),
    (lambda: graph([helper.make_node("Gemm", ["x", "W"], ["y"], name="fc", transA=1)], {"x": (3,)},
                   {"W": np.ones((3, 2))}), r"'fc' \(Gemm\): transA=1 .* supported: transA=0"),
    (lambda: graph([helper.make_node("Gelu", ["x"], ["y"], name="act", approximate="erf")], {"x": (3,)}, opset=20),
     r"'act' \(Gelu\): approximate='erf' is not a GELU form.* supported: 'none' or 'tanh'"),
    (lambda: graph([helper.make_node("AveragePool", ["x"], ["y"], name="avg", kernel_shape=[2, 2],
                                     pads=[1, 1, 1, 1], count_include_pad=1)], {"x": (1, 4, 4)}),
     r"'avg' \(AveragePool\): count_include_pad=1 with padding is not supported"),
    (lambda: graph([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2], storage_order=1)],
                   {"x": (1, 4, 4)}), r"'mp' \(MaxPool\): storage_order=1 is not supported"),
    (lambda: graph([helper.make_node("Flatten", ["x"], ["y"], name="f", axis=2)], {"x": (2, 3)}),
     r"'f' \(Flatten\): axis=2 .* supported: axis=1"),
    (lambda: graph([helper.make_node("Softmax", ["x"], ["y"], name="s", axis=0)], {"x": (3,)}),
     r"'s' \(Softmax\): axis=0 \(the batch axis\)"),
    (lambda: graph([helper.make_node("Add", ["x", "c"], ["y"], name="plus")], {"x": (3,)}, {"c": np.ones(3)}),
     r"'plus' \(Add\): adding a constant is not supported"),
    (lambda: graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], {"x": (6,)},
                   {"s": np.array([4, 6], np.int64)}),
     r"'rs' \(Reshape\): shape \[4, 6\] is not supported; supported: a shape that keeps the dynamic batch"),
    (lambda: graph([helper.make_node("MatMul", ["x", "x"], ["y"], name="mm")], {"x": (3, 3)}),
     r"'mm' \(MatMul\): input 1 \(the weights, 'x'\) must be a constant"),
    (lambda: graph([helper.make_node("Erf", ["x"], ["e"], name="erf"), helper.make_node("Relu", ["e"], ["y"])],
                   {"x": (3,)}), r"'erf' \(Erf\): this operator is not supported \(Erf is read only inside an "
                                 r"exact GELU chain"),
    # operators supported only inside an attention pattern
    (lambda: graph([helper.make_node("Mul", ["x", "c"], ["y"], name="times")], {"x": (3,)}, {"c": np.ones(3)}),
     r"'times' \(Mul\): this operator is supported only as the scaling inside an attention pattern"),
    (lambda: graph([helper.make_node("Mul", ["x", "c"], ["m"], name="scale"), helper.make_node("Relu", ["m"], ["y"],
                                                                                              name="act")],
                   {"x": (3,)}, {"c": np.float32(2.0)}),
     r"'act' \(Relu\): .*intermediate of an attention pattern \(made by ONNX node 'scale' \(Mul\)\)"),
    (lambda: graph([helper.make_node("Split", ["x"], ["a", "b"], name="halves", axis=1, num_outputs=2),
                    helper.make_node("Add", ["a", "b"], ["y"])], {"x": (4, 6)}, opset=18),
     r"'halves' \(Split\): axis=1 is not supported; supported: axis=-1"),
    (lambda: graph([helper.make_node("Where", ["c", "x", "x"], ["y"], name="pick")], {"x": (3,)},
                   {"c": np.ones(3, bool)}), r"'pick' \(Where\): .*only as the mask of attention scores"),
    (lambda: graph([helper.make_node("Transpose", ["x"], ["k"], perm=[0, 1, 3, 2]),
                    helper.make_node("MatMul", ["x", "k"], ["s"], name="scores"),
                    helper.make_node("Softmax", ["s"], ["p"]), helper.make_node("MatMul", ["p", "x"], ["o"]),
                    helper.make_node("Reshape", ["o", "shape"], ["r"], name="merge"),
                    helper.make_node("MatMul", ["r", "W"], ["y"], name="proj")], {"x": (2, 3, 4)},
                   {"shape": np.array([0, 3, 8], np.int64), "W": np.ones((8, 8))}),
     r"'merge' \(Reshape\): attention pattern: the merged heads should come from Transpose, it comes from "
     r"ONNX node '[^']*' \(MatMul\)"),
], ids=["operator", "deconv-group", "gemm-transA", "exact-gelu", "count-include-pad", "attribute", "flatten-axis",
        "softmax-batch-axis", "add-constant", "reshape-batch", "matmul-activations", "erf-gelu", "mul-tensor",
        "attention-intermediate", "split-axis", "where", "attention-chain"])
def test_unsupported_nodes_are_named(proto, message, tmp_path):
    path = save(proto(), tmp_path)
    with pytest.raises(Unsupported, match=message):
        monnx.load(path, layers=True)  # the layer pass's words (op nodes load several of these graphs)


def test_a_dynamic_dimension_other_than_the_batch_is_refused(tmp_path):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", "width"])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", "width"])
    proto = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(Unsupported, match=r"graph input 'x': dimension 1 \('width'\) is dynamic; only the batch"):
        monnx.load(save(proto, tmp_path), layers=True)
    model = monnx.load(save(proto, tmp_path))  # as op nodes: any width
    data = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(model.predict(data), np.maximum(data, 0))


def test_files_that_are_not_onnx_are_clear_errors(tmp_path):
    good = save(graph([helper.make_node("Relu", ["x"], ["y"])], {"x": (3,)},
                      {"unused": np.ones((64, 64))}), tmp_path, "good.onnx")
    data = open(good, "rb").read()
    truncated, garbage, empty = tmp_path / "cut.onnx", tmp_path / "junk.onnx", tmp_path / "empty.onnx"
    truncated.write_bytes(data[: len(data) // 2])
    garbage.write_bytes(b"\x00\xff not an onnx file" * 10)
    empty.write_bytes(b"")
    for path in (truncated, garbage, empty):
        with pytest.raises(monnx.OnnxImportError, match=str(path.name)):
            monnx.load(path)
    with pytest.raises(monnx.OnnxImportError, match="does not exist"):
        monnx.load(tmp_path / "missing.onnx")


def test_a_file_failing_the_checker_is_refused(tmp_path):
    proto = graph([helper.make_node("Relu", ["x"], ["y"])], {"x": (3,)})
    proto.graph.node[0].input[0] = "nowhere"  # reads a tensor nobody makes
    path = str(tmp_path / "bad.onnx")
    onnx.save(proto, path)
    with pytest.raises(monnx.OnnxImportError, match="fails onnx.checker"):
        monnx.load(path)


def test_loading_is_all_or_nothing(tmp_path):
    """A weight holding NaN is found before any model is handed out."""
    w = np.ones((3, 2), np.float32)
    w[1, 1] = np.nan
    proto = graph([helper.make_node("Gemm", ["x", "W"], ["y"])], {"x": (3,)}, {"W": w})
    with pytest.raises(monnx.OnnxImportError, match="non-finite"):
        monnx.load(save(proto, tmp_path))


def test_info_describes_a_file_and_what_it_lacks(tmp_path):
    proto = graph([helper.make_node("Gemm", ["x", "W"], ["h"]), helper.make_node("RandomNormalLike", ["h"], ["y"])],
                  {"x": (3,)}, {"W": np.ones((3, 2))})
    text = monnx.info(save(proto, tmp_path))
    assert "inputs: x (N, 3)" in text and "Gemm x1" in text and "weights: 1 tensors, 6 values" in text
    assert "no importer for: RandomNormalLike" in text
    with pytest.raises(monnx.UnsupportedOnnxError) as caught:
        monnx.load(save(proto, tmp_path))
    assert text.splitlines()[-1] == f"importable: no: {caught.value}"


def _known_operators_load_refuses():
    """Graphs of operators magmadnn imports, in forms load refuses after the operator-type check."""
    gemm = helper.make_node("Gemm", ["x", "W"], ["h"])
    bad_attr = graph([gemm, helper.make_node("Softmax", ["h"], ["y"], axis=0)], {"x": (3,)}, {"W": np.ones((3, 2))})
    nan = np.ones((3, 2), np.float32)
    nan[0, 0] = np.nan
    bad_weight = graph([helper.make_node("Gemm", ["x", "W"], ["y"])], {"x": (3,)}, {"W": nan})
    bad_reshape = graph([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": (6,)},
                        {"s": np.array([2, 3, 1], np.int64)})
    two_outputs = graph([gemm, helper.make_node("Relu", ["h"], ["y"])], {"x": (3,)}, {"W": np.ones((3, 2))})
    two_outputs.graph.output.append(helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 2]))
    return {"attribute": bad_attr, "weight": bad_weight, "reshape": bad_reshape, "outputs": two_outputs}


@pytest.mark.parametrize("case", ["weight"])
def test_info_says_no_with_loads_error_where_load_refuses(tmp_path, case):
    """info runs load's checks: a file of known operators that load refuses is "importable: no" with load's words."""
    path = save(_known_operators_load_refuses()[case], tmp_path)
    with pytest.raises(monnx.OnnxImportError) as caught:
        monnx.load(path)
    verdict = monnx.info(path).splitlines()[-1]
    assert verdict == f"importable: no: {caught.value}"
    assert "no importer for" not in monnx.info(path)


def test_forms_the_layer_pass_refuses_load_as_op_nodes(tmp_path):
    """Softmax over the batch axis and a graph of two outputs: refused as layers, loaded as op nodes."""
    cases = _known_operators_load_refuses()
    data = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    hidden = data @ np.ones((3, 2), np.float32)
    for case in ("attribute", "outputs"):
        path = save(cases[case], tmp_path, f"{case}.onnx")
        with pytest.raises(Unsupported):
            monnx.load(path, layers=True)
        assert monnx.info(path).splitlines()[-1] == "importable: yes"
        got = monnx.load(path).predict(data)
        if case == "attribute":
            e = np.exp(hidden - hidden.max(0))
            np.testing.assert_allclose(got, e / e.sum(0), rtol=1e-5)
        else:
            np.testing.assert_allclose(got["y"], np.maximum(hidden, 0), rtol=1e-5)
            np.testing.assert_allclose(got["h"], hidden, rtol=1e-5)


def test_info_says_yes_where_load_succeeds(tmp_path):
    proto = graph([helper.make_node("Gemm", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                  {"x": (3,)}, {"W": np.ones((3, 2))})
    path = save(proto, tmp_path)
    assert monnx.info(path).splitlines()[-1] == "importable: yes"
    assert monnx.load(path).predict(np.ones((2, 3), np.float32)).shape == (2, 2)


def test_cut_or_flipped_bytes_never_crash(tmp_path):
    """Any prefix of a file, or the file with one byte flipped, is a model or an OnnxImportError."""
    w = np.arange(24, dtype=np.float32).reshape(4, 6) / 10
    proto = graph([helper.make_node("Gemm", ["x", "W"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["y"])],
                  {"x": (6,)}, {"W": w})
    data = open(save(proto, tmp_path, "good.onnx"), "rb").read()
    rng = np.random.default_rng(0)
    damaged = [data[:cut] for cut in rng.integers(1, len(data), 30)]
    for where in rng.integers(0, len(data), 30):
        flipped = bytearray(data)
        flipped[where] ^= 0xFF
        damaged.append(bytes(flipped))
    path = tmp_path / "damaged.onnx"
    for blob in damaged:
        path.write_bytes(blob)
        try:
            model = monnx.load(path)
        except monnx.OnnxImportError:
            continue
        assert model.predict(np.ones((1, 6), np.float32)).shape[0] == 1
