"""Copies between device arrays of any layouts (:func:`copy_into`, re-exported by :mod:`pymagma.array`): one
memcpy for contiguous arrays, 2-D memcpys for row-strided ones, a MAGMA transpose for column-major matrices, the
host otherwise."""

from __future__ import annotations

import numpy as np

from . import runtime


def _pitched_rows(x) -> bool:
    """Whether ``x``'s matrices are rows a 2-D memcpy can address: unit stride along the last axis and a row pitch
    of at least one row (cudaMemcpy2D takes no negative, zero or overlapping pitch)."""
    if not (x.shape[-1] == 1 or x.strides[-1] == x.itemsize):
        return False
    return x.ndim == 1 or x.shape[-2] <= 1 or x.strides[-2] >= x.shape[-1] * x.itemsize


def copy_into(dst, src) -> None:
    """Copy ``src`` into ``dst`` (same shape and dtype) on the device.  Row-strided layouts (unit stride along the
    last axis, a row pitch of at least one row) copy with one 2-D memcpy per matrix; column-major float/complex
    matrices (transposed views, LAPACK results) with one device transpose per matrix; other source layouts
    (reversed or broadcast rows, other dtypes' transposes) go through the host once into a C-contiguous ``dst``."""
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError(f"copy_into: {src.shape} {src.dtype} into {dst.shape} {dst.dtype}")
    if src.size == 0:
        return
    if dst.is_c_contiguous and src.is_c_contiguous:
        runtime.memcpy_dtod(dst.ptr, src.ptr, src.nbytes)
        return
    if src.ndim and all(_pitched_rows(x) for x in (dst, src)):
        shape = (1, *src.shape) if src.ndim == 1 else src.shape
        d_str = (0, *dst.strides) if dst.ndim == 1 else dst.strides
        s_str = (0, *src.strides) if src.ndim == 1 else src.strides
        width = shape[-1] * src.itemsize
        for idx in np.ndindex(*shape[:-2]):
            s_off = sum(i * s for i, s in zip(idx, s_str))
            d_off = sum(i * s for i, s in zip(idx, d_str))
            runtime.memcpy_2d(dst.ptr + d_off, d_str[-2] if shape[-2] > 1 else width, src.ptr + s_off,
                              s_str[-2] if shape[-2] > 1 else width, width, shape[-2])
        return
    if not dst.is_c_contiguous:
        raise ValueError(f"copy_into cannot write strides {dst.strides} from strides {src.strides}")
    if src.ndim >= 2 and src.dtype.name in _TRANSPOSABLE and _pitched_rows(src.mT) and _magma_available():
        _transpose_into(dst, src)
        return
    dst.set(src.get())  # general source strides: one host round trip


def _magma_available() -> bool:
    from . import _magma
    from .errors import LibraryNotFoundError

    try:
        _magma.initialized()
    except LibraryNotFoundError:
        return False
    return True


#: dtypes magmablas_?transpose handles (MAGMA's four precisions)
_TRANSPOSABLE = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}


def _transpose_into(dst, src) -> None:
    """Column-major matrices (``src.mT`` row-strided, e.g. a transposed view or a LAPACK result) into the
    C-contiguous ``dst`` with one magmablas_?transpose per matrix on the device's default queue."""
    from . import _magma

    rows, cols = src.shape[-2:]
    transpose = _magma.initialized().bind(f"magmablas_{_TRANSPOSABLE[src.dtype.name]}transpose")
    ld, q = src.strides[-1] // src.itemsize, dst.queue.handle
    for idx in np.ndindex(*src.shape[:-2]):
        # read column-major, each src matrix is rows x cols (leading dimension ld); its transpose, cols x rows with
        # leading dimension cols, is exactly the C-ordered rows x cols matrix of dst
        s_off = sum(i * st for i, st in zip(idx, src.strides))
        d_off = sum(i * st for i, st in zip(idx, dst.strides))
        transpose(rows, cols, src.ptr + s_off, max(ld, 1), dst.ptr + d_off, max(cols, 1), q)
