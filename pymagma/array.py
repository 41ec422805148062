"""``DeviceArray``: an n-dimensional array in GPU memory, C-ordered like NumPy, with zero-copy interop.

Memory comes from the caching pool (:mod:`pymagma.memory`) and goes back when the last array viewing it dies.
Views (``reshape`` of contiguous arrays, ``.T``, basic slicing) share memory.  ``__cuda_array_interface__`` (v3)
and DLPack (``__dlpack__``/``__dlpack_device__``/``from_dlpack``) let CuPy and PyTorch tensors in and out without
copies.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from . import _checks, _native, dtypes, memory, runtime
from ._copies import copy_into  # noqa: F401 - pymagma.array.copy_into, its home before
from ._layouts import (  # noqa: F401 - pymagma.array's own names
    _INT,
    _RESHAPED,
    _c_strides_cached,
    _is_c_contiguous_cached,
    _normalize_shape,
    _reshaped,
    byte_extent,
    c_strides,
    index_view,
    is_c_contiguous,
)
from .errors import DeviceMemoryError


def _device_index(device) -> int | None:
    """``device`` as a non-negative int, or None (the current device)."""
    return None if device is None else _checks.count(device, "device", maximum=_checks.INT32_MAX)


class DeviceArray:
    """An array in device memory.  Build with :func:`asarray`, :func:`empty`, :func:`zeros`, :func:`ones`."""

    # an array's shape, strides and dtype never change: what follows from them (ndim, size, itemsize, nbytes,
    # is_c_contiguous) is worked out once, where the array is made, and kept in a slot (slots are stored and read
    # faster than a dict's entries, and every op's output and view is made on a hot path); ``__dict__`` takes any
    # other attribute a user sets
    __slots__ = ("dtype", "shape", "strides", "ptr", "owner", "device", "ndim", "size", "itemsize", "nbytes",
                 "is_c_contiguous", "__dict__", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype, ptr: int, strides=None, owner=None, device: int = 0):
        self.dtype = dtype = dtypes.check(dtype)
        self.shape = shape = _normalize_shape(shape)
        self.strides = c_strides(shape, dtype.itemsize) if strides is None else tuple(map(int, strides))
        if len(self.strides) != len(shape):
            raise ValueError(f"strides {self.strides} do not match shape {shape}")
        self.ptr = _checks.integer(ptr, "ptr")
        self.owner = owner
        self.device = _device_index(device)
        self.ndim, self.itemsize, self.size = len(shape), dtype.itemsize, math.prod(shape)
        self.nbytes = self.size * dtype.itemsize
        self.is_c_contiguous = _is_c_contiguous_cached(shape, self.strides, dtype.itemsize)

    @classmethod
    def _trusted(cls, shape: tuple, dtype: np.dtype, ptr: int, strides: tuple, owner, device: int) -> DeviceArray:
        """An array from values pymagma checked or computed (a tuple ``shape``, a supported ``np.dtype``, a tuple of
        byte ``strides``): no checks again."""
        a = object.__new__(cls)
        a.dtype, a.shape, a.strides, a.ptr, a.owner, a.device = dtype, shape, strides, ptr, owner, device
        itemsize = a.itemsize = dtype.itemsize
        a.ndim, a.size = len(shape), math.prod(shape)
        a.nbytes, a.is_c_contiguous = a.size * itemsize, _is_c_contiguous_cached(shape, strides, itemsize)
        return a

    @property
    def queue(self):
        q = _native.current.default_queues.get(self.device)  # the fast path of every kernel and BLAS call
        if q is not None:
            return q
        from .queue import default_queue

        return default_queue(self.device)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device})"

    # ---------------------------------------------------------------------------------------------- views
    def _view(self, offset: int, shape, strides) -> DeviceArray:
        """A view of this array; ``shape`` and ``strides`` (None: C-contiguous) are ints its caller computed."""
        shape, itemsize = tuple(shape), self.itemsize
        a = object.__new__(DeviceArray)  # DeviceArray._trusted, inline: every view passes here
        if strides is None:
            a.strides, a.is_c_contiguous = _c_strides_cached(shape, itemsize), True
        else:
            a.strides = strides = tuple(strides)
            a.is_c_contiguous = _is_c_contiguous_cached(shape, strides, itemsize)
        a.dtype, a.shape, a.ptr, a.owner, a.device = self.dtype, shape, self.ptr + offset, self, self.device
        a.ndim, a.itemsize, a.size = len(shape), itemsize, math.prod(shape)
        a.nbytes = a.size * itemsize
        return a

    def __getitem__(self, key) -> DeviceArray:
        """Basic indexing is a view; integer-array and boolean-mask keys (the array API's) copy on the device."""
        if type(key) is tuple:
            for k in key:
                if isinstance(k, DeviceArray):
                    return UPPER["getitem"](self, key)
        elif isinstance(key, DeviceArray):
            return UPPER["getitem"](self, key)
        offset, shape, strides = index_view(self.shape, self.strides, key)  # (tuples of ints)
        itemsize = self.itemsize
        a = object.__new__(DeviceArray)  # self._view(offset, shape, strides), inline
        a.dtype, a.shape, a.strides, a.ptr, a.owner, a.device = self.dtype, shape, strides, self.ptr + offset, self, \
            self.device
        a.ndim, a.itemsize, a.size = len(shape), itemsize, math.prod(shape)
        a.nbytes, a.is_c_contiguous = a.size * itemsize, _is_c_contiguous_cached(shape, strides, itemsize)
        return a

    def __setitem__(self, key, value) -> None:
        """``self[key] = value`` on the device (basic, integer-array or boolean-mask keys; value: array or scalar)."""
        UPPER["setitem"](self, key, value)

    def __iter__(self):
        """The sub-arrays along the first axis (elements of a 1-D array as 0-d arrays), views."""
        if not self.shape:
            raise TypeError("iteration over a 0-d DeviceArray")
        return (self[i] for i in range(self.shape[0]))

    def reshape(self, *shape) -> DeviceArray:
        return reshape_to(self, shape[0] if len(shape) == 1 and hasattr(shape[0], "__iter__") else shape)

    def ravel(self) -> DeviceArray:
        return self.reshape(-1)

    @property
    def T(self) -> DeviceArray:
        """All axes reversed (a view)."""
        shape, strides, ndim = self.shape[::-1], self.strides[::-1], self.ndim
        a = object.__new__(DeviceArray)  # DeviceArray._trusted, inline (its kept values are this array's)
        a.dtype, a.shape, a.strides, a.ptr, a.owner, a.device = self.dtype, shape, strides, self.ptr, self, self.device
        a.ndim, a.itemsize, a.size, a.nbytes = ndim, self.itemsize, self.size, self.nbytes
        a.is_c_contiguous = self.is_c_contiguous if ndim < 2 else _is_c_contiguous_cached(shape, strides, self.itemsize)
        return a

    def transpose(self, *axes) -> DeviceArray:
        if not axes:  # all axes reversed (.T): nothing to check
            return self.T
        if len(axes) == 1 and hasattr(axes[0], "__iter__"):
            axes = tuple(axes[0])
        axes = _checks.sizes(axes, "transpose: axes")
        if any(not -self.ndim <= a < self.ndim for a in axes):
            raise ValueError(f"transpose: axes {axes} out of range for a {self.ndim}-D array")
        axes = tuple(range(self.ndim))[::-1] if not axes else tuple(a % self.ndim for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"axes {axes} are not a permutation of {tuple(range(self.ndim))}")
        return self._view(0, tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes))

    @property
    def mT(self) -> DeviceArray:
        """Transpose of the last two axes (a view)."""
        ndim = self.ndim
        if ndim < 2:
            raise ValueError("mT needs at least 2 dimensions")
        (*lead, m, n), (*steps, sm, sn) = self.shape, self.strides
        shape, strides = (*lead, n, m), (*steps, sn, sm)
        a = object.__new__(DeviceArray)  # DeviceArray._trusted, inline (its kept values are this array's)
        a.dtype, a.shape, a.strides, a.ptr, a.owner, a.device = self.dtype, shape, strides, self.ptr, self, self.device
        a.ndim, a.itemsize, a.size, a.nbytes = ndim, self.itemsize, self.size, self.nbytes
        a.is_c_contiguous = _is_c_contiguous_cached(shape, strides, self.itemsize)
        return a

    # ---------------------------------------------------------------------------------------------- data movement
    def get(self) -> np.ndarray:
        """Copy to a new NumPy array (after the array's queue has finished its work)."""
        runtime.refuse_during_capture("DeviceArray.get (a host read of device memory)")
        out = np.empty(self.shape, self.dtype)
        if self.size == 0:
            return out
        self._sync()
        if "read_check" in UPPER:  # an out-of-range integer index found on the device rides on this read
            UPPER["read_check"](self.device)
        if self.is_c_contiguous:
            return runtime.memcpy_dtoh(out, self.ptr)
        lo, hi = byte_extent(self.shape, self.strides, self.itemsize)
        span = runtime.memcpy_dtoh(np.empty(hi - lo, np.uint8), self.ptr + lo)
        out[...] = np.ndarray(self.shape, self.dtype, buffer=span, offset=-lo, strides=self.strides)
        return out

    def _sync(self) -> None:
        q = _native.current.default_queues.get(self.device)
        if q is not None:
            q.synchronize()

    def set(self, host) -> DeviceArray:
        """Copy host data (anything ``numpy.asarray`` takes, cast to this dtype) of the same shape into this array;
        returns ``self``.  A DeviceArray source is a TypeError: use :func:`copy_into` (device to device)."""
        if isinstance(host, DeviceArray):
            raise TypeError("DeviceArray.set takes host data; copy device to device with pymagma.array.copy_into")
        runtime.refuse_during_capture("DeviceArray.set (a host write of device memory)")
        host = np.asarray(host, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"shape mismatch: host {host.shape} vs device {self.shape}")
        self._sync()
        if self.is_c_contiguous:
            runtime.memcpy_htod(self.ptr, np.ascontiguousarray(host))
        elif self.ndim >= 2 and self.strides[-1] != self.itemsize and self.strides[-2] == self.itemsize:
            copy_into(self.mT, asarray(np.ascontiguousarray(np.swapaxes(host, -1, -2)), device=self.device))
        else:
            copy_into(self, asarray(np.ascontiguousarray(host), device=self.device))
        return self

    def copy(self) -> DeviceArray:
        """A C-contiguous copy on the device."""
        out = empty(self.shape, self.dtype, device=self.device)
        copy_into(out, self)
        return out

    def astype(self, dtype, copy: bool = True, device=None) -> DeviceArray:
        """This array converted to ``dtype`` (a copy unless ``copy=False`` and nothing changes); the array API's
        dtypes convert with the device's cast kernel, others (float16, bfloat16, complex) through the host."""
        dtype = dtypes.check(dtype)
        supported = UPPER["array_api_dtypes"]
        if dtype in supported and self.dtype in supported:
            return UPPER["astype"](self, dtype, copy=copy, device=device)
        if dtype == self.dtype:
            return self.copy() if copy else self
        return asarray(self.get().astype(dtype), device=self.device)

    def __array__(self, dtype=None, copy=None):
        """Refused, as CuPy does: an implicit copy to the host would hide a device synchronisation and a transfer."""
        raise TypeError("implicit conversion of a DeviceArray to a NumPy array is not allowed: call .get() (or "
                        "pymagma.to_numpy) to copy it to the host explicitly")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """Refused: a NumPy function (or a NumPy array's operator) on a DeviceArray would copy it to the host."""
        raise TypeError(f"implicit conversion of a DeviceArray to a NumPy array is not allowed (numpy.{ufunc.__name__}"
                        " met a DeviceArray, maybe beside a host NumPy array): call .get() to copy it to the host, or "
                        "compute on the device with pymagma.array_api")

    # ---------------------------------------------------------------------------------------------- array API
    def __array_namespace__(self, /, *, api_version=None):
        """The array API namespace, :mod:`pymagma.array_api`."""
        return UPPER["namespace"](api_version)

    def to_device(self, device, /, *, stream=None) -> DeviceArray:
        """This array when ``device`` is its own; copies between devices are not implemented (a ValueError)."""
        if _device_index(device) != self.device:
            raise ValueError(f"to_device: copies between devices are not implemented (array on {self.device}, "
                             f"asked {device})")
        return self

    def _python_scalar(self, convert):
        if self.ndim:
            raise TypeError(f"only 0-d arrays convert to Python scalars; this one has shape {self.shape}")
        return convert(self.get()[()])

    def __bool__(self) -> bool:
        return self._python_scalar(bool)

    def __int__(self) -> int:
        return self._python_scalar(int)

    def __float__(self) -> float:
        return self._python_scalar(float)

    def __complex__(self) -> complex:
        return self._python_scalar(complex)

    def __index__(self) -> int:
        if self.dtype.kind not in "iu":
            raise TypeError(f"__index__ needs an integer array, not {self.dtype}")
        return self._python_scalar(int)

    __hash__ = object.__hash__  # arrays stay usable as dict keys and set members (by identity), as before

    def __matmul__(self, other):
        return _matmul(self, other)

    def __rmatmul__(self, other):
        return _matmul(other, self)

    def __imatmul__(self, other):
        _writable(self, "in-place matmul")
        result = _matmul(self, other)
        if result is NotImplemented:
            return result
        if result.shape != self.shape or result.dtype != self.dtype:
            raise TypeError(f"in-place matmul would change the array's shape {self.shape} or dtype {self.dtype} to "
                            f"{result.shape} {result.dtype}")
        _write_into(self, result)
        return self

    # ---------------------------------------------------------------------------------------------- interop
    @property
    def __cuda_array_interface__(self) -> dict:
        if dtypes.is_bfloat16(self.dtype):  # AttributeError, so hasattr() probes fall back to DLPack
            raise AttributeError("__cuda_array_interface__ has no typestr for bfloat16; exchange it through DLPack "
                                 "(torch.from_dlpack(x), pymagma.from_dlpack(t))")
        # Stream 1 is the legacy default stream: an event recorded there follows both the default queue's work
        # (a blocking stream) and pymagma's legacy-stream copies and memsets, so consumers wait for all of it.
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None if self.is_c_contiguous else self.strides,
            "stream": 1,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        from . import _dlpack

        return _dlpack.kDLCUDA, self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule viewing this array: versioned (DLPack 1.0) when ``max_version`` allows it, else the
        unversioned kind; the queue's work is finished first unless ``stream == -1``.  ``copy=True`` exports a
        device copy; ``dl_device=(1, 0)`` (kDLCPU, as ``numpy.from_dlpack(x, device="cpu")`` asks) exports a host
        copy of any array (bool, 0-d, strided views), or with ``copy=False`` a view of memory the host can read
        (pinned or managed) and a BufferError for device memory.  Bad keywords: see ``_dlpack.export_arguments``."""
        from . import _dlpack

        stream, max_version, dl_device = _dlpack.export_arguments(stream, max_version, dl_device, copy,
                                                                  self.__dlpack_device__())
        if dl_device is not None and dl_device[0] == _dlpack.kDLCPU:  # numpy.from_dlpack(x, device="cpu")
            if copy is False:
                if not _dlpack.host_readable(self.ptr):
                    raise BufferError("DeviceArray.__dlpack__(dl_device=CPU, copy=False): device memory reaches "
                                      "the host only by a copy (the standard's BufferError); copy=None or True copies")
                self._sync()
                versioned = max_version is not None and max_version[0] >= _dlpack.VERSION[0]
                return _dlpack.to_capsule(self, _dlpack.kDLCPU, versioned=versioned)
            host = self.get()  # any dtype, 0-d and strided views: a C-ordered host copy
            return host.__dlpack__() if max_version is None else host.__dlpack__(max_version=max_version)
        if copy:
            source = self.astype(self.dtype) if self.dtype in UPPER["array_api_dtypes"] else self.copy()
            return source.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=False)
        if stream != -1:  # the consumer reads on its stream: finish the queue's and the legacy stream's work
            self._sync()
            with runtime.on_device(self.device):  # the legacy stream of the array's device
                runtime.Stream(handle=0).synchronize()
        versioned = max_version is not None and max_version[0] >= _dlpack.VERSION[0]
        return _dlpack.to_capsule(self, _dlpack.kDLCUDA, versioned=versioned)


_device_count = runtime.device_count  # (read as a resource by on_arrays_device unless replaced, as tests do)


def on_arrays_device(fn):
    """Decorator: with several GPUs, run ``fn`` with the device of its first DeviceArray argument current (MAGMA
    queues, cuBLAS and cuDNN handles belong to one device), then restore the caller's device.  With one GPU, or
    none (bad input is still reported before any device call), or no DeviceArray argument, ``fn`` runs as is."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        count = _native.current.__dict__.get("device_count") if runtime.device_count is _device_count else None
        if (runtime.device_count() if count is None else count) > 1:  # (the count read once: no call per routine)
            for a in (*args, *kwargs.values()):
                if isinstance(a, DeviceArray):
                    with runtime.on_device(a.device):
                        return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return run


