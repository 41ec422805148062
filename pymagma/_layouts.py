"""The layout arithmetic of C-ordered strided arrays (pure functions of shapes, byte strides and itemsizes, no device):
shapes checked and reshaped, C-contiguous strides, contiguity, the byte extent of a view and basic indexing.
Re-exported by :mod:`pymagma.array`."""

from __future__ import annotations

import functools
import math
import numbers

from . import _checks


def _normalize_shape(shape) -> tuple[int, ...]:
    """A shape as a tuple of non-negative ints (an int, or an iterable of ints; NumPy integers too, floats never)."""
    if type(shape) is tuple and set(map(type, shape)) <= _INT and (not shape or min(shape) >= 0):
        return shape  # already one (no Python call per entry)
    try:
        out = _checks.sizes(shape, "shape")
    except TypeError as exc:
        raise TypeError(f"{exc} (shape {shape!r})") from None
    if any(s < 0 for s in out):
        raise ValueError(f"negative dimension in shape {out}")
    return out


_INT = {int}


def _reshaped(size: int, shape) -> tuple[int, ...]:
    """``shape`` (ints, one of them possibly -1) checked as a new shape for ``size`` elements, -1 resolved; the
    answer for a tuple of plain ints is kept in ``_RESHAPED`` (errors never are)."""
    new = _reshaped_checked(size, shape)
    if type(shape) is tuple and set(map(type, shape)) <= _INT:
        if len(_RESHAPED) >= 1024:
            _RESHAPED.clear()
        _RESHAPED[(size, shape)] = new
    return new


_RESHAPED: dict = {}  # (size, shape of plain ints) -> the checked new shape


@_checks.once_per_arguments
def _reshaped_checked(size: int, shape: tuple) -> tuple[int, ...]:
    shape = list(_checks.sizes(shape, "reshape: shape"))
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
        shape[shape.index(-1)] = size // known
    shape = _normalize_shape(shape)
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return shape


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def is_c_contiguous(shape, strides, itemsize) -> bool:
    expected = c_strides(tuple(shape), itemsize)
    return all(n <= 1 or s == e for n, s, e in zip(shape, strides, expected))


_is_c_contiguous_cached = functools.lru_cache(maxsize=1024)(is_c_contiguous)  # (shape, strides, itemsize) -> bool
_c_strides_cached = functools.lru_cache(maxsize=1024)(c_strides)  # (shape tuple, itemsize) -> byte strides


def byte_extent(shape, strides, itemsize) -> tuple[int, int]:
    """(lowest, one-past-highest) byte offsets touched by a strided array, relative to element 0."""
    if 0 in shape:
        return 0, 0
    lo = sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0)
    hi = sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0) + itemsize
    return lo, hi


def index_view(shape, strides, key) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """Basic indexing (ints, slices of any step, one Ellipsis, None: a new axis): (byte offset, shape, strides)."""
    if type(key) is not tuple:
        if shape and (type(key) is slice or type(key) is int):  # one slice or int on the first axis: at once
            n, s = shape[0], strides[0]
            if type(key) is slice:
                start, stop, step = key.indices(n)
                length = len(range(start, stop, step))
                return (start * s if length else 0), (length, *shape[1:]), (s * step, *strides[1:])
            i = key + n if key < 0 else key
            if not 0 <= i < n:
                raise IndexError(f"index {key} is out of bounds for axis 0 with size {n}")
            return i * s, tuple(shape[1:]), tuple(strides[1:])
        key = (key,)
    used, ellipsis_at = 0, -1
    for i, k in enumerate(key):
        if k is Ellipsis:
            if ellipsis_at >= 0:
                raise IndexError("an index can only have a single ellipsis ('...')")
            ellipsis_at = i
        elif k is not None:
            used += 1
    if used > len(shape):
        raise IndexError(f"too many indices: array is {len(shape)}-dimensional, {used} were indexed")
    if ellipsis_at >= 0:
        key = key[:ellipsis_at] + (slice(None),) * (len(shape) - used) + key[ellipsis_at + 1:]
    offset, new_shape, new_strides, axis = 0, [], [], 0
    for k in key:
        if k is None:
            new_shape.append(1)
            new_strides.append(0)
            continue
        n, s = shape[axis], strides[axis]
        if type(k) is slice:  # (slice cannot be subclassed; int and slice first: no ABC check for them)
            start, stop, step = k.indices(n)
            length = len(range(start, stop, step))
            offset += start * s if length else 0
            new_shape.append(length)
            new_strides.append(s * step)
        elif type(k) is int or isinstance(k, numbers.Integral) and not isinstance(k, bool):
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise IndexError(f"index {int(k)} is out of bounds for axis {axis} with size {n}")
            offset += i * s
        else:
            raise TypeError(f"DeviceArray supports basic indexing (ints, slices, ..., None) and, alone or with "
                            f"ints, integer or boolean DeviceArrays; not {type(k).__name__}")
        axis += 1
    return offset, (*new_shape, *shape[axis:]), (*new_strides, *strides[axis:])
