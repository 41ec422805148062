"""Device creation and transfer: new DeviceArrays (on the current GPU, or on GPU n through ``_creation_ops(n)``,
see the package's ``for_index``) and the one op that copies data to the host."""

from __future__ import annotations

import numpy as np

from pymagma import array as _array
from pymagma import kernels as _k
from pymagma.array import DeviceArray as _DeviceArray

from ._common import (
    _copy_any,
    _is_float,
    _shape,
)
from .graphs import cached_constant as _cached_constant


def _creation_ops(device: int | None) -> dict:
    """The ops that make new arrays, allocating on GPU ``device`` (None: the current GPU)."""

    def asarray(x, dtype=None):
        """``x`` as a DeviceArray; host floats of Python type become float32, NumPy arrays keep their dtype."""
        if isinstance(x, _DeviceArray):
            if dtype is None or np.dtype(dtype) == x.dtype:
                return x
            return _k.cast(x, dtype)
        if dtype is not None:
            host = np.asarray(x, dtype=dtype)
        elif isinstance(x, (np.ndarray, np.generic)):
            host = np.asarray(x)
        else:
            host = np.asarray(x)
            if host.dtype == np.float64:
                host = host.astype(np.float32)
        return _array.asarray(host, device=device)

    def constant(value, dtype=None):
        """``asarray(value, dtype)`` made once per value and device and kept (see ``graphs``)."""
        host = np.asarray(value, dtype=dtype)
        if dtype is None and not isinstance(value, (np.ndarray, np.generic)) and host.dtype == np.float64:
            host = host.astype(np.float32)
        return _cached_constant(device, host, lambda h: _array.asarray(h, device=device))

    def zeros(shape, dtype=np.float32):
        return _array.zeros(_shape(shape), dtype, device=device)

    def full(shape, value, dtype=np.float32):
        if _is_float(dtype):
            return _k.fill(_array.empty(_shape(shape), dtype, device=device), float(value))
        return _array.full(_shape(shape), value, dtype, device=device)

    def ones(shape, dtype=np.float32):
        return full(shape, 1.0, dtype)

    return {"asarray": asarray, "constant": constant, "zeros": zeros, "ones": ones, "full": full}


globals().update(_creation_ops(None))


def to_numpy(a) -> np.ndarray:
    """A host copy of ``a`` (the only op that moves data to the host)."""
    return a.get() if isinstance(a, _DeviceArray) else np.asarray(a)


def zeros_like(a):
    return _array.zeros(a.shape, a.dtype, device=a.device)


def copy(a):
    return _copy_any(a)
