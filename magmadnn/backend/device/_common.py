"""Helpers the device topics share: operand checks, dtype rules, contiguous copies."""

from __future__ import annotations

import operator

import numpy as np

from pymagma import array as _array
from pymagma import kernels as _k
from pymagma.array import DeviceArray as _DeviceArray


def _is_array(a) -> bool:
    return isinstance(a, _DeviceArray)


def _is_scalar(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _contiguous(a):
    return a if a.is_c_contiguous else _copy_any(a)


_copy_any = _k.copy_any  # a C-contiguous device copy of any view (pymagma's: dtypes no kernel has as bytes)


def _retype(a, dtype):
    """The same memory seen with another dtype of the same item size."""
    return _DeviceArray(a.shape, dtype, a.ptr, a.strides, owner=a, device=a.device)


def _same_dtype(fn: str, *arrays) -> None:
    first = arrays[0].dtype if arrays[0] is not None else None
    for a in arrays:
        if a is not None and a.dtype is not first:
            break
    else:
        return  # one dtype object: the common case, answered without building a set
    dtypes = {a.dtype for a in arrays if a is not None}
    if len(dtypes) > 1:
        raise TypeError(f"{fn}: operands have dtypes {sorted(str(d) for d in dtypes)}; the op set does not promote, "
                        "convert one with asarray(x, dtype)")


def _operand(v, like, fn: str):
    """A binary op's operand: DeviceArrays and scalars as they are, host arrays moved to ``like``'s device."""
    if _is_array(v) or _is_scalar(v):
        return v
    if isinstance(v, (np.ndarray, list, tuple)):
        dtype = like.dtype if _is_array(like) else None
        return _array.asarray(np.asarray(v, dtype=dtype), device=like.device if _is_array(like) else None)
    raise TypeError(f"{fn}: expected a DeviceArray or a scalar, got {type(v).__name__}")


def _binary(op: str, a, b):
    a_array, b_array = isinstance(a, _DeviceArray), isinstance(b, _DeviceArray)
    if not (a_array and b_array):
        a, b = _operand(a, b, op), _operand(b, a, op)
        a_array, b_array = isinstance(a, _DeviceArray), isinstance(b, _DeviceArray)
        if not (a_array or b_array):
            raise TypeError(f"{op}: at least one operand must be a DeviceArray, got {type(a).__name__} and "
                            f"{type(b).__name__}")
    if a_array and b_array and a.dtype is not b.dtype:
        _same_dtype(op, a, b)
    return _k.binary(op, a, b)


_FLOAT: dict = {}  # dtype argument -> whether pymagma's kernels take it as a floating dtype


def _is_float(dtype) -> bool:
    try:
        return _FLOAT[dtype]
    except KeyError:
        found = _FLOAT[dtype] = np.dtype(dtype).name in _k.FLOAT_DTYPES
        return found
    except TypeError:  # an unhashable dtype description
        return np.dtype(dtype).name in _k.FLOAT_DTYPES


def _shape(shape) -> tuple[int, ...]:
    return (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(int(s) for s in shape)


def _int64_labels(labels):
    if labels.dtype.kind in "iu" and labels.dtype != np.int64:
        return _k.cast(labels, np.int64)
    return labels


