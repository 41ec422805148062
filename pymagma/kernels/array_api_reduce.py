"""Launches of ``kernels/array_api_reduce.cu``: reductions over any axes, arg-reductions, scans and stable sorts
along one axis (strided operands read in place), the three-operand ``where``, ``searchsorted``, a 1-D gather and
the steps of ``nonzero`` and ``unique``.  Results are new C-contiguous arrays; dtypes are the caller's business.

Only ``where`` is compiled for every dtype: the others are compiled for int64, uint64, float32 and float64 (less
NVRTC time), and bool and the narrower integers run as int64 (a cast kernel each way).  That is exact: integer sums
and products wrap modulo 2**bits whatever the width they are carried in, and the cast keeps the order.  Complex
operands run these kernels' complex instantiations in ``kernels/array_api_complex.cu`` (one pass)."""

from __future__ import annotations

import functools
import math
from ctypes import c_double, c_int, c_longlong, c_void_p

import numpy as np

from .. import array as _array
from . import array_api as _api_kernels
from . import array_api_complex as _complex
from .common import _c_strides, _run, make_strides3

PROGRAM = "array_api_reduce"
#: reduction op codes of ar_reduce
REDUCE = {"sum": 0, "prod": 1, "min": 2, "max": 3, "mean": 4, "var": 5}
INDEX = np.dtype(np.int64)
#: the dtypes carried as int64 by every kernel but ar_where (see programs.API_REDUCE_DTYPES)
NARROW = frozenset(np.dtype(d) for d in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32"))


def _wide(x):
    return _api_kernels.cast(x, INDEX) if x.dtype in NARROW else x


def _back(out, dtype):
    return out if out is None or out.dtype == dtype else _api_kernels.cast(out, dtype)


@functools.lru_cache(maxsize=256)
def _expression(kernel: str, dtype: np.dtype) -> str:
    return f"{kernel}<{_complex.c_type(dtype.name)}>"


def _launch(kernel: str, like, n_items: int, args) -> None:
    if like.dtype.kind == "c":
        _complex.launch(_expression(kernel, like.dtype), like, n_items, args)
    else:
        _run(PROGRAM, _expression(kernel, like.dtype), like, n_items, args)


def _elements(a) -> tuple:
    return tuple(s // a.itemsize for s in a.strides)


def _ptr(a):
    return c_void_p(None if a is None else a.ptr)


def axes(axis, ndim: int, what: str) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints, negative allowed) as sorted non-negative axes; IndexError
    (NumPy's AxisError) out of range, ValueError for a repeated one, TypeError for a non-integer."""
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple | list) else (axis,)
    out = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, int | np.integer):
            raise TypeError(f"{what}: axis must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(f"{what}: axis {a} is out of range for an array of {ndim} dimensions")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated axis in {axis!r}")
    return tuple(sorted(out))


@functools.lru_cache(maxsize=1024)
def _plan(shape: tuple, strides: tuple, reduced: tuple):
    kept = [d for d in range(len(shape)) if d not in reduced]
    kept_shape = tuple(shape[d] for d in kept)
    s = make_strides3(kept_shape, [strides[d] for d in kept], _c_strides(kept_shape))
    r = make_strides3(tuple(shape[d] for d in reduced), [strides[d] for d in reduced])
    return kept_shape, math.prod(kept_shape), math.prod(shape[d] for d in reduced), s, r


#: a sum, product, min, max or mean of at least SPLIT elements into fewer than PARTS outputs runs in two passes:
#: PARTS threads per output reduce a slice each, then one thread per output reduces their results
SPLIT, PARTS = 1 << 14, 1024
#: the elementwise function that joins two partial results of a split reduction
_JOIN = {"sum": "add", "prod": "multiply", "min": "minimum", "max": "maximum"}


def reduce(op: str, x, reduced: tuple, correction: float = 0.0):
    """``op`` of ``x`` over the axes ``reduced`` (sorted), in ``x``'s dtype: the kept axes' shape."""
    if x.dtype.kind == "c":  # one pass (sum, prod); a mean divides the sum
        out = _one_pass("sum" if op == "mean" else op, x, reduced)
        if op != "mean":
            return out
        n = math.prod(x.shape[d] for d in reduced)
        return _api_kernels.binary("divide", out, _array.asarray(np.asarray(n, out.dtype), device=x.device), out.shape)
    dtype, x = x.dtype, _wide(x)
    n_red = math.prod(x.shape[d] for d in reduced)
    if op in ("sum", "prod", "min", "max", "mean") and n_red >= SPLIT and x.size // n_red < PARTS:
        return _back(_two_passes(op, x, reduced, n_red), dtype)
    return _back(_one_pass(op, x, reduced, correction), dtype)


