"""Softmax and LogSoftmax over any axis but the batch axis (axis counts the batch, as in Keras and PyTorch)."""

from __future__ import annotations

from .. import _checks
from .. import functional as F
from .base import Layer, register

__all__ = ["Softmax", "LogSoftmax"]


class _AxisSoftmax(Layer):
    function = staticmethod(F.softmax)

    def __init__(self, axis: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.axis = _checks.integer(axis, "axis", f"{type(self).__name__} {self.name!r}")

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)
        rank = len(input_shape) + 1
        if not (-rank < self.axis < rank) or self.axis % rank == 0:
            raise self.shape_error(f"an input with axis {self.axis} (batch included) other than the batch axis",
                                   input_shape)

    def call(self, x, training=False):
        return self.function(x, axis=self.axis % x.ndim)

    def get_config(self):
        return {"axis": self.axis, **super().get_config()}


@register
class Softmax(_AxisSoftmax):
    """``exp(x) / sum(exp(x))`` along ``axis`` (default the last)."""


@register
class LogSoftmax(_AxisSoftmax):
    """``log(softmax(x))`` along ``axis`` (default the last), computed stably."""

    function = staticmethod(F.log_softmax)
