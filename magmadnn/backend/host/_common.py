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
    if _host_jit.kernels is None or x.dtype not in (np.float32, np.float64):
        return False
    arrays = (x, *same, *small)
    return (all(b.shape == x.shape for b in same)
            and all(isinstance(b, np.ndarray) and b.dtype == x.dtype and b.flags.c_contiguous for b in arrays))
