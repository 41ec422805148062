"""The standard's manipulation functions.  Layout changes (``permute_dims``, ``moveaxis``, ``expand_dims``,
``squeeze``, ``flip``, ``broadcast_to``, ``broadcast_arrays``, ``unstack``) are views; the others copy on the device
with the strided-assignment kernel (``tile`` and ``repeat`` as copies of zero-stride views), ``tril``/``triu`` with
their own kernel.  No data goes through the host."""

from __future__ import annotations

import operator

import numpy as np

from .. import array as _array
from ..kernels import array_api as _kernels
from . import _dtypes, _elementwise


def _axis(axis, ndim: int, what: str) -> int:
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{what}: axis must be an int, got {type(axis).__name__}") from None
    if not -ndim <= a < ndim:
        # NumPy's AxisError: both the IndexError and the ValueError callers of the standard expect
        raise np.exceptions.AxisError(f"{what}: axis {a} is out of range for an array of {ndim} dimensions")
    return a % ndim


def _axes(axis, ndim: int, what: str) -> tuple[int, ...]:
    """``axis`` (None: all, an int or a tuple) as sorted, unique, non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(_axis(a, ndim, what) for a in (axis if isinstance(axis, tuple | list) else (axis,)))
    if len(set(axes)) != len(axes):
        raise ValueError(f"{what}: repeated axis in {axis}")
    return axes


def _view(x, offset: int, shape, strides):
    return x._view(offset, tuple(shape), tuple(strides))


def _copy(x):
    """A C-contiguous copy of any (strided, broadcast) view, on the device."""
    return _kernels.cast(x, x.dtype)


# ---------------------------------------------------------------------------------------------- views
def permute_dims(x, /, axes):
    """The axes of ``x`` in the order ``axes`` (a permutation), a view."""
    x = _elementwise._require(x, "permute_dims")
    axes = tuple(axes)
    if len(axes) != x.ndim:
        raise ValueError(f"permute_dims: {len(axes)} axes for an array of {x.ndim} dimensions")
    axes = tuple(_axis(a, x.ndim, "permute_dims") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"permute_dims: {axes} is not a permutation of the axes")
    return _view(x, 0, (x.shape[a] for a in axes), (x.strides[a] for a in axes))


def moveaxis(x, source, destination, /):
    """``x`` with the axes ``source`` moved to the positions ``destination`` (ints or tuples of one length)."""
    x = _elementwise._require(x, "moveaxis")
    src = source if isinstance(source, tuple | list) else (source,)
    dst = destination if isinstance(destination, tuple | list) else (destination,)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: {len(src)} source axes but {len(dst)} destinations")
    src, dst = _axes(tuple(src), x.ndim, "moveaxis"), _axes(tuple(dst), x.ndim, "moveaxis")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute_dims(x, order)


def expand_dims(x, /, axis=0):
    """``x`` with a new axis of size one at ``axis`` (in ``[-N-1, N]``), a view."""
    x = _elementwise._require(x, "expand_dims")
    a = _axis(axis, x.ndim + 1, "expand_dims")
    stride = x.strides[a] * x.shape[a] if a < x.ndim else x.itemsize
    return _view(x, 0, (*x.shape[:a], 1, *x.shape[a:]), (*x.strides[:a], stride, *x.strides[a:]))


def squeeze(x, /, axis):
    """``x`` without the size-one axes ``axis`` (an int or a tuple), a view; a ValueError for a larger axis."""
    x = _elementwise._require(x, "squeeze")
    axes = _axes(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1")
    keep = [d for d in range(x.ndim) if d not in axes]
    return _view(x, 0, (x.shape[d] for d in keep), (x.strides[d] for d in keep))


def flip(x, /, *, axis=None):
    """``x`` reversed along ``axis`` (None: all), a view with negative strides."""
    x = _elementwise._require(x, "flip")
    axes = _axes(axis, x.ndim, "flip")
    offset, strides = 0, list(x.strides)
    for a in axes:
        if x.shape[a]:
            offset += (x.shape[a] - 1) * x.strides[a]
        strides[a] = -x.strides[a]
    return _view(x, offset if x.size else 0, x.shape, strides)


def _broadcast_shape(shapes, what: str) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"{what}: shapes {', '.join(map(str, shapes))} do not broadcast") from None


def broadcast_to(x, /, shape):
    """``x`` broadcast to ``shape``, a view (zero strides on the broadcast axes)."""
    x = _elementwise._require(x, "broadcast_to")
    shape = _array._normalize_shape(shape)
    if _broadcast_shape((x.shape, shape), "broadcast_to") != shape:
        raise ValueError(f"broadcast_to: shape {x.shape} does not broadcast to {shape}")
    lead = len(shape) - x.ndim
    strides = (0,) * lead + tuple(0 if n == 1 and m != 1 else s for n, m, s in zip(x.shape, shape[lead:], x.strides))
    return _view(x, 0, shape, strides)


def broadcast_arrays(*arrays):
    """The arrays broadcast against each other, views."""
    arrays = [_elementwise._require(a, "broadcast_arrays") for a in arrays]
    shape = _broadcast_shape([a.shape for a in arrays], "broadcast_arrays")
    return [broadcast_to(a, shape) for a in arrays]


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis``, a tuple of views."""
    x = _elementwise._require(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack needs an array of at least one dimension")
    a = _axis(axis, x.ndim, "unstack")
    return tuple(x[(slice(None),) * a + (i,)] for i in range(x.shape[a]))


# ---------------------------------------------------------------------------------------------- copies
def _joined(arrays, what: str):
    arrays = [_elementwise._require(a, what) for a in arrays]
    if not arrays:
        raise ValueError(f"{what} needs at least one array")
    dtype = _dtypes.result_type(*arrays)
    devices = {a.device for a in arrays}
    if len(devices) > 1:
        raise ValueError(f"{what}: arrays on different devices {sorted(devices)}")
    return [a if a.dtype == dtype else _kernels.cast(a, dtype) for a in arrays], dtype


def concat(arrays, /, *, axis=0):
    """The arrays joined along ``axis`` (None: flattened first), promoted to one dtype; one copy kernel each."""
    arrays, dtype = _joined(arrays, "concat")
    if axis is None:
        arrays = [a if a.ndim == 1 else _copy(a).reshape(-1) if not a.is_c_contiguous else a.reshape(-1)
                  for a in arrays]
        axis = 0
    ndim = arrays[0].ndim
    if ndim == 0:
        raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
    a = _axis(axis, ndim, "concat")
    for b in arrays[1:]:
        if b.ndim != ndim or b.shape[:a] + b.shape[a + 1:] != arrays[0].shape[:a] + arrays[0].shape[a + 1:]:
            raise ValueError(f"concat: shapes {arrays[0].shape} and {b.shape} differ off axis {a}")
    shape = list(arrays[0].shape)
    shape[a] = sum(b.shape[a] for b in arrays)
    out = _array._empty(tuple(shape), dtype, arrays[0].device)
    start = 0
    for b in arrays:
        n = b.shape[a]
        if n:
            _kernels.assign(b, out[(slice(None),) * a + (slice(start, start + n),)])
        start += n
    return out


def stack(arrays, /, *, axis=0):
    """The equal-shaped arrays joined along a new ``axis``."""
    arrays, dtype = _joined(arrays, "stack")
    shape = arrays[0].shape
    if any(b.shape != shape for b in arrays):
        raise ValueError(f"stack: arrays of different shapes {[b.shape for b in arrays]}")
    a = _axis(axis, len(shape) + 1, "stack")
    out = _array._empty((*shape[:a], len(arrays), *shape[a:]), dtype, arrays[0].device)
    for i, b in enumerate(arrays):
        _kernels.assign(b, out[(slice(None),) * a + (i,)])
    return out


def roll(x, /, shift, *, axis=None):
    """``x`` shifted cyclically by ``shift`` along ``axis`` (None: flattened, then restored): two copies per
    axis."""
    x = _elementwise._require(x, "roll")
    if axis is None:
        flat = (x if x.is_c_contiguous else _copy(x)).reshape(-1)
        return roll(flat, shift, axis=0).reshape(x.shape)
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    shifts = shift if isinstance(shift, tuple | list) else (shift,) * len(axes)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    total: dict[int, int] = {}
    for s, a in zip(shifts, axes):
        a = _axis(a, x.ndim, "roll")
        total[a] = total.get(a, 0) + operator.index(s)
    out = x
    for a, s in total.items():
        n = x.shape[a]
        s = s % n if n else 0
        src, out = out, _array._empty(x.shape, x.dtype, x.device)
        lead = (slice(None),) * a
        _kernels.assign(src[lead + (slice(0, n - s),)], out[lead + (slice(s, n),)])
        _kernels.assign(src[lead + (slice(n - s, n),)], out[lead + (slice(0, s),)])
    return out if out is not x else _copy(x)


def tile(x, repetitions, /):
    """``x`` repeated ``repetitions`` times along each axis: one copy of a zero-stride view."""
    x = _elementwise._require(x, "tile")
    reps = tuple(operator.index(r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: negative repetitions {reps}")
    ndim = max(x.ndim, len(reps))
    reps = (1,) * (ndim - len(reps)) + reps
    shape = (1,) * (ndim - x.ndim) + x.shape
    strides = (0,) * (ndim - x.ndim) + x.strides
    view_shape, view_strides = [], []
    for r, n, st in zip(reps, shape, strides):
        if r != 1:
            view_shape.append(r)
            view_strides.append(0)
        view_shape.append(n)
        view_strides.append(st)
    final = tuple(r * n for r, n in zip(reps, shape))
    if len(view_shape) <= _array_max_dims():
        return _copy(_view(x, 0, view_shape, view_strides)).reshape(final)
    out = _view(x, 0, shape, strides)  # too many axes for one kernel: one axis at a time
    for a, r in enumerate(reps):
        if r != 1:
            n = out.shape[a]
            view = _view(out, 0, (*out.shape[:a], r, *out.shape[a:]), (*out.strides[:a], 0, *out.strides[a:]))
            out = _copy(view).reshape((*out.shape[:a], r * n, *out.shape[a + 1:]))
    return out if out.is_c_contiguous and out is not x else _copy(out)


def _array_max_dims() -> int:
    from .. import kernels

    return kernels.MAX_DIMS


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids of 1-D arrays of one dtype (``indexing``: 'xy' Cartesian, 'ij' matrix), new arrays."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', not {indexing!r}")
    arrays = [_elementwise._require(a, "meshgrid") for a in arrays]
    if any(a.ndim != 1 for a in arrays):
        raise ValueError(f"meshgrid takes 1-D arrays, got shapes {[a.shape for a in arrays]}")
    if len({a.dtype for a in arrays}) > 1:
        raise TypeError(f"meshgrid: arrays of different dtypes {[str(a.dtype) for a in arrays]}")
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        place = (1 - i if i < 2 else i) if indexing == "xy" and len(arrays) > 1 else i
        strides = [0] * len(shape)
        strides[place] = a.strides[0]
        out.append(_copy(_view(a, 0, shape, strides)))
    return out


def _tri(x, k: int, upper: bool, what: str):
    x = _elementwise._require(x, what)
    if x.ndim < 2:
        raise ValueError(f"{what} needs at least 2 dimensions, got shape {x.shape}")
    return _kernels.tri(x, operator.index(k), upper)


def tril(x, /, *, k=0):
    """The lower triangle (``k``: the diagonal kept last) of the last two axes; zeros above."""
    return _tri(x, k, False, "tril")


def triu(x, /, *, k=0):
    """The upper triangle (``k``: the first diagonal kept) of the last two axes; zeros below."""
    return _tri(x, k, True, "triu")

