"""Elementwise arithmetic with NumPy broadcasting."""

from __future__ import annotations

from ._spec import op


@op
def add(a, b):
    """``a + b`` with NumPy broadcasting (either may be a Python scalar)."""


@op
def subtract(a, b):
    """``a - b`` with broadcasting."""


@op
def multiply(a, b):
    """``a * b`` with broadcasting."""


@op
def divide(a, b):
    """``a / b`` with broadcasting."""


@op
def negative(a):
    """``-a``."""


@op
def power(a, p):
    """``a ** p`` for a scalar exponent ``p``."""


@op
def sqrt(a):
    """Elementwise square root."""


@op
def log(a):
    """Elementwise natural logarithm (``-inf`` at 0, NaN below)."""


@op
def clip(a, low, high):
    """``min(max(a, low), high)`` for scalars ``low <= high``."""


@op
def isfinite_all(a):
    """Python ``bool``: every element of ``a`` is finite (one scalar read for a device backend)."""
