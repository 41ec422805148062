"""Conv2D, MaxPool2D, AvgPool2D and GlobalAvgPool2D (NCHW; per-sample input shape (C, H, W))."""

from __future__ import annotations

from .. import _checks, initializers
from .. import functional as F
from ..backend import geometry
from .base import Layer, register, shape_str
from .core import apply_activation

__all__ = ["Conv2D", "MaxPool2D", "AvgPool2D", "GlobalAvgPool2D"]


def _sizes(value, what: str, owner: str, minimum: int = 1) -> tuple[int, int]:
    """:func:`geometry.int_pair`, with every bad value a ValueError (as layers report bad sizes)."""
    try:
        return geometry.int_pair(value, what, owner, minimum)
    except TypeError as exc:  # layers report every bad size as a ValueError
        raise ValueError(str(exc)) from None


def _padding(value, owner: str):
    if isinstance(value, str):
        if value.lower() not in ("same", "valid"):
            raise ValueError(f"{owner}: padding must be 'same', 'valid', an int, a pair or ((top, bottom), "
                             f"(left, right)), got {value!r}")
        return value.lower()
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, (tuple, list)) for v in value):
        return _sizes(value[0], "padding", owner, minimum=0), _sizes(value[1], "padding", owner, minimum=0)
    return _sizes(value, "padding", owner, minimum=0)


def _padding_config(padding):
    """``padding`` as JSON: the mode, ``[ph, pw]`` or ``[[top, bottom], [left, right]]``."""
    if isinstance(padding, str):
        return padding
    return [list(p) if isinstance(p, tuple) else p for p in padding]


def _output_hw(layer, input_shape, kernel, stride, padding, dilation, what):
    """Spatial output size, or a ShapeMismatchError when the window does not fit the input."""
    out = F.conv2d_output_shape(input_shape[1:], kernel, stride, padding, dilation)
    if min(out) < 1:
        raise layer.shape_error(f"an input of at least the {what} extent {shape_str(kernel)} (dilation "
                                f"{shape_str(dilation)}, padding {padding!r}); the output would be {shape_str(out)}",
                                input_shape)
    return tuple(int(v) for v in out)


@register
class Conv2D(Layer):
    """2-D cross-correlation with ``filters`` kernels of ``kernel_size``; kernel (K, C, R, S), bias (K,)."""

    def __init__(self, filters: int, kernel_size, strides=1, padding="valid", dilation=1, activation=None,
                 use_bias: bool = True, kernel_initializer="he_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        owner = f"Conv2D {self.name!r}"
        self.filters = _checks.integer(filters, "filters", owner, minimum=1)
        self.kernel_size = _sizes(kernel_size, "kernel_size", owner)
        self.strides = _sizes(strides, "strides", owner)
        self.padding = _padding(padding, owner)
        self.dilation = _sizes(dilation, "dilation", owner)
        self.activation = geometry.activation_name(activation, owner)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (3,), "a per-sample input (C, H, W), i.e. batches (N, C, H, W)")

    def compute_output_shape(self, input_shape):
        hw = _output_hw(self, input_shape, self.kernel_size, self.strides, self.padding, self.dilation, "kernel")
        return (self.filters, *hw)

    def create_weights(self, input_shape):
        self.add_weight("kernel", (self.filters, input_shape[0], *self.kernel_size), self.kernel_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer)

    def call(self, x, training=False):
        fused = self.activation if self.activation in geometry.FUSED_ACTIVATIONS else None
        y = F.conv2d(x, self._params["kernel"], self._params.get("bias"), stride=self.strides, padding=self.padding,
                     dilation=self.dilation, activation=fused)
        return y if fused else apply_activation(y, self.activation)

    def get_config(self):
        return {"filters": self.filters, "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                "padding": _padding_config(self.padding),
                "dilation": list(self.dilation), "activation": self.activation, "use_bias": self.use_bias,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}


class _Pool2D(Layer):
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
        return (input_shape[0], *hw)

    def call(self, x, training=False):
        pool = F.max_pool2d if self.mode == "max" else F.avg_pool2d
        return pool(x, self.pool_size, stride=self.strides, padding=self.padding)

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
class GlobalAvgPool2D(Layer):
    """(N, C, H, W) -> (N, C): the mean over each channel's spatial extent."""

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (3,), "a per-sample input (C, H, W), i.e. batches (N, C, H, W)")

    def compute_output_shape(self, input_shape):
        return (input_shape[0],)

    def call(self, x, training=False):
        return F.global_avg_pool2d(x)
