"""What Tensor's operators and methods call: elementwise arithmetic with NumPy broadcasting, matmul, sum and
mean, reshape, flatten, transpose and cast (a dtype conversion)."""

from __future__ import annotations

import functools
import math
import numbers
import sys

import numpy as np

from .. import autograd
from .._checks import Plans
from ..autograd import Function, Tensor
from ._base import _as_tensor, _check_axis, _pair_of

__all__ = ["add", "subtract", "multiply", "divide", "negative", "power", "matmul", "sum", "mean", "reshape",
           "transpose", "flatten", "cast"]


class AddFunction(Function):
    def forward(self, a, b):
        self.shapes = (a.shape, b.shape)
        return self.xp.add(a, b)

    def backward(self, g):
        xp, (sa, sb), (na, nb) = self.xp, self.shapes, self.needs_input_grad
        return (xp.sum_to_shape(g, sa) if na else None, xp.sum_to_shape(g, sb) if nb else None)


class SubtractFunction(Function):
    def forward(self, a, b):
        self.shapes = (a.shape, b.shape)
        return self.xp.subtract(a, b)

    def backward(self, g):
        xp, (sa, sb), (na, nb) = self.xp, self.shapes, self.needs_input_grad
        return (xp.sum_to_shape(g, sa) if na else None, xp.negative(xp.sum_to_shape(g, sb)) if nb else None)


class MultiplyFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.multiply(a, b)

    def backward(self, g):
        xp, a, b, (na, nb) = self.xp, self.a, self.b, self.needs_input_grad
        return (
            xp.sum_to_shape(xp.multiply(g, b), a.shape) if na else None,
            xp.sum_to_shape(xp.multiply(g, a), b.shape) if nb else None,
        )


class DivideFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.divide(a, b)

    def backward(self, g):
        xp, a, b, (na, nb) = self.xp, self.a, self.b, self.needs_input_grad
        ga = xp.divide(g, b)
        gb = xp.negative(xp.multiply(ga, xp.divide(a, b))) if nb else None
        return (xp.sum_to_shape(ga, a.shape) if na else None, xp.sum_to_shape(gb, b.shape) if nb else None)