def require_device_array(x, what: str) -> DeviceArray:
    """``x`` when it is a DeviceArray, else a TypeError naming ``what`` and the fix (no host data as a pointer)."""
    if not isinstance(x, DeviceArray):
        raise TypeError(f"{what}: expected a pymagma.DeviceArray, got {type(x).__name__} (use pymagma.asarray)")
    return x


# ---------------------------------------------------------------------------------------------------- creation
def empty(shape, dtype=np.float32, device: int | None = None) -> DeviceArray:
    """An uninitialized C-contiguous DeviceArray.  ``shape``: an int or a sequence of non-negative ints (NumPy
    integers too; a float is a TypeError); ``device``: a device index or None for the current device."""
    if type(shape) is tuple and set(map(type, shape)) <= _INT and (not shape or min(shape) >= 0):
        try:  # a supported dtype (or its scalar type) and a tuple of ints: no call per check (an op's own output)
            dt = _SUPPORTED.get(dtype)
        except TypeError:  # an unhashable dtype description: dtypes.check names what is wrong
            dt = None
        if dt is not None:
            return _allocated(shape, dt, device)
    return _allocated(_normalize_shape(shape), dtypes.check(dtype), device)


#: the supported NumPy dtypes (and their scalar types), each to its dtype: :func:`empty`'s look-up without a call
_SUPPORTED = {**{d: d for d in dtypes.SUPPORTED}, **{d.type: d for d in dtypes.SUPPORTED}}


