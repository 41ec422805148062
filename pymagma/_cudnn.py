"""Raw cuDNN 9 binding: enums, the prototypes of ``_cudnn_table`` (bound lazily), status checking and descriptor owners.

Only the legacy ("v7-style") API that cuDNN 9 still ships is declared here; the calls cuDNN 8 removed
(``cudnnGetConvolutionForwardAlgorithm`` and friends) are not.  Enum values follow cuDNN 9's ``cudnn_*.h``.
Nothing here knows about arrays: callers pass device pointers as ints and shapes as tuples.
"""

from __future__ import annotations

import ctypes
import enum
import weakref
from ctypes import c_float, c_int, c_size_t, c_ulonglong, c_void_p

from . import _native
from ._cudnn_table import (  # noqa: F401 - the table and structures, re-exported
    PROTOTYPES,
    ConvolutionBwdDataAlgoPerf,
    ConvolutionBwdFilterAlgoPerf,
    ConvolutionFwdAlgoPerf,
    _AlgoPerf,
)
from ._ffi import NativeLibrary
from ._libs import NVIDIA_REMEDIES, load_nvidia
from .errors import CudnnError, NoDeviceError


# ------------------------------------------------------------------------------------------------------ enums
class Status(enum.IntEnum):
    SUCCESS = 0
    NOT_INITIALIZED = 1001
    SUBLIBRARY_VERSION_MISMATCH = 1002
    SERIALIZATION_VERSION_MISMATCH = 1003
    DEPRECATED = 1004
    LICENSE_ERROR = 1005
    RUNTIME_IN_PROGRESS = 1006
    RUNTIME_FP_OVERFLOW = 1007
    SUBLIBRARY_LOADING_FAILED = 1008
    BAD_PARAM = 2000
    INVALID_VALUE = 2001
    BAD_PARAM_NULL_POINTER = 2002
    BAD_PARAM_MISALIGNED_POINTER = 2003
    BAD_PARAM_NOT_FINALIZED = 2004
    BAD_PARAM_OUT_OF_BOUND = 2005
    BAD_PARAM_SIZE_INSUFFICIENT = 2006
    BAD_PARAM_STREAM_MISMATCH = 2007
    BAD_PARAM_SHAPE_MISMATCH = 2008
    BAD_PARAM_DUPLICATED_ENTRIES = 2009
    BAD_PARAM_ATTRIBUTE_TYPE = 2010
    BAD_PARAM_CUDA_GRAPH_MISMATCH = 2011
    BAD_PARAM_DESCRIPTOR_TYPE = 2012
    NOT_SUPPORTED = 3000
    NOT_SUPPORTED_GRAPH_PATTERN = 3001
    NOT_SUPPORTED_SHAPE = 3002
    NOT_SUPPORTED_DATA_TYPE = 3003
    NOT_SUPPORTED_LAYOUT = 3004
    NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER = 3005
    NOT_SUPPORTED_INCOMPATIBLE_CUDART = 3006
    NOT_SUPPORTED_ARCH_MISMATCH = 3007
    NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING = 3008
    NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE = 3009
    NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT = 3010
    NOT_SUPPORTED_PADDING = 3011
    NOT_SUPPORTED_BAD_LAUNCH_PARAM = 3012
    NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API = 3013
    NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE = 3014
    INTERNAL_ERROR = 4000
    INTERNAL_ERROR_COMPILATION_FAILED = 4001
    INTERNAL_ERROR_UNEXPECTED_VALUE = 4002
    INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4003
    INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED = 4004
    INTERNAL_ERROR_BAD_LAUNCH_PARAM = 4005
    INTERNAL_ERROR_TEXTURE_CREATION_FAILED = 4006
    EXECUTION_FAILED = 5000
    EXECUTION_FAILED_CUDA_DRIVER = 5001
    EXECUTION_FAILED_CUBLAS = 5002
    EXECUTION_FAILED_CUDART = 5003
    EXECUTION_FAILED_CURAND = 5004


