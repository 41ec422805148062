"""Optional ops for data-parallel gradient exchange (:mod:`magmadnn.distributed`; without them it stages through
NumPy arrays): a backend whose arrays live in device memory may add them."""

from __future__ import annotations

from ._spec import optional


@optional
def host_empty(shape, dtype=...):
    """A new C-contiguous host NumPy array in the memory this backend copies to fastest (page-locked)."""


@optional
def copy_to_host(a, out):
    """``a`` into the C-contiguous host NumPy array ``out`` of the same size and dtype, once the work queued on
    ``a`` is done; returns ``out`` (``ValueError`` for another ``out``)."""


@optional
def flat_pack(arrays, scale, out):
    """``scale * a`` of each array, flattened, one after the other into the 1-D array ``out``, which they fill
    (``ValueError`` otherwise); returns None once ``out`` is written, so that another library (MPI) may read it."""


@optional
def flat_unpack(flat, shapes, divisor):
    """New arrays of ``shapes`` from the consecutive values at the start of the 1-D array ``flat`` (which may hold
    more), each divided by ``divisor``."""
