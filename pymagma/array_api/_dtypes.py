"""The array API's data types as pymagma holds them (NumPy dtypes), the standard's type-promotion table (2024.12)
restricted to them, and the dtype functions ``result_type``, ``can_cast``, ``isdtype``, ``finfo``, ``iinfo``."""

from __future__ import annotations

import builtins
from typing import NamedTuple

import numpy as np

bool = np.dtype("bool")  # noqa: A001 (the standard's name)
int8, int16, int32, int64 = (np.dtype(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (np.dtype(n) for n in ("uint8", "uint16", "uint32", "uint64"))
float32, float64 = np.dtype("float32"), np.dtype("float64")
complex64, complex128 = np.dtype("complex64"), np.dtype("complex128")
SUPPORTED = (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64, complex64, complex128)
#: the standard's dtypes pymagma's kernels do not handle (named in errors, absent from the namespace)
UNSUPPORTED = ()
DEFAULT = {"real floating": float64, "complex floating": complex128, "integral": int64, "indexing": int64}
_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu", "real floating": "f",
          "complex floating": "c", "numeric": "iufc"}


def _dtype_of(v):
    """An array's dtype, or ``v`` itself (a dtype, or a scalar type such as the namespace's ``float64``)."""
    return v if isinstance(v, type) else getattr(v, "dtype", v)


def check(dtype, what: str = "dtype") -> np.dtype:
    """``dtype`` as one of :data:`SUPPORTED`; TypeError naming it and the supported ones otherwise."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what}: {dtype!r} is not a data type") from None
    if dt not in SUPPORTED:
        raise TypeError(f"{what}: {dt} is not supported by pymagma.array_api (supported: "
                        f"{', '.join(d.name for d in SUPPORTED)})")
    return dt


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The standard's promotion of two supported dtypes; TypeError where it defines none (bool with numbers,
    integers with floats, uint64 with a signed integer)."""
    if a == b:
        return a
    ka, kb = a.kind, b.kind
    if ka == kb and ka in "iufc":
        return a if a.itemsize >= b.itemsize else b
    if {ka, kb} == {"f", "c"}:  # the complex dtype of the wider precision
        real = max(a.itemsize if ka == "f" else a.itemsize // 2, b.itemsize if kb == "f" else b.itemsize // 2)
        return complex64 if real == 4 else complex128
    if {ka, kb} == {"i", "u"}:
        signed, unsigned = (a, b) if ka == "i" else (b, a)
        if signed.itemsize > unsigned.itemsize:
            return signed
        if unsigned.itemsize < 8:
            return np.dtype(f"int{2 * 8 * unsigned.itemsize}")
        raise TypeError(f"the array API standard defines no promotion of {a} with {b} (NumPy's float64 loses "
                        "integers above 2**53; cast one with astype)")
    raise TypeError(f"the array API standard defines no promotion of {a} with {b} (cast one with astype)")


def accumulator(dtype: np.dtype) -> np.dtype:
    """The standard's default dtype of a sum or product of ``dtype``: the default integer (int64) for bool and the
    signed integers, the unsigned one of the same width (uint64) for unsigned integers, floats their own."""
    if dtype.kind in "bi":
        return DEFAULT["integral"]
    return uint64 if dtype.kind == "u" else dtype


def result_type(*arrays_and_dtypes):
    """The promoted dtype of arrays, dtypes and (2024.12) Python scalars, which take the others' dtype (a Python
    complex with a real floating dtype gives its complex counterpart)."""
    dts, scalars = [], []
    for v in arrays_and_dtypes:
        if isinstance(v, (builtins_bool, int, float, complex)):
            scalars.append(v)
        else:
            dts.append(check(_dtype_of(v), "result_type"))
    if not dts:
        raise ValueError("result_type needs at least one array or dtype")
    out = dts[0]
    for d in dts[1:]:
        out = promote(out, d)
    for s in scalars:
        if isinstance(s, complex) and out.kind == "f":
            out = complex64 if out == float32 else complex128
        scalar_dtype(s, out, "result_type")
    return out


builtins_bool = builtins.bool


def scalar_dtype(value, dtype: np.dtype, what: str) -> np.dtype:
    """``dtype`` when a Python scalar ``value`` may meet an array of it (bool with bool, int with numbers, float
    with floating dtypes, complex with complex ones); TypeError otherwise."""
    if isinstance(value, builtins_bool):
        ok = dtype.kind == "b"
    elif isinstance(value, int):
        ok = dtype.kind in "iufc"
    elif isinstance(value, float):
        ok = dtype.kind in "fc"
    elif isinstance(value, complex):
        ok = dtype.kind == "c"
    else:
        ok = False
    if not ok:
        raise TypeError(f"{what}: a Python {type(value).__name__} cannot meet a {dtype} array (the array API "
                        "standard's scalar rules)")
    return dtype


def can_cast(from_, to) -> builtins_bool:
    """Whether the promotion table allows ``from_`` (a dtype or array) to become ``to``."""
    a, b = check(_dtype_of(from_), "can_cast"), check(to, "can_cast")
    try:
        return promote(a, b) == b
    except TypeError:
        return False


def isdtype(dtype, kind) -> builtins_bool:
    """Whether ``dtype`` is ``kind``: a dtype, a kind name ('bool', 'signed integer', 'unsigned integer',
    'integral', 'real floating', 'complex floating', 'numeric') or a tuple of them."""
    dtype = np.dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; known: {sorted(_KINDS)}")
        return dtype.kind in _KINDS[kind]
    return dtype == np.dtype(kind)


class FInfo(NamedTuple):
    """What the standard's ``finfo`` answers: Python ints and floats, and the dtype."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


def finfo(type_) -> FInfo:
    """Machine limits of a floating dtype (or a floating array's); of a complex dtype, those of its real and
    imaginary parts (``dtype`` float32 for complex64, as the standard says)."""
    dt = check(_dtype_of(type_), "finfo")
    if dt.kind not in "fc":
        raise TypeError(f"finfo needs a floating dtype, got {dt}")
    f = np.finfo(dt)
    return FInfo(int(f.bits), float(f.eps), float(f.max), float(f.min), float(f.smallest_normal), np.dtype(f.dtype))


def iinfo(type_):
    """Limits of an integer dtype (NumPy's answer: bits, max, min, dtype)."""
    dt = check(_dtype_of(type_), "iinfo")
    if dt.kind not in "iu":
        raise TypeError(f"iinfo needs an integer dtype, got {dt}")
    return np.iinfo(dt)
