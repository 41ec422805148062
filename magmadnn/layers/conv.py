"""Conv2D, DepthwiseConv2D, Conv2DTranspose, MaxPool2D, AvgPool2D, GlobalAvgPool2D and GlobalMaxPool2D (NCHW;
per-sample input shape (C, H, W)).

Images are NCHW (cuDNN's and PyTorch's layout), never channels-last. An input that looks channels-last (last axis 1
or 3, first axis more than 4) is named in every shape error of these layers with the transpose that fixes it, and
when it comes straight from the data or an ``Input`` without an error (the window still fits), a warning says so.
"""

from __future__ import annotations

import warnings

from .. import _checks, initializers
from .. import functional as F
from ..backend import geometry
from .base import Layer, register, shape_str
from .core import apply_activation

__all__ = ["Conv2D", "DepthwiseConv2D", "Conv2DTranspose", "MaxPool2D", "AvgPool2D", "GlobalAvgPool2D",
           "GlobalMaxPool2D"]


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


def looks_channels_last(shape) -> bool:
    """A per-sample image shape that reads as (H, W, C) with 1 or 3 channels rather than (C, H, W)."""
    return (isinstance(shape, tuple) and len(shape) == 3 and shape[-1] in (1, 3) and shape[0] > 4)


def layout_hint(shape) -> str:
    """The sentence that names the NCHW layout and the transpose, for a ``shape`` that looks channels-last."""
    h, w, c = shape
    return (f". Images here are NCHW, per-sample (C, H, W); {shape_str(shape)} looks channels-last (H, W, C) as "
            f"in Keras: transpose the batches with x.transpose(0, 3, 1, 2) (giving per-sample ({c}, {h}, {w})) and "
            f"declare Input(({c}, {h}, {w}))")


class _NCHW:
    """Mixin: shape errors that name the NCHW layout when the input looks channels-last, and a warning when such
    an input comes from the data or an Input and builds without an error."""

    def shape_error(self, expected, got):
        error = super().shape_error(expected, got)
        if looks_channels_last(got):
            error.args = (error.args[0] + layout_hint(got),)
        return error

    def _warn_layout(self, input_shape) -> None:
        source = getattr(self, "_source", "")
        if looks_channels_last(input_shape) and (source == "the data" or source.endswith("(Input)")):
            warnings.warn(f"{type(self).__name__} layer {self.name!r} reads per-sample shape "
                          f"{shape_str(input_shape)} from {source} as {input_shape[0]} channels of "
                          f"{input_shape[1]}x{input_shape[2]} images" + layout_hint(input_shape), stacklevel=4)


def _check_chw(layer, input_shape) -> None:
    """A per-sample (C, H, W) input with no empty axis (a zero-size axis has nothing to convolve or pool)."""
    layer.check_rank(input_shape, (3,), "a per-sample input (C, H, W), i.e. batches (N, C, H, W)")
    if min(input_shape) < 1:
        raise layer.shape_error("a per-sample input (C, H, W) with sizes >= 1", input_shape)


