"""Device element-wise math (``ops/math.py``): pymagma's array API kernels. erf has no array API kernel: it comes
from the exact GELU kernel (CUDA's erf), erf(z) = 2 gelu(sqrt(2) z) / (sqrt(2) z) - 1, and near 0 (|z| < 0.05, where
that quotient would cancel) from erf's Taylor series to z**11 (truncation below 1e-19 relative)."""

from __future__ import annotations

import math as _m

from pymagma import array_api as _A
from pymagma import kernels as _k

from ..ops.math import COMPARISONS, LOGIC, MATH_FUNCTIONS, REDUCTIONS

_TWO_OVER_SQRT_PI = 2.0 / _m.sqrt(_m.pi)
_ROUNDING = ("floor", "ceil", "round", "sign", "trunc")
_SQRT2 = _m.sqrt(2.0)
#: erf(z) = 2 / sqrt(pi) * sum_n (-1)^n z^(2n+1) / (n! (2n+1)), n = 0..5
_ERF_TAYLOR = tuple((-1) ** n / (_m.factorial(n) * (2 * n + 1)) for n in range(6))
_ERF_NEAR_ZERO = 0.05
#: kind -> d kind(x) / dx from x and y = kind(x)
_DERIVATIVES = {
    "sin": lambda x, y: _A.cos(x), "cos": lambda x, y: -_A.sin(x), "tan": lambda x, y: 1.0 + y * y,
    "asin": lambda x, y: 1.0 / _A.sqrt(1.0 - x * x), "acos": lambda x, y: -1.0 / _A.sqrt(1.0 - x * x),
    "atan": lambda x, y: 1.0 / (1.0 + x * x), "sinh": lambda x, y: _A.cosh(x), "cosh": lambda x, y: _A.sinh(x),
    "asinh": lambda x, y: 1.0 / _A.sqrt(x * x + 1.0), "acosh": lambda x, y: 1.0 / _A.sqrt(x * x - 1.0),
    "atanh": lambda x, y: 1.0 / (1.0 - x * x), "exp": lambda x, y: y, "log": lambda x, y: 1.0 / x,
    "sqrt": lambda x, y: 0.5 / y, "reciprocal": lambda x, y: -(y * y), "abs": lambda x, y: _A.sign(x),
    "tanh": lambda x, y: 1.0 - y * y, "erf": lambda x, y: _TWO_OVER_SQRT_PI * _A.exp(-(x * x)),
    "negative": lambda x, y: -_A.ones_like(x),
}


def _kind(kind, known, op):
    if kind not in known:
        raise ValueError(f"{op}: unknown kind {kind!r}; expected one of {known}")


def _erf(x):
    near = _A.abs(x) < _ERF_NEAR_ZERO
    t = _A.where(near, _A.ones_like(x), x * _SQRT2)  # no 0 / 0 where the series is taken
    far = 2.0 * _k.unary("gelu", t) / t - 1.0
    z2, series = x * x, _ERF_TAYLOR[-1]
    for c in reversed(_ERF_TAYLOR[:-1]):
        series = c + z2 * series
    return _A.where(near, _TWO_OVER_SQRT_PI * x * series, far)


def math_forward(a, kind):
    _kind(kind, MATH_FUNCTIONS, "math_forward")
    if kind == "erf":
        return _erf(a if a.dtype.kind == "f" else _A.astype(a, "float64"))
    return getattr(_A, kind)(a)


def math_backward(dy, x, y, kind):
    _kind(kind, MATH_FUNCTIONS, "math_backward")
    if kind in _ROUNDING:
        return _A.zeros_like(dy)
    return dy * _DERIVATIVES[kind](x, y)


def maximum(a, b):
    return _A.maximum(a, b)


def minimum(a, b):
    return _A.minimum(a, b)


def compare(a, b, kind):
    _kind(kind, COMPARISONS, "compare")
    return getattr(_A, kind)(a, b)


def logical(a, b, kind):
    _kind(kind, LOGIC, "logical")
    return getattr(_A, kind)(a, b)


def logical_not(a):
    return _A.logical_not(a)


def where(condition, a, b):
    return _A.where(condition, a, b)


def pow(a, b):  # noqa: A001 - the array API's name
    return _A.pow(a, b)


def remainder(a, b):
    return _A.remainder(a, b)


def astype(a, dtype):
    return _A.astype(a, dtype, copy=True)


def reduce_by(a, kind, axes, keepdims):
    _kind(kind, REDUCTIONS, "reduce_by")
    return getattr(_A, kind)(a, axis=tuple(axes), keepdims=bool(keepdims))
