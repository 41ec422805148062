"""Indexing beyond basic slicing, on the device: ``take``, ``take_along_axis``, integer-array and boolean-mask
``__getitem__``, and ``__setitem__`` (basic, integer-array and boolean-mask keys; values broadcast).

Integer arrays become element offsets (one kernel per index array), then one gather (or scatter); a boolean mask
gets each true element's place by a chunked count and scan, and the one host read is the number of true elements
(the output's data-dependent size; a ``__setitem__`` whose value broadcasts over them needs no read). Integer
indices outside their axis are NumPy's IndexError at the next host read (:mod:`._index_faults`)."""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import array as _array
from ..kernels import array_api as _kernels
from . import _creation, _dtypes, _elementwise, _manipulation
from ._index_faults import checked_offsets

_INDEX_KINDS = "iu"


def _elements(a) -> tuple:
    return tuple(s // a.itemsize for s in a.strides)


def _index_array(idx, what: str):
    if not isinstance(idx, _array.DeviceArray):
        raise TypeError(f"{what}: indices must be a pymagma DeviceArray, got {type(idx).__name__}")
    if idx.dtype.kind not in _INDEX_KINDS:
        raise TypeError(f"{what}: indices must have an integer dtype, not {idx.dtype}")
    return idx


def take(x, indices, /, *, axis=None):
    """The elements of ``x`` at the 1-D integer ``indices`` along ``axis`` (optional for a 1-D ``x``); negative
    indices count from the end, an out-of-range one is NumPy's IndexError at the next host read (see
    :mod:`._index_faults`; the standard leaves them unspecified)."""
    x = _elementwise._require(x, "take")
    indices = _index_array(indices, "take")
    if indices.ndim != 1:
        raise ValueError(f"take: indices must be 1-D, got shape {indices.shape}")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for an array of {x.ndim} dimensions")
        axis = 0
    a = _manipulation._axis(axis, x.ndim, "take")
    n = x.shape[a]
    if n == 0 and indices.size:
        raise IndexError(f"take: indices into an empty axis {a}")
    shape = (*x.shape[:a], indices.shape[0], *x.shape[a + 1:])
    if math.prod(shape) == 0:
        return _array._empty(shape, x.dtype, x.device)
    strides = _elements(x)
    off = checked_offsets(indices, indices.shape, n, strides[a], a)
    x_strides = (*strides[:a], 0, *strides[a + 1:])
    off_strides = (0,) * a + (1,) + (0,) * (x.ndim - a - 1)
    return _kernels.gather(x, off, shape, x_strides, off_strides)


def take_along_axis(x, indices, /, *, axis=-1):
    """``x``'s elements at ``indices`` (same rank, broadcast against ``x`` off ``axis``) along ``axis``."""
    x = _elementwise._require(x, "take_along_axis")
    indices = _index_array(indices, "take_along_axis")
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices of rank {indices.ndim} for an array of rank {x.ndim}")
    a = _manipulation._axis(axis, x.ndim, "take_along_axis")
    x_off = (*x.shape[:a], 1, *x.shape[a + 1:])
    i_off = (*indices.shape[:a], 1, *indices.shape[a + 1:])
    base = _manipulation._broadcast_shape((x_off, i_off), "take_along_axis")
    shape = (*base[:a], indices.shape[a], *base[a + 1:])
    n = x.shape[a]
    if math.prod(shape) == 0:
        return _array._empty(shape, x.dtype, x.device)
    if n == 0:
        raise IndexError(f"take_along_axis: indices into an empty axis {a}")
    strides = _elements(x)
    off = checked_offsets(indices, shape, n, strides[a], a)
    x_strides = tuple(0 if d == a or x.shape[d] == 1 else s for d, s in enumerate(strides))
    return _kernels.gather(x, off, shape, x_strides, _array.c_strides(shape, 1))


# ---------------------------------------------------------------------------------------------- __getitem__
def _is_array(k) -> bool:
    return isinstance(k, _array.DeviceArray)


def _mask_key(x, key):
    """The boolean mask of ``key`` when it is the sole index (None otherwise); IndexError when a mask is mixed
    with other indices or does not match ``x``'s leading axes."""
    keys = key if isinstance(key, tuple) else (key,)
    masks = [k for k in keys if _is_array(k) and k.dtype.kind == "b"]
    if not masks:
        return None
    if len(keys) != 1:
        raise IndexError("a boolean array index must be the sole index (the array API standard)")
    m = masks[0]
    if m.device != x.device:
        raise ValueError(f"a mask on device {m.device} indexes an array on device {x.device}")
    if m.ndim > x.ndim or any(k not in (n, 0) for k, n in zip(m.shape, x.shape)):
        raise IndexError(f"boolean index of shape {m.shape} does not match the array's leading shape {x.shape}")
    return m


def _empty_mask(x, m) -> bool:
    """Whether the mask selects nothing by its shape: a size-0 axis (the standard allows it against any size)."""
    return m.ndim > 0 and 0 in m.shape


def _mask_plan(x, m):
    """(x viewed with the mask's axes first, the mask, positions, chunk counts)."""
    if m.ndim == 0:  # a 0-d mask: a new axis of length 1 (or 0)
        x, m = _manipulation.expand_dims(x, axis=0), m.reshape(1)
    pos, counts = _kernels.mask_positions(m)
    return x, m, pos, counts


def _count(counts) -> int:
    """The number of true mask elements: the one device->host read of boolean indexing."""
    last = counts.shape[0] - 1
    return int(counts._view(last * counts.itemsize, (1,), (counts.itemsize,)).get()[0])


def _integer_plan(x, key):
    """For a key of integer arrays with ints, slices and one Ellipsis (NumPy's rule for where the broadcast index
    axes go: in place of the indexed axes when those are adjacent, else first): (x offset by the ints and slices,
    element offsets, result shape, x's strides and the offsets' strides over it)."""
    keys = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in keys) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if any(k is Ellipsis for k in keys):
        i = next(j for j, k in enumerate(keys) if k is Ellipsis)
        keys = keys[:i] + (slice(None),) * (x.ndim - len(keys) + 1) + keys[i + 1:]
    if len(keys) > x.ndim:
        raise IndexError(f"too many indices: array is {x.ndim}-dimensional, {len(keys)} were indexed")
    keys = keys + (slice(None),) * (x.ndim - len(keys))
    strides = _elements(x)
    arrays, indexed, base = [], [], 0
    kept = []  # (axis, length, element stride) of the sliced axes
    for axis, k in enumerate(keys):
        n = x.shape[axis]
        if isinstance(k, slice):
            start, _, step = k.indices(n)
            length = len(range(*k.indices(n)))
            base += start * strides[axis] if length else 0
            kept.append((axis, length, strides[axis] * step))
            continue
        indexed.append(axis)
        if _is_array(k):
            if k.dtype.kind not in _INDEX_KINDS:
                raise IndexError(f"an index array must have an integer (or a sole boolean) dtype, not {k.dtype}")
            if k.device != x.device:
                raise ValueError(f"an index on device {k.device} indexes an array on device {x.device}")
            arrays.append((axis, k))
            continue
        try:
            i = operator.index(k)
        except TypeError:
            raise IndexError("integer-array indexing takes integer arrays with ints, slices and Ellipsis (no None "
                             f"or lists), got {type(k).__name__}") from None
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
        base += (i % n) * strides[axis]
    s2 = _manipulation._broadcast_shape([k.shape for _, k in arrays], "integer-array indexing")
    off = None
    for axis, k in arrays:
        if x.shape[axis] == 0 and math.prod(s2):
            raise IndexError(f"index into axis {axis} of size 0")
        if math.prod(s2):
            off = checked_offsets(k, s2, x.shape[axis], strides[axis], axis, off)
    if off is None:
        off = _array._empty((1,), _kernels.INT64, x.device)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    before = [d for d in kept if adjacent and d[0] < indexed[0]]
    after = [d for d in kept if d not in before]
    s2_strides = _array.c_strides(s2, 1) if math.prod(s2) else (0,) * len(s2)
    shape = (*(d[1] for d in before), *s2, *(d[1] for d in after))
    x_strides = (*(d[2] for d in before), *(0,) * len(s2), *(d[2] for d in after))
    off_strides = (*(0,) * len(before), *s2_strides, *(0,) * len(after))
    xb = x._view(base * x.itemsize, (), ())
    return xb, off, shape, x_strides, off_strides


