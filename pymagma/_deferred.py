"""Frees held back to a safe point: those a thread asks for while it captures a CUDA graph (a free cannot be
captured), and every free a finalizer asks for (a collected graph, an array of a destroyed graph's pool, a
page-locked buffer).  Re-exported by :mod:`pymagma.runtime`."""

from __future__ import annotations

import collections
import threading

# ``graph``: what this thread is capturing (set by pymagma.graphs.capture), read as ``capture_state.__dict__.get``
# (getattr with a default raises and catches inside, on every copy and free, for a thread that never captured)
capture_state = threading.local()
capturing: set = set()  # the threads capturing now: another thread's cudaFree would spoil a global-mode capture
# (fn, args): frees held back, made in order at the next safe point (:func:`run_deferred`): those made while this
# thread captured, and every free a finalizer asks for.  The garbage collector runs finalizers wherever an
# allocation happens to trigger it — in the middle of a kernel the simulator runs, or of CPython's context-variable
# update inside ``np.errstate`` — and cudaFree there waits for (on the simulator: runs) the device's queued work, or
# spoils another thread's capture; so a finalizer only queues its free here (a deque append: no lock, no call).
_after_capture: collections.deque = collections.deque()


def after_capture(fn, *args) -> None:
    """``fn(*args)`` now, or when this thread's capture has ended if it is capturing (for frees, which cannot be
    captured)."""
    if capture_state.__dict__.get("graph") is not None:
        _after_capture.append((fn, args))
    else:
        fn(*args)


def deferred(fn, *args) -> None:
    """Queue ``fn(*args)`` for the next safe point: what a finalizer calls instead of freeing (see above)."""
    _after_capture.append((fn, args))


def run_deferred() -> None:
    """Make the frees held back, oldest first (nothing while any thread is capturing): called where pymagma is in
    charge of the moment — a capture's start and end, an allocation that reaches cudaMalloc, ``empty_cache``,
    ``pool_stats``, an explicit ``Graph.destroy`` and :func:`pymagma.runtime.synchronize`."""
    if capturing or capture_state.__dict__.get("graph") is not None:
        return
    while _after_capture:
        try:
            fn, args = _after_capture.popleft()
        except IndexError:  # another thread took the last one
            return
        fn(*args)
