"""Host reductions: sums, means, argmax, the per-channel sums and ``sum_to_shape`` (undoing broadcasting)."""

from __future__ import annotations

import functools
import math

import numpy as np

from ..ops import reductions as _reductions

_add_reduce = np.add.reduce  # what ndarray.sum calls (the same dtype rules and order), one C call


def sum(a, axis=None, keepdims=False):  # noqa: A001
    if type(a) is np.ndarray:  # the reduction ndarray.sum runs (add.reduce), without np.sum's or the method's frames
        return _add_reduce(a, axis, None, None, keepdims)
    return np.sum(a, axis=axis, keepdims=keepdims)


def mean(a, axis=None, keepdims=False):
    return np.mean(a, axis=axis, keepdims=keepdims)


def argmax(a, axis=None):
    return np.argmax(a, axis=axis)


sum_to_shape = _reductions.sum_to_shape_op(functools.partial(np.sum, keepdims=True), np.ndarray.reshape)


def channel_sum(a):
    """Sum of ``a`` over every axis but 1: the samples first (contiguous rows added element by element, as the 2-D
    case does), then each channel's row (about twice as fast as the other order, which sums short rows first)."""
    if a.ndim == 2:
        return _add_reduce(a, 0)
    n, c = a.shape[:2]
    return _add_reduce(_add_reduce(a.reshape(n, c, math.prod(a.shape[2:])), 0), 1)  # prod: an empty batch too


def broadcast_divide(a, shape, divisor=1):
    """``a`` broadcast to ``shape`` divided by ``divisor``, a new array."""
    b = np.broadcast_to(a, tuple(shape))
    return np.array(b) if divisor == 1 else np.divide(b, divisor, dtype=a.dtype)
