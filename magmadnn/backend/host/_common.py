"""Helpers several host topics share."""

from __future__ import annotations

import numpy as np

from .. import _host_jit


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
