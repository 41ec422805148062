"""Launches of ``kernels/array_api_complex.cu``: complex64 and complex128 arithmetic, comparisons (equal, not_equal),
functions with the standard's special cases, parts (abs, real, imag), tests, casts to and from complex, and the
complex instantiations of the array API's data-movement, ``where``, reduction, scan and unique kernels (which
:mod:`.array_api` and :mod:`.array_api_reduce` run through :func:`launch` for complex operands).  Results are new
C-contiguous arrays; dtypes are the caller's business."""

from __future__ import annotations

import functools
import math
from ctypes import c_int, c_longlong, c_void_p

import numpy as np

from .. import array as _array
from . import programs
from .common import _run, geometry, layout

PROGRAM = "array_api_complex"
#: unary codes beyond pymagma.array_api._kernels.UNARY
CONJ = 31
#: cx_part codes (real results)
PARTS = {"abs": 0, "real": 1, "imag": 2}
#: cx_test codes (bool results); "nonzero" is the cast to bool
TESTS = {"isnan": 0, "isinf": 1, "isfinite": 2, "nonzero": 3}
REAL_OF = {np.dtype("complex64"): np.dtype("float32"), np.dtype("complex128"): np.dtype("float64")}
BOOL = np.dtype(bool)


@functools.lru_cache(maxsize=64)
def c_type(name: str) -> str:
    """The kernels' C type of an array API dtype name (complex ones: ``cx<float>``, ``cx<double>``)."""
    return programs.API_C_TYPES.get(name) or programs.API_COMPLEX_C_TYPES[name]


@functools.lru_cache(maxsize=128)
def _expression(kernel: str, *types: str) -> str:
    return f"{kernel}<{', '.join(types)}>"


def _real(dtype: np.dtype) -> str:
    return programs.API_COMPLEX_REAL[dtype.name]


def launch(expression: str, like, n: int, args) -> None:
    """Run ``expression`` (a kernel of this program, or a shared one instantiated here for ``cx<R>``)."""
    _run(PROGRAM, expression, like, n, args)


_launch = launch


def _geometry(shape, *operands):
    return geometry(shape, *(layout(o) for o in operands))


def binary(code: int, a, b, shape: tuple):
    """``a op b`` of one complex dtype broadcast to ``shape`` (``code``: add 0, subtract 1, multiply 2, divide 3,
    pow 6)."""
    out = _array._empty(shape, a.dtype, a.device)
    _launch(_expression("cx_binary", _real(a.dtype)), a, out.size,
            [c_int(code), c_void_p(a.ptr), c_void_p(b.ptr), c_void_p(out.ptr), c_longlong(math.prod(shape)),
             _geometry(shape, a, b)])
    return out


def compare(code: int, a, b, shape: tuple):
    """``a == b`` (``code`` 0) or ``a != b`` (1) broadcast to ``shape``, a bool array."""
    out = _array._empty(shape, BOOL, a.device)
    _launch(_expression("cx_compare", _real(a.dtype)), a, out.size,
            [c_int(code), c_void_p(a.ptr), c_void_p(b.ptr), c_void_p(out.ptr), c_longlong(math.prod(shape)),
             _geometry(shape, a, b)])
    return out


def unary(code: int, x):
    out = _array._empty(x.shape, x.dtype, x.device)
    _launch(_expression("cx_unary", _real(x.dtype)), x, out.size,
            [c_int(code), c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), _geometry(x.shape, x)])
    return out


def part(name: str, x):
    """``abs``, ``real`` or ``imag`` of a complex array: a real array of its precision."""
    out = _array._empty(x.shape, REAL_OF[x.dtype], x.device)
    _launch(_expression("cx_part", _real(x.dtype)), x, out.size,
            [c_int(PARTS[name]), c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), _geometry(x.shape, x)])
    return out


def test(name: str, x):
    out = _array._empty(x.shape, BOOL, x.device)
    _launch(_expression("cx_test", _real(x.dtype)), x, out.size,
            [c_int(TESTS[name]), c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), _geometry(x.shape, x)])
    return out


def cast(x, dtype: np.dtype):
    """``x`` converted to ``dtype`` where one of them is complex: real (and bool) to complex with a +0 imaginary
    part, complex to complex, complex to bool (nonzero).  Complex to a real number is the caller's refusal."""
    if dtype == BOOL:
        return test("nonzero", x)
    out = _array._empty(x.shape, dtype, x.device)
    if x.dtype.kind == "c":
        expression = _expression("cx_cast", _real(x.dtype), _real(dtype))
    else:
        expression = _expression("cx_from_real", programs.API_C_TYPES[x.dtype.name], _real(dtype))
    _launch(expression, x, out.size, [c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size),
                                      _geometry(x.shape, x)])
    return out
