"""Differentiable functions of the op set's ``math`` and ``indexing`` topics (what ONNX's operators need beyond the
layers' ops): elementwise functions (trigonometric, rounding, erf), maximum/minimum, comparisons and logic, where,
pow and remainder, gathers (take, take_along_axis), reductions by max/min/prod, cumulative sums, tiling,
broadcasting and dtype conversions; each differentiable one with its backward. The ONNX op nodes use them (as
``T``); they are not F's public face.

Everything runs through the backend op set (``x.xp``): no array namespace, no host round trip on the device.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function, Tensor
from ..backend.ops.math import MATH_FUNCTIONS

__all__ = ["unary", "erf", "maximum", "minimum", "compare", "logical", "logical_not", "where", "take",
           "take_along_axis", "reduce", "cumsum", "tile", "broadcast_to", "astype", "pow", "remainder"]


class UnaryFunction(Function):
    def forward(self, x, kind):
        self.x, self.kind = x, kind
        self.y = self.xp.math_forward(x, kind)
        return self.y

    def backward(self, g):
        return self.xp.math_backward(g, self.x, self.y, self.kind)


def unary(x: Tensor, kind: str) -> Tensor:
    """``kind`` (one of the op set's ``MATH_FUNCTIONS``: the array API's elementwise functions, or "erf") of ``x``,
    differentiable (zero gradient for the rounding functions and sign)."""
    if kind not in MATH_FUNCTIONS:
        raise ValueError(f"unary: unknown function {kind!r}; expected one of {sorted(MATH_FUNCTIONS)}")
    if x.dtype.kind != "f":
        return _plain(x, x.xp.math_forward(x.data, kind))
    return UnaryFunction.apply(x, kind=kind)


def erf(x: Tensor) -> Tensor:
    return unary(x, "erf")


def _plain(like: Tensor, data) -> Tensor:
    """A result no gradient flows through (integer or bool arithmetic, comparisons)."""
    return Tensor._of(data, like.xp)


def _data(x):
    return x.data if isinstance(x, Tensor) else x


def _sum_to(xp, g, shape):
    return g if tuple(g.shape) == tuple(shape) else xp.sum_to_shape(g, tuple(shape))


def _zero(xp, g):
    return xp.zeros_like(g)


class _ChooseFunction(Function):
    """maximum/minimum: the gradient goes to the chosen operand (the first on ties, as PyTorch)."""

    def forward(self, a, b, kind):
        xp = self.xp
        self.sa, self.sb = a.shape, b.shape
        self.first = xp.compare(a, b, "greater_equal" if kind == "maximum" else "less_equal")
        return getattr(xp, kind)(a, b)

    def backward(self, g):
        xp, zero = self.xp, _zero(self.xp, g)
        na, nb = self.needs_input_grad
        return (_sum_to(xp, xp.where(self.first, g, zero), self.sa) if na else None,
                _sum_to(xp, xp.where(self.first, zero, g), self.sb) if nb else None)


def _pair(a, b):
    """Two operands as Tensors of one backend and dtype (a host NumPy constant joins the Tensor's backend)."""
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    if like is None:
        raise TypeError("expected at least one Tensor")
    xp = like.xp
    a = a if isinstance(a, Tensor) else Tensor._of(xp.asarray(np.asarray(a, like.dtype)), xp)
    b = b if isinstance(b, Tensor) else Tensor._of(xp.asarray(np.asarray(b, like.dtype)), xp)
    return a, b


def maximum(a, b) -> Tensor:
    a, b = _pair(a, b)
    if a.dtype.kind != "f":
        return _plain(a, a.xp.maximum(a.data, b.data))
    return _ChooseFunction.apply(a, b, kind="maximum")


def minimum(a, b) -> Tensor:
    a, b = _pair(a, b)
    if a.dtype.kind != "f":
        return _plain(a, a.xp.minimum(a.data, b.data))
    return _ChooseFunction.apply(a, b, kind="minimum")


def compare(a, b, kind: str) -> Tensor:
    """A bool Tensor: ``kind`` in equal, not_equal, less, less_equal, greater, greater_equal (no gradient)."""
    a, b = _pair(a, b)
    return _plain(a, a.xp.compare(a.data, b.data, kind))


def logical(a, b, kind: str) -> Tensor:
    """logical_and / logical_or / logical_xor of bool Tensors (also bitwise_and/or/xor of integers)."""
    a, b = _pair(a, b)
    return _plain(a, a.xp.logical(a.data, b.data, kind))


def logical_not(a: Tensor) -> Tensor:
    return _plain(a, a.xp.logical_not(a.data))


class WhereFunction(Function):
    def forward(self, a, b, condition):
        self.c, self.sa, self.sb = condition, a.shape, b.shape
        return self.xp.where(condition, a, b)

    def backward(self, g):
        xp, zero = self.xp, _zero(self.xp, g)
        na, nb = self.needs_input_grad
        return (_sum_to(xp, xp.where(self.c, g, zero), self.sa) if na else None,
                _sum_to(xp, xp.where(self.c, zero, g), self.sb) if nb else None)


def where(condition, a, b) -> Tensor:
    """``a`` where ``condition`` (bool) holds, else ``b`` (broadcast), differentiable in ``a`` and ``b``."""
    a, b = _pair(a, b)
    cond = _data(condition)
    if not isinstance(condition, Tensor):
        cond = a.xp.asarray(np.asarray(cond, bool))
    if a.dtype.kind != "f":
        return _plain(a, a.xp.where(cond, a.data, b.data))
    return WhereFunction.apply(a, b, condition=cond)


def _indices(x: Tensor, indices):
    """Integer indices on ``x``'s backend (a host array is uploaded once per call)."""
    idx = _data(indices)
    return idx if isinstance(indices, Tensor) else x.xp.asarray(np.asarray(idx, np.int64))


class TakeFunction(Function):
    """Gather along one axis with any integer index array (ONNX's Gather)."""

    def forward(self, x, indices, axis):
        self.idx, self.axis, self.size = indices, axis, x.shape[axis]
        return self.xp.take(x, indices, axis)

    def backward(self, g):
        return self.xp.take_backward(g, self.idx, self.axis, self.size)


def take(x, indices, axis: int = 0) -> Tensor:
    """``x`` gathered along ``axis`` at ``indices`` (any shape, negatives from the end): ONNX's Gather."""
    idx, axis = _indices(x, indices), axis % x.ndim
    if x.dtype.kind != "f":
        return _plain(x, x.xp.take(x.data, idx, axis))
    return TakeFunction.apply(x, indices=idx, axis=axis)


class TakeAlongFunction(Function):
    """ONNX's GatherElements."""

    def forward(self, x, indices, axis):
        self.idx, self.axis, self.size = indices, axis, x.shape[axis]
        return self.xp.take_along_axis(x, indices, axis)

    def backward(self, g):
        return self.xp.take_along_axis_backward(g, self.idx, self.axis, self.size)


def take_along_axis(x, indices, axis: int) -> Tensor:
    """ONNX's GatherElements (negative indices from the end), differentiable in ``x``."""
    idx, axis = _indices(x, indices), axis % x.ndim
    if x.dtype.kind != "f":
        return _plain(x, x.xp.take_along_axis(x.data, idx, axis))
    return TakeAlongFunction.apply(x, indices=idx, axis=axis)


class ReduceFunction(Function):
    """max / min / prod over ``axes``; the gradient of max/min is shared by the elements equal to the extreme."""

    def forward(self, x, kind, axes, keepdims):
        xp = self.xp
        self.x, self.kind, self.axes = x, kind, axes
        self.kept = xp.reduce_by(x, kind, axes, True)
        return self.kept if keepdims else xp.reshape(self.kept, tuple(
            d for i, d in enumerate(x.shape) if i not in axes))

    def backward(self, g):
        xp, x, kept = self.xp, self.x, self.kept
        g = xp.reshape(g, kept.shape)
        if self.kind == "prod":
            return xp.divide(xp.multiply(g, kept), x)
        hit = xp.astype(xp.compare(x, kept, "equal"), x.dtype)
        return xp.divide(xp.multiply(g, hit), xp.sum(hit, self.axes, True))


def reduce(x: Tensor, kind: str, axes, keepdims: bool) -> Tensor:
    """``kind`` in max, min, prod over ``axes`` (a tuple; None: all)."""
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    if x.dtype.kind != "f":
        kept = x.xp.reduce_by(x.data, kind, axes, keepdims)
        return _plain(x, kept)
    return ReduceFunction.apply(x, kind=kind, axes=axes, keepdims=keepdims)


class CumsumFunction(Function):
    def forward(self, x, axis, exclusive, reverse):
        self.args = (axis, exclusive, reverse)
        return self.xp.cumsum(x, axis, exclusive, reverse)

    def backward(self, g):
        axis, exclusive, reverse = self.args
        return self.xp.cumsum(g, axis, exclusive, not reverse)


def cumsum(x: Tensor, axis: int, exclusive: bool = False, reverse: bool = False) -> Tensor:
    axis = axis % x.ndim
    if x.dtype.kind != "f":
        return _plain(x, x.xp.cumsum(x.data, axis, bool(exclusive), bool(reverse)))
    return CumsumFunction.apply(x, axis=axis, exclusive=bool(exclusive), reverse=bool(reverse))


class TileFunction(Function):
    def forward(self, x, repeats):
        self.shape, self.repeats = x.shape, repeats
        return self.xp.tile(x, repeats)

    def backward(self, g):
        xp, shape, repeats = self.xp, self.shape, self.repeats
        g = xp.reshape(g, tuple(v for r, d in zip(repeats, shape) for v in (r, d)))
        return xp.sum(g, tuple(range(0, 2 * len(shape), 2)), False)


def tile(x: Tensor, repeats) -> Tensor:
    repeats = tuple(int(r) for r in repeats)
    if x.dtype.kind != "f":
        return _plain(x, x.xp.tile(x.data, repeats))
    return TileFunction.apply(x, repeats=repeats)


class BroadcastFunction(Function):
    def forward(self, x, shape):
        self.shape = x.shape
        return self.xp.broadcast_to(x, shape)

    def backward(self, g):
        return _sum_to(self.xp, g, self.shape)


def broadcast_to(x: Tensor, shape) -> Tensor:
    """``x`` broadcast to ``shape`` (ONNX's Expand takes the broadcast of both shapes)."""
    shape = tuple(int(s) for s in np.broadcast_shapes(tuple(x.shape), tuple(int(s) for s in shape)))
    if shape == tuple(x.shape):
        return x
    if x.dtype.kind != "f":
        return _plain(x, x.xp.broadcast_to(x.data, shape))
    return BroadcastFunction.apply(x, shape=shape)


def astype(x: Tensor, dtype) -> Tensor:
    """``x`` converted to ``dtype``: a float to float conversion keeps the gradient, any other none."""
    from .operators import cast  # noqa: PLC0415

    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.dtype.kind == "f" and dtype.kind == "f":
        return cast(x, dtype)
    return _plain(x, x.xp.astype(x.data, dtype))


class PowFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        self.y = self.xp.pow(a, b)
        return self.y

    def backward(self, g):
        xp, a, b, y = self.xp, self.a, self.b, self.y
        na, nb = self.needs_input_grad
        ga = _sum_to(xp, xp.multiply(xp.multiply(g, b), xp.pow(a, xp.subtract(b, 1))), a.shape) if na else None
        if nb:
            positive = xp.where(xp.compare(a, 0, "greater"), a, xp.add(xp.zeros_like(a), 1))
            gb = _sum_to(xp, xp.multiply(xp.multiply(g, y), xp.log(positive)), b.shape)
        return ga, gb if nb else None


def pow(a, b) -> Tensor:  # noqa: A001 - ONNX's name
    a, b = _pair(a, b)
    if a.dtype.kind != "f":
        return _plain(a, a.xp.pow(a.data, b.data))
    return PowFunction.apply(a, b)


class RemainderFunction(Function):
    """Python's (floored) remainder, a - floor(a / b) * b: the gradient 1 for a, -floor(a / b) for b."""

    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.remainder(a, b)

    def backward(self, g):
        xp, a, b = self.xp, self.a, self.b
        na, nb = self.needs_input_grad
        floor = xp.math_forward(xp.divide(a, b), "floor")
        return (_sum_to(xp, g, a.shape) if na else None,
                _sum_to(xp, xp.negative(xp.multiply(g, floor)), b.shape) if nb else None)


def remainder(a, b) -> Tensor:
    """The floored remainder of float Tensors (ONNX's Mod with fmod=0), differentiable."""
    a, b = _pair(a, b)
    if a.dtype.kind != "f":
        return _plain(a, a.xp.remainder(a.data, b.data))
    return RemainderFunction.apply(a, b)
