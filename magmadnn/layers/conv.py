"""Convolutions: Conv2D, DepthwiseConv2D, SeparableConv2D and Conv2DTranspose over images (NCHW; per-sample input
shape (C, H, W)), and Conv1D over sequences (N, T, F).

Images are NCHW (cuDNN's and PyTorch's layout), never channels-last. An input that looks channels-last (last axis 1
or 3, first axis more than 4) is named in every shape error of these layers with the transpose that fixes it, and
when it comes straight from the data or an ``Input`` without an error (the window still fits), a warning says so.

Sequences are Keras' channels_last (like Embedding, LSTM and attention here). Conv1D runs through the 2-D path
(cuDNN's on the device) on (N, F, 1, T); its kernel is (filters, in/groups, kernel_size) (PyTorch's Conv1d, and
Conv2D's layout here); Keras' (kernel_size, in/groups, filters) converts with ``kernel.transpose(2, 1, 0)`` both
ways.

The pooling layers lived here; they are in :mod:`.pooling` and stay importable from here.
"""

from __future__ import annotations

from .. import _checks, initializers
from .. import functional as F
from ..backend import geometry
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
    layout_hint,
    looks_channels_last,
)
from .activations import apply_activation
from .base import Layer, register, shape_str
from .pooling import AvgPool2D, GlobalAvgPool2D, GlobalMaxPool2D, MaxPool2D

__all__ = ["Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Conv2DTranspose", "Conv1D"]
__all__ += ["MaxPool2D", "AvgPool2D", "GlobalAvgPool2D", "GlobalMaxPool2D"]  # their old home; see .pooling
__all__ += ["layout_hint", "looks_channels_last"]  # the NCHW hint (models.inputs names it for the data)


def _dilation(dilation, dilation_rate, owner: str):
    """Keras' ``dilation_rate=`` is this package's ``dilation=``: either may be given, not two different values."""
    if dilation_rate is None:
        return dilation
    if _sizes(dilation, "dilation", owner) != (1, 1) and _sizes(dilation, "dilation", owner) != _sizes(
            dilation_rate, "dilation_rate", owner):
        raise ValueError(f"{owner}: dilation={dilation!r} and dilation_rate={dilation_rate!r} (Keras' name of the "
                         "same argument) differ; give one")
    return dilation_rate