def _allocated(shape: tuple, dtype: np.dtype, device: int | None) -> DeviceArray:
    """:func:`empty` of a checked shape (a tuple of non-negative ints: a NumPy array's own) and supported dtype."""
    if type(device) is not int or not 0 <= device <= _checks.INT32_MAX:  # (a plain index needs no call)
        device = runtime.get_device() if device is None else _device_index(device)  # get_device: a device is required
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes >= 2**63:  # NumPy's ValueError for an array no address space holds (was ctypes' OverflowError)
        raise ValueError(f"array is too big: shape {shape} of {dtype} needs {nbytes} bytes, more than any device "
                         "can address (2**63 - 1)")
    try:
        return _empty(shape, dtype, device)
    except MemoryError as exc:
        raise _out_of_memory(shape, dtype, device, exc) from None


def _out_of_memory(shape: tuple, dtype: np.dtype, device: int, exc: MemoryError) -> DeviceMemoryError:
    """NumPy's words for an allocation that failed, with the device and what the allocator said."""
    nbytes = math.prod(shape) * dtype.itemsize
    return DeviceMemoryError(f"Unable to allocate {nbytes / 2**30:.3g} GiB for an array with shape {shape} and data "
                             f"type {dtype} on device {device} ({str(exc) or 'out of memory'})")


