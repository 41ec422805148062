"""cuDNN on the simulated device: NumPy models of the documented semantics of the calls that need a handle.

The real libcudnn still answers everything that needs no GPU (descriptor create/set/get, output-dimension queries,
the dropout reserve size); :func:`install` routes only the handle-taking calls to :class:`SimulatedCudnn`.  Each
call passes through a real ``ctypes.CFUNCTYPE`` built from pymagma's prototype, so arity and argument types are
converted and checked exactly as for the library.  The models trust nothing but what cuDNN itself would see: shapes,
strides, data types, padding, stride, dilation, groups and modes are read back from the real descriptors; data are
NumPy views on the (host) device pointers with the descriptors' strides; alpha/beta are read through their pointers
as float (half/float data) or double (double data).

Stream order: a model that touches device data is a generator.  Up to its ``yield`` it runs at the call (argument
and descriptor checks, descriptor reads, alpha/beta and other host values, as cuDNN reads them when called); the rest
(the device work) is queued on the stream the handle was given with ``cudnnSetStream`` and runs when the simulated
runtime orders it.  ``cudnnFind*AlgorithmEx``, which returns once it has run the algorithms, first runs the work
queued before it.

Semantics chosen where cuDNN leaves them open (a GPU may differ in these, and only in these):

* ``y = alpha * op(...) + beta * y``; with ``beta == 0`` the output is never read (it may hold NaN).
* Max pooling backward gives each window's gradient to the first maximum of ``x`` in row-major window order.
* Activation backward computes the derivative from ``x`` (``y`` is only checked for its shape).
* Dropout: cuDNN's random stream cannot be reproduced, so the mask comes from NumPy's Philox generator keyed by the
  descriptor's seed; the states buffer holds (seed, number of forward calls) and advances with every forward, the
  reserve space holds the bit-packed mask, and backward scales by the rate of the descriptor it is given.
* ``CUDNN_OP_TENSOR_NOT`` is logical negation (1 where ``alpha1 * A`` is 0, else 0).
* Algorithm queries list every algorithm of the kind as supported, with small made-up workspace sizes.
"""

from __future__ import annotations

import ctypes
import inspect
import math
import threading
from ctypes import POINTER, c_double, c_float, c_int, c_size_t, c_void_p
from dataclasses import dataclass

import numpy as np

from .. import _cudnn as cd
from ..errors import NotSimulatedError

Status = cd.Status
_ip = POINTER(c_int)

#: Descriptor getters pymagma's table lacks, bound here from the real library (no handle needed).
GETTERS = {
    "cudnnGetFilterNdDescriptor": (c_int, (c_void_p, c_int, _ip, _ip, _ip, _ip)),
    "cudnnGetConvolutionNdDescriptor": (c_int, (c_void_p, c_int, _ip, _ip, _ip, _ip, _ip, _ip)),
    "cudnnGetPoolingNdDescriptor": (c_int, (c_void_p, c_int, _ip, _ip, _ip, _ip, _ip, _ip)),
    "cudnnGetActivationDescriptor": (c_int, (c_void_p, _ip, _ip, POINTER(c_double))),
    "cudnnGetActivationDescriptorSwishBeta": (c_int, (c_void_p, POINTER(c_double))),
    "cudnnGetOpTensorDescriptor": (c_int, (c_void_p, _ip, _ip, _ip)),
    "cudnnGetReduceTensorDescriptor": (c_int, (c_void_p, _ip, _ip, _ip, _ip, _ip)),
}

_ALGOS = {"forward": cd.ConvFwdAlgo, "backward_data": cd.ConvBwdDataAlgo, "backward_filter": cd.ConvBwdFilterAlgo}
_STATES_BYTES = 64  # what cudnnDropoutGetStatesSize answers: room for (magic, seed, forward count)
_STATES_MAGIC = 0x53494D44524F5055  # marks a states buffer set up by cudnnSetDropoutDescriptor


#: The convolution calls of each kind, by role (each role has a ``_make_<role>`` model factory).
_CONV_CALLS = {
    kind: {"run": f"cudnnConvolution{name}", "get_v7": f"cudnnGetConvolution{name}Algorithm_v7",
           "find_ex": f"cudnnFindConvolution{name}AlgorithmEx", "workspace": f"cudnnGetConvolution{name}WorkspaceSize",
           "max_count": f"cudnnGetConvolution{name}AlgorithmMaxCount"}
    for kind, name in (("forward", "Forward"), ("backward_data", "BackwardData"), ("backward_filter", "BackwardFilter"))
}


class ModelError(Exception):
    """A call the library would refuse: becomes its status, and the text cudnnGetLastErrorString returns."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


def _status(code: int) -> Status:
    try:
        return Status(int(code))
    except ValueError:
        return Status.INTERNAL_ERROR


def _require(condition: bool, message: str, status: Status = Status.BAD_PARAM) -> None:
    if not condition:
        raise ModelError(status, message)


# ------------------------------------------------------------------------------------------------ memory
def numpy_dtype(data_type: int) -> np.dtype:
    """The NumPy dtype of a cudnnDataType_t (bfloat16 through ml_dtypes)."""
    kind = cd.DataType(data_type)
    if kind == cd.DataType.BFLOAT16:
        from .. import dtypes

        return dtypes.bfloat16()
    names = {cd.DataType.FLOAT: "float32", cd.DataType.DOUBLE: "float64", cd.DataType.HALF: "float16",
             cd.DataType.INT8: "int8", cd.DataType.INT32: "int32", cd.DataType.UINT8: "uint8",
             cd.DataType.INT64: "int64", cd.DataType.BOOLEAN: "bool"}
    return np.dtype(names[kind])


def host_view(ptr: int | None, shape, strides, dtype, what: str) -> np.ndarray:
    """A writable NumPy view of simulated device memory (strides in elements)."""
    _require(bool(ptr), f"{what} is a null pointer", Status.BAD_PARAM_NULL_POINTER)
    dtype = np.dtype(dtype)
    extent = sum((n - 1) * s for n, s in zip(shape, strides)) + 1
    buf = (ctypes.c_char * (extent * dtype.itemsize)).from_address(int(ptr))
    return np.ndarray(tuple(shape), dtype, buffer=buf, strides=tuple(s * dtype.itemsize for s in strides))


def _scalar(ptr: int | None, data_type: int, what: str) -> float:
    """alpha/beta: double for double data, float otherwise (cuDNN's rule for scaling parameters)."""
    _require(bool(ptr), f"{what} is a null pointer", Status.BAD_PARAM_NULL_POINTER)
    kind = c_double if data_type == cd.DataType.DOUBLE else c_float
    return float(kind.from_address(int(ptr)).value)


def _compute(data_type: int) -> np.dtype:
    return np.dtype(np.float64 if data_type == cd.DataType.DOUBLE else np.float32)


def _blend(out: np.ndarray, value: np.ndarray, alpha: float, beta: float) -> None:
    """out = alpha * value + beta * out; out is not read when beta is 0."""
    result = alpha * value if alpha != 1 else value
    if beta != 0:
        result = result + beta * out.astype(value.dtype)
    out[...] = result


# ----------------------------------------------------------------------------------------------- descriptors
@dataclass(frozen=True)
class Tensor:
    data_type: int
    shape: tuple
    strides: tuple

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.data_type)

    @property
    def compute(self) -> np.dtype:
        return _compute(self.data_type)

    def view(self, ptr, what: str) -> np.ndarray:
        return host_view(ptr, self.shape, self.strides, self.dtype, what)

    def read(self, ptr, what: str) -> np.ndarray:
        """The data as a fresh array in the compute type."""
        return self.view(ptr, what).astype(self.compute)


@dataclass(frozen=True)
class Convolution:
    pads: tuple
    strides: tuple
    dilations: tuple
    mode: int
    compute_type: int
    groups: int


@dataclass(frozen=True)
class Pooling:
    mode: int
    nan: int
    window: tuple
    pads: tuple
    strides: tuple


@dataclass(frozen=True)
class DropoutConfig:
    rate: float
    states: int
    states_bytes: int
    seed: int


