"""The standard's elementwise functions on DeviceArrays: operands checked, Python scalars given the array's dtype,
dtypes promoted (a cast kernel where they differ), shapes broadcast, then one launch of a kernel family."""

from __future__ import annotations

import builtins
import functools

import numpy as np

from .. import array as _array
from ..kernels import array_api as _kernels
from ..kernels import array_api_complex as _complex
from . import _dtypes

_FLOATS, _INTS, _INTS_BOOL = "f", "iu", "iub"
_REAL, _NUMERIC, _INEXACT = "iuf", "iufc", "fc"
#: binary function -> dtype kinds it takes
_BINARY_KINDS = {
    "add": _NUMERIC, "subtract": _NUMERIC, "multiply": _NUMERIC, "divide": _NUMERIC, "floor_divide": _REAL,
    "remainder": _REAL, "pow": _NUMERIC, "maximum": _REAL, "minimum": _REAL,
    "logical_and": "b", "logical_or": "b", "logical_xor": "b",
    "bitwise_and": _INTS_BOOL, "bitwise_or": _INTS_BOOL, "bitwise_xor": _INTS_BOOL,
    "bitwise_left_shift": _INTS, "bitwise_right_shift": _INTS,
    **{f: _FLOATS for f in ("atan2", "copysign", "hypot", "logaddexp", "nextafter")},
}
_COMPARE_KINDS = {"equal": "biufc", "not_equal": "biufc", "less": _REAL, "less_equal": _REAL,
                  "greater": _REAL, "greater_equal": _REAL}
