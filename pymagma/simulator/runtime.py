"""The CUDA runtime of the simulator: one device whose memory is host memory, copies as ``memmove``, ``memset`` as
``memset``, streams and events that are already complete, and a fake default MAGMA queue.

Every block "cudaMalloc" hands out is a ctypes buffer kept alive in :attr:`SimulatedRuntime.blocks` until it is
freed.  Copies and memsets that start inside a block must stay inside it (an overrun raises
:class:`~pymagma.errors.DeviceMemoryError` instead of corrupting the host heap); pointers the simulator did not
allocate (foreign host memory handed in on purpose) are not checked.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import os
import threading
import time

from .. import array, memory
from .. import queue as queue_module
from .. import runtime as rt
from ..errors import DeviceMemoryError

DEVICE_NAME = "pymagma simulator"
COMPUTE_CAPABILITY = (9, 0)
DEVICE_COUNT = 1  #: devices the simulator reports (all share host memory)
MAX_THREADS_PER_BLOCK = 1024

_handles = itertools.count(0x5100)  # fake stream/event/queue handles: distinct, never 0 (the legacy stream)


def host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory: the simulated device's memory."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX hosts
        return 1 << 34, 1 << 34


class SimulatedStream:
    """A stream whose work is always finished (every simulated call runs synchronously)."""

    def __init__(self, handle: int | None = None, non_blocking: bool = False):
        self.owned = handle is None
        self.handle = next(_handles) if handle is None else int(handle)

    def synchronize(self) -> None:
        pass

    def wait(self, event) -> None:
        pass

    def __int__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"SimulatedStream(0x{self.handle:x})"


class SimulatedEvent:
    """An event that records the host clock: ``elapsed_ms`` is wall time between two records."""

    def __init__(self, timing: bool = True):
        self.handle, self.timing, self.time = next(_handles), timing, None

    def record(self, stream=None) -> SimulatedEvent:
        self.time = time.perf_counter()
        return self

    def synchronize(self) -> None:
        pass

    def elapsed_ms(self, end: SimulatedEvent) -> float:
        if not (self.timing and end.timing):
            raise ValueError("elapsed_ms needs two events created with timing=True")
        if self.time is None or end.time is None:
            raise ValueError("elapsed_ms needs both events recorded (cudaErrorNotReady on a device)")
        return (end.time - self.time) * 1e3


class FakeQueue:
    """The default MAGMA queue of a simulated device: a null ``magma_queue_t`` on the legacy stream."""

    handle, stream = None, 0

    def __init__(self, device: int = 0):
        self.device = device

    def synchronize(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"FakeQueue(device={self.device})"


class SimulatedRuntime:
    """The replacements of :mod:`pymagma.runtime`'s device calls; :meth:`install` puts them in place."""

    def __init__(self):
        self.blocks: dict[int, ctypes.Array] = {}
        self._starts: list[int] = []  # sorted block addresses, for the bounds checks
        self._lock = threading.Lock()
        self.queues: dict[int, FakeQueue] = {}
        self._current = threading.local()

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

    def memcpy_htod(self, dst: int, src, stream=None) -> None:
        ptr, nbytes = rt._host_buffer(src, writable=False)
        if nbytes:
            self.check_range(int(dst), nbytes, "cudaMemcpy(HtoD)")
            ctypes.memmove(int(dst), ptr, nbytes)

    def memcpy_dtoh(self, dst, src: int, stream=None):
        ptr, nbytes = rt._host_buffer(dst, writable=True)
        if nbytes:
            self.check_range(int(src), nbytes, "cudaMemcpy(DtoH)")
            ctypes.memmove(ptr, int(src), nbytes)
        return dst

    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream=None) -> None:
        nbytes = int(nbytes)
        if nbytes:
            self.check_range(int(src), nbytes, "cudaMemcpy(DtoD) source")
            self.check_range(int(dst), nbytes, "cudaMemcpy(DtoD) destination")
            ctypes.memmove(int(dst), int(src), nbytes)

    def memcpy_2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, stream=None):
        if width == 0 or height == 0:
            return
        if dpitch < width or spitch < width:
            raise ValueError(f"cudaMemcpy2D: pitch (dst {dpitch}, src {spitch}) below the row width {width} "
                             "(cudaErrorInvalidPitchValue on a device)")
        self.check_range(int(src), (height - 1) * spitch + width, "cudaMemcpy2D source")
        self.check_range(int(dst), (height - 1) * dpitch + width, "cudaMemcpy2D destination")
        for r in range(height):
            ctypes.memmove(dst + r * dpitch, src + r * spitch, width)

    def memset(self, ptr: int, value: int, nbytes: int, stream=None) -> None:
        nbytes = int(nbytes)
        if nbytes:
            self.check_range(int(ptr), nbytes, "cudaMemset")
            ctypes.memset(int(ptr), int(value), nbytes)

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

    def default_queue(self, device: int | None = None) -> FakeQueue:
        device = rt.get_device() if device is None else int(device)
        q = self.queues.get(device)
        if q is None:
            q = self.queues[device] = FakeQueue(device)
        return q

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
            "synchronize": lambda: None,
            "device_properties": self.device_properties,
            "mem_get_info": host_memory,
            "Stream": SimulatedStream,
            "Event": SimulatedEvent,
            "malloc": self.malloc,
            "free": self.free,
            "malloc_host": self.malloc,
            "free_host": self.free,
            "memcpy_htod": self.memcpy_htod,
            "memcpy_dtoh": self.memcpy_dtoh,
            "memcpy_dtod": self.memcpy_dtod,
            "memcpy_2d": self.memcpy_2d,
            "memset": self.memset,
        }
        for name, value in replacements.items():
            patches.setattr(rt, name, value)
        patches.setattr(queue_module, "default_queue", self.default_queue)
        patches.setattr(queue_module, "_DEFAULT", self.queues)  # DeviceArray._sync looks queues up there
        patches.setattr(memory, "_POOL", memory._Pool())
        patches.setattr(array, "_device_of", lambda ptr: rt.get_device())  # no cudaPointerGetAttributes
