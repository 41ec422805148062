"""Helpers several host topics share."""

from __future__ import annotations

import functools

import numpy as np

from .. import _host_jit


def same_objects(fn, by_value: int, limit: int = 256):
    """``fn`` answered at once for a call whose arguments after the first ``by_value`` are the very objects of an
    earlier call (a layer passes the same checked geometry tuples at every call): found by their identities, without
    hashing nested tuples and their types again. A hashable tuple cannot change and the kept answer holds its
    arguments alive (no other object gets their ids), so an identity stands for the value and its types; the first
    ``by_value`` arguments (shapes) are keyed by value. Unhashable arguments (a list, which its owner may change in
    place) are never kept; an error is never kept. The answer must be read only, never changed by its callers."""
    seen: dict = {}  # key -> (the objects, kept alive, the answer)

    @functools.wraps(fn)
    def call(*args):
        objects = args[by_value:]
        key = args[:by_value] + tuple(map(id, objects))
        hit = seen.get(key)
        if hit is not None:
            return hit[1]
        answer = fn(*args)
        try:
            hash(objects)
        except TypeError:
            return answer
        if len(seen) >= limit:
            seen.clear()
        seen[key] = (objects, answer)
        return answer

    call.seen = seen
    return call


def _channel_shape(ndim: int, c: int) -> tuple[int, ...]:
    return (1, c) + (1,) * (ndim - 2)


def _fused_rows(x, *same, small=()) -> bool:
    """True when ``_host_jit``'s fused row kernels take these arrays: numba there, ``same`` of x's shape, all of
    one float dtype and C-contiguous (``small``: any shape). Serial kernels: a numba thread pool (prange) measured
    slower on 2 shared cores, its waking threads contending with OpenBLAS's spinning ones after each GEMM."""
    dtype = x.dtype
    if _host_jit.kernels is None or dtype not in _FLOATS or not (isinstance(x, np.ndarray) and x.flags.c_contiguous):
        return False
    shape = x.shape
    for b in same:  # (loops, not all() over generators: this guard runs on every fused call)
        if not (isinstance(b, np.ndarray) and b.shape == shape and b.dtype == dtype and b.flags.c_contiguous):
            return False
    for b in small:
        if not (isinstance(b, np.ndarray) and b.dtype == dtype and b.flags.c_contiguous):
            return False
    return True


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
