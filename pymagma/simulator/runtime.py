"""The CUDA runtime of the simulator, shaped like ``cuda.bindings.runtime``: one device (or a few) whose memory is host
memory, copies as ``memmove``, ``memset`` as ``memset``, streams whose work runs as late as CUDA's ordering rules
allow, and events.  pymagma's own :mod:`pymagma.runtime` runs unchanged on top of it.

Streams: work on a stream the program created (``cudaStreamCreate``, or a MAGMA queue, the default queue included)
is queued and runs only when something orders it: a synchronize of that stream or of an event recorded after it,
another stream waiting on such an event (the waiting stream's later work runs after it), a synchronous copy or
memset or an event recorded on the legacy stream (the legacy default stream waits for blocking streams, and
``default_queue``'s stream is one, as the stream ``magma_queue_create`` makes), a device synchronize, or freeing
memory.  So a host that reads a buffer before waiting for the copy into it, or a stream that uses data without
waiting for the event of the stream that produces it, sees stale data here too, whatever the timing (an
asynchronous copy into pageable host memory returns once it is done, as CUDA documents; into pinned memory it
waits like the rest).  Work on the legacy stream runs at once, after the blocking streams' work.

Every block "cudaMalloc" hands out is a ctypes buffer kept alive in :attr:`SimulatedCudart.blocks` until it is
freed; freeing a pointer it did not hand out (or a pinned one with cudaFree) is cudaErrorInvalidValue.
Copies and memsets that start inside a block must stay inside it (an overrun raises
:class:`~pymagma.errors.DeviceMemoryError` instead of corrupting the host heap); pointers the simulator did not
allocate (foreign host memory handed in on purpose) are not checked.
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import os
import threading
import time
import types

from cuda.bindings import runtime as _CUDA  # its enums and flags only: data, no native call

from .. import _native
from ..errors import DeviceMemoryError, GraphCaptureError, NotSimulatedError
from .host_reads import HostReads
from .streams import LEGACY, Streams, _handle, _handles, _Work

DEVICE_NAME = "pymagma simulator"
COMPUTE_CAPABILITY = (9, 0)
DEVICE_COUNT = 1  #: devices the simulator reports (all share host memory)
MAX_THREADS_PER_BLOCK = 1024

SIMULATED_DRIVER_VERSION = 13000  #: what cudaDriverGetVersion answers
_KINDS = {int(_CUDA.cudaMemcpyKind.cudaMemcpyHostToDevice): (True, False),  # kind -> (from host, to host)
          int(_CUDA.cudaMemcpyKind.cudaMemcpyDeviceToHost): (False, True),
          int(_CUDA.cudaMemcpyKind.cudaMemcpyDeviceToDevice): (False, False),
          int(_CUDA.cudaMemcpyKind.cudaMemcpyHostToHost): (True, True),
          int(_CUDA.cudaMemcpyKind.cudaMemcpyDefault): (False, False)}


def host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory: the simulated device's memory."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX hosts
        return 1 << 34, 1 << 34


class _Event:
    """A simulated event: the work it marks on its stream when recorded (synchronizing it runs that work), and the
    host clock at that moment (``cudaEventElapsedTime`` is wall time between two records)."""

    def __init__(self, timing: bool):
        self.timing, self.time, self.mark, self.recorded = timing, None, None, False
        self.captured: int | None = None  # the stream whose capture it was last recorded in


class _Capture:
    """A stream capture in progress: its mode, the thread that began it, the work recorded (the graph's nodes, in
    order), the blocks allocated while it ran (the graph's memory), and whether an invalid operation spoiled it."""

    def __init__(self, mode: int, thread: int):
        self.mode, self.thread = mode, thread
        self.nodes: list = []
        self.blocks: set[int] = set()
        self.invalid = False


def _status(name: str):
    return getattr(_CUDA.cudaError_t, name)


def _ok(*values):
    return (_CUDA.cudaError_t.cudaSuccess, *values)


class SimulatedCudart(Streams):
    """The CUDA runtime of the simulated device, shaped like ``cuda.bindings.runtime``: each function of
    :data:`pymagma._native.CUDART_ENTRY_POINTS` takes the same arguments and returns ``(cudaError_t, *values)``;
    the enums and flags are the real module's.  Any other runtime function raises :class:`NotSimulatedError`.

    Besides the CUDA functions it offers the stream machinery the other simulated libraries queue work with
    (:class:`~pymagma.simulator.streams.Streams`)."""

    def __init__(self, device_count: int | None = None, compute_capability: tuple[int, int] = COMPUTE_CAPABILITY,
                 null: bool = False):
        self.device_count = device_count  #: None: DEVICE_COUNT, read at each call
        self.null = null  #: a device that does nothing: work submitted to any stream is checked, then dropped
        self.compute_capability = tuple(compute_capability)  #: the architecture it pretends to be (Hopper: 9.0)
        self.blocks: dict[int, ctypes.Array] = {}
        self.devices: dict[int, int] = {}  # device block -> the device it was allocated on
        self.pinned_blocks: set[int] = set()  # the blocks cudaMallocHost made
        self._starts: list[int] = []  # sorted block addresses, for the bounds checks
        self._lock = threading.Lock()
        self._current = threading.local()
        self.work: dict[int, _Work] = {}  # created streams -> their work not yet run
        self.events: dict[int, _Event] = {}
        self.captures: dict[int, _Capture] = {}  # streams being captured -> what they recorded so far
        self.graphs: dict[int, list] = {}  # cudaGraph_t and cudaGraphExec_t handles -> (nodes, blocks)
        self._order = threading.RLock()
        self._held: list[tuple[int, bool]] = []  # (block, pinned): frees asked for inside running work (_release)
        self.host_reads = HostReads()  #: the host's reads of device data by call (:mod:`.host_reads`)
        for name in _native.CUDART_DATA:
            setattr(self, name, getattr(_CUDA, name))

    def __getattr__(self, name: str):
        if name.startswith("cuda"):
            raise NotSimulatedError(f"{name} is not simulated: the simulator models the CUDA runtime functions "
                                    "in pymagma._native.CUDART_ENTRY_POINTS only (add it there and model it in "
                                    "pymagma.simulator.runtime)")
        raise AttributeError(name)

    def cudaStreamCreateWithFlags(self, flags):
        return _ok(self.create_stream(non_blocking=bool(int(flags) & int(_CUDA.cudaStreamNonBlocking))))

    def cudaStreamDestroy(self, stream):
        if _handle(stream) not in self.work:
            return (_status("cudaErrorInvalidResourceHandle"),)
        self.destroy_stream(_handle(stream))
        return _ok()

    def cudaStreamSynchronize(self, stream):
        capture = self.captures.get(_handle(stream))
        if capture is not None:
            return self._refuse("cudaErrorStreamCaptureUnsupported", [capture])
        if _handle(stream) in LEGACY and self.captures:
            return self._legacy_use()
        if _handle(stream) in LEGACY:  # the legacy stream's work started after the blocking streams' work
            self.flush_blocking()
        self.flush(stream)
        return _ok()

    def cudaStreamWaitEvent(self, stream, event, flags=0):
        """``stream``'s later work runs after the work ``event`` marks (an event never recorded, or recorded on a
        stream that runs at once, is already complete)."""
        state = self.events.get(_handle(event))
        if state is None:
            return (_status("cudaErrorInvalidResourceHandle"),)
        if state.captured is not None:  # a captured event: same capture is a no-op, another stream would join it
            if state.captured == _handle(stream):
                return _ok()
            return self._refuse("cudaErrorStreamCaptureUnsupported", [self.captures[state.captured]]) \
                if state.captured in self.captures else (_status("cudaErrorStreamCaptureUnsupported"),)
        if _handle(stream) in LEGACY and self.captures:
            return self._legacy_use()
        if state.mark is not None:
            barrier = functools.partial(self.flush, *state.mark)
            if _handle(stream) in self.work:
                self.submit(stream, barrier)
            else:
                barrier()
        return _ok()

    # ------------------------------------------------------------------------------------------------- capture
    # CUDA's rules (programming guide, "Prohibited and Unhandled Operations"): while a stream is captured, its work
    # is recorded, not run; synchronizing or querying it, using the legacy stream (synchronous copies and memsets
    # included), and "potentially unsafe" calls (cudaMalloc, cudaFree, cudaMallocHost, cudaDeviceSynchronize) under
    # a global or the thread's own capture (unless the thread exchanged its mode to relaxed) fail and invalidate the
    # capture; cudaStreamEndCapture then fails too.  Not modelled (refused as unsupported): another stream joining
    # a capture by waiting on a captured event; copies to or from pageable host memory inside a capture.
    def _mode(self, name: str) -> int:
        return int(getattr(_CUDA.cudaStreamCaptureMode, name))

    def _refuse(self, error: str, captures):
        for capture in captures:
            capture.invalid = True
        return (_status(error),)

    def _unsafe_call(self):
        """The status of a potentially unsafe call now: success, or the error of the captures it would spoil."""
        if not self.captures:
            return None
        me = threading.get_ident()
        if getattr(self._current, "capture_mode", self._mode("cudaStreamCaptureModeGlobal")) == \
                self._mode("cudaStreamCaptureModeRelaxed"):
            return None
        relaxed, global_ = self._mode("cudaStreamCaptureModeRelaxed"), self._mode("cudaStreamCaptureModeGlobal")
        spoiled = [c for c in self.captures.values()
                   if (c.thread == me and c.mode != relaxed) or (c.thread != me and c.mode == global_)]
        return self._refuse("cudaErrorStreamCaptureUnsupported", spoiled) if spoiled else None

    def _legacy_use(self):
        """The status of using the legacy stream now (it would join every blocking stream being captured)."""
        spoiled = [c for h, c in self.captures.items() if self.work.get(h) is None or self.work[h].blocking]
        return self._refuse("cudaErrorStreamCaptureImplicit", spoiled) if spoiled else None

    def capturing(self, stream) -> bool:
        """Whether ``stream`` is being captured (for the other simulated libraries: what they may not do then)."""
        return _handle(stream) in self.captures

    def refuse_in_capture(self, stream, what: str) -> None:
        """Called by the other simulated libraries for work a capture cannot hold (a result the host reads at the
        call): invalidates the capture and raises the error CUDA would report."""
        capture = self.captures.get(_handle(stream))
        if capture is not None:
            capture.invalid = True
            raise GraphCaptureError(int(_status("cudaErrorStreamCaptureUnsupported")),
                                    "cudaErrorStreamCaptureUnsupported",
                                    f"{what} returns a result to the host at the call: it cannot be captured", what)

    def cudaStreamBeginCapture(self, stream, mode):
        handle = _handle(stream)
        if handle in LEGACY:
            return (_status("cudaErrorStreamCaptureUnsupported"),)
        if handle in self.captures:
            return (_status("cudaErrorIllegalState"),)
        self.captures[handle] = _Capture(int(mode), threading.get_ident())
        return _ok()

    def cudaStreamEndCapture(self, stream):
        handle = _handle(stream)
        capture = self.captures.get(handle)
        if capture is None:
            return (_status("cudaErrorIllegalState"), None)
        if capture.thread != threading.get_ident() and capture.mode != self._mode("cudaStreamCaptureModeRelaxed"):
            return (_status("cudaErrorStreamCaptureWrongThread"), None)
        del self.captures[handle]
        if capture.invalid:
            return (_status("cudaErrorStreamCaptureInvalidated"), None)
        graph = next(_handles)
        self.graphs[graph] = [list(capture.nodes), set(capture.blocks)]
        return _ok(graph)

    def cudaStreamIsCapturing(self, stream):
        capture = self.captures.get(_handle(stream))
        status = _CUDA.cudaStreamCaptureStatus
        if capture is None:
            return _ok(status.cudaStreamCaptureStatusNone)
        invalid = capture.invalid
        return _ok(status.cudaStreamCaptureStatusInvalidated if invalid else status.cudaStreamCaptureStatusActive)

    def cudaThreadExchangeStreamCaptureMode(self, mode):
        previous = getattr(self._current, "capture_mode", self._mode("cudaStreamCaptureModeGlobal"))
        self._current.capture_mode = int(mode)
        return _ok(_CUDA.cudaStreamCaptureMode(previous))

    def cudaGraphInstantiate(self, graph, flags=0):
        recorded = self.graphs.get(_handle(graph))
        if recorded is None:
            return (_status("cudaErrorInvalidValue"), None)
        executable = next(_handles)
        self.graphs[executable] = [list(recorded[0]), set(recorded[1])]
        return _ok(executable)

    def cudaGraphLaunch(self, graph_exec, stream):
        recorded = self.graphs.get(_handle(graph_exec))
        if recorded is None:
            return (_status("cudaErrorInvalidValue"),)
        nodes, blocks = recorded
        freed = sorted(b for b in blocks if b not in self.blocks)
        if freed:
            raise DeviceMemoryError(f"cudaGraphLaunch: the graph uses memory freed since its capture (blocks at "
                                    f"{', '.join(hex(b) for b in freed[:3])}): keep the graph's memory pool alive")
        if _handle(stream) in LEGACY and self.captures:
            return self._legacy_use()
        self.submit(stream, lambda: [node() for node in nodes])
        return _ok()

    def cudaGraphExecDestroy(self, graph_exec):
        return _ok() if self.graphs.pop(_handle(graph_exec), None) is not None else \
            (_status("cudaErrorInvalidValue"),)

    def cudaGraphDestroy(self, graph):
        return self.cudaGraphExecDestroy(graph)

    # ------------------------------------------------------------------------------------------------- events
    def cudaEventCreateWithFlags(self, flags):
        handle = next(_handles)
        self.events[handle] = _Event(timing=not int(flags) & int(_CUDA.cudaEventDisableTiming))
        return _ok(handle)

    def cudaEventDestroy(self, event):
        return _ok() if self.events.pop(_handle(event), None) is not None else \
            (_status("cudaErrorInvalidResourceHandle"),)

    def cudaEventRecord(self, event, stream=0):
        state = self.events.get(_handle(event))
        if state is None:
            return (_status("cudaErrorInvalidResourceHandle"),)
        handle = _handle(stream)
        if handle in self.captures:  # a captured event: a node of the graph, not a point in time
            state.captured, state.mark, state.time, state.recorded = handle, None, None, True
            return _ok()
        if handle in LEGACY and self.captures:
            return self._legacy_use()
        state.captured = None
        state.time, state.recorded = time.perf_counter(), True
        state.mark = self.position(stream)
        if state.mark is None and handle in LEGACY:  # a legacy-stream record waits for blocking streams
            self.flush_blocking()
        return _ok()

    def cudaEventSynchronize(self, event):
        state = self.events.get(_handle(event))
        if state is None:
            return (_status("cudaErrorInvalidResourceHandle"),)
        if state.captured is not None:
            return (_status("cudaErrorCapturedEvent"),)
        if state.mark is not None:
            self.flush(*state.mark)
        return _ok()

    def cudaEventElapsedTime(self, start, end):
        """As CUDA documents: an event created without timing, or one never recorded, is
        cudaErrorInvalidResourceHandle."""
        a, b = self.events.get(_handle(start)), self.events.get(_handle(end))
        if a is None or b is None or a.captured is not None or b.captured is not None:
            return (_status("cudaErrorCapturedEvent" if a is not None and b is not None else
                            "cudaErrorInvalidResourceHandle"), 0.0)
        if not (a.timing and b.timing) or not (a.recorded and b.recorded):
            return (_status("cudaErrorInvalidResourceHandle"), 0.0)
        return _ok((b.time - a.time) * 1e3)

    # ------------------------------------------------------------------------------------------------- memory
    def _allocate(self, nbytes: int) -> int:
        buf = (ctypes.c_char * max(int(nbytes), 1))()
        ptr = ctypes.addressof(buf)
        with self._lock:
            self.blocks[ptr] = buf
            bisect.insort(self._starts, ptr)
        return ptr

    def _release(self, ptr: int, pinned: bool):
        """cudaFree / cudaFreeHost: wait for the device, then drop the block (a pointer of the other kind, or one
        the simulator did not allocate, is cudaErrorInvalidValue)."""
        ptr = int(ptr)
        if not ptr:
            return _ok()
        refused = self._unsafe_call()
        if refused is not None:
            return refused
        with self._lock:
            if ptr not in self.blocks or (ptr in self.pinned_blocks) != pinned:
                return (_status("cudaErrorInvalidValue"),)
        if self._running():  # asked from inside running device work (a finalizer): dropped once that work is done,
            self._held.append((ptr, pinned))  # after the device's other queued work, as cudaFree waits for it all
            return _ok()
        self.flush_all()  # cudaFree and cudaFreeHost wait for the device
        with self._lock:
            if self.blocks.pop(ptr, None) is not None:
                del self._starts[bisect.bisect_left(self._starts, ptr)]
                self.pinned_blocks.discard(ptr)
                self.devices.pop(ptr, None)
        return _ok()

    def cudaMalloc(self, nbytes):
        refused = self._unsafe_call()
        if refused is not None:
            return (*refused, None)
        ptr = self._allocate(nbytes)
        self.devices[ptr] = self.current_device()
        me = threading.get_ident()
        for capture in self.captures.values():  # allocated while capturing (relaxed): the graph's memory
            if capture.thread == me:
                capture.blocks.add(ptr)
        return _ok(ptr)

    def cudaFree(self, ptr):
        return self._release(ptr, pinned=False)

    def cudaMallocHost(self, nbytes):
        refused = self._unsafe_call()
        if refused is not None:
            return (*refused, None)
        ptr = self._allocate(nbytes)
        self.pinned_blocks.add(ptr)
        return _ok(ptr)

    def cudaFreeHost(self, ptr):
        return self._release(ptr, pinned=True)

    def cudaPointerGetAttributes(self, ptr):
        """The device a block was allocated on (the current device for memory the simulator did not allocate:
        foreign host memory handed in on purpose stands for device memory)."""
        start = self._block_of(int(ptr))
        pinned = start is not None and start in self.pinned_blocks
        kind = _CUDA.cudaMemoryType.cudaMemoryTypeHost if pinned else _CUDA.cudaMemoryType.cudaMemoryTypeDevice
        device = self.devices.get(start, self.current_device()) if start is not None else self.current_device()
        return _ok(types.SimpleNamespace(type=kind, device=device, devicePointer=int(ptr), hostPointer=0))

    def _block_of(self, ptr: int) -> int | None:
        with self._lock:
            i = bisect.bisect_right(self._starts, ptr) - 1
            if i >= 0 and ptr < self._starts[i] + len(self.blocks[self._starts[i]]):
                return self._starts[i]
        return None

    def check_range(self, ptr: int, nbytes: int, what: str) -> None:
        """Raise DeviceMemoryError when ``[ptr, ptr + nbytes)`` starts in a simulated block and runs past its end."""
        with self._lock:
            i = bisect.bisect_right(self._starts, ptr) - 1
            if i < 0:
                return
            start = self._starts[i]
            size = len(self.blocks[start])
        if ptr < start + size < ptr + nbytes:
            raise DeviceMemoryError(f"{what}: {nbytes} bytes at offset {ptr - start} overrun the simulated "
                                    f"allocation of {size} bytes at 0x{start:x}")

    def pinned(self, ptr: int) -> bool:
        """Whether the host address ``ptr`` lies in page-locked memory (cudaMallocHost's)."""
        return (start := self._block_of(ptr)) is not None and start in self.pinned_blocks

    # ------------------------------------------------------------------------------------------------- copies
    def _copy(self, rows: int, width: int, dst: int, dpitch: int, src: int, spitch: int, kind, stream, call: str):
        """A copy of ``rows`` rows of ``width`` bytes, synchronous (``stream`` None: the legacy stream, which waits
        for the blocking streams) or enqueued on ``stream``.  As CUDA documents for asynchronous copies: from
        pageable host memory, the source is staged at the call; into pageable host memory, the call returns once
        the copy has completed; pinned host memory is read and written when the copy runs."""
        kind = int(kind)
        if kind not in _KINDS:
            return (_status("cudaErrorInvalidMemcpyDirection"),)
        if rows == 0 or width == 0:
            return _ok()
        if dpitch < width or spitch < width:
            return (_status("cudaErrorInvalidPitchValue"),)
        from_host, to_host = _KINDS[kind]
        extent = (rows - 1) * spitch + width, (rows - 1) * dpitch + width
        self.check_range(src, extent[0], f"{call} source")
        self.check_range(dst, extent[1], f"{call} destination")
        if self.captures:
            capture = self.captures.get(_handle(stream)) if stream is not None else None
            refused = self._legacy_use() if stream is None or _handle(stream) in LEGACY else None
            if refused is not None:
                return refused
            if capture is not None and ((from_host and not self.pinned(src)) or (to_host and not self.pinned(dst))):
                return self._refuse("cudaErrorStreamCaptureUnsupported", [capture])  # pageable: not modelled
        if from_host and stream is not None and not self.null and not self.pinned(src):
            staged = ctypes.create_string_buffer(ctypes.string_at(src, extent[0]), extent[0])
            src = ctypes.addressof(staged)
        else:
            staged = None

        def copy():
            for r in range(rows):
                ctypes.memmove(dst + r * dpitch, src + r * spitch, width)
            del staged_ref[:]

        self.host_reads.copy(self, from_host, to_host, src, dst, call)
        staged_ref = [staged]  # the staging buffer lives until the copy has run
        self.submit(0 if stream is None else stream, copy)
        if stream is not None and to_host and not self.pinned(dst):
            self.flush(stream)
        return _ok()

    def cudaMemcpy(self, dst, src, nbytes, kind):
        return self._copy(1, int(nbytes), int(dst), int(nbytes), int(src), int(nbytes), kind, None, "cudaMemcpy")

    def cudaMemcpyAsync(self, dst, src, nbytes, kind, stream):
        return self._copy(1, int(nbytes), int(dst), int(nbytes), int(src), int(nbytes), kind, stream,
                          "cudaMemcpyAsync")

    def cudaMemcpy2D(self, dst, dpitch, src, spitch, width, height, kind):
        return self._copy(int(height), int(width), int(dst), int(dpitch), int(src), int(spitch), kind, None,
                          "cudaMemcpy2D")

    def cudaMemcpy2DAsync(self, dst, dpitch, src, spitch, width, height, kind, stream):
        return self._copy(int(height), int(width), int(dst), int(dpitch), int(src), int(spitch), kind, stream,
                          "cudaMemcpy2DAsync")

    def _memset(self, ptr: int, value: int, nbytes: int, stream):
        if self.captures and (stream is None or _handle(stream) in LEGACY):
            refused = self._legacy_use()
            if refused is not None:
                return refused
        if nbytes:
            self.check_range(ptr, nbytes, "cudaMemset")
            self.submit(0 if stream is None else stream, functools.partial(ctypes.memset, ptr, value, nbytes))
        return _ok()

    def cudaMemset(self, ptr, value, nbytes):
        return self._memset(int(ptr), int(value), int(nbytes), None)

    def cudaMemsetAsync(self, ptr, value, nbytes, stream):
        return self._memset(int(ptr), int(value), int(nbytes), stream)

    # ------------------------------------------------------------------------------------------------- device
    def current_device(self) -> int:
        """The calling thread's current device (0 until it sets another), as CUDA keeps it per thread."""
        return self._current.__dict__.get("device", 0)  # (getattr's miss raises inside: costly per call)

    def devices_simulated(self) -> int:
        return DEVICE_COUNT if self.device_count is None else self.device_count

    def cudaGetDeviceCount(self):
        return _ok(self.devices_simulated())

    def cudaGetDevice(self):
        return _ok(self.current_device())

    def cudaSetDevice(self, device):
        if not 0 <= int(device) < self.devices_simulated():
            return (_status("cudaErrorInvalidDevice"),)
        self._current.device = int(device)
        return _ok()

    def cudaDeviceSynchronize(self):
        if self.captures:
            return self._refuse("cudaErrorStreamCaptureUnsupported", list(self.captures.values()))
        self.flush_all()
        return _ok()

    def cudaGetDeviceProperties(self, device):
        if not 0 <= int(device) < self.devices_simulated():
            return (_status("cudaErrorInvalidDevice"), None)
        major, minor = self.compute_capability
        return _ok(types.SimpleNamespace(name=DEVICE_NAME.encode(), major=major, minor=minor,
                                         totalGlobalMem=host_memory()[1], multiProcessorCount=os.cpu_count() or 1,
                                         maxThreadsPerBlock=MAX_THREADS_PER_BLOCK))

    def cudaMemGetInfo(self):
        return _ok(*host_memory())

    def cudaRuntimeGetVersion(self):
        return _CUDA.cudaRuntimeGetVersion()  # a host query: the installed runtime's answer

    def cudaDriverGetVersion(self):
        return _ok(SIMULATED_DRIVER_VERSION)

    def cudaGetErrorString(self, error):
        return _CUDA.cudaGetErrorString(error)  # a host query: the installed runtime's text