def _empty(shape: tuple, dtype: np.dtype, device: int) -> DeviceArray:
    """:func:`empty` for pymagma's own outputs, whose shape (a tuple of non-negative ints), dtype (a supported
    ``np.dtype``) and device come from checked arrays: nothing is checked again.  The array owns its block: its
    token in a shared pool gives the block back when the array dies (no Allocation, no finalizer; ``owner`` is
    the pool; a graph's relaxed pool: a keeper, ``owner``, gives it back)."""
    pool = _overriding and _override.__dict__.get("pool") or _native.current.memory_pool
    kept = pool.outputs.get((shape, dtype, device))  # (None: not kept yet, 0 bytes, or a measured pool)
    if kept is None:
        out = object.__new__(DeviceArray)
        strides, size, itemsize, nbytes, ptr = _lease(pool, out, shape, dtype, device)
    else:  # memory.Pool.lease, inline: every op's output passes here
        strides, size, itemsize, nbytes, bucket, blocks, returner, live = kept
        next(pool._requests)
        out = object.__new__(DeviceArray)
        try:  # a cached block
            ptr = blocks.pop().ptr
        except IndexError:
            ptr = pool.new_block(device, bucket)
        (token := _Block(out, returner)).ptr = ptr
        live[ptr] = token
        out.owner = pool  # (as an Allocation did: the array keeps its pool, and its runtime, alive)
    out.dtype, out.shape, out.strides, out.ptr, out.device = dtype, shape, strides, ptr, device
    out.is_c_contiguous, out.size, out.itemsize, out.ndim, out.nbytes = True, size, itemsize, len(shape), nbytes
    return out


