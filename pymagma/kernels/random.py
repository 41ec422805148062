"""Launchers of random.cu: Philox4x32-10 uniform and normal numbers (the stream of philox.cuh)."""

from __future__ import annotations

from ctypes import c_double, c_longlong, c_ulonglong

import numpy as np

from .. import _checks
from .. import array as _array
from . import programs
from .common import _float_dtype, _ptr, _run


def _seed_and_offset(seed, offset) -> tuple[int, int]:
    """Philox key and stream: integers in [0, 2**64) (a float such as 1.5 is a TypeError, not truncated)."""
    return (_checks.count(seed, "seed", maximum=2**64 - 1), _checks.count(offset, "offset", maximum=2**64 - 1))


def _random(kernel: str, shape, a: float, b: float, seed: int, offset: int, dtype, out, device):
    arr = _array
    if out is None:
        out = arr.empty(shape, dtype, device=device)
    name = _float_dtype(out, kernel)
    if not out.is_c_contiguous:
        raise ValueError(f"{kernel}: out must be C-contiguous")
    seed, offset = _seed_and_offset(seed, offset)
    n = out.size
    _run("random", programs.expression(kernel, name), out, (n + 1) // 2,
         [_ptr(out), c_longlong(n), c_ulonglong(int(seed)), c_ulonglong(int(offset)), c_double(a), c_double(b)])
    return out


def uniform(shape=None, low: float = 0.0, high: float = 1.0, *, seed: int, offset: int = 0, dtype=np.float32,
            out=None, device=None):
    """Uniform numbers in [low, high] from Philox4x32-10 keyed by ``seed``; ``offset`` selects another stream.

    The underlying doubles lie in (0, 1] (1.0 with probability 2^-53), and rounding to the output dtype can reach
    either end (for float32 about once in 3e7 draws): do not rely on an open interval."""
    return _random("uniform", shape, low, high, seed, offset, dtype, out, device)


def normal(shape=None, mean: float = 0.0, std: float = 1.0, *, seed: int, offset: int = 0, dtype=np.float32,
           out=None, device=None):
    """Normal numbers (Box-Muller on Philox4x32-10 uniforms) with ``mean`` and ``std``."""
    return _random("normal", shape, mean, std, seed, offset, dtype, out, device)
