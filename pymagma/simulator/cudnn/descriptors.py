"""The simulated cuDNN's view of its inputs: descriptors read back from the real libcudnn, host views of device
pointers with the descriptors' strides, alpha/beta read as cuDNN reads them, and the error every model raises."""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, c_double, c_float, c_int, c_void_p
from dataclasses import dataclass

import numpy as np

from ... import _cudnn as cd
from ... import dtypes
from ..plans import Versions

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


class ModelError(Exception):
    """A call the library would refuse: becomes its status, and the text cudnnGetLastErrorString returns."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


def status_of(code: int) -> Status:
    try:
        return Status(int(code))
    except ValueError:
        return Status.INTERNAL_ERROR


def require(condition: bool, message, status: Status = Status.BAD_PARAM) -> None:
    """A :class:`ModelError` unless ``condition``; ``message``: a str, or a function making it (for a message that
    formats values, made only when the call is refused)."""
    if not condition:
        raise ModelError(status, message() if callable(message) else message)


# ------------------------------------------------------------------------------------------------ memory
def numpy_dtype(data_type: int) -> np.dtype:
    """The NumPy dtype of a cudnnDataType_t (bfloat16 through ml_dtypes), worked out once per data type."""
    found = _NUMPY_DTYPES.get(data_type)
    if found is None:
        found = _NUMPY_DTYPES[data_type] = _work_out_numpy_dtype(data_type)
    return found


_NUMPY_DTYPES: dict = {}


def _work_out_numpy_dtype(data_type: int) -> np.dtype:
    kind = cd.DataType(data_type)
    if kind == cd.DataType.BFLOAT16:
        return dtypes.bfloat16()
    names = {cd.DataType.FLOAT: "float32", cd.DataType.DOUBLE: "float64", cd.DataType.HALF: "float16",
             cd.DataType.INT8: "int8", cd.DataType.INT32: "int32", cd.DataType.UINT8: "uint8",
             cd.DataType.INT64: "int64", cd.DataType.BOOLEAN: "bool"}
    return np.dtype(names[kind])


#: the memory the call in progress on this thread views: while a model runs, ``viewed`` is a list of (address,
#: bytes, what) and ``check(address, bytes, what)`` checks a range against the simulated allocations (before it is
#: read or written); None otherwise
viewing = threading.local()


def host_view(ptr: int | None, shape, strides, dtype, what: str) -> np.ndarray:
    """A writable NumPy view of simulated device memory (strides in elements), noted in :data:`viewing`."""
    if not ptr:
        raise ModelError(Status.BAD_PARAM_NULL_POINTER, f"{what} is a null pointer")
    dtype = np.dtype(dtype)
    extent = 1
    for n, s in zip(shape, strides):  # (a loop, no generator: every operand of every call passes here)
        extent += (n - 1) * s
    itemsize = dtype.itemsize
    viewed = getattr(viewing, "viewed", None)
    if viewed is not None:
        viewed.append((int(ptr), extent * itemsize, what))
        viewing.check(int(ptr), extent * itemsize, what)
    buf = (ctypes.c_char * (extent * itemsize)).from_address(int(ptr))
    return np.ndarray(tuple(shape), dtype, buffer=buf, strides=tuple(map(itemsize.__mul__, strides)))


def read_scalar(ptr: int | None, data_type: int, what: str) -> float:
    """alpha/beta: double for double data, float otherwise (cuDNN's rule for scaling parameters)."""
    if not ptr:
        raise ModelError(Status.BAD_PARAM_NULL_POINTER, f"{what} is a null pointer")
    kind = c_double if data_type == cd.DataType.DOUBLE else c_float
    return float(kind.from_address(int(ptr)).value)


def compute_dtype(data_type: int) -> np.dtype:
    return np.dtype(np.float64 if data_type == cd.DataType.DOUBLE else np.float32)


def blend(out: np.ndarray, value: np.ndarray, alpha: float, beta: float) -> None:
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
        return compute_dtype(self.data_type)

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
    math: int = 0  #: cudnnMathType_t


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
    """Reads descriptors back from the real libcudnn, each once per version (:class:`~pymagma.simulator.plans.Versions`:
    a descriptor set or destroyed through the simulated library is read again; ``caching`` False: read at every
    use)."""

    def __init__(self, real_bind, streams=None, versions: Versions | None = None):
        self._real_bind = real_bind
        self.streams = streams  #: the simulated runtime whose streams the device work is queued on
        self._getters: dict[str, object] = {}
        self.versions = Versions() if versions is None else versions
        self.caching = True
        self._facts: dict[int, tuple] = {}  # descriptor -> (version, kind, what was read)

    def _cached(self, kind: str, desc, read):
        """``read()``'s answer for ``desc``, kept until the descriptor's version changes (a refusal is not kept)."""
        if not (self.caching and type(desc) is int and desc):
            return read()
        version = self.versions.adopt(desc)
        known = self._facts.get(desc)
        if known is not None and known[0] == version and known[1] == kind:
            return known[2]
        found = read()
        self._facts[desc] = (version, kind, found)
        return found

    def forget(self, desc: int | None = None) -> None:
        """Drop what was read of ``desc`` (None: of every descriptor)."""
        if desc is None:
            self._facts.clear()
        else:
            self._facts.pop(desc, None)

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
        if status != 0:  # (the message is made only for a refusal: every descriptor read passes here)
            raise ModelError(status_of(status), f"{name} refused the descriptor ({cd.status_name(status)})")

    def tensor(self, desc, what: str) -> Tensor:
        return self._cached("tensor", desc, lambda: self._read_tensor(desc, what))

    def _read_tensor(self, desc, what: str) -> Tensor:
        if not desc:
            raise ModelError(Status.BAD_PARAM_NULL_POINTER, f"{what} descriptor is null")
        dtype, nd = c_int(), c_int()
        dims, strides = (c_int * 8)(), (c_int * 8)()
        self.call("cudnnGetTensorNdDescriptor", c_void_p(desc), 8, ctypes.byref(dtype), ctypes.byref(nd), dims,
                  strides)
        if nd.value <= 0:
            raise ModelError(Status.BAD_PARAM_NOT_FINALIZED, f"{what} descriptor was never set")
        return Tensor(dtype.value, tuple(dims[: nd.value]), tuple(strides[: nd.value]))

    def filter(self, desc) -> Tensor:
        return self._cached("filter", desc, lambda: self._read_filter(desc))

    def _read_filter(self, desc) -> Tensor:
        require(bool(desc), "filter descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        dtype, fmt, nd, dims = c_int(), c_int(), c_int(), (c_int * 8)()
        self.call("cudnnGetFilterNdDescriptor", c_void_p(desc), 8, ctypes.byref(dtype), ctypes.byref(fmt),
                  ctypes.byref(nd), dims)
        require(nd.value > 0, "filter descriptor was never set", Status.BAD_PARAM_NOT_FINALIZED)
        require(fmt.value == cd.TensorFormat.NCHW, f"filter format {fmt.value}: only NCHW filters are simulated",
                 Status.NOT_SUPPORTED)
        shape = tuple(dims[: nd.value])
        return Tensor(dtype.value, shape, cd.contiguous_strides(shape))

    def convolution(self, desc) -> Convolution:
        return self._cached("convolution", desc, lambda: self._read_convolution(desc))

    def _read_convolution(self, desc) -> Convolution:
        require(bool(desc), "convolution descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        n, mode, compute, groups = c_int(), c_int(), c_int(), c_int()
        pads, strides, dilations = (c_int * 6)(), (c_int * 6)(), (c_int * 6)()
        self.call("cudnnGetConvolutionNdDescriptor", c_void_p(desc), 6, ctypes.byref(n), pads, strides, dilations,
                  ctypes.byref(mode), ctypes.byref(compute))
        self.call("cudnnGetConvolutionGroupCount", c_void_p(desc), ctypes.byref(groups))
        math = c_int()
        self.call("cudnnGetConvolutionMathType", c_void_p(desc), ctypes.byref(math))
        k = n.value
        return Convolution(tuple(pads[:k]), tuple(strides[:k]), tuple(dilations[:k]), mode.value, compute.value,
                           groups.value, math.value)

    def pooling(self, desc) -> Pooling:
        return self._cached("pooling", desc, lambda: self._read_pooling(desc))

    def _read_pooling(self, desc) -> Pooling:
        require(bool(desc), "pooling descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        mode, nan, n = c_int(), c_int(), c_int()
        window, pads, strides = (c_int * 6)(), (c_int * 6)(), (c_int * 6)()
        self.call("cudnnGetPoolingNdDescriptor", c_void_p(desc), 6, ctypes.byref(mode), ctypes.byref(nan),
                  ctypes.byref(n), window, pads, strides)
        k = n.value
        return Pooling(mode.value, nan.value, tuple(window[:k]), tuple(pads[:k]), tuple(strides[:k]))

    def activation(self, desc) -> tuple[int, int, float]:
        return self._cached("activation", desc, lambda: self._read_activation(desc))

    def _read_activation(self, desc) -> tuple[int, int, float]:
        """(mode, nan propagation, coef) where coef is swish's beta for SWISH."""
        require(bool(desc), "activation descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        mode, nan, coef = c_int(), c_int(), c_double()
        self.call("cudnnGetActivationDescriptor", c_void_p(desc), ctypes.byref(mode), ctypes.byref(nan),
                  ctypes.byref(coef))
        if mode.value == cd.ActivationMode.SWISH:
            self.call("cudnnGetActivationDescriptorSwishBeta", c_void_p(desc), ctypes.byref(coef))
        return mode.value, nan.value, coef.value

    def op_tensor(self, desc) -> tuple[int, int, int]:
        return self._cached("op_tensor", desc, lambda: self._read_op_tensor(desc))

    def _read_op_tensor(self, desc) -> tuple[int, int, int]:
        require(bool(desc), "op-tensor descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        op, compute, nan = c_int(), c_int(), c_int()
        self.call("cudnnGetOpTensorDescriptor", c_void_p(desc), ctypes.byref(op), ctypes.byref(compute),
                  ctypes.byref(nan))
        return op.value, compute.value, nan.value

    def reduce_tensor(self, desc) -> tuple[int, int, int, int, int]:
        return self._cached("reduce_tensor", desc, lambda: self._read_reduce_tensor(desc))

    def _read_reduce_tensor(self, desc) -> tuple[int, int, int, int, int]:
        """(op, compute type, nan propagation, indices mode, indices type)."""
        require(bool(desc), "reduce-tensor descriptor is null", Status.BAD_PARAM_NULL_POINTER)
        vals = [c_int() for _ in range(5)]
        self.call("cudnnGetReduceTensorDescriptor", c_void_p(desc), *(ctypes.byref(v) for v in vals))
        return tuple(v.value for v in vals)
