"""Host element-wise math (``ops/math.py``): NumPy's functions; erf float64-accurate (``backend/_erf.py``)."""

from __future__ import annotations

import math as _m

import numpy as np

from .. import _erf
from ..ops.math import COMPARISONS, LOGIC, MATH_FUNCTIONS, REDUCTIONS

_TWO_OVER_SQRT_PI = 2.0 / _m.sqrt(_m.pi)
_ROUNDING = ("floor", "ceil", "round", "sign", "trunc")
#: kind -> d kind(x) / dx from x and y = kind(x)
_DERIVATIVES = {
    "sin": lambda x, y: np.cos(x), "cos": lambda x, y: -np.sin(x), "tan": lambda x, y: 1 + y * y,
    "asin": lambda x, y: 1 / np.sqrt(1 - x * x), "acos": lambda x, y: -1 / np.sqrt(1 - x * x),
    "atan": lambda x, y: 1 / (1 + x * x), "sinh": lambda x, y: np.cosh(x), "cosh": lambda x, y: np.sinh(x),
    "asinh": lambda x, y: 1 / np.sqrt(x * x + 1), "acosh": lambda x, y: 1 / np.sqrt(x * x - 1),
    "atanh": lambda x, y: 1 / (1 - x * x), "exp": lambda x, y: y, "log": lambda x, y: 1 / x,
    "sqrt": lambda x, y: 0.5 / y, "reciprocal": lambda x, y: -(y * y), "abs": lambda x, y: np.sign(x),
    "tanh": lambda x, y: 1 - y * y, "erf": lambda x, y: _TWO_OVER_SQRT_PI * np.exp(-(x * x)),
    "negative": lambda x, y: -np.ones_like(x),
}


def _kind(kind, known, op):
    if kind not in known:
        raise ValueError(f"{op}: unknown kind {kind!r}; expected one of {known}")


def math_forward(a, kind):
    _kind(kind, MATH_FUNCTIONS, "math_forward")
    if kind == "erf":
        return _erf.erf(a) if a.dtype.kind == "f" else _erf.erf(a.astype(np.float64))
    if kind in ("asin", "acos", "atan", "asinh", "acosh", "atanh"):
        return getattr(np, "arc" + kind[1:])(a)
    return getattr(np, kind)(a)


def math_backward(dy, x, y, kind):
    _kind(kind, MATH_FUNCTIONS, "math_backward")
    if kind in _ROUNDING:
        return np.zeros_like(dy)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (dy * _DERIVATIVES[kind](x, y)).astype(dy.dtype, copy=False)


def maximum(a, b):
    return np.maximum(a, b)


def minimum(a, b):
    return np.minimum(a, b)


def compare(a, b, kind):
    _kind(kind, COMPARISONS, "compare")
    return getattr(np, kind)(a, b)


def logical(a, b, kind):
    _kind(kind, LOGIC, "logical")
    return getattr(np, kind)(a, b)


def logical_not(a):
    return np.logical_not(a)


def where(condition, a, b):
    return np.where(condition, a, b)


def pow(a, b):  # noqa: A001 - the array API's name
    return np.power(a, b)


def remainder(a, b):
    return np.remainder(a, b)


def astype(a, dtype):
    return np.asarray(a).astype(dtype)


def reduce_by(a, kind, axes, keepdims):
    _kind(kind, REDUCTIONS, "reduce_by")
    return np.asarray(getattr(np, {"max": "amax", "min": "amin", "prod": "prod"}[kind])(
        a, axis=tuple(axes), keepdims=bool(keepdims)))