@register
class Conv2D(_NCHW, Layer):
    """2-D cross-correlation with ``filters`` kernels of ``kernel_size``; kernel (K, C/groups, R, S), bias (K,).

    ``groups``: the input channels and the filters split into that many groups, each group of filters seeing only
    its group of channels (PyTorch's ``groups``); C and K must be multiples of it."""

    def __init__(self, filters: int, kernel_size, strides=1, padding="valid", dilation=1, activation=None,
                 use_bias: bool = True, kernel_initializer="glorot_uniform", bias_initializer="zeros", groups: int = 1,
                 **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        self.filters = _checks.integer(filters, "filters", owner, minimum=1)
        self.groups = _checks.integer(groups, "groups", owner, minimum=1)
        if self.filters % self.groups:
            raise ValueError(f"{owner}: filters ({self.filters}) must be a multiple of groups ({self.groups})")
        self.kernel_size = _sizes(kernel_size, "kernel_size", owner)
        self.strides = _sizes(strides, "strides", owner)
        self.padding = _padding(padding, owner)
        self.dilation = _sizes(dilation, "dilation", owner)
        self.activation = geometry.activation_name(activation, owner)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    kernel_name = "kernel"

    def check_input_shape(self, input_shape):
        _check_chw(self, input_shape)
        if input_shape[0] % self.groups:
            raise self.shape_error(f"a number of input channels divisible by groups={self.groups}", input_shape)

    def compute_output_shape(self, input_shape):
        hw = _output_hw(self, input_shape, self.kernel_size, self.strides, self.padding, self.dilation, "kernel")
        self._warn_layout(input_shape)
        return (self.filters, *hw)

    def create_weights(self, input_shape):
        kernel = (self.filters, input_shape[0] // self.groups, *self.kernel_size)
        self.add_weight(self.kernel_name, kernel, self.kernel_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer)

    def call(self, x, training=False):
        fused = self.activation if self.activation in geometry.FUSED_ACTIVATIONS else None
        y = F.conv2d(x, self._params[self.kernel_name], self._params.get("bias"), stride=self.strides,
                     padding=self.padding, dilation=self.dilation, groups=self.groups, activation=fused)
        return y if fused else apply_activation(y, self.activation)

    def get_config(self):
        config = {"filters": self.filters, "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                  "padding": _padding_config(self.padding),
                  "dilation": list(self.dilation), "activation": self.activation, "use_bias": self.use_bias,
                  "kernel_initializer": self.kernel_initializer.to_config(),
                  "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}
        if self.groups != 1:
            config["groups"] = self.groups
        return config


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


@register
class DepthwiseConv2D(Conv2D):
    """A convolution of each input channel with its own ``depth_multiplier`` kernels (``Conv2D`` with groups = C):
    depthwise_kernel (C * depth_multiplier, 1, R, S) (PyTorch's layout), bias (C * depth_multiplier,); output
    channel ``c * depth_multiplier + m`` is input channel c's m-th kernel."""

    kernel_name = "depthwise_kernel"

    def __init__(self, kernel_size, depth_multiplier: int = 1, strides=1, padding="valid", dilation=1,
                 activation=None, use_bias: bool = True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_initializer=None, **kwargs):
        # kernel_initializer: this package's earlier name of Keras' depthwise_initializer
        super().__init__(1, kernel_size, strides=strides, padding=padding, dilation=dilation, activation=activation,
                         use_bias=use_bias,
                         kernel_initializer=depthwise_initializer if kernel_initializer is None else kernel_initializer,
                         bias_initializer=bias_initializer, **kwargs)
        self.depth_multiplier = _checks.integer(depth_multiplier, "depth_multiplier", f"DepthwiseConv2D {self.name!r}",
                                                minimum=1)
        self.filters = self.depth_multiplier

    def check_input_shape(self, input_shape):
        _check_chw(self, input_shape)
        # groups and filters follow the input's channels
        self.groups, self.filters = input_shape[0], input_shape[0] * self.depth_multiplier

    def create_weights(self, input_shape):
        # drawn as (m, C, R, S): the initializer sees the fans of Keras' (R, S, C, m) kernel (fan_in = C*R*S)
        draw = (self.depth_multiplier, input_shape[0], *self.kernel_size)
        self.add_weight(self.kernel_name, (self.filters, 1, *self.kernel_size),
                        initializers.in_keras_layout(self.kernel_initializer, draw, (1, 0, 2, 3)))
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer)

    @property
    def depthwise_initializer(self):
        return self.kernel_initializer

    def get_config(self):
        config = super().get_config()
        for key in ("filters", "groups"):
            config.pop(key, None)
        config["depthwise_initializer"] = config.pop("kernel_initializer")
        return {"depth_multiplier": self.depth_multiplier, **config}


@register
class Conv2DTranspose(_NCHW, Layer):
    """Transposed convolution (the gradient of a convolution with respect to its input), upsampling by ``strides``:
    kernel (C_in, filters, R, S) (PyTorch's ConvTranspose2d layout), bias (filters,).

    ``padding``: "valid", "same" (output = input * strides, as Keras) or an int / pair (PyTorch's ``padding``: the
    output is ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + 1 + output_padding``); ``output_padding``
    (smaller than the stride) adds rows and columns at the bottom/right.
    """

    def __init__(self, filters: int, kernel_size, strides=1, padding="valid", output_padding=0, dilation=1,
                 activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 **kwargs):
        super().__init__(**kwargs)
        owner = f"Conv2DTranspose {self.name!r}"
        self.filters = _checks.integer(filters, "filters", owner, minimum=1)
        self.kernel_size = _sizes(kernel_size, "kernel_size", owner)
        self.strides = _sizes(strides, "strides", owner)
        self.padding = _padding(padding, owner)
        self.output_padding = _sizes(output_padding, "output_padding", owner, minimum=0)
        self.dilation = _sizes(dilation, "dilation", owner)
        if any(e >= s for e, s in zip(self.output_padding, self.strides)):
            raise ValueError(f"{owner}: output_padding must be smaller than strides {self.strides}, got "
                             f"{self.output_padding}")
        if self.padding == "same" and any(self.output_padding):
            raise ValueError(f"{owner}: output_padding must be 0 with padding 'same' (the output is input * strides)")
        self.activation = geometry.activation_name(activation, owner)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def check_input_shape(self, input_shape):
        _check_chw(self, input_shape)

    def compute_output_shape(self, input_shape):
        _, out = F.conv_transpose2d_geometry(input_shape[1:], self.kernel_size, self.strides, self.padding,
                                             self.output_padding, self.dilation)
        if min(out) < 1:
            raise self.shape_error(f"an input whose output is not empty (kernel {shape_str(self.kernel_size)}, "
                                   f"padding {self.padding!r}); the output would be {shape_str(out)}", input_shape)
        return (self.filters, *out)

    def create_weights(self, input_shape):
        self.add_weight("kernel", (input_shape[0], self.filters, *self.kernel_size), self.kernel_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer)

    def call(self, x, training=False):
        y = F.conv_transpose2d(x, self._params["kernel"], self._params.get("bias"), stride=self.strides,
                               padding=self.padding, output_padding=self.output_padding, dilation=self.dilation)
        return apply_activation(y, self.activation)

    def get_config(self):
        return {"filters": self.filters, "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                "padding": _padding_config(self.padding),
                "output_padding": list(self.output_padding), "dilation": list(self.dilation),
                "activation": self.activation, "use_bias": self.use_bias,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}


@register
class GlobalMaxPool2D(_NCHW, Layer):
    """(N, C, H, W) -> (N, C): the maximum over each channel's spatial extent."""

    def check_input_shape(self, input_shape):
        _check_chw(self, input_shape)

    def compute_output_shape(self, input_shape):
        return (input_shape[0],)

    def call(self, x, training=False):
        return F.global_max_pool2d(x)
