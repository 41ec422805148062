"""Elementwise functions with scalar constants that stay kernel arguments (nothing is uploaded per call, so a step
using them can be captured as a graph): ``log``, ``clip``, ``abs``, ``scale`` (``a * x + b``); ``maximum`` and
``minimum`` of two tensors of one shape (exact: each element is one of its operands); ``TrailingAddFunction``, the
sum that layers' call plans run for a residual connection or a table added to every sample."""

from __future__ import annotations

import numbers

from ..autograd import Function, Tensor
from ._base import _as_tensor

__all__ = ["log", "clip", "abs", "scale", "maximum", "minimum"]


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


class MaximumFunction(Function):
    """``max(a, b)`` as ``a - [b > a] a + [b > a] b`` (each element exactly one operand); the gradient goes to
    ``b`` where ``b > a``, else to ``a`` (ties to ``a``)."""

    def forward(self, a, b):
        xp = self.xp
        self.gap = xp.subtract(b, a)
        return xp.add(xp.subtract(a, _relu_mask(xp, a, self.gap)), _relu_mask(xp, b, self.gap))

    def backward(self, g):
        to_b = _relu_mask(self.xp, g, self.gap)
        return self.xp.subtract(g, to_b), to_b


class TrailingAddFunction(Function):
    """``a + b`` for ``b`` of ``a``'s shape or of its trailing axes (a residual connection; a position table added to
    every sample): :class:`~.operators.AddFunction` with the reduction of b's gradient decided by a layer's call plan
    (:func:`trailing_lead`): ``lead`` the leading axes of ``a`` that b lacks, summed away (None: one shape, each
    input's gradient the output's). The same ops and bits as ``AddFunction``'s ``sum_to_shape``."""

    def forward(self, a, b, lead=None):
        self.lead = lead
        return self.xp.add(a, b)

    def backward(self, g):
        na, nb = self.needs_input_grad
        lead = self.lead
        return g if na else None, None if not nb else g if lead is None else self.xp.sum(g, axis=lead)


def trailing_lead(a_shape, b_shape):
    """``TrailingAddFunction``'s ``lead`` for operands of these shapes: None for one shape, the tuple of a's leading
    axes where ``b_shape`` is a's trailing axes, False where neither (``AddFunction`` then)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if a_shape == b_shape:
        return None
    lead = len(a_shape) - len(b_shape)
    if lead <= 0 or not b_shape or a_shape[lead:] != b_shape:
        return False
    return tuple(range(lead))


def _pair(a, b, fn: str):
    a, b = _as_tensor(a), _as_tensor(b)
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        raise ValueError(f"{fn}: the operands must have one shape and dtype, got {tuple(a.shape)} {a.dtype} and "
                         f"{tuple(b.shape)} {b.dtype}")
    return a, b


def maximum(a, b) -> Tensor:
    """Elementwise maximum of two tensors of one shape and dtype."""
    return MaximumFunction.apply(*_pair(a, b, "maximum"))


def minimum(a, b) -> Tensor:
    """Elementwise minimum of two tensors of one shape and dtype (``-maximum(-a, -b)``, exact)."""
    a, b = _pair(a, b, "minimum")
    return -MaximumFunction.apply(-a, -b)


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