class DataType(enum.IntEnum):
    FLOAT = 0
    DOUBLE = 1
    HALF = 2
    INT8 = 3
    INT32 = 4
    UINT8 = 6
    BFLOAT16 = 9
    INT64 = 10
    BOOLEAN = 11


class MathType(enum.IntEnum):
    DEFAULT = 0
    TENSOR_OP = 1
    TENSOR_OP_ALLOW_CONVERSION = 2
    FMA = 3


class NanPropagation(enum.IntEnum):
    NOT_PROPAGATE = 0
    PROPAGATE = 1


class TensorFormat(enum.IntEnum):
    NCHW = 0
    NHWC = 1
    NCHW_VECT_C = 2


class ConvolutionMode(enum.IntEnum):
    CONVOLUTION = 0
    CROSS_CORRELATION = 1


class ConvFwdAlgo(enum.IntEnum):
    IMPLICIT_GEMM = 0
    IMPLICIT_PRECOMP_GEMM = 1
    GEMM = 2
    DIRECT = 3
    FFT = 4
    FFT_TILING = 5
    WINOGRAD = 6
    WINOGRAD_NONFUSED = 7


class ConvBwdDataAlgo(enum.IntEnum):
    ALGO_0 = 0
    ALGO_1 = 1
    FFT = 2
    FFT_TILING = 3
    WINOGRAD = 4
    WINOGRAD_NONFUSED = 5


class ConvBwdFilterAlgo(enum.IntEnum):
    ALGO_0 = 0
    ALGO_1 = 1
    FFT = 2
    ALGO_3 = 3
    WINOGRAD = 4
    WINOGRAD_NONFUSED = 5
    FFT_TILING = 6


class Determinism(enum.IntEnum):
    NON_DETERMINISTIC = 0
    DETERMINISTIC = 1


class PoolingMode(enum.IntEnum):
    MAX = 0
    AVERAGE_COUNT_INCLUDE_PADDING = 1
    AVERAGE_COUNT_EXCLUDE_PADDING = 2
    MAX_DETERMINISTIC = 3


class ActivationMode(enum.IntEnum):
    SIGMOID = 0
    RELU = 1
    TANH = 2
    CLIPPED_RELU = 3
    ELU = 4
    IDENTITY = 5
    SWISH = 6


class SoftmaxAlgorithm(enum.IntEnum):
    FAST = 0
    ACCURATE = 1
    LOG = 2


class SoftmaxMode(enum.IntEnum):
    INSTANCE = 0
    CHANNEL = 1


class BatchNormMode(enum.IntEnum):
    PER_ACTIVATION = 0
    SPATIAL = 1
    SPATIAL_PERSISTENT = 2


class OpTensorOp(enum.IntEnum):
    ADD = 0
    MUL = 1
    MIN = 2
    MAX = 3
    SQRT = 4
    NOT = 5


class ReduceTensorOp(enum.IntEnum):
    ADD = 0
    MUL = 1
    MIN = 2
    MAX = 3
    AMAX = 4
    AVG = 5
    NORM1 = 6
    NORM2 = 7
    MUL_NO_ZEROS = 8


class ReduceTensorIndices(enum.IntEnum):
    NO_INDICES = 0
    FLATTENED_INDICES = 1


class IndicesType(enum.IntEnum):
    INT32 = 0
    INT64 = 1
    INT16 = 2
    INT8 = 3


#: Smallest batch-norm epsilon cuDNN accepts (CUDNN_BN_MIN_EPSILON).
BN_MIN_EPSILON = 0.0



lib = NativeLibrary("cuDNN", lambda: load_nvidia("cudnn"), PROTOTYPES,
                    remedy=f"cuDNN 9 is required: {NVIDIA_REMEDIES['cudnn']}")  #: the real libcudnn
_native.register("cudnn", lambda: lib, lambda: tuple(PROTOTYPES))


def library():
    """The cuDNN in use (the simulator's when it is on)."""
    return _native.current.cudnn


# -------------------------------------------------------------------------------------------------- statuses
def version() -> int:
    """cuDNN's version as an int (major*10000 + minor*100 + patch for cuDNN 9)."""
    return int(library().cudnnGetVersion())


