"""Device elementwise arithmetic: pymagma's broadcasting kernels."""

from __future__ import annotations

import numpy as np

from pymagma import kernels as _k
from pymagma.array import DeviceArray as _DeviceArray
from pymagma.kernels.elementwise import planned_binary

from ._common import (
    _binary,
    _is_scalar,
)


# Two DeviceArrays of one dtype object on one device whose layouts were seen before: launched in the op's one frame
# (pymagma's planned_binary). Two other DeviceArrays of one dtype object (every op's own outputs, gradients summed
# by the tape): straight to the kernel, which checks them in full; anything else (scalars, host arrays, mixed dtypes)
# through _binary first.
def _add(a, b):
    if a.__class__ is _DeviceArray and b.__class__ is _DeviceArray and a.dtype is b.dtype:
        return _k.binary("add", a, b)
    return _binary("add", a, b)


def _subtract(a, b):
    if a.__class__ is _DeviceArray and b.__class__ is _DeviceArray and a.dtype is b.dtype:
        return _k.binary("subtract", a, b)
    return _binary("subtract", a, b)


def _multiply(a, b):
    if a.__class__ is _DeviceArray and b.__class__ is _DeviceArray and a.dtype is b.dtype:
        return _k.binary("multiply", a, b)
    return _binary("multiply", a, b)


def _divide(a, b):
    if a.__class__ is _DeviceArray and b.__class__ is _DeviceArray and a.dtype is b.dtype:
        return _k.binary("divide", a, b)
    return _binary("divide", a, b)


_add.__name__, _subtract.__name__, _multiply.__name__, _divide.__name__ = "add", "subtract", "multiply", "divide"
add = planned_binary("add", _add)
subtract = planned_binary("subtract", _subtract)
multiply = planned_binary("multiply", _multiply)
divide = planned_binary("divide", _divide)


def negative(a):
    return _k.negative(a)


def power(a, p):
    if not _is_scalar(p):
        raise TypeError(f"power: the exponent must be a scalar, got {type(p).__name__}")
    return _k.unary("power", a, float(p))


def sqrt(a):
    return _k.sqrt(a)


def log(a):
    return _k.log(a)


def clip(a, low, high):
    return _k.clip(a, float(low), float(high))


def isfinite_all(a) -> bool:
    """True when every element of ``a`` is finite: 0 * x is NaN exactly at the non-finite x, their sum is NaN when
    any is; one scalar comes back to the host."""
    if a.size == 0 or a.dtype.name not in _k.FLOAT_DTYPES:
        return True
    probe = _k.reduce("sum", _k.affine(a, 0.0, 0.0))
    return bool(np.isfinite(probe.get()))