def getitem(x, key):
    """``x[key]`` for a key holding DeviceArrays: a sole boolean mask, or ints and integer arrays."""
    _dtypes.check(x.dtype, "indexing with arrays")
    m = _mask_key(x, key)
    if m is not None and _empty_mask(x, m):
        return _array._empty((0, *x.shape[m.ndim:]), x.dtype, x.device)
    if m is not None:
        x, m, pos, counts = _mask_plan(x, m)
        rest = x.shape[m.ndim:]
        out = _array._empty((_count(counts), *rest), x.dtype, x.device)
        inner = math.prod(rest)
        if out.size:
            _kernels.mask_move(x, pos, out, inner, inner, put=False)
        return out
    xb, off, shape, x_strides, off_strides = _integer_plan(x, key)
    if math.prod(shape) == 0:
        return _array._empty(shape, x.dtype, x.device)
    return _kernels.gather(xb, off, shape, x_strides, off_strides)


# ---------------------------------------------------------------------------------------------- __setitem__
def _value(x, value):
    """``value`` as a device array of ``x``'s dtype (a Python scalar by the standard's rules; an array cast when
    the promotion table allows it) that does not overlap ``x``'s memory."""
    if isinstance(value, bool | int | float):
        return _elementwise._scalar(value, x, "__setitem__")
    if not _is_array(value):
        raise TypeError(f"__setitem__: the value must be a DeviceArray or a Python scalar, got "
                        f"{type(value).__name__} (copy host data with pymagma.array_api.asarray)")
    if value.device != x.device:
        raise ValueError(f"__setitem__: a value on device {value.device} for an array on device {x.device}")
    if value.dtype != x.dtype:
        if not _dtypes.can_cast(value.dtype, x.dtype):
            raise TypeError(f"__setitem__: a {value.dtype} value cannot be stored in a {x.dtype} array")
        return _kernels.cast(value, x.dtype)
    if _overlaps(x, value):
        return _kernels.cast(value, x.dtype)
    return value