def version_tuple() -> tuple[int, int, int]:
    v = version()
    return v // 10000, (v % 10000) // 100, v % 100


def status_name(status: int) -> str:
    try:
        return f"CUDNN_STATUS_{Status(int(status)).name}"
    except ValueError:
        return f"CUDNN_STATUS({int(status)})"


def error_string(status: int) -> str:
    """cuDNN's own name for a status code (cudnnGetErrorString)."""
    text = library().cudnnGetErrorString(int(status))
    return text.decode() if text else status_name(status)


def last_error_string() -> str:
    """The message cuDNN recorded for its most recent failure on this thread (may be empty)."""
    buf = ctypes.create_string_buffer(4096)
    library().cudnnGetLastErrorString(buf, len(buf))
    return buf.value.decode(errors="replace").strip()


def check(status: int, call: str) -> None:
    """Raise :class:`CudnnError` (name and cuDNN's last-error text) unless ``status`` is success."""
    if status != 0:
        raise CudnnError(status, status_name(status), last_error_string(), call)


#: The cuDNN library object :func:`call` last called through and the functions it bound from it, by name: kept
#: while that object is the current one (``pymagma._native.current.cudnn``), started again when another is (the
#: simulator turned on or off, a meter's stand-in).  A new tuple each time, so a thread reads one consistent pair.
_called: tuple = (None, {})


def call(name: str, *args) -> None:
    """Call a status-returning cuDNN function and check its result."""
    global _called
    cudnn = _native.current.cudnn  # (library(), inline: every cuDNN call passes here)
    last, functions = _called
    if cudnn is not last:
        functions = {}
        _called = (cudnn, functions)
    fn = functions.get(name)
    if fn is None:
        fn = functions[name] = cudnn.bind(name)
    status = fn(*args)
    if status != 0:  # (check's test, inline)
        check(status, name)


def _ints(values) -> ctypes.Array:
    values = [int(v) for v in values]
    if any(abs(v) >= 2**31 for v in values):
        raise ValueError(f"cuDNN takes 32-bit dimensions and strides; {values} has one beyond 2**31 - 1 "
                         "(split the tensor)")
    return (c_int * len(values))(*values)


# ---------------------------------------------------------------------------------------------------- handle
def _device_count() -> int:
    from . import runtime

    return runtime.device_count()


class Handle:
    """An owned cudnnHandle_t; creating one without a usable GPU raises :class:`NoDeviceError`."""

    def __init__(self):
        handle = c_void_p()
        cudnn = library()
        status = cudnn.cudnnCreate(ctypes.byref(handle))
        if status != 0:
            message = last_error_string()
            if _device_count() == 0:
                raise NoDeviceError(f"cudnnCreate failed with {status_name(status)} ({message}): "
                                    "there is no usable CUDA device or driver")
            raise CudnnError(status, status_name(status), message, "cudnnCreate")
        self.value = handle.value
        self._finalizer = weakref.finalize(self, cudnn.cudnnDestroy, c_void_p(handle.value))  # the cuDNN that made it

    def set_stream(self, stream: int) -> None:
        call("cudnnSetStream", self.value, c_void_p(int(stream) or None))

    def destroy(self) -> None:
        self._finalizer()


# --------------------------------------------------------------------------------------- descriptor owners
class Descriptor:
    """Base of the owned cuDNN descriptors: created on construction, destroyed when garbage-collected."""

    kind = ""

    def __init__(self):
        desc = c_void_p()
        call(f"cudnnCreate{self.kind}Descriptor", ctypes.byref(desc))
        self.value = desc.value
        self._as_parameter_ = c_void_p(desc.value)  # what ctypes passes (an attribute: no call per argument)
        destroy = library().bind(f"cudnnDestroy{self.kind}Descriptor")  # the cuDNN that made it destroys it
        self._finalizer = weakref.finalize(self, destroy, c_void_p(desc.value))

    def destroy(self) -> None:
        self._finalizer()


