"""Launchers of dropout.cu: inverted dropout on pymagma's Philox stream (that of :func:`pymagma.kernels.uniform`)."""

from __future__ import annotations

import numbers
from ctypes import c_double, c_longlong, c_ulonglong

from pymagma import _native
from pymagma import array as _array
from pymagma._checks import Plans
from pymagma.kernels import programs
from pymagma.kernels.common import _float_dtype, _run
from pymagma.kernels.elementwise import contiguous
from pymagma.kernels.loader import MAX_BLOCKS, THREADS
from pymagma.kernels.random import _seed_and_offset


def dropout(x, rate: float, *, seed: int, offset: int = 0):
    """Inverted dropout of ``x`` on the :func:`pymagma.kernels.uniform` stream of (seed, offset): returns
    ``(y, mask)`` with u rounded to x's dtype, mask = (u >= rate) * (1 / (1 - rate)) and y = x * mask, all in x's
    dtype.  A call whose ``x`` (class, shape, dtype, device) and rate were checked before launches in this one
    frame (the seed and offset checked per call)."""
    try:
        key = (x.__class__, x.shape, x.dtype, x.device, rate.__class__, rate)
        decided = _PLANS.get(key)
    except (AttributeError, TypeError):  # not an array (or unhashable): the checked path names what is wrong
        key = decided = None
    if decided is not None and seed.__class__ is int and offset.__class__ is int and 0 <= seed < _LIMIT and \
            0 <= offset < _LIMIT:  # (_seed_and_offset's common case, inline)
        expression, grid, size, rate_c = decided
        if not x.is_c_contiguous:
            x = contiguous(x)
        shape, dtype, device = x.shape, x.dtype, x.device
        y, mask = _array._empty(shape, dtype, device), _array._empty(shape, dtype, device)
        if grid:  # (common._run, inline)
            libraries = _native.current
            libraries.launcher.launch("dropout", expression, device,
                                      (libraries.default_queues.get(device) or x.queue).stream, grid, THREADS,
                                      [x.ptr, y.ptr, mask.ptr, size, c_ulonglong(seed), c_ulonglong(offset), rate_c])
        return y, mask
    dtype = _float_dtype(x, "dropout")
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"dropout rate must be a real number in [0, 1), got {rate!r}")
    seed, offset = _seed_and_offset(seed, offset)
    x = contiguous(x)
    arr = _array
    y, mask = arr.empty(x.shape, x.dtype, device=x.device), arr.empty(x.shape, x.dtype, device=x.device)
    n = (x.size + 1) // 2
    expression, size, rate_c = programs.expression("dropout", dtype), c_longlong(x.size), c_double(float(rate))
    _run("dropout", expression, x, n, [x.ptr, y.ptr, mask.ptr, size, c_ulonglong(int(seed)), c_ulonglong(int(offset)),
                                       rate_c])
    if key is not None and x.__class__ is _array.DeviceArray:
        _PLANS.keep(key, (expression, min(-(-n // THREADS), MAX_BLOCKS) if n else 0, size, rate_c))
    return y, mask


#: {(x's class, shape, dtype and device, the rate and its type): (expression, grid (0: no launch), the size and rate
#: as the kernel's never-modified arguments)} of a checked :func:`dropout`; errors are never kept
_PLANS = Plans()
_LIMIT = 2**64  # (seeds and offsets are integers in [0, 2**64))
