"""Maximum and sum along the last axis for the host's softmaxes, faster than NumPy's reductions on short rows.

NumPy reduces a short last axis (attention's 32 keys) row by row, several times slower than a pass over the data;
here the row maximum is a compiled loop (numba, the ``jit`` extra; ``np.max`` without it) and the row sum a
matrix-vector product by ones (BLAS). Both keep the reduced axis (size 1), as ``keepdims=True`` does; a NaN in a row
gives a NaN row of the softmax either way (the maximum may skip it, the sum does not).
"""

from __future__ import annotations

import importlib

import numpy as np

from .. import _host_jit

__all__ = ["last_max", "last_sum"]

_KERNEL: list = []


def _row_max_kernel():
    if not _KERNEL:
        made = None
        if _host_jit.enabled():
            try:
                numba = importlib.import_module("numba")
            except ImportError:
                numba = None
            if numba is not None:
                @numba.njit(cache=True)
                def row_max(a, out):
                    for r in range(a.shape[0]):
                        m = a[r, 0]
                        for j in range(1, a.shape[1]):
                            v = a[r, j]
                            m = v if v > m else m
                        out[r] = m

                made = row_max
        _KERNEL.append(made)
    return _KERNEL[0]


def _rows(a):
    """``a`` as (rows, last) without a copy, or None (not C-contiguous, not float32/float64, empty)."""
    if a.ndim == 0 or a.size == 0 or not a.flags.c_contiguous or a.dtype not in (np.float32, np.float64):
        return None
    return a.reshape(-1, a.shape[-1])


def last_max(a: np.ndarray) -> np.ndarray:
    """``np.max(a, axis=-1, keepdims=True)``."""
    rows, kernel = _rows(a), _row_max_kernel()
    if rows is None or kernel is None:
        return np.max(a, axis=-1, keepdims=True)
    out = np.empty(rows.shape[0], a.dtype)
    kernel(rows, out)
    return out.reshape(*a.shape[:-1], 1)


def last_sum(a: np.ndarray) -> np.ndarray:
    """``np.sum(a, axis=-1, keepdims=True)`` (in BLAS's summation order)."""
    rows = _rows(a)
    if rows is None:
        return np.sum(a, axis=-1, keepdims=True)
    return (rows @ np.ones(a.shape[-1], a.dtype)).reshape(*a.shape[:-1], 1)