def _check_dims(what: str, dims) -> None:
    if not dims or any(int(d) <= 0 for d in dims):
        raise ValueError(f"{what}: every dimension must be a positive int, got {tuple(dims)}")


class TensorDescriptor(Descriptor):
    """A tensor of 4..8 dimensions (fewer are padded with trailing 1s) with strides in elements."""

    kind = "Tensor"

    def __init__(self, shape, dtype: DataType, strides=None):
        super().__init__()
        shape = tuple(int(s) for s in shape)
        if len(shape) > 8:  # CUDNN_DIM_MAX; cuDNN itself says only NOT_SUPPORTED
            raise ValueError(f"cuDNN tensors have at most 8 dimensions (CUDNN_DIM_MAX), got {len(shape)}: {shape}")
        strides = tuple(int(s) for s in (contiguous_strides(shape) if strides is None else strides))
        while len(shape) < 4:
            shape, strides = shape + (1,), strides + (1,)
        self.shape, self.strides, self.dtype = shape, strides, DataType(dtype)
        call("cudnnSetTensorNdDescriptor", self, int(self.dtype), len(shape), _ints(shape), _ints(strides))

    def size_in_bytes(self) -> int:
        size = c_size_t()
        call("cudnnGetTensorSizeInBytes", self, ctypes.byref(size))
        return size.value


def contiguous_strides(shape) -> tuple[int, ...]:
    """Row-major (C order) strides in elements."""
    strides, step = [], 1
    for dim in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(dim), 1)
    return tuple(reversed(strides))


class FilterDescriptor(Descriptor):
    """Convolution weights (K, C/groups, kh, kw, ...) in NCHW layout."""

    kind = "Filter"

    def __init__(self, shape, dtype: DataType):
        super().__init__()
        self.shape, self.dtype = tuple(int(s) for s in shape), DataType(dtype)
        call("cudnnSetFilterNdDescriptor", self, int(self.dtype), int(TensorFormat.NCHW), len(self.shape),
             _ints(self.shape))


class ConvolutionDescriptor(Descriptor):
    """Cross-correlation (as every DL framework means "convolution") with padding, stride, dilation, groups."""

    kind = "Convolution"

    def __init__(self, padding, stride, dilation, compute: DataType, groups: int = 1,
                 math: MathType = MathType.DEFAULT, mode: ConvolutionMode = ConvolutionMode.CROSS_CORRELATION):
        super().__init__()
        padding, stride, dilation = tuple(padding), tuple(stride), tuple(dilation)
        if not len(padding) == len(stride) == len(dilation):
            raise ValueError(f"padding {padding}, stride {stride} and dilation {dilation} need the same length")
        self.params = (padding, stride, dilation, int(groups), int(compute), int(math), int(mode))
        if len(padding) == 2:
            call("cudnnSetConvolution2dDescriptor", self, *padding, *stride, *dilation, int(mode), int(compute))
        else:
            call("cudnnSetConvolutionNdDescriptor", self, len(padding), _ints(padding), _ints(stride),
                 _ints(dilation), int(mode), int(compute))
        call("cudnnSetConvolutionGroupCount", self, int(groups))
        call("cudnnSetConvolutionMathType", self, int(math))

    def output_shape(self, x: TensorDescriptor, w: FilterDescriptor) -> tuple[int, ...]:
        """cuDNN's own output shape (cudnnGetConvolution2dForwardOutputDim / Nd)."""
        nd = len(x.shape)
        if nd == 4:
            dims = [c_int() for _ in range(4)]
            call("cudnnGetConvolution2dForwardOutputDim", self, x, w, *(ctypes.byref(d) for d in dims))
            return tuple(d.value for d in dims)
        out = (c_int * nd)()
        call("cudnnGetConvolutionNdForwardOutputDim", self, x, w, nd, out)
        return tuple(out)


