"""Device reductions: pymagma's reduction kernels; ``sum_to_shape`` from the op set's one definition."""

from __future__ import annotations

import functools

from pymagma import kernels as _k

from ..ops import reductions as _reductions
from .shapes import reshape


def sum(a, axis=None, keepdims=False):  # noqa: A001
    return _k.reduce("sum", a, axis=axis, keepdims=keepdims)


def mean(a, axis=None, keepdims=False):
    return _k.reduce("mean", a, axis=axis, keepdims=keepdims)


def argmax(a, axis=None):
    if axis is None:
        return _k.argmax(reshape(a, (-1,)), 0)
    return _k.argmax(a, axis)


sum_to_shape = _reductions.sum_to_shape_op(functools.partial(_k.reduce, "sum", keepdims=True), reshape)


def channel_sum(a):
    """Sum of ``a`` over every axis but 1."""
    return _k.reduce("sum", a, axis=(0, *range(2, a.ndim)) if a.ndim else ())  # (no generator frame per call)


def broadcast_divide(a, shape, divisor=1):
    """``a`` broadcast to ``shape`` divided by ``divisor``: one strided launch into a new array."""
    return _k.broadcast_divide(a, shape, float(divisor))
