"""Launches of the array API's kernel families (``kernels/array_api.cu``): binary and comparison over two strided,
broadcast operands of one dtype, unary and float tests over one strided operand, and the strided cast; for
manipulation and indexing the strided assignment, tril/triu, integer-index gathers and scatters and the boolean-mask
compaction.  Elementwise results are new C-contiguous arrays on the first operand's device; dtypes are the caller's
business (see ``_elementwise``).  Complex operands run ``kernels/array_api_complex.cu`` (:mod:`.array_api_complex`)."""

from __future__ import annotations

import functools
import math
from ctypes import c_int, c_longlong, c_void_p

import numpy as np

from .. import array as _array
from . import array_api_complex as _complex
from .common import _run, make_strides3
from .common import geometry as _geometry
from .common import layout as _layout

#: binary op codes of aa_binary_op
BINARY = {"add": 0, "subtract": 1, "multiply": 2, "divide": 3, "floor_divide": 4, "remainder": 5, "pow": 6,
          "maximum": 7, "minimum": 8, "logical_and": 9, "logical_or": 10, "logical_xor": 11, "bitwise_and": 12,
          "bitwise_or": 13, "bitwise_xor": 14, "bitwise_left_shift": 15, "bitwise_right_shift": 16,
          "atan2": 17, "copysign": 18, "hypot": 19, "logaddexp": 20, "nextafter": 21}
#: comparison codes of aa_compare_op
COMPARE = {"equal": 0, "not_equal": 1, "less": 2, "less_equal": 3, "greater": 4, "greater_equal": 5}
#: unary codes of aa_unary_op
UNARY = {"negative": 0, "positive": 1, "abs": 2, "square": 3, "sqrt": 4, "exp": 5, "log": 6, "expm1": 7,
         "log1p": 8, "log2": 9, "log10": 10, "sin": 11, "cos": 12, "tan": 13, "tanh": 14, "floor": 15, "ceil": 16,
         "trunc": 17, "round": 18, "sign": 19, "reciprocal": 20, "logical_not": 21, "bitwise_invert": 22,
         "acos": 23, "acosh": 24, "asin": 25, "asinh": 26, "atan": 27, "atanh": 28, "cosh": 29, "sinh": 30}
#: float test codes of aa_test_op (bool results)
TESTS = {"isnan": 0, "isinf": 1, "isfinite": 2, "signbit": 3}
BOOL = np.dtype(bool)


@functools.lru_cache(maxsize=256)
def _expression(kernel: str, *dtypes) -> str:
    return f"{kernel}<{', '.join(_complex.c_type(np.dtype(d).name) for d in dtypes)}>"


def _launch(expression: str, like, out, args) -> None:
    if like.dtype.kind == "c":  # the complex instantiations of the data-movement kernels
        _complex.launch(expression, like, out.size, args)
    else:
        _run("array_api", expression, like, out.size, args)


def binary(op: str, a, b, shape: tuple):
    """``a op b`` (one dtype) broadcast to ``shape``."""
    if a.dtype.kind == "c":
        return _complex.binary(BINARY[op], a, b, shape)
    out = _array._empty(shape, a.dtype, a.device)
    s = _geometry(shape, _layout(a), _layout(b))
    _launch(_expression("aa_binary", a.dtype), a, out,
            [c_int(BINARY[op]), c_void_p(a.ptr), c_void_p(b.ptr), c_void_p(out.ptr), c_longlong(math.prod(shape)), s])
    return out


def compare(op: str, a, b, shape: tuple):
    """``a op b`` (one dtype) broadcast to ``shape``, a bool array."""
    if a.dtype.kind == "c":
        return _complex.compare(COMPARE[op], a, b, shape)
    out = _array._empty(shape, BOOL, a.device)
    s = _geometry(shape, _layout(a), _layout(b))
    _launch(_expression("aa_compare", a.dtype), a, out,
            [c_int(COMPARE[op]), c_void_p(a.ptr), c_void_p(b.ptr), c_void_p(out.ptr), c_longlong(math.prod(shape)), s])
    return out


def unary(op: str, x):
    if x.dtype.kind == "c":
        return _complex.unary(_complex.CONJ if op == "conj" else UNARY[op], x)
    out = _array._empty(x.shape, x.dtype, x.device)
    s = _geometry(x.shape, _layout(x))
    _launch(_expression("aa_unary", x.dtype), x, out,
            [c_int(UNARY[op]), c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), s])
    return out


def test(op: str, x):
    if x.dtype.kind == "c":
        return _complex.test(op, x)
    out = _array._empty(x.shape, BOOL, x.device)
    s = _geometry(x.shape, _layout(x))
    _launch(_expression("aa_test", x.dtype), x, out,
            [c_int(TESTS[op]), c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), s])
    return out


