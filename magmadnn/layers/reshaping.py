"""Reshaping layers: Flatten, Reshape, Permute, UpSampling2D, RepeatVector, ZeroPadding2D and Cropping2D (Keras'
axes: the batch axis is counted; per-sample shapes exclude it; images are NCHW)."""

from __future__ import annotations

import math
import numbers

from .. import _checks
from .. import functional as F
from . import plans as _plans
from ._windows import _sizes
from .base import Layer, register, shape_str
from .merging import Concatenate

__all__ = ["Flatten", "Reshape", "Permute", "UpSampling2D", "RepeatVector", "ZeroPadding2D", "Cropping2D"]
__all__ += ["Concatenate"]  # its old home; see .merging


@register
class Flatten(Layer):
    """(N, d1, d2, ...) -> (N, d1*d2*...)."""

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)

    def compute_output_shape(self, input_shape):
        return (math.prod(input_shape),)

    def call(self, x, training=False):
        return F.flatten(x)

    def _plan_call(self, x, training):
        return _plans.op_plan(self, training, F.ReshapeFunction.apply, (), {"shape": (x.shape[0], -1)})


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


@register
class RepeatVector(Layer):
    """Repeats a (features,) input ``n`` times: (n, features)."""

    def __init__(self, n: int, **kwargs):
        super().__init__(**kwargs)
        self.n = _checks.integer(n, "n", f"RepeatVector {self.name!r}", minimum=1)

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (1,), "a per-sample vector (features,), i.e. batches (N, features)")

    def compute_output_shape(self, input_shape):
        return (self.n, input_shape[0])

    def call(self, x, training=False):
        row = F.reshape(x, (x.shape[0], 1, x.shape[1]))
        return F.concatenate([row] * self.n, axis=1) if self.n > 1 else row

    def get_config(self):
        return {"n": self.n, **super().get_config()}


def _edges(value, name: str, owner: str):
    """Keras' 2-D padding / cropping forms: an int, (rows, cols) or ((top, bottom), (left, right)), each >= 0."""
    def size(v):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
            raise ValueError(f"{owner}: {name} must be an int >= 0, a pair of them or a pair of pairs "
                             f"((top, bottom), (left, right)), got {value!r}")
        return int(v)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return ((size(value),) * 2,) * 2
    if isinstance(value, (tuple, list)) and len(value) == 2:
        if all(isinstance(v, (tuple, list)) for v in value):
            if all(len(v) == 2 for v in value):
                return tuple((size(v[0]), size(v[1])) for v in value)
        elif not any(isinstance(v, (tuple, list)) for v in value):
            return tuple((size(v), size(v)) for v in value)
    size(-1)  # raises the error above


class _Edges(Layer):
    """What ZeroPadding2D and Cropping2D share: the (C, H, W) input and the ((top, bottom), (left, right)) sizes."""

    word = "padding"

    def __init__(self, edges, data_format=None, **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        if data_format not in (None, "channels_first"):
            raise ValueError(f"{owner}: images here are NCHW (channels_first); data_format={data_format!r} is not "
                             "available: transpose the data to (N, C, H, W)")
        setattr(self, self.word, _edges(edges, self.word, owner))

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (3,), "a per-sample image (C, H, W), i.e. batches (N, C, H, W)")

    def get_config(self):
        return {self.word: [list(e) for e in getattr(self, self.word)], **super().get_config()}


@register
class ZeroPadding2D(_Edges):
    """Zero rows at the top and bottom and zero columns left and right of (C, H, W) images (Keras' ``padding``)."""

    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(padding, data_format, **kwargs)

    def compute_output_shape(self, input_shape):
        (top, bottom), (left, right) = self.padding
        c, h, w = input_shape
        return (c, h + top + bottom, w + left + right)

    def call(self, x, training=False):
        (top, bottom), (left, right) = self.padding
        return F.pad_axis(F.pad_axis(x, 2, top, bottom), 3, left, right)


@register
class Cropping2D(_Edges):
    """Removes rows at the top and bottom and columns left and right of (C, H, W) images (Keras' ``cropping``)."""

    word = "cropping"

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(cropping, data_format, **kwargs)

    def check_input_shape(self, input_shape):
        super().check_input_shape(input_shape)
        if min(self.compute_output_shape(input_shape)[1:]) < 1:
            raise self.shape_error(f"an image larger than the cropping {self.cropping}", input_shape)

    def compute_output_shape(self, input_shape):
        (top, bottom), (left, right) = self.cropping
        c, h, w = input_shape
        return (c, h - top - bottom, w - left - right)

    def call(self, x, training=False):
        (top, bottom), (left, right) = self.cropping
        h, w = x.shape[2], x.shape[3]
        return F.slice_axis(F.slice_axis(x, 2, top, h - bottom), 3, left, w - right)
