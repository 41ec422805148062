"""Tensor math the ONNX operators need beyond the layers' ops: elementwise functions (trigonometric, rounding, erf),
maximum/minimum, comparisons and logic, where, gather (take), reductions by max/min/prod, cumulative sums, tiling,
broadcasting and dtype conversions; each differentiable one with its backward.

They compute through the array API namespace of the backend's arrays (NumPy's on the host, pymagma's on the device,
whose kernels run every function here without a host copy): ``_ns(array)`` below is the one place that reaches it.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Function, Tensor

__all__ = ["unary", "erf", "maximum", "minimum", "compare", "logical", "logical_not", "where", "take",
           "take_along_axis", "reduce", "cumsum", "tile", "broadcast_to", "astype", "pow", "remainder", "sign_free"]


def _ns(a):
    return a.__array_namespace__()


def _erf(ns, x):
    """erf by the complementary error function's Chebyshev fit (Numerical Recipes' erfcc, relative error < 1.2e-7),
    written with exp only so it runs on every namespace."""
    z = ns.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    r = 1.0 - t * ns.exp(poly)
    return ns.where(x >= 0, r, -r)


_FORWARD = {"erf": _erf}
#: kind -> d(kind)(x)/dx from x and y (None: the derivative is zero almost everywhere)
_DERIVATIVES = {
    "sin": lambda ns, x, y: ns.cos(x), "cos": lambda ns, x, y: -ns.sin(x), "tan": lambda ns, x, y: 1.0 + y * y,
    "asin": lambda ns, x, y: 1.0 / ns.sqrt(1.0 - x * x), "acos": lambda ns, x, y: -1.0 / ns.sqrt(1.0 - x * x),
    "atan": lambda ns, x, y: 1.0 / (1.0 + x * x), "sinh": lambda ns, x, y: ns.cosh(x),
    "cosh": lambda ns, x, y: ns.sinh(x), "asinh": lambda ns, x, y: 1.0 / ns.sqrt(x * x + 1.0),
    "acosh": lambda ns, x, y: 1.0 / ns.sqrt(x * x - 1.0), "atanh": lambda ns, x, y: 1.0 / (1.0 - x * x),
    "exp": lambda ns, x, y: y, "log": lambda ns, x, y: 1.0 / x, "sqrt": lambda ns, x, y: 0.5 / y,
    "reciprocal": lambda ns, x, y: -(y * y), "abs": lambda ns, x, y: ns.sign(x), "tanh": lambda ns, x, y: 1.0 - y * y,
    "erf": lambda ns, x, y: (2.0 / math.sqrt(math.pi)) * ns.exp(-(x * x)),
    "negative": lambda ns, x, y: -ns.ones_like(x),
    "floor": None, "ceil": None, "round": None, "sign": None, "trunc": None,
}


class UnaryFunction(Function):
    def forward(self, x, kind):
        ns = _ns(x)
        self.x, self.kind, self.ns = x, kind, ns
        self.y = _FORWARD[kind](ns, x) if kind in _FORWARD else getattr(ns, kind)(x)
        return self.y

    def backward(self, g):
        d = _DERIVATIVES[self.kind]
        if d is None:
            return self.ns.zeros_like(g)
        return g * d(self.ns, self.x, self.y)


def unary(x: Tensor, kind: str) -> Tensor:
    """``kind`` (one of the array API's elementwise functions, or "erf") of ``x``, differentiable."""
    if kind not in _DERIVATIVES:
        raise ValueError(f"unary: unknown function {kind!r}; expected one of {sorted(_DERIVATIVES)}")
    if x.dtype.kind != "f":
        return _plain(x, lambda a: getattr(_ns(a), kind)(a))
    return UnaryFunction.apply(x, kind=kind)


def erf(x: Tensor) -> Tensor:
    return unary(x, "erf")


def _plain(x: Tensor, fn) -> Tensor:
    """A result no gradient flows through (integer or bool arithmetic, comparisons)."""
    return Tensor._of(fn(x.data), x.xp)


def _data(x):
    return x.data if isinstance(x, Tensor) else x


def _xp_of(*items):
    for item in items:
        if isinstance(item, Tensor):
            return item.xp
    raise TypeError("expected at least one Tensor")


def _sum_to(xp, g, shape):
    return g if tuple(g.shape) == tuple(shape) else xp.sum_to_shape(g, tuple(shape))


class _ChooseFunction(Function):
    """maximum/minimum: the gradient goes to the chosen operand (the first on ties, as PyTorch)."""

    def forward(self, a, b, kind):
        ns = _ns(a)
        self.ns, self.sa, self.sb = ns, a.shape, b.shape
        self.first = (a >= b) if kind == "maximum" else (a <= b)
        return getattr(ns, kind)(a, b)

    def backward(self, g):
        ns, zero = self.ns, self.ns.zeros_like(g)
        na, nb = self.needs_input_grad
        return (_sum_to(self.xp, ns.where(self.first, g, zero), self.sa) if na else None,
                _sum_to(self.xp, ns.where(self.first, zero, g), self.sb) if nb else None)


def _pair(a, b):
    """Two operands as Tensors of one backend and dtype (a host NumPy constant joins the Tensor's backend)."""
    xp = _xp_of(a, b)
    like = a if isinstance(a, Tensor) else b
    a = a if isinstance(a, Tensor) else Tensor._of(xp.asarray(np.asarray(a, like.dtype)), xp)
    b = b if isinstance(b, Tensor) else Tensor._of(xp.asarray(np.asarray(b, like.dtype)), xp)
    return a, b


def maximum(a, b) -> Tensor:
    a, b = _pair(a, b)
    if a.dtype.kind != "f":
        return Tensor._of(_ns(a.data).maximum(a.data, b.data), a.xp)
    return _ChooseFunction.apply(a, b, kind="maximum")


def minimum(a, b) -> Tensor:
    a, b = _pair(a, b)
    if a.dtype.kind != "f":
        return Tensor._of(_ns(a.data).minimum(a.data, b.data), a.xp)
    return _ChooseFunction.apply(a, b, kind="minimum")


def compare(a, b, kind: str) -> Tensor:
    """A bool Tensor: ``kind`` in equal, not_equal, less, less_equal, greater, greater_equal (no gradient)."""
    a, b = _pair(a, b)
    return Tensor._of(getattr(_ns(a.data), kind)(a.data, b.data), a.xp)


def logical(a, b, kind: str) -> Tensor:
    """logical_and / logical_or / logical_xor of bool Tensors (also bitwise_and/or/xor of integers)."""
    a, b = _pair(a, b)
    return Tensor._of(getattr(_ns(a.data), kind)(a.data, b.data), a.xp)


def logical_not(a: Tensor) -> Tensor:
    return Tensor._of(_ns(a.data).logical_not(a.data), a.xp)


class WhereFunction(Function):
    def forward(self, a, b, condition):
        ns = _ns(a)
        self.ns, self.c, self.sa, self.sb = ns, condition, a.shape, b.shape
        return ns.where(condition, a, b)

    def backward(self, g):
        ns, zero = self.ns, self.ns.zeros_like(g)
        na, nb = self.needs_input_grad
        return (_sum_to(self.xp, ns.where(self.c, g, zero), self.sa) if na else None,
                _sum_to(self.xp, ns.where(self.c, zero, g), self.sb) if nb else None)


def where(condition, a, b) -> Tensor:
    """``a`` where ``condition`` (bool) holds, else ``b`` (broadcast), differentiable in ``a`` and ``b``."""
    a, b = _pair(a, b)
    cond = _data(condition)
    if not isinstance(condition, Tensor):
        cond = a.xp.asarray(np.asarray(cond, bool))
    if a.dtype.kind != "f":
        return Tensor._of(_ns(a.data).where(cond, a.data, b.data), a.xp)
    return WhereFunction.apply(a, b, condition=cond)


class TakeFunction(Function):
    """Gather along one axis with any integer index array; the backward adds the gradient of each pick into its
    row through a one-hot product (no scatter op needed)."""

    def forward(self, x, indices, axis):
        ns = _ns(x)
        size = x.shape[axis]
        flat = ns.reshape(indices, (-1,))
        flat = ns.where(flat < 0, flat + size, flat)
        self.ns, self.flat, self.axis, self.shape = ns, flat, axis, x.shape
        picked = ns.take(x, flat, axis=axis)
        out = (*x.shape[:axis], *indices.shape, *x.shape[axis + 1:])
        return ns.reshape(picked, out)

    def backward(self, g):
        ns, axis, shape, flat = self.ns, self.axis, self.shape, self.flat
        k = int(flat.shape[0])
        g = ns.reshape(g, (*shape[:axis], k, *shape[axis + 1:]))
        g = ns.moveaxis(g, axis, -1)  # (..., k)
        rows = ns.arange(shape[axis], dtype=flat.dtype, device=getattr(flat, "device", None)) \
            if not isinstance(flat, np.ndarray) else np.arange(shape[axis], dtype=flat.dtype)
        onehot = ns.astype(ns.equal(ns.reshape(flat, (k, 1)), ns.reshape(rows, (1, -1))), g.dtype)  # (k, size)
        gx = ns.matmul(g, onehot) if g.ndim > 1 else ns.matmul(ns.reshape(g, (1, k)), onehot)[0]
        return ns.moveaxis(gx, -1, axis) if g.ndim > 1 else gx


def take(x, indices, axis: int = 0) -> Tensor:
    """``x`` gathered along ``axis`` at ``indices`` (any shape, negatives from the end): ONNX's Gather."""
    idx = _data(indices)
    if not isinstance(indices, Tensor):
        idx = x.xp.asarray(np.asarray(idx, np.int64))
    axis = axis % x.ndim
    if x.dtype.kind != "f":
        return Tensor._of(TakeFunction().forward(x.data, idx, axis), x.xp)
    return TakeFunction.apply(x, indices=idx, axis=axis)


class TakeAlongFunction(Function):
    """ONNX's GatherElements; the backward adds each pick's gradient into its place through a one-hot product."""

    def forward(self, x, indices, axis):
        ns = _ns(x)
        self.ns, self.idx, self.axis, self.size = ns, indices, axis, x.shape[axis]
        return ns.take_along_axis(x, indices, axis=axis)

    def backward(self, g):
        ns, axis, size = self.ns, self.axis, self.size
        idx = ns.moveaxis(self.idx, axis, -1)  # (..., k)
        rows = ns.arange(size, dtype=idx.dtype) if isinstance(idx, np.ndarray) else \
            ns.arange(size, dtype=idx.dtype, device=idx.device)
        onehot = ns.astype(ns.equal(ns.expand_dims(idx, axis=-1), rows), g.dtype)  # (..., k, size)
        gx = ns.matmul(ns.expand_dims(ns.moveaxis(g, axis, -1), axis=-2), onehot)  # (..., 1, size)
        return ns.moveaxis(ns.squeeze(gx, axis=-2), -1, axis)


def take_along_axis(x, indices, axis: int) -> Tensor:
    """ONNX's GatherElements (negative indices from the end), differentiable in ``x``."""
    idx = _data(indices)
    if not isinstance(indices, Tensor):
        idx = x.xp.asarray(np.asarray(idx, np.int64))
    ns = _ns(x.data)
    idx = ns.where(idx < 0, idx + x.shape[axis], idx)
    if x.dtype.kind != "f":
        return Tensor._of(ns.take_along_axis(x.data, idx, axis=axis), x.xp)
    return TakeAlongFunction.apply(x, indices=idx, axis=axis)


class ReduceFunction(Function):
    """max / min / prod over ``axes``; the gradient of max/min is shared by the elements equal to the extreme."""

    def forward(self, x, kind, axes, keepdims):
        ns = _ns(x)
        self.ns, self.x, self.kind, self.axes = ns, x, kind, axes
        self.kept = getattr(ns, kind)(x, axis=axes, keepdims=True)
        return self.kept if keepdims else ns.reshape(self.kept, tuple(
            d for i, d in enumerate(x.shape) if i not in axes))

    def backward(self, g):
        ns, x, kept = self.ns, self.x, self.kept
        g = ns.reshape(g, kept.shape)
        if self.kind == "prod":
            return g * kept / x
        hit = ns.astype(ns.equal(x, kept), x.dtype)
        return g * hit / ns.sum(hit, axis=self.axes, keepdims=True)


def reduce(x: Tensor, kind: str, axes, keepdims: bool) -> Tensor:
    """``kind`` in max, min, prod over ``axes`` (a tuple; None: all)."""
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    if x.dtype.kind != "f":
        return Tensor._of(ReduceFunction().forward(x.data, kind, axes, keepdims), x.xp)
    return ReduceFunction.apply(x, kind=kind, axes=axes, keepdims=keepdims)


class CumsumFunction(Function):
    def forward(self, x, axis, exclusive, reverse):
        ns = _ns(x)
        self.ns, self.args = ns, (axis, exclusive, reverse)
        return _cumsum(ns, x, axis, exclusive, reverse)

    def backward(self, g):
        axis, exclusive, reverse = self.args
        return _cumsum(self.ns, g, axis, exclusive, not reverse)


def _cumsum(ns, x, axis, exclusive, reverse):
    if reverse:
        x = ns.flip(x, axis=axis)
    y = ns.cumulative_sum(x, axis=axis)
    if exclusive:
        y = y - x
    return ns.flip(y, axis=axis) if reverse else y


def cumsum(x: Tensor, axis: int, exclusive: bool = False, reverse: bool = False) -> Tensor:
    axis = axis % x.ndim
    if x.dtype.kind != "f":
        return Tensor._of(_cumsum(_ns(x.data), x.data, axis, exclusive, reverse), x.xp)
    return CumsumFunction.apply(x, axis=axis, exclusive=exclusive, reverse=reverse)


class TileFunction(Function):
    def forward(self, x, repeats):
        ns = _ns(x)
        self.ns, self.shape, self.repeats = ns, x.shape, repeats
        return ns.tile(x, repeats)

    def backward(self, g):
        ns, shape, repeats = self.ns, self.shape, self.repeats
        g = ns.reshape(g, tuple(v for r, d in zip(repeats, shape) for v in (r, d)))
        return ns.sum(g, axis=tuple(range(0, 2 * len(shape), 2)))


def tile(x: Tensor, repeats) -> Tensor:
    repeats = tuple(int(r) for r in repeats)
    if x.dtype.kind != "f":
        return Tensor._of(_ns(x.data).tile(x.data, repeats), x.xp)
    return TileFunction.apply(x, repeats=repeats)


class BroadcastFunction(Function):
    def forward(self, x, shape):
        ns = _ns(x)
        self.shape = x.shape
        return ns.asarray(ns.broadcast_to(x, shape), copy=True) if isinstance(x, np.ndarray) else \
            ns.broadcast_to(x, shape) + ns.zeros(shape, dtype=x.dtype, device=x.device)

    def backward(self, g):
        return _sum_to(self.xp, g, self.shape)


def broadcast_to(x: Tensor, shape) -> Tensor:
    """``x`` broadcast to ``shape`` (ONNX's Expand takes the broadcast of both shapes)."""
    shape = tuple(int(s) for s in np.broadcast_shapes(tuple(x.shape), tuple(int(s) for s in shape)))
    if shape == tuple(x.shape):
        return x
    if x.dtype.kind != "f":
        return Tensor._of(BroadcastFunction().forward(x.data, shape), x.xp)
    return BroadcastFunction.apply(x, shape=shape)


def astype(x: Tensor, dtype) -> Tensor:
    """``x`` converted to ``dtype``: a float to float conversion keeps the gradient, any other none."""
    from .operators import cast  # noqa: PLC0415

    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.dtype.kind == "f" and dtype.kind == "f":
        return cast(x, dtype)
    return Tensor._of(_ns(x.data).astype(x.data, dtype), x.xp)


class PowFunction(Function):
    def forward(self, a, b):
        ns = _ns(a)
        self.ns, self.a, self.b = ns, a, b
        self.y = ns.pow(a, b)
        return self.y

    def backward(self, g):
        ns, a, b, y = self.ns, self.a, self.b, self.y
        na, nb = self.needs_input_grad
        ga = _sum_to(self.xp, g * b * ns.pow(a, b - 1), a.shape) if na else None
        gb = _sum_to(self.xp, g * y * ns.log(ns.where(a > 0, a, ns.ones_like(a))), b.shape) if nb else None
        return ga, gb


def pow(a, b) -> Tensor:  # noqa: A001 - ONNX's name
    a, b = _pair(a, b)
    if a.dtype.kind != "f":
        return Tensor._of(_ns(a.data).pow(a.data, b.data), a.xp)
    return PowFunction.apply(a, b)


class RemainderFunction(Function):
    """Python's (floored) remainder, a - floor(a / b) * b: the gradient 1 for a, -floor(a / b) for b."""

    def forward(self, a, b):
        ns = _ns(a)
        self.ns, self.a, self.b = ns, a, b
        return ns.remainder(a, b)

    def backward(self, g):
        ns, a, b = self.ns, self.a, self.b
        na, nb = self.needs_input_grad
        return (_sum_to(self.xp, g, a.shape) if na else None,
                _sum_to(self.xp, -(g * ns.floor(a / b)), b.shape) if nb else None)


def remainder(a, b) -> Tensor:
    """The floored remainder of float Tensors (ONNX's Mod with fmod=0), differentiable."""
    a, b = _pair(a, b)
    return RemainderFunction.apply(a, b)


def sign_free(x: Tensor, fn) -> Tensor:
    """``fn`` of the data, no gradient: the rounding functions and integer arithmetic."""
    return _plain(x, fn)
