"""cuDNN 9 on DeviceArrays: convolution, pooling, activations, softmax, batch normalisation, dropout, tensor ops.

Layout is NCHW (C-contiguous like NumPy).  One cuDNN handle per device, bound to that device's default queue's
stream, so cuDNN work is ordered with MAGMA/cuBLAS work and pymagma's kernels.  Descriptors are cached by
(shape, strides, dtype, parameters) and convolution algorithms by problem; workspaces come from the memory pool.
float32 and float64 compute in their own type; float16 and bfloat16 (arrays from ``ml_dtypes``) compute in float32.

Shape inference (:func:`conv2d_output_shape`, :func:`pool2d_output_shape`) is plain Python and needs no GPU.

Argument orders are cuDNN's: ``conv2d_backward_filter(x, dy, w_shape)``, ``pool2d_backward(y, dy, x, ...)``,
``activation_backward(y, dy, x, ...)``, ``softmax_backward(y, dy, ...)``, ``batch_norm_backward(x, dy, ...)``
(magmadnn's op set puts ``dy`` first; its device backend maps the two in its adapter section).
"""

from __future__ import annotations

import functools
import numbers
import threading
from ctypes import byref, c_double, c_float, c_int, c_size_t, c_void_p
from dataclasses import dataclass

import numpy as np

from . import _checks, _native, kernels, memory, queue, runtime
from . import _cudnn as cd
from . import array as _array
from ._dnn_shapes import _tuple2, conv2d_output_shape, pool2d_output_shape  # noqa: F401 - public here
from .array import on_arrays_device
from .dtypes import answered_once

#: Largest convolution workspace (bytes) an algorithm may use unless a call says otherwise.
DEFAULT_WORKSPACE_LIMIT = 512 * 1024 * 1024
#: Like torch.backends.cudnn.allow_tf32: float32 convolutions may use TF32 tensor cores (cuDNN's default math).
allow_tf32 = True

_DATA_TYPES = {"float32": cd.DataType.FLOAT, "float64": cd.DataType.DOUBLE, "float16": cd.DataType.HALF,
               "bfloat16": cd.DataType.BFLOAT16}
POOL_MODES = {"max": cd.PoolingMode.MAX, "avg": cd.PoolingMode.AVERAGE_COUNT_INCLUDE_PADDING,
              "avg_include_pad": cd.PoolingMode.AVERAGE_COUNT_INCLUDE_PADDING,
              "avg_exclude_pad": cd.PoolingMode.AVERAGE_COUNT_EXCLUDE_PADDING,
              "max_deterministic": cd.PoolingMode.MAX_DETERMINISTIC}
ACTIVATION_MODES = {"sigmoid": cd.ActivationMode.SIGMOID, "relu": cd.ActivationMode.RELU,
                    "tanh": cd.ActivationMode.TANH, "clipped_relu": cd.ActivationMode.CLIPPED_RELU,
                    "elu": cd.ActivationMode.ELU, "swish": cd.ActivationMode.SWISH}
# (cuDNN's IDENTITY mode works only inside cudnnConvolutionBiasActivationForward, so it is not offered here.)
_ACTIVATION_COEF = {"elu": 1.0, "swish": 1.0}  # default alpha / beta; clipped_relu's ceiling has no default
SOFTMAX_MODES = {"instance": cd.SoftmaxMode.INSTANCE, "channel": cd.SoftmaxMode.CHANNEL}
BN_MODES = {"spatial": cd.BatchNormMode.SPATIAL, "per_activation": cd.BatchNormMode.PER_ACTIVATION}


# ------------------------------------------------------------------------------------------------ dtypes etc.
@answered_once
def data_type(dtype) -> cd.DataType:
    try:
        name = np.dtype(dtype).name  # scalar types (np.float32), dtypes and names alike
    except TypeError:
        name = str(dtype)
    try:
        return _DATA_TYPES[name]
    except KeyError:
        raise TypeError(f"cuDNN functions take float32, float64, float16 or bfloat16 arrays, got {name}") from None


def compute_type(dtype) -> cd.DataType:
    return cd.DataType.DOUBLE if data_type(dtype) == cd.DataType.DOUBLE else cd.DataType.FLOAT


def _scalar(dtype, value: float):
    """alpha/beta scaling factors: double for double data, float otherwise (cuDNN's rule); the usual 0 and 1 are
    made once per dtype (shared, never written: cuDNN only reads them)."""
    key = (dtype, value)
    made = _SCALARS.get(key)
    if made is None:
        made = c_double(value) if data_type(dtype) == cd.DataType.DOUBLE else c_float(value)
        if value in (0.0, 1.0):
            _SCALARS[key] = made
    return made


_SCALARS: dict = {}  # (dtype, 0.0 or 1.0) -> its ctypes scalar


def _one_zero(dtype) -> tuple:
    """(1, 0) as the alpha and beta of a call on ``dtype`` data, found in one look-up."""
    pair = _ONE_ZERO.get(dtype)
    if pair is None:
        pair = _ONE_ZERO[dtype] = (_scalar(dtype, 1.0), _scalar(dtype, 0.0))
    return pair


_ONE_ZERO: dict = {}


def _math_type(dtype, math: str | None) -> cd.MathType:
    if math is not None:
        names = {"default": cd.MathType.DEFAULT, "tensor_op": cd.MathType.TENSOR_OP, "fma": cd.MathType.FMA,
                 "tensor_op_allow_conversion": cd.MathType.TENSOR_OP_ALLOW_CONVERSION}
        if math not in names:
            raise ValueError(f"math must be one of {sorted(names)}, got {math!r}")
        return names[math]
    kind = data_type(dtype)
    if kind in (cd.DataType.HALF, cd.DataType.BFLOAT16):
        return cd.MathType.TENSOR_OP
    if kind == cd.DataType.FLOAT and not allow_tf32:
        return cd.MathType.FMA
    return cd.MathType.DEFAULT


