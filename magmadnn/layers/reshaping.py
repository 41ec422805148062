"""Shape and routing layers: Concatenate, Reshape, Permute and UpSampling2D (Keras' axes: the batch axis is
counted, so ``Concatenate(axis=1)`` joins the channels of NCHW data; per-sample shapes exclude it)."""

from __future__ import annotations

import math
import numbers

from .. import _checks
from .. import functional as F
from .base import Layer, register, shape_str
from .conv import _sizes

__all__ = ["Concatenate", "Reshape", "Permute", "UpSampling2D"]


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


@register
class Reshape(Layer):
    """Reshapes each sample to ``target_shape`` (batch excluded; one entry may be -1, inferred from the rest)."""

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        owner = f"Reshape {self.name!r}"
        if isinstance(target_shape, numbers.Integral):
            target_shape = (target_shape,)
        if not isinstance(target_shape, (tuple, list)) or not target_shape:
            raise TypeError(f"{owner}: target_shape must be a non-empty tuple of ints, got {target_shape!r}")
        shape = tuple(_checks.integer(s, "target_shape entry", owner) for s in target_shape)
        if any(s < 1 and s != -1 for s in shape) or shape.count(-1) > 1:
            raise ValueError(f"{owner}: target_shape entries must be >= 1 with at most one -1, got {target_shape!r}")
        self.target_shape = shape

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)
        size, known = math.prod(input_shape), math.prod(s for s in self.target_shape if s != -1)
        fits = size % known == 0 if -1 in self.target_shape else size == known
        if not fits:
            count = f"a multiple of {known}" if -1 in self.target_shape else str(known)
            raise self.shape_error(f"{count} values per sample to reshape into {shape_str(self.target_shape)}",
                                   input_shape)

    def compute_output_shape(self, input_shape):
        known = math.prod(s for s in self.target_shape if s != -1)
        return tuple(math.prod(input_shape) // known if s == -1 else s for s in self.target_shape)

    def call(self, x, training=False):
        return F.reshape(x, (x.shape[0], *self.output_shape))

    def get_config(self):
        return {"target_shape": list(self.target_shape), **super().get_config()}


@register
class Permute(Layer):
    """Permutes the per-sample axes: ``dims`` is a permutation of 1..rank (Keras: 1-based, the batch axis stays)."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        owner = f"Permute {self.name!r}"
        if not isinstance(dims, (tuple, list)):
            raise TypeError(f"{owner}: dims must be a tuple of ints, got {dims!r}")
        dims = tuple(_checks.integer(d, "dims entry", owner) for d in dims)
        if sorted(dims) != list(range(1, len(dims) + 1)):
            raise ValueError(f"{owner}: dims must be a permutation of 1..{len(dims)} (1-based, batch excluded), "
                             f"got {dims!r}")
        self.dims = dims

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list) or len(input_shape) != len(self.dims):
            raise self.shape_error(f"a per-sample input of rank {len(self.dims)} (dims {self.dims})", input_shape)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[d - 1] for d in self.dims)

    def call(self, x, training=False):
        return F.transpose(x, (0, *self.dims))

    def get_config(self):
        return {"dims": list(self.dims), **super().get_config()}


@register
class UpSampling2D(Layer):
    """Repeats each pixel of (C, H, W) inputs over a ``size`` block: (C, H * sh, W * sw) (nearest neighbour)."""

    def __init__(self, size=2, interpolation: str = "nearest", **kwargs):
        super().__init__(**kwargs)
        owner = f"UpSampling2D {self.name!r}"
        self.size = _sizes(size, "size", owner)
        if interpolation != "nearest":
            raise ValueError(f"{owner}: interpolation must be 'nearest', got {interpolation!r}")
        self.interpolation = interpolation

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (3,), "a per-sample input (C, H, W), i.e. batches (N, C, H, W)")

    def compute_output_shape(self, input_shape):
        c, h, w = input_shape
        return (c, h * self.size[0], w * self.size[1])

    def call(self, x, training=False):
        return F.upsample_nearest2d(x, self.size)

    def get_config(self):
        return {"size": list(self.size), "interpolation": self.interpolation, **super().get_config()}
