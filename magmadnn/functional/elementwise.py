"""Elementwise functions with scalar constants that stay kernel arguments (nothing is uploaded per call, so a step
using them can be captured as a graph): ``log``, ``clip``, ``abs``, ``scale`` (``a * x + b``)."""

from __future__ import annotations

import numbers

from ..autograd import Function, Tensor
from ._base import _as_tensor

__all__ = ["log", "clip", "abs", "scale"]


def _relu_mask(xp, g, x):
    """``g`` where ``x > 0``, else 0 (relu's gradient)."""
    return xp.activation_backward(g, x, None, "relu")


class LogFunction(Function):
    def forward(self, a):
        self.a = a
        return self.xp.log(a)

    def backward(self, g):
        return (self.xp.divide(g, self.a),)


class ClipFunction(Function):
    def forward(self, a, low, high):
        self.a, self.low, self.high = a, low, high
        return self.xp.clip(a, low, high)

    def backward(self, g):  # the gradient passes where low <= a <= high (PyTorch's clamp)
        xp = self.xp
        below = _relu_mask(xp, g, xp.subtract(self.low, self.a))  # g where a < low
        above = _relu_mask(xp, g, xp.subtract(self.a, self.high))  # g where a > high
        return (xp.subtract(xp.subtract(g, below), above),)


class AbsFunction(Function):
    def forward(self, a):
        self.a = a
        xp = self.xp
        return xp.add(xp.activation_forward(a, "relu"), xp.activation_forward(xp.negative(a), "relu"))

    def backward(self, g):  # sign(a) g, 0 at 0
        xp = self.xp
        return (xp.subtract(_relu_mask(xp, g, self.a), _relu_mask(xp, g, xp.negative(self.a))),)


class ScaleFunction(Function):
    def forward(self, a, factor, shift):
        self.factor = factor
        scaled = self.xp.multiply(a, factor)
        return self.xp.add(scaled, shift) if shift else scaled

    def backward(self, g):
        return (self.xp.multiply(g, self.factor),)


def _real(value, name: str, fn: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {value!r}")
    return float(value)


def log(x) -> Tensor:
    """Natural logarithm (``-inf`` at 0)."""
    return LogFunction.apply(_as_tensor(x))


def clip(x, low, high) -> Tensor:
    """``min(max(x, low), high)``; the gradient passes where ``low <= x <= high``."""
    low, high = _real(low, "low", "clip"), _real(high, "high", "clip")
    if low > high:
        raise ValueError(f"clip: low must be <= high, got low={low}, high={high}")
    return ClipFunction.apply(_as_tensor(x), low=low, high=high)


def abs(x) -> Tensor:  # noqa: A001
    """``|x|`` (gradient ``sign(x)``, 0 at 0)."""
    return AbsFunction.apply(_as_tensor(x))


def scale(x, factor, shift=0.0) -> Tensor:
    """``factor * x + shift`` for Python numbers (they stay kernel arguments: nothing is uploaded)."""
    return ScaleFunction.apply(_as_tensor(x), factor=_real(factor, "factor", "scale"),
                               shift=_real(shift, "shift", "scale"))
