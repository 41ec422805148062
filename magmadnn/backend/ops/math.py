"""Element-wise math beyond the deep-learning ops (what ONNX's operators need): the array API's functions by name
(trigonometric, hyperbolic, rounding) and erf with their derivatives, maximum/minimum, comparisons and logic,
``where``, ``pow``, the floored remainder, dtype conversion, and reductions by max, min or product.

Broadcasting as NumPy's; two array operands share a dtype (integers and bool too: these ops are not float-only).
"""

from __future__ import annotations

from ._spec import op

#: the functions of :func:`math_forward`; the last five are piecewise constant (:func:`math_backward` gives zeros)
MATH_FUNCTIONS = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp", "log",
                  "sqrt", "reciprocal", "abs", "tanh", "erf", "negative", "floor", "ceil", "round", "sign", "trunc")
#: the kinds of :func:`compare`, :func:`logical` and :func:`reduce_by`
COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
LOGIC = ("logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor")
REDUCTIONS = ("max", "min", "prod")


@op
def math_forward(a, kind):
    """``kind`` (one of :data:`MATH_FUNCTIONS`, the array API's function of that name; "erf" the error function)
    of ``a`` elementwise; on integers the array API's integer result (abs, negative, sign, the rounding kinds)."""


@op
def math_backward(dy, x, y, kind):
    """``dy * d kind(x) / dx`` for a float ``x`` and ``y = math_forward(x, kind)`` (zeros for floor, ceil, round,
    sign, trunc; abs takes sign(x))."""


@op
def maximum(a, b):
    """The larger of ``a`` and ``b`` elementwise (NaN propagates)."""


@op
def minimum(a, b):
    """The smaller of ``a`` and ``b`` elementwise (NaN propagates)."""


@op
def compare(a, b, kind):
    """A bool array: ``kind`` (one of :data:`COMPARISONS`) of ``a`` and ``b`` elementwise."""


@op
def logical(a, b, kind):
    """``kind`` (one of :data:`LOGIC`) of bool arrays (the bitwise kinds: integer arrays) elementwise."""


@op
def logical_not(a):
    """``not a`` of a bool array elementwise."""


@op
def where(condition, a, b):
    """``a`` where the bool ``condition`` holds, else ``b``; the three broadcast together."""


@op
def pow(a, b):  # noqa: A001 - the array API's name
    """``a ** b`` elementwise for arrays ``a`` and ``b`` of one dtype (:func:`power` takes a scalar exponent)."""


@op
def remainder(a, b):
    """The floored remainder ``a - floor(a / b) * b`` (Python's ``%``: the sign of ``b``)."""


@op
def astype(a, dtype):
    """``a`` converted to ``dtype`` (a new array; float to integer truncates toward zero, to bool is ``!= 0``)."""


@op
def reduce_by(a, kind, axes, keepdims):
    """The max, min or product (``kind`` in :data:`REDUCTIONS`) of ``a`` over ``axes`` (a tuple of axes)."""
