"""Host elementwise arithmetic: NumPy's ufuncs, broadcasting as NumPy does."""

from __future__ import annotations

import numpy as np


def add(a, b):
    return np.add(a, b)


def subtract(a, b):
    return np.subtract(a, b)


def multiply(a, b):
    return np.multiply(a, b)


def divide(a, b):
    return np.divide(a, b)


def negative(a):
    return np.negative(a)


def power(a, p):
    return np.power(a, p)


def sqrt(a):
    return np.sqrt(a)


def log(a):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(a)


def clip(a, low, high):
    return np.clip(a, low, high)


def isfinite_all(a) -> bool:
    """True when every element of ``a`` is finite."""
    return bool(np.isfinite(a).all())