_Block, _override, _overriding = memory._Block, memory._override, memory._overriding
_lease, _layout, _LAYOUTS = memory.lease_output, memory._layout, memory._LAYOUTS  # (their home: memory)
_ORIGINAL = runtime._ORIGINAL  # (runtime.require_device and device_count, as runtime.get_device compares them)


def zeros(shape, dtype=np.float32, device: int | None = None) -> DeviceArray:
    """A C-contiguous DeviceArray of zeros (arguments as :func:`empty`)."""
    out = empty(shape, dtype, device)
    if out.nbytes:  # on the array's queue: ordered with its kernels, no legacy-stream sync, capturable
        runtime.memset(out.ptr, 0, out.nbytes, stream=out.queue.stream)
    return out


def full(shape, value, dtype=np.float32, device: int | None = None) -> DeviceArray:
    """A C-contiguous DeviceArray filled with ``value`` (arguments as :func:`empty`)."""
    return asarray(np.full(_normalize_shape(shape), value, dtype=dtypes.check(dtype)), device=device)


def ones(shape, dtype=np.float32, device: int | None = None) -> DeviceArray:
    """A C-contiguous DeviceArray of ones (arguments as :func:`empty`)."""
    return full(shape, 1, dtype, device)


def from_cuda_array_interface(obj) -> DeviceArray:
    """Wrap an object exposing ``__cuda_array_interface__`` (CuPy, Numba, PyTorch) without copying."""
    iface = obj.__cuda_array_interface__
    if iface.get("mask") is not None:
        raise ValueError("masked CUDA arrays are not supported")
    shape = tuple(iface["shape"])
    dtype = np.dtype(iface["typestr"])
    stream = iface.get("stream")
    if stream not in (None, 0):
        runtime.Stream(handle=int(stream)).synchronize()
    ptr = int(iface["data"][0] or 0)
    device = _device_of(ptr)
    return DeviceArray(shape, dtype, ptr, iface.get("strides"), owner=obj, device=device)


