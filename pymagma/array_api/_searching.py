"""The standard's searching functions: ``argmax``, ``argmin``, ``where``, ``nonzero``, ``searchsorted`` and
``count_nonzero``.  ``nonzero`` reads one number back to the host (how many entries are nonzero: its output's
shape depends on the data); everything else stays on the device."""

from __future__ import annotations

import numpy as np

from .. import array as _array
from ..kernels import array_api as _api_kernels
from ..kernels import array_api_reduce as _rk
from . import _dtypes, _elementwise
from ._statistics import _as, _kept, _kinds


def _flat(x):
    x = x if x.is_c_contiguous else _api_kernels.cast(x, x.dtype)
    return x.reshape((x.size,))


def _argreduce(want_max: bool, x, axis, keepdims: bool, what: str):
    x = _kinds(x, "biuf", what)
    if axis is not None and isinstance(axis, tuple | list):
        raise TypeError(f"{what}: axis must be an int or None, got {axis!r}")
    if axis is None:
        if x.size == 0:
            raise ValueError(f"{what}: an empty array (shape {x.shape}) has no "
                             f"{'largest' if want_max else 'smallest'} element")
        out = _rk.argreduce(want_max, _flat(x), 0)
        return out.reshape((1,) * x.ndim) if keepdims else out
    if x.ndim == 0:  # NumPy's answer: a 0-d array is its own (only) element, along axis 0 or -1
        _rk.axes(axis, 1, what)
        return _rk.argreduce(want_max, x.reshape((1,)), 0)
    (axis,) = _rk.axes(axis, x.ndim, what)
    if x.shape[axis] == 0:
        raise ValueError(f"{what}: axis {axis} of shape {x.shape} is empty")
    return _kept(_rk.argreduce(want_max, x, axis), x.shape, (axis,), keepdims)


def argmax(x, /, *, axis=None, keepdims=False):
    """Index (int64) of the first largest element (of the flattened array when ``axis`` is None); the first NaN
    wins, as NumPy."""
    return _argreduce(True, x, axis, keepdims, "argmax")


def argmin(x, /, *, axis=None, keepdims=False):
    """Index (int64) of the first smallest element; the first NaN wins, as NumPy."""
    return _argreduce(False, x, axis, keepdims, "argmin")


def where(condition, x1, x2, /):
    """``x1`` where ``condition`` is true, else ``x2``, all broadcast (Python scalars take the other's dtype)."""
    condition = _elementwise._require(condition, "where")
    x1, x2 = _elementwise._operands(x1, x2, "where")
    if condition.device != x1.device:
        raise ValueError(f"where: arrays on different devices ({condition.device} and {x1.device})")
    dtype = _dtypes.promote(x1.dtype, x2.dtype)
    try:
        shape = tuple(np.broadcast_shapes(condition.shape, x1.shape, x2.shape))
    except ValueError:
        raise ValueError(f"where: shapes {condition.shape}, {x1.shape} and {x2.shape} do not broadcast") from None
    return _rk.where(_as(condition, _dtypes.bool), _as(x1, dtype), _as(x2, dtype), shape)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """How many elements over ``axis`` are nonzero (NaN counts), as int64."""
    x = _kinds(x, "biufc", "count_nonzero")
    ones = _api_kernels.cast(_as(x, _dtypes.bool), _dtypes.int64)
    reduced = _rk.axes(axis, x.ndim, "count_nonzero")
    return _kept(_rk.reduce("sum", ones, reduced), x.shape, reduced, keepdims)


def nonzero(x, /):
    """The indices of the nonzero elements, one int64 array per dimension (C order).  Their length depends on
    the data: one int64 comes back to the host."""
    x = _kinds(x, "biufc", "nonzero")
    if x.ndim == 0:
        raise ValueError("nonzero: a 0-d array is not allowed (the standard asks for at least one dimension)")
    if x.size == 0:
        return tuple(_array._empty((0,), _rk.INDEX, x.device) for _ in range(x.ndim))
    flags = _flat(_as(x, _dtypes.bool))
    csum = _rk.scan("sum", _api_kernels.cast(flags, _dtypes.int64), 0, False)
    count = int(csum[-1])
    coords = _rk.nonzero(flags, csum, count, x.shape)
    return tuple(coords[d] for d in range(x.ndim))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Where ``x2``'s elements (an array or a Python scalar) would go in the sorted 1-D ``x1`` (or ``x1[sorter]``)
    to keep it sorted (NaNs last): the first such index (``side='left'``) or the last ('right'); int64."""
    x1 = _kinds(x1, "biuf", "searchsorted")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D, got shape {x1.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    x1, x2 = _elementwise._operands(x1, x2, "searchsorted")
    dtype = _dtypes.promote(x1.dtype, x2.dtype)
    x1, x2 = _as(x1, dtype), _as(x2, dtype)
    if sorter is not None:
        sorter = _kinds(sorter, "iu", "searchsorted sorter")
        if sorter.shape != x1.shape:
            raise ValueError(f"searchsorted: sorter has shape {sorter.shape}, x1 {x1.shape}")
        x1 = _rk.take(x1, _as(sorter, _rk.INDEX))
    return _rk.searchsorted(x1, x2, side == "right")
