"""MAGMA queues: a CUDA stream plus a cuBLAS handle, the context every MAGMA BLAS/batched call runs in.

``default_queue(device)`` gives one lazily created queue per device; ``Queue.from_stream`` wraps a stream owned by
someone else (PyTorch, CuPy) so MAGMA work is ordered with theirs.  ``transfer_queue(device)`` is a second queue
per device whose work (copies, as the ``queues[1]`` of MAGMA's look-ahead drivers) overlaps the default queue's;
``record_event`` / ``wait_event`` order the two.
"""

from __future__ import annotations

import ctypes
import threading
import weakref

from . import _checks, _magma, _native, runtime
from .errors import MagmaError


class Queue:
    """A MAGMA queue on ``device`` (destroyed when the object dies).

    ``handle`` is the ``magma_queue_t`` (a ``ctypes.c_void_p``); ``stream`` is its ``cudaStream_t`` as an int.
    """

    def __init__(self, device: int | None = None, *, _stream: int | None = None):
        runtime.require_device()
        self.device = runtime.get_device() if device is None else int(device)
        lib = _magma.initialized()
        handle = ctypes.c_void_p()
        with runtime.on_device(self.device):  # MAGMA makes the queue's device current; restore the caller's
            if _stream is None:
                lib.magma_queue_create(self.device, ctypes.byref(handle), *_magma.internal_args())
            else:
                lib.magma_queue_create_from_cuda(self.device, _stream, None, None, ctypes.byref(handle),
                                                 *_magma.internal_args())
        if not handle.value:
            raise MagmaError(-1, "MAGMA returned a null queue", "magma_queue_create")
        self.handle = handle
        self.stream = int(lib.magma_queue_get_cuda_stream(handle) or 0)
        self.tf32 = False  #: whether pymagma set TF32 math on the queue's cuBLAS handle (``blas.allow_tf32``)
        self._finalizer = weakref.finalize(self, _destroy, lib, handle.value)  # by the MAGMA that made it

    @classmethod
    def from_stream(cls, stream, device: int | None = None) -> Queue:
        """A queue running on an existing CUDA stream (an int handle or an object with ``.handle``, which the queue
        keeps alive: a stream object's finalizer would destroy the stream under it)."""
        q = cls(device, _stream=runtime._handle(stream))
        q._stream_owner = stream
        return q

    def synchronize(self) -> None:
        """Wait for the queue's work (``cudaStreamSynchronize`` of its stream, as ``magma_queue_sync``, which only
        prints a failure: here a failed launch or copy raises :class:`~pymagma.errors.CudaError`)."""
        runtime.Stream(handle=self.stream).synchronize()

    def record_event(self) -> runtime.Event:
        """A new event (without timing) recorded on this queue's stream: it completes when the work enqueued so far
        has finished.  Wait for it on the host (``.synchronize()``) or on another queue (:meth:`wait_event`).  The
        event is made on the queue's device, as ``cudaEventRecord`` needs."""
        with runtime.on_device(self.device):
            return runtime.Event(timing=False).record(self.stream)

    def wait_event(self, event: runtime.Event) -> None:
        """Make the work enqueued on this queue from now on wait for ``event`` (``cudaStreamWaitEvent``; the host
        does not wait)."""
        if not isinstance(event, runtime.Event):
            raise TypeError(f"wait_event: event must be a pymagma.runtime.Event (from record_event), got "
                            f"{type(event).__name__}")
        runtime.Stream(handle=self.stream).wait(event)

    def __repr__(self) -> str:
        return f"Queue(device={self.device}, stream=0x{self.stream:x})"


def _destroy(lib, handle: int) -> None:
    try:
        lib.magma_queue_destroy(ctypes.c_void_p(handle), *_magma.internal_args())
    except Exception:  # pragma: no cover - interpreter shutdown
        pass


_native.resource("default_queues")(lambda libraries: {})  # device -> its default Queue
_native.resource("transfer_queues")(lambda libraries: {})  # device -> its second Queue
_LOCK = threading.Lock()


def default_queue(device: int | None = None) -> Queue:
    """The default queue of ``device`` (the current device when None), created on first use."""
    table = _native.current.default_queues
    q = table.get(device)
    if q is not None:  # the fast path of every BLAS call
        return q
    return _cached(table, device)


def _cached(table: dict, device: int | None) -> Queue:
    """``table``'s queue of ``device`` (the current device when None), created under the lock on first use."""
    runtime.require_device()
    device = runtime.get_device() if device is None else _checks.count(device, "device")  # 1.5 is not device 1
    with _LOCK:
        q = table.get(device)
        if q is None:
            q = table[device] = Queue(device)
        return q


def transfer_queue(device: int | None = None) -> Queue:
    """A second queue of ``device`` (the current device when None), created on first use: work enqueued there runs
    concurrently with the default queue's unless ordered by events (:meth:`Queue.record_event`,
    :meth:`Queue.wait_event`).  The hybrid drivers copy their next panel to the host on it (look-ahead)."""
    return _cached(_native.current.transfer_queues, device)
