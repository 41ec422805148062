"""Launchers of reductions.cu: sum, mean, max, min, prod and sum of squares over axes; argmax and argmin."""

from __future__ import annotations

import math
from ctypes import c_int, c_longlong

import numpy as np

from .. import _checks, _native
from .. import array as _array
from . import programs
from .common import _c_strides, _elem_strides, _float_dtype, _run, make_strides3
from .loader import THREADS

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


#: (op, x's shape, strides and dtype, axis (None, an int or a tuple of ints), a bool keepdims) of a checked call on a
#: DeviceArray -> its launch: (output shape, expression, grid (0: no launch), the op's code, the output and reduced
#: sizes as the kernel's never-modified scalar arguments, the two Strides3)
_LAUNCHES: dict = {}
_DeviceArray, _INT = _array.DeviceArray, {int}


def _launch_plan(op: str, x, dtype: str, axis, keepdims: bool) -> tuple:
    out_shape, n_out, n_red, s, r = _reduce_plan(op, x.shape, x.strides, x.itemsize, axis, keepdims)
    return (out_shape, programs.expression("reduce_axes", dtype), min(n_out, 65535), c_int(REDUCE_OPS[op]),
            c_longlong(n_out), c_longlong(n_red), s, r)


def reduce(op: str, x, axis=None, keepdims: bool = False):
    """Reduce ``x`` over ``axis`` (int, tuple or None = all) with sum, mean, max, min, prod or sum_squares.  A call
    on a DeviceArray whose arguments (op, layout, dtype, an int, a tuple of ints or no axis, a bool keepdims) were
    checked before launches in this one frame."""
    if x.__class__ is _DeviceArray and type(keepdims) is bool and (
            axis is None or type(axis) is int or type(axis) is tuple and set(map(type, axis)) <= _INT):
        try:
            plan = _LAUNCHES[(op, x.shape, x.strides, x.dtype, axis, keepdims)]
        except (KeyError, TypeError):  # a new call (or an unhashable op): checked, then kept
            pass
        else:
            out_shape, expression, grid, code, n_out, n_red, s, r = plan
            device = x.device
            out = _array._empty(out_shape, x.dtype, device)
            if grid:  # (common._run, inline: the op's one frame between the caller and the launch)
                libraries = _native.current
                libraries.launcher.launch("reductions", expression, device,
                                          (libraries.default_queues.get(device) or x.queue).stream, grid, THREADS,
                                          [code, x.ptr, out.ptr, n_out, n_red, s, r])
            return out
    return _reduce_checked(op, x, axis, keepdims)


def _reduce_checked(op: str, x, axis, keepdims):
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction {op!r}; known: {sorted(REDUCE_OPS)}")
    dtype = _float_dtype(x, op)
    plan = _launch_plan(op, x, dtype, axis, keepdims)
    if x.__class__ is _DeviceArray and type(keepdims) is bool and (  # (kept under the key the fast paths take)
            axis is None or type(axis) is int or type(axis) is tuple and all(type(a) is int for a in axis)):
        if len(_LAUNCHES) >= 1024:
            _LAUNCHES.clear()
        _LAUNCHES[(op, x.shape, x.strides, x.dtype, axis, keepdims)] = plan
    out_shape, expression, grid, code, n_out, n_red, s, r = plan
    out = _array._empty(out_shape, x.dtype, x.device)
    _run("reductions", expression, x, n_out.value, [code, x.ptr, out.ptr, n_out, n_red, s, r], grid=grid)
    return out


def planned_reduction(op: str, checked):
    """A framework's reduction op ``checked(a, axis=None, keepdims=False)``, :func:`reduce` with ``op``: a call on
    a DeviceArray whose arguments were checked before (by ``checked`` or :func:`reduce`) launches in this one frame,
    any other call is ``checked``'s (which must compute it as :func:`reduce` does)."""
    launches, device_array, ints, empty_ = _LAUNCHES, _DeviceArray, _INT, _array._empty

    def reduction(a, axis=None, keepdims=False):
        if a.__class__ is device_array and type(keepdims) is bool and (
                axis is None or type(axis) is int or type(axis) is tuple and set(map(type, axis)) <= ints):
            plan = launches.get((op, a.shape, a.strides, a.dtype, axis, keepdims))
            if plan is not None:
                out_shape, expression, grid, code, n_out, n_red, s, r = plan
                device = a.device
                out = empty_(out_shape, a.dtype, device)
                if grid:  # (common._run, inline)
                    libraries = _native.current
                    libraries.launcher.launch("reductions", expression, device,
                                              (libraries.default_queues.get(device) or a.queue).stream, grid,
                                              THREADS, [code, a.ptr, out.ptr, n_out, n_red, s, r])
                return out
        return checked(a, axis, keepdims)

    reduction.__doc__, reduction.__wrapped__, reduction.__name__ = checked.__doc__, checked, checked.__name__
    return reduction


def planned_channel_sum(checked):
    """A framework's op ``checked(a)``, the sum of ``a`` over every axis but 1 (:func:`reduce`'s "sum" over them):
    a call on a DeviceArray of a layout and dtype summed before launches in this one frame; any other call is
    ``checked``'s (which must compute it as :func:`reduce` does)."""
    plans, launches, device_array, empty_ = {}, _LAUNCHES, _DeviceArray, _array._empty

    def channel_sum(a):
        if a.__class__ is device_array:
            plan = plans.get((a.shape, a.strides, a.dtype))
            if plan is not None:
                out_shape, expression, grid, code, n_out, n_red, s, r = plan
                device = a.device
                out = empty_(out_shape, a.dtype, device)
                if grid:  # (common._run, inline)
                    libraries = _native.current
                    libraries.launcher.launch("reductions", expression, device,
                                              (libraries.default_queues.get(device) or a.queue).stream, grid,
                                              THREADS, [code, a.ptr, out.ptr, n_out, n_red, s, r])
                return out
        out = checked(a)
        if a.__class__ is device_array:  # checked: the launch it planned, kept by this layout
            plan = launches.get(("sum", a.shape, a.strides, a.dtype, (0, *range(2, a.ndim)) if a.ndim else (),
                                 False))
            if plan is not None:
                if len(plans) >= 1024:
                    plans.clear()
                plans[(a.shape, a.strides, a.dtype)] = plan
        return out

    channel_sum.__doc__, channel_sum.__wrapped__, channel_sum.plans = checked.__doc__, checked, plans
    channel_sum.__name__ = checked.__name__
    return channel_sum


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
