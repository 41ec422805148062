"""What every launcher module shares: the ``Strides3`` mirror of common.cuh, operand checks, output allocation and
the launch on the operands' queue (:func:`_run`, through the launcher in use: the simulator's when it is on).

The launchers of programs registered outside pymagma (magmadnn's) use these too, so that their launches take the
same path as pymagma's own."""

from __future__ import annotations

import ctypes
import functools
from ctypes import c_int, c_longlong, c_void_p

import numpy as np

from .. import _native
from .. import array as _array
from .loader import MAX_BLOCKS as _MAX_BLOCKS
from .loader import THREADS
from .programs import FLOAT_DTYPES, dtype_name

MAX_DIMS = 8


class Strides3(ctypes.Structure):
    """Mirror of the ``Strides3`` struct in common.cuh: a shape and three stride sets in elements."""

    _fields_ = [("ndim", c_int), ("shape", c_longlong * MAX_DIMS), ("s0", c_longlong * MAX_DIMS),
                ("s1", c_longlong * MAX_DIMS), ("s2", c_longlong * MAX_DIMS)]


def make_strides3(shape, *stride_sets) -> Strides3:
    if len(shape) > MAX_DIMS:
        raise ValueError(f"kernels handle at most {MAX_DIMS} dimensions, got shape {tuple(shape)}")
    s = Strides3()
    s.ndim = len(shape)
    for d, n in enumerate(shape):
        s.shape[d] = int(n)
    for field, strides in zip(("s0", "s1", "s2"), stride_sets):
        target = getattr(s, field)
        for d, v in enumerate(strides):
            target[d] = int(v)
    return s


@functools.lru_cache(maxsize=1024)
def geometry(shape: tuple, *operands: tuple) -> Strides3:
    """The (never modified) Strides3 of operands given as (shape, byte strides, itemsize), broadcast to ``shape``:
    computed once per layout (the launch copies it, as cuLaunchKernel copies its parameters)."""
    lead = [len(shape) - len(o[0]) for o in operands]
    sets = [(0,) * k + tuple(0 if n == 1 else s // size for n, s in zip(o_shape, o_strides))
            for k, (o_shape, o_strides, size) in zip(lead, operands)]
    return make_strides3(shape, *sets)


def layout(a) -> tuple:
    """``a``'s (shape, byte strides, itemsize), the key :func:`geometry` takes."""
    return a.shape, a.strides, a.itemsize


def _elem_strides(a) -> tuple[int, ...]:
    return tuple(s // a.itemsize for s in a.strides)


def _c_strides(shape) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape``."""
    return _array.c_strides(tuple(shape), 1)


_device_array = _array.require_device_array  # a DeviceArray, or a TypeError naming the argument


def _float_dtype(a, what: str) -> str:
    if a.__class__ is _DeviceArray:  # the common case: a float dtype seen before, one dict look-up
        name = _FLOAT_NAMES.get(a.dtype)
        if name is not None:
            return name
    name = dtype_name((a if isinstance(a, _array.DeviceArray) else _device_array(a, what)).dtype)
    if name in FLOAT_DTYPES:
        _FLOAT_NAMES[a.dtype] = name
    else:
        raise TypeError(f"{what} needs a floating dtype ({', '.join(FLOAT_DTYPES)}), got {name}")
    return name


_DeviceArray = _array.DeviceArray
_FLOAT_NAMES: dict = {}  # the float dtypes of the arrays seen -> their kernel names (_float_dtype's answers)


def _same(arrays, what: str):
    first = arrays[0]
    if first.__class__ is _DeviceArray:
        dtype, device = first.dtype, first.device
        for other in arrays:  # the common case: one dtype object and one device, no call
            if other is not None and (other.__class__ is not _DeviceArray or other.dtype is not dtype
                                      or other.device != device):
                break
        else:
            return
    for other in arrays[1:]:
        if other is None:
            continue
        if not isinstance(other, _array.DeviceArray):
            _device_array(other, what)
        if other.dtype != first.dtype and dtype_name(other.dtype) != dtype_name(first.dtype):
            raise TypeError(f"{what}: dtypes differ ({first.dtype} and {other.dtype})")
        if other.device != first.device:
            raise ValueError(f"{what}: arrays live on different devices ({first.device} and {other.device})")


def _run(program: str, expression: str, like, n_items: int, args, grid: int | None = None) -> None:
    if n_items == 0:
        return
    if grid is None:  # grid_for(n_items), inline: every kernel launch passes here (n_items > 0: one block or more)
        grid = -(-n_items // THREADS)
        if grid > _MAX_BLOCKS:
            grid = _MAX_BLOCKS
    libraries = _native.current
    queue = libraries.default_queues.get(like.device) or like.queue  # (DeviceArray.queue's fast path, inline)
    libraries.launcher.launch(program, expression, like.device, queue.stream, grid, THREADS, args)



def _out_for(out, shape, dtype, device, what: str):
    if out is None:
        if isinstance(dtype, np.dtype) and type(shape) is tuple:  # an operand's own (checked) shape and dtype
            return _array._empty(shape, dtype, device)
        return _array.empty(shape, dtype, device=device)
    _device_array(out, f"{what} out")
    if tuple(out.shape) != tuple(shape) or dtype_name(out.dtype) != dtype_name(dtype):
        raise ValueError(f"{what}: out has shape {out.shape} and dtype {out.dtype}, expected {tuple(shape)} {dtype}")
    if not out.is_c_contiguous:
        raise ValueError(f"{what}: out must be C-contiguous")
    return out


def _ptr(a) -> c_void_p:
    return c_void_p(a.ptr if a is not None else None)


#: The NULL pointer argument, one never-modified object: a hot launcher passes ``NULL if a is None else a.ptr``
#: (an int, which every launcher packs as a c_void_p) without a call to :func:`_ptr`.
NULL = c_void_p()