# ------------------------------------------------------------------------------------- handles and caches
_native.resource("cudnn_handles")(lambda libraries: {})  # device -> its cuDNN handle
_lock = threading.Lock()


def handle(device: int | None = None) -> cd.Handle:
    """The cuDNN handle of ``device`` (created on first use, bound to the device's default queue's stream)."""
    handles = _native.current.cudnn_handles
    h = handles.get(device) if device is not None else None
    if h is not None:  # the fast path of every cuDNN call: a device that already has its handle
        return h
    device = None if device is None else _checks.count(device, "device")
    runtime.require_device()
    device = runtime.get_device() if device is None else device
    with _lock:
        h = handles.get(device)
        if h is None:
            with runtime.on_device(device):
                h = cd.Handle()
                h.set_stream(queue.default_queue(device).stream)
            handles[device] = h
    return h


@functools.lru_cache(maxsize=1024)
def tensor_descriptor(shape: tuple, strides: tuple, dtype: cd.DataType) -> cd.TensorDescriptor:
    return cd.TensorDescriptor(shape, dtype, strides)


@functools.lru_cache(maxsize=256)
def filter_descriptor(shape: tuple, dtype: cd.DataType) -> cd.FilterDescriptor:
    return cd.FilterDescriptor(shape, dtype)


@functools.lru_cache(maxsize=256)
def convolution_descriptor(padding, stride, dilation, groups, compute, math) -> cd.ConvolutionDescriptor:
    return cd.ConvolutionDescriptor(padding, stride, dilation, compute, groups, math)


@functools.lru_cache(maxsize=128)
def pooling_descriptor(mode, window, padding, stride) -> cd.PoolingDescriptor:
    return cd.PoolingDescriptor(mode, window, padding, stride)


@functools.lru_cache(maxsize=64)
def activation_descriptor(mode, coef: float) -> cd.ActivationDescriptor:
    return cd.ActivationDescriptor(mode, coef)


@functools.lru_cache(maxsize=64)
def _bn_descriptor(x_key: tuple, mode) -> cd.TensorDescriptor:
    return cd.derive_bn_descriptor(tensor_descriptor(*x_key), mode)


def _desc_key(a, shape=None) -> tuple:
    """(shape, element strides, cuDNN dtype) of ``a`` seen with ``shape``: its own, padded with trailing 1s, or
    any reshape of a C-contiguous ``a``; worked out once per layout."""
    if not isinstance(a, _DeviceArray):
        _device_array(a, "cuDNN tensor")
    layout = (a.shape, a.strides, a.dtype, shape)
    try:
        return _DESC_KEYS[layout]
    except KeyError:
        pass
    except TypeError:  # an unhashable shape (a list): worked out each time
        return _work_out_desc_key(a, shape)
    key = _DESC_KEYS[layout] = _work_out_desc_key(a, shape)  # (raises for a layout cuDNN cannot take)
    if len(_DESC_KEYS) > 4096:
        _DESC_KEYS.clear()
    return key


_DESC_KEYS: dict = {}  # (shape, byte strides, dtype, seen-as shape) -> _desc_key's answer


def _work_out_desc_key(a, shape) -> tuple:
    own = tuple(a.shape)
    shape = own if shape is None else tuple(shape)
    elem = tuple(s // a.itemsize for s in a.strides)
    if shape[: len(own)] == own and all(n == 1 for n in shape[len(own):]):
        strides = elem + (1,) * (len(shape) - len(own))
    elif a.is_c_contiguous:
        strides = cd.contiguous_strides(shape)
    else:
        raise ValueError(f"cannot view a strided array of shape {own} as {shape}; copy it first")
    if any(s <= 0 for s, n in zip(strides, shape) if n > 1):
        raise ValueError(f"cuDNN needs positive strides; got strides {a.strides} for shape {own} (copy it first)")
    strides = tuple(s if n > 1 else max(s, 1) for s, n in zip(strides, shape))
    return shape, strides, data_type(a.dtype)


def _tensor(a, shape=None) -> cd.TensorDescriptor:
    return tensor_descriptor(*_desc_key(a, shape))


def _as_4d(a) -> tuple:
    """Shape used for a 1..4-D array in cuDNN: (N, C, H, W) padded with 1s (2-D (N, C) -> (N, C, 1, 1))."""
    if not 1 <= a.ndim <= 8:
        raise ValueError(f"cuDNN tensors have 1 to 8 dimensions, got shape {a.shape}")
    return tuple(a.shape) + (1,) * max(0, 4 - a.ndim)


_device_array = _array.require_device_array  # a DeviceArray, or a TypeError naming the argument (hot paths ask
_DeviceArray = _array.DeviceArray  # isinstance first: no call for the common case)


def _empty(shape, like):
    if not isinstance(like, _DeviceArray):
        _device_array(like, "cuDNN operand")
    if type(shape) is tuple:  # an operand's own shape, or one worked out from checked sizes
        return _array._empty(shape, like.dtype, like.device)
    return _array.empty(tuple(shape), like.dtype, device=like.device)


def _check_same(what: str, *arrays) -> None:
    for a in arrays:
        if not isinstance(a, _DeviceArray):
            _device_array(a, what)
    first = arrays[0]
    for other in arrays[1:]:
        if other.dtype != first.dtype:
            raise TypeError(f"{what}: dtypes differ ({first.dtype} and {other.dtype})")
        if other.device != first.device:
            raise ValueError(f"{what}: arrays live on different devices ({first.device} and {other.device})")


def _check_shape(what: str, a, shape) -> None:
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"{what}: expected shape {tuple(shape)}, got {tuple(a.shape)}")


def _out(out, shape, like, what: str):
    if out is None:
        return _empty(shape, like)
    _check_shape(f"{what} out", out, shape)
    _check_same(what, like, out)
    if not out.is_c_contiguous:
        raise ValueError(f"{what}: out must be C-contiguous (cuDNN writes it densely), got strides {out.strides}")
    return out


