"""Host gathers, tiling, broadcasting and cumulative sums (``ops/indexing.py``): NumPy; the gathers' backward adds
into place with ``np.add.at``."""

from __future__ import annotations

import numpy as np


def _resolved(indices, size):
    indices = np.asarray(indices)
    return np.where(indices < 0, indices + size, indices)


def take(a, indices, axis):
    return np.take(a, _resolved(indices, a.shape[axis]), axis=axis)


def take_backward(dy, indices, axis, size):
    flat = _resolved(indices, size).reshape(-1)
    lead, trail = dy.shape[:axis], dy.shape[axis + np.ndim(indices):]
    dx = np.zeros((*lead, size, *trail), dy.dtype)
    np.add.at(dx, (slice(None),) * axis + (flat,), dy.reshape((*lead, flat.size, *trail)))
    return dx


def take_along_axis(a, indices, axis):
    return np.take_along_axis(a, _resolved(indices, a.shape[axis]), axis=axis)


def take_along_axis_backward(dy, indices, axis, size):
    idx = _resolved(indices, size)
    shape = list(dy.shape)
    shape[axis] = size
    dx = np.zeros(shape, dy.dtype)
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    np.add.at(dx, tuple(grid), dy)
    return dx


def tile(a, repeats):
    return np.tile(a, tuple(int(r) for r in repeats))


def broadcast_to(a, shape):
    return np.array(np.broadcast_to(a, tuple(shape)))


def cumsum(a, axis, exclusive, reverse):
    x = np.flip(a, axis) if reverse else a
    y = np.cumsum(x, axis=axis, dtype=a.dtype)
    if exclusive:
        y = y - x
    return np.ascontiguousarray(np.flip(y, axis)) if reverse else y
