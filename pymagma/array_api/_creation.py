"""The standard's creation functions.  Values made on the host (``full``, ``arange``, ``linspace``, ``eye``, host
data) are computed by NumPy and copied to the device once; ``zeros`` is a device memset; conversions of device
arrays run the cast kernel."""

from __future__ import annotations

import builtins

import numpy as np

from .. import array as _array
from .. import runtime
from ..kernels import array_api as _kernels
from . import _dtypes


def _device(device) -> int:
    return runtime.get_device() if device is None else _array._device_index(device)


def _default_dtype(value) -> np.dtype:
    if isinstance(value, builtins.bool):
        return _dtypes.bool
    if isinstance(value, int):
        return _dtypes.DEFAULT["integral"]
    if isinstance(value, complex):
        return _dtypes.DEFAULT["complex floating"]
    return _dtypes.DEFAULT["real floating"]


def _host(values: np.ndarray, device) -> _array.DeviceArray:
    if not values.dtype.isnative:  # big-endian host data: its dtype in the native order, as NumPy reads it
        values = values.astype(values.dtype.newbyteorder("="))
    _dtypes.check(values.dtype, "asarray")
    return _array.asarray(values, device=_device(device))


def _host_leaves(obj):
    """A nested sequence with its DeviceArray elements (0-d arrays, as ``[x[0], x[1]]``) read to the host: the
    explicit copy asarray was asked for."""
    if isinstance(obj, _array.DeviceArray):
        return np.from_dlpack(obj, device="cpu")
    if isinstance(obj, list | tuple):
        return [_host_leaves(v) for v in obj]
    return obj


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """A DeviceArray from a DeviceArray, a CUDA array (DLPack or ``__cuda_array_interface__``), a NumPy array, a
    Python scalar or nested sequence.  ``copy``: True always copies, False never (a ValueError where a copy is
    needed, e.g. host data or another dtype), None copies only when needed."""
    dtype = None if dtype is None else _dtypes.check(dtype, "asarray")
    if isinstance(obj, _array.DeviceArray):
        _dtypes.check(obj.dtype, "asarray")
        if device is not None and _array._device_index(device) != obj.device:
            raise ValueError(f"asarray: the array is on device {obj.device}, not {device} (no cross-device copy)")
        converts = dtype is not None and dtype != obj.dtype
        if copy is False and converts:
            raise ValueError(f"asarray(copy=False): converting {obj.dtype} to {dtype} needs a copy")
        if converts or copy:
            return _kernels.cast(obj, dtype or obj.dtype)
        return obj
    if hasattr(obj, "__cuda_array_interface__") or (
            hasattr(obj, "__dlpack_device__") and not isinstance(obj, np.ndarray | np.generic)
            and obj.__dlpack_device__()[0] != 1):
        return asarray(_array.asarray(obj), dtype=dtype, device=device, copy=copy)
    if copy is False:
        raise ValueError("asarray(copy=False): host data must be copied to the device")
    if isinstance(obj, np.ndarray | np.generic):
        values = np.asarray(obj, dtype=dtype)
    elif dtype is None and isinstance(obj, builtins.bool | int | float | complex):
        values = np.asarray(obj, dtype=_default_dtype(obj))
    else:
        values = np.asarray(_host_leaves(obj), dtype=dtype)
        if dtype is None and values.dtype.kind in "fc":
            values = values.astype(_dtypes.DEFAULT["real floating" if values.dtype.kind == "f" else "complex floating"])
    return _host(values, device)


def empty(shape, *, dtype=None, device=None):
    return _array.empty(shape, _dtypes.check(dtype or _dtypes.DEFAULT["real floating"], "empty"), _device(device))


def zeros(shape, *, dtype=None, device=None):
    return _array.zeros(shape, _dtypes.check(dtype or _dtypes.DEFAULT["real floating"], "zeros"), _device(device))


def full(shape, fill_value, *, dtype=None, device=None):
    dtype = _dtypes.check(dtype or _default_dtype(fill_value), "full")
    _dtypes.scalar_dtype(fill_value, dtype, "full") if isinstance(fill_value, builtins.bool | int | float | complex) \
        else None
    return _host(np.full(_array._normalize_shape(shape), fill_value, dtype=dtype), device)


def ones(shape, *, dtype=None, device=None):
    dtype = _dtypes.check(dtype or _dtypes.DEFAULT["real floating"], "ones")
    return _host(np.ones(_array._normalize_shape(shape), dtype=dtype), device)


def _like(x, dtype, device):
    return dict(dtype=x.dtype if dtype is None else dtype, device=x.device if device is None else device)


def empty_like(x, /, *, dtype=None, device=None):
    return empty(x.shape, **_like(x, dtype, device))


def zeros_like(x, /, *, dtype=None, device=None):
    return zeros(x.shape, **_like(x, dtype, device))


def ones_like(x, /, *, dtype=None, device=None):
    return ones(x.shape, **_like(x, dtype, device))


def full_like(x, /, fill_value, *, dtype=None, device=None):
    return full(x.shape, fill_value, **_like(x, dtype, device))


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        ints = all(isinstance(v, int) and not isinstance(v, builtins.bool) for v in (start, stop, step))
        dtype = _dtypes.DEFAULT["integral" if ints else "real floating"]
    return _host(np.arange(start, stop, step, dtype=_dtypes.check(dtype, "arange")), device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    default = "complex floating" if isinstance(start, complex) or isinstance(stop, complex) else "real floating"
    dtype = _dtypes.check(dtype or _dtypes.DEFAULT[default], "linspace")
    if dtype.kind not in "fc":
        raise TypeError(f"linspace needs a floating dtype, got {dtype}")
    return _host(np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype), device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    dtype = _dtypes.check(dtype or _dtypes.DEFAULT["real floating"], "eye")
    return _host(np.eye(n_rows, n_cols, k=k, dtype=dtype), device)


def from_dlpack(x, /, *, device=None, copy=None):
    """A DeviceArray from a DLPack producer: CUDA tensors are imported without a copy (``copy=True`` copies them
    on the device); host tensors are copied to the device (``copy=False`` refuses them)."""
    if x.__dlpack_device__()[0] == 1:  # kDLCPU
        if copy is False:
            raise BufferError("from_dlpack(copy=False): a host tensor cannot be viewed from the device")
        return asarray(np.from_dlpack(x), device=device)
    return asarray(_array.from_dlpack(x), device=device, copy=copy)


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` converted to ``dtype`` by the cast kernel (a copy unless ``copy=False`` and the dtype is already
    ``x``'s)."""
    dtype = _dtypes.check(dtype, "astype")
    if not isinstance(x, _array.DeviceArray):
        raise TypeError(f"astype: expected a pymagma DeviceArray, got {type(x).__name__}")
    if device is not None and _array._device_index(device) != x.device:
        raise ValueError(f"astype: the array is on device {x.device}, not {device} (no cross-device copy)")
    if dtype == x.dtype and not copy:
        return x
    if x.dtype.kind == "c" and dtype.kind not in "cb":
        raise TypeError(f"astype: a {x.dtype} array does not cast to {dtype} (the standard leaves complex to real "
                        "undefined); take real(x), imag(x) or abs(x) first")
    return _kernels.cast(x, dtype)

