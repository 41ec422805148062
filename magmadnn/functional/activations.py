"""Activations (one op with a kind), softmax and log-softmax over any axis."""

from __future__ import annotations

from ..autograd import Function, Tensor
from ..backend import geometry
from ._base import _as_tensor, _check_axis, _same_dtype

__all__ = ["activation", "relu", "sigmoid", "tanh", "leaky_relu", "elu", "gelu", "silu", "swish", "softplus",
           "softsign", "selu", "hard_sigmoid", "exponential", "softmax", "log_softmax"]


class ActivationFunction(Function):
    def forward(self, x, kind, alpha=0.0):
        self.x, self.kind, self.alpha = x, kind, alpha
        self.y = self.xp.activation_forward(x, kind, alpha)
        return self.y

    def backward(self, g):
        return (self.xp.activation_backward(g, self.x, self.y, self.kind, self.alpha),)


def activation(x, kind, alpha=0.0) -> Tensor:
    """Apply activation ``kind``, a name of :data:`geometry.ACTIVATION_NAMES` (Keras 3's function of that name; "gelu"
    is exact, "gelu_tanh" the tanh approximation); ``alpha`` is the leaky-ReLU slope / ELU scale."""
    x = _as_tensor(x)
    kind = geometry.ACTIVATION_ALIASES.get(kind, kind)
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
    """Leaky ReLU with slope ``alpha`` (PyTorch's default 0.01; the activation name "leaky_relu" in a layer is
    Keras' 0.2)."""
    return activation(x, "leaky_relu", alpha)


def elu(x, alpha=1.0) -> Tensor:
    return activation(x, "elu", alpha)


def gelu(x, approximate=False) -> Tensor:
    """GELU: exact, ``x Phi(x)`` with the normal CDF through erf (Keras' and PyTorch's default), or with
    ``approximate=True`` (or PyTorch's "tanh") the tanh approximation, the activation name "gelu_tanh"."""
    if approximate in ("tanh", "none"):
        approximate = approximate == "tanh"
    if not isinstance(approximate, bool):
        raise ValueError(f"gelu: approximate must be True, False, 'tanh' or 'none', got {approximate!r}")
    return activation(x, "gelu_tanh" if approximate else "gelu")


def silu(x) -> Tensor:
    """``x sigmoid(x)`` (Keras' silu/swish, PyTorch's SiLU)."""
    return activation(x, "silu")


swish = silu


def softplus(x) -> Tensor:
    """``log(1 + exp(x))``, computed without overflow."""
    return activation(x, "softplus")


def softsign(x) -> Tensor:
    """``x / (1 + |x|)``."""
    return activation(x, "softsign")


def selu(x) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalising constants (alpha 1.67326..., scale 1.05070...)."""
    return activation(x, "selu")


def hard_sigmoid(x) -> Tensor:
    """``relu6(x + 3) / 6`` (Keras 3 and PyTorch's hardsigmoid)."""
    return activation(x, "hard_sigmoid")


def exponential(x) -> Tensor:
    """``exp(x)``."""
    return activation(x, "exponential")


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
