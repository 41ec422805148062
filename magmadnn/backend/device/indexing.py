"""Device gathers, tiling, broadcasting and cumulative sums (``ops/indexing.py``): pymagma's array API kernels; the
gathers' backward adds each pick into place by a one-hot matrix product (a batched gemm, no atomics)."""

from __future__ import annotations

import numpy as np

from pymagma import array_api as _A


def _resolved(indices, size):
    indices = indices if indices.dtype == np.int64 else _A.astype(indices, "int64")
    return _A.where(indices < 0, indices + size, indices)


def _onehot(idx, size, dtype):
    """(..., k, size): 1 where ``idx[..., k]`` is the column (int64 ``idx`` of shape (..., k))."""
    rows = _A.arange(size, dtype="int64", device=idx.device)
    return _A.astype(_A.equal(_A.expand_dims(idx, axis=-1), rows), dtype)


def take(a, indices, axis):
    flat = _A.reshape(_resolved(indices, a.shape[axis]), (-1,))
    picked = _A.take(a, flat, axis=axis)
    return _A.reshape(picked, (*a.shape[:axis], *indices.shape, *a.shape[axis + 1:]))


def take_backward(dy, indices, axis, size):
    flat = _A.reshape(_resolved(indices, size), (-1,))
    k = int(flat.shape[0])
    lead, trail = dy.shape[:axis], dy.shape[axis + indices.ndim:]
    g = _A.moveaxis(_A.reshape(dy, (*lead, k, *trail)), axis, -1)  # (..., k)
    dx = _A.matmul(_A.reshape(g, (-1, k)), _onehot(flat, size, dy.dtype))  # (rest, size)
    return _A.moveaxis(_A.reshape(dx, (*g.shape[:-1], size)), -1, axis)


def take_along_axis(a, indices, axis):
    return _A.take_along_axis(a, _resolved(indices, a.shape[axis]), axis=axis)


def take_along_axis_backward(dy, indices, axis, size):
    idx = _A.moveaxis(_resolved(indices, size), axis, -1)  # (..., k)
    g = _A.expand_dims(_A.moveaxis(dy, axis, -1), axis=-2)  # (..., 1, k)
    dx = _A.matmul(g, _onehot(idx, size, dy.dtype))  # (..., 1, size)
    return _A.moveaxis(_A.squeeze(dx, axis=-2), -1, axis)


def tile(a, repeats):
    return _A.tile(a, tuple(int(r) for r in repeats))


def broadcast_to(a, shape):
    return _A.asarray(_A.broadcast_to(a, tuple(shape)), copy=True)


def cumsum(a, axis, exclusive, reverse):
    x = _A.flip(a, axis=axis) if reverse else a
    y = _A.cumulative_sum(x, axis=axis, dtype=a.dtype)
    if exclusive:
        y = y - x
    return _A.flip(y, axis=axis) if reverse else y
