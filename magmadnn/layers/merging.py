"""Merging layers: Add, Subtract, Multiply, Average, Maximum, Minimum (element-wise over inputs of one shape) and
Concatenate (a list of inputs, one output; Keras' axes: the batch axis is counted, so ``Concatenate(axis=1)`` joins
the channels of NCHW data)."""

from __future__ import annotations

from .. import _checks
from .. import functional as F
from . import plans as _plans
from .base import Layer, ShapeMismatchError, register, shape_str

__all__ = ["Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate"]


class _Merge(Layer):
    """Element-wise merging of two or more inputs of one shape (``inputs`` fixes how many: Subtract's 2)."""

    supports_masking = False
    inputs: int | None = None

    def check_input_shape(self, input_shape):
        count = "exactly two inputs" if self.inputs == 2 else "a list of at least two inputs"
        if not isinstance(input_shape, list) or len(input_shape) < 2 or (
                self.inputs is not None and len(input_shape) != self.inputs):
            raise self.shape_error(count, input_shape)
        if any(s != input_shape[0] for s in input_shape):
            shapes = ", ".join(shape_str(s) for s in input_shape)
            raise ShapeMismatchError(f"{type(self).__name__} layer {self.name!r} needs inputs of one shape; got "
                                     f"{shapes} from {self._source}")

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def call(self, xs, training=False):
        total = xs[0]
        for x in xs[1:]:
            total = self.merge(total, x)
        return total

    def merge(self, a, b):
        raise NotImplementedError


@register
class Add(_Merge):
    """Element-wise sum of two or more inputs of the same shape (residual connections)."""

    merge = staticmethod(F.add)

    def _plan_call(self, xs, training):
        if len(xs) != 2:
            return None
        lead = F.trailing_lead(xs[0].shape, xs[1].shape)  # (one shape, the inputs' signature: None)
        if lead is False:  # (a two-input plan is ``run(a, b)``: the op's apply inline, no frame of its own)
            return _plans.pair_plan(F.AddFunction.apply)
        # the gradient of each input the output's, no sum_to_shape per step
        return _plans.pair_plan(F.TrailingAddFunction.apply, {"lead": lead})


@register
class Subtract(_Merge):
    """``inputs[0] - inputs[1]`` (exactly two inputs, as Keras)."""

    inputs = 2
    merge = staticmethod(F.subtract)


@register
class Multiply(_Merge):
    """Element-wise product of two or more inputs."""

    merge = staticmethod(F.multiply)


@register
class Average(_Merge):
    """Element-wise mean of two or more inputs."""

    def call(self, xs, training=False):
        return F.scale(super().call(xs, training), 1.0 / len(xs), 0.0)

    merge = staticmethod(F.add)


@register
class Maximum(_Merge):
    """Element-wise maximum of two or more inputs."""

    merge = staticmethod(F.maximum)


@register
class Minimum(_Merge):
    """Element-wise minimum of two or more inputs."""

    merge = staticmethod(F.minimum)


@register
class Concatenate(Layer):
    """Joins two or more inputs along ``axis`` (Keras: counts the batch axis 0, which cannot be joined; -1 is the
    last axis); the inputs' other sizes must match."""

    def __init__(self, axis: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.axis = _checks.integer(axis, "axis", f"Concatenate {self.name!r}")
        if self.axis == 0:
            raise ValueError(f"Concatenate {self.name!r}: axis 0 is the batch axis and cannot be joined; "
                             "expected 1..rank or a negative axis")

    def _sample_axis(self, rank: int) -> int:
        """The per-sample axis that ``axis`` names in inputs of per-sample ``rank``."""
        axis = self.axis - 1 if self.axis > 0 else rank + self.axis
        if not 0 <= axis < rank:
            raise self.shape_error(f"inputs with an axis {self.axis} (per-sample rank >= "
                                   f"{self.axis if self.axis > 0 else -self.axis})", self._shapes)
        return axis

    def check_input_shape(self, input_shape):
        self._shapes = input_shape
        if not isinstance(input_shape, list) or len(input_shape) < 2:
            raise self.shape_error("a list of at least two inputs", input_shape)
        rank = len(input_shape[0])
        if any(len(s) != rank for s in input_shape):
            raise self.shape_error("inputs of one rank", input_shape)
        axis = self._sample_axis(rank)
        if any(s[:axis] + s[axis + 1:] != input_shape[0][:axis] + input_shape[0][axis + 1:] for s in input_shape):
            raise self.shape_error(f"inputs whose shapes match except along axis {self.axis}", input_shape)

    def compute_output_shape(self, input_shape):
        axis = self._sample_axis(len(input_shape[0]))
        out = list(input_shape[0])
        out[axis] = sum(s[axis] for s in input_shape)
        return tuple(out)

    def call(self, xs, training=False):
        return F.concatenate(xs, axis=self._sample_axis(xs[0].ndim - 1) + 1)

    def get_config(self):
        return {"axis": self.axis, **super().get_config()}
