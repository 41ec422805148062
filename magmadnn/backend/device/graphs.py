"""What graph replay (:mod:`magmadnn.models.graphed`) needs of the device backend, exported by the device package as
optional ops (see ``ops/graphs.py``): capturing a step as a CUDA graph, a static device buffer fed before each launch by
one asynchronous copy from page-locked memory, device-to-device copies into existing arrays, and constants made once
outside any step (:func:`cached_constant`: a step being captured cannot upload host data)."""

from __future__ import annotations

import collections
import weakref

import numpy as np

from pymagma import array as _array
from pymagma import graphs as _graphs
from pymagma import kernels as _kernels
from pymagma import queue as _queue
from pymagma import runtime as _runtime

__all__ = ["graph_capture", "Staging", "staging_buffer", "copy_into", "cached_constant", "MAX_CONSTANTS"]

ALIGN = 256  # bytes: every segment of a staging buffer starts at a multiple (cudaMalloc's alignment)
RING = 8  # page-locked buffers per staging buffer at most: the host fills one while the copies of others may pend
RING_BYTES = 64 << 20  # page-locked bytes per staging buffer at most (a ring of 2 beyond that)


def graph_capture(like):
    """Capture the work queued on ``like``'s queue in the block as a graph (``launch()``, ``destroy()``); what
    cannot be captured raises ``pymagma.errors.GraphCaptureError`` naming it (see :mod:`pymagma.graphs`)."""
    return _graphs.capture(like.queue)


class Staging:
    """One device buffer holding several arrays (``views``), written before each launch by a single asynchronous
    copy from one of a ring of page-locked host buffers (:meth:`host`, then :meth:`upload`). The host never
    writes a buffer whose copy may still be pending: an event is recorded after every ``ring // 2``-th copy, and
    when the buffer to fill next was copied after the last event known complete, the host waits for the oldest
    event that frees it. Per upload that is one copy, plus one event record and one wait every ``ring // 2``
    uploads; the copies and the event are bound once per runtime (:func:`pymagma.runtime.bound_call`)."""

    def __init__(self, layout, like):
        offsets, end = [], 0
        for shape, dtype in layout:
            offsets.append(end)
            end += -(-int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize // ALIGN) * ALIGN
        self.queue, self.nbytes = like.queue, max(end, ALIGN)
        self.device = _array.empty((self.nbytes,), np.uint8, device=like.device)
        self.views = [_array.DeviceArray(tuple(shape), np.dtype(dtype), self.device.ptr + off, owner=self.device,
                                         device=like.device) for (shape, dtype), off in zip(layout, offsets)]
        self.ring = ring = max(2, min(RING, RING_BYTES // self.nbytes))
        self.half = ring // 2
        self.hosts = [_runtime.pinned_empty((self.nbytes,), np.uint8) for _ in range(ring)]
        self.host_views = [[np.ndarray(tuple(shape), np.dtype(dtype), buffer=h, offset=off)
                            for (shape, dtype), off in zip(layout, offsets)] for h in self.hosts]
        self.events = [_runtime.Event(timing=False) for _ in range(ring // self.half + 1)]
        self.marks = collections.deque()  # (upload number, event) recorded and not known complete
        self.uploads = 0  # uploads queued
        self.done = 0  # uploads known complete (every one before this number)
        self._bound = None  # (runtime, [a bound copy per host buffer]) made on the first upload under a runtime

    def host(self) -> list[np.ndarray]:
        """The host views of the page-locked buffer to fill for the next :meth:`upload` (waiting, when needed,
        until the copy that last read it has run)."""
        u = self.uploads
        if u - self.ring >= self.done:
            self._wait(u - self.ring)
        return self.host_views[u % self.ring]

    def _wait(self, upload: int) -> None:
        marks = self.marks
        while marks and marks[0][0] < upload:  # superseded by a later mark: complete once that one is
            marks.popleft()
        number, event = marks.popleft()
        event.synchronize()
        self.done = number + 1

    def upload(self) -> None:
        """Queue the copy of the buffer filled after :meth:`host` into the device buffer."""
        u = self.uploads
        bound = self._bound
        if bound is None or bound[0] is not _runtime.active():
            bound = self._bind()
        bound[1][u % self.ring]()
        if u % self.half == self.half - 1:
            event = self.events[(u // self.half) % len(self.events)]
            event.record(self.queue.stream)
            self.marks.append((u, event))
        self.uploads = u + 1

    def _bind(self):
        kind = _runtime.active().cudaMemcpyKind.cudaMemcpyHostToDevice
        copies = [_runtime.bound_call("cudaMemcpyAsync", self.device.ptr, h.ctypes.data, self.nbytes, kind,
                                      self.queue.stream) for h in self.hosts]
        self._bound = (_runtime.active(), copies)
        return self._bound


def staging_buffer(layout, like) -> Staging:
    """A :class:`Staging` buffer for arrays of ``layout`` ``[(shape, dtype), ...]`` on ``like``'s device."""
    return Staging(layout, like)


def copy_into(dst, src) -> None:
    """``src`` into the existing array ``dst`` of the same shape and dtype, queued on ``dst``'s queue (capturable)."""
    if tuple(dst.shape) != tuple(src.shape) or dst.dtype != src.dtype:
        raise ValueError(f"copy_into: dst is {dst.dtype} {dst.shape}, src {src.dtype} {src.shape}")
    if dst.is_c_contiguous and src.is_c_contiguous:
        _runtime.memcpy_dtod(dst.ptr, src.ptr, src.nbytes, stream=dst.queue.stream)
    else:
        _kernels.copy(src, out=dst)


MAX_CONSTANTS = 1024  # constants kept per device (least recently used ones dropped first)
_constants: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a device's default queue -> its constants


def cached_constant(device, host: np.ndarray, upload):
    """The device array of the host array ``host`` on GPU ``device`` (None: the current one): uploaded by
    ``upload(host)`` the first time, then the same array (read-only by the op set's aliasing rule: no op writes
    its inputs). Constants are kept per device and per set of native libraries (the default queue's), so a step
    captured after an eager run of it finds every constant it uses made already. During a capture a scalar not
    made yet is written by a kernel inside the graph; an array not made yet cannot be (the upload names itself)."""
    key = (host.dtype.str, host.shape, host.tobytes())
    table = _constants.get(q := _queue.default_queue(device))
    if table is None:
        table = _constants[q] = collections.OrderedDict()
    found = table.get(key)
    if found is not None:
        table.move_to_end(key)
        return found
    if host.ndim == 0 and host.dtype.kind == "f" and _graphs.capturing() is not None:
        return _kernels.fill(_array.empty((), host.dtype, device=device), float(host))
    made = table[key] = upload(host)
    if len(table) > MAX_CONSTANTS:
        table.popitem(last=False)
    return made
