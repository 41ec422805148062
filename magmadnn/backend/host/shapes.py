"""Host shape and routing ops: reshape, transpose, concatenate, split and nearest-neighbour upsampling."""

from __future__ import annotations

import numpy as np

from .. import geometry


def reshape(a, shape):
    if type(a) is np.ndarray:  # the method: np.reshape's Python frames skipped, the same view or copy
        return a.reshape(shape)
    return np.reshape(a, shape)


def transpose(a, axes=None):
    return np.transpose(a, axes)


def concatenate(arrays, axis):
    """The arrays joined along ``axis``."""
    arrays = [np.asarray(a) for a in arrays]
    first = arrays[0]
    if any(a.dtype != first.dtype for a in arrays):
        raise TypeError(f"concatenate: arrays have dtypes {sorted({str(a.dtype) for a in arrays})}; the op set does "
                        "not promote")
    return np.concatenate(arrays, axis=geometry.concat_axis([a.shape for a in arrays], axis))


def split(a, sizes, axis):
    """Contiguous pieces of ``a``, ``sizes[i]`` long along ``axis``."""
    sizes, axis = geometry.split_sizes(a.shape, sizes, axis)
    bounds = np.cumsum(sizes)[:-1]
    return tuple(p.copy() for p in np.split(a, bounds, axis=axis))  # copies: never views of ``a``


def upsample_nearest2d(x, size):
    """(N, C, H, W) -> (N, C, H sh, W sw), each pixel repeated over an sh x sw block."""
    sh, sw = geometry.pair(size)
    n, c, h, w = x.shape
    out = np.empty((n, c, h, sh, w, sw), x.dtype)
    out[...] = x[:, :, :, None, :, None]
    return out.reshape(n, c, h * sh, w * sw)


def upsample_nearest2d_backward(dy, size):
    """The sum of each sh x sw block of ``dy``."""
    sh, sw = geometry.pair(size)
    n, c, h, w = dy.shape
    return dy.reshape(n, c, h // sh, sh, w // sw, sw).sum(axis=(3, 5))
