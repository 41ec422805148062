"""What a block of the memory pool (:mod:`pymagma.memory`, which re-exports these names) is: its size class, the
token that gives it back when its user dies, and an op's output's layout and block in one look-up (``lease_output``,
:func:`pymagma.array._empty`'s slow path; the fast path reads what it keeps in ``Pool.outputs``)."""

from __future__ import annotations

import math
import weakref

import numpy as np

from . import _checks
from ._layouts import c_strides

ALIGNMENT = 512
_LARGE = 1 << 20


def bucket_size(nbytes: int) -> int:
    """The pool's size class for a request of ``nbytes`` (>= nbytes; 0 stays 0)."""
    return _bucket(_checks.count(nbytes, "nbytes", maximum=2**63 - 1))


def _bucket(nbytes: int) -> int:
    if nbytes <= _LARGE:
        return -(-nbytes // ALIGNMENT) * ALIGNMENT
    step = (1 << ((nbytes - 1).bit_length() - 1)) // 8  # an eighth of the power of two below: <= 12.5% waste
    return -(-nbytes // step) * step


class _Block(weakref.ref):
    """The token of a block handed out: a weak reference to its user (an array, a ``pymagma.memory.Allocation``)
    whose callback puts the token into the block's free list when the user dies (see ``pymagma.memory.Pool``);
    ``ptr``: the block.  Made by calling the class (C code only: no ``__new__`` or ``__init__`` of its own)."""

    __slots__ = ("ptr",)


class _Keeper:
    """A relaxed pool's block in use, given back (``Pool.collected``) when this dies: held by the array or
    Allocation using it (an array's ``owner``).  Its finalizer takes no lock and makes no native call."""

    __slots__ = ("pool", "device", "size", "ptr")

    def __del__(self):
        try:
            pool = self.pool
            if pool is not None:
                pool.collected(self.device, self.size, self.ptr)
        except Exception:  # interpreter shutdown
            pass


class _Given:
    """A block given back explicitly (``Pool.collected``), as its free list holds it: ``ptr``."""

    __slots__ = ("ptr",)


def lease_output(pool, out, shape: tuple, dtype: np.dtype, device: int) -> tuple:
    """(C strides, size, itemsize, bytes, pointer) of a new output ``out`` (a DeviceArray whose other slots its
    caller sets: ``pymagma.array._empty``'s slow path) whose block ``pool`` gives (none for 0
    bytes); ``out.owner`` set (a relaxed pool's keeper, else the pool).  A shared pool keeps the look-up in
    ``pool.outputs`` for the next output of that shape, dtype and device."""
    layout = _LAYOUTS.get((shape, dtype))
    strides, size, itemsize, nbytes, bucket = _layout(shape, dtype) if layout is None else layout
    out.owner = None
    if not bucket:
        return strides, size, itemsize, nbytes, 0
    ptr, keeper = pool.lease(out, device, bucket)
    out.owner = pool if keeper is None else keeper  # (either keeps the pool, and its runtime, alive)
    if keeper is None:
        outputs = pool.outputs
        if len(outputs) >= 4096:
            outputs.clear()
        outputs[shape, dtype, device] = (strides, size, itemsize, nbytes, bucket, pool.__dict__["free_blocks"][
            device, bucket], pool.returner(device, bucket), pool.live)
    return strides, size, itemsize, nbytes, ptr


def _layout(shape: tuple, dtype: np.dtype) -> tuple:
    """(C strides, size, itemsize, bytes, the pool's size class) of an output, kept in ``_LAYOUTS``."""
    if len(_LAYOUTS) >= 4096:
        _LAYOUTS.clear()
    itemsize, size = dtype.itemsize, math.prod(shape)
    layout = _LAYOUTS[shape, dtype] = (c_strides(shape, itemsize), size, itemsize, size * itemsize,
                                       _bucket(size * itemsize))
    return layout


_LAYOUTS: dict = {}  # (shape, dtype) -> _layout's answer
