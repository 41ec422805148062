"""Launches of the array API's kernel families (``kernels/array_api.cu``): binary and comparison over two strided,
broadcast operands of one dtype, unary and float tests over one strided operand, and the strided cast.  Every result
is a new C-contiguous array on the first operand's device; dtypes are the caller's business (see ``_elementwise``)."""

from __future__ import annotations

import functools
import math
from ctypes import c_int, c_longlong, c_void_p

import numpy as np

from .. import array as _array
from .. import kernels as _kernels
from ..kernels import programs

#: binary op codes of aa_binary_op
BINARY = {"add": 0, "subtract": 1, "multiply": 2, "divide": 3, "floor_divide": 4, "remainder": 5, "pow": 6,
          "maximum": 7, "minimum": 8, "logical_and": 9, "logical_or": 10, "logical_xor": 11, "bitwise_and": 12,
          "bitwise_or": 13, "bitwise_xor": 14, "bitwise_left_shift": 15, "bitwise_right_shift": 16}
#: comparison codes of aa_compare_op
COMPARE = {"equal": 0, "not_equal": 1, "less": 2, "less_equal": 3, "greater": 4, "greater_equal": 5}
#: unary codes of aa_unary_op
UNARY = {"negative": 0, "positive": 1, "abs": 2, "square": 3, "sqrt": 4, "exp": 5, "log": 6, "expm1": 7,
         "log1p": 8, "log2": 9, "log10": 10, "sin": 11, "cos": 12, "tan": 13, "tanh": 14, "floor": 15, "ceil": 16,
         "trunc": 17, "round": 18, "sign": 19, "reciprocal": 20, "logical_not": 21, "bitwise_invert": 22}
#: float test codes of aa_test_op (bool results)
TESTS = {"isnan": 0, "isinf": 1, "isfinite": 2, "signbit": 3}
BOOL = np.dtype(bool)


@functools.lru_cache(maxsize=256)
def _expression(kernel: str, *dtypes) -> str:
    return f"{kernel}<{', '.join(programs.API_C_TYPES[np.dtype(d).name] for d in dtypes)}>"


@functools.lru_cache(maxsize=1024)
def _geometry(shape: tuple, *operands: tuple):
    """The (never modified) Strides3 of operands given as (shape, byte strides, itemsize), broadcast to ``shape``:
    computed once per layout (the launch copies it, as cuLaunchKernel copies its parameters)."""
    lead = [len(shape) - len(o[0]) for o in operands]
    sets = [(0,) * k + tuple(0 if n == 1 else s // size for n, s in zip(o_shape, o_strides))
            for k, (o_shape, o_strides, size) in zip(lead, operands)]
    return _kernels.make_strides3(shape, *sets)


def _layout(a) -> tuple:
    return a.shape, a.strides, a.itemsize


def _launch(expression: str, like, out, args) -> None:
    _kernels._run("array_api", expression, like, out.size, args)


def binary(op: str, a, b, shape: tuple):
    """``a op b`` (one dtype) broadcast to ``shape``."""
    out = _array._empty(shape, a.dtype, a.device)
    s = _geometry(shape, _layout(a), _layout(b))
    _launch(_expression("aa_binary", a.dtype), a, out,
            [c_int(BINARY[op]), c_void_p(a.ptr), c_void_p(b.ptr), c_void_p(out.ptr), c_longlong(math.prod(shape)), s])
    return out


def compare(op: str, a, b, shape: tuple):
    """``a op b`` (one dtype) broadcast to ``shape``, a bool array."""
    out = _array._empty(shape, BOOL, a.device)
    s = _geometry(shape, _layout(a), _layout(b))
    _launch(_expression("aa_compare", a.dtype), a, out,
            [c_int(COMPARE[op]), c_void_p(a.ptr), c_void_p(b.ptr), c_void_p(out.ptr), c_longlong(math.prod(shape)), s])
    return out


def unary(op: str, x):
    out = _array._empty(x.shape, x.dtype, x.device)
    s = _geometry(x.shape, _layout(x))
    _launch(_expression("aa_unary", x.dtype), x, out,
            [c_int(UNARY[op]), c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), s])
    return out


def test(op: str, x):
    out = _array._empty(x.shape, BOOL, x.device)
    s = _geometry(x.shape, _layout(x))
    _launch(_expression("aa_test", x.dtype), x, out,
            [c_int(TESTS[op]), c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), s])
    return out


def cast(x, dtype: np.dtype):
    """``x`` (any strides) converted to ``dtype`` in a new C-contiguous array (also a same-dtype strided copy)."""
    out = _array._empty(x.shape, dtype, x.device)
    s = _geometry(x.shape, _layout(x))
    _launch(_expression("aa_cast", x.dtype, dtype), x, out,
            [c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), s])
    return out
