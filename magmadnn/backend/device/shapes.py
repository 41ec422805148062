"""Device shape and routing ops: strided copies (pymagma.kernels.copy) into and out of views of one array, no new
kernel and no host round trip."""

from __future__ import annotations

import numpy as np

from pymagma import array as _array
from pymagma import kernels as _k
from pymagma.array import DeviceArray as _DeviceArray

from .. import geometry as _geometry
from ._common import (
    _contiguous,
    _copy_any,
    _retype,
    _same_dtype,
)

reshape = _array.reshape_to  # (a, shape): a view, of a device copy first when ``a`` is not C-contiguous


def transpose(a, axes=None):
    return _copy_any(a.transpose() if axes is None else a.transpose(tuple(axes)))


def _along(axis: int, start: int, stop: int) -> tuple:
    """The index of ``start:stop`` along ``axis``."""
    return (slice(None),) * axis + (slice(start, stop),)


def concatenate(arrays, axis):
    """The arrays joined along ``axis``: one strided copy of each into its slice of the result."""
    arrays = list(arrays)
    _same_dtype("concatenate", *arrays)
    first = arrays[0]
    axis = _geometry.concat_axis([a.shape for a in arrays], axis)
    total = int(np.sum([a.shape[axis] for a in arrays]))
    shape = tuple(total if d == axis else n for d, n in enumerate(first.shape))
    out = _array.empty(shape, first.dtype, device=first.device)
    offset = 0
    for a in arrays:
        n = a.shape[axis]
        if n:
            _copy_into(a, out[_along(axis, offset, offset + n)])
        offset += n
    return out


def _copy_into(a, view) -> None:
    if a.dtype == np.bool_:
        _k.copy(_retype(a, np.uint8), out=_retype(view, np.uint8))
    else:
        _k.copy(a, out=view)


def split(a, sizes, axis):
    """Contiguous copies of the pieces of ``a`` along ``axis``."""
    sizes, axis = _geometry.split_sizes(a.shape, sizes, axis)
    out, offset = [], 0
    for n in sizes:
        out.append(_copy_any(a[_along(axis, offset, offset + n)]))
        offset += n
    return tuple(out)


def upsample_nearest2d(x, size):
    """One strided copy of x seen as (N, C, H, sh, W, sw) with zero strides along the repeats."""
    sh, sw = _geometry.pair(size)
    n, c, h, w = x.shape
    x6 = _contiguous(x).reshape(n, c, h, 1, w, 1)
    strides = tuple(0 if d in (3, 5) else s for d, s in enumerate(x6.strides))
    repeated = _DeviceArray((n, c, h, sh, w, sw), x.dtype, x6.ptr, strides, owner=x6, device=x.device)
    return _k.copy(repeated).reshape(n, c, h * sh, w * sw)


def upsample_nearest2d_backward(dy, size):
    """One reduction over the repeat axes of dy seen as (N, C, H, sh, W, sw)."""
    sh, sw = _geometry.pair(size)
    n, c, h, w = dy.shape
    return _k.reduce("sum", _contiguous(dy).reshape(n, c, h // sh, sh, w // sw, sw), axis=(3, 5))