@register
class Conv2D(_NCHW, Layer):
    """2-D cross-correlation with ``filters`` kernels of ``kernel_size``; kernel (K, C/groups, R, S), bias (K,).

    ``groups``: the input channels and the filters split into that many groups, each group of filters seeing only
    its group of channels (PyTorch's ``groups``); C and K must be multiples of it."""

    def __init__(self, filters: int, kernel_size, strides=1, padding="valid", dilation=1, activation=None,
                 use_bias: bool = True, kernel_initializer="glorot_uniform", bias_initializer="zeros", groups: int = 1,
                 dilation_rate=None, **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        dilation = _dilation(dilation, dilation_rate, owner)
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
    _weight_options = ("kernel", "bias")  # kernel_regularizer=, bias_constraint=, ... (magmadnn.regularizers)

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
        self.add_weight(self.kernel_name, kernel, self.kernel_initializer,
                        **self._weight_kwargs(self._weight_options[0]))
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, **self._weight_kwargs("bias"))

    def call(self, x, training=False):
        fused = self.activation if self.activation in geometry.FUSED_ACTIVATIONS else None
        y = F.conv2d(x, self._params[self.kernel_name], self._params.get("bias"), stride=self.strides,
                     padding=self.padding, dilation=self.dilation, groups=self.groups, activation=fused)
        return y if fused or self.activation is None else apply_activation(y, self.activation)

    def _plan_call(self, x, training):
        p, kind = self._params, self.activation
        fused = kind if kind in geometry.FUSED_ACTIVATIONS else None
        bias = p.get("bias")
        names = (self.kernel_name,) if bias is None else (self.kernel_name, "bias")
        params = F.conv2d_arguments(x, p[self.kernel_name], bias, stride=self.strides, padding=self.padding,
                                    dilation=self.dilation, groups=self.groups, activation=fused)
        after = None if fused or kind is None else (lambda y: apply_activation(y, kind))
        return _plans.op_plan(self, training, F.Conv2dFunction.apply, names, params, after)

    def get_config(self):
        config = {"filters": self.filters, "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                  "padding": _padding_config(self.padding),
                  "dilation": list(self.dilation), "activation": self.activation, "use_bias": self.use_bias,
                  "kernel_initializer": self.kernel_initializer.to_config(),
                  "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}
        if self.groups != 1:
            config["groups"] = self.groups
        return config


@register
class DepthwiseConv2D(Conv2D):
    """A convolution of each input channel with its own ``depth_multiplier`` kernels (``Conv2D`` with groups = C):
    depthwise_kernel (C * depth_multiplier, 1, R, S) (PyTorch's layout), bias (C * depth_multiplier,); output
    channel ``c * depth_multiplier + m`` is input channel c's m-th kernel."""

    kernel_name = "depthwise_kernel"
    _weight_options = ("depthwise", "bias")  # Keras' depthwise_regularizer=, depthwise_constraint=, bias_...

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
                        initializers.in_keras_layout(self.kernel_initializer, draw, (1, 0, 2, 3)),
                        **self._weight_kwargs("depthwise"))
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, **self._weight_kwargs("bias"))

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
class SeparableConv2D(DepthwiseConv2D):
    """Keras' depthwise separable convolution: a DepthwiseConv2D (``depth_multiplier`` kernels per channel, with the
    strides, padding and dilation; no bias) then a 1x1 convolution to ``filters`` channels with the bias and the
    activation. Weights: depthwise_kernel (C * depth_multiplier, 1, R, S), pointwise_kernel (filters,
    C * depth_multiplier, 1, 1) (PyTorch's layouts), bias (filters,)."""

    _weight_options = ("depthwise", "pointwise", "bias")  # Keras' depthwise_/pointwise_/bias_ regularizer=, ...

    def __init__(self, filters: int, kernel_size, strides=1, padding="valid", dilation=1, depth_multiplier: int = 1,
                 activation=None, use_bias: bool = True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(kernel_size, depth_multiplier, strides=strides, padding=padding, dilation=dilation,
                         activation=activation, use_bias=use_bias, depthwise_initializer=depthwise_initializer,
                         bias_initializer=bias_initializer, **kwargs)
        self.filters = _checks.integer(filters, "filters", f"SeparableConv2D {self.name!r}", minimum=1)
        self.pointwise_initializer = initializers.get(pointwise_initializer)

    def check_input_shape(self, input_shape):
        _check_chw(self, input_shape)
        self.groups = input_shape[0]

    def create_weights(self, input_shape):
        depth = input_shape[0] * self.depth_multiplier
        draw = (self.depth_multiplier, input_shape[0], *self.kernel_size)
        self.add_weight(self.kernel_name, (depth, 1, *self.kernel_size),
                        initializers.in_keras_layout(self.kernel_initializer, draw, (1, 0, 2, 3)),
                        **self._weight_kwargs("depthwise"))
        self.add_weight("pointwise_kernel", (self.filters, depth, 1, 1), self.pointwise_initializer,
                        **self._weight_kwargs("pointwise"))
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, **self._weight_kwargs("bias"))

    def call(self, x, training=False):
        p = self._params
        y = F.conv2d(x, p[self.kernel_name], None, stride=self.strides, padding=self.padding, dilation=self.dilation,
                     groups=self.groups)
        fused = self.activation if self.activation in geometry.FUSED_ACTIVATIONS else None
        y = F.conv2d(y, p["pointwise_kernel"], p.get("bias"), activation=fused)
        return y if fused or self.activation is None else apply_activation(y, self.activation)

    def get_config(self):
        return {"filters": self.filters, **super().get_config(),
                "pointwise_initializer": self.pointwise_initializer.to_config()}


