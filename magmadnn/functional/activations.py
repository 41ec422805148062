"""Activations (one op with a kind), softmax and log-softmax over any axis."""

from __future__ import annotations

from ..autograd import Function, Tensor
from ..backend import geometry
from ._base import _as_tensor, _check_axis, _same_dtype

__all__ = ["activation", "relu", "sigmoid", "tanh", "leaky_relu", "elu", "gelu", "softmax", "log_softmax"]


class ActivationFunction(Function):
    def forward(self, x, kind, alpha=0.0):
        self.x, self.kind, self.alpha = x, kind, alpha
        self.y = self.xp.activation_forward(x, kind, alpha)
        return self.y

    def backward(self, g):
        return (self.xp.activation_backward(g, self.x, self.y, self.kind, self.alpha),)


def activation(x, kind, alpha=0.0) -> Tensor:
    """Apply activation ``kind``: sigmoid, tanh, relu, leaky_relu, elu, gelu (tanh approx.), softmax or linear."""
    x = _as_tensor(x)
    if kind is None or kind == "linear":
        return x
    if kind == "softmax":
        return softmax(x)
    if kind not in geometry.ACTIVATIONS:
        raise ValueError(f"activation: unknown kind {kind!r}; expected one of {geometry.ACTIVATION_NAMES}")
    _same_dtype("activation", x=x)
    return ActivationFunction.apply(x, kind=kind, alpha=float(alpha))


def relu(x) -> Tensor:
    return activation(x, "relu")


def sigmoid(x) -> Tensor:
    return activation(x, "sigmoid")


def tanh(x) -> Tensor:
    return activation(x, "tanh")


def leaky_relu(x, alpha=0.01) -> Tensor:
    return activation(x, "leaky_relu", alpha)


def elu(x, alpha=1.0) -> Tensor:
    return activation(x, "elu", alpha)


def gelu(x) -> Tensor:
    """GELU, tanh approximation."""
    return activation(x, "gelu")


class SoftmaxFunction(Function):
    def forward(self, x, axis=-1):
        self.axis = axis
        self.y = self.xp.softmax(x, axis=axis)
        return self.y

    def backward(self, g):
        return (self.xp.softmax_backward(g, self.y, axis=self.axis),)


class LogSoftmaxFunction(Function):
    def forward(self, x, axis=-1):
        self.axis = axis
        self.y = self.xp.log_softmax(x, axis=axis)
        return self.y

    def backward(self, g):
        return (self.xp.log_softmax_backward(g, self.y, axis=self.axis),)


def softmax(x, axis=-1) -> Tensor:
    x = _as_tensor(x)
    _check_axis("softmax", x, axis)
    return SoftmaxFunction.apply(x, axis=axis)


def log_softmax(x, axis=-1) -> Tensor:
    x = _as_tensor(x)
    _check_axis("log_softmax", x, axis)
    return LogSoftmaxFunction.apply(x, axis=axis)
