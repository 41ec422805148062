"""Gathers, tiling, broadcasting and cumulative sums (what ONNX's Gather, GatherElements, Tile, Expand and CumSum
need), with the backward of the gathers. Indices are integer arrays with values in ``[-n, n)`` for an axis of size
``n`` (a negative one counts from the end)."""

from __future__ import annotations

from ._spec import op


@op
def take(a, indices, axis):
    """``a`` gathered along ``axis`` at ``indices`` (any shape): shape ``a.shape[:axis] + indices.shape +
    a.shape[axis + 1:]`` (ONNX's Gather)."""


@op
def take_backward(dy, indices, axis, size):
    """The gradient of :func:`take` for its ``a`` (whose ``axis`` has ``size`` elements): each element of ``dy``
    added into the row its index picked (rows picked twice get both)."""


@op
def take_along_axis(a, indices, axis):
    """``a`` gathered along ``axis`` at ``indices`` (the rank of ``a``, the other axes equal): ONNX's
    GatherElements, NumPy's ``take_along_axis``."""


@op
def take_along_axis_backward(dy, indices, axis, size):
    """The gradient of :func:`take_along_axis` for its ``a`` (whose ``axis`` has ``size`` elements)."""


@op
def tile(a, repeats):
    """``a`` repeated ``repeats[i]`` times along axis ``i`` (a tuple of the rank of ``a``)."""


@op
def broadcast_to(a, shape):
    """``a`` broadcast to ``shape`` as a new array (not a view)."""


@op
def cumsum(a, axis, exclusive, reverse):
    """Cumulative sums along ``axis``: inclusive or ``exclusive`` (each element's sum leaves it out), from the start
    or in ``reverse`` (from the end), as ONNX's CumSum."""
