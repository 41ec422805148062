"""The raw cuDNN 9 binding against the real library on the CPU: version, statuses, enum values, descriptors,
output-shape queries, error reporting and handle creation without a GPU."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymagma import _cudnn as cd
from pymagma import dnn
from pymagma.errors import CudnnError, NoDeviceError
from tests.reference import conv2d_ref, pool2d_ref
from tests.strategies import conv_geometries, pool_geometries

pytestmark = pytest.mark.native


@pytest.fixture(scope="module", autouse=True)
def cudnn_library():
    from pymagma.errors import LibraryNotFoundError

    try:
        assert cd.lib.cdll is not None
    except LibraryNotFoundError as exc:
        pytest.skip(f"cuDNN is not installed: {exc}")


def test_version_is_cudnn_9_or_newer():
    major, minor, patch = cd.version_tuple()
    assert major >= 9
    assert cd.version() == major * 10000 + minor * 100 + patch


def test_every_declared_function_is_exported():
    assert cd.lib.missing() == []


@pytest.mark.parametrize("status", list(cd.Status))
def test_status_values_match_the_library_names(status):
    # cudnnGetErrorString names each status; our enum value must map to the same name.
    assert cd.error_string(status) == cd.status_name(status)


@pytest.mark.parametrize("dtype, itemsize", [
    (cd.DataType.FLOAT, 4), (cd.DataType.DOUBLE, 8), (cd.DataType.HALF, 2), (cd.DataType.BFLOAT16, 2),
    (cd.DataType.INT8, 1), (cd.DataType.INT32, 4), (cd.DataType.UINT8, 1)])
def test_data_type_values_have_the_right_sizes(dtype, itemsize):
    desc = cd.TensorDescriptor((2, 3, 4, 5), dtype)
    assert desc.size_in_bytes() == 2 * 3 * 4 * 5 * itemsize


def test_tensor_descriptor_round_trips_shape_and_strides():
    desc = cd.TensorDescriptor((2, 3, 4, 5), cd.DataType.FLOAT, strides=(120, 1, 30, 6))
    dtype, nd = ctypes.c_int(), ctypes.c_int()
    dims, strides = (ctypes.c_int * 8)(), (ctypes.c_int * 8)()
    cd.call("cudnnGetTensorNdDescriptor", desc, 8, ctypes.byref(dtype), ctypes.byref(nd), dims, strides)
    assert (dtype.value, nd.value) == (int(cd.DataType.FLOAT), 4)
    assert tuple(dims[:4]) == (2, 3, 4, 5) and tuple(strides[:4]) == (120, 1, 30, 6)


def test_invalid_tensor_descriptor_raises_with_cudnn_last_error_text():
    with pytest.raises(CudnnError) as info:
        cd.TensorDescriptor((2, 0, 4, 4), cd.DataType.FLOAT)
    err = info.value
    assert err.status == cd.Status.BAD_PARAM and err.name == "CUDNN_STATUS_BAD_PARAM"
    assert err.call == "cudnnSetTensorNdDescriptor"
    assert err.message and err.message in str(err)  # cuDNN's own explanation, e.g. which dimension is invalid


def test_invalid_convolution_and_pooling_descriptors_raise():
    with pytest.raises(CudnnError, match="BAD_PARAM") as info:
        cd.ConvolutionDescriptor((-1, 0), (1, 1), (1, 1), cd.DataType.FLOAT)
    assert "pad" in info.value.message.lower()
    with pytest.raises(CudnnError, match="BAD_PARAM"):
        cd.PoolingDescriptor(cd.PoolingMode.MAX, (0, 2), (0, 0), (1, 1))
    with pytest.raises(CudnnError, match="BAD_PARAM"):
        cd.ConvolutionDescriptor((0, 0), (1, 1), (1, 1), cd.DataType.FLOAT, groups=0)


def test_group_count_mismatch_is_reported_by_cudnn():
    x = cd.TensorDescriptor((1, 4, 5, 5), cd.DataType.FLOAT)
    w = cd.FilterDescriptor((4, 3, 3, 3), cd.DataType.FLOAT)
    conv = cd.ConvolutionDescriptor((0, 0), (1, 1), (1, 1), cd.DataType.FLOAT, groups=2)
    with pytest.raises(CudnnError) as info:
        conv.output_shape(x, w)
    assert "group" in info.value.message.lower()


def test_cudnn_create_without_gpu_raises_no_device_error():
    """Without a GPU, cudnnCreate is a NoDeviceError; with one (this tier must not skip in CI) it gives a handle."""
    from pymagma import runtime

    if runtime.device_count():
        assert cd.Handle().value
        return
    with pytest.raises(NoDeviceError, match="cudnnCreate"):
        cd.Handle()


def test_descriptors_that_need_no_handle_work_on_the_cpu():
    x = cd.TensorDescriptor((8, 3, 6, 6), cd.DataType.FLOAT)
    bn = cd.derive_bn_descriptor(x, cd.BatchNormMode.SPATIAL)
    assert bn.shape == (1, 3, 1, 1)
    assert cd.derive_bn_descriptor(x, cd.BatchNormMode.PER_ACTIVATION).shape == (1, 3, 6, 6)
    half = cd.TensorDescriptor((8, 3, 6, 6), cd.DataType.HALF)
    assert cd.derive_bn_descriptor(half, cd.BatchNormMode.SPATIAL).dtype == cd.DataType.FLOAT
    assert cd.reserve_space_size(x) > 0
    for make in (lambda: cd.ActivationDescriptor(cd.ActivationMode.RELU),
                 lambda: cd.ActivationDescriptor(cd.ActivationMode.SWISH, 1.5),
                 lambda: cd.OpTensorDescriptor(cd.OpTensorOp.ADD, cd.DataType.FLOAT),
                 lambda: cd.ReduceTensorDescriptor(cd.ReduceTensorOp.NORM2, cd.DataType.FLOAT),
                 cd.DropoutDescriptor):
        assert make().value


def test_convolution_nd_output_dim_for_three_spatial_dims():
    x = cd.TensorDescriptor((2, 3, 7, 8, 9), cd.DataType.FLOAT)
    w = cd.FilterDescriptor((4, 3, 3, 3, 3), cd.DataType.FLOAT)
    conv = cd.ConvolutionDescriptor((1, 0, 1), (2, 1, 1), (1, 1, 2), cd.DataType.FLOAT)
    expected = [(n + 2 * p - d * 2 - 1) // s + 1 for n, p, s, d in zip((7, 8, 9), (1, 0, 1), (2, 1, 1), (1, 1, 2))]
    assert conv.output_shape(x, w) == (2, 4, *expected)


# ----------------------------------------------------------------------- shape inference: ours == cuDNN == NumPy
def conv_params(valid_only=False):
    """Valid geometries, or (not ``valid_only``) any sizes from 1 to 9, some too small for the window."""
    side = (1, 15) if valid_only else (1, 9)
    return conv_geometries(groups=(1, 2, 3), kernel=4, stride=3, dilation=3, side=side, valid=valid_only)


def _cudnn_conv_shape(x_shape, w_shape, stride, padding, dilation, groups):
    x = cd.TensorDescriptor(x_shape, cd.DataType.FLOAT)
    w = cd.FilterDescriptor(w_shape, cd.DataType.FLOAT)
    conv = cd.ConvolutionDescriptor(padding, stride, dilation, cd.DataType.FLOAT, groups=groups)
    return conv.output_shape(x, w)


@given(conv_params(valid_only=True))
def test_conv_output_shape_agrees_with_cudnn_and_a_numpy_convolution(params):
    x_shape, w_shape, stride, padding, dilation, groups = params
    ours = dnn.conv2d_output_shape(x_shape, w_shape, stride, padding, dilation, groups)
    assert ours == _cudnn_conv_shape(*params)
    rng = np.random.default_rng(0)
    y = conv2d_ref(rng.standard_normal(x_shape), rng.standard_normal(w_shape), stride, padding, dilation, groups)
    assert y.shape == ours


@given(conv_params())
def test_conv_shape_inference_rejects_exactly_what_cudnn_rejects(params):
    try:
        expected = _cudnn_conv_shape(*params)
    except CudnnError:
        with pytest.raises(ValueError):
            dnn.conv2d_output_shape(*params)
    else:
        assert dnn.conv2d_output_shape(*params) == expected


def pool_params():
    return pool_geometries(window=4, channels=3, side=9, valid=False)


@given(pool_params(), st.sampled_from(["max", "avg"]))
def test_pool_output_shape_agrees_with_cudnn_and_a_numpy_pooling(params, mode):
    shape, window, stride, padding = params
    x = cd.TensorDescriptor(shape, cd.DataType.FLOAT)
    desc = cd.PoolingDescriptor(dnn.POOL_MODES[mode], window, padding, stride)
    try:
        expected = desc.output_shape(x)
    except CudnnError:
        with pytest.raises(ValueError):
            dnn.pool2d_output_shape(shape, window, stride, padding)
        return
    assert dnn.pool2d_output_shape(shape, window, stride, padding) == expected
    y = pool2d_ref(np.random.default_rng(0).standard_normal(shape), window, stride, padding, mode)
    assert y.shape == expected


def test_shape_inference_errors_name_the_problem():
    with pytest.raises(ValueError, match="groups"):
        dnn.conv2d_output_shape((1, 3, 8, 8), (4, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match="stride"):
        dnn.conv2d_output_shape((1, 3, 8, 8), (4, 3, 3, 3), stride=0)
    with pytest.raises(ValueError, match="4-D"):
        dnn.conv2d_output_shape((3, 8, 8), (4, 3, 3, 3))
    with pytest.raises(ValueError, match="exceeds"):
        dnn.pool2d_output_shape((1, 1, 2, 2), 3)
    with pytest.raises(ValueError, match="pair"):
        dnn.pool2d_output_shape((1, 1, 8, 8), (2, 2, 2))
    with pytest.raises(TypeError, match="float32"):
        dnn.data_type(np.dtype(np.int32))


def test_dnn_descriptor_caches_reuse_descriptors():
    a = dnn.tensor_descriptor((2, 3, 4, 5), (60, 20, 5, 1), cd.DataType.FLOAT)
    assert dnn.tensor_descriptor((2, 3, 4, 5), (60, 20, 5, 1), cd.DataType.FLOAT) is a
    assert dnn.tensor_descriptor((2, 3, 4, 5), (60, 20, 5, 1), cd.DataType.DOUBLE) is not a
    conv = dnn.convolution_descriptor((1, 1), (1, 1), (1, 1), 1, cd.DataType.FLOAT, cd.MathType.DEFAULT)
    assert dnn.convolution_descriptor((1, 1), (1, 1), (1, 1), 1, cd.DataType.FLOAT, cd.MathType.DEFAULT) is conv


def test_math_type_follows_dtype_and_tf32_setting(monkeypatch):
    assert dnn._math_type(np.dtype(np.float16), None) == cd.MathType.TENSOR_OP
    assert dnn._math_type(np.dtype(np.float64), None) == cd.MathType.DEFAULT
    monkeypatch.setattr(dnn, "allow_tf32", False)
    assert dnn._math_type(np.dtype(np.float32), None) == cd.MathType.FMA
    assert dnn._math_type(np.dtype(np.float32), "tensor_op") == cd.MathType.TENSOR_OP
    with pytest.raises(ValueError, match="math"):
        dnn._math_type(np.dtype(np.float32), "fast")


# ------------------------------------------------------------------------ enums and prototypes against the headers
def cudnn_headers() -> str:
    """The text (comments removed) of the cudnn*.h next to the loaded library (pip wheels and toolkits ship them)."""
    include = Path(cd.lib.path).resolve().parent.parent / "include"
    headers = sorted(include.glob("cudnn*.h"))
    if not headers:
        pytest.skip(f"no cudnn*.h in {include}")
    text = "\n".join(h.read_text(errors="replace") for h in headers)
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def _spelled(prefix: str, drop: str = ""):
    return lambda member: prefix + member.removeprefix(drop)


#: our enum class -> how cuDNN's header spells a member
ENUM_SPELLING = {
    cd.Status: _spelled("CUDNN_STATUS_"), cd.DataType: _spelled("CUDNN_DATA_"),
    cd.MathType: lambda m: f"CUDNN_{m}_MATH".replace("_ALLOW_CONVERSION_MATH", "_MATH_ALLOW_CONVERSION"),
    cd.NanPropagation: lambda m: f"CUDNN_{m}_NAN", cd.TensorFormat: _spelled("CUDNN_TENSOR_"),
    cd.ConvolutionMode: _spelled("CUDNN_"), cd.ConvFwdAlgo: _spelled("CUDNN_CONVOLUTION_FWD_ALGO_"),
    cd.ConvBwdDataAlgo: _spelled("CUDNN_CONVOLUTION_BWD_DATA_ALGO_", "ALGO_"),
    cd.ConvBwdFilterAlgo: _spelled("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_", "ALGO_"), cd.Determinism: _spelled("CUDNN_"),
    cd.PoolingMode: _spelled("CUDNN_POOLING_"), cd.ActivationMode: _spelled("CUDNN_ACTIVATION_"),
    cd.SoftmaxAlgorithm: _spelled("CUDNN_SOFTMAX_"), cd.SoftmaxMode: _spelled("CUDNN_SOFTMAX_MODE_"),
    cd.BatchNormMode: _spelled("CUDNN_BATCHNORM_"), cd.OpTensorOp: _spelled("CUDNN_OP_TENSOR_"),
    cd.ReduceTensorOp: _spelled("CUDNN_REDUCE_TENSOR_"), cd.ReduceTensorIndices: _spelled("CUDNN_REDUCE_TENSOR_"),
    cd.IndicesType: lambda m: f"CUDNN_{m.removeprefix('INT')}BIT_INDICES",
}


def test_enum_values_are_the_headers():
    values = {name: int(v) for name, v in
              re.findall(r"\b(CUDNN_\w+)(?:\s+CUDNN_DEPRECATED_ENUM)?\s*=\s*(\d+)\s*[,}]", cudnn_headers())}
    wrong = [f"{enum.__name__}.{m.name} = {m.value}, header {spell(m.name)} = {values.get(spell(m.name))}"
             for enum, spell in ENUM_SPELLING.items() for m in enum if values.get(spell(m.name)) != m]
    assert not wrong, "\n".join(wrong)


def _kind_of_c(decl: str) -> str:
    """'ptr', 'int', 'u64', 'float', 'double' or 'void' for a C type (parameter name removed)."""
    t = " ".join(re.sub(r"\b(const|CUDNNWINAPI|CUDNN_DEPRECATED|extern)\b", " ", decl).split())
    if "*" in t or "[" in t or t.endswith(("Descriptor_t", "Handle_t")) or t == "cudaStream_t":
        return "ptr"
    return {"double": "double", "float": "float", "size_t": "u64", "unsigned long long": "u64",
            "void": "void"}.get(t, "int")  # int and every cudnn*_t enum


def _kind_of_ctype(ctype) -> str:
    if ctype is None:
        return "void"
    if ctype in (ctypes.c_void_p, ctypes.c_char_p) or issubclass(ctype, ctypes._Pointer):
        return "ptr"
    if ctype in (ctypes.c_size_t, ctypes.c_ulonglong):  # one type on LP64 platforms
        return "u64"
    return {ctypes.c_double: "double", ctypes.c_float: "float", ctypes.c_int: "int"}[ctype]


def header_declarations() -> dict[str, tuple[str, list[str]]]:
    """name -> (return kind, parameter kinds) of every cudnn* function the headers declare."""
    text, decls = cudnn_headers(), {}
    for m in re.finditer(r"\b(cudnn\w+)\s*\(([^;{}()]*)\)\s*(?:CUDNN_DEPRECATED\s*)?;", text):
        ret = re.split(r"[;}]", text[max(0, m.start() - 120):m.start()])[-1]
        ret = " ".join(line for line in ret.splitlines() if not line.strip().startswith("#"))
        params = [p for p in (q.strip() for q in m.group(2).split(",")) if p not in ("", "void")]
        decls.setdefault(m.group(1), (_kind_of_c(ret), [_kind_of_c(_without_name(p)) for p in params]))
    return decls


def _without_name(param: str) -> str:
    """A C parameter without its name (``const int dimA[]`` -> ``const int []``)."""
    return re.sub(r"\b\w+\s*(\[\w*\])?$", lambda m: m.group(1) or "", param)


def test_prototypes_are_the_headers_declarations():
    decls = header_declarations()
    wrong = []
    for name, (restype, argtypes) in cd.PROTOTYPES.items():
        ours = (_kind_of_ctype(restype), [_kind_of_ctype(a) for a in argtypes])
        if decls.get(name) != ours:
            wrong.append(f"{name}: header {decls.get(name)}, ours {ours}")
    assert not wrong, "\n".join(wrong)
