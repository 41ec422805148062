"""The simulated runtime's streams: the work queued on each created stream, run in order when something orders it
(:mod:`pymagma.simulator.runtime` says what does), and what happens when host code runs in the middle of that work
(a finalizer the garbage collector runs inside a kernel's computation): a flush made there runs none of that
stream's later work and a free made there waits until the work is done, as on a GPU."""

from __future__ import annotations

import collections
import itertools

_handles = itertools.count(0x5100)  # fake stream/event/queue handles: distinct, never 0 (the legacy stream)
LEGACY = (0, 1)  #: handles of the legacy default stream (0, and cudaStreamLegacy)


def _handle(obj) -> int:
    """An int handle from an int, None (the legacy stream) or a handle object."""
    return 0 if obj is None else int(obj)


class _Work:
    """The work of one created stream not yet run: (sequence number, callable), oldest first."""

    def __init__(self, blocking: bool):
        self.blocking = blocking
        self.pending: collections.deque = collections.deque()
        self.enqueued = 0


class Streams:
    """The stream machinery of :class:`~pymagma.simulator.runtime.SimulatedCudart`, which the other simulated
    libraries queue work with: :meth:`submit`, :meth:`flush`, :meth:`position`, :meth:`create_stream`,
    :meth:`destroy_stream` (its state, ``work``, ``captures``, ``null``, ``_order``, ``_current`` and ``_held``, is
    the runtime's)."""

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
        handle = _handle(stream)
        capture = self.captures.get(handle)
        if capture is not None:  # captured, not run: a node of the graph
            capture.nodes.append(fn)
            return
        if self.null:
            return
        with self._order:
            work = self.work.get(handle)
            if work is not None:
                work.pending.append((work.enqueued, fn))
                work.enqueued += 1
                return
            if handle in LEGACY:
                self.flush_blocking()
            running = self._running()
            running.append(handle)
            try:
                fn()
            finally:
                running.pop()
            if not running and self._held:
                self._release_held()

    def position(self, stream) -> tuple[int, int] | None:
        """(handle, work enqueued so far) of a created stream; None for streams whose work runs at once."""
        work = self.work.get(_handle(stream))
        return None if work is None else (_handle(stream), work.enqueued)

    def flush(self, stream, upto: int | None = None) -> None:
        """Run the queued work of ``stream`` (all of it, or the work enqueued before position ``upto``).  Called
        from inside that stream's running work (host code the garbage collector ran in the middle of a kernel: a
        finalizer's cudaFree), it runs nothing: the later work runs after the current one, in order, as on a GPU."""
        handle = _handle(stream)
        with self._order:
            work = self.work.get(handle)
            if work is None or not work.pending:
                return
            running = self._running()
            if handle in running:
                return
            running.append(handle)
            try:
                while work.pending and (upto is None or work.pending[0][0] < upto):
                    work.pending.popleft()[1]()
            finally:
                running.pop()
            if not running and self._held:
                self._release_held()

    def _running(self) -> list:
        """The streams whose work this thread is running now, innermost last."""
        running = getattr(self._current, "running", None)
        if running is None:
            running = self._current.running = []
        return running

    def _release_held(self) -> None:
        """The frees asked for while device work ran, made now that it is done (each waits for the device)."""
        while self._held:
            self._release(*self._held.pop(0))

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