class Descriptors:
    """Reads descriptors back from the real libcudnn."""

    def __init__(self, real_bind, streams=None):
        self._real_bind = real_bind
        self.streams = streams  #: the simulated runtime whose streams the device work is queued on
        self._getters: dict[str, object] = {}

    def call(self, name: str, *args) -> None:
        fn = self._getters.get(name)
        if fn is None:
            if name in GETTERS:
                restype, argtypes = GETTERS[name]
                fn = ctypes.CFUNCTYPE(restype, *argtypes)((name, cd.lib.cdll))
            else:
                fn = self._real_bind(name)
            self._getters[name] = fn
        status = fn(*args)
        _require(status == 0, f"{name} refused the descriptor ({cd.status_name(status)})", _status(status))

    def tensor(self, desc, what: str) -> Tensor:
        _require(bool(desc), f"{what} descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        dtype, nd = c_int(), c_int()
        dims, strides = (c_int * 8)(), (c_int * 8)()
        self.call("cudnnGetTensorNdDescriptor", c_void_p(desc), 8, ctypes.byref(dtype), ctypes.byref(nd), dims,
                  strides)
        _require(nd.value > 0, f"{what} descriptor was never set", Status.BAD_PARAM_NOT_FINALIZED)
        return Tensor(dtype.value, tuple(dims[: nd.value]), tuple(strides[: nd.value]))

    def filter(self, desc) -> Tensor:
        _require(bool(desc), "filter descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        dtype, fmt, nd, dims = c_int(), c_int(), c_int(), (c_int * 8)()
        self.call("cudnnGetFilterNdDescriptor", c_void_p(desc), 8, ctypes.byref(dtype), ctypes.byref(fmt),
                  ctypes.byref(nd), dims)
        _require(nd.value > 0, "filter descriptor was never set", Status.BAD_PARAM_NOT_FINALIZED)
        _require(fmt.value == cd.TensorFormat.NCHW, f"filter format {fmt.value}: only NCHW filters are simulated",
                 Status.NOT_SUPPORTED)
        shape = tuple(dims[: nd.value])
        return Tensor(dtype.value, shape, cd.contiguous_strides(shape))

    def convolution(self, desc) -> Convolution:
        _require(bool(desc), "convolution descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        n, mode, compute, groups = c_int(), c_int(), c_int(), c_int()
        pads, strides, dilations = (c_int * 6)(), (c_int * 6)(), (c_int * 6)()
        self.call("cudnnGetConvolutionNdDescriptor", c_void_p(desc), 6, ctypes.byref(n), pads, strides, dilations,
                  ctypes.byref(mode), ctypes.byref(compute))
        self.call("cudnnGetConvolutionGroupCount", c_void_p(desc), ctypes.byref(groups))
        k = n.value
        return Convolution(tuple(pads[:k]), tuple(strides[:k]), tuple(dilations[:k]), mode.value, compute.value,
                           groups.value)

    def pooling(self, desc) -> Pooling:
        _require(bool(desc), "pooling descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        mode, nan, n = c_int(), c_int(), c_int()
        window, pads, strides = (c_int * 6)(), (c_int * 6)(), (c_int * 6)()
        self.call("cudnnGetPoolingNdDescriptor", c_void_p(desc), 6, ctypes.byref(mode), ctypes.byref(nan),
                  ctypes.byref(n), window, pads, strides)
        k = n.value
        return Pooling(mode.value, nan.value, tuple(window[:k]), tuple(pads[:k]), tuple(strides[:k]))

    def activation(self, desc) -> tuple[int, int, float]:
        """(mode, nan propagation, coef) where coef is swish's beta for SWISH."""
        _require(bool(desc), "activation descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        mode, nan, coef = c_int(), c_int(), c_double()
        self.call("cudnnGetActivationDescriptor", c_void_p(desc), ctypes.byref(mode), ctypes.byref(nan),
                  ctypes.byref(coef))
        if mode.value == cd.ActivationMode.SWISH:
            self.call("cudnnGetActivationDescriptorSwishBeta", c_void_p(desc), ctypes.byref(coef))
        return mode.value, nan.value, coef.value

    def op_tensor(self, desc) -> tuple[int, int, int]:
        _require(bool(desc), "op-tensor descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        op, compute, nan = c_int(), c_int(), c_int()
        self.call("cudnnGetOpTensorDescriptor", c_void_p(desc), ctypes.byref(op), ctypes.byref(compute),
                  ctypes.byref(nan))
        return op.value, compute.value, nan.value

    def reduce_tensor(self, desc) -> tuple[int, int, int, int, int]:
        """(op, compute type, nan propagation, indices mode, indices type)."""
        _require(bool(desc), "reduce-tensor descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        vals = [c_int() for _ in range(5)]
        self.call("cudnnGetReduceTensorDescriptor", c_void_p(desc), *(ctypes.byref(v) for v in vals))
        return tuple(v.value for v in vals)


# ------------------------------------------------------------------------------------------ NumPy kernels
def _windows(xp: np.ndarray, window, strides, dilations, out) -> np.ndarray:
    """A read-only (N, C, *out, *window) view of the padded input ``xp`` (N, C, *spatial)."""
    s = xp.strides
    sd = len(window)
    shape = xp.shape[:2] + tuple(out) + tuple(window)
    steps = s[:2] + tuple(s[2 + i] * strides[i] for i in range(sd)) + tuple(s[2 + i] * dilations[i] for i in range(sd))
    return np.lib.stride_tricks.as_strided(xp, shape, steps, writeable=False)


def _pad(x: np.ndarray, pads, value=0.0) -> np.ndarray:
    return np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads], constant_values=value) if any(pads) else x


def _scatter_windows(dxp: np.ndarray, cols: np.ndarray, strides, dilations, out) -> None:
    """dxp (N, C, *padded) += each window offset's slice of cols (N, C, *out, *window): col2im, one slice per
    window offset."""
    sd = len(strides)
    for idx in np.ndindex(*cols.shape[2 + sd:]):
        sl = tuple(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in zip(idx, dilations, strides, out))
        dxp[(slice(None), slice(None)) + sl] += cols[(Ellipsis,) + idx]


@dataclass(frozen=True)
class ConvGeometry:
    x: Tensor
    w: Tensor
    y: Tensor
    conv: Convolution

    @property
    def spatial(self) -> int:
        return len(self.x.shape) - 2

    @property
    def out(self) -> tuple:
        return self.y.shape[2:]

    @property
    def groups(self) -> int:
        return self.conv.groups

    def columns(self, x: np.ndarray) -> np.ndarray:
        """im2col: (G, N * prod(out), C/G * prod(window)) of the padded x."""
        sd, g = self.spatial, self.groups
        n, c = x.shape[:2]
        win = _windows(_pad(x, self.conv.pads), self.w.shape[2:], self.conv.strides, self.conv.dilations, self.out)
        win = win.reshape((n, g, c // g) + win.shape[2:])
        order = (1, 0) + tuple(range(3, 3 + sd)) + (2,) + tuple(range(3 + sd, 3 + 2 * sd))
        return win.transpose(order).reshape(g, n * math.prod(self.out), -1)

    def weights(self, w: np.ndarray) -> np.ndarray:
        """(G, K/G, C/G * prod(window)), flipped for true convolution."""
        if self.conv.mode == cd.ConvolutionMode.CONVOLUTION:
            w = np.flip(w, axis=tuple(range(2, w.ndim)))
        return w.reshape(self.groups, w.shape[0] // self.groups, -1)

    def gradient_rows(self, dy: np.ndarray) -> np.ndarray:
        """dy (N, K, *out) as (G, N * prod(out), K/G)."""
        sd, g = self.spatial, self.groups
        n, k = dy.shape[:2]
        d = dy.reshape((n, g, k // g) + self.out)
        return d.transpose((1, 0) + tuple(range(3, 3 + sd)) + (2,)).reshape(g, -1, k // g)

    def forward(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        sd, n = self.spatial, x.shape[0]
        y = self.columns(x) @ self.weights(w).transpose(0, 2, 1)  # (G, N*P, K/G)
        y = y.reshape((self.groups, n) + self.out + (-1,))
        return y.transpose((1, 0, 2 + sd) + tuple(range(2, 2 + sd))).reshape(self.y.shape)

    def backward_data(self, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        sd, g = self.spatial, self.groups
        n, c = self.x.shape[:2]
        cols = self.gradient_rows(dy) @ self.weights(w)  # (G, N*P, C/G * window)
        cols = cols.reshape((g, n) + self.out + (c // g,) + self.w.shape[2:])
        cols = cols.transpose((1, 0, 2 + sd) + tuple(range(2, 2 + sd)) + tuple(range(3 + sd, 3 + 2 * sd)))
        cols = cols.reshape((n, c) + self.out + self.w.shape[2:])
        pads = self.conv.pads
        dxp = np.zeros((n, c) + tuple(s + 2 * p for s, p in zip(self.x.shape[2:], pads)), dy.dtype)
        _scatter_windows(dxp, cols, self.conv.strides, self.conv.dilations, self.out)
        return dxp[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(pads, self.x.shape[2:]))]

    def backward_filter(self, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
        dw = np.einsum("gpk,gpc->gkc", self.gradient_rows(dy), self.columns(x), optimize=True)  # (G, K/G, C/G*win)
        dw = dw.reshape(self.w.shape)
        if self.conv.mode == cd.ConvolutionMode.CONVOLUTION:
            dw = np.flip(dw, axis=tuple(range(2, dw.ndim)))
        return dw


def _pool_counts(geom: Pooling, spatial) -> np.ndarray:
    """Per output position, the number of window elements inside the unpadded input (separable per dimension)."""
    counts = np.ones((), np.int64)
    for size, k, p, s in zip(spatial, geom.window, geom.pads, geom.strides):
        out = (size + 2 * p - k) // s + 1
        start = np.arange(out) * s - p
        per_dim = np.minimum(start + k, size) - np.maximum(start, 0)
        counts = np.multiply.outer(counts, per_dim)
    return counts


def _activation(mode: int, coef: float, x: np.ndarray) -> np.ndarray:
    m = cd.ActivationMode
    with np.errstate(over="ignore"):
        if mode == m.SIGMOID:
            return 1 / (1 + np.exp(-x))
        if mode == m.RELU:
            return np.maximum(x, 0)
        if mode == m.TANH:
            return np.tanh(x)
        if mode == m.CLIPPED_RELU:
            return np.minimum(np.maximum(x, 0), coef)
        if mode == m.ELU:
            return np.where(x > 0, x, coef * np.expm1(np.minimum(x, 0)))
        if mode == m.SWISH:
            return x / (1 + np.exp(-coef * x))
    raise ModelError(Status.NOT_SUPPORTED, f"activation mode {mode} is not supported by cudnnActivationForward/"
                                           "Backward (IDENTITY works only in fused convolutions)")


def _activation_grad(mode: int, coef: float, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    m = cd.ActivationMode
    with np.errstate(over="ignore"):
        if mode == m.SIGMOID:
            s = 1 / (1 + np.exp(-x))
            return dy * s * (1 - s)
        if mode == m.RELU:
            return dy * (x > 0)
        if mode == m.TANH:
            return dy * (1 - np.tanh(x) ** 2)
        if mode == m.CLIPPED_RELU:
            return dy * ((x > 0) & (x < coef))
        if mode == m.ELU:
            return np.where(x > 0, dy, dy * coef * np.exp(np.minimum(x, 0)))
        if mode == m.SWISH:
            s = 1 / (1 + np.exp(-coef * x))
            return dy * (s + coef * x * s * (1 - s))
    return _activation(mode, coef, x)  # raises NOT_SUPPORTED


def _softmax_axes(mode: int, ndim: int) -> tuple:
    _require(mode in (cd.SoftmaxMode.INSTANCE, cd.SoftmaxMode.CHANNEL), f"softmax mode {mode} is not a mode")
    return tuple(range(1, ndim)) if mode == cd.SoftmaxMode.INSTANCE else (1,)


def _broadcasts(small: Tensor, big: Tensor, what: str) -> None:
    _require(len(small.shape) == len(big.shape) and all(s in (1, b) for s, b in zip(small.shape, big.shape)),
             f"{what}: {small.shape} does not broadcast onto {big.shape} (each dimension must be 1 or equal)")


# --------------------------------------------------------------------------------------------------- model
def is_host_call(name: str) -> bool:
    """Whether a cuDNN function runs on the host alone (no handle argument: descriptors, sizes, versions, texts),
    so that the real libcudnn answers it on the simulator too."""
    return name in HOST_CALLS


_KINDS = ("Tensor", "Filter", "Convolution", "Pooling", "Activation", "Dropout", "OpTensor", "ReduceTensor")
#: The cuDNN functions that take no handle and touch no device memory: the real libcudnn runs them here too.
#: Every other function pymagma declares is modelled, or NotSimulatedError.
HOST_CALLS = frozenset(
    [f"cudnn{verb}{kind}Descriptor" for verb in ("Create", "Destroy") for kind in _KINDS]
    + [f"cudnnSet{name}" for name in (
        "ActivationDescriptor", "ActivationDescriptorSwishBeta", "Convolution2dDescriptor", "ConvolutionGroupCount",
        "ConvolutionMathType", "ConvolutionNdDescriptor", "Filter4dDescriptor", "FilterNdDescriptor",
        "OpTensorDescriptor", "Pooling2dDescriptor", "PoolingNdDescriptor", "ReduceTensorDescriptor",
        "Tensor4dDescriptor", "Tensor4dDescriptorEx", "TensorNdDescriptor")]
    + [f"cudnnGet{name}" for name in (
        "Convolution2dForwardOutputDim", "ConvolutionGroupCount", "ConvolutionMathType",
        "ConvolutionNdForwardOutputDim", "CudartVersion", "ErrorString", "Filter4dDescriptor", "LastErrorString",
        "Pooling2dForwardOutputDim", "PoolingNdForwardOutputDim", "Tensor4dDescriptor", "TensorNdDescriptor",
        "TensorSizeInBytes", "Version")]
    + ["cudnnDeriveBNTensorDescriptor", "cudnnDropoutGetReserveSpaceSize"])


class SimulatedCudnn:
    """The simulated cuDNN: the calls that touch the device (they take a handle) as NumPy models; the host-side calls
    (descriptors, sizes, versions, error texts) run in the real libcudnn, which works without a GPU.  Stands in for
    the :class:`~pymagma._ffi.NativeLibrary` of ``pymagma._cudnn.library()``."""

    def __init__(self, real=None, streams=None):
        self.real = cd.lib if real is None else real
        real_bind = self._real_bind = self.real.bind
        self.streams = streams  #: the simulated runtime whose streams the device work is queued on
        self.desc = Descriptors(real_bind)
        self.calls: list[str] = []
        self.handles: dict[int, int] = {}  # handle -> stream
        self.dropouts: dict[int, DropoutConfig] = {}  # dropout descriptor -> its settings
        self._handle_memory: dict[int, ctypes.Array] = {}
        self._bound: dict[str, object] = {}
        self._local = threading.local()
        self._models = {name[len("_model_"):]: getattr(self, name) for name in dir(self) if name.startswith("_model_")}
        for kind, names in _CONV_CALLS.items():
            for role, name in names.items():
                self._models[name] = getattr(self, f"_make_{role}")(kind)

    # ---------------------------------------------------------------------------------------- plumbing
    @property
    def names(self) -> frozenset[str]:
        """The cuDNN functions this simulator answers instead of the library."""
        return frozenset(self._models)

    def bind(self, name: str):
        """The callable for ``name``: its model, the real library's function for a host-side call, or
        :class:`NotSimulatedError` for a call that would touch the device without a model."""
        call = self._bound.get(name)
        if call is None:
            call = self._bound[name] = self._binding(name)
        return call

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.bind(name)

    @property
    def cdll(self):
        return self.real.cdll

    @property
    def path(self) -> str:
        return self.real.path

    def has(self, name: str) -> bool:
        return name in self._models or (is_host_call(name) and self.real.has(name))

    def missing(self) -> list[str]:
        return sorted(n for n in cd.PROTOTYPES if not self.has(n))

    def _binding(self, name: str):
        if name not in cd.PROTOTYPES:
            raise AttributeError(f"cuDNN has no prototype for {name!r} in pymagma's tables")
        if name == "cudnnGetLastErrorString":
            return self._last_error_string
        if name == "cudnnDestroyDropoutDescriptor":
            return self._destroy_dropout_descriptor(self._real_bind(name))
        model = self._models.get(name)
        if model is None:
            if not is_host_call(name):
                raise NotSimulatedError(f"{name} is not simulated: it takes a cuDNN handle (device work) and "
                                        "pymagma.simulator.cudnn has no model of it")
            return self._real_bind(name)
        restype, argtypes = cd.PROTOTYPES[name]
        prototype = ctypes.CFUNCTYPE(restype, *argtypes)
        queued = inspect.isgeneratorfunction(model)  # checks, then yields: the device work follows the yield
        at = list(inspect.signature(model).parameters).index("handle") if queued else None

        def native(*converted):
            try:
                with np.errstate(all="ignore"):  # a GPU computes NaN/inf silently
                    work = model(*converted)
                    if queued and next(work, True) is None:
                        self._enqueue(converted[at], work)
            except ModelError as exc:
                self._local.error = f"{name}: {exc}"
                return int(exc.status)
            except BaseException as exc:  # ctypes would only print it: keep it for the caller
                self._local.failure = exc
                return int(Status.INTERNAL_ERROR)
            return 0

        callback = prototype(native)

        def call(*args):
            self.calls.append(name)
            self._local.failure = None
            status = callback(*args)
            failure, self._local.failure = self._local.failure, None
            if failure is not None:
                raise failure
            return status

        call.callback = callback  # alive as long as the wrapper
        return call

    def _enqueue(self, handle, work) -> None:
        """Run the rest of a model (its device work, after its ``yield``) in the order of the handle's stream."""
        def run():
            with np.errstate(all="ignore"):
                next(work, None)

        stream = self.handles.get(int(handle), 0)
        if self.streams is None:
            run()
        else:
            self.streams.submit(stream, run)

    def _sync(self, handle) -> None:
        """A call that returns once its device work is done (cudnnFind*AlgorithmEx): the handle's stream first."""
        if self.streams is not None:
            self.streams.flush(self.handles.get(int(handle), 0))

    def _last_error_string(self, buf, size) -> None:
        message = getattr(self._local, "error", "")
        if not message:
            self._real_bind("cudnnGetLastErrorString")(buf, size)
            return
        self._local.error = ""
        raw = message.encode()[: max(int(size) - 1, 0)] + b"\0"
        ctypes.memmove(buf, raw, min(len(raw), int(size)))

    def _destroy_dropout_descriptor(self, real):
        def destroy(desc):
            self.dropouts.pop(getattr(desc, "value", desc) or 0, None)
            return real(desc)

        return destroy

    def _handle(self, handle) -> None:
        _require(bool(handle) and int(handle) in self.handles, f"handle {handle} was not made by cudnnCreate",
                 Status.BAD_PARAM)

    # -------------------------------------------------------------------------------------- the handle
    def _model_cudnnCreate(self, out) -> None:
        _require(bool(out), "handle pointer is null", Status.BAD_PARAM_NULL_POINTER)
        memory = ctypes.create_string_buffer(8)
        handle = ctypes.addressof(memory)
        self._handle_memory[handle], self.handles[handle] = memory, 0
        out[0] = handle

    def _model_cudnnDestroy(self, handle) -> None:
        self._handle(handle)
        del self.handles[int(handle)], self._handle_memory[int(handle)]

    def _model_cudnnSetStream(self, handle, stream) -> None:
        self._handle(handle)
        self.handles[int(handle)] = int(stream or 0)

    def _model_cudnnGetStream(self, handle, out) -> None:
        self._handle(handle)
        out[0] = self.handles[int(handle)] or None

    # ------------------------------------------------------------------------------------- convolution
    def _geometry(self, x_desc, w_desc, conv_desc, y_desc) -> ConvGeometry:
        x, w = self.desc.tensor(x_desc, "x"), self.desc.filter(w_desc)
        conv, y = self.desc.convolution(conv_desc), self.desc.tensor(y_desc, "y")
        _require(x.data_type == w.data_type == y.data_type,
                 f"x, w and y data types differ ({x.data_type}, {w.data_type}, {y.data_type})")
        sd = len(x.shape) - 2
        _require(len(w.shape) == sd + 2 and len(conv.pads) == sd,
                 f"x {x.shape}, w {w.shape} and a {len(conv.pads)}-D convolution do not agree")
        (n, c), (k, cg), g = x.shape[:2], w.shape[:2], conv.groups
        _require(c == cg * g and k % g == 0, f"groups={g}: x has {c} channels, w {w.shape} needs {cg}*{g} and "
                                             f"{k} filters divisible by the groups")
        out = []
        for size, kk, p, s, d in zip(x.shape[2:], w.shape[2:], conv.pads, conv.strides, conv.dilations):
            out.append((size + 2 * p - (d * (kk - 1) + 1)) // s + 1)
        _require(min(out) > 0 and y.shape == (n, k, *out),
                 f"y has shape {y.shape}; x {x.shape}, w {w.shape} and the convolution give {(n, k, *out)}")
        return ConvGeometry(x, w, y, conv)

    def _order(self, kind: str, d0, d1, conv, d3):
        """(x, w, conv, y) descriptors from a call's argument order for ``kind``."""
        if kind == "forward":
            return d0, d1, conv, d3
        if kind == "backward_data":
            return d3, d0, conv, d1
        return d0, d3, conv, d1

    @staticmethod
    def workspace_size(kind: str, algo: int) -> int:
        """Bytes of workspace the simulated ``algo`` needs: none for algorithm 0, a little for the others."""
        return 256 * int(algo)

    def _algorithm_list(self, kind: str) -> list[int]:
        algos = [int(a) for a in _ALGOS[kind]]
        return [1, 0] + [a for a in algos if a not in (0, 1)]  # one with a workspace first: exercises the caller

    def _fill_perf(self, kind: str, conv_desc, requested: int, returned, perf, algos, timed: bool) -> None:
        """Write cudnnConvolution*AlgoPerf_t results: every listed algorithm succeeds (timed ones get made-up,
        increasing times; heuristics report -1)."""
        _require(requested > 0, f"requestedAlgoCount must be positive, got {requested}")
        math_type = c_int()
        self.desc.call("cudnnGetConvolutionMathType", c_void_p(conv_desc), ctypes.byref(math_type))
        algos = algos[:requested]
        for i, algo in enumerate(algos):
            perf[i].algo, perf[i].status, perf[i].memory = algo, 0, self.workspace_size(kind, algo)
            perf[i].time = 0.01 * (i + 1) if timed else -1.0
            perf[i].determinism, perf[i].mathType = int(cd.Determinism.DETERMINISTIC), math_type.value
        returned[0] = len(algos)

    def _run_conv(self, kind: str, geom: ConvGeometry, ptrs, alpha: float, beta: float) -> None:
        """ptrs: (x, w, y) data pointers; writes the kind's output (y, x or w)."""
        xp, wp, yp = ptrs
        ct = _compute(geom.conv.compute_type)
        if kind == "forward":
            value = geom.forward(geom.x.view(xp, "x").astype(ct), geom.w.view(wp, "w").astype(ct))
            _blend(geom.y.view(yp, "y"), value, alpha, beta)
        elif kind == "backward_data":
            value = geom.backward_data(geom.y.view(yp, "dy").astype(ct), geom.w.view(wp, "w").astype(ct))
            _blend(geom.x.view(xp, "dx"), value, alpha, beta)
        else:
            value = geom.backward_filter(geom.x.view(xp, "x").astype(ct), geom.y.view(yp, "dy").astype(ct))
            _blend(geom.w.view(wp, "dw"), value, alpha, beta)

    @staticmethod
    def _views(geom: ConvGeometry, ptrs) -> None:
        """Refuse null data pointers at the call (before the work is queued)."""
        for t, p, what in zip((geom.x, geom.w, geom.y), ptrs, "xwy"):
            t.view(p, what)

    @staticmethod
    def _data_ptrs(kind: str, p0, p1, p3):
        """(x, w, y) pointers from a call's argument order."""
        return {"forward": (p0, p1, p3), "backward_data": (p3, p0, p1), "backward_filter": (p0, p3, p1)}[kind]

    def _make_run(self, kind: str):
        def run(handle, alpha, d0, p0, d1, p1, conv, algo, workspace, ws_size, beta, d3, p3):
            self._handle(handle)
            geom = self._geometry(*self._order(kind, d0, d1, conv, d3))
            _require(algo in {int(a) for a in _ALGOS[kind]}, f"{algo} is not a {kind} convolution algorithm")
            need = self.workspace_size(kind, algo)
            _require(ws_size >= need and (bool(workspace) or need == 0),
                     f"algorithm {algo} needs {need} bytes of workspace, got {ws_size} at {workspace}")
            dt = geom.x.data_type
            ptrs, scale = self._data_ptrs(kind, p0, p1, p3), (_scalar(alpha, dt, "alpha"), _scalar(beta, dt, "beta"))
            self._views(geom, ptrs)
            yield
            self._run_conv(kind, geom, ptrs, *scale)

        return run

    def _make_max_count(self, kind: str):
        def max_count(handle, out):
            self._handle(handle)
            out[0] = len(_ALGOS[kind])

        return max_count

    def _make_get_v7(self, kind: str):
        def get(handle, d0, d1, conv, d3, requested, returned, perf):
            self._handle(handle)
            self._geometry(*self._order(kind, d0, d1, conv, d3))
            self._fill_perf(kind, conv, requested, returned, perf, self._algorithm_list(kind), timed=False)

        return get

    def _make_find_ex(self, kind: str):
        def find(handle, d0, p0, d1, p1, conv, d3, p3, requested, returned, perf, workspace, ws_size):
            self._handle(handle)
            geom = self._geometry(*self._order(kind, d0, d1, conv, d3))
            fits = [a for a in self._algorithm_list(kind)
                    if self.workspace_size(kind, a) <= (ws_size if workspace else 0)]
            self._fill_perf(kind, conv, requested, returned, perf, fits, timed=True)
            self._sync(handle)  # Find*Ex runs the algorithms before it returns
            self._run_conv(kind, geom, self._data_ptrs(kind, p0, p1, p3), 1.0, 0.0)  # Find* writes the output

        return find

    def _make_workspace(self, kind: str):
        def size(handle, d0, d1, conv, d3, algo, out):
            self._handle(handle)
            self._geometry(*self._order(kind, d0, d1, conv, d3))
            _require(algo in {int(a) for a in _ALGOS[kind]}, f"{algo} is not a {kind} convolution algorithm")
            out[0] = self.workspace_size(kind, algo)

        return size

    def _model_cudnnConvolutionBackwardBias(self, handle, alpha, dy_desc, dy, beta, db_desc, db) -> None:
        self._handle(handle)
        dyt, dbt = self.desc.tensor(dy_desc, "dy"), self.desc.tensor(db_desc, "db")
        _require(len(dyt.shape) == len(dbt.shape) and dbt.shape[1] == dyt.shape[1]
                 and all(n == 1 for i, n in enumerate(dbt.shape) if i != 1),
                 f"db {dbt.shape} must be (1, K, 1, ...) for dy {dyt.shape}")
        axes = tuple(i for i in range(len(dyt.shape)) if i != 1)
        dt = dyt.data_type
        src, out, a, b = dyt.view(dy, "dy"), dbt.view(db, "db"), _scalar(alpha, dt, "alpha"), _scalar(beta, dt, "beta")
        yield
        _blend(out, src.astype(dyt.compute).sum(axis=axes, keepdims=True), a, b)

    # ---------------------------------------------------------------------------------------- pooling
    def _pool_setup(self, pool_desc, x_desc, y_desc) -> tuple[Pooling, Tensor, Tensor]:
        pool = self.desc.pooling(pool_desc)
        x, y = self.desc.tensor(x_desc, "x"), self.desc.tensor(y_desc, "y")
        _require(pool.mode in {int(m) for m in cd.PoolingMode}, f"pooling mode {pool.mode} is not a mode")
        _require(len(x.shape) == len(pool.window) + 2 and x.data_type == y.data_type,
                 f"x {x.shape} does not fit a {len(pool.window)}-D pooling, or x and y types differ")
        out = tuple((s + 2 * p - k) // st + 1 for s, k, p, st in zip(x.shape[2:], pool.window, pool.pads,
                                                                        pool.strides))
        _require(min(out) > 0 and y.shape == x.shape[:2] + out,
                 f"y has shape {y.shape}; x {x.shape} pooled gives {x.shape[:2] + out}")
        return pool, x, y

    @staticmethod
    def _is_max(pool: Pooling) -> bool:
        return pool.mode in (cd.PoolingMode.MAX, cd.PoolingMode.MAX_DETERMINISTIC)

    def _model_cudnnPoolingForward(self, handle, pool_desc, alpha, x_desc, x, beta, y_desc, y) -> None:
        self._handle(handle)
        pool, xt, yt = self._pool_setup(pool_desc, x_desc, y_desc)
        dt = xt.data_type
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), _scalar(alpha, dt, "alpha"), _scalar(beta, dt, "beta")
        yield
        data = src.astype(xt.compute)
        sd, out = len(pool.window), yt.shape[2:]
        window_axes = tuple(range(2 + sd, 2 + 2 * sd))
        if self._is_max(pool):
            if pool.nan == cd.NanPropagation.NOT_PROPAGATE:
                data = np.where(np.isnan(data), -np.inf, data)
            win = _windows(_pad(data, pool.pads, -np.inf), pool.window, pool.strides, (1,) * sd, out)
            value = win.max(axis=window_axes)
        else:
            win = _windows(_pad(data, pool.pads), pool.window, pool.strides, (1,) * sd, out)
            value = win.sum(axis=window_axes) / self._pool_divisor(pool, xt)
        _blend(dst, value, a, b)

    @staticmethod
    def _pool_divisor(pool: Pooling, x: Tensor):
        if pool.mode == cd.PoolingMode.AVERAGE_COUNT_EXCLUDE_PADDING:
            return _pool_counts(pool, x.shape[2:])
        return math.prod(pool.window)

    def _model_cudnnPoolingBackward(self, handle, pool_desc, alpha, y_desc, y, dy_desc, dy, x_desc, x, beta,
                                    dx_desc, dx) -> None:
        self._handle(handle)
        pool, xt, yt = self._pool_setup(pool_desc, x_desc, y_desc)
        dyt, dxt = self.desc.tensor(dy_desc, "dy"), self.desc.tensor(dx_desc, "dx")
        _require(dyt.shape == yt.shape and dxt.shape == xt.shape,
                 f"dy {dyt.shape} / dx {dxt.shape} must match y {yt.shape} / x {xt.shape}")
        yt.view(y, "y")  # cuDNN reads y; a null pointer is refused here too
        dt = xt.data_type
        dys, xs, dst = dyt.view(dy, "dy"), xt.view(x, "x"), dxt.view(dx, "dx")
        a, b = _scalar(alpha, dt, "alpha"), _scalar(beta, dt, "beta")
        yield
        grad = dys.astype(dyt.compute)
        sd, out = len(pool.window), yt.shape[2:]
        data = xs.astype(xt.compute)
        padded = tuple(s + 2 * p for s, p in zip(xt.shape[2:], pool.pads))
        dxp = np.zeros(xt.shape[:2] + padded, grad.dtype)
        if self._is_max(pool):
            win = _windows(_pad(data, pool.pads, -np.inf), pool.window, pool.strides, (1,) * sd, out)
            flat = win.reshape(win.shape[: 2 + sd] + (-1,))
            first = np.argmax(np.where(np.isnan(flat), -np.inf, flat), axis=-1)  # first maximum in the window
            offsets = np.unravel_index(first, pool.window)
            grids = np.meshgrid(*(np.arange(n) for n in grad.shape), indexing="ij", sparse=True)
            coords = list(grids[:2]) + [grids[2 + i] * pool.strides[i] + offsets[i] for i in range(sd)]
            flat_index = np.ravel_multi_index(coords, dxp.shape)
            dxp = np.bincount(flat_index.ravel(), weights=grad.ravel(), minlength=dxp.size).reshape(dxp.shape)
        else:
            share = grad / self._pool_divisor(pool, xt)
            cols = np.broadcast_to(share[(Ellipsis,) + (None,) * sd], share.shape + tuple(pool.window))
            _scatter_windows(dxp, cols, pool.strides, (1,) * sd, out)
        crop = tuple(slice(p, p + s) for p, s in zip(pool.pads, xt.shape[2:]))
        _blend(dst, dxp[(slice(None), slice(None)) + crop].astype(grad.dtype), a, b)

    # ------------------------------------------------------------------------------------- activation
    @staticmethod
    def _alpha_beta(alpha, beta, data_type: int) -> tuple[float, float]:
        """The scaling parameters, read from host memory at the call, as cuDNN does."""
        return _scalar(alpha, data_type, "alpha"), _scalar(beta, data_type, "beta")

    def _same_shapes(self, **tensors) -> None:
        shapes = {name: t.shape for name, t in tensors.items()}
        _require(len(set(shapes.values())) == 1, f"shapes differ: {shapes}")

    def _model_cudnnActivationForward(self, handle, act_desc, alpha, x_desc, x, beta, y_desc, y) -> None:
        self._handle(handle)
        mode, _, coef = self.desc.activation(act_desc)
        xt, yt = self.desc.tensor(x_desc, "x"), self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        _activation(mode, coef, np.zeros(0))  # refuses a mode the call does not support
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), *self._alpha_beta(alpha, beta, xt.data_type)
        yield
        _blend(dst, _activation(mode, coef, src.astype(xt.compute)), a, b)

    def _model_cudnnActivationBackward(self, handle, act_desc, alpha, y_desc, y, dy_desc, dy, x_desc, x, beta,
                                       dx_desc, dx) -> None:
        self._handle(handle)
        mode, _, coef = self.desc.activation(act_desc)
        yt, dyt = self.desc.tensor(y_desc, "y"), self.desc.tensor(dy_desc, "dy")
        xt, dxt = self.desc.tensor(x_desc, "x"), self.desc.tensor(dx_desc, "dx")
        self._same_shapes(y=yt, dy=dyt, x=xt, dx=dxt)
        yt.view(y, "y")
        _activation(mode, coef, np.zeros(0))  # refuses a mode the call does not support
        xs, dys, dst = xt.view(x, "x"), dyt.view(dy, "dy"), dxt.view(dx, "dx")
        a, b = self._alpha_beta(alpha, beta, xt.data_type)
        yield
        _blend(dst, _activation_grad(mode, coef, xs.astype(xt.compute), dys.astype(dyt.compute)), a, b)

    # ---------------------------------------------------------------------------------------- softmax
    def _model_cudnnSoftmaxForward(self, handle, algo, mode, alpha, x_desc, x, beta, y_desc, y) -> None:
        self._handle(handle)
        xt, yt = self.desc.tensor(x_desc, "x"), self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        axes = _softmax_axes(mode, len(xt.shape))
        _require(algo in {int(a) for a in cd.SoftmaxAlgorithm}, f"softmax algorithm {algo} is not an algorithm")
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), *self._alpha_beta(alpha, beta, xt.data_type)
        yield
        data = src.astype(xt.compute)
        with np.errstate(over="ignore", invalid="ignore"):
            if algo == cd.SoftmaxAlgorithm.FAST:  # no max subtraction: may overflow, as documented
                e = np.exp(data)
                value = e / e.sum(axis=axes, keepdims=True)
            elif algo in (cd.SoftmaxAlgorithm.ACCURATE, cd.SoftmaxAlgorithm.LOG):
                shifted = data - data.max(axis=axes, keepdims=True)
                logs = shifted - np.log(np.exp(shifted).sum(axis=axes, keepdims=True))
                value = logs if algo == cd.SoftmaxAlgorithm.LOG else np.exp(logs)
            else:  # pragma: no cover - checked at the call
                raise ModelError(Status.BAD_PARAM, f"softmax algorithm {algo} is not an algorithm")
        _blend(dst, value, a, b)

    def _model_cudnnSoftmaxBackward(self, handle, algo, mode, alpha, y_desc, y, dy_desc, dy, beta, dx_desc,
                                    dx) -> None:
        self._handle(handle)
        yt, dyt, dxt = (self.desc.tensor(d, w) for d, w in ((y_desc, "y"), (dy_desc, "dy"), (dx_desc, "dx")))
        self._same_shapes(y=yt, dy=dyt, dx=dxt)
        _require(algo in {int(a) for a in cd.SoftmaxAlgorithm}, f"softmax algorithm {algo} is not an algorithm")
        axes = _softmax_axes(mode, len(yt.shape))
        ys, dys, dst = yt.view(y, "y"), dyt.view(dy, "dy"), dxt.view(dx, "dx")
        a, b = self._alpha_beta(alpha, beta, yt.data_type)
        yield
        out, grad = ys.astype(yt.compute), dys.astype(dyt.compute)
        if algo == cd.SoftmaxAlgorithm.LOG:
            value = grad - np.exp(out) * grad.sum(axis=axes, keepdims=True)
        else:
            value = out * (grad - (grad * out).sum(axis=axes, keepdims=True))
        _blend(dst, value, a, b)

    # ------------------------------------------------------------------------------------- batch norm
    def _bn_setup(self, mode: int, x_desc, bn_desc) -> tuple[Tensor, Tensor, tuple]:
        xt, bn = self.desc.tensor(x_desc, "x"), self.desc.tensor(bn_desc, "bnScaleBiasMeanVar")
        nd = len(xt.shape)
        if mode in (cd.BatchNormMode.SPATIAL, cd.BatchNormMode.SPATIAL_PERSISTENT):
            axes, want = (0,) + tuple(range(2, nd)), (1, xt.shape[1]) + (1,) * (nd - 2)
        else:
            _require(mode == cd.BatchNormMode.PER_ACTIVATION, f"batch-norm mode {mode} is not a mode")
            axes, want = (0,), (1,) + xt.shape[1:]
        _require(bn.shape == want, f"the batch-norm parameter descriptor has shape {bn.shape}, expected {want}")
        want_type = cd.DataType.DOUBLE if xt.data_type == cd.DataType.DOUBLE else cd.DataType.FLOAT
        _require(bn.data_type == want_type, f"batch-norm parameters must have data type {want_type.name}")
        return xt, bn, axes

    @staticmethod
    def _epsilon(eps: float) -> None:
        _require(eps >= cd.BN_MIN_EPSILON, f"epsilon {eps} is below CUDNN_BN_MIN_EPSILON {cd.BN_MIN_EPSILON}")

    def _model_cudnnBatchNormalizationForwardTraining(self, handle, mode, alpha, beta, x_desc, x, y_desc, y, bn_desc,
                                                      scale, bias, factor, running_mean, running_var, eps,
                                                      save_mean, save_inv_var) -> None:
        self._handle(handle)
        xt, bn, axes = self._bn_setup(mode, x_desc, bn_desc)
        yt = self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        self._epsilon(eps)
        _require(bool(running_mean) == bool(running_var), "give both running mean and variance, or neither")
        _require(bool(save_mean) == bool(save_inv_var), "give both saved mean and inverse variance, or neither")
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), *self._alpha_beta(alpha, beta, xt.data_type)
        scale_view, bias_view = bn.view(scale, "bnScale"), bn.view(bias, "bnBias")
        yield
        data = src.astype(xt.compute)
        mean = data.mean(axis=axes, keepdims=True)
        var = data.var(axis=axes, keepdims=True)
        inv = 1 / np.sqrt(var + eps)
        gamma, shift = scale_view.astype(bn.compute), bias_view.astype(bn.compute)
        value = gamma * (data - mean) * inv + shift
        _blend(dst, value, a, b)
        if running_mean:
            count = math.prod(xt.shape[a] for a in axes)
            unbiased = var * count / max(count - 1, 1)
            for ptr, batch, what in ((running_mean, mean, "resultRunningMean"),
                                     (running_var, unbiased, "resultRunningVariance")):
                stat = bn.view(ptr, what)
                stat[...] = (1 - factor) * stat + factor * batch
        if save_mean:
            bn.view(save_mean, "resultSaveMean")[...] = mean
            bn.view(save_inv_var, "resultSaveInvVariance")[...] = inv

    def _model_cudnnBatchNormalizationForwardInference(self, handle, mode, alpha, beta, x_desc, x, y_desc, y, bn_desc,
                                                       scale, bias, mean, var, eps) -> None:
        self._handle(handle)
        xt, bn, _ = self._bn_setup(mode, x_desc, bn_desc)
        yt = self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        self._epsilon(eps)
        params = [bn.view(p, w) for p, w in ((var, "estimatedVariance"), (scale, "bnScale"), (mean, "estimatedMean"),
                                             (bias, "bnBias"))]
        src, dst, a, b = xt.view(x, "x"), yt.view(y, "y"), *self._alpha_beta(alpha, beta, xt.data_type)
        yield
        v, gamma, m, shift = (p.astype(bn.compute) for p in params)
        value = gamma * (src.astype(xt.compute) - m) * (1 / np.sqrt(v + eps)) + shift
        _blend(dst, value, a, b)

    def _model_cudnnBatchNormalizationBackward(self, handle, mode, alpha_data, beta_data, alpha_param, beta_param,
                                               x_desc, x, dy_desc, dy, dx_desc, dx, bn_desc, scale, dscale, dbias,
                                               eps, save_mean, save_inv_var) -> None:
        self._handle(handle)
        xt, bn, axes = self._bn_setup(mode, x_desc, bn_desc)
        dyt, dxt = self.desc.tensor(dy_desc, "dy"), self.desc.tensor(dx_desc, "dx")
        self._same_shapes(x=xt, dy=dyt, dx=dxt)
        self._epsilon(eps)
        _require(bool(save_mean) == bool(save_inv_var), "give both saved mean and inverse variance, or neither")
        dt = xt.data_type
        xs, dys, dst, scale_view = xt.view(x, "x"), dyt.view(dy, "dy"), dxt.view(dx, "dx"), bn.view(scale, "bnScale")
        ad, bd = _scalar(alpha_data, dt, "alphaDataDiff"), _scalar(beta_data, dt, "betaDataDiff")
        a, b = _scalar(alpha_param, dt, "alphaParamDiff"), _scalar(beta_param, dt, "betaParamDiff")
        dscale_view, dbias_view = bn.view(dscale, "resultBnScaleDiff"), bn.view(dbias, "resultBnBiasDiff")
        yield
        data, grad = xs.astype(xt.compute), dys.astype(dyt.compute)
        if save_mean:
            mean, inv = bn.read(save_mean, "savedMean"), bn.read(save_inv_var, "savedInvVariance")
        else:
            mean = data.mean(axis=axes, keepdims=True)
            inv = 1 / np.sqrt(data.var(axis=axes, keepdims=True) + eps)
        count = math.prod(xt.shape[a] for a in axes)
        xhat = (data - mean) * inv
        gbias = grad.sum(axis=axes, keepdims=True)
        gscale = (grad * xhat).sum(axis=axes, keepdims=True)
        gx = scale_view.astype(bn.compute) * inv / count * (count * grad - gbias - xhat * gscale)
        _blend(dst, gx, ad, bd)
        _blend(dscale_view, gscale, a, b)
        _blend(dbias_view, gbias, a, b)

    # ---------------------------------------------------------------------------------------- dropout
    def _model_cudnnDropoutGetStatesSize(self, handle, out) -> None:
        self._handle(handle)
        out[0] = _STATES_BYTES

    def _dropout_settings(self, desc, handle, rate, states, states_bytes, seed) -> DropoutConfig:
        self._handle(handle)
        _require(bool(desc), "dropout descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        _require(0.0 <= rate <= 1.0, f"dropout rate {rate} is outside [0, 1]")
        _require(not states or states_bytes >= _STATES_BYTES,
                 f"dropout states of {states_bytes} bytes; cudnnDropoutGetStatesSize says {_STATES_BYTES}")
        config = DropoutConfig(float(rate), int(states or 0), int(states_bytes), int(seed))
        self.dropouts[int(desc)] = config
        return config

    @staticmethod
    def _states(config: DropoutConfig) -> np.ndarray:
        _require(bool(config.states), "the dropout descriptor has no states buffer", Status.BAD_PARAM_NULL_POINTER)
        return host_view(config.states, (3,), (1,), np.uint64, "dropout states")

    def _model_cudnnSetDropoutDescriptor(self, desc, handle, rate, states, states_bytes, seed) -> None:
        config = self._dropout_settings(desc, handle, rate, states, states_bytes, seed)
        if config.states:  # seeding the generator: the states start over (on the device, in stream order)
            view = self._states(config)
            yield
            view[...] = (_STATES_MAGIC, config.seed, 0)

    def _model_cudnnRestoreDropoutDescriptor(self, desc, handle, rate, states, states_bytes, seed) -> None:
        self._dropout_settings(desc, handle, rate, states, states_bytes, seed)

    def _dropout_setup(self, handle, desc, x_desc, y_desc, reserve, reserve_bytes):
        self._handle(handle)
        config = self.dropouts.get(int(desc or 0))
        _require(config is not None, "the dropout descriptor was never set with cudnnSetDropoutDescriptor",
                 Status.BAD_PARAM_NOT_FINALIZED)
        xt, yt = self.desc.tensor(x_desc, "x"), self.desc.tensor(y_desc, "y")
        self._same_shapes(x=xt, y=yt)
        need = c_size_t()
        self.desc.call("cudnnDropoutGetReserveSpaceSize", c_void_p(x_desc), ctypes.byref(need))
        _require(reserve_bytes >= need.value, f"reserve space of {reserve_bytes} bytes, {need.value} needed")
        _require(math.prod(xt.shape) <= 8 * reserve_bytes, "the reserve space cannot hold the mask")
        mask_bytes = host_view(reserve, (int(reserve_bytes),), (1,), np.uint8, "reserveSpace")
        return config, xt, yt, mask_bytes

    def _model_cudnnDropoutForward(self, handle, desc, x_desc, x, y_desc, y, reserve, reserve_bytes) -> None:
        config, xt, yt, mask_bytes = self._dropout_setup(handle, desc, x_desc, y_desc, reserve, reserve_bytes)
        states, src, dst = self._states(config), xt.view(x, "x"), yt.view(y, "y")
        yield
        if int(states[0]) != _STATES_MAGIC:  # device memory: checked in stream order, as a kernel would
            raise ModelError(Status.BAD_PARAM_NOT_FINALIZED, "cudnnDropoutForward: the dropout states were never "
                                                             "initialised")
        generator = np.random.Generator(np.random.Philox(key=int(states[1]), counter=[0, 0, 0, int(states[2])]))
        states[2] += 1
        keep = generator.random(xt.shape) >= config.rate
        packed = np.packbits(keep.ravel())
        mask_bytes[: packed.size] = packed
        data = src.astype(xt.compute)
        scale = 1.0 / (1.0 - config.rate) if config.rate < 1 else 0.0
        dst[...] = np.where(keep, data * scale, 0)

    def _model_cudnnDropoutBackward(self, handle, desc, dy_desc, dy, dx_desc, dx, reserve, reserve_bytes) -> None:
        config, dyt, dxt, mask_bytes = self._dropout_setup(handle, desc, dy_desc, dx_desc, reserve, reserve_bytes)
        src, dst = dyt.view(dy, "dy"), dxt.view(dx, "dx")
        yield
        count = math.prod(dyt.shape)
        keep = np.unpackbits(mask_bytes, count=count).reshape(dyt.shape).astype(bool)
        scale = 1.0 / (1.0 - config.rate) if config.rate < 1 else 0.0
        dst[...] = np.where(keep, src.astype(dyt.compute) * scale, 0)

    # ----------------------------------------------------------------------------------- tensor arithmetic
    def _model_cudnnAddTensor(self, handle, alpha, a_desc, a, beta, c_desc, c) -> None:
        self._handle(handle)
        at, ct = self.desc.tensor(a_desc, "A"), self.desc.tensor(c_desc, "C")
        _broadcasts(at, ct, "cudnnAddTensor A")
        src, dst, al, be = at.view(a, "A"), ct.view(c, "C"), *self._alpha_beta(alpha, beta, ct.data_type)
        yield
        _blend(dst, np.broadcast_to(src.astype(at.compute), ct.shape).astype(ct.compute), al, be)

    def _model_cudnnOpTensor(self, handle, op_desc, alpha1, a_desc, a, alpha2, b_desc, b, beta, c_desc, c) -> None:
        self._handle(handle)
        op, compute, nan = self.desc.op_tensor(op_desc)
        at, bt, ct = (self.desc.tensor(d, w) for d, w in ((a_desc, "A"), (b_desc, "B"), (c_desc, "C")))
        _require(at.shape == ct.shape, f"cudnnOpTensor: A {at.shape} must have C's shape {ct.shape}")
        ctype = _compute(compute)
        dt = ct.data_type
        ops = cd.OpTensorOp
        unary = op in (ops.SQRT, ops.NOT)
        if not unary:
            _require(op in (ops.ADD, ops.MUL, ops.MIN, ops.MAX), f"op-tensor operation {op} is not an operation")
            _broadcasts(bt, ct, "cudnnOpTensor B")
        a1, a2 = _scalar(alpha1, dt, "alpha1"), None if unary else _scalar(alpha2, dt, "alpha2")
        av, bv = at.view(a, "A"), None if unary else bt.view(b, "B")
        dst, be = ct.view(c, "C"), _scalar(beta, dt, "beta")
        yield
        lhs = a1 * av.astype(ctype)
        if unary:
            value = np.sqrt(lhs) if op == ops.SQRT else (lhs == 0).astype(ctype)
        else:
            rhs = a2 * bv.astype(ctype)
            propagate = nan == cd.NanPropagation.PROPAGATE
            fn = {ops.ADD: np.add, ops.MUL: np.multiply, ops.MIN: np.minimum if propagate else np.fmin,
                  ops.MAX: np.maximum if propagate else np.fmax}[op]
            value = fn(lhs, rhs)
        _blend(dst, value.astype(ctype), 1.0, be)

    def _model_cudnnScaleTensor(self, handle, y_desc, y, alpha) -> None:
        self._handle(handle)
        yt = self.desc.tensor(y_desc, "y")
        view, factor = yt.view(y, "y"), _scalar(alpha, yt.data_type, "alpha")
        yield
        view[...] = view.astype(yt.compute) * factor

    def _model_cudnnSetTensor(self, handle, y_desc, y, value) -> None:
        self._handle(handle)
        yt = self.desc.tensor(y_desc, "y")
        _require(bool(value), "valuePtr is a null pointer", Status.BAD_PARAM_NULL_POINTER)
        dst, fill = yt.view(y, "y"), host_view(value, (1,), (1,), yt.dtype, "valuePtr")[0].copy()  # host, at the call
        yield
        dst[...] = fill

    # -------------------------------------------------------------------------------------- reductions
    def _reduce_setup(self, reduce_desc, a_desc, c_desc):
        op, compute, nan, indices, indices_type = self.desc.reduce_tensor(reduce_desc)
        at, ct = self.desc.tensor(a_desc, "A"), self.desc.tensor(c_desc, "C")
        _broadcasts(ct, at, "cudnnReduceTensor C")
        _require(op in {int(o) for o in cd.ReduceTensorOp}, f"reduce operation {op} is not an operation")
        wants_indices = indices == cd.ReduceTensorIndices.FLATTENED_INDICES and op in (
            cd.ReduceTensorOp.MIN, cd.ReduceTensorOp.MAX, cd.ReduceTensorOp.AMAX)
        _require(not wants_indices or indices_type == cd.IndicesType.INT32,
                 "only 32-bit indices are supported", Status.NOT_SUPPORTED)
        return op, compute, nan, wants_indices, at, ct

    @staticmethod
    def reduction_workspace(at: Tensor, ct: Tensor) -> int:
        """Bytes the simulated reduction asks for: a partial result per output element when anything is reduced."""
        return 0 if at.shape == ct.shape else 8 * math.prod(ct.shape)

    def _model_cudnnGetReductionWorkspaceSize(self, handle, reduce_desc, a_desc, c_desc, out) -> None:
        self._handle(handle)
        *_, at, ct = self._reduce_setup(reduce_desc, a_desc, c_desc)
        out[0] = self.reduction_workspace(at, ct)

    def _model_cudnnGetReductionIndicesSize(self, handle, reduce_desc, a_desc, c_desc, out) -> None:
        self._handle(handle)
        _, _, _, wants_indices, _, ct = self._reduce_setup(reduce_desc, a_desc, c_desc)
        out[0] = 4 * math.prod(ct.shape) if wants_indices else 0

    def _model_cudnnReduceTensor(self, handle, reduce_desc, indices, indices_bytes, workspace, ws_bytes, alpha,
                                 a_desc, a, beta, c_desc, c) -> None:
        self._handle(handle)
        op, compute, nan, wants_indices, at, ct = self._reduce_setup(reduce_desc, a_desc, c_desc)
        need = self.reduction_workspace(at, ct)
        _require(ws_bytes >= need and (bool(workspace) or need == 0),
                 f"workspace of {ws_bytes} bytes at {workspace}, {need} needed")
        axes = tuple(i for i, m in enumerate(ct.shape) if m == 1)
        if wants_indices:
            _require(indices_bytes >= 4 * math.prod(ct.shape) and bool(indices), "the indices buffer is too small")
            where_view = host_view(indices, ct.shape, cd.contiguous_strides(ct.shape), np.uint32, "indices")
        dt = ct.data_type
        src, dst, al, be = at.view(a, "A"), ct.view(c, "C"), *self._alpha_beta(alpha, beta, dt)
        yield
        value, where = _reduce(op, nan, src.astype(_compute(compute)), axes)
        _blend(dst, value, al, be)
        if wants_indices:
            where_view[...] = where


def _reduce(op: int, nan: int, data: np.ndarray, axes: tuple):
    """(reduced value with kept dims, flattened arg index within the reduced elements or None)."""
    r = cd.ReduceTensorOp
    propagate = nan == cd.NanPropagation.PROPAGATE
    if op in (r.MIN, r.MAX, r.AMAX):
        src = np.abs(data) if op == r.AMAX else data
        rest = tuple(i for i in range(data.ndim) if i not in axes)
        moved = np.transpose(src, rest + axes).reshape(tuple(src.shape[i] for i in rest) + (-1,))
        if not propagate:
            fill = np.inf if op == r.MIN else -np.inf
            moved = np.where(np.isnan(moved), fill, moved)
        where = (np.argmin if op == r.MIN else np.argmax)(moved, axis=-1)
        value = np.take_along_axis(moved, where[..., None], axis=-1)[..., 0]
        shape = tuple(1 if i in axes else n for i, n in enumerate(data.shape))
        return value.reshape(shape), where.reshape(shape)
    reducers = {r.ADD: lambda d: d.sum(axes, keepdims=True), r.MUL: lambda d: d.prod(axes, keepdims=True),
                r.AVG: lambda d: d.mean(axes, keepdims=True), r.NORM1: lambda d: np.abs(d).sum(axes, keepdims=True),
                r.NORM2: lambda d: np.sqrt((d * d).sum(axes, keepdims=True)),
                r.MUL_NO_ZEROS: lambda d: np.where(d == 0, 1, d).prod(axes, keepdims=True)}
    return reducers[op](data), None
