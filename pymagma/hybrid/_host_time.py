"""Host-time accounting of the hybrid drivers: :func:`on_host` counts a block of host-side work (panels, reflectors,
the tridiagonal and bidiagonal solvers); :func:`host_seconds` and :func:`host_time` report it."""

from __future__ import annotations

import contextlib
import threading
import time

_host_total = 0.0  # seconds of host-side work since import (never reset: host_time() measures differences)
_host_reset_at = 0.0
_host_lock = threading.Lock()


@contextlib.contextmanager
def on_host():
    """Count the block as host-side work of a driver (its panel factorizations, reflectors, small solvers)."""
    global _host_total
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        with _host_lock:
            _host_total += dt


def host_seconds() -> float:
    """Seconds the hybrid drivers have spent in host-side work since import or the last :func:`reset_host_seconds`,
    over all drivers and threads: NumPy's LAPACK on panels and diagonal blocks, building reflectors and their
    triangular factors, the tridiagonal and bidiagonal solvers.  Transfers and waits for the device are not
    counted; with look-ahead most of this time overlaps device work, without it all of it adds to the wall time."""
    return _host_total - _host_reset_at


def reset_host_seconds() -> None:
    """Start :func:`host_seconds` again from zero."""
    global _host_reset_at
    with _host_lock:
        _host_reset_at = _host_total


class HostTime:
    """What :func:`host_time` yields: ``seconds`` is the host-side work counted since the block began (frozen when
    it ends); resets of :func:`host_seconds` do not affect it."""

    def __init__(self):
        self._start, self._end = _host_total, None

    @property
    def seconds(self) -> float:
        return (_host_total if self._end is None else self._end) - self._start


@contextlib.contextmanager
def host_time():
    """``with hybrid.host_time() as t: ...`` then ``t.seconds``: the hybrid drivers' host-side seconds (as
    :func:`host_seconds` counts them) spent inside the block."""
    t = HostTime()
    try:
        yield t
    finally:
        t._end = _host_total
