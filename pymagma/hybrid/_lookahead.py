"""Look-ahead staging of the hybrid Cholesky and QR (as MAGMA's potrf_gpu/geqrf_gpu): a main queue for the device
work and a side queue (:func:`pymagma.queue.transfer_queue`, ordered by events) that copies the next panel into
pinned host memory while the rest of the trailing update runs; panels go back with asynchronous copies from pinned
memory.  Correctness does not depend on timing: every dependency is an event or stream order.  Without look-ahead
the two queues are one."""

from __future__ import annotations

import contextlib

import numpy as np

from .. import memory, runtime
from .. import queue as queues_
from .._colmajor import ptr_ld
from ..array import DeviceArray


def queues_for(w: DeviceArray, lookahead: bool, queues) -> tuple:
    """(main, side): the queue of the device work and the queue of the panel copies to the host.  With
    look-ahead, ``queues`` or (``w``'s default queue, the device's transfer queue); without, one queue for both."""
    main = queues[0] if queues else w.queue
    if main is not w.queue:  # work still pending on w's queue (e.g. the copy that made w) comes first
        main.wait_event(w.queue.record_event())
    if not lookahead:
        return main, main
    return main, queues[1] if queues else queues_.transfer_queue(w.device)


@contextlib.contextmanager
def staging(dtype, *sizes: int):
    """Pinned host buffers of ``sizes`` elements of ``dtype`` for the block (from the pool's cache), for column-major
    blocks of up to that many elements."""
    dtype = np.dtype(dtype)
    ends = np.cumsum([0, *(max(n, 1) for n in sizes)])
    with memory.pinned_buffer(int(ends[-1]) * dtype.itemsize) as raw:
        flat = raw.view(dtype)
        yield [flat[a:b] for a, b in zip(ends[:-1], ends[1:])]


def host_view(stage: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """A column-major ``rows x cols`` host matrix at the start of ``stage`` (the transpose of a C-ordered
    ``cols x rows`` array: one column per row, as the 2-D copies move them)."""
    return stage[:rows * cols].reshape(cols, rows).T


def finish(main, side) -> None:
    """Wait for both queues: the pinned stages go back to the pool, and the caller gets finished results."""
    main.synchronize()
    if side is not main:
        side.synchronize()


def upload(host: np.ndarray, x: DeviceArray, queue) -> None:
    """Enqueue on ``queue`` the copy of ``host`` (a :func:`host_view` of pinned memory) into the column-major
    ``x``; ``host`` must not change until ``queue`` has run it."""
    ptr, ld = ptr_ld(x)
    runtime.memcpy_2d_htod(ptr, ld * x.itemsize, host.T, stream=queue.stream)


def download(x: DeviceArray, queue) -> np.ndarray:
    """A host copy (column-major) of the column-major ``x`` once ``queue``'s work so far is done: one 2-D copy of
    the block alone (``DeviceArray.get`` of a strided view copies its whole span)."""
    host = np.empty(x.shape[::-1], x.dtype)
    if host.size:
        ptr, ld = ptr_ld(x)
        runtime.memcpy_2d_dtoh(host, ptr, ld * x.itemsize, stream=queue.stream)
        queue.synchronize()
    return host.T


def fetch(x: DeviceArray, stage: np.ndarray, main, side) -> tuple[np.ndarray, object]:
    """Copy the column-major ``x`` into ``stage`` on ``side`` once ``main``'s work so far is done; returns the host
    view and an event that completes with the copy (read the view after synchronizing it)."""
    if side is not main:
        side.wait_event(main.record_event())
    host = host_view(stage, *x.shape)
    ptr, ld = ptr_ld(x)
    runtime.memcpy_2d_dtoh(host.T, ptr, ld * x.itemsize, stream=side.stream)
    return host, side.record_event()
