"""The ``linalg`` extension's reductions: ``diagonal``, ``trace``, ``vector_norm``, ``matrix_norm``.  Composed from
the elementwise kernels and the reduction kernel (:func:`pymagma.kernels.reduce`: sum, sum of squares, max, min
over any axes of a strided array); the spectral norms take the singular values of MAGMA's gesdd.  Integer traces
add the diagonal's elements with the elementwise kernel, so they are exact (wrapping as NumPy's)."""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import array as _array
from .. import kernels as _kernels
from .. import linalg as _linalg
from ..kernels import array_api as _api_kernels
from . import _dtypes, _elementwise

_INF = float("inf")


def diagonal(x, /, *, offset: int = 0):
    """The diagonal ``offset`` (above the main one when positive) of each matrix, a new array ``(..., K)``."""
    x = _elementwise._require(x, "linalg.diagonal")
    return _api_kernels.cast(_diagonal_view(x, offset, "diagonal"), x.dtype)


def _diagonal_view(x, offset, what: str):
    if x.ndim < 2:
        raise ValueError(f"linalg.{what} needs a matrix or a stack of matrices, got shape {x.shape}")
    if isinstance(offset, bool):
        raise TypeError(f"linalg.{what}: offset must be an integer, got {offset!r}")
    offset = operator.index(offset)
    m, n = x.shape[-2:]
    rows, cols = (0, offset) if offset >= 0 else (-offset, 0)
    length = max(0, min(m - rows, n - cols))
    start = rows * x.strides[-2] + cols * x.strides[-1] if length else 0
    return x._view(start, (*x.shape[:-2], length), (*x.strides[:-2], x.strides[-2] + x.strides[-1]))


def _trace_dtype(x, dtype) -> np.dtype:
    if dtype is not None:
        return _dtypes.check(dtype, "linalg.trace")
    return _dtypes.accumulator(x.dtype)


def trace(x, /, *, offset: int = 0, dtype=None):
    """The sum of the diagonal ``offset`` of each matrix, ``(...)``, in ``dtype`` (by default ``x``'s; integers
    smaller than int64 sum in int64)."""
    x = _elementwise._require(x, "linalg.trace")
    if x.dtype.kind not in "iufc":
        raise TypeError(f"linalg.trace takes numeric arrays, not {x.dtype}")
    target = _trace_dtype(x, dtype)
    d = _api_kernels.cast(_diagonal_view(x, offset, "trace"), target)
    if d.shape[-1] == 0:
        return _array.zeros(d.shape[:-1], target, device=x.device)
    if target.kind == "f":
        return _kernels.reduce("sum", d, -1)
    add, acc = _elementwise.FUNCTIONS["add"], d[..., 0]
    for i in range(1, d.shape[-1]):
        acc = add(acc, d[..., i])
    return acc if acc.is_c_contiguous else _api_kernels.cast(acc, target)


def _floating(x, what: str):
    x = _elementwise._require(x, f"linalg.{what}")
    if x.dtype.kind not in "fc":
        raise TypeError(f"linalg.{what} takes floating arrays (float32, float64, complex64, complex128), not "
                        f"{x.dtype}")
    return x


def _axes(axis, ndim: int, what: str) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple | list) else (axis,)
    out = []
    for a in items:
        if isinstance(a, bool):
            raise TypeError(f"linalg.{what}: axis must hold integers, got {axis!r}")
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"linalg.{what}: axis {a} is out of range for {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"linalg.{what}: repeated axis in {axis!r}")
    return tuple(sorted(out))


def _reduce(op: str, x, axes: tuple, keepdims: bool, what: str):
    """The reduction kernel over ``axes``; over no elements, zeros for the sums and for max (every reduced value
    here is non-negative: |x|, sums of |x|, singular values; NumPy's norms give 0 too), an error for min."""
    if math.prod(x.shape[a] for a in axes) == 0:
        if op == "min":
            raise ValueError(f"linalg.{what}: a {op} over an empty axis has no value")
        kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape) if keepdims or i not in axes)
        return _array.zeros(kept, x.dtype, device=x.device)
    return _kernels.reduce(op, x, axes, keepdims)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):
    """The ``ord``-norm of the vectors along ``axis`` (an int, a tuple of axes read as one flattened vector, or
    None: all elements): 2 (sqrt of the sum of squares), 1, inf, -inf, 0 (the count of non-zeros) or any other
    real p (``sum(|x|**p)**(1/p)``)."""
    x = _floating(x, "vector_norm")
    if x.dtype.kind == "c":  # the norms of |x|, real of x's precision
        x = _elementwise.FUNCTIONS["abs"](x)
    axes = _axes(axis, x.ndim, "vector_norm")
    if isinstance(ord, bool) or not isinstance(ord, int | float):
        raise ValueError(f"linalg.vector_norm: ord must be a real number (or inf, -inf), got {ord!r}")
    fn = _elementwise.FUNCTIONS
    if ord == 2:
        return fn["sqrt"](_reduce("sum_squares", x, axes, keepdims, "vector_norm"))
    if ord == 0:
        nonzero = _api_kernels.cast(fn["not_equal"](x, 0.0), x.dtype)
        return _reduce("sum", nonzero, axes, keepdims, "vector_norm")
    a = fn["abs"](x)
    if ord in (_INF, -_INF):
        return _reduce("max" if ord > 0 else "min", a, axes, keepdims, "vector_norm")
    if ord == 1:
        return _reduce("sum", a, axes, keepdims, "vector_norm")
    return fn["pow"](_reduce("sum", fn["pow"](a, float(ord)), axes, keepdims, "vector_norm"), 1.0 / ord)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, _INF, -_INF)


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):
    """The ``ord``-norm of each matrix: "fro" (sqrt of the sum of squares), 1 / -1 (largest / smallest column sum
    of absolute values), inf / -inf (row sums), 2 / -2 (largest / smallest singular value, gesdd), "nuc" (their
    sum).  ``keepdims`` keeps the two matrix axes as size 1."""
    x = _floating(x, "matrix_norm")
    if x.ndim < 2:
        raise ValueError(f"linalg.matrix_norm needs a matrix or a stack of matrices, got shape {x.shape}")
    valid = ord in ("fro", "nuc") if isinstance(ord, str) else (
        isinstance(ord, int | float) and not isinstance(ord, bool) and ord in (1, -1, 2, -2, _INF, -_INF))
    if not valid:
        raise ValueError(f"linalg.matrix_norm: ord must be one of {_MATRIX_ORDS}, got {ord!r}")
    nd = x.ndim
    if ord == "fro":
        x = _elementwise.FUNCTIONS["abs"](x) if x.dtype.kind == "c" else x
        return _elementwise.FUNCTIONS["sqrt"](_reduce("sum_squares", x, (nd - 2, nd - 1), keepdims, "matrix_norm"))
    if ord in ("nuc", 2, -2):
        s = _linalg.svd(x, compute_uv=False)  # linalg.svdvals
        out = _reduce({"nuc": "sum", 2: "max", -2: "min"}[ord], s, (s.ndim - 1,), False, "matrix_norm")
    else:  # 1 / -1: sums down the columns, then the largest / smallest; inf / -inf: along the rows
        summed = nd - 2 if ord in (1, -1) else nd - 1
        sums = _reduce("sum", _elementwise.FUNCTIONS["abs"](x), (summed,), False, "matrix_norm")
        out = _reduce("max" if ord > 0 else "min", sums, (sums.ndim - 1,), False, "matrix_norm")
    return out.reshape(*out.shape, 1, 1) if keepdims else out