def _device_of(ptr: int) -> int:
    if not ptr:
        return runtime.get_device()
    rt = runtime._rt()
    attrs = runtime.check(rt.cudaPointerGetAttributes(ptr), "cudaPointerGetAttributes")
    return int(attrs.device)


def from_dlpack(obj) -> DeviceArray:
    """Import a CUDA tensor through DLPack (PyTorch, CuPy, JAX) without copying."""
    from . import _dlpack

    return _dlpack.import_tensor(obj, DeviceArray)


def asarray(obj, dtype=None, device: int | None = None) -> DeviceArray:
    """A DeviceArray from a DeviceArray (no copy unless dtype differs), a CUDA array (CAI / DLPack, no copy) or any
    host array-like that ``numpy.asarray`` takes (copied to the device, C-ordered).  ``dtype``: one pymagma supports
    (a TypeError otherwise); ``device``: a device index or None for the current device.  A host copy is one
    synchronous ``cudaMemcpy`` (pageable or pinned memory alike), made in this one frame for a C-contiguous NumPy
    array of a supported dtype (every batch): get_device, _empty, runtime._copy and check inline, raising as they do."""
    if obj.__class__ is not np.ndarray or dtype is not None or not obj.flags.c_contiguous \
            or (checked := _SUPPORTED.get(obj.dtype)) is None:
        if isinstance(obj, DeviceArray):
            return obj if dtype is None or dtypes.check(dtype) == obj.dtype else obj.astype(dtype)
        if hasattr(obj, "__cuda_array_interface__"):
            arr = from_cuda_array_interface(obj)
            return arr if dtype is None or dtypes.check(dtype) == arr.dtype else arr.astype(dtype)
        if hasattr(obj, "__dlpack_device__") and not isinstance(obj, np.ndarray):
            from . import _dlpack

            if obj.__dlpack_device__()[0] in (_dlpack.kDLCUDA, _dlpack.kDLCUDAManaged):
                arr = from_dlpack(obj)
                return arr if dtype is None or dtypes.check(dtype) == arr.dtype else arr.astype(dtype)
        obj = np.asarray(obj, dtype=None if dtype is None else dtypes.check(dtype), order="C")  # (0-d stays 0-d)
        checked = dtypes.check(obj.dtype)
    # the upload of the C-contiguous ndarray ``obj`` of the supported dtype ``checked``
    if runtime.capture_state.__dict__.get("graph") is not None:  # (refuse_during_capture's test, inline)
        runtime.refuse_during_capture("pymagma.asarray of host data (a host write of device memory)")
    libraries = _native.current
    if device is None:  # (runtime.get_device, inline; a NumPy array's shape and size need no check)
        if not libraries.__dict__.get("device_count") or (runtime.require_device, runtime.device_count) != _ORIGINAL:
            runtime.require_device()
        if int((result := libraries.cudart.cudaGetDevice())[0]) != 0:  # (runtime.check, inline)
            runtime._raise_for(result[0], "cudaGetDevice")
        device = int(result[1])
    elif type(device) is not int or not 0 <= device <= _checks.INT32_MAX:
        device = _device_index(device)
    shape = obj.shape
    pool = _overriding and _override.__dict__.get("pool") or libraries.memory_pool
    kept = pool.outputs.get((shape, checked, device))  # (_empty, inline)
    out = object.__new__(DeviceArray)
    try:
        if kept is None:
            strides, size, itemsize, nbytes, ptr = _lease(pool, out, shape, checked, device)
        else:
            strides, size, itemsize, nbytes, bucket, blocks, returner, live = kept
            next(pool._requests)
            try:  # a cached block
                ptr = blocks.pop().ptr
            except IndexError:
                ptr = pool.new_block(device, bucket)
            (token := _Block(out, returner)).ptr = ptr
            live[ptr] = token
            out.owner = pool
    except MemoryError as exc:
        raise _out_of_memory(shape, checked, device, exc) from None
    if nbytes:  # (runtime._copy of a C-contiguous ndarray, inline: a 0-byte copy is no call, as there; a failure
        # drops ``out``, whose token gives the block back)
        result = (rt := libraries.cudart).cudaMemcpy(ptr, obj.__array_interface__["data"][0], nbytes,
                                                     rt.cudaMemcpyKind.cudaMemcpyHostToDevice)
        if int(err := result[0] if isinstance(result, tuple) else result) != 0:  # (runtime.check, inline)
            runtime._raise_for(err, "cudaMemcpy(HtoD)")
    out.dtype, out.shape, out.strides, out.ptr, out.device = checked, shape, strides, ptr, device
    out.is_c_contiguous, out.size, out.itemsize, out.ndim, out.nbytes = True, size, itemsize, len(shape), nbytes
    return out


