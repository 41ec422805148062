"""The standard's statistical functions (``sum``, ``prod``, ``min``, ``max``, ``mean``, ``var``, ``std``,
``cumulative_sum``, ``cumulative_prod``) and ``diff``: one reduction or scan kernel over ``axis`` of a strided
operand, after a cast kernel where the accumulation dtype differs from the input's."""

from __future__ import annotations

import operator

import numpy as np

from .. import array as _array
from ..kernels import array_api as _api_kernels
from ..kernels import array_api_reduce as _rk
from . import _dtypes, _elementwise, _manipulation


def _as(x, dtype):
    return x if x.dtype == dtype else _api_kernels.cast(x, dtype)


def _kinds(x, kinds: str, what: str):
    x = _elementwise._require(x, what)
    _elementwise._kinds(x.dtype, kinds, what)
    return x


def accumulation_dtype(x, dtype, what: str) -> np.dtype:
    """``dtype`` when given, else the standard's default for sums and products: the default integer (int64) for
    bool and the signed integers, uint64 for the unsigned ones, the input's dtype for floats."""
    if dtype is not None:
        return _dtypes.check(dtype, f"{what} dtype")
    return _dtypes.accumulator(x.dtype)


def _kept(out, shape: tuple, reduced: tuple, keepdims: bool):
    if not keepdims:
        return out
    return out.reshape(tuple(1 if d in reduced else n for d, n in enumerate(shape)))


def _reduction(op: str, x, axis, keepdims: bool, what: str, correction: float = 0.0):
    reduced = _rk.axes(axis, x.ndim, what)
    if op in ("min", "max") and any(x.shape[d] == 0 for d in reduced):
        raise ValueError(f"{what}: the reduction over an empty axis has no identity (shape {x.shape}, axis {axis})")
    return _kept(_rk.reduce(op, x, reduced, correction), x.shape, reduced, keepdims)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001 (the standard's name)
    """The sum over ``axis``: 0 over an empty axis; integers and bool accumulate in int64 unless ``dtype``."""
    x = _kinds(x, "biufc", "sum")
    return _reduction("sum", _as(x, accumulation_dtype(x, dtype, "sum")), axis, keepdims, "sum")


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """The product over ``axis``: 1 over an empty axis; integers and bool in int64 unless ``dtype``."""
    x = _kinds(x, "biufc", "prod")
    return _reduction("prod", _as(x, accumulation_dtype(x, dtype, "prod")), axis, keepdims, "prod")


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """The smallest element over ``axis`` (NaN propagates); a ValueError over an empty axis."""
    return _reduction("min", _kinds(x, "biuf", "min"), axis, keepdims, "min")


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """The largest element over ``axis`` (NaN propagates); a ValueError over an empty axis."""
    return _reduction("max", _kinds(x, "biuf", "max"), axis, keepdims, "max")


def mean(x, /, *, axis=None, keepdims=False):
    """The arithmetic mean over ``axis`` of a floating array (accumulated in float64; NaN when empty)."""
    return _reduction("mean", _kinds(x, "fc", "mean"), axis, keepdims, "mean")


def _correction(correction, what: str) -> float:
    if isinstance(correction, bool) or not isinstance(correction, int | float) or correction < 0:
        raise ValueError(f"{what}: correction must be a non-negative int or float, got {correction!r}")
    return float(correction)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """The variance over ``axis``: the sum of squared deviations divided by ``N - correction`` (two passes, in
    float64)."""
    x = _kinds(x, "f", "var")
    return _reduction("var", x, axis, keepdims, "var", _correction(correction, "var"))


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """The square root of :func:`var`."""
    x = _kinds(x, "f", "std")
    return _api_kernels.unary("sqrt", _reduction("var", x, axis, keepdims, "std", _correction(correction, "std")))


def _scan_axis(x, axis, what: str) -> int:
    if x.ndim == 0:
        raise ValueError(f"{what}: a 0-d array has no axis to accumulate along")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{what}: axis is required for an array of {x.ndim} dimensions")
        return 0
    return _rk.axes(axis if isinstance(axis, tuple) else operator.index(axis), x.ndim, what)[0]


def _scan(op: str, x, axis, dtype, include_initial: bool, what: str):
    x = _kinds(x, "biufc", what)
    axis = _scan_axis(x, axis, what)
    return _rk.scan(op, _as(x, accumulation_dtype(x, dtype, what)), axis, bool(include_initial))


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sums along ``axis`` (optional for 1-D arrays); ``include_initial`` puts the 0 first."""
    return _scan("sum", x, axis, dtype, include_initial, "cumulative_sum")


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running products along ``axis`` (optional for 1-D arrays); ``include_initial`` puts the 1 first."""
    return _scan("prod", x, axis, dtype, include_initial, "cumulative_prod")


def _along(x, axis: int, start, stop):
    return x[(slice(None),) * axis + (slice(start, stop),)]


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The ``n``-th forward difference along ``axis`` (bool: not_equal, as NumPy), after joining ``prepend`` and
    ``append`` (arrays, or Python scalars broadcast along ``axis``) to ``x``."""
    x = _kinds(x, "biufc", "diff")
    if x.ndim == 0:
        raise ValueError("diff: a 0-d array has no axis to difference along")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    (axis,) = _rk.axes(operator.index(axis), x.ndim, "diff")
    extra = [v for v in (prepend, append) if v is not None]
    if extra:
        dtype = _dtypes.result_type(x, *extra)
        parts = []
        for v in (prepend, x, append):
            if v is None:
                continue
            if _elementwise._is_scalar(v):
                shape = list(x.shape)
                shape[axis] = 1
                v = _array.asarray(np.full(tuple(shape), v, dtype=dtype), device=x.device)
            v = _elementwise._require(v, "diff")
            if v.ndim != x.ndim or any(a != b for d, (a, b) in enumerate(zip(v.shape, x.shape)) if d != axis):
                raise ValueError(f"diff: prepend/append of shape {v.shape} does not match {x.shape} but along axis "
                                 f"{axis}")
            parts.append(_as(v, dtype))
        x = _manipulation.concat(parts, axis=axis)
    if n == 0 or not extra and x.shape[axis] == 0:  # the standard's size rule: N1 - n along axis (a copy)
        return _api_kernels.cast(x, x.dtype)
    for _ in range(n):
        if x.shape[axis] == 0:
            break
        later, earlier = _along(x, axis, 1, None), _along(x, axis, None, -1)
        x = _elementwise.compare("not_equal", later, earlier) if x.dtype.kind == "b" else \
            _elementwise.binary("subtract", later, earlier)
    return x