def _workspace(nbytes: int, device: int):
    return memory.Allocation.trusted(nbytes, device) if nbytes else None


def _like(a, x, xd) -> cd.TensorDescriptor:
    """``a``'s 4-D descriptor (``x``'s shape and dtype): ``x``'s own ``xd`` (what the cache gives) for x's strides."""
    return xd if a.strides == x.strides else _tensor(a, _as_4d(a))


def _ptr(a) -> c_void_p:
    return c_void_p(a.ptr) if a is not None and a.ptr else c_void_p()


# ----------------------------------------------------------------------------------------------- convolution
@dataclass(frozen=True)
class ConvProblem:
    """Everything that determines a convolution's descriptors and algorithm choice."""

    x_shape: tuple
    w_shape: tuple
    y_shape: tuple
    padding: tuple
    stride: tuple
    dilation: tuple
    groups: int
    dtype: cd.DataType
    math: cd.MathType

    @functools.cached_property
    def descriptors(self):  # made once per problem (problems are cached)
        compute = cd.DataType.DOUBLE if self.dtype == cd.DataType.DOUBLE else cd.DataType.FLOAT
        return (tensor_descriptor(self.x_shape, cd.contiguous_strides(self.x_shape), self.dtype),
                filter_descriptor(self.w_shape, self.dtype),
                convolution_descriptor(self.padding, self.stride, self.dilation, self.groups, compute, self.math),
                tensor_descriptor(self.y_shape, cd.contiguous_strides(self.y_shape), self.dtype))

    @functools.cached_property
    def ordered(self) -> dict:
        """Kind -> the four descriptors in the argument order of cuDNN's call for that kind (made once)."""
        x, w, conv, y = self.descriptors
        return {"forward": (x, w, conv, y), "backward_data": (w, y, conv, x), "backward_filter": (x, y, conv, w)}


@dataclass(frozen=True)
class AlgoChoice:
    algo: int
    workspace: int
    time_ms: float = -1.0


_native.resource("cudnn_algorithms")(lambda libraries: {})  # problem key -> AlgoChoice

