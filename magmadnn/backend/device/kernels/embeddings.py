"""Launchers of embeddings.cu: rows of a table gathered by int64 indices, and the table gradient."""

from __future__ import annotations

from ctypes import c_longlong

from pymagma import _checks
from pymagma import array as _array
from pymagma.kernels import programs
from pymagma.kernels.common import _device_array, _float_dtype, _run
from pymagma.kernels.elementwise import contiguous


def _indices(indices, what: str):
    if programs.dtype_name(_device_array(indices, f"{what} indices").dtype) != "int64":
        raise TypeError(f"{what}: indices must be an int64 DeviceArray, got {indices.dtype}")
    return contiguous(indices)


def embedding(table, indices):
    """Rows of ``table`` (rows, dim) picked by the int64 ``indices`` (any shape) -> ``indices.shape + (dim,)``.  An
    index outside [0, rows) is never read: its output row is NaN."""
    dtype = _float_dtype(table, "embedding")
    if table.ndim != 2:
        raise ValueError(f"embedding: the table must be 2-D (rows, dim), got shape {table.shape}")
    indices = _indices(indices, "embedding")
    if indices.device != table.device:
        raise ValueError(f"embedding: table and indices live on different devices ({table.device} and "
                         f"{indices.device})")
    table = contiguous(table)
    rows, dim = table.shape
    out = _array.empty(tuple(indices.shape) + (dim,), table.dtype, device=table.device)
    _run("embeddings", programs.expression("embedding_gather", dtype), table, out.size,
         [table.ptr, indices.ptr, out.ptr, c_longlong(indices.size), c_longlong(rows), c_longlong(dim)])
    return out


def embedding_backward(dy, indices, rows: int):
    """The table gradient (rows, dim) of :func:`embedding`: each row the sum of the rows of ``dy`` whose index it is,
    added in the order of the indices (deterministic: one block per table row, no atomics)."""
    dtype = _float_dtype(dy, "embedding_backward")
    indices = _indices(indices, "embedding_backward")
    rows = _checks.count(rows, "rows", minimum=1, maximum=2**63 - 1)
    if tuple(dy.shape[:-1]) != tuple(indices.shape) or dy.ndim < 1:
        raise ValueError(f"embedding_backward: dy {dy.shape} must be the indices' shape {indices.shape} + (dim,)")
    if indices.device != dy.device:
        raise ValueError(f"embedding_backward: dy and indices live on different devices ({dy.device} and "
                         f"{indices.device})")
    dy = contiguous(dy)
    dim = int(dy.shape[-1])
    dtable = _array.empty((rows, dim), dy.dtype, device=dy.device)
    _run("embeddings", programs.expression("embedding_scatter_add", dtype), dy, rows,
         [dy.ptr, indices.ptr, dtable.ptr, c_longlong(indices.size), c_longlong(rows), c_longlong(dim)],
         grid=min(rows, 65535))
    return dtable
