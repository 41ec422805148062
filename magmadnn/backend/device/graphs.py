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
RING = 2  # page-locked buffers per staging buffer: the host fills one while the copy from the other may be pending


def graph_capture(like):
    """Capture the work queued on ``like``'s queue in the block as a graph (``launch()``, ``destroy()``); what
    cannot be captured raises ``pymagma.errors.GraphCaptureError`` naming it (see :mod:`pymagma.graphs`)."""
    return _graphs.capture(like.queue)


class Staging:
    """One device buffer holding several arrays (``views``), written before each launch by a single asynchronous
    copy from one of ``RING`` page-locked host buffers; the host waits for a host buffer's previous copy to finish
    before it writes that buffer again, so a replay never reads a half-written batch."""

    def __init__(self, layout, like):
        offsets, end = [], 0
        for shape, dtype in layout:
            offsets.append(end)
            end += -(-int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize // ALIGN) * ALIGN
        self.queue, self.nbytes = like.queue, max(end, ALIGN)
        self.device = _array.empty((self.nbytes,), np.uint8, device=like.device)
        self.views = [_array.DeviceArray(tuple(shape), np.dtype(dtype), self.device.ptr + off, owner=self.device,
                                         device=like.device) for (shape, dtype), off in zip(layout, offsets)]
        self.hosts = [_runtime.pinned_empty((self.nbytes,), np.uint8) for _ in range(RING)]
        self.host_views = [[np.ndarray(tuple(shape), np.dtype(dtype), buffer=h, offset=off)
                            for (shape, dtype), off in zip(layout, offsets)] for h in self.hosts]
        self.events = [_runtime.Event(timing=False) for _ in range(RING)]
        self.recorded = [False] * RING
        self.turn = 0

    def host(self) -> list[np.ndarray]:
        """The host views of the page-locked buffer to fill for the next :meth:`upload`."""
        if self.recorded[self.turn]:
            self.events[self.turn].synchronize()
        return self.host_views[self.turn]

    def upload(self) -> None:
        """Queue the copy of the buffer filled after :meth:`host` into the device buffer."""
        turn, stream = self.turn, self.queue.stream
        _runtime.memcpy_htod(self.device.ptr, self.hosts[turn], stream=stream)
        self.events[turn].record(stream)
        self.recorded[turn] = True
        self.turn = (turn + 1) % RING


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
