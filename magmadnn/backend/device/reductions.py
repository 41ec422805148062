"""Device reductions: pymagma's reduction kernels (a repeated call launches in the op's one frame: its plan,
pymagma.kernels.reductions.planned_reduction); ``sum_to_shape`` from the op set's one definition."""

from __future__ import annotations

import functools

from pymagma import kernels as _k
from pymagma.kernels.elementwise import planned_broadcast_divide
from pymagma.kernels.reductions import planned_channel_sum, planned_reduction

from ..ops import reductions as _reductions
from .shapes import reshape


def _sum(a, axis=None, keepdims=False):
    return _k.reduce("sum", a, axis=axis, keepdims=keepdims)


def _mean(a, axis=None, keepdims=False):
    return _k.reduce("mean", a, axis=axis, keepdims=keepdims)


_sum.__name__, _mean.__name__ = "sum", "mean"
sum = planned_reduction("sum", _sum)  # noqa: A001
mean = planned_reduction("mean", _mean)


def argmax(a, axis=None):
    if axis is None:
        return _k.argmax(reshape(a, (-1,)), 0)
    return _k.argmax(a, axis)


sum_to_shape = _reductions.sum_to_shape_op(functools.partial(_k.reduce, "sum", keepdims=True), reshape)


def _channel_sum(a):
    """Sum of ``a`` over every axis but 1."""
    return _k.reduce("sum", a, axis=(0, *range(2, a.ndim)) if a.ndim else ())  # (no generator frame per call)


_channel_sum.__name__ = "channel_sum"
channel_sum = planned_channel_sum(_channel_sum)


def _broadcast_divide(a, shape, divisor=1):
    """``a`` broadcast to ``shape`` divided by ``divisor``: one strided launch into a new array."""
    return _k.broadcast_divide(a, shape, float(divisor))


_broadcast_divide.__name__ = "broadcast_divide"
broadcast_divide = planned_broadcast_divide(_broadcast_divide)  # (a repeated call: one frame)