def to_numpy(obj) -> np.ndarray:
    """A NumPy array from a DeviceArray (an explicit copy, as ``.get()``) or anything NumPy accepts."""
    return obj.get() if isinstance(obj, DeviceArray) else np.asarray(obj)


def reshape_to(a: DeviceArray, shape) -> DeviceArray:
    """``a`` with ``shape`` (an int or a sequence of ints, one of them -1 at most): a view of ``a``, or of a device
    copy of it (one kernel) when ``a`` is not C-contiguous.  ``DeviceArray.reshape`` and magmadnn's device op
    ``reshape`` (one call where it runs per layer call)."""
    if type(shape) is not tuple:
        shape = tuple(shape) if hasattr(shape, "__iter__") else (shape,)
    size = a.size  # the new shape from _RESHAPED once checked (no call per reshape of ints)
    new = _RESHAPED.get((size, shape)) if set(map(type, shape)) <= _INT else None
    new = _reshaped(size, shape) if new is None else new
    base = a if a.is_c_contiguous else UPPER["copy_any"](a)  # (pymagma.kernels': on the device)
    dtype = base.dtype
    out = object.__new__(DeviceArray)  # base._view(0, new, C strides), inline
    out.dtype, out.shape, out.strides, out.ptr, out.owner, out.device = \
        dtype, new, _c_strides_cached(new, dtype.itemsize), base.ptr, base, base.device
    out.ndim, out.itemsize, out.size, out.nbytes = len(new), dtype.itemsize, size, base.nbytes
    out.is_c_contiguous = True
    return out


# ---------------------------------------------------------------------------------------------------- operators
#: What DeviceArray's operators and methods run from the floors above, filled by those floors when they are imported
#: (as NumPy's ndarray reaches its ufuncs): pymagma.array_api its elementwise functions by name and "getitem",
#: "setitem", "astype", "matmul", "namespace", "array_api_dtypes"; pymagma.blas "gemm"; pymagma.kernels "copy" and
#: "copy_any".
#: ``import pymagma`` imports them all, so the table is full before any array exists.
UPPER: dict = {}
#: Python operator -> the array API function it runs (pymagma.array_api, the device's elementwise kernels)
_BINARY_OPERATORS = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
                     "floordiv": "floor_divide", "mod": "remainder", "pow": "pow", "and": "bitwise_and",
                     "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
                     "rshift": "bitwise_right_shift"}
_COMPARISONS = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
                "ge": "greater_equal"}
_UNARY_OPERATORS = {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "bitwise_invert"}


def _operand(other) -> bool:
    """Whether an operator takes ``other`` (a DeviceArray or a Python scalar); a host array is a TypeError naming
    the explicit copies (NumPy defers to us: ``__array_ufunc__ = None``); anything else is NotImplemented."""
    if isinstance(other, DeviceArray | bool | int | float | complex):
        return True
    if isinstance(other, np.generic):  # np.float64 is a Python float, taken above
        raise TypeError(f"a DeviceArray meets a NumPy scalar ({type(other).__name__}): pass a Python scalar "
                        "(int(v), float(v), complex(v), bool(v)), which takes the array's dtype as the standard says, "
                        "or a device array of its dtype (pymagma.array_api.asarray(v))")
    if isinstance(other, np.ndarray):
        raise TypeError("a DeviceArray meets a host NumPy array: copy it to the device (pymagma.array_api.asarray) "
                        "or the DeviceArray to the host (numpy.from_dlpack(x, device='cpu')) first")
    return False


