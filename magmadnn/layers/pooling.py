"""Pooling: MaxPool2D, AvgPool2D, GlobalAvgPool2D and GlobalMaxPool2D over images (NCHW, per-sample (C, H, W));
MaxPooling1D, AveragePooling1D, GlobalAveragePooling1D and GlobalMaxPooling1D over sequences (N, T, F), which run
through the 2-D paths on (N, F, 1, T)."""

from __future__ import annotations

from .. import functional as F
from . import plans as _plans
from ._windows import (
    _NCHW,
    _check_chw,
    _check_sequence,
    _data_format,
    _mode,
    _output_hw,
    _padding,
    _padding_config,
    _positive,
    _sizes,
    _steps_out,
)
from .base import Layer, register

__all__ = ["MaxPool2D", "AvgPool2D", "GlobalAvgPool2D", "GlobalMaxPool2D", "MaxPooling1D", "AveragePooling1D",
           "GlobalAveragePooling1D", "GlobalMaxPooling1D"]


class _Pool2D(_NCHW, Layer):
    mode = "max"

    def __init__(self, pool_size=2, strides=None, padding="valid", **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        self.pool_size = _sizes(pool_size, "pool_size", owner)
        self.strides = self.pool_size if strides is None else _sizes(strides, "strides", owner)
        self.padding = _padding(padding, owner)

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (3,), "a per-sample input (C, H, W), i.e. batches (N, C, H, W)")

    def compute_output_shape(self, input_shape):
        hw = _output_hw(self, input_shape, self.pool_size, self.strides, self.padding, (1, 1), "pooling window")
        self._warn_layout(input_shape)
        return (input_shape[0], *hw)

    def call(self, x, training=False):
        pool = F.max_pool2d if self.mode == "max" else F.avg_pool2d
        return pool(x, self.pool_size, stride=self.strides, padding=self.padding)

    def _plan_call(self, x, training):
        params = F.pool2d_arguments(self.mode, x, self.pool_size, stride=self.strides, padding=self.padding)
        return _plans.op_plan(self, training, F.Pool2dFunction.apply, (), params)

    def get_config(self):
        return {"pool_size": list(self.pool_size), "strides": list(self.strides),
                "padding": _padding_config(self.padding),
                **super().get_config()}


@register
class MaxPool2D(_Pool2D):
    """Maximum over ``pool_size`` windows (stride defaults to the window)."""

    mode = "max"


@register
class AvgPool2D(_Pool2D):
    """Mean over ``pool_size`` windows (stride defaults to the window)."""

    mode = "avg"


@register
class GlobalAvgPool2D(_NCHW, Layer):
    """(N, C, H, W) -> (N, C): the mean over each channel's spatial extent."""

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (3,), "a per-sample input (C, H, W), i.e. batches (N, C, H, W)")

    def compute_output_shape(self, input_shape):
        return (input_shape[0],)

    def call(self, x, training=False):
        return F.global_avg_pool2d(x)

    def _plan_call(self, x, training):  # F.global_avg_pool2d's op, its rank check made by the full call
        return _plans.op_plan(self, training, F.MeanFunction.apply, (), {"axis": (2, 3), "keepdims": False})


@register
class GlobalMaxPool2D(_NCHW, Layer):
    """(N, C, H, W) -> (N, C): the maximum over each channel's spatial extent."""

    def check_input_shape(self, input_shape):
        _check_chw(self, input_shape)

    def compute_output_shape(self, input_shape):
        return (input_shape[0],)

    def call(self, x, training=False):
        return F.global_max_pool2d(x)


class _Pooling1D(Layer):
    mode = "max"

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        _data_format(data_format, owner)
        self.pool_size = _positive(pool_size, "pool_size", owner)
        self.strides = self.pool_size if strides is None else _positive(strides, "strides", owner)
        self.padding = _mode(padding, ("valid", "same"), owner)

    def check_input_shape(self, input_shape):
        _check_sequence(self, input_shape)
        if (self.compute_output_shape(input_shape)[0] or 0) < 1 and input_shape[0] is not None:
            raise self.shape_error(f"at least {self.pool_size} steps for pool_size {self.pool_size}", input_shape)

    def compute_output_shape(self, input_shape):
        return (_steps_out(input_shape[0], self.pool_size, self.strides, self.padding), input_shape[1])

    def call(self, x, training=False):
        pool = F.max_pool1d if self.mode == "max" else F.avg_pool1d
        return pool(x, self.pool_size, self.strides, self.padding)

    def get_config(self):
        return {"pool_size": self.pool_size, "strides": self.strides, "padding": self.padding,
                **super().get_config()}


@register
class MaxPooling1D(_Pooling1D):
    """Maximum over windows of ``pool_size`` steps (strides default to the window): (N, T, F) -> (N, T', F)."""

    mode = "max"


@register
class AveragePooling1D(_Pooling1D):
    """Mean over windows of ``pool_size`` steps (required, as in Keras); with "same" padding, padded steps are not
    counted."""

    mode = "avg"

    def __init__(self, pool_size, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)


class _GlobalPooling1D(Layer):
    def __init__(self, data_format=None, keepdims: bool = False, **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        _data_format(data_format, owner)
        if not isinstance(keepdims, bool):
            raise TypeError(f"{owner}: keepdims must be True or False, got {keepdims!r}")
        self.keepdims = keepdims

    def check_input_shape(self, input_shape):
        _check_sequence(self, input_shape)

    def compute_output_shape(self, input_shape):
        return (1, input_shape[1]) if self.keepdims else (input_shape[1],)

    def get_config(self):
        return {"keepdims": self.keepdims, **super().get_config()}


@register
class GlobalAveragePooling1D(_GlobalPooling1D):
    """(N, T, F) -> (N, F) (or (N, 1, F) with keepdims): the mean over the steps; with a mask (from
    ``Embedding(mask_zero=True)``) the mean over the unmasked steps only, as Keras."""

    supports_masking = uses_mask = True

    def _plan_call(self, x, training):  # (a masked call is never planned)
        return _plans.op_plan(self, training, F.MeanFunction.apply, (), {"axis": 1, "keepdims": self.keepdims})

    def call(self, x, training=False, mask=None):
        if mask is None:
            return F.mean(x, axis=1, keepdims=self.keepdims)
        n, steps = mask.shape
        weights = F.reshape(mask, (n, steps, 1))
        total = F.sum(F.multiply(x, weights), axis=1, keepdims=self.keepdims)
        count = F.sum(weights, axis=1, keepdims=self.keepdims)
        return F.divide(total, count)

    def compute_mask(self, inputs, mask):
        return None

    def output_masked(self, masked):
        return False


@register
class GlobalMaxPooling1D(_GlobalPooling1D):
    """(N, T, F) -> (N, F) (or (N, 1, F) with keepdims): the maximum over the steps."""

    def call(self, x, training=False):
        y = F.max_pool1d(x, x.shape[1])
        return y if self.keepdims else F.reshape(y, (x.shape[0], x.shape[2]))