class PoolingDescriptor(Descriptor):
    kind = "Pooling"

    def __init__(self, mode: PoolingMode, window, padding, stride,
                 nan: NanPropagation = NanPropagation.NOT_PROPAGATE):
        super().__init__()
        window, padding, stride = tuple(window), tuple(padding), tuple(stride)
        if len(window) == 2:
            call("cudnnSetPooling2dDescriptor", self, int(mode), int(nan), *window, *padding, *stride)
        else:
            call("cudnnSetPoolingNdDescriptor", self, int(mode), int(nan), len(window), _ints(window),
                 _ints(padding), _ints(stride))

    def output_shape(self, x: TensorDescriptor) -> tuple[int, ...]:
        nd = len(x.shape)
        if nd == 4:
            dims = [c_int() for _ in range(4)]
            call("cudnnGetPooling2dForwardOutputDim", self, x, *(ctypes.byref(d) for d in dims))
            return tuple(d.value for d in dims)
        out = (c_int * nd)()
        call("cudnnGetPoolingNdForwardOutputDim", self, x, nd, out)
        return tuple(out)


class ActivationDescriptor(Descriptor):
    kind = "Activation"

    def __init__(self, mode: ActivationMode, coef: float = 0.0, nan: NanPropagation = NanPropagation.NOT_PROPAGATE):
        super().__init__()
        call("cudnnSetActivationDescriptor", self, int(mode), int(nan), float(coef))
        if ActivationMode(mode) is ActivationMode.SWISH:
            call("cudnnSetActivationDescriptorSwishBeta", self, float(coef) or 1.0)


class DropoutDescriptor(Descriptor):
    """Created empty; :meth:`set` (first use of a seed) or :meth:`restore` binds it to a handle and states."""

    kind = "Dropout"

    def set(self, handle: Handle, rate: float, states: int, states_nbytes: int, seed: int) -> None:
        call("cudnnSetDropoutDescriptor", self, handle.value, c_float(rate), c_void_p(states or None),
             states_nbytes, c_ulonglong(seed))

    def restore(self, handle: Handle, rate: float, states: int, states_nbytes: int, seed: int) -> None:
        call("cudnnRestoreDropoutDescriptor", self, handle.value, c_float(rate), c_void_p(states or None),
             states_nbytes, c_ulonglong(seed))


class OpTensorDescriptor(Descriptor):
    kind = "OpTensor"

    def __init__(self, op: OpTensorOp, compute: DataType, nan: NanPropagation = NanPropagation.NOT_PROPAGATE):
        super().__init__()
        call("cudnnSetOpTensorDescriptor", self, int(op), int(compute), int(nan))


class ReduceTensorDescriptor(Descriptor):
    kind = "ReduceTensor"

    def __init__(self, op: ReduceTensorOp, compute: DataType,
                 indices: ReduceTensorIndices = ReduceTensorIndices.NO_INDICES,
                 nan: NanPropagation = NanPropagation.NOT_PROPAGATE, indices_type: IndicesType = IndicesType.INT32):
        super().__init__()
        call("cudnnSetReduceTensorDescriptor", self, int(op), int(compute), int(nan), int(indices), int(indices_type))


def derive_bn_descriptor(x: TensorDescriptor, mode: BatchNormMode) -> TensorDescriptor:
    """The scale/bias/mean/variance descriptor cuDNN derives for batch-norm over ``x``."""
    bn = TensorDescriptor.__new__(TensorDescriptor)
    Descriptor.__init__(bn)
    call("cudnnDeriveBNTensorDescriptor", bn, x, int(mode))
    dtype, nd = c_int(), c_int()
    dims, strides = (c_int * 8)(), (c_int * 8)()
    call("cudnnGetTensorNdDescriptor", bn, 8, ctypes.byref(dtype), ctypes.byref(nd), dims, strides)
    bn.shape, bn.strides, bn.dtype = tuple(dims[: nd.value]), tuple(strides[: nd.value]), DataType(dtype.value)
    return bn


def reserve_space_size(x: TensorDescriptor) -> int:
    """Bytes of the dropout reserve space for ``x`` (cudnnDropoutGetReserveSpaceSize)."""
    size = c_size_t()
    call("cudnnDropoutGetReserveSpaceSize", x, ctypes.byref(size))
    return size.value
