"""Launchers of check.cu: value checks (a range, 0/1 values) reported through a fault record on the device, nothing
read back: the array API's integer indices and magmadnn's op arguments use them."""

from __future__ import annotations

from ctypes import c_double, c_longlong

from .. import _checks, _native
from .._checks import Plans
from . import programs
from .common import _device_array, _run
from .elementwise import contiguous
from .loader import THREADS
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


#: {(launcher, operands' signature, scalars): the launch its checks decided}: a call with a signature seen before
#: skips its checks (they hold for every call with it) and launches with what they decided; errors never kept
_CHECKED = Plans()


def check_range(x, low, high, record, site: int) -> None:
    """Flag the first element of ``x`` (in C order) outside ``[low, high)`` (NaN included) into the fault
    ``record`` unless it holds a fault already: ``record = [site, low 32 bits, high 32 bits, flat index]`` of the
    value's 64 bits (an integer's two's complement, a float's double).  Integer values and bounds compare exactly.
    One block on ``x``'s queue; nothing is read back.  Planned per operands' signature, bounds and site."""
    try:
        key = ("check_range", x.__class__, x.dtype, x.device, record.__class__, record.shape, record.strides,
               record.dtype, record.device, low.__class__, low, high.__class__, high, site.__class__, site)
        decided = _CHECKED.get(key)
    except (AttributeError, TypeError):  # not arrays (or unhashable): the checked path names what is wrong
        key = decided = None
    if decided is not None:  # the checks of this signature passed before: its launch
        expression, bounds_site = decided
        if not x.is_c_contiguous:
            x = contiguous(x)
        if x.size:  # (common._run, inline: one block)
            libraries, device = _native.current, x.device
            libraries.launcher.launch("check", expression, device,
                                      (libraries.default_queues.get(device) or x.queue).stream, 1, THREADS,
                                      [x.ptr, c_longlong(x.size), *bounds_site, record.ptr])
        return
    name, x, site = _check_operands(x, record, site, "check_range")
    bound = c_longlong if name in ("int64", "int32") else c_double
    bounds_site = (bound(low), bound(high), c_longlong(site))
    expression = programs.expression("check_range", name)
    _run("check", expression, x, x.size, [x.ptr, c_longlong(x.size), *bounds_site, record.ptr], grid=1)
    if key is not None:
        _CHECKED.keep(key, (expression, bounds_site))


def check_binary(x, record, site: int) -> None:
    """Flag the first element of ``x`` that is neither 0 nor 1 (NaN included) into the fault ``record``, as
    :func:`check_range` does.  Planned per operands' signature and site."""
    try:
        key = ("check_binary", x.__class__, x.dtype, x.device, record.__class__, record.shape, record.strides,
               record.dtype, record.device, site.__class__, site)
        decided = _CHECKED.get(key)
    except (AttributeError, TypeError):  # not arrays (or unhashable): the checked path names what is wrong
        key = decided = None
    if decided is not None:  # the checks of this signature passed before: its launch
        expression, site_c = decided
        if not x.is_c_contiguous:
            x = contiguous(x)
        if x.size:  # (common._run, inline: one block)
            libraries, device = _native.current, x.device
            libraries.launcher.launch("check", expression, device,
                                      (libraries.default_queues.get(device) or x.queue).stream, 1, THREADS,
                                      [x.ptr, c_longlong(x.size), site_c, record.ptr])
        return
    name, x, site = _check_operands(x, record, site, "check_binary")
    expression, site_c = programs.expression("check_binary", name), c_longlong(site)
    _run("check", expression, x, x.size, [x.ptr, c_longlong(x.size), site_c, record.ptr], grid=1)
    if key is not None:
        _CHECKED.keep(key, (expression, site_c))