def _overlaps(a, b) -> bool:
    lo_a, hi_a = _array.byte_extent(a.shape, a.strides, a.itemsize)
    lo_b, hi_b = _array.byte_extent(b.shape, b.strides, b.itemsize)
    return a.size > 0 and b.size > 0 and a.ptr + lo_a < b.ptr + hi_b and b.ptr + lo_b < a.ptr + hi_a


def _leading_ones_dropped(value, ndim: int):
    """``value`` without the leading size-1 axes beyond ``ndim`` dimensions (as NumPy's ``x[key] = value``)."""
    while value.ndim > ndim and value.shape[0] == 1:
        value = value[0]
    return value


def _broadcast_value(value, shape: tuple, what: str):
    value = _leading_ones_dropped(value, len(shape))
    if _manipulation._broadcast_shape((value.shape, shape), what) != shape:
        raise ValueError(f"{what}: a value of shape {value.shape} does not broadcast to {shape}")
    return _manipulation.broadcast_to(value, shape)


def setitem(x, key, value) -> None:
    """``x[key] = value`` on the device: ``value`` (an array or Python scalar) broadcast to the selection."""
    _dtypes.check(x.dtype, "__setitem__")
    _array._writable(x, "__setitem__")
    value = _value(x, value)
    has_array = _is_array(key) or (isinstance(key, tuple) and any(_is_array(k) for k in key))
    if not has_array:
        view = x[key]
        _kernels.assign(_broadcast_value(value, view.shape, "__setitem__"), view)
        return
    m = _mask_key(x, key)
    if m is not None and _empty_mask(x, m):
        return
    if m is not None:
        x, m, pos, counts = _mask_plan(x, m)
        rest = x.shape[m.ndim:]
        inner = math.prod(rest)
        if x.size == 0:
            return
        value = _leading_ones_dropped(value, len(rest) + 1)
        if value.ndim > len(rest) + 1:
            raise ValueError(f"__setitem__: a value of shape {value.shape} for a mask selection of rank "
                             f"{len(rest) + 1}")
        if value.ndim <= len(rest) or value.shape[0] == 1:  # one row for every true element: no count to read
            row = _manipulation.squeeze(value, axis=0) if value.ndim > len(rest) else value
            v = _kernels.cast(_broadcast_value(row, rest, "__setitem__"), x.dtype)
            _kernels.mask_move(x, pos, v, inner, 0, put=True)
            return
        count = _count(counts)
        v = _kernels.cast(_broadcast_value(value, (count, *rest), "__setitem__"), x.dtype)
        _kernels.mask_move(x, pos, v, inner, inner, put=True)
        return
    xb, off, shape, x_strides, off_strides = _integer_plan(x, key)
    if math.prod(shape) == 0:
        return
    _kernels.gather(xb, off, shape, x_strides, off_strides, y=_broadcast_value(value, shape, "__setitem__"))


def repeat(x, repeats, /, *, axis=None):
    """Each element of ``x`` (flattened when ``axis`` is None) repeated ``repeats`` times along ``axis``.  An int
    is one copy of a zero-stride view; an integer array of counts is read to the host (the output's shape depends on
    it: the standard's data-dependent case) to build the gather indices, and the data is gathered on the device."""
    x = _elementwise._require(x, "repeat")
    if axis is None:
        x = (x if x.is_c_contiguous else _manipulation._copy(x)).reshape(-1)
        axis = 0
    a = _manipulation._axis(axis, x.ndim, "repeat")
    n = x.shape[a]
    if isinstance(repeats, _array.DeviceArray):
        if repeats.dtype.kind not in "iu" or repeats.ndim != 1 or repeats.shape[0] not in (1, n):
            raise ValueError(f"repeat: repeats must be a 1-D integer array of {n} or 1 elements, got "
                             f"{repeats.shape} {repeats.dtype}")
        counts = repeats.get()
        if (counts < 0).any():
            raise ValueError("repeat: negative repeats")
        if counts.shape[0] == 1 and n != 1:
            return repeat(x, int(counts[0]), axis=a)
        index = np.repeat(np.arange(n, dtype=np.int64), counts)
        return take(x, _creation.asarray(index, device=x.device), axis=a)
    r = operator.index(repeats)
    if r < 0:
        raise ValueError(f"repeat: negative repeats {r}")
    shape = (*x.shape[:a + 1], r, *x.shape[a + 1:])
    strides = (*x.strides[:a + 1], 0, *x.strides[a + 1:])
    view = _manipulation._view(x, 0, shape, strides)
    return _manipulation._copy(view).reshape((*x.shape[:a], n * r, *x.shape[a + 1:]))
