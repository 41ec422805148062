"""The CUDA runtime through ``cuda.bindings.runtime``: devices, streams, events, memory and copies.

Every call goes through :func:`check`, which turns a cuda.bindings result tuple into its values or a typed error.
"No driver" and "no device" both become :class:`NoDeviceError` with one message, so callers handle one case.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import types
import weakref

import numpy as np

from . import _native
from ._deferred import after_capture, capture_state, deferred, run_deferred  # noqa: F401 - pymagma.runtime's names
from .errors import CudaError, DeviceMemoryError, GraphCaptureError, NoDeviceError

#: cudaError_t names that mean "there is no usable GPU here" rather than "this call failed".
NO_DEVICE_ERRORS = frozenset({
    "cudaErrorInsufficientDriver", "cudaErrorNoDevice", "cudaErrorInitializationError",
    "cudaErrorStubLibrary", "cudaErrorDevicesUnavailable", "cudaErrorSystemDriverMismatch",
    "cudaErrorCompatNotSupportedOnDevice", "cudaErrorInvalidDevice",
})
OUT_OF_MEMORY_ERRORS = frozenset({"cudaErrorMemoryAllocation"})
#: cudaError_t names of an operation that a stream capture in progress forbids (or of a capture it invalidated).
CAPTURE_ERRORS = frozenset({
    "cudaErrorStreamCaptureUnsupported", "cudaErrorStreamCaptureInvalidated", "cudaErrorStreamCaptureImplicit",
    "cudaErrorCapturedEvent", "cudaErrorStreamCaptureIsolation", "cudaErrorStreamCaptureWrongThread",
    "cudaErrorStreamCaptureMerge", "cudaErrorStreamCaptureUnmatched", "cudaErrorStreamCaptureUnjoined",
})
CAPTURE_HINT = ("a CUDA graph is being captured: synchronizes, host reads and writes of device memory, pageable "
                "copies and allocations outside the graph's memory pool cannot be part of it; the capture is invalid "
                "from here (pymagma.graphs)")

NO_DEVICE_HINT = ("pymagma's device functions need an NVIDIA GPU and its driver; host-side functions "
                  "(pymagma.info(), library discovery, MAGMA argument checks) still work without one")


def _real_cudart():
    """``cuda.bindings.runtime`` limited to the entry points and data pymagma declares (imported on first use)."""
    from cuda.bindings import runtime

    names = _native.CUDART_ENTRY_POINTS + _native.CUDART_DATA
    return types.SimpleNamespace(**{name: getattr(runtime, name) for name in names})


_native.register("cudart", _real_cudart, lambda: _native.CUDART_ENTRY_POINTS)


def _rt():
    """The CUDA runtime in use (``cuda.bindings.runtime``'s shape; the simulator's when it is on)."""
    return _native.current.cudart


def error_name(err) -> str:
    """Symbolic name of a cudaError_t (or an int code)."""
    rt = _rt()
    try:
        return rt.cudaError_t(int(err)).name
    except ValueError:
        return f"cudaError({int(err)})"


def error_string(err) -> str:
    rt = _rt()
    try:
        status, text = rt.cudaGetErrorString(rt.cudaError_t(int(err)))
    except ValueError:
        return ""
    return text.decode() if isinstance(text, bytes) else str(text)


def _raise_for(err, call: str):
    name, text = error_name(err), error_string(err)
    if name in NO_DEVICE_ERRORS:
        raise NoDeviceError(f"no usable CUDA device ({name}: {text}) in {call}; {NO_DEVICE_HINT}")
    if name in OUT_OF_MEMORY_ERRORS:
        raise DeviceMemoryError(f"{call}: {name}: {text}")
    if name in CAPTURE_ERRORS:
        raise GraphCaptureError(int(err), name, f"{text}; {CAPTURE_HINT}", call)
    raise CudaError(int(err), name, text, call)


def active():
    """The CUDA runtime in use (the simulator's when it is on); a :func:`bound_call` made under another is stale."""
    return _native.current.cudart


def bound_call(name: str, *args):
    """``cudart.<name>(*args)`` of the runtime in use now, as a callable of no argument that raises as :func:`check`
    does: a call a loop makes again and again (a graph's launch, a staging buffer's copy) with its arguments
    converted once (streams and events to their handles). Bind again when :func:`active` changes."""
    fn = getattr(_rt(), name)
    args = tuple(_handle(a) if isinstance(a, (Stream, Event)) else a for a in args)

    def call():
        result = fn(*args)
        err = result[0] if type(result) is tuple else result
        if int(err) != 0:
            _raise_for(err, name)
    return call


def check(result, call: str = "CUDA call"):
    """Return the values of a cuda.bindings result ``(err, *values)`` (or a bare error code) or raise.

    No value -> ``None``; one value -> that value; several -> a tuple.  A failing code raises
    :class:`NoDeviceError` (no driver / no device), :class:`DeviceMemoryError` (out of memory) or
    :class:`CudaError` (anything else), naming ``call``.
    """
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if int(err) != 0:
        _raise_for(err, call)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


# ----------------------------------------------------------------------------------------------------- devices
def no_device_reason() -> str | None:
    """Why there is no usable device (``None`` when there is one)."""
    try:
        rt = _rt()
    except ImportError:
        return "cuda-python is not installed (pip install cuda-python)"
    err, count = rt.cudaGetDeviceCount()
    if int(err) != 0:
        return f"{error_name(err)}: {error_string(err)}"
    return None if count else "the driver reports no CUDA device"


@_native.resource("device_count")
def _ask_device_count(libraries) -> int:
    """The device count a set of native libraries reports, asked once (CUDA fixes the visible devices for the life
    of a process); 0 when there is no driver or no device."""
    err, count = libraries.cudart.cudaGetDeviceCount()
    return int(count) if int(err) == 0 and count else 0


def device_count() -> int:
    """Number of CUDA devices; 0 when there is no driver or no device.  Read once per set of native libraries (a
    resource of :mod:`pymagma._native`): a test that changes a simulated count deletes ``current.device_count``."""
    try:
        return _native.current.device_count
    except ImportError:
        return 0


def require_device() -> int:
    """Raise :class:`NoDeviceError` unless a CUDA device is usable; return the device count."""
    count = device_count()
    if count == 0:
        raise NoDeviceError(f"no usable CUDA device ({no_device_reason()}); {NO_DEVICE_HINT}")
    return count


_ORIGINAL = (require_device, device_count)  # (get_device skips the call while they are not replaced, as tests do)

def get_device() -> int:
    libraries = _native.current
    if not libraries.__dict__.get("device_count") or (require_device, device_count) != _ORIGINAL:
        require_device()  # (a count read already and not 0, and neither function replaced: nothing to ask again)
    return int(check(libraries.cudart.cudaGetDevice(), "cudaGetDevice"))  # (_rt(), inline)


def set_device(device: int) -> None:
    count = require_device()
    if not 0 <= int(device) < count:
        raise ValueError(f"device {device} does not exist: there are {count} device(s), numbered 0..{count - 1}")
    check(_rt().cudaSetDevice(int(device)), "cudaSetDevice")


_thread = threading.local()


@contextlib.contextmanager
def on_device(device: int):
    """Make ``device`` current for the block and restore the previous current device afterwards.

    The first use on each thread always sets the device: that binds the device's primary context to the thread
    (a new thread has none, and driver-API calls such as kernel launches need one), even when cudaGetDevice
    already reports that device."""
    previous, device = get_device(), int(device)
    if previous == device and _thread.__dict__.get("bound") is _native.current:
        yield
        return
    set_device(device)
    _thread.bound = _native.current  # bound for these libraries: the simulator's binding is not the device's
    try:
        yield
    finally:
        if previous != device:
            set_device(previous)


def synchronize() -> None:
    """Wait for all work on the current device."""
    require_device()
    check(_rt().cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    run_deferred()


def device_properties(device: int | None = None) -> dict:
    """A few properties of a device: name, compute capability, memory, multiprocessors."""
    require_device()
    device = get_device() if device is None else int(device)
    p = check(_rt().cudaGetDeviceProperties(device), "cudaGetDeviceProperties")
    name = p.name.split(b"\0", 1)[0].decode() if isinstance(p.name, bytes) else str(p.name)
    return {"device": device, "name": name, "compute_capability": (p.major, p.minor),
            "total_memory": int(p.totalGlobalMem), "multiprocessors": int(p.multiProcessorCount)}


def mem_get_info() -> tuple[int, int]:
    """(free, total) bytes of the current device."""
    require_device()
    free, total = check(_rt().cudaMemGetInfo(), "cudaMemGetInfo")
    return int(free), int(total)


def runtime_version() -> int:
    return int(check(_rt().cudaRuntimeGetVersion(), "cudaRuntimeGetVersion"))


def driver_version() -> int:
    """CUDA driver version (0 when no driver is installed)."""
    return int(check(_rt().cudaDriverGetVersion(), "cudaDriverGetVersion"))


# ----------------------------------------------------------------------------------------------------- streams, events
def _handle(obj) -> int:
    """An int handle from a Stream/Event, a cuda.bindings handle object, an int or None (the legacy stream)."""
    if obj is None:
        return 0
    if hasattr(obj, "handle"):
        return int(obj.handle)
    return int(obj)


class Stream:
    """A CUDA stream; ``Stream()`` creates one (destroyed when the object dies), ``Stream(handle=h)`` wraps one."""

    def __init__(self, handle: int | None = None, non_blocking: bool = False):
        if handle is not None:
            self.handle, self.owned = int(handle), False
            return
        require_device()
        rt = _rt()
        flags = rt.cudaStreamNonBlocking if non_blocking else rt.cudaStreamDefault
        stream = check(rt.cudaStreamCreateWithFlags(flags), "cudaStreamCreateWithFlags")
        self.handle, self.owned = int(stream), True
        self._finalizer = weakref.finalize(self, rt.cudaStreamDestroy, self.handle)  # by the runtime that made it

    def synchronize(self) -> None:
        check(_rt().cudaStreamSynchronize(self.handle), "cudaStreamSynchronize")

    def wait(self, event: Event) -> None:
        check(_rt().cudaStreamWaitEvent(self.handle, event.handle, 0), "cudaStreamWaitEvent")

    def __int__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"Stream(0x{self.handle:x}{'' if self.owned else ', borrowed'})"




class Event:
    """A CUDA event for ordering and timing."""

    def __init__(self, timing: bool = True):
        require_device()
        rt = _rt()
        flags = rt.cudaEventDefault if timing else rt.cudaEventDisableTiming
        self.handle = int(check(rt.cudaEventCreateWithFlags(flags), "cudaEventCreateWithFlags"))
        self._finalizer = weakref.finalize(self, rt.cudaEventDestroy, self.handle)

    def record(self, stream=None) -> Event:
        check(_rt().cudaEventRecord(self.handle, _handle(stream)), "cudaEventRecord")
        return self

    def synchronize(self) -> None:
        check(_rt().cudaEventSynchronize(self.handle), "cudaEventSynchronize")

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to ``end`` (both recorded)."""
        return float(check(_rt().cudaEventElapsedTime(self.handle, end.handle), "cudaEventElapsedTime"))


# ----------------------------------------------------------------------------------------------------- memory
def malloc(nbytes: int) -> int:
    """Allocate ``nbytes`` of device memory (raw; prefer :func:`pymagma.memory.alloc`). 0 bytes -> pointer 0."""
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    require_device()
    if nbytes == 0:
        return 0
    return int(check(_rt().cudaMalloc(nbytes), f"cudaMalloc({nbytes})"))


def free(ptr: int) -> None:
    if ptr:
        check(_rt().cudaFree(int(ptr)), "cudaFree")


def malloc_host(nbytes: int) -> int:
    """Allocate page-locked (pinned) host memory."""
    require_device()
    return int(check(_rt().cudaMallocHost(max(int(nbytes), 1)), f"cudaMallocHost({nbytes})"))


def free_host(ptr: int) -> None:
    if ptr:
        check(_rt().cudaFreeHost(int(ptr)), "cudaFreeHost")


def pinned_empty(shape, dtype=np.float32) -> np.ndarray:
    """A NumPy array in pinned host memory (freed when the array and its views die)."""
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(int(s) for s in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    ptr = malloc_host(nbytes)
    buf = (ctypes.c_char * max(nbytes, 1)).from_address(ptr)
    weakref.finalize(buf, deferred, _rt().cudaFreeHost, ptr)  # the runtime that allocated it frees it
    return np.frombuffer(buf, dtype=dtype, count=nbytes // dtype.itemsize).reshape(shape)


def _host_buffer(arr: np.ndarray, writable: bool) -> tuple[int, int]:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected a numpy.ndarray host buffer, got {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        raise ValueError("the host array must be C-contiguous (use numpy.ascontiguousarray)")
    if writable and not arr.flags.writeable:
        raise ValueError("the host array must be writable")
    return arr.__array_interface__["data"][0], arr.nbytes  # (ctypes.data's address, without its Python calls)


def _copy(dst: int, src: int, nbytes: int, kind: str, stream, call: str) -> None:
    rt = _native.current.cudart  # (_rt(), inline: every copy passes here)
    kind_value = getattr(rt.cudaMemcpyKind, kind)
    if nbytes == 0:
        return
    if stream is None:
        check(rt.cudaMemcpy(dst, src, nbytes, kind_value), call)
    else:
        check(rt.cudaMemcpyAsync(dst, src, nbytes, kind_value, _handle(stream)), call + "Async")


def memcpy_htod(dst: int, src: np.ndarray, stream=None) -> None:
    """Copy a C-contiguous host array to device pointer ``dst`` (async on ``stream`` when given)."""
    ptr, nbytes = _host_buffer(src, writable=False)
    _copy(int(dst), ptr, nbytes, "cudaMemcpyHostToDevice", stream, "cudaMemcpy(HtoD)")


def memcpy_dtoh(dst: np.ndarray, src: int, stream=None) -> np.ndarray:
    """Copy ``dst.nbytes`` from device pointer ``src`` into the C-contiguous host array ``dst``; return ``dst``."""
    ptr, nbytes = _host_buffer(dst, writable=True)
    _copy(ptr, int(src), nbytes, "cudaMemcpyDeviceToHost", stream, "cudaMemcpy(DtoH)")
    return dst


def memcpy_dtod(dst: int, src: int, nbytes: int, stream=None) -> None:
    _copy(int(dst), int(src), int(nbytes), "cudaMemcpyDeviceToDevice", stream, "cudaMemcpy(DtoD)")


def _copy_2d(dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: str, stream,
             call: str) -> None:
    if width == 0 or height == 0:
        return
    rt = _rt()
    kind_value = getattr(rt.cudaMemcpyKind, kind)
    if stream is None:
        check(rt.cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind_value), call)
    else:
        check(rt.cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind_value, _handle(stream)),
              call + "Async")


def memcpy_2d(dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, stream=None) -> None:
    """Strided device-to-device copy of ``height`` rows of ``width`` bytes."""
    _copy_2d(int(dst), int(dpitch), int(src), int(spitch), int(width), int(height), "cudaMemcpyDeviceToDevice",
             stream, "cudaMemcpy2D")


def _host_rows(arr: np.ndarray, call: str, writable: bool) -> tuple[int, int, int]:
    """(address, row width in bytes, rows) of the C-contiguous 2-D host array of a 2-D copy (also the simulator's)."""
    if np.ndim(arr) != 2:
        raise ValueError(f"{call} needs a 2-D host array, got shape {np.shape(arr)}")
    ptr, _ = _host_buffer(arr, writable=writable)
    return ptr, arr.shape[1] * arr.itemsize, arr.shape[0]


def memcpy_2d_dtoh(dst: np.ndarray, src: int, spitch: int, stream=None) -> np.ndarray:
    """Copy the rows of the C-contiguous 2-D host array ``dst`` from device rows ``spitch`` bytes apart at ``src``
    (a column-major device matrix lands transposed: one of its columns per row of ``dst``); return ``dst``.

    With ``stream`` the copy is enqueued there and may still be running on return: read ``dst`` only after the
    stream, or an event recorded on it after the copy, has been synchronized.  It overlaps other work only when
    ``dst`` is pinned (:func:`pinned_empty`)."""
    ptr, width, height = _host_rows(dst, "memcpy_2d_dtoh", writable=True)
    _copy_2d(ptr, width, int(src), int(spitch), width, height, "cudaMemcpyDeviceToHost", stream, "cudaMemcpy2D(DtoH)")
    return dst


def memcpy_2d_htod(dst: int, dpitch: int, src: np.ndarray, stream=None) -> None:
    """Copy the rows of the C-contiguous 2-D host array ``src`` to device rows ``dpitch`` bytes apart at ``dst``.

    With ``stream`` the copy is enqueued there: ``src`` must stay alive and unchanged until the stream has run it
    (synchronize the stream or an event recorded after the copy before writing ``src`` again)."""
    ptr, width, height = _host_rows(src, "memcpy_2d_htod", writable=False)
    _copy_2d(int(dst), int(dpitch), ptr, width, width, height, "cudaMemcpyHostToDevice", stream, "cudaMemcpy2D(HtoD)")


def memset(ptr: int, value: int, nbytes: int, stream=None) -> None:
    if nbytes == 0:
        return
    rt = _rt()
    if stream is None:
        check(rt.cudaMemset(int(ptr), int(value), int(nbytes)), "cudaMemset")
    else:
        check(rt.cudaMemsetAsync(int(ptr), int(value), int(nbytes), _handle(stream)), "cudaMemsetAsync")


# ----------------------------------------------------------------------------------------------------- graphs
CAPTURE_MODES = ("global", "thread_local", "relaxed")
run_after_capture = run_deferred  # (its earlier name)


def refuse_during_capture(what: str) -> None:
    """A GraphCaptureError naming ``what`` when the calling thread is capturing a CUDA graph (host reads and
    writes of device memory cannot be part of one)."""
    if capture_state.__dict__.get("graph") is not None:
        raise GraphCaptureError(int(_rt().cudaError_t.cudaErrorStreamCaptureUnsupported),
                                "cudaErrorStreamCaptureUnsupported", CAPTURE_HINT, what)


def _capture_mode(mode: str):
    rt = _rt()
    try:
        return {"global": rt.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal,
                "thread_local": rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal,
                "relaxed": rt.cudaStreamCaptureMode.cudaStreamCaptureModeRelaxed}[mode]
    except KeyError:
        raise ValueError(f"capture mode must be one of {CAPTURE_MODES}, got {mode!r}") from None


def begin_capture(stream, mode: str = "global") -> None:
    """Start capturing the work enqueued on ``stream`` (a created stream) into a CUDA graph."""
    check(_rt().cudaStreamBeginCapture(_handle(stream), _capture_mode(mode)), "cudaStreamBeginCapture")


def end_capture(stream) -> int:
    """End the capture of ``stream``: the graph handle (GraphCaptureError when the capture was invalidated)."""
    return int(check(_rt().cudaStreamEndCapture(_handle(stream)), "cudaStreamEndCapture"))


def is_capturing(stream) -> bool:
    """Whether ``stream`` is capturing (an invalidated capture counts: it has not ended)."""
    rt = _rt()
    status = check(rt.cudaStreamIsCapturing(_handle(stream)), "cudaStreamIsCapturing")
    return int(status) != int(rt.cudaStreamCaptureStatus.cudaStreamCaptureStatusNone)


@contextlib.contextmanager
def relaxed_capture():
    """The calling thread's capture mode relaxed for the block (as a graph's memory pool allocates with
    cudaMalloc while its graph is being captured), then restored."""
    rt = _rt()
    previous = check(rt.cudaThreadExchangeStreamCaptureMode(_capture_mode("relaxed")),
                     "cudaThreadExchangeStreamCaptureMode")
    try:
        yield
    finally:
        check(rt.cudaThreadExchangeStreamCaptureMode(previous), "cudaThreadExchangeStreamCaptureMode")


def graph_instantiate(graph: int) -> int:
    return int(check(_rt().cudaGraphInstantiate(graph, 0), "cudaGraphInstantiate"))


def graph_launch(graph_exec: int, stream) -> None:
    check(_rt().cudaGraphLaunch(graph_exec, _handle(stream)), "cudaGraphLaunch")