_UNARY_KINDS = {
    "negative": _NUMERIC, "positive": _NUMERIC, "abs": _NUMERIC, "square": _NUMERIC, "sign": _NUMERIC,
    "floor": _REAL, "ceil": _REAL, "trunc": _REAL, "round": _NUMERIC,
    **{f: _INEXACT for f in ("sqrt", "exp", "log", "expm1", "log1p", "log2", "log10", "sin", "cos", "tan", "tanh",
                             "reciprocal", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh")},
    "logical_not": "b", "bitwise_invert": _INTS_BOOL,
}
_TEST_KINDS = {"isnan": _NUMERIC, "isinf": _NUMERIC, "isfinite": _NUMERIC, "signbit": _FLOATS}


def _require(x, what: str):
    if not isinstance(x, _array.DeviceArray):
        raise TypeError(f"{what}: expected a pymagma DeviceArray, got {type(x).__name__} (use "
                        "pymagma.array_api.asarray for host data)")
    _dtypes.check(x.dtype, what)
    return x


def _kinds(dtype: np.dtype, kinds: str, what: str) -> None:
    if dtype.kind not in kinds:
        names = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "real floating",
                 "c": "complex floating"}
        raise TypeError(f"{what} takes {', '.join(names[k] for k in kinds)} arrays, not {dtype}")


def _scalar(value, like, what: str):
    """A Python scalar as a 0-d array of ``like``'s dtype (the standard's rule), on its device; a Python complex
    beside a real floating array takes the complex dtype of its precision."""
    dtype = like.dtype
    if isinstance(value, complex) and dtype.kind == "f":
        dtype = _dtypes.complex64 if dtype == _dtypes.float32 else _dtypes.complex128
    _dtypes.scalar_dtype(value, dtype, what)
    return _array.asarray(np.asarray(value, dtype=dtype), device=like.device)


def _is_scalar(v) -> bool:
    return isinstance(v, bool | int | float | complex)


def _operands(x1, x2, what: str):
    if _is_scalar(x1) and _is_scalar(x2):
        raise TypeError(f"{what}: at least one operand must be an array")
    if _is_scalar(x2):
        x1 = _require(x1, what)
        return x1, _scalar(x2, x1, what)
    if _is_scalar(x1):
        x2 = _require(x2, what)
        return _scalar(x1, x2, what), x2
    x1, x2 = _require(x1, what), _require(x2, what)
    if x1.device != x2.device:
        raise ValueError(f"{what}: arrays on different devices ({x1.device} and {x2.device})")
    return x1, x2


def _as(x, dtype: np.dtype):
    return x if x.dtype == dtype else _kernels.cast(x, dtype)


def _shape(x1, x2, what: str) -> tuple:
    if x1.shape == x2.shape:
        return x1.shape
    try:
        return _broadcast(x1.shape, x2.shape)
    except ValueError:
        raise ValueError(f"{what}: shapes {x1.shape} and {x2.shape} do not broadcast") from None


@functools.lru_cache(maxsize=1024)
def _broadcast(a: tuple, b: tuple) -> tuple:
    return tuple(np.broadcast_shapes(a, b))


def binary(name: str, x1, x2):
    x1, x2 = _operands(x1, x2, name)
    dtype = _dtypes.promote(x1.dtype, x2.dtype)
    _kinds(dtype, _BINARY_KINDS[name], name)
    if name == "divide" and dtype.kind not in "fc":  # integer division is true division in the default float dtype
        dtype = _dtypes.DEFAULT["real floating"]
    shape = _shape(x1, x2, name)
    return _kernels.binary(name, _as(x1, dtype), _as(x2, dtype), shape)


def _widened(x1, x2):
    """An integer array beside a Python int beyond its dtype's range, as int64: a comparison then compares the
    values, as NumPy's does (the standard leaves it unspecified)."""
    for arr, other in ((x1, x2), (x2, x1)):
        if isinstance(other, int) and not isinstance(other, bool) and isinstance(arr, _array.DeviceArray) and \
                arr.dtype.kind in _INTS and not np.iinfo(arr.dtype).min <= other <= np.iinfo(arr.dtype).max:
            wide = _kernels.cast(_require(arr, "comparison"), _dtypes.int64)
            return (wide, other) if arr is x1 else (other, wide)
    return x1, x2


def compare(name: str, x1, x2):
    x1, x2 = _operands(*_widened(x1, x2), name)
    dtype = _dtypes.promote(x1.dtype, x2.dtype)
    _kinds(dtype, _COMPARE_KINDS[name], name)
    shape = _shape(x1, x2, name)
    return _kernels.compare(name, _as(x1, dtype), _as(x2, dtype), shape)


def unary(name: str, x):
    x = _require(x, name)
    _kinds(x.dtype, _UNARY_KINDS[name], name)
    if name == "abs" and x.dtype.kind == "c":  # |z|, a real array of z's precision
        return _complex.part("abs", x)
    return _kernels.unary(name, x)


def test(name: str, x):
    x = _require(x, name)
    _kinds(x.dtype, _TEST_KINDS[name], name)
    if x.dtype.kind not in "fc":  # integers are never NaN or infinite
        answer = name == "isfinite"
        return _kernels.compare("equal" if answer else "not_equal", x, x, x.shape)
    return _kernels.test(name, x)


def _make(kind: str, name: str):
    run = {"binary": binary, "compare": compare, "unary": unary, "test": test}[kind]
    if kind in ("binary", "compare"):
        def function(x1, x2, /):
            return run(name, x1, x2)
    else:
        def function(x, /):
            return run(name, x)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"The array API's elementwise ``{name}`` on the device."
    return function


FUNCTIONS = {name: _make(kind, name) for kind, table in (("binary", _BINARY_KINDS), ("compare", _COMPARE_KINDS),
                                                           ("unary", _UNARY_KINDS), ("test", _TEST_KINDS))
             for name in table}


def clip(x, /, min=None, max=None):  # noqa: A002 (the standard's names)
    """``x`` clamped to ``[min, max]`` (arrays or Python scalars, broadcast; None: no bound) in ``x``'s dtype; a
    NaN bound or element gives NaN (``maximum`` then ``minimum``)."""
    x = _require(x, "clip")
    _kinds(x.dtype, _REAL, "clip")
    out = x
    for bound, name in ((min, "maximum"), (max, "minimum")):
        if bound is None:
            continue
        if isinstance(bound, _array.DeviceArray) and bound.dtype != x.dtype:
            raise TypeError(f"clip: a {bound.dtype} bound for a {x.dtype} array (the standard asks for x's dtype)")
        if isinstance(bound, int) and not isinstance(bound, bool) and x.dtype.kind in _INTS:
            info = np.iinfo(x.dtype)  # a bound beyond the dtype's range clips nothing more (NumPy's answer)
            bound = builtins.max(int(info.min), builtins.min(int(info.max), bound))
        out = binary(name, out, bound)
    if out is x:  # no bound: a copy of x
        return _kernels.cast(x, x.dtype)
    return out


def conj(x, /):
    """The complex conjugate (of a real array, a copy of it)."""
    x = _require(x, "conj")
    _kinds(x.dtype, _NUMERIC, "conj")
    return _complex.unary(_complex.CONJ, x) if x.dtype.kind == "c" else _kernels.cast(x, x.dtype)


def real(x, /):
    """The real part, a real array of ``x``'s precision (of a real floating array, a copy: 2024.12 allows it)."""
    x = _require(x, "real")
    _kinds(x.dtype, _INEXACT, "real")
    return _complex.part("real", x) if x.dtype.kind == "c" else _kernels.cast(x, x.dtype)


def imag(x, /):
    """The imaginary part of a complex array, a real array of its precision (the standard takes complex arrays
    only)."""
    x = _require(x, "imag")
    _kinds(x.dtype, "c", "imag")
    return _complex.part("imag", x)


FUNCTIONS.update(clip=clip, conj=conj, real=real, imag=imag)
