"""Launchers of reductions.cu: sum, mean, max, min, prod and sum of squares over axes; argmax and argmin."""

from __future__ import annotations

import math
from ctypes import c_int, c_longlong

import numpy as np

from .. import _checks
from .. import array as _array
from . import programs
from .common import _FLOAT_NAMES, _c_strides, _elem_strides, _float_dtype, _run, make_strides3

REDUCE_OPS = {"sum": 0, "mean": 1, "max": 2, "min": 3, "prod": 4, "sum_squares": 5}


def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = _checks.sizes(axis, "axis")
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for an array of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis}")
    return tuple(sorted(out))


@_checks.once_per_arguments
def _reduce_plan(op: str, shape: tuple, strides: tuple, itemsize: int, axis, keepdims: bool) -> tuple:
    """(output shape, outputs, elements reduced per output, kept strides, reduced strides) of a reduction."""
    ndim = len(shape)
    axes = _axes(axis, ndim)
    kept = [d for d in range(ndim) if d not in axes]
    n_red = math.prod(shape[d] for d in axes)
    if n_red == 0:
        raise ValueError(f"{op} over an empty set of elements (shape {shape}, axis {axis})")
    strides = tuple(s // itemsize for s in strides)
    kept_shape = tuple(shape[d] for d in kept)
    out_shape = tuple(1 if d in axes else shape[d] for d in range(ndim)) if keepdims else kept_shape
    s = make_strides3(kept_shape, [strides[d] for d in kept], _c_strides(kept_shape))
    r = make_strides3(tuple(shape[d] for d in axes), [strides[d] for d in axes])
    return out_shape, math.prod(kept_shape), n_red, s, r


_PLANS: dict = {}  # (op, shape, strides, itemsize, int, ints or None axis, bool keepdims) -> _reduce_plan's answer
_DeviceArray, _INT = _array.DeviceArray, {int}


def reduce(op: str, x, axis=None, keepdims: bool = False):
    """Reduce ``x`` over ``axis`` (int, tuple or None = all) with sum, mean, max, min, prod or sum_squares."""
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction {op!r}; known: {sorted(REDUCE_OPS)}")
    dtype = _FLOAT_NAMES.get(x.dtype) if x.__class__ is _DeviceArray else None  # (_float_dtype's hit, inline)
    if dtype is None:
        dtype = _float_dtype(x, op)
    # the plan of an int, a tuple of ints (or no) axis and a bool keepdims read here once made (no call per reduction)
    plain = (axis is None or type(axis) is int or type(axis) is tuple and set(map(type, axis)) <= _INT) and \
        type(keepdims) is bool
    key = (op, x.shape, x.strides, x.itemsize, axis, keepdims)
    plan = _PLANS.get(key) if plain else None
    if plan is None:
        plan = _reduce_plan(op, x.shape, x.strides, x.itemsize, axis, keepdims)
        if plain:
            if len(_PLANS) >= 1024:
                _PLANS.clear()
            _PLANS[key] = plan
    out_shape, n_out, n_red, s, r = plan
    out = _array._empty(out_shape, x.dtype, x.device)
    _run("reductions", programs.expression("reduce_axes", dtype), x, n_out,
         [c_int(REDUCE_OPS[op]), x.ptr, out.ptr, c_longlong(n_out), c_longlong(n_red), s, r],
         grid=min(n_out, 65535))
    return out


def _arg_reduce(want_max: bool, x, axis: int):
    what = "argmax" if want_max else "argmin"
    dtype = _float_dtype(x, what)
    (axis,) = _axes(_checks.integer(axis, f"{what} axis"), x.ndim)
    if x.shape[axis] == 0:
        raise ValueError(f"{what} of an empty axis (shape {x.shape}, axis {axis})")
    strides = _elem_strides(x)
    kept = [d for d in range(x.ndim) if d != axis]
    kept_shape = tuple(x.shape[d] for d in kept)
    out = _array.empty(kept_shape, np.int64, device=x.device)
    s = make_strides3(kept_shape, [strides[d] for d in kept], _c_strides(kept_shape))
    n_out = math.prod(kept_shape)
    _run("reductions", programs.expression("arg_reduce", dtype), x, n_out,
         [c_int(int(want_max)), x.ptr, out.ptr, c_longlong(n_out), c_longlong(x.shape[axis]),
          c_longlong(strides[axis]), s], grid=min(n_out, 65535))
    return out


def argmax(x, axis: int = -1):
    """Index of the largest element along ``axis`` (int64; first on ties; NaN counts as largest, like NumPy)."""
    return _arg_reduce(True, x, axis)


def argmin(x, axis: int = -1):
    return _arg_reduce(False, x, axis)
