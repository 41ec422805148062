"""Out-of-range integer indices on the device, reported as NumPy reports them (``IndexError: index 7 is out of
bounds for axis 0 with size 5``) without a new synchronisation.

Each index array of ``take``, ``take_along_axis`` and integer-array ``__getitem__`` / ``__setitem__`` is checked by
one kernel (``kernels.check.check_range``) into a per-device fault record: the first index outside ``[-n, n)`` (its
value and position) and which axis it indexed. The gather itself still clamps, so no memory outside the array is
touched. The record rides on the next host read of that device (``DeviceArray.get()``, ``int(x)``, ``bool(x)``...):
once a check ran there, the read copies the 32-byte record after its data, in the same synchronisation, and raises
the ``IndexError`` before the values are used. Like CUDA's own asynchronous errors, the error comes at that read,
which may be of another array than the indexed one; nothing is read before any check ran.
"""

from __future__ import annotations

import numpy as np

from .. import array as _array
from .. import runtime, simulator
from ..kernels import array_api as _kernels
from ..kernels import check as _check

__all__ = ["checked_offsets", "raise_recorded"]

_records: dict[int, object] = {}  # device -> int64 (4,) record, once a check ran there
_armed: set[int] = set()  # devices whose record a check may have written since the last read
_sites: list[tuple[int, int]] = []  # site - 1 -> (axis, size)
_site_of: dict[tuple[int, int], int] = {}


def _record(device: int):
    record = _records.get(device)
    if record is None:
        record = _records[device] = _array.asarray(np.zeros(_check.FAULT_RECORD, np.int64), device=device)
    return record


def _site(axis: int, size: int) -> int:
    key = (axis, size)
    if key not in _site_of:
        _sites.append(key)
        _site_of[key] = len(_sites)
    return _site_of[key]


def checked_offsets(idx, shape: tuple, length: int, stride: int, axis: int, off=None):
    """``kernels.array_api.index_offsets`` with ``idx`` checked against ``[-length, length)`` first (one kernel, no
    read); the fault names ``axis`` and ``length``."""
    values = idx if idx.dtype.name in ("int64", "int32") else _kernels.cast(idx, np.dtype(np.int64))
    _check.check_range(values, -length, length, _record(idx.device), _site(axis, length))
    _armed.add(idx.device)
    return _kernels.index_offsets(idx, shape, length, stride, off)


def raise_recorded(device: int) -> None:
    """Called by a host read of ``device`` after its synchronisation: the IndexError a check recorded there, if any
    (the record is cleared first)."""
    if device not in _armed or simulator.mode() == "null":
        return
    _armed.discard(device)
    record = _records[device]
    values = runtime.memcpy_dtoh(np.empty(_check.FAULT_RECORD, np.int64), record.ptr)
    site = int(values[0])
    if not 0 < site <= len(_sites):
        return
    runtime.memcpy_htod(record.ptr, np.zeros(_check.FAULT_RECORD, np.int64))
    bits = (int(values[2]) << 32) | (int(values[1]) & 0xFFFFFFFF)
    value = bits - (1 << 64) if bits >= 1 << 63 else bits
    axis, size = _sites[site - 1]
    raise IndexError(f"index {value} is out of bounds for axis {axis} with size {size}")
