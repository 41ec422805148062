"""Launchers of dropout.cu: inverted dropout on pymagma's Philox stream (that of :func:`pymagma.kernels.uniform`)."""

from __future__ import annotations

import numbers
from ctypes import c_double, c_longlong, c_ulonglong

from pymagma import array as _array
from pymagma.kernels import programs
from pymagma.kernels.common import _float_dtype, _run
from pymagma.kernels.elementwise import contiguous
from pymagma.kernels.random import _seed_and_offset


def dropout(x, rate: float, *, seed: int, offset: int = 0):
    """Inverted dropout of ``x`` on the :func:`pymagma.kernels.uniform` stream of (seed, offset): returns
    ``(y, mask)`` with u rounded to x's dtype, mask = (u >= rate) * (1 / (1 - rate)) and y = x * mask, all in x's
    dtype."""
    dtype = _float_dtype(x, "dropout")
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"dropout rate must be a real number in [0, 1), got {rate!r}")
    seed, offset = _seed_and_offset(seed, offset)
    x = contiguous(x)
    arr = _array
    y, mask = arr.empty(x.shape, x.dtype, device=x.device), arr.empty(x.shape, x.dtype, device=x.device)
    _run("dropout", programs.expression("dropout", dtype), x, (x.size + 1) // 2,
         [x.ptr, y.ptr, mask.ptr, c_longlong(x.size), c_ulonglong(int(seed)), c_ulonglong(int(offset)),
          c_double(float(rate))])
    return y, mask
