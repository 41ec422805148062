"""Activations as layers: Activation (any name of ``ACTIVATION_NAMES``), LeakyReLU, and Softmax / LogSoftmax over
any non-batch axis (the ones ONNX's operators need); ``apply_activation`` is what Dense and the convolutions call."""

from __future__ import annotations

from .. import _checks
from .. import functional as F
from ..backend import geometry
from . import plans as _plans
from .base import Layer, register

__all__ = ["Activation", "LeakyReLU", "Softmax", "LogSoftmax", "apply_activation"]


_DEFAULT_ALPHA = geometry.DEFAULT_ALPHA


def apply_activation(x, kind, alpha=None, axis=None):
    """``kind`` applied to the Tensor ``x``; softmax runs over ``axis``, by default the channels of NCHW (axis 1)
    input and the last axis (features) of any other rank."""
    if kind is None:
        return x
    if kind == "softmax":
        return F.softmax(x, axis=(1 if x.ndim == 4 else -1) if axis is None else axis)
    return F.activation(x, kind, _DEFAULT_ALPHA.get(kind, 0.0) if alpha is None else alpha)


@register
class Activation(Layer):
    """An activation function as a layer, by a name of ``geometry.ACTIVATION_NAMES`` (Keras 3's function of that
    name: "gelu" exact, "gelu_tanh" the tanh approximation, "swish" = "silu"; softmax over the channels of NCHW
    input, the last axis of any other rank), on inputs of any rank. ``alpha``: the leaky-ReLU slope (default Keras'
    0.2) or ELU scale (1.0)."""

    supports_masking = True  # a mask (Embedding(mask_zero=True)) passes through, as in Keras

    def __init__(self, kind: str, alpha: float | None = None, **kwargs):
        super().__init__(**kwargs)
        if kind is None:
            raise ValueError(f"Activation {self.name!r}: kind must be one of {geometry.ACTIVATION_NAMES}")
        self.kind = geometry.activation_name(kind, f"Activation {self.name!r}")
        self.alpha = None if alpha is None else _checks.real(alpha, "alpha", f"Activation {self.name!r}")

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)

    def call(self, x, training=False):
        return apply_activation(x, self.kind, self.alpha)

    def _plan_call(self, x, training):
        kind = geometry.ACTIVATION_ALIASES.get(self.kind, self.kind)
        if kind not in geometry.ACTIVATIONS:  # linear (x itself) and softmax run in full
            return None
        alpha = float(_DEFAULT_ALPHA.get(kind, 0.0) if self.alpha is None else self.alpha)
        return _plans.op_plan(self, training, F.ActivationFunction.apply, (), {"kind": kind, "alpha": alpha})

    def get_config(self):
        return {"kind": self.kind or "linear", "alpha": self.alpha, **super().get_config()}


@register
class LeakyReLU(Activation):
    """Keras' ``LeakyReLU(negative_slope=0.3)``: ``x`` where positive, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.3, **kwargs):
        if "alpha" in kwargs:  # Keras 2's name
            negative_slope = kwargs.pop("alpha")
        kwargs.pop("kind", None)  # a config written by Activation.get_config
        super().__init__("leaky_relu", alpha=negative_slope, **kwargs)
        self.negative_slope = self.alpha

    def get_config(self):
        config = super().get_config()
        del config["kind"], config["alpha"]
        return {"negative_slope": self.negative_slope, **config}


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