@register
class Conv2DTranspose(_NCHW, Layer):
    _weight_options = ("kernel", "bias")
    """Transposed convolution (the gradient of a convolution with respect to its input), upsampling by ``strides``:
    kernel (C_in, filters, R, S) (PyTorch's ConvTranspose2d layout), bias (filters,).

    ``padding``: "valid", "same" (output = input * strides, as Keras) or an int / pair (PyTorch's ``padding``: the
    output is ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + 1 + output_padding``); ``output_padding``
    (smaller than the stride) adds rows and columns at the bottom/right.
    """

    def __init__(self, filters: int, kernel_size, strides=1, padding="valid", output_padding=0, dilation=1,
                 activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 dilation_rate=None, **kwargs):
        super().__init__(**kwargs)
        owner = f"Conv2DTranspose {self.name!r}"
        dilation = _dilation(dilation, dilation_rate, owner)
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
        self.add_weight("kernel", (input_shape[0], self.filters, *self.kernel_size), self.kernel_initializer,
                        **self._weight_kwargs("kernel"))
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, **self._weight_kwargs("bias"))

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
class Conv1D(Layer):
    _weight_options = ("kernel", "bias")
    """1-D convolution over the steps of (N, T, F) -> (N, T', filters); kernel (filters, F/groups, kernel_size),
    bias (filters,). ``padding``: "valid", "same" (T' = ceil(T / strides)) or "causal" (output step t sees input
    steps <= t)."""

    def __init__(self, filters: int, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1,
                 groups: int = 1, activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        owner = f"Conv1D {self.name!r}"
        _data_format(data_format, owner)
        self.filters = _checks.integer(filters, "filters", owner, minimum=1)
        self.kernel_size = _positive(kernel_size, "kernel_size", owner)
        self.strides = _positive(strides, "strides", owner)
        self.dilation_rate = _positive(dilation_rate, "dilation_rate", owner)
        if self.strides > 1 and self.dilation_rate > 1:
            raise ValueError(f"{owner}: strides > 1 and dilation_rate > 1 cannot be combined (as in Keras)")
        self.groups = _checks.integer(groups, "groups", owner, minimum=1)
        if self.filters % self.groups:
            raise ValueError(f"{owner}: filters ({self.filters}) must be a multiple of groups ({self.groups})")
        self.padding = _mode(padding, ("valid", "same", "causal"), owner)
        self.activation = geometry.activation_name(activation, owner)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def check_input_shape(self, input_shape):
        _check_sequence(self, input_shape)
        if input_shape[1] % self.groups:
            raise self.shape_error(f"a number of features divisible by groups={self.groups}", input_shape)
        if (self.compute_output_shape(input_shape)[0] or 0) < 1 and input_shape[0] is not None:
            raise self.shape_error(f"at least {self.dilation_rate * (self.kernel_size - 1) + 1} steps for kernel_size "
                                   f"{self.kernel_size} with dilation_rate {self.dilation_rate} and padding "
                                   f"{self.padding!r}", input_shape)

    def compute_output_shape(self, input_shape):
        steps = _steps_out(input_shape[0], self.kernel_size, self.strides, self.padding, self.dilation_rate)
        return (steps, self.filters)

    def create_weights(self, input_shape):
        self.add_weight("kernel", (self.filters, input_shape[1] // self.groups, self.kernel_size),
                        self.kernel_initializer, **self._weight_kwargs("kernel"))
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, **self._weight_kwargs("bias"))

    def call(self, x, training=False):
        fused = self.activation if self.activation in geometry.FUSED_ACTIVATIONS else None
        y = F.conv1d(x, self._params["kernel"], self._params.get("bias"), stride=self.strides, padding=self.padding,
                     dilation=self.dilation_rate, groups=self.groups, activation=fused)
        return y if fused or self.activation is None else apply_activation(y, self.activation)

    def get_config(self):
        return {"filters": self.filters, "kernel_size": self.kernel_size, "strides": self.strides,
                "padding": self.padding, "dilation_rate": self.dilation_rate, "groups": self.groups,
                "activation": self.activation, "use_bias": self.use_bias,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}
