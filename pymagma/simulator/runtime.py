"""The CUDA runtime of the simulator: one device whose memory is host memory, copies as ``memmove``, ``memset`` as
``memset``, streams whose work runs as late as CUDA's ordering rules allow, and events.

Streams: work on a stream the program created (``cudaStreamCreate``, or a MAGMA queue, the default queue included)
is queued and runs only when something orders it: a synchronize of that stream or of an event recorded after it,
another stream waiting on such an event (the waiting stream's later work runs after it), a synchronous copy or
memset or an event recorded on the legacy stream (the legacy default stream waits for blocking streams, and
``default_queue``'s stream is one, as the stream ``magma_queue_create`` makes), a device synchronize, or freeing
memory.  So a host that reads a buffer before waiting for the copy into it, or a stream that uses data without
waiting for the event of the stream that produces it, sees stale data here too, whatever the timing (an
asynchronous copy into pageable host memory returns once it is done, as CUDA documents; into pinned memory it
waits like the rest).  Work on the legacy stream runs at once, after the blocking streams' work.

Every block "cudaMalloc" hands out is a ctypes buffer kept alive in :attr:`SimulatedRuntime.blocks` until it is
freed.  Copies and memsets that start inside a block must stay inside it (an overrun raises
:class:`~pymagma.errors.DeviceMemoryError` instead of corrupting the host heap); pointers the simulator did not
allocate (foreign host memory handed in on purpose) are not checked.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import functools
import itertools
import os
import sys
import threading
import time
import weakref

from .. import array, memory
from .. import queue as queue_module
from .. import runtime as rt
from ..errors import DeviceMemoryError

DEVICE_NAME = "pymagma simulator"
COMPUTE_CAPABILITY = (9, 0)
DEVICE_COUNT = 1  #: devices the simulator reports (all share host memory)
MAX_THREADS_PER_BLOCK = 1024

_handles = itertools.count(0x5100)  # fake stream/event/queue handles: distinct, never 0 (the legacy stream)
LEGACY = (0, 1)  #: handles of the legacy default stream (0, and cudaStreamLegacy)


def host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory: the simulated device's memory."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX hosts
        return 1 << 34, 1 << 34


class SimulatedStream:
    """A stream of the simulated device (:class:`SimulatedRuntime` binds ``runtime`` in a subclass): ``Stream()``
    creates one whose work waits until ordered, ``Stream(handle=h)`` wraps an existing handle."""

    runtime: SimulatedRuntime

    def __init__(self, handle: int | None = None, non_blocking: bool = False):
        self.owned = handle is None
        self.handle = self.runtime.create_stream(non_blocking) if handle is None else int(handle)
        if self.owned:
            weakref.finalize(self, self.runtime.destroy_stream, self.handle)

    def synchronize(self) -> None:
        if self.handle in LEGACY:  # the legacy stream's work started after the blocking streams' work
            self.runtime.flush_blocking()
        self.runtime.flush(self.handle)

    def wait(self, event) -> None:
        self.runtime.wait(self.handle, event)

    def __int__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"SimulatedStream(0x{self.handle:x})"


class SimulatedEvent:
    """An event: it marks the work enqueued on its stream when recorded (synchronizing it runs that work), and the
    host clock at that moment (``elapsed_ms`` is wall time between two records)."""

    runtime: SimulatedRuntime

    def __init__(self, timing: bool = True):
        self.handle, self.timing, self.time, self.mark = next(_handles), timing, None, None

    def record(self, stream=None) -> SimulatedEvent:
        self.time = time.perf_counter()
        self.mark = self.runtime.position(stream)
        if self.mark is None and rt._handle(stream) in LEGACY:  # a legacy-stream record waits for blocking streams
            self.runtime.flush_blocking()
        return self

    def synchronize(self) -> None:
        if self.mark is not None:
            self.runtime.flush(*self.mark)

    def elapsed_ms(self, end: SimulatedEvent) -> float:
        if not (self.timing and end.timing):
            raise ValueError("elapsed_ms needs two events created with timing=True")
        if self.time is None or end.time is None:
            raise ValueError("elapsed_ms needs both events recorded (cudaErrorNotReady on a device)")
        return (end.time - self.time) * 1e3


class _Work:
    """The work of one created stream not yet run: (sequence number, callable), oldest first."""

    def __init__(self, blocking: bool):
        self.blocking = blocking
        self.pending: collections.deque = collections.deque()
        self.enqueued = 0


class SimulatedRuntime:
    """The replacements of :mod:`pymagma.runtime`'s device calls; :meth:`install` puts them in place."""

    def __init__(self):
        self.blocks: dict[int, ctypes.Array] = {}
        self._starts: list[int] = []  # sorted block addresses, for the bounds checks
        self._lock = threading.Lock()
        self.queues: dict[int, queue_module.Queue] = {}  # the default queue of each device
        self._current = threading.local()
        self.work: dict[int, _Work] = {}  # created streams -> their work not yet run
        self._order = threading.RLock()
        self.Stream = type("SimulatedStream", (SimulatedStream,), {"runtime": self})
        self.Event = type("SimulatedEvent", (SimulatedEvent,), {"runtime": self})

    # ------------------------------------------------------------------------------------------------- streams
    def create_stream(self, non_blocking: bool = False) -> int:
        """A new stream handle whose work is queued (a non-blocking one is not waited for by the legacy stream)."""
        handle = next(_handles)
        with self._order:
            self.work[handle] = _Work(blocking=not non_blocking)
        return handle

    def destroy_stream(self, handle: int) -> None:
        """cudaStreamDestroy: work already enqueued still runs."""
        self.flush(handle)
        with self._order:
            self.work.pop(handle, None)

    def submit(self, stream, fn) -> None:
        """Enqueue ``fn`` on ``stream``: queued on a created stream, run at once on any other (on the legacy stream
        after the blocking streams' work, as CUDA's legacy default stream waits for them)."""
        handle = rt._handle(stream)
        with self._order:
            work = self.work.get(handle)
            if work is not None:
                work.pending.append((work.enqueued, fn))
                work.enqueued += 1
                return
            if handle in LEGACY:
                self.flush_blocking()
            fn()

    def position(self, stream) -> tuple[int, int] | None:
        """(handle, work enqueued so far) of a created stream; None for streams whose work runs at once."""
        handle = rt._handle(stream)
        work = self.work.get(handle)
        return None if work is None else (handle, work.enqueued)

    def flush(self, stream, upto: int | None = None) -> None:
        """Run the queued work of ``stream`` (all of it, or the work enqueued before position ``upto``)."""
        with self._order:
            work = self.work.get(rt._handle(stream))
            while work is not None and work.pending and (upto is None or work.pending[0][0] < upto):
                work.pending.popleft()[1]()

    def flush_blocking(self) -> None:
        """What the legacy stream waits for: the work of every blocking created stream."""
        with self._order:
            for handle, work in list(self.work.items()):
                if work.blocking:
                    self.flush(handle)

    def flush_all(self) -> None:
        with self._order:
            for handle in list(self.work):
                self.flush(handle)

    def wait(self, stream, event) -> None:
        """cudaStreamWaitEvent: ``stream``'s later work runs after the work ``event`` marks (an event never
        recorded, or recorded on a stream that runs at once, is already complete)."""
        if event.mark is None:
            return
        barrier = functools.partial(self.flush, *event.mark)
        if rt._handle(stream) in self.work:
            self.submit(stream, barrier)
        else:
            barrier()

    # ------------------------------------------------------------------------------------------------- memory
    def malloc(self, nbytes: int) -> int:
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        if nbytes == 0:
            return 0
        buf = (ctypes.c_char * nbytes)()
        ptr = ctypes.addressof(buf)
        with self._lock:
            self.blocks[ptr] = buf
            bisect.insort(self._starts, ptr)
        return ptr

    def free(self, ptr: int) -> None:
        if not ptr:
            return
        self.flush_all()  # cudaFree and cudaFreeHost wait for the device
        with self._lock:
            if self.blocks.pop(int(ptr), None) is not None:
                del self._starts[bisect.bisect_left(self._starts, int(ptr))]

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
        """Whether the host address ``ptr`` lies in memory the simulator allocated (cudaMallocHost's, pinned)."""
        with self._lock:
            i = bisect.bisect_right(self._starts, ptr) - 1
            return i >= 0 and ptr < self._starts[i] + len(self.blocks[self._starts[i]])

    def _enqueue(self, stream, fn, *keep, to_host: int | None = None) -> None:
        """A copy or memset: synchronous (``stream`` None: the legacy stream, which waits for the blocking streams)
        or enqueued on ``stream``; ``keep`` holds host buffers alive until it has run.  An asynchronous copy to the
        pageable host address ``to_host`` returns only once it has completed (as CUDA documents)."""
        self.submit(0 if stream is None else stream, lambda: (fn(), keep))
        if stream is not None and to_host is not None and not self.pinned(to_host):
            self.flush(stream)

    def memcpy_htod(self, dst: int, src, stream=None) -> None:
        ptr, nbytes = rt._host_buffer(src, writable=False)
        if nbytes:
            self.check_range(int(dst), nbytes, "cudaMemcpy(HtoD)")
            self._enqueue(stream, functools.partial(ctypes.memmove, int(dst), ptr, nbytes), src)

    def memcpy_dtoh(self, dst, src: int, stream=None):
        ptr, nbytes = rt._host_buffer(dst, writable=True)
        if nbytes:
            self.check_range(int(src), nbytes, "cudaMemcpy(DtoH)")
            self._enqueue(stream, functools.partial(ctypes.memmove, ptr, int(src), nbytes), dst, to_host=ptr)
        return dst

    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream=None) -> None:
        nbytes = int(nbytes)
        if nbytes:
            self.check_range(int(src), nbytes, "cudaMemcpy(DtoD) source")
            self.check_range(int(dst), nbytes, "cudaMemcpy(DtoD) destination")
            self._enqueue(stream, functools.partial(ctypes.memmove, int(dst), int(src), nbytes))

    def _copy_2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, stream, call: str,
                 *keep, to_host: int | None = None) -> None:
        if width == 0 or height == 0:
            return
        if dpitch < width or spitch < width:
            raise ValueError(f"{call}: pitch (dst {dpitch}, src {spitch}) below the row width {width} "
                             "(cudaErrorInvalidPitchValue on a device)")
        self.check_range(int(src), (height - 1) * spitch + width, f"{call} source")
        self.check_range(int(dst), (height - 1) * dpitch + width, f"{call} destination")

        def copy():
            for r in range(height):
                ctypes.memmove(dst + r * dpitch, src + r * spitch, width)

        self._enqueue(stream, copy, *keep, to_host=to_host)

    def memcpy_2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, stream=None):
        self._copy_2d(int(dst), int(dpitch), int(src), int(spitch), int(width), int(height), stream, "cudaMemcpy2D")

    def memcpy_2d_dtoh(self, dst, src: int, spitch: int, stream=None):
        ptr, width, height = rt._host_rows(dst, "memcpy_2d_dtoh", writable=True)
        self._copy_2d(ptr, width, int(src), int(spitch), width, height, stream, "cudaMemcpy2D(DtoH)", dst, to_host=ptr)
        return dst

    def memcpy_2d_htod(self, dst: int, dpitch: int, src, stream=None) -> None:
        ptr, width, height = rt._host_rows(src, "memcpy_2d_htod", writable=False)
        self._copy_2d(int(dst), int(dpitch), ptr, width, width, height, stream, "cudaMemcpy2D(HtoD)", src)

    def memset(self, ptr: int, value: int, nbytes: int, stream=None) -> None:
        nbytes = int(nbytes)
        if nbytes:
            self.check_range(int(ptr), nbytes, "cudaMemset")
            self._enqueue(stream, functools.partial(ctypes.memset, int(ptr), int(value), nbytes))

    # ------------------------------------------------------------------------------------------------- device
    @staticmethod
    def check_device(device: int) -> int:
        device = int(device)
        if not 0 <= device < DEVICE_COUNT:
            raise ValueError(f"device {device} does not exist: the simulator has {DEVICE_COUNT} device(s), "
                             f"numbered 0..{DEVICE_COUNT - 1}")
        return device

    def get_device(self) -> int:
        """The calling thread's current device (0 until it sets another), as CUDA keeps it per thread."""
        return getattr(self._current, "device", 0)

    def set_device(self, device: int) -> None:
        self._current.device = self.check_device(device)

    def device_properties(self, device: int | None = None) -> dict:
        device = rt.get_device() if device is None else self.check_device(device)
        return {"device": device, "name": DEVICE_NAME, "compute_capability": COMPUTE_CAPABILITY,
                "total_memory": host_memory()[1], "multiprocessors": os.cpu_count() or 1}

    def default_queue(self, device: int | None = None) -> queue_module.Queue:
        """The default queue of ``device``: a MAGMA queue made by the simulated ``magma_queue_create``, so its
        stream is a created blocking stream whose work waits until ordered, like the real default queue's."""
        q = self.queues.get(device)
        return q if q is not None else queue_module._cached(self.queues, device)

    # ------------------------------------------------------------------------------------------------- install
    def install(self, patches) -> None:
        """Replace the runtime calls pymagma makes (``patches`` records each replacement for undo)."""
        replacements = {
            "no_device_reason": lambda: None,
            "device_count": lambda: DEVICE_COUNT,  # read at each call: tests may simulate several devices
            "require_device": lambda: DEVICE_COUNT,
            "get_device": self.get_device,
            "set_device": self.set_device,
            "_thread": threading.local(),  # no "context bound" flag of the real device carries over
            "synchronize": self.flush_all,
            "device_properties": self.device_properties,
            "mem_get_info": host_memory,
            "Stream": self.Stream,
            "Event": self.Event,
            "malloc": self.malloc,
            "free": self.free,
            "malloc_host": self.malloc,
            "free_host": self.free,
            "memcpy_htod": self.memcpy_htod,
            "memcpy_dtoh": self.memcpy_dtoh,
            "memcpy_dtod": self.memcpy_dtod,
            "memcpy_2d": self.memcpy_2d,
            "memcpy_2d_dtoh": self.memcpy_2d_dtoh,
            "memcpy_2d_htod": self.memcpy_2d_htod,
            "memset": self.memset,
        }
        for name, value in replacements.items():
            patches.setattr(rt, name, value)
        patches.setattr(queue_module, "default_queue", self.default_queue)
        patches.setattr(sys.modules[queue_module.__package__], "default_queue", self.default_queue)  # pymagma.*
        patches.setattr(queue_module, "_DEFAULT", self.queues)  # DeviceArray._sync looks queues up there
        patches.setattr(queue_module, "_TRANSFER", {})  # queues made on the simulator stay with it
        patches.setattr(memory, "_POOL", memory._Pool())
        patches.setattr(array, "_device_of", lambda ptr: rt.get_device())  # no cudaPointerGetAttributes
