"""Reductions: sums, means, argmax, per-channel sums, and ``sum_to_shape`` (undoing broadcasting), whose
logic every backend shares (:func:`sum_to_shape_op`)."""

from __future__ import annotations

from ._spec import op


def sum_to_shape_op(sum_keepdims, reshape):
    """The op ``sum_to_shape`` of a backend, from two of its primitives: ``sum_keepdims(a, axis=axes)`` (a sum over
    ``axes`` keeping them as size 1) and ``reshape(a, shape)``. Hand C-level callables (``functools.partial``,
    method descriptors) so that the op costs no Python frame more than one written out."""

    def sum_to_shape(a, shape):
        """Sum ``a`` down to ``shape``: undoes broadcasting (leading axes and axes of size 1)."""
        shape = tuple(shape)
        if tuple(a.shape) == shape:
            return a
        lead = a.ndim - len(shape)
        if lead < 0:
            raise ValueError(f"sum_to_shape: cannot reduce shape {a.shape} to larger rank shape {shape}")
        axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and a.shape[i + lead] != 1)
        return reshape(sum_keepdims(a, axis=axes) if axes else a, shape)

    return sum_to_shape


@op
def sum(a, axis=None, keepdims=False):  # noqa: A001
    """Sum over ``axis`` (None: all axes) as an array (0-d for a full reduction)."""


@op
def mean(a, axis=None, keepdims=False):
    """Mean over ``axis``."""


@op
def argmax(a, axis=None):
    """int64 indices of the first maximum along ``axis``."""


@op
def broadcast_divide(a, shape, divisor=1):
    """A new array of ``shape``: ``a`` broadcast to it (NumPy's rules), every element divided by ``divisor`` (the
    gradient of ``sum`` with divisor 1 and of ``mean`` with the count; one pass on the device)."""


@op
def sum_to_shape(a, shape):
    """Sum ``a`` down to ``shape``, undoing broadcasting (leading axes and axes of size 1)."""


@op
def channel_sum(a):
    """Sum of ``a`` over every axis but 1: the per-channel totals, shape (C,)."""