_ALGO_CALLS = {
    # kind: (get_v7, find_ex, workspace_size, max_count, enum)
    "forward": ("cudnnGetConvolutionForwardAlgorithm_v7", "cudnnFindConvolutionForwardAlgorithmEx",
                "cudnnGetConvolutionForwardWorkspaceSize", "cudnnGetConvolutionForwardAlgorithmMaxCount",
                cd.ConvFwdAlgo),
    "backward_data": ("cudnnGetConvolutionBackwardDataAlgorithm_v7", "cudnnFindConvolutionBackwardDataAlgorithmEx",
                      "cudnnGetConvolutionBackwardDataWorkspaceSize",
                      "cudnnGetConvolutionBackwardDataAlgorithmMaxCount", cd.ConvBwdDataAlgo),
    "backward_filter": ("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                        "cudnnFindConvolutionBackwardFilterAlgorithmEx",
                        "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                        "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", cd.ConvBwdFilterAlgo),
}


def _ordered_descs(kind: str, problem: ConvProblem):
    """The four descriptors in the argument order cuDNN's calls for ``kind`` use."""
    return problem.ordered[kind]


def _ordered_ptrs(kind: str, x, w, y):
    return {"forward": (x, w, y), "backward_data": (w, y, x), "backward_filter": (x, y, w)}[kind]


def choose_algorithm(kind: str, problem: ConvProblem, *, device: int, workspace_limit: int | None = None,
                     autotune: bool = False, buffers=None) -> AlgoChoice:
    """The algorithm for a convolution ``kind`` ("forward", "backward_data", "backward_filter"), cached by problem.

    By default cuDNN's heuristics rank the algorithms (``cudnnGet*Algorithm_v7``); ``autotune`` times them on the
    given ``buffers`` (x, w, y device arrays) with ``cudnnFind*AlgorithmEx``.  Either way the first algorithm that
    succeeds and needs at most ``workspace_limit`` bytes is taken.
    """
    limit = DEFAULT_WORKSPACE_LIMIT if workspace_limit is None else _checks.count(
        workspace_limit, "workspace_limit", maximum=2**63 - 1)
    key = (kind, device, problem, limit, bool(autotune))
    algorithms = _native.current.cudnn_algorithms
    hit = algorithms.get(key)
    if hit is not None:
        return hit
    get_v7, find_ex, ws_size, max_count, _ = _ALGO_CALLS[kind]
    h = handle(device)
    count = c_int()
    cd.call(max_count, h.value, byref(count))
    results = (cd._AlgoPerf * max(count.value, 1))()
    returned = c_int()
    descs = _ordered_descs(kind, problem)
    if autotune:
        if buffers is None:
            raise ValueError("autotune needs the problem's buffers (x, w, y)")
        space = _workspace(limit, device)
        a, b, c = (_ptr(p) for p in _ordered_ptrs(kind, *buffers))
        cd.call(find_ex, h.value, descs[0], a, descs[1], b, descs[2], descs[3], c, len(results), byref(returned),
                results, _ptr(space), c_size_t(limit if space else 0))
    else:
        cd.call(get_v7, h.value, *descs, len(results), byref(returned), results)
    for perf in results[: returned.value]:
        if perf.status != 0 or perf.memory > limit:
            continue
        size = c_size_t()
        if cd.library().bind(ws_size)(h.value, *descs, perf.algo, byref(size)) != 0 or size.value > limit:
            continue
        choice = AlgoChoice(int(perf.algo), int(size.value), float(perf.time))
        algorithms[key] = choice
        return choice
    raise cd.CudnnError(int(cd.Status.NOT_SUPPORTED), cd.status_name(cd.Status.NOT_SUPPORTED),
                        f"no {kind} convolution algorithm fits a workspace of {limit} bytes for {problem}",
                        get_v7 if not autotune else find_ex)


def _problem(x_shape, w_shape, dtype, stride, padding, dilation, groups, math) -> ConvProblem:
    """The checked :class:`ConvProblem` of a call, worked out once per distinct arguments."""
    return _checked_problem(x_shape, w_shape, dtype, stride, padding, dilation, groups, math, allow_tf32)


@_checks.once_per_arguments
def _checked_problem(x_shape, w_shape, dtype, stride, padding, dilation, groups, math, tf32) -> ConvProblem:
    return _work_out_problem(x_shape, w_shape, dtype, stride, padding, dilation, groups, math)


def _work_out_problem(x_shape, w_shape, dtype, stride, padding, dilation, groups, math) -> ConvProblem:
    y_shape = conv2d_output_shape(x_shape, w_shape, stride, padding, dilation, groups)
    return ConvProblem(_checks.sizes(x_shape, "x shape"), _checks.sizes(w_shape, "w shape"), y_shape,
                       _tuple2(padding, "padding"), _tuple2(stride, "stride"), _tuple2(dilation, "dilation"),
                       _checks.integer(groups, "groups"), data_type(dtype),
                       _math_type(dtype, math))


def _conv_run(kind: str, problem: ConvProblem, x, w, y, *, workspace_limit, autotune):
    """Run one convolution ``kind`` into its output (y, x or w by kind); autotuning may scribble on that output
    first (cudnnFind*AlgorithmEx writes it), which the real call then overwrites (beta = 0)."""
    device = x.device
    choice = choose_algorithm(kind, problem, device=device, workspace_limit=workspace_limit, autotune=autotune,
                              buffers=(x, w, y))
    space = _workspace(choice.workspace, device)
    alpha, beta = _one_zero(x.dtype)
    d = problem.ordered[kind]
    a, b, c = (x, w, y) if kind == "forward" else (w, y, x) if kind == "backward_data" else (x, y, w)
    cd.call(_CONV_CALLS[kind], handle(device).value, byref(alpha), d[0], _ptr(a), d[1], _ptr(b), d[2], choice.algo,
            _ptr(space), choice.workspace, byref(beta), d[3], _ptr(c))


_CONV_CALLS = {"forward": "cudnnConvolutionForward", "backward_data": "cudnnConvolutionBackwardData",
               "backward_filter": "cudnnConvolutionBackwardFilter"}


@on_arrays_device
def conv2d_forward(x, w, bias=None, *, stride=1, padding=0, dilation=1, groups: int = 1, out=None,
                   autotune: bool = False, workspace_limit: int | None = None, math: str | None = None):
    """y = x ⋆ w (+ bias over channels): x (N, C, H, W), w (K, C/groups, kh, kw), bias (K,) -> y (N, K, Ho, Wo)."""
    _check_same("conv2d_forward", x, w, *(b for b in (bias,) if b is not None))
    problem = _problem(x.shape, w.shape, x.dtype, stride, padding, dilation, groups, math)
    x, w = kernels.contiguous(x), kernels.contiguous(w)
    y = _out(out, problem.y_shape, x, "conv2d_forward")
    _conv_run("forward", problem, x, w, y, workspace_limit=workspace_limit, autotune=autotune)
    if bias is not None:
        _check_shape("conv2d_forward bias", bias, (problem.w_shape[0],))
        add_tensor(bias.reshape(1, problem.w_shape[0], 1, 1), y)
    return y


@on_arrays_device
def conv2d_backward_data(dy, w, x_shape, *, stride=1, padding=0, dilation=1, groups: int = 1, out=None,
                         autotune: bool = False, workspace_limit: int | None = None, math: str | None = None):
    """dx of a conv2d: the gradient with respect to the input of shape ``x_shape``."""
    _check_same("conv2d_backward_data", dy, w)
    problem = _problem(x_shape, w.shape, dy.dtype, stride, padding, dilation, groups, math)
    _check_shape("conv2d_backward_data dy", dy, problem.y_shape)
    dy, w = kernels.contiguous(dy), kernels.contiguous(w)
    dx = _out(out, problem.x_shape, dy, "conv2d_backward_data")
    _conv_run("backward_data", problem, dx, w, dy, workspace_limit=workspace_limit, autotune=autotune)
    return dx


@on_arrays_device
def conv2d_backward_filter(x, dy, w_shape, *, stride=1, padding=0, dilation=1, groups: int = 1, out=None,
                           autotune: bool = False, workspace_limit: int | None = None, math: str | None = None):
    """dw of a conv2d: the gradient with respect to weights of shape ``w_shape``."""
    _check_same("conv2d_backward_filter", x, dy)
    problem = _problem(x.shape, w_shape, x.dtype, stride, padding, dilation, groups, math)
    _check_shape("conv2d_backward_filter dy", dy, problem.y_shape)
    x, dy = kernels.contiguous(x), kernels.contiguous(dy)
    dw = _out(out, problem.w_shape, x, "conv2d_backward_filter")
    _conv_run("backward_filter", problem, x, dw, dy, workspace_limit=workspace_limit, autotune=autotune)
    return dw


@on_arrays_device
def conv2d_backward_bias(dy, out=None):
    """db = sum of dy (N, K, Ho, Wo) over N, Ho, Wo -> (K,)."""
    if dy.ndim != 4:
        raise ValueError(f"conv2d_backward_bias needs a 4-D dy, got shape {dy.shape}")
    db = _out(out, (dy.shape[1],), dy, "conv2d_backward_bias")
    alpha, beta = _one_zero(dy.dtype)
    cd.call("cudnnConvolutionBackwardBias", handle(dy.device).value, byref(alpha), _tensor(dy), _ptr(dy),
            byref(beta), _tensor(db, (1, dy.shape[1], 1, 1)), _ptr(db))
    return db


# --------------------------------------------------------------------------------------------------- pooling
def _pool_desc(mode: str, window, stride, padding) -> cd.PoolingDescriptor:
    if mode not in POOL_MODES:
        raise ValueError(f"pooling mode must be one of {sorted(POOL_MODES)}, got {mode!r}")
    window = _tuple2(window, "window")
    stride = window if stride is None else _tuple2(stride, "stride")
    return pooling_descriptor(POOL_MODES[mode], window, _tuple2(padding, "padding"), stride)


@on_arrays_device
def pool2d_forward(x, window, stride=None, padding=0, mode: str = "max", out=None):
    """Max or average pooling of x (N, C, H, W); ``stride`` defaults to ``window``."""
    shape = pool2d_output_shape(x.shape, window, stride, padding)
    desc = _pool_desc(mode, window, stride, padding)
    y = _out(out, shape, x, "pool2d_forward")
    alpha, beta = _one_zero(x.dtype)
    cd.call("cudnnPoolingForward", handle(x.device).value, desc, byref(alpha), _tensor(x), _ptr(x), byref(beta),
            _tensor(y), _ptr(y))
    return y


@on_arrays_device
def pool2d_backward(y, dy, x, window, stride=None, padding=0, mode: str = "max", out=None):
    """dx of pooling, from the forward input ``x``, output ``y`` and output gradient ``dy``."""
    _check_same("pool2d_backward", x, y, dy)
    shape = pool2d_output_shape(x.shape, window, stride, padding)
    _check_shape("pool2d_backward y", y, shape)
    _check_shape("pool2d_backward dy", dy, shape)
    desc = _pool_desc(mode, window, stride, padding)
    dx = _out(out, x.shape, x, "pool2d_backward")
    alpha, beta = _one_zero(x.dtype)
    cd.call("cudnnPoolingBackward", handle(x.device).value, desc, byref(alpha), _tensor(y), _ptr(y), _tensor(dy),
            _ptr(dy), _tensor(x), _ptr(x), byref(beta), _tensor(dx), _ptr(dx))
    return dx


# ------------------------------------------------------------------------------------------------ activation
def _activation_desc(mode: str, coef: float | None) -> cd.ActivationDescriptor:
    if mode not in ACTIVATION_MODES:
        raise ValueError(f"activation must be one of {sorted(ACTIVATION_MODES)}, got {mode!r}")
    if coef is None:
        if mode == "clipped_relu":
            raise ValueError("clipped_relu needs coef, its ceiling (e.g. coef=6.0 for ReLU6)")
        coef = _ACTIVATION_COEF.get(mode, 0.0)
    return activation_descriptor(ACTIVATION_MODES[mode], float(coef))


def _activation_plan(x, mode: str, coef):
    """(activation descriptor, x's descriptor seen as 4-D, alpha, beta) of an activation of ``x``: planned once per
    layout of ``x``, mode and coef (:data:`_ACTIVATION_PLANS`); ``x`` is a DeviceArray."""
    key = (x.shape, x.strides, x.dtype, mode, coef, type(coef))
    try:
        plan = _ACTIVATION_PLANS.get(key)
    except TypeError:  # an unhashable mode or coef: refused below
        plan, key = None, None
    if plan is None:
        _device_array(x, "activation x")
        plan = (_activation_desc(mode, coef), _tensor(x, _as_4d(x)), *_one_zero(x.dtype))
        if key is not None:
            _ACTIVATION_PLANS.keep(key, plan)
    return plan


_ACTIVATION_PLANS = _checks.Plans()


@on_arrays_device
def activation_forward(x, mode: str = "relu", coef: float | None = None, out=None):
    """y = f(x) for sigmoid, relu, tanh, clipped_relu (ceiling ``coef``, required), elu (alpha ``coef``, default 1)
    and swish (beta ``coef``, default 1)."""
    _device_array(x, "activation_forward x")
    desc, xd, alpha, beta = _activation_plan(x, mode, coef)
    y = _array._empty(x.shape, x.dtype, x.device) if out is None else _out(out, x.shape, x, "activation_forward")
    cd.call("cudnnActivationForward", handle(x.device).value, desc, byref(alpha), xd, _ptr(x), byref(beta),
            _like(y, x, xd), _ptr(y))
    return y


@on_arrays_device
def activation_backward(y, dy, x, mode: str = "relu", coef: float | None = None, out=None):
    """dx = f'(x) * dy from the forward input ``x`` and output ``y``."""
    _check_same("activation_backward", x, y, dy)
    for name, a in (("y", y), ("dy", dy)):
        _check_shape(f"activation_backward {name}", a, x.shape)
    desc, xd, alpha, beta = _activation_plan(x, mode, coef)
    dx = _array._empty(x.shape, x.dtype, x.device) if out is None else _out(out, x.shape, x, "activation_backward")
    cd.call("cudnnActivationBackward", handle(x.device).value, desc, byref(alpha), _like(y, x, xd), _ptr(y),
            _like(dy, x, xd), _ptr(dy), xd, _ptr(x), byref(beta), _like(dx, x, xd), _ptr(dx))
    return dx


# --------------------------------------------------------------------------------------------------- softmax
def _softmax_args(log: bool, mode: str):
    if mode not in SOFTMAX_MODES:
        raise ValueError(f"softmax mode must be 'instance' (all of C, H, W) or 'channel' (over C), got {mode!r}")
    return int(cd.SoftmaxAlgorithm.LOG if log else cd.SoftmaxAlgorithm.ACCURATE), int(SOFTMAX_MODES[mode])


@on_arrays_device
def softmax_forward(x, log: bool = False, mode: str = "instance", out=None):
    """Softmax (or log-softmax) of x (N, C[, H, W]) per sample ("instance") or per pixel over C ("channel")."""
    algo, m = _softmax_args(log, mode)
    y = _out(out, x.shape, x, "softmax_forward")
    alpha, beta = _one_zero(x.dtype)
    cd.call("cudnnSoftmaxForward", handle(x.device).value, algo, m, byref(alpha), _tensor(x, _as_4d(x)), _ptr(x),
            byref(beta), _tensor(y, _as_4d(y)), _ptr(y))
    return y


@on_arrays_device
def softmax_backward(y, dy, log: bool = False, mode: str = "instance", out=None):
    """dx of softmax (or log-softmax) from its output ``y`` and output gradient ``dy``."""
    _check_same("softmax_backward", y, dy)
    _check_shape("softmax_backward dy", dy, y.shape)
    algo, m = _softmax_args(log, mode)
    dx = _out(out, y.shape, y, "softmax_backward")
    alpha, beta = _one_zero(y.dtype)
    s = _as_4d(y)
    cd.call("cudnnSoftmaxBackward", handle(y.device).value, algo, m, byref(alpha), _tensor(y, s), _ptr(y),
            _tensor(dy, s), _ptr(dy), byref(beta), _tensor(dx, s), _ptr(dx))
    return dx


# ------------------------------------------------------------------------------------------------ batch norm
def _bn_setup(x, mode: str):
    """(x's descriptor, the statistics' descriptor, their shape, their dtype): planned once per layout of ``x`` and
    mode (:data:`_BN_PLANS`)."""
    plan = _BN_PLANS.get((x.shape, x.strides, x.dtype, mode)) if type(x) is _DeviceArray and type(mode) is str else None
    return plan or _plan_bn(x, mode)


def _plan_bn(x, mode: str):
    if mode not in BN_MODES:
        raise ValueError(f"batch-norm mode must be 'spatial' (per channel) or 'per_activation', got {mode!r}")
    _device_array(x, "batch norm x")
    if x.ndim < 2:
        raise ValueError(f"batch norm needs x of shape (N, C, ...), got {x.shape}")
    key = _desc_key(x, _as_4d(x))
    bn = _bn_descriptor(key, BN_MODES[mode])
    param_shape = (x.shape[1],) if mode == "spatial" else tuple(x.shape[1:])
    param_dtype = np.float64 if bn.dtype == cd.DataType.DOUBLE else np.float32
    return _BN_PLANS.keep((x.shape, x.strides, x.dtype, mode),
                          (tensor_descriptor(*key), bn, param_shape, np.dtype(param_dtype)))


_BN_PLANS = _checks.Plans()  # (x's shape, strides, dtype, mode) -> _plan_bn's answer


def _check_params(what: str, shape, dtype, **params) -> None:
    for name, a in params.items():
        if a is None:
            continue
        if not isinstance(a, _DeviceArray):
            _device_array(a, f"{what} {name}")
        if tuple(a.shape) != tuple(shape) or a.dtype != dtype or not a.is_c_contiguous:
            raise ValueError(f"{what}: {name} must be a contiguous {dtype} array of shape {tuple(shape)}, "
                             f"got {a.dtype} {tuple(a.shape)}")


def _params_like(shape: tuple, dtype: np.dtype, device: int):
    """Statistics or parameter gradients of ``_bn_setup``'s shape and dtype on an operand's device (nothing to
    check again)."""
    return _array._empty(shape, dtype, device)


@on_arrays_device
def batch_norm_forward_training(x, scale, bias, running_mean=None, running_var=None, *, momentum: float = 0.1,
                                eps: float = 1e-5, mode: str = "spatial", out=None):
    """Normalise with batch statistics; returns (y, save_mean, save_inv_std) for the backward pass.

    ``running_mean``/``running_var`` (optional, updated in place) follow cuDNN: running = (1 - momentum) * running
    + momentum * batch, the variance unbiased.  ``scale``/``bias`` are (C,) for "spatial", x.shape[1:] for
    "per_activation"; they and the statistics are float32 for half inputs.
    """
    xd, bn, pshape, pdtype = _bn_setup(x, mode)
    _check_params("batch_norm_forward_training", pshape, pdtype, scale=scale, bias=bias, running_mean=running_mean,
                  running_var=running_var)
    if (running_mean is None) != (running_var is None):
        raise ValueError("give both running_mean and running_var, or neither")
    y = _out(out, x.shape, x, "batch_norm_forward_training")
    save_mean, save_inv = _params_like(pshape, pdtype, x.device), _params_like(pshape, pdtype, x.device)
    alpha, beta = _one_zero(x.dtype)
    cd.call("cudnnBatchNormalizationForwardTraining", handle(x.device).value, int(BN_MODES[mode]), byref(alpha),
            byref(beta), xd, _ptr(x), _tensor(y, _as_4d(y)), _ptr(y), bn, _ptr(scale), _ptr(bias), float(momentum),
            _ptr(running_mean),
            _ptr(running_var), float(max(eps, cd.BN_MIN_EPSILON)), _ptr(save_mean), _ptr(save_inv))
    return y, save_mean, save_inv


@on_arrays_device
def batch_norm_forward_inference(x, scale, bias, mean, var, *, eps: float = 1e-5, mode: str = "spatial", out=None):
    """y = scale * (x - mean) / sqrt(var + eps) + bias with stored statistics."""
    xd, bn, pshape, pdtype = _bn_setup(x, mode)
    _check_params("batch_norm_forward_inference", pshape, pdtype, scale=scale, bias=bias, mean=mean, var=var)
    y = _out(out, x.shape, x, "batch_norm_forward_inference")
    alpha, beta = _one_zero(x.dtype)
    cd.call("cudnnBatchNormalizationForwardInference", handle(x.device).value, int(BN_MODES[mode]), byref(alpha),
            byref(beta), xd, _ptr(x), _tensor(y, _as_4d(y)), _ptr(y), bn, _ptr(scale), _ptr(bias), _ptr(mean),
            _ptr(var), float(eps))
    return y


@on_arrays_device
def batch_norm_backward(x, dy, scale, save_mean=None, save_inv_std=None, *, eps: float = 1e-5,
                        mode: str = "spatial", out=None):
    """(dx, dscale, dbias) of training-mode batch norm; pass the saved statistics of the forward call."""
    _check_same("batch_norm_backward", x, dy)
    _check_shape("batch_norm_backward dy", dy, x.shape)
    xd, bn, pshape, pdtype = _bn_setup(x, mode)
    _check_params("batch_norm_backward", pshape, pdtype, scale=scale, save_mean=save_mean, save_inv_std=save_inv_std)
    dx = _out(out, x.shape, x, "batch_norm_backward")
    dscale, dbias = _params_like(pshape, pdtype, x.device), _params_like(pshape, pdtype, x.device)
    one, zero = _one_zero(x.dtype)
    cd.call("cudnnBatchNormalizationBackward", handle(x.device).value, int(BN_MODES[mode]), byref(one), byref(zero),
            byref(one), byref(zero), xd, _ptr(x), _tensor(dy, _as_4d(dy)), _ptr(dy), _tensor(dx, _as_4d(dx)), _ptr(dx),
            bn, _ptr(scale), _ptr(dscale), _ptr(dbias), float(eps), _ptr(save_mean), _ptr(save_inv_std))
    return dx, dscale, dbias


# --------------------------------------------------------------------------------------------------- dropout
class DropoutState:
    """cuDNN's dropout generator for one device: its state buffer, seeded once, advancing with every forward."""

    def __init__(self, seed: int = 0, device: int | None = None, rate: float = 0.5):
        _check_rate(rate)
        self.device = runtime.get_device() if device is None else _checks.count(device, "device")
        self.seed, self.rate = _checks.count(seed, "seed", maximum=2**64 - 1), float(rate)
        h = handle(self.device)
        size = c_size_t()
        with runtime.on_device(self.device):  # cuDNN seeds the states with a kernel on the handle's device
            cd.call("cudnnDropoutGetStatesSize", h.value, byref(size))
            self.states = memory.alloc(size.value, self.device)
            self.descriptor = cd.DropoutDescriptor()
            self.descriptor.set(h, rate, self.states.ptr, size.value, self.seed)

    def use(self, rate: float) -> cd.DropoutDescriptor:
        """The descriptor with ``rate`` (re-bound without re-seeding when the rate changes)."""
        _check_rate(rate)
        if float(rate) != self.rate:
            self.descriptor.restore(handle(self.device), rate, self.states.ptr, self.states.nbytes, self.seed)
            self.rate = float(rate)
        return self.descriptor


def _check_rate(rate: float) -> None:
    if not isinstance(rate, numbers.Real):
        raise TypeError(f"dropout rate must be a real number, got {rate!r} ({type(rate).__name__})")
    if not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")


_native.resource("cudnn_dropout_states")(lambda libraries: {})  # (device, seed) -> DropoutState


def dropout_state(seed: int = 0, device: int | None = None) -> DropoutState:
    """The shared dropout generator of (device, seed), created on first use."""
    seed = _checks.count(seed, "seed", maximum=2**64 - 1)
    device = runtime.get_device() if device is None else _checks.count(device, "device")
    states = _native.current.cudnn_dropout_states
    state = states.get((device, seed))
    if state is None:
        state = states[(device, seed)] = DropoutState(seed, device)
    return state


@on_arrays_device
def dropout_forward(x, rate: float, *, seed: int = 0, state: DropoutState | None = None, out=None):
    """Zero each element with probability ``rate`` and scale the rest by 1/(1-rate); returns (y, reserve).

    ``reserve`` (a uint8 device array) records the mask for :func:`dropout_backward`.
    """
    _check_same("dropout_forward", x)
    state = state or dropout_state(seed, x.device)
    desc = state.use(rate)
    key = _desc_key(x, _as_4d(x))
    xd = tensor_descriptor(*key)
    reserve = _array.empty((cd.reserve_space_size(xd),), np.uint8, device=x.device)
    y = _out(out, x.shape, x, "dropout_forward")
    cd.call("cudnnDropoutForward", handle(x.device).value, desc, xd, _ptr(x), _tensor(y, _as_4d(y)), _ptr(y),
            _ptr(reserve), reserve.nbytes)
    return y, reserve


@on_arrays_device
def dropout_backward(dy, reserve, rate: float, *, seed: int = 0, state: DropoutState | None = None, out=None):
    """dx = dy * mask / (1 - rate), the mask read from the forward call's ``reserve``."""
    _check_same("dropout_backward", dy)
    _device_array(reserve, "dropout_backward reserve")
    state = state or dropout_state(seed, dy.device)
    desc = state.use(rate)
    dyd = _tensor(dy, _as_4d(dy))
    if reserve.nbytes < cd.reserve_space_size(dyd):
        raise ValueError(f"dropout reserve of {reserve.nbytes} bytes is too small for dy {dy.shape}")
    dx = _out(out, dy.shape, dy, "dropout_backward")
    cd.call("cudnnDropoutBackward", handle(dy.device).value, desc, dyd, _ptr(dy), _tensor(dx, _as_4d(dx)), _ptr(dx),
            _ptr(reserve), reserve.nbytes)
    return dx


# ----------------------------------------------------------------------------------------------- tensor ops
def _broadcast_desc(a, ndim: int) -> cd.TensorDescriptor:
    """``a`` as a tensor of ``ndim`` (at least 4) dimensions, aligned to the right as NumPy broadcasting does."""
    shape, strides, dt = _desc_key(a)
    lead = ndim - a.ndim
    shape, strides = (1,) * lead + shape, (max(a.size, 1),) * lead + strides
    pad = max(0, 4 - len(shape))
    return tensor_descriptor(shape + (1,) * pad, strides + (1,) * pad, dt)


def _pad4(shape) -> tuple:
    return tuple(shape) + (1,) * max(0, 4 - len(shape))


@functools.lru_cache(maxsize=1024)
def _broadcasts(a_shape: tuple, c_shape: tuple) -> bool:
    """Whether an array of ``a_shape`` broadcasts onto ``c_shape`` (NumPy's rule, aligned to the right)."""
    return len(a_shape) <= len(c_shape) and all(n in (1, m) for n, m in zip(reversed(a_shape), reversed(c_shape)))


@on_arrays_device
def add_tensor(a, c, alpha: float = 1.0, beta: float = 1.0):
    """c = alpha * a + beta * c in place, ``a`` broadcast over ``c`` (e.g. a (1, C, 1, 1) bias); returns c."""
    _check_same("add_tensor", a, c)
    if not _broadcasts(a.shape, c.shape):
        raise ValueError(f"add_tensor: {a.shape} does not broadcast onto {c.shape}")
    al, be = _scalar(c.dtype, alpha), _scalar(c.dtype, beta)
    cd.call("cudnnAddTensor", handle(c.device).value, byref(al), _broadcast_desc(a, c.ndim), _ptr(a), byref(be),
            _tensor(c, _as_4d(c)), _ptr(c))
    return c


OP_TENSOR_OPS = {"add": cd.OpTensorOp.ADD, "mul": cd.OpTensorOp.MUL, "min": cd.OpTensorOp.MIN,
                 "max": cd.OpTensorOp.MAX, "sqrt": cd.OpTensorOp.SQRT, "not": cd.OpTensorOp.NOT}


@functools.lru_cache(maxsize=64)
def _op_descriptor(op, compute) -> cd.OpTensorDescriptor:
    return cd.OpTensorDescriptor(op, compute)


@on_arrays_device
def op_tensor(op: str, a, b, *, alpha1: float = 1.0, alpha2: float = 1.0, beta: float = 0.0, out=None):
    """out = op(alpha1 * a, alpha2 * b) + beta * out; ``b`` may broadcast over ``a`` (cudnnOpTensor)."""
    if op not in OP_TENSOR_OPS:
        raise ValueError(f"op must be one of {sorted(OP_TENSOR_OPS)}, got {op!r}")
    _check_same("op_tensor", a, b)
    c = _out(out, a.shape, a, "op_tensor")
    desc = _op_descriptor(OP_TENSOR_OPS[op], compute_type(a.dtype))
    s1, s2, s3 = (_scalar(a.dtype, v) for v in (alpha1, alpha2, beta))
    cd.call("cudnnOpTensor", handle(a.device).value, desc, byref(s1), _tensor(a, _as_4d(a)), _ptr(a), byref(s2),
            _broadcast_desc(b, a.ndim), _ptr(b), byref(s3), _tensor(c, _as_4d(c)), _ptr(c))
    return c


@on_arrays_device
def scale_tensor(x, alpha: float):
    """x *= alpha in place; returns x."""
    _check_same("scale_tensor", x)
    a = _scalar(x.dtype, alpha)
    cd.call("cudnnScaleTensor", handle(x.device).value, _tensor(x, _as_4d(x)), _ptr(x), byref(a))
    return x


@on_arrays_device
def set_tensor(x, value: float):
    """Every element of x = value, in place; returns x."""
    _check_same("set_tensor", x)
    v = np.array([value], x.dtype)  # cuDNN reads the value in the tensor's own type (half for half data)
    cd.call("cudnnSetTensor", handle(x.device).value, _tensor(x, _as_4d(x)), _ptr(x), c_void_p(v.ctypes.data))
    return x


REDUCE_TENSOR_OPS = {"sum": cd.ReduceTensorOp.ADD, "prod": cd.ReduceTensorOp.MUL, "min": cd.ReduceTensorOp.MIN,
                     "max": cd.ReduceTensorOp.MAX, "amax": cd.ReduceTensorOp.AMAX, "mean": cd.ReduceTensorOp.AVG,
                     "norm1": cd.ReduceTensorOp.NORM1, "norm2": cd.ReduceTensorOp.NORM2}


@functools.lru_cache(maxsize=64)
def _reduce_descriptor(op, compute) -> cd.ReduceTensorDescriptor:
    return cd.ReduceTensorDescriptor(op, compute)


@on_arrays_device
def reduce_tensor(op: str, x, axes):
    """Reduce x over ``axes`` keeping them as size-1 dims (cudnnReduceTensor): sum, prod, min, max, amax, mean,
    norm1, norm2."""
    if op not in REDUCE_TENSOR_OPS:
        raise ValueError(f"op must be one of {sorted(REDUCE_TENSOR_OPS)}, got {op!r}")
    axes = {a % x.ndim for a in _checks.sizes(axes, "axes")}
    shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    c = _empty(shape, x)
    desc = _reduce_descriptor(REDUCE_TENSOR_OPS[op], compute_type(x.dtype))
    xd, cdesc = _tensor(x, _as_4d(x)), _tensor(c, _pad4(shape))
    h = handle(x.device).value
    size = c_size_t()
    cd.call("cudnnGetReductionWorkspaceSize", h, desc, xd, cdesc, byref(size))
    space = memory.alloc(size.value, x.device) if size.value else None
    a, b = _one_zero(x.dtype)
    cd.call("cudnnReduceTensor", h, desc, c_void_p(), 0, _ptr(space), size.value, byref(a), xd, _ptr(x), byref(b),
            cdesc, _ptr(c))
    return c


def clear_caches() -> None:
    """Drop cached descriptors and algorithm choices (handles and dropout states stay)."""
    for cached in (tensor_descriptor, filter_descriptor, convolution_descriptor, pooling_descriptor,
                   activation_descriptor, _bn_descriptor, _op_descriptor, _reduce_descriptor):
        cached.cache_clear()
    _native.current.cudnn_algorithms.clear()
