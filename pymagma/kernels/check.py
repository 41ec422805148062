"""Launchers of check.cu: value checks (a range, 0/1 values) reported through a fault record on the device, nothing
read back: the array API's integer indices and magmadnn's op arguments use them."""

from __future__ import annotations

from ctypes import c_double, c_longlong

from .. import _checks
from . import programs
from .common import _device_array, _run
from .elementwise import contiguous
from .programs import FLOAT_DTYPES

#: The length of a fault record (int64): site (0: none), low and high 32 bits of the value's 64 bits, flat index.
FAULT_RECORD = 4
#: The dtypes :func:`check_range` and :func:`check_binary` take (bools need no check).
CHECK_DTYPES = FLOAT_DTYPES + ("int64", "int32")


def _check_operands(x, record, site, what: str):
    name = programs.dtype_name(_device_array(x, what).dtype)
    if name not in CHECK_DTYPES:
        raise TypeError(f"{what} takes {', '.join(CHECK_DTYPES)} values, got {name}")
    _device_array(record, f"{what} record")
    if programs.dtype_name(record.dtype) != "int64" or tuple(record.shape) != (FAULT_RECORD,) \
            or not record.is_c_contiguous:
        raise ValueError(f"{what}: the record must be a contiguous int64 DeviceArray of shape ({FAULT_RECORD},), got "
                         f"{record.dtype} {record.shape}")
    if record.device != x.device:
        raise ValueError(f"{what}: x and the record live on different devices ({x.device} and {record.device})")
    site = _checks.count(site, "site", minimum=1, maximum=2**53)
    return name, contiguous(x), site


def check_range(x, low, high, record, site: int) -> None:
    """Flag the first element of ``x`` (in C order) outside ``[low, high)`` (NaN included) into the fault
    ``record`` unless it holds a fault already: ``record = [site, low 32 bits, high 32 bits, flat index]`` of the
    value's 64 bits (an integer's two's complement, a float's double).  Integer values and bounds compare exactly.
    One block on ``x``'s queue; nothing is read back."""
    name, x, site = _check_operands(x, record, site, "check_range")
    bound = c_longlong if name in ("int64", "int32") else c_double
    _run("check", programs.expression("check_range", name), x, x.size,
         [x.ptr, c_longlong(x.size), bound(low), bound(high), c_longlong(site), record.ptr], grid=1)


def check_binary(x, record, site: int) -> None:
    """Flag the first element of ``x`` that is neither 0 nor 1 (NaN included) into the fault ``record``, as
    :func:`check_range` does."""
    name, x, site = _check_operands(x, record, site, "check_binary")
    _run("check", programs.expression("check_binary", name), x, x.size,
         [x.ptr, c_longlong(x.size), c_longlong(site), record.ptr], grid=1)
