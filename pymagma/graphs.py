"""CUDA graphs: record the work a queue receives once, then replay it with one launch.

::

    x = pymagma.asarray(first_batch)                 # static buffers: allocated before the capture
    with pymagma.graphs.capture() as graph:          # on the default queue of the current device
        y = kernels.relu(x @ w)                      # recorded, not run; y comes from the graph's memory pool
    for batch in batches:
        x.set(batch)                                 # new data into the static input
        graph.launch()                               # the recorded work, in order, on the queue's stream
        use(y)

During the capture, MAGMA routines, cuDNN calls and pymagma's kernels are recorded on the queue's stream; what
cannot be recorded — a synchronize, a read or write of device memory by the host (``get``, ``set``, ``asarray``),
a copy from or to pageable host memory, a routine that returns a result to the host at the call (LAPACK drivers
with ``info``, dot products, the hybrid drivers), an allocation outside the graph's pool — raises
:class:`~pymagma.errors.GraphCaptureError` naming the operation, and the capture is invalid from then on (ending it
raises too).  Arrays allocated during the capture come from a memory pool that belongs to the graph: their
addresses are what the graph reads and writes, so the pool is handed to no one else while the graph lives, and a
replay never allocates.  Replaying a graph equals running the captured work again with whatever the static
buffers hold then.
"""

from __future__ import annotations

import contextlib
import threading

from . import _native, memory, runtime
from ._deferred import capturing as _capturing
from .errors import GraphCaptureError
from .queue import Queue, default_queue

__all__ = ["Graph", "capture", "capturing"]

_state = runtime.capture_state  # ``graph``: what this thread is capturing (None when none)
_deferred: list = []  # graphs destroyed during a capture, destroyed when it ends


def _destroy_deferred() -> None:
    while _deferred:
        _deferred.pop().destroy()
    runtime.run_after_capture()


def _release(cudart, exec_, graph, pool) -> None:
    """Destroy a graph's executable and graph (handles of ``cudart``, the runtime that captured it) and close its
    memory pool: cached blocks freed now, blocks of arrays still alive freed after they die."""
    if exec_ is not None:
        cudart.cudaGraphExecDestroy(exec_)
    if graph is not None:
        cudart.cudaGraphDestroy(graph)
    pool.close()


def capturing() -> Graph | None:
    """The graph the calling thread is capturing now, or None."""
    return _state.__dict__.get("graph")


class Graph:
    """A captured CUDA graph, instantiated and ready to :meth:`launch`; it owns the memory pool of the arrays made
    while it was captured.  Made by :func:`capture`."""

    def __init__(self, queue: Queue, mode: str):
        self.queue, self.mode = queue, mode
        self.pool = memory.Pool(relaxed=True)  # the graph's memory: allocations during the capture, never shared
        self._cudart = _native.current.cudart  # the runtime that captured it destroys it
        self._graph = self._exec = None
        self._bound = None  # (the runtime, its cudaGraphLaunch bound to this graph and stream): launch()'s fast path
        self.launches = 0

    def launch(self, queue: Queue | None = None) -> None:
        """Enqueue the recorded work on ``queue``'s stream (default: the queue it was captured on); the host does
        not wait."""
        if queue is None and self._exec is not None:  # the replay loop's path: the call bound once per runtime
            bound = self._bound
            if bound is None or bound[0] is not runtime.active():
                bound = self._bound = (runtime.active(), runtime.bound_call("cudaGraphLaunch", self._exec,
                                                                            self.queue.stream))
            bound[1]()
            self.launches += 1
            return
        if self._exec is None:
            raise GraphCaptureError(0, "cudaErrorInvalidValue", "the graph was destroyed or never captured",
                                    "Graph.launch")
        q = self.queue if queue is None else queue
        runtime.graph_launch(self._exec, q.stream)
        self.launches += 1

    def destroy(self) -> None:
        """Destroy the graph and free its memory pool (idempotent); arrays made during its capture must not be used
        afterwards.  During another capture on this thread (a garbage collection can run then) it is done when that
        capture ends: freeing memory cannot be captured."""
        if capturing() is not None:
            _deferred.append(self)
            return
        _release(self._cudart, self._exec, self._graph, self.pool)
        self._exec = self._graph = self._bound = None
        runtime.run_deferred()

    def __del__(self):
        """Collected without :meth:`destroy`: the release is held back to the next safe point (a finalizer runs
        wherever the garbage collector does, and cudaFree waits for the device's queued work; see
        :func:`pymagma.runtime.deferred`)."""
        try:
            if self._exec is not None or self._graph is not None or not self.pool.closed:
                runtime.deferred(_release, self._cudart, self._exec, self._graph, self.pool)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self) -> str:
        state = "ready" if self._exec is not None else "empty"
        return f"Graph({state}, queue={self.queue!r}, launches={self.launches})"


@contextlib.contextmanager
def capture(queue: Queue | None = None, mode: str = "global"):
    """Capture the work enqueued on ``queue`` (default: the current device's default queue) in the block into a
    :class:`Graph`, instantiated when the block ends.  ``mode``: CUDA's capture mode, "global" (default: any
    thread's unsafe call fails), "thread_local" or "relaxed".  Captures do not nest."""
    if capturing() is not None:
        raise GraphCaptureError(0, "cudaErrorIllegalState", "a capture is already in progress on this thread",
                                "pymagma.graphs.capture")
    q = default_queue() if queue is None else queue
    runtime.run_deferred()  # frees held back: made before, as none can be made during the capture
    graph = Graph(q, mode)
    runtime.begin_capture(q.stream, mode)
    _state.graph = graph
    _capturing.add(threading.get_ident())
    try:
        with memory.using_pool(graph.pool):
            yield graph
    except BaseException:
        _state.graph = None
        _capturing.discard(threading.get_ident())
        _destroy_deferred()
        status, handle = _native.current.cudart.cudaStreamEndCapture(q.stream)  # out of capture mode
        if int(status) == 0 and handle is not None:
            _native.current.cudart.cudaGraphDestroy(handle)
        graph.destroy()
        raise
    _state.graph = None
    _capturing.discard(threading.get_ident())
    try:
        graph._graph = runtime.end_capture(q.stream)
        _destroy_deferred()  # GraphCaptureError when an operation invalidated it
        graph._exec = runtime.graph_instantiate(graph._graph)
    except BaseException:
        graph.destroy()
        raise
