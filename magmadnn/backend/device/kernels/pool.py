"""Launchers of pool.cu: 2-D max pooling that saves the offset of each maximum, and its backward; zero padding of a
window op's input in one launch."""

from __future__ import annotations

import ctypes
from ctypes import c_int, c_longlong

import numpy as np

from pymagma import _checks, _native
from pymagma import array as _array
from pymagma.kernels import programs
from pymagma.kernels.common import _device_array, _float_dtype, _run
from pymagma.kernels.elementwise import contiguous
from pymagma.kernels.loader import MAX_BLOCKS, THREADS


class PoolGeometry(ctypes.Structure):
    """Mirror of the ``PoolGeometry`` struct in pool.cu."""

    _fields_ = [("planes", c_longlong), ("h", c_longlong), ("w", c_longlong), ("ho", c_longlong), ("wo", c_longlong),
                ("kh", c_int), ("kw", c_int), ("sh", c_int), ("sw", c_int), ("top", c_int), ("left", c_int)]



class PadGeometry(ctypes.Structure):
    """Mirror of the ``PadGeometry`` struct in pool.cu."""

    _fields_ = [("planes", c_longlong), ("h", c_longlong), ("w", c_longlong), ("hp", c_longlong),
                ("wp", c_longlong), ("top", c_longlong), ("left", c_longlong)]


_INT32 = np.dtype(np.int32)
_DeviceArray = _array.DeviceArray
_EXPRESSIONS: dict = {}  # (kernel, dtype name) -> the kernel's name expression (programs.expression, made once)


def _expression(kernel: str, dtype: str) -> str:
    made = _EXPRESSIONS[(kernel, dtype)] = programs.expression(kernel, dtype)
    return made


