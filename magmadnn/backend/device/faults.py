"""Checks of the values an op needs (embedding ids inside the table, attention key masks of 0 and 1) done on the
device, exported by the device package as the optional ops ``check_range``, ``check_binary``, ``fault_record`` and
``fault_error`` (see ``ops/faults.py``).

A check queues one small kernel (:func:`.kernels.check_range`, :func:`~.kernels.check_binary`) that
writes the first failing value into its device's fault record; nothing is read back. The host reads the record
together with what it reads anyway (:func:`magmadnn.backend.faults.read`: fit's progress read, a checked step's loss,
the end of ``predict`` and ``evaluate``) and raises the error the host backend raises for the same value: the
caller's message, ``{bad}`` standing for the value. A step captured as a CUDA graph keeps its checks: the kernels are
part of the graph, the record (made by the first, eager, check) lives outside it.
"""

from __future__ import annotations

import struct
import weakref

import numpy as np

from pymagma import _native
from pymagma import array as _array
from pymagma import graphs as _graphs
from pymagma import kernels as _kernels
from pymagma import queue as _queue
from pymagma import simulator as _simulator
from pymagma._checks import Plans

from . import kernels as _dk

__all__ = ["check_range", "check_binary", "fault_record", "fault_error"]

_records: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a device's default queue -> its fault record
_sites: dict[tuple[str, bool], int] = {}  # (message, integer values) -> site number (1, 2, ...)
_messages: list[tuple[str, bool]] = []  # site - 1 -> (message, integer values)


def _record(device: int):
    """The fault record of ``device``, made (zeros) by the first check there: never inside a capture, where the
    allocation would belong to the graph and the zeros would be written again by every replay."""
    q = _queue.default_queue(device)
    record = _records.get(q)
    if record is None:
        if _graphs.capturing() is not None:
            raise RuntimeError("a device check's fault record is made by the first eager run of the check; a step "
                               "is captured only after an eager run of it (compile(graph=True) does so)")
        record = _records[q] = _array.zeros((_dk.FAULT_RECORD,), np.int64, device=device)
    return record


def _site(message: str, integral: bool) -> int:
    key = (message, integral)
    site = _sites.get(key)
    if site is None:
        _messages.append(key)
        site = _sites[key] = len(_messages)
    return site


def _checked(x) -> tuple[bool, bool]:
    """(whether ``x`` needs the check, whether its values are integers)."""
    name = _kernels.programs.dtype_name(x.dtype)
    if name == "bool" or x.size == 0:
        return False, False
    if name not in _dk.CHECK_DTYPES:
        raise TypeError(f"device checks take {', '.join(_dk.CHECK_DTYPES)} or bool values, got {name}")
    return True, name in ("int64", "int32")


#: {(x's class, dtype and device, the bounds and their types, the message): (its site, the device's default queue and
#: its fault record by weak reference)}: what a check with the signature decided (that ``x`` takes the check, whether
#: its values are integers, the message's site number, the record it writes)
_PLANNED = Plans()


def check_range(x, low, high, message):
    """Every element of ``x`` in ``[low, high)``; the first one outside is reported as ``ValueError(message.format(
    bad=value))`` at the next read of the device (nothing is read here).  Planned per dtype, bounds and message: a
    repeated check looks up its device's record and launches."""
    try:
        key = (x.__class__, x.dtype, x.device, low.__class__, low, high.__class__, high, message)
        planned = _PLANNED.get(key)
    except (AttributeError, TypeError):  # not an array (or unhashable): the checked path names what is wrong
        key = planned = None
    if planned is not None and x.size:
        site, queue_ref, record_ref = planned
        queue = _native.current.default_queues.get(x.device)  # (default_queue's fast path, inline)
        # the record the plan's check made on the device's queue while that queue is still the default one (a
        # record never changes while its queue lives): the launch
        if queue is not None and queue_ref() is queue and (record := record_ref()) is not None:
            _dk.check_range(x, low, high, record, site)
            return
    needed, integral = _checked(x)
    if needed:
        site = _site(message, integral)
        record = _record(x.device)
        _dk.check_range(x, low, high, record, site)
        if key is not None:  # (by weak references: a plan keeps neither the queue nor the record alive)
            _PLANNED.keep(key, (site, weakref.ref(_queue.default_queue(x.device)), weakref.ref(record)))


def check_binary(x, message):
    """Every element of ``x`` 0 or 1 (booleans pass), reported as :func:`check_range` reports; planned per dtype and
    message as :func:`check_range` is."""
    try:
        key = ("binary", x.__class__, x.dtype, x.device, message)
        planned = _PLANNED.get(key)
    except (AttributeError, TypeError):  # not an array (or unhashable): the checked path names what is wrong
        key = planned = None
    if planned is not None and x.size:
        site, queue_ref, record_ref = planned
        queue = _native.current.default_queues.get(x.device)  # (as in check_range)
        if queue is not None and queue_ref() is queue and (record := record_ref()) is not None:
            _dk.check_binary(x, record, site)
            return
    needed, integral = _checked(x)
    if needed:
        site = _site(message, integral)
        record = _record(x.device)
        _dk.check_binary(x, record, site)
        if key is not None:
            _PLANNED.keep(key, (site, weakref.ref(_queue.default_queue(x.device)), weakref.ref(record)))


def fault_record(like):
    """The fault record of ``like``'s device once a check ran there (four int64: site, value bits, index), else
    None: a read of ``like`` may carry it along (:func:`magmadnn.backend.faults.read`). None on the simulator's null
    device too, whose memory holds no results."""
    if not isinstance(like, _array.DeviceArray) or _simulator.mode() == "null":
        return None
    return _records.get(_queue.default_queue(like.device))


def fault_error(record, values):
    """The error recorded in ``values`` (the host copy of ``record``, any numeric dtype), or None when it holds
    none; the record is cleared for the next check."""
    site = int(values[0])
    if not 0 < site <= len(_messages):
        return None
    record.set(np.zeros(_dk.FAULT_RECORD, np.int64))
    bits = (int(values[2]) << 32) | int(values[1])
    message, integral = _messages[site - 1]
    if integral:
        bad = bits - (1 << 64) if bits >= 1 << 63 else bits
    else:
        bad = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return ValueError(message.format(bad=bad))