def _one_pass(op: str, x, reduced: tuple, correction: float = 0.0):
    kept_shape, n_out, n_red, s, r = _plan(x.shape, _elements(x), reduced)
    out = _array._empty(kept_shape, x.dtype, x.device)
    _launch("ar_reduce", x, n_out, [c_int(REDUCE[op]), c_double(correction), _ptr(x), _ptr(out), c_longlong(n_out),
                                    c_longlong(n_red), s, r])
    return out


def _two_passes(op: str, x, reduced: tuple, n_red: int):
    """The reduction as (outputs, PARTS) partial results of equal slices, then one per output (plus the rest of
    the elements, joined elementwise): x's kept axes first, copied C-contiguous when they are not."""
    kept = [d for d in range(x.ndim) if d not in reduced]
    order = kept + list(reduced)
    t = x.transpose(*order) if order != list(range(x.ndim)) else x
    n_out = x.size // n_red
    flat = (t if t.is_c_contiguous else _api_kernels.cast(t, t.dtype)).reshape((n_out, n_red))
    length, size = n_red // PARTS, flat.itemsize
    slices = flat._view(0, (n_out, PARTS, length), (n_red * size, length * size, size))
    first = "sum" if op == "mean" else op
    out = _one_pass(first, _one_pass(first, slices, (2,)), (1,))
    if PARTS * length < n_red:
        out = _api_kernels.binary(_JOIN[first], out, _one_pass(first, flat[:, PARTS * length:], (1,)), out.shape)
    if op == "mean":
        count = _array.asarray(np.asarray(n_red, out.dtype), device=out.device)
        out = _api_kernels.binary("divide", out, count, out.shape)
    return out.reshape(tuple(x.shape[d] for d in kept))


def _row_plan(x, axis: int, out_shape: tuple):
    """(rows, Strides3 of the other axes: x's element strides and a C-contiguous ``out_shape``'s, out's stride
    along ``axis``)."""
    strides, out_strides = _elements(x), _c_strides(out_shape)
    kept = [d for d in range(x.ndim) if d != axis]
    kept_shape = tuple(x.shape[d] for d in kept)
    s = make_strides3(kept_shape, [strides[d] for d in kept], [out_strides[d] for d in kept])
    return math.prod(kept_shape), s, out_strides[axis]


def argreduce(want_max: bool, x, axis: int):
    """Index (int64) of the first largest / smallest element along ``axis`` (not empty): the other axes' shape."""
    x = _wide(x)
    strides = _elements(x)
    kept = tuple(n for d, n in enumerate(x.shape) if d != axis)
    s = make_strides3(kept, [v for d, v in enumerate(strides) if d != axis], _c_strides(kept))
    rows = math.prod(kept)
    out = _array._empty(kept, INDEX, x.device)
    _launch("ar_argreduce", x, rows, [c_int(int(want_max)), _ptr(x), _ptr(out), c_longlong(rows),
                                      c_longlong(x.shape[axis]), c_longlong(_elements(x)[axis]), s])
    return out


def scan(op: str, x, axis: int, include_initial: bool):
    """Cumulative sum (``op`` 'sum') or product ('prod') along ``axis``, in ``x``'s dtype."""
    dtype, x = x.dtype, _wide(x)
    shape = tuple(n + (d == axis and include_initial) for d, n in enumerate(x.shape))
    out = _array._empty(shape, x.dtype, x.device)
    rows, s, out_stride = _row_plan(x, axis, shape)
    _launch("ar_scan", x, rows, [c_int(REDUCE[op]), c_int(int(include_initial)), _ptr(x), _ptr(out),
                                 c_longlong(rows), c_longlong(x.shape[axis]), c_longlong(_elements(x)[axis]),
                                 c_longlong(out_stride), s])
    return _back(out, dtype)


