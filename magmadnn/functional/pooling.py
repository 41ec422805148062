"""Pooling: max and average windows, global average and global max over the spatial axes."""

from __future__ import annotations

from .._checks import Plans
from ..autograd import Function, Tensor
from ..backend import geometry
from ._base import _as_tensor, _need_ndim, _same_dtype, signature
from .conv import conv2d_padding
from .operators import MeanFunction, reshape, transpose

__all__ = ["max_pool2d", "avg_pool2d", "global_avg_pool2d", "global_max_pool2d", "max_pool1d", "avg_pool1d"]


class Pool2dFunction(Function):
    def forward(self, x, mode, window, stride, padding):
        self.x, self.args = x, (mode, window, stride, padding)
        self.y, self.ctx = self.xp.pool2d_forward(x, mode, window, stride, padding)
        return self.y

    def backward(self, g):
        return (self.xp.pool2d_backward(g, self.x, self.y, self.ctx, *self.args),)


def _pool(fn: str, mode: str, x, window, stride, padding) -> Tensor:
    key = signature(fn, x, window, stride, padding)
    geom = _POOL_PLANS.get(key) if key is not None else None
    if geom is None:  # every check, then the geometry the call decided, kept for its signature
        x = _as_tensor(x)
        geom = _POOL_PLANS.keep(key, _plan_pool(fn, x, window, stride, padding))
    return Pool2dFunction.apply(x, mode=mode, **geom)


_POOL_PLANS = Plans()


def pool2d_arguments(mode: str, x, window, stride=None, padding=0) -> dict:
    """The keyword arguments of ``Pool2dFunction.apply(x, **arguments)`` that ``max_pool2d`` (``mode`` "max") or
    ``avg_pool2d`` ("avg") runs for an input of this shape and dtype, after every check."""
    return {"mode": mode, **_plan_pool(f"{mode}_pool2d", _as_tensor(x), window, stride, padding)}


def _plan_pool(fn: str, x, window, stride, padding) -> dict:
    _need_ndim(x, 4, fn, "x", "(N, C, H, W)")
    window = geometry.int_pair(window, "window", fn)
    stride = window if stride is None else geometry.int_pair(stride, "stride", fn)
    pads = conv2d_padding(x.shape[2:], window, stride, padding, 1)
    if max(pads[0]) >= window[0] or max(pads[1]) >= window[1]:
        raise ValueError(f"{fn}: padding {pads} must be smaller than the window {window}")
    ho, wo = geometry.output_hw(x.shape[2:], window, stride, pads, (1, 1))
    if ho < 1 or wo < 1:
        raise ValueError(f"{fn}: input of spatial size {x.shape[2:]} is smaller than the window {window}")
    _same_dtype(fn, x=x)
    return {"window": window, "stride": stride, "padding": pads}


def max_pool2d(x, window, stride=None, padding=0) -> Tensor:
    """Max pooling over (H, W); stride defaults to the window; padding int | pair | "same" | "valid"."""
    return _pool("max_pool2d", "max", x, window, stride, padding)


def avg_pool2d(x, window, stride=None, padding=0) -> Tensor:
    """Average pooling over (H, W); padded positions are not counted in the average."""
    return _pool("avg_pool2d", "avg", x, window, stride, padding)


def global_avg_pool2d(x) -> Tensor:
    """(N, C, H, W) -> (N, C): mean over the spatial axes."""
    x = _as_tensor(x)
    _need_ndim(x, 4, "global_avg_pool2d", "x", "(N, C, H, W)")
    return MeanFunction.apply(x, axis=(2, 3), keepdims=False)


def global_max_pool2d(x) -> Tensor:
    """(N, C, H, W) -> (N, C): the maximum over each channel's spatial extent (max pooling with the whole window)."""
    x = _as_tensor(x)
    _need_ndim(x, 4, "global_max_pool2d", "x", "(N, C, H, W)")
    n, c, h, w = x.shape
    return reshape(max_pool2d(x, (h, w)), (n, c))


def _pool1d(fn: str, mode: str, x, window, stride, padding) -> Tensor:
    """A 1-D pooling of x (N, T, C) as the 2-D one of (N, C, 1, T) with a (1, window) window."""
    x = _as_tensor(x)
    _need_ndim(x, 3, fn, "x", "(N, T, C)")
    stride = window if stride is None else stride
    n, steps, channels = x.shape
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(f"{fn}: padding must be 'valid' or 'same', got {padding!r}")
    pads = conv2d_padding((1, steps), (1, window), (1, stride), padding.lower(), 1)
    planes = reshape(transpose(x, (0, 2, 1)), (n, channels, 1, steps))
    y = _pool(fn, mode, planes, (1, window), (1, stride), pads)
    return transpose(reshape(y, (n, channels, y.shape[3])), (0, 2, 1))


def max_pool1d(x, window, stride=None, padding="valid") -> Tensor:
    """Max pooling over the steps of x (N, T, C); stride defaults to the window; padding "valid" or "same"."""
    return _pool1d("max_pool1d", "max", x, window, stride, padding)


def avg_pool1d(x, window, stride=None, padding="valid") -> Tensor:
    """Average pooling over the steps of x (N, T, C); padded steps are not counted in the average."""
    return _pool1d("avg_pool1d", "avg", x, window, stride, padding)
