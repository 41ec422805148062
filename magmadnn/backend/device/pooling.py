"""Device pooling: average by cuDNN (padding excluded from the count, see the adapters in ``conv``), max by
pymagma's kernel (the op set's first-maximum rule by construction)."""

from __future__ import annotations

import numpy as np

from pymagma import _checks, _native
from pymagma import array as _array
from pymagma import dnn as _dnn
from pymagma import kernels as _k

from .. import geometry as _geometry
from . import kernels as _dk
from ._common import (
    _contiguous,
)
from .conv import _crop, _kept, _pad, _split_pads
from .graphs import cached_constant as _cached_constant
from .kernels.pool import LAUNCHES as _LAUNCHES
from .kernels.pool import THREADS as _THREADS

_DeviceArray, _empty, _INT32 = _array.DeviceArray, _array._empty, np.dtype(np.int32)


def _check_pool_mode(mode, fn: str) -> None:
    if mode not in ("max", "avg"):
        raise ValueError(f"{fn}: unknown mode {mode!r}; expected 'max' or 'avg'")


@_checks.once_per_arguments
def _pool_plan(mode, window, stride, padding) -> tuple:
    """(window pair, stride pair, cuDNN's symmetric pads, the extra pads, ((top, bottom), (left, right))) of a pooling's
    arguments, checked once per distinct arguments (their types included)."""
    _check_pool_mode(mode, "pool2d")
    sym, extra = _split_pads(padding)
    t, b, l, r = _geometry.pads4(padding)
    return _geometry.pair(window), _geometry.pair(stride), sym, extra, ((t, b), (l, r))


#: (mode, the ids of the window, stride and padding objects) -> (those objects, :func:`_pool_plan`'s answer): the
#: poolings whose geometry objects are those of an earlier call (a layer passes the same checked tuples at every
#: call), found by one look-up inline in each call (the mode by value; the geometry by identity, its objects kept
#: alive in the answer so that no other object gets their ids, as ``pymagma._checks.same_objects``)
_SEEN: dict = {}


def _seen(mode, window, stride, padding) -> tuple:
    """The answer :data:`_SEEN` keeps for these arguments, worked out with every check (a miss of the look-up)."""
    return _kept(_SEEN, (mode, id(window), id(stride), id(padding)),
                 ((window, stride, padding), _pool_plan(mode, window, stride, padding)))


def _avg_factor(x_shape, window, stride, padding, dtype, device):
    """area / (real elements) of each output window, shape (1, 1, Ho, Wo), from the geometry alone: a constant made
    once per geometry and device (read-only; a replayed step finds it made by its eager warm-up)."""
    (wh, ww), (sh, sw) = _geometry.pair(window), _geometry.pair(stride)
    t, b, l, r = _geometry.pads4(padding)
    per_axis = []
    for size, k, s, lo, hi in ((x_shape[2], wh, sh, t, b), (x_shape[3], ww, sw, l, r)):
        starts = np.arange((size + lo + hi - k) // s + 1) * s - lo
        per_axis.append(np.minimum(starts + k, size) - np.maximum(starts, 0))
    counts = np.multiply.outer(per_axis[0], per_axis[1])
    host = (wh * ww / counts).astype(dtype)[None, None]
    return _cached_constant(device, host, lambda h: _array.asarray(h, device=device))


def pool2d_forward(x, mode, window, stride, padding=(0, 0)):
    """Max (padding ignored) or average (divided by the real elements of each window) pooling -> ``(y, ctx)``."""
    window, stride, sym, extra, pads = (_SEEN.get((mode, id(window), id(stride), id(padding))) or
                                        _seen(mode, window, stride, padding))[1]
    x = x if x.is_c_contiguous else _contiguous(x)
    if mode == "max":  # our kernel: the op set's first-maximum rule by construction (cuDNN's tie rule is undocumented)
        # a launch kernels.max_pool2d kept for x's layout and this geometry (its checked values): launched in this
        # frame, as max_pool2d launches it; else max_pool2d's checked call (which keeps its launch)
        launch = _LAUNCHES.get(("max", x.shape, x.dtype, window, stride, pads)) if x.__class__ is _DeviceArray \
            else None
        if launch is None:
            return _dk.max_pool2d(x, window, stride, pads)
        shape, expression, grid, g = launch
        device = x.device
        y, offsets = _empty(shape, x.dtype, device), _empty(shape, _INT32, device)
        if grid:  # (pymagma.kernels.common._run, inline)
            libraries = _native.current
            libraries.launcher.launch("pool", expression, device,
                                      (libraries.default_queues.get(device) or x.queue).stream, grid, _THREADS,
                                      [x.ptr, y.ptr, offsets.ptr, g])
        return y, offsets
    if not any(extra):
        return _dnn.pool2d_forward(x, window, stride, sym, mode="avg_exclude_pad"), None
    xin = _pad(x, extra, 0.0)
    y_area = _dnn.pool2d_forward(xin, window, stride, sym, mode="avg_include_pad")
    factor = _avg_factor(x.shape, window, stride, padding, x.dtype, x.device)
    return _k.multiply(y_area, factor), (xin, y_area, factor)


def pool2d_backward(dy, x, y, ctx, mode, window, stride, padding=(0, 0)):
    window, stride, sym, extra, pads = (_SEEN.get((mode, id(window), id(stride), id(padding))) or
                                        _seen(mode, window, stride, padding))[1]
    if mode == "max":  # ctx: the offsets of the maxima the forward found
        # a launch kernels.max_pool2d_backward kept for x's shape, dy's dtype and this geometry: launched in this
        # frame after its per-call checks (dy and the offsets of the pooled shape, C-contiguous, the offsets int32,
        # one device); else max_pool2d_backward's checked call
        launch = _LAUNCHES.get(("max_backward", x.shape, dy.dtype, window, stride, pads)) \
            if dy.__class__ is _DeviceArray and ctx.__class__ is _DeviceArray else None
        if launch is None or dy.shape != launch[1] or ctx.shape != launch[1] or ctx.dtype != _INT32 or \
                ctx.device != dy.device or not (dy.is_c_contiguous and ctx.is_c_contiguous):
            return _dk.max_pool2d_backward(dy, ctx, x.shape, window, stride, pads)
        shape, _, expression, grid, g = launch
        device = dy.device
        dx = _empty(shape, dy.dtype, device)
        if grid:  # (pymagma.kernels.common._run, inline)
            libraries = _native.current
            libraries.launcher.launch("pool", expression, device,
                                      (libraries.default_queues.get(device) or dy.queue).stream, grid, _THREADS,
                                      [dy.ptr, ctx.ptr, dx.ptr, g])
        return dx
    dy, x = _contiguous(dy), _contiguous(x)
    if ctx is None:
        return _dnn.pool2d_backward(_contiguous(y), dy, x, window, stride, sym, mode="avg_exclude_pad")
    xin, y_area, factor = ctx
    dxp = _dnn.pool2d_backward(y_area, _k.multiply(dy, factor), xin, window, stride, sym, mode="avg_include_pad")
    return _crop(dxp, extra, x.shape)