def _writable(x: DeviceArray, what: str) -> None:
    """A ValueError for a write into a broadcast view (a zero stride over more than one element): its elements
    share memory and would race for the value.  NumPy's broadcast views are read-only too."""
    if any(s == 0 and n > 1 for n, s in zip(x.shape, x.strides)):
        raise ValueError(f"{what}: the array is a broadcast view (shape {x.shape}, strides {x.strides}) whose "
                         "elements share memory, so it is read-only, as in NumPy; write into a copy")


def _write_into(dst: DeviceArray, src: DeviceArray) -> None:
    """``src`` (C-contiguous) into ``dst`` of any layout on the device: a memcpy, or the strided copy kernel on the
    bits (each element as a uint8, int32 or int64 of its size, or a trailing axis of them: complex128 as 2 int64)."""
    if dst.is_c_contiguous:
        copy_into(dst, src)
        return
    if dst.dtype.name not in _BITWISE_COPIED:
        dst, src = _as_bits(dst), _as_bits(src)
    UPPER["copy"](src, out=dst)


_BITWISE_COPIED = frozenset(("float32", "float64", "int32", "int64", "uint8"))
_BITS = {1: ("uint8", 1), 2: ("uint8", 2), 4: ("int32", 1), 8: ("int64", 1), 16: ("int64", 2)}


def _as_bits(a: DeviceArray) -> DeviceArray:
    """A view of ``a``'s bytes in a dtype the copy kernel takes (see :func:`_write_into`)."""
    name, parts = _BITS[a.itemsize]
    dt = np.dtype(name)
    shape, strides = (a.shape, a.strides) if parts == 1 else ((*a.shape, parts), (*a.strides, dt.itemsize))
    return DeviceArray._trusted(shape, dt, a.ptr, strides, a, a.device)


#: dtypes ``@`` hands straight to MAGMA's (or cuBLAS's half) gemm when both operands have it (bfloat16 too, below);
#: a set of dtypes, since ``dtype.name`` costs microseconds
_GEMM_DTYPES = frozenset(np.dtype(n) for n in ("float32", "float64", "complex64", "complex128", "float16"))


def _matmul(a, b):
    """``a @ b``: MAGMA's gemm for two arrays of one BLAS or half dtype (:func:`pymagma.blas.matmul`), else the
    array API's matmul (promotion, exact integer products; its TypeError for what it does not take)."""
    if isinstance(a, DeviceArray) and isinstance(b, DeviceArray) and a.dtype == b.dtype and (
            a.dtype in _GEMM_DTYPES or dtypes.is_bfloat16(a.dtype)):
        return UPPER["gemm"](a, b)
    if not (_operand(a) and _operand(b)):
        return NotImplemented
    return UPPER["matmul"](a, b)


def _define_operators() -> None:
    def binary(name, reflected):
        def op(self, other):
            if not _operand(other):
                return NotImplemented
            return UPPER[name](other, self) if reflected else UPPER[name](self, other)
        return op

    def inplace(name):
        def op(self, other):
            if not _operand(other):
                return NotImplemented
            _writable(self, f"in-place {name}")
            result = UPPER[name](self, other)
            if result.shape != self.shape or result.dtype != self.dtype:
                raise TypeError(f"in-place {name} would change the array's shape {self.shape} or dtype {self.dtype} "
                                f"to {result.shape} {result.dtype}")
            _write_into(self, result)
            return self
        return op

    def unary(name):
        def op(self):
            return UPPER[name](self)
        return op

    for py, name in _BINARY_OPERATORS.items():
        setattr(DeviceArray, f"__{py}__", binary(name, False))
        setattr(DeviceArray, f"__r{py}__", binary(name, True))
        setattr(DeviceArray, f"__i{py}__", inplace(name))
    for py, name in _COMPARISONS.items():
        setattr(DeviceArray, f"__{py}__", binary(name, False))
    for py, name in _UNARY_OPERATORS.items():
        setattr(DeviceArray, f"__{py}__", unary(name))
    DeviceArray.__hash__ = object.__hash__  # identity hashing is kept beside the elementwise ==


_define_operators()
