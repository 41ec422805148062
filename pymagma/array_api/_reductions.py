"""``all``, ``any`` and ``reshape`` of the standard, composed from device kernels (the truth of each element as
float32 by the cast kernel, then the reduction kernel's min or sum over ``axis``); no host round trip."""

from __future__ import annotations

import numpy as np

from .. import kernels as _kernels
from ..kernels import array_api as _api_kernels
from . import _creation, _dtypes, _elementwise


def _truth(x):
    return _api_kernels.cast(_api_kernels.cast(x, _dtypes.bool), np.dtype(np.float32))


def _reduce(x, axis, keepdims, what: str, op: str, compare: str, empty: bool):
    x = _elementwise._require(x, what)
    axis = None if axis is None else (tuple(axis) if isinstance(axis, tuple | list) else axis)
    try:  # the result's shape and the axes' checks, as NumPy answers them (on a zero-memory view)
        shape = np.all(np.broadcast_to(np.zeros((), bool), x.shape), axis=axis, keepdims=keepdims).shape
    except (np.exceptions.AxisError, TypeError, ValueError) as exc:
        raise type(exc)(f"{what}: {exc}") from None
    if x.ndim == 0:
        return _api_kernels.cast(x, _dtypes.bool)
    if x.size == 0:  # nothing to reduce: the identity of the reduction (or an empty result)
        return _creation.full(shape, empty, device=x.device)
    return _elementwise.compare(compare, _kernels.reduce(op, _truth(x), axis, keepdims).reshape(shape), 0.0)


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001 (the standard's name)
    """Whether every element (along ``axis``) is true; True over an empty axis."""
    return _reduce(x, axis, keepdims, "all", "min", "not_equal", True)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Whether some element (along ``axis``) is true; False over an empty axis."""
    return _reduce(x, axis, keepdims, "any", "sum", "greater", False)


def reshape(x, /, shape, *, copy=None):
    """``x`` with a new shape: a view of a C-contiguous array; other layouts are copied on the device first
    (``copy=False`` refuses them, ``copy=True`` always copies)."""
    x = _elementwise._require(x, "reshape")
    if copy is False and not x.is_c_contiguous:
        raise ValueError(f"reshape(copy=False): an array with strides {x.strides} cannot be reshaped without a copy")
    if copy or not x.is_c_contiguous:
        x = _api_kernels.cast(x, x.dtype)
    return x.reshape(tuple(shape))