@functools.lru_cache(maxsize=1024)
def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether shapes ``a`` and ``b`` broadcast together (answered once per pair of shapes)."""
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _check_broadcast(fn: str, a: Tensor, b: Tensor) -> None:
    if not _broadcasts(a.shape, b.shape):
        raise ValueError(f"{fn}: shapes {a.shape} and {b.shape} do not broadcast together")


def _binary(cls, name):
    def op(a, b) -> Tensor:
        if a.__class__ is not Tensor or b.__class__ is not Tensor:  # (two Tensors need no call)
            a, b = _pair_of(a, b)
        if not _broadcasts(tuple(a.data.shape), tuple(b.data.shape)):
            _check_broadcast(name, a, b)
        return cls.apply(a, b)

    op.__name__ = name
    op.__doc__ = f"Elementwise {name} with NumPy broadcasting (Tensors, arrays and scalars mix)."
    return op


add = _binary(AddFunction, "add")


subtract = _binary(SubtractFunction, "subtract")


multiply = _binary(MultiplyFunction, "multiply")


divide = _binary(DivideFunction, "divide")


class NegativeFunction(Function):
    def forward(self, a):
        return self.xp.negative(a)

    def backward(self, g):
        return (self.xp.negative(g),)


def negative(x) -> Tensor:
    return NegativeFunction.apply(_as_tensor(x))


class PowerFunction(Function):
    def forward(self, a, p):
        self.a, self.p = a, p
        return self.xp.power(a, p)

    def backward(self, g):
        xp = self.xp
        return (xp.multiply(g, xp.multiply(self.xp.power(self.a, self.p - 1), self.p)),)


def power(x, p) -> Tensor:
    """x ** p for a constant scalar exponent p."""
    if not isinstance(p, numbers.Real):
        raise TypeError(f"power: the exponent must be a Python number, got {type(p).__name__}")
    return PowerFunction.apply(_as_tensor(x), p=p)


class MatMulFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.matmul(a, b)

    def backward(self, g):
        xp, a, b, (na, nb) = self.xp, self.a, self.b, self.needs_input_grad
        ga = xp.sum_to_shape(xp.matmul(g, b, transpose_b=True), a.shape) if na else None
        gb = xp.sum_to_shape(xp.matmul(a, g, transpose_a=True), b.shape) if nb else None
        return ga, gb


def matmul(a, b) -> Tensor:
    """a @ b for 2-D or stacked (..., m, k) @ (..., k, n) operands."""
    a, b = _pair_of(a, b)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: both operands must be at least 2-D, got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"matmul: inner dimensions differ: a has shape {a.shape} (k={a.shape[-1]}), "
            f"b has shape {b.shape} (k={b.shape[-2]})"
        )
    if not _broadcasts(a.shape[:-2], b.shape[:-2]):
        raise ValueError(f"matmul: batch dimensions of shapes {a.shape} and {b.shape} do not broadcast")
    return MatMulFunction.apply(a, b)


def _expand(xp, g, shape, axis, keepdims, divisor=1):
    """Broadcast the gradient of a reduction back to the input ``shape`` (a real array, not a view), divided by
    ``divisor`` (the mean's count): one op, ``broadcast_divide``."""
    if not keepdims:
        try:  # (answered once per shape and axis)
            kept = _kept_shape(tuple(shape), axis)
        except TypeError:  # an unhashable axis (a list)
            kept = _kept_shape.__wrapped__(tuple(shape), axis)
        g = xp.reshape(g, kept)
    return xp.broadcast_divide(g, shape, divisor)


@functools.lru_cache(maxsize=1024, typed=True)
def _kept_shape(shape: tuple, axis) -> tuple:
    """``shape`` with the reduced ``axis`` (None: all; an int or a sequence) kept as size 1."""
    ndim = len(shape)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(a % ndim for a in ((axis,) if isinstance(axis, numbers.Integral) else axis))
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


class SumFunction(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.shape, self.axis, self.keepdims = a.shape, axis, keepdims
        return self.xp.asarray(self.xp.sum(a, axis=axis, keepdims=keepdims))

    def backward(self, g):
        return (_expand(self.xp, g, self.shape, self.axis, self.keepdims),)


class MeanFunction(Function):
    """The mean over ``axis``, planned per input signature (backend, array class, shape, dtype, axis, keepdims): a
    repeated call skips what the first decided (the result's ``asarray`` where the backend keeps such results as
    they are, the count, the gradient's kept shape)."""

    def forward(self, a, axis=None, keepdims=False):
        xp = self.xp
        self.shape = a.shape
        try:
            key = (xp, a.__class__, a.shape, a.dtype, axis.__class__, axis, keepdims.__class__, keepdims)
            plan = _MEAN_PLANS.get(key)
        except TypeError:  # an unhashable axis (a list) or backend: every call decides
            key = plan = None
        if plan is not None:
            own, self.kept, self.count = plan
            out = xp.mean(a, axis=axis, keepdims=keepdims)
            return out if out.__class__ is own else xp.asarray(out)
        mean = xp.mean(a, axis=axis, keepdims=keepdims)
        out = xp.asarray(mean)
        self.count = max(1, math.prod(a.shape) // max(1, math.prod(out.shape)))
        self.kept = None if keepdims else _kept_shape.__wrapped__(tuple(a.shape), axis)
        if key is not None:
            _MEAN_PLANS.keep(key, (mean.__class__ if out is mean else None, self.kept, self.count))
        return out

    def backward(self, g):
        xp = self.xp
        if self.kept is not None:
            g = xp.reshape(g, self.kept)
        return (xp.broadcast_divide(g, self.shape, self.count),)


_MEAN_PLANS = Plans()


def sum(x, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    x = _as_tensor(x)
    _check_axis("sum", x, axis)
    return SumFunction.apply(x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False) -> Tensor:
    x = _as_tensor(x)
    _check_axis("mean", x, axis)
    return MeanFunction.apply(x, axis=axis, keepdims=keepdims)


class ReshapeFunction(Function):
    def forward(self, a, shape):
        self.shape = a.shape
        return self.xp.reshape(a, shape)

    def backward(self, g):
        return (self.xp.reshape(g, self.shape),)


def reshape(x, shape) -> Tensor:
    if x.__class__ is not Tensor:
        x = _as_tensor(x)
    if shape.__class__ is not tuple or not set(map(type, shape)) <= _INT:  # (a tuple of ints is one already)
        shape = tuple(int(s) for s in shape)
    if not _reshapes(tuple(x.data.shape), shape):
        raise ValueError(f"reshape: cannot reshape a tensor of shape {x.shape} into shape {shape}")
    return ReshapeFunction.apply(x, shape=shape)


_INT = {int}


@functools.lru_cache(maxsize=1024)
def _reshapes(old: tuple[int, ...], new: tuple[int, ...]) -> bool:
    """Whether NumPy reshapes ``old`` into ``new`` (-1 included; answered once per pair of shapes, no data)."""
    try:
        np.empty(old, dtype=np.uint8).reshape(new)
    except ValueError:
        return False
    return True


def flatten(x) -> Tensor:
    """(N, ...) -> (N, prod(...)): keeps the batch dimension."""
    x = _as_tensor(x)
    if x.ndim < 1:
        raise ValueError(f"flatten: expected a tensor with a batch dimension, got shape {x.shape}")
    return reshape(x, (x.shape[0], -1))


class TransposeFunction(Function):
    def forward(self, a, axes=None):
        self.axes = axes
        return self.xp.transpose(a, axes)

    def backward(self, g):
        inverse = None if self.axes is None else tuple(int(i) for i in np.argsort(self.axes))
        return (self.xp.transpose(g, inverse),)


def transpose(x, axes=None) -> Tensor:
    x = _as_tensor(x)
    if axes is not None and sorted(int(a) % max(x.ndim, 1) for a in axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {x.ndim} axes of shape {x.shape}")
    return TransposeFunction.apply(x, axes=None if axes is None else tuple(int(a) for a in axes))


class CastFunction(Function):
    def forward(self, a, dtype):
        self.dtype = a.dtype
        return self.xp.asarray(a, dtype)

    def backward(self, g):
        return (self.xp.asarray(g, self.dtype),)


def cast(x, dtype) -> Tensor:
    """``x`` converted to the float ``dtype`` (rounded to nearest even); the gradient is cast back to ``x``'s dtype
    (how a float32 weight feeds a half computation: :mod:`magmadnn.mixed_precision`). Same dtype: ``x`` itself."""
    x = _as_tensor(x)
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if dtype.kind != "f" and dtype.name != "bfloat16":
        raise TypeError(f"cast: expected a float dtype, got {dtype}")
    return CastFunction.apply(x, dtype=dtype)


autograd.UPPER["operators"] = sys.modules[__name__]  # Tensor.__add__, sum, reshape, ... run this module's functions