@_checks.once_per_arguments
def _pool_geometry(shape, window, stride, padding, what: str) -> PoolGeometry:
    """The geometry of 2-D pooling over NCHW ``shape``: ``window`` and ``stride`` pairs of positive ints, ``padding``
    ``((top, bottom), (left, right))`` of non-negative ints smaller than the window."""
    if len(shape) != 4:
        raise ValueError(f"{what}: expected an (N, C, H, W) array, got shape {tuple(shape)}")
    (kh, kw), (sh, sw) = _two(window, "window", what), _two(stride, "stride", what)
    if len(padding) != 2:
        raise ValueError(f"{what}: padding must be ((top, bottom), (left, right)), got {padding!r}")
    (top, bottom), (left, right) = (_two(p, "padding", what) for p in padding)
    if min(kh, kw, sh, sw) < 1 or not (top < kh and bottom < kh and left < kw and right < kw):
        raise ValueError(f"{what}: window {(kh, kw)} and stride {(sh, sw)} must be positive and each padding "
                         f"{tuple(padding)} smaller than the window")
    n, c, h, w = (int(d) for d in shape)
    ho, wo = (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1
    if ho < 1 or wo < 1:
        padded = (h + top + bottom, w + left + right)
        raise ValueError(f"{what}: window {(kh, kw)} does not fit the padded input {padded}")
    return PoolGeometry(n * c, h, w, ho, wo, kh, kw, sh, sw, top, left)


_pool_geometry_of = _checks.same_objects(_pool_geometry, by_value=1)  # the geometry's tuples by identity


def _two(value, name: str, what: str) -> tuple[int, int]:
    pair = _checks.sizes(value, name)
    if len(pair) != 2:
        raise ValueError(f"{what}: {name} must be a pair of integers, got {value!r}")
    return pair


#: The launches of checked calls, found again by the values of their layout and geometry (the device backend's
#: pooling launches a kept one in its own frame; :func:`pad2d` in its own): ``("max", x shape, dtype, window, stride,
#: padding)`` -> (y shape, expression, grid, PoolGeometry); ``("max_backward", x shape, dtype, window, stride,
#: padding)`` -> (dx shape, pooled shape, expression, grid, PoolGeometry); ``("pad", x shape, dtype, id(pads))`` ->
#: (pads, padded shape, expression, grid, PadGeometry): pad2d's own callers pass any pads, so its launches are found by
#: the identity of the pads' tuple (kept alive in the answer). The geometry's values are ints or tuples of ints; a
#: kernel's grid covers its items (none: 0).
LAUNCHES: dict = {}


def _keep(key: tuple, launch: tuple, geometry: tuple) -> None:
    """``launch`` kept under ``key`` when every value of ``geometry`` is a tuple of ints (or of pairs of them): a
    geometry of other types (a bool, a float, a list), which the checks may refuse, is never kept, so a kept launch
    never answers for a geometry the checks would refuse (the max-pooling launches are looked up by the device
    backend's checked ints)."""
    for value in geometry:
        if value.__class__ is not tuple or not all(v.__class__ is int or v.__class__ is tuple and
                                                   all(i.__class__ is int for i in v) for v in value):
            return
    if len(LAUNCHES) >= 1024:
        LAUNCHES.clear()
    LAUNCHES[key] = launch


def _grid(n: int) -> int:
    return min(-(-n // THREADS), MAX_BLOCKS)


def max_pool2d(x, window, stride, padding=((0, 0), (0, 0))):
    """Max pooling of the NCHW array ``x`` -> ``(y, offsets)``: ``offsets`` (int32, y's shape) holds the row-major
    window offset of each window's first maximum (padding is never a maximum; a window holding NaN has NaN as its
    maximum, at its last offset, as NumPy's ``maximum`` chain gives).  :func:`max_pool2d_backward` sends the gradient
    there, so the gradient convention does not depend on a library's undocumented tie rule."""
    dtype = _float_dtype(x, "max_pool2d")
    g = _pool_geometry_of(x.shape, window, stride, padding, "max_pool2d")
    x = x if x.is_c_contiguous else contiguous(x)
    y = _array._empty((x.shape[0], x.shape[1], g.ho, g.wo), x.dtype, x.device)
    offsets = _array._empty(y.shape, _INT32, x.device)
    expression = _EXPRESSIONS.get(("max_pool_forward", dtype)) or _expression("max_pool_forward", dtype)
    _run("pool", expression, x, y.size, [x.ptr, y.ptr, offsets.ptr, g])
    if x.__class__ is _DeviceArray:
        _keep(("max", x.shape, x.dtype, window, stride, padding), (y.shape, expression, _grid(y.size), g),
              (window, stride, padding))
    return y, offsets


def max_pool2d_backward(dy, offsets, x_shape, window, stride, padding=((0, 0), (0, 0))):
    """dx of :func:`max_pool2d`: each input element gets the sum of ``dy`` over the windows whose maximum it is,
    summed in a fixed order by one thread (deterministic)."""
    dtype = _float_dtype(dy, "max_pool2d_backward")
    g = _pool_geometry_of(x_shape, window, stride, padding, "max_pool2d_backward")
    expected = (int(x_shape[0]), int(x_shape[1]), g.ho, g.wo)
    if tuple(dy.shape) != expected or tuple(offsets.shape) != expected:
        raise ValueError(f"max_pool2d_backward: dy {dy.shape} and offsets {offsets.shape} must have the pooled shape "
                         f"{expected}")
    if _device_array(offsets, "max_pool2d_backward offsets").dtype != _INT32:
        raise TypeError(f"max_pool2d_backward: offsets must be the int32 array max_pool2d returned, got "
                        f"{offsets.dtype}")
    if offsets.device != dy.device:
        raise ValueError(f"max_pool2d_backward: dy and offsets live on different devices ({dy.device} and "
                         f"{offsets.device})")
    dy = dy if dy.is_c_contiguous else contiguous(dy)
    offsets = offsets if offsets.is_c_contiguous else contiguous(offsets)
    dx = _array._empty((expected[0], expected[1], g.h, g.w), dy.dtype, dy.device)  # x_shape, checked
    expression = _EXPRESSIONS.get(("max_pool_backward", dtype)) or _expression("max_pool_backward", dtype)
    _run("pool", expression, dy, dx.size, [dy.ptr, offsets.ptr, dx.ptr, g])
    if dy.__class__ is _DeviceArray:
        _keep(("max_backward", x_shape, dy.dtype, window, stride, padding),
              (dx.shape, expected, expression, _grid(dx.size), g), (x_shape, window, stride, padding))
    return dx


@_checks.once_per_arguments
def _pad_geometry(shape, pads) -> tuple:
    """(padded shape, PadGeometry) of NCHW ``shape`` padded by ``pads`` (top, bottom, left, right) non-negative ints."""
    if len(shape) != 4:
        raise ValueError(f"pad2d: expected an (N, C, H, W) array, got shape {tuple(shape)}")
    if len(pads) != 4:
        raise ValueError(f"pad2d: pads must be (top, bottom, left, right), got {pads!r}")
    top, bottom, left, right = (_checks.count(p, "pad2d: pad") for p in pads)
    n, c, h, w = shape
    padded = (n, c, h + top + bottom, w + left + right)
    return padded, PadGeometry(n * c, h, w, padded[2], padded[3], top, left)


_pad_geometry_of = _checks.same_objects(_pad_geometry, by_value=1)  # the pads' tuple by identity


def pad2d(x, pads):
    """The NCHW array ``x`` surrounded by zeros, ``pads`` = (top, bottom, left, right) rows and columns of them, in
    one launch (the elements of ``x`` copied bit for bit)."""
    if x.__class__ is _DeviceArray and x.is_c_contiguous:  # a launch kept for x's layout and pads: in this frame
        launch = LAUNCHES.get(("pad", x.shape, x.dtype, id(pads)))
        if launch is not None and launch[0] is pads:
            _, shape, expression, grid, g = launch
            device = x.device
            y = _array._empty(shape, x.dtype, device)
            if grid:  # (common._run, inline)
                libraries = _native.current
                libraries.launcher.launch("pool", expression, device,
                                          (libraries.default_queues.get(device) or x.queue).stream, grid, THREADS,
                                          [x.ptr, y.ptr, g])
            return y
    dtype = _float_dtype(x, "pad2d")
    shape, g = _pad_geometry_of(x.shape, pads)
    x = x if x.is_c_contiguous else contiguous(x)
    y = _array._empty(shape, x.dtype, x.device)
    expression = _EXPRESSIONS.get(("pad2d", dtype)) or _expression("pad2d", dtype)
    _run("pool", expression, x, y.size, [x.ptr, y.ptr, g])
    if x.__class__ is _DeviceArray:
        _keep(("pad", x.shape, x.dtype, id(pads)), (pads, shape, expression, _grid(y.size), g), (pads,))
    return y