def sort(x, axis: int, descending: bool, values: bool, indices: bool):
    """(sorted values or None, int64 indices or None) of a stable sort along ``axis`` (NaNs last)."""
    dtype, x = x.dtype, _wide(x)
    vals = _array._empty(x.shape, x.dtype, x.device) if values else None
    idx = _array._empty(x.shape, INDEX, x.device) if indices else None
    rows, s, out_stride = _row_plan(x, axis, x.shape)
    n = x.shape[axis]
    scratch = _array._empty((max(2 * rows * n, 1),), INDEX, x.device)
    _launch("ar_sort", x, rows, [c_int(int(descending)), _ptr(x), _ptr(vals), _ptr(idx), _ptr(scratch),
                                 c_longlong(rows), c_longlong(n), c_longlong(_elements(x)[axis]),
                                 c_longlong(out_stride), s])
    return _back(vals, dtype), idx


def _broadcast_strides(a, shape: tuple) -> tuple:
    lead = len(shape) - a.ndim
    return (0,) * lead + tuple(0 if n == 1 else s for n, s in zip(a.shape, _elements(a)))


def where(condition, a, b, shape: tuple):
    """``condition ? a : b`` (bool condition, one dtype for a and b) broadcast to ``shape``."""
    out = _array._empty(shape, a.dtype, a.device)
    s = make_strides3(shape, *(_broadcast_strides(v, shape) for v in (condition, a, b)))
    _launch("ar_where", a, out.size, [_ptr(condition), _ptr(a), _ptr(b), _ptr(out), c_longlong(out.size), s])
    return out


def searchsorted(x1, x2, right: bool):
    """Insertion indices (int64, ``x2``'s shape) of ``x2`` in the sorted 1-D ``x1`` (same dtype)."""
    x1, x2 = _wide(x1), _wide(x2)
    out = _array._empty(x2.shape, INDEX, x2.device)
    s = make_strides3(x2.shape, _elements(x2))
    _launch("ar_searchsorted", x1, out.size, [c_int(int(right)), _ptr(x1), c_longlong(x1.shape[0]),
                                              c_longlong(_elements(x1)[0]), _ptr(x2), _ptr(out),
                                              c_longlong(out.size), s])
    return out


def take(x, indices):
    """``x[indices]`` of a 1-D ``x`` and 1-D int64 ``indices`` (in range)."""
    dtype, x = x.dtype, _wide(x)
    out = _array._empty(indices.shape, x.dtype, x.device)
    _launch("ar_take", x, out.size, [_ptr(x), c_longlong(_elements(x)[0]), _ptr(indices),
                                     c_longlong(_elements(indices)[0]), _ptr(out), c_longlong(out.size)])
    return _back(out, dtype)


def nonzero(flags, csum, count: int, shape: tuple):
    """The (len(shape), count) int64 coordinates of the true entries of the C-contiguous bool ``flags``."""
    out = _array._empty((len(shape), count), INDEX, flags.device)
    s = make_strides3(shape)
    _launch("ar_nonzero", flags, flags.size, [_ptr(flags), _ptr(csum), c_longlong(flags.size), c_longlong(count),
                                              _ptr(out), s])
    return out


def unique_flags(sorted_values):
    """1 (int64) where the sorted 1-D values start a new group, else 0 (each NaN its own group)."""
    sorted_values = _wide(sorted_values)
    out = _array._empty(sorted_values.shape, INDEX, sorted_values.device)
    _launch("ar_unique_flags", sorted_values, out.size, [_ptr(sorted_values), c_longlong(out.size), _ptr(out)])
    return out


def unique(sorted_values, perm, csum, count: int, index: bool, counts: bool, inverse_shape):
    """(values, first indices or None, counts or None, inverse of ``inverse_shape`` or None) of the groups."""
    dtype, sorted_values = sorted_values.dtype, _wide(sorted_values)
    device, n = sorted_values.device, sorted_values.size
    values = _array._empty((count,), sorted_values.dtype, device)
    first = _array._empty((count,), INDEX, device) if index else None
    many = _array._empty((count,), INDEX, device) if counts else None
    inverse = _array._empty(inverse_shape, INDEX, device) if inverse_shape is not None else None
    _launch("ar_unique", sorted_values, n, [_ptr(sorted_values), _ptr(perm), _ptr(csum), c_longlong(n),
                                            _ptr(values), _ptr(first), _ptr(many), _ptr(inverse)])
    return _back(values, dtype), first, many, inverse
