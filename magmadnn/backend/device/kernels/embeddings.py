"""Launchers of embeddings.cu: rows of a table gathered by int64 indices, and the table gradient."""

from __future__ import annotations

from ctypes import c_longlong

import numpy as np

from pymagma import _checks, _native
from pymagma import array as _array
from pymagma._checks import Plans
from pymagma.kernels import programs
from pymagma.kernels.common import THREADS, _device_array, _float_dtype, _run
from pymagma.kernels.elementwise import cast, contiguous
from pymagma.kernels.loader import MAX_BLOCKS


def _indices(indices, what: str):
    if programs.dtype_name(_device_array(indices, f"{what} indices").dtype) != "int64":
        raise TypeError(f"{what}: indices must be an int64 DeviceArray, got {indices.dtype}")
    return contiguous(indices)


_DeviceArray, _INT64 = _array.DeviceArray, np.dtype(np.int64)

#: {(launcher, operands' signature, scalars): what its checks decided}: a call with a signature seen before skips
#: its checks (they hold for every call with it) and launches with the arguments they decided; errors never kept
_CHECKED = Plans()


def embedding(table, indices):
    """Rows of ``table`` (rows, dim) picked by the int64 ``indices`` (any shape) -> ``indices.shape + (dim,)``.  An
    index outside [0, rows) is never read: its output row is NaN.  Integer indices of another dtype are refused
    (:func:`embedding_forward` casts them)."""
    if indices.__class__ is _DeviceArray and indices.dtype is not _INT64 and indices.dtype.kind in "iu":
        return _embedding(table, indices)  # (raises, naming them)
    return embedding_forward(table, indices)


def embedding_forward(table, indices):
    """The device backend's op ``embedding_forward`` (no wrapper): :func:`embedding` of indices of any integer dtype
    (cast to int64 first); a call whose operands' signature was checked before launches in this one frame."""
    if indices.__class__ is _DeviceArray and indices.dtype is not _INT64 and indices.dtype.kind in "iu":
        indices = cast(indices, np.int64)
    try:
        key = ("embedding", table.__class__, table.shape, table.dtype, table.device, indices.__class__,
               indices.shape, indices.dtype, indices.device)
        decided = _CHECKED.get(key)
    except (AttributeError, TypeError):  # not arrays (or unhashable): the checked path names what is wrong
        key = decided = None
    if decided is not None:  # the checks of this signature passed before: its launch
        expression, out_shape, (n, rows, dim), grid = decided
        if not table.is_c_contiguous:
            table = contiguous(table)
        if not indices.is_c_contiguous:
            indices = contiguous(indices)
        device = table.device
        out = _array._empty(out_shape, table.dtype, device)
        libraries = _native.current  # (common._run, inline: the planned gather is never empty)
        libraries.launcher.launch("embeddings", expression, device,
                                  (libraries.default_queues.get(device) or table.queue).stream, grid, THREADS,
                                  [table.ptr, indices.ptr, out.ptr, c_longlong(n), c_longlong(rows), c_longlong(dim)])
        return out
    out = _embedding(table, indices)
    if key is not None and out.size:  # (an empty gather is never planned: its every call checked)
        _CHECKED.keep(key, (programs.expression("embedding_gather", _float_dtype(table, "embedding")), out.shape,
                            (indices.size, table.shape[0], table.shape[1]), min(-(-out.size // THREADS), MAX_BLOCKS)))
    return out


def _embedding(table, indices):
    """:func:`embedding`, every argument checked."""
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
    added in the order of the indices (deterministic: one block per table row, no atomics).  Integer indices of
    another dtype are refused (:func:`embedding_backward_op` casts them)."""
    if (indices.__class__ is _DeviceArray and indices.dtype is not _INT64 and indices.dtype.kind in "iu") or \
            rows.__class__ is not int:
        return _embedding_backward(dy, indices, rows)  # (raises, naming them; or rows of another integer type)
    return embedding_backward_op(dy, indices, rows)


def embedding_backward_op(dy, indices, num_rows):
    """The device backend's op ``embedding_backward`` (no wrapper): :func:`embedding_backward` of indices of any
    integer dtype (cast to int64 first) into ``int(num_rows)`` rows; a call whose operands' signature was checked
    before launches in this one frame."""
    if indices.__class__ is _DeviceArray and indices.dtype is not _INT64 and indices.dtype.kind in "iu":
        indices = cast(indices, np.int64)
    rows = int(num_rows)
    try:
        key = ("embedding_backward", dy.__class__, dy.shape, dy.dtype, dy.device, indices.__class__, indices.shape,
               indices.dtype, indices.device, rows.__class__, rows)
        decided = _CHECKED.get(key)
    except (AttributeError, TypeError):  # not arrays (or unhashable): the checked path names what is wrong
        key = decided = None
    if decided is not None:  # the checks of this signature passed before: its launch
        expression, out_shape, (n, rows, dim) = decided
        if not dy.is_c_contiguous:
            dy = contiguous(dy)
        if not indices.is_c_contiguous:
            indices = contiguous(indices)
        device = dy.device
        dtable = _array._empty(out_shape, dy.dtype, device)
        libraries = _native.current  # (common._run, inline: rows >= 1, checked)
        libraries.launcher.launch("embeddings", expression, device,
                                  (libraries.default_queues.get(device) or dy.queue).stream, min(rows, 65535),
                                  THREADS, [dy.ptr, indices.ptr, dtable.ptr, c_longlong(n), c_longlong(rows),
                                            c_longlong(dim)])
        return dtable
    dtable = _embedding_backward(dy, indices, rows)
    if key is not None:
        _CHECKED.keep(key, (programs.expression("embedding_scatter_add", _float_dtype(dy, "embedding_backward")),
                            dtable.shape, (indices.size, dtable.shape[0], dtable.shape[1])))
    return dtable


def _embedding_backward(dy, indices, rows):
    """:func:`embedding_backward`, every argument checked."""
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
