"""Conv1D, MaxPooling1D, AveragePooling1D, GlobalAveragePooling1D, GlobalMaxPooling1D over sequences (N, T, F)
(Keras' channels_last, like Embedding, LSTM and attention here).

They run through the 2-D paths (cuDNN's on the device) on (N, F, 1, T). Conv1D's kernel is (filters,
in/groups, kernel_size) (PyTorch's Conv1d, and Conv2D's layout here); Keras' (kernel_size, in/groups, filters)
converts with ``kernel.transpose(2, 1, 0)`` both ways.
"""

from __future__ import annotations

from .. import _checks, initializers
from .. import functional as F
from ..backend import geometry
from .base import Layer, register
from .core import apply_activation

__all__ = ["Conv1D", "MaxPooling1D", "AveragePooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling1D"]

_SEQUENCE = "a per-sample sequence (time, features), i.e. batches (N, time, features)"


def _positive(value, what: str, owner: str) -> int:
    """A size given as an int or a 1-tuple (Keras accepts both)."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    return _checks.integer(value, what, owner, minimum=1)


def _mode(value, allowed: tuple[str, ...], owner: str) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise ValueError(f"{owner}: padding must be one of {allowed}, got {value!r}")
    return value.lower()


def _data_format(value, owner: str) -> None:
    if value not in (None, "channels_last"):
        raise ValueError(f"{owner}: only data_format='channels_last' (sequences (N, time, features)) is supported, "
                         f"got {value!r}; transpose (N, features, time) input with Permute((2, 1)) first")


def _steps_out(steps: int, window: int, stride: int, padding: str, dilation: int = 1) -> int:
    if padding in ("same", "causal"):
        return -(-steps // stride) if padding == "same" else (steps - 1) // stride + 1
    return (steps - dilation * (window - 1) - 1) // stride + 1


def _check_sequence(layer, input_shape) -> None:
    layer.check_rank(input_shape, (2,), _SEQUENCE)
    if min(input_shape) < 1:
        raise layer.shape_error(f"{_SEQUENCE} with sizes >= 1", input_shape)


@register
class Conv1D(Layer):
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
        if self.compute_output_shape(input_shape)[0] < 1:
            raise self.shape_error(f"at least {self.dilation_rate * (self.kernel_size - 1) + 1} steps for kernel_size "
                                   f"{self.kernel_size} with dilation_rate {self.dilation_rate} and padding "
                                   f"{self.padding!r}", input_shape)

    def compute_output_shape(self, input_shape):
        steps = _steps_out(input_shape[0], self.kernel_size, self.strides, self.padding, self.dilation_rate)
        return (steps, self.filters)

    def create_weights(self, input_shape):
        self.add_weight("kernel", (self.filters, input_shape[1] // self.groups, self.kernel_size),
                        self.kernel_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer)

    def call(self, x, training=False):
        fused = self.activation if self.activation in geometry.FUSED_ACTIVATIONS else None
        y = F.conv1d(x, self._params["kernel"], self._params.get("bias"), stride=self.strides, padding=self.padding,
                     dilation=self.dilation_rate, groups=self.groups, activation=fused)
        return y if fused else apply_activation(y, self.activation)

    def get_config(self):
        return {"filters": self.filters, "kernel_size": self.kernel_size, "strides": self.strides,
                "padding": self.padding, "dilation_rate": self.dilation_rate, "groups": self.groups,
                "activation": self.activation, "use_bias": self.use_bias,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}


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
        if self.compute_output_shape(input_shape)[0] < 1:
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