def cast(x, dtype: np.dtype):
    """``x`` (any strides) converted to ``dtype`` in a new C-contiguous array (also a same-dtype strided copy)."""
    if x.dtype.kind == "c" or dtype.kind == "c":
        return _complex.cast(x, dtype)
    out = _array._empty(x.shape, dtype, x.device)
    s = _geometry(x.shape, _layout(x))
    _launch(_expression("aa_cast", x.dtype, dtype), x, out,
            [c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), s])
    return out


def _elements(a) -> tuple:
    return tuple(s // a.itemsize for s in a.strides)


def assign(src, dst) -> None:
    """``dst[...] = src`` (one dtype; ``src`` broadcast to ``dst``'s shape, any strides on both sides)."""
    if dst.size == 0:
        return
    lead = dst.ndim - src.ndim
    s_src = (0,) * lead + tuple(0 if n == 1 else s for n, s in zip(src.shape, _elements(src)))
    s = make_strides3(dst.shape, s_src, _elements(dst))
    _launch(_expression("aa_assign", dst.dtype), dst, dst, [c_void_p(src.ptr), c_void_p(dst.ptr),
                                                          c_longlong(dst.size), s])


def tri(x, k: int, upper: bool):
    """tril (``upper`` False) or triu of the last two axes of ``x``, a new C-contiguous array."""
    out = _array._empty(x.shape, x.dtype, x.device)
    s = _geometry(x.shape, _layout(x))
    _launch(_expression("aa_tri", x.dtype), x, out, [c_void_p(x.ptr), c_void_p(out.ptr), c_longlong(out.size), s,
                                                     c_longlong(x.shape[-2]), c_longlong(x.shape[-1]),
                                                     c_longlong(k), c_int(int(upper))])
    return out


INT64 = np.dtype(np.int64)


def index_offsets(idx, shape: tuple, length: int, stride: int, off=None):
    """Element offsets ``wrap(idx) * stride`` (``idx`` broadcast to ``shape``, clamped into ``length``) as a new
    C-contiguous int64 array, or added into ``off``."""
    out = _array._empty(shape, INT64, idx.device) if off is None else off
    s = _geometry(shape, _layout(idx))
    _launch(_expression("aa_index_offsets", idx.dtype), idx, out,
            [c_void_p(idx.ptr), c_void_p(out.ptr), c_longlong(out.size), s, c_longlong(length), c_longlong(stride),
             c_int(off is not None)])
    return out


def gather(x, off, shape: tuple, x_strides: tuple, off_strides: tuple, y=None):
    """``y = x[base + off]`` over ``shape`` (element strides of ``x`` and ``off`` given per axis), a new
    C-contiguous array; with ``y`` given (a strided array of ``shape``), the scatter ``x[base + off] = y``."""
    scatter = y is not None
    out = y if scatter else _array._empty(shape, x.dtype, x.device)
    s = make_strides3(shape, x_strides, off_strides, _elements(out))
    _launch(_expression("aa_gather", x.dtype), x, out, [c_void_p(x.ptr), c_void_p(off.ptr), c_void_p(out.ptr),
                                                        c_longlong(math.prod(shape)), s, c_int(int(scatter))])
    return out


_CHUNKS = 4096


def mask_positions(mask):
    """(positions, counts): each element's place among the true elements of ``mask`` (C order; -1 where false),
    an int64 array of the mask's shape, and the chunk counts whose last element is the number of true ones."""
    n = mask.size
    chunks = max(1, min(n, _CHUNKS))
    chunk = -(-n // chunks) if n else 1
    counts = _array._empty((chunks + 1,), INT64, mask.device)
    pos = _array._empty(mask.shape, INT64, mask.device)
    s = _geometry(mask.shape, _layout(mask))
    _run("array_api", "aa_mask_count<bool>", mask, chunks,
                  [c_void_p(mask.ptr), c_void_p(counts.ptr), c_longlong(n), c_longlong(chunk), c_longlong(chunks), s])
    _run("array_api", "aa_mask_scan<i64>", mask, 1, [c_void_p(counts.ptr), c_longlong(chunks)], grid=1)
    _run("array_api", "aa_mask_positions<bool>", mask, chunks,
                  [c_void_p(mask.ptr), c_void_p(counts.ptr), c_void_p(pos.ptr), c_longlong(n), c_longlong(chunk),
                   c_longlong(chunks), s])
    return pos, counts


def mask_move(x, pos, y, inner: int, row: int, put: bool) -> None:
    """Over ``x`` (its leading axes the mask's, then ``inner`` elements): ``y[pos * inner + r] = x`` where the mask
    is true, or (``put``) ``x = y[pos * row + r]``; ``y`` C-contiguous."""
    if x.size == 0:
        return
    mask_dims = pos.ndim
    pos_strides = _elements(pos) + (0,) * (x.ndim - mask_dims)
    s = make_strides3(x.shape, _elements(x), pos_strides)
    _launch(_expression("aa_mask_move", x.dtype), x, x, [c_void_p(x.ptr), c_void_p(pos.ptr), c_void_p(y.ptr),
                                                        c_longlong(x.size), c_longlong(inner), c_longlong(row), s,
                                                        c_int(int(put))])
