"""Device data-parallel gradient exchange (optional ops, see ``ops/collectives.py``): what magmadnn.distributed
uses, when a backend has it, to stage gradients through page-locked host memory or to hand device buffers to a
CUDA-aware MPI."""

from __future__ import annotations

import math

import numpy as np

from pymagma import kernels as _k
from pymagma import runtime as _runtime

from ._common import (
    _contiguous,
    _shape,
)


def host_empty(shape, dtype=np.float32) -> np.ndarray:
    """A NumPy array in page-locked host memory (cudaMallocHost): copies to and from it run at full speed."""
    return _runtime.pinned_empty(_shape(shape), dtype)


def copy_to_host(a, out: np.ndarray) -> np.ndarray:
    """Copy ``a`` into the C-contiguous host array ``out`` (same size and dtype) once its queue's work is done."""
    if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.size == a.size and out.dtype == a.dtype):
        raise ValueError(f"copy_to_host: out must be a C-contiguous {a.dtype} host array of {a.size} values")
    if a.size:
        a = _contiguous(a)
        a.queue.synchronize()
        _runtime.memcpy_dtoh(out, a.ptr)
    return out


def flat_pack(arrays, scale, out) -> None:
    """``scale * a`` of each array, flattened, one after the other into the 1-D DeviceArray ``out`` (one kernel
    each); returns once ``out`` is written (its queue synchronized), so that another library (MPI) may read it."""
    offset = 0
    for a in arrays:
        view = out[offset:offset + a.size]
        _k.binary("multiply", _contiguous(a).reshape(a.size), float(scale), out=view)
        offset += a.size
    if offset != out.size:
        raise ValueError(f"flat_pack: the arrays hold {offset} values, out {out.size}")
    out.queue.synchronize()


def flat_unpack(flat, shapes, divisor) -> list:
    """New DeviceArrays of ``shapes`` from consecutive values of ``flat``, each divided by ``divisor``."""
    out, offset = [], 0
    for shape in shapes:
        n = math.prod(shape)
        out.append(_k.binary("divide", flat[offset:offset + n].reshape(tuple(shape)), float(divisor)))
        offset += n
    return out
