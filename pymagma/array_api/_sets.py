"""The standard's set functions: ``unique_all``, ``unique_counts``, ``unique_inverse``, ``unique_values``.  The
flattened array is stably sorted on the device, group starts flagged and counted by a scan; the number of unique
values is data-dependent, so one int64 comes back to the host.  Values come out sorted (NaNs last); every NaN is
its own value, as the standard says.  Complex values come out in NumPy's order (real part first)."""

from __future__ import annotations

from typing import NamedTuple

from .. import array as _array
from ..kernels import array_api_reduce as _rk
from ._searching import _flat
from ._statistics import _kinds


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _unique(x, what: str, index: bool, counts: bool, inverse: bool):
    x = _kinds(x, "biufc", what)
    inverse_shape = x.shape if inverse else None
    if x.size == 0:
        empty = _array._empty((0,), _rk.INDEX, x.device)
        inv = _array._empty(x.shape, _rk.INDEX, x.device) if inverse else None
        return _array._empty((0,), x.dtype, x.device), empty, empty, inv
    flat = _flat(x)
    values, perm = _rk.sort(flat, 0, False, True, True)
    csum = _rk.scan("sum", _rk.unique_flags(values), 0, False)
    count = int(csum[-1])
    return _rk.unique(values, perm, csum, count, index, counts, inverse_shape)


def unique_all(x, /):
    """(values, indices of the first occurrences, inverse_indices of x's shape, counts), int64 indices."""
    values, first, many, inverse = _unique(x, "unique_all", True, True, True)
    return UniqueAllResult(values, first, inverse, many)


def unique_counts(x, /):
    values, _, many, _ = _unique(x, "unique_counts", False, True, False)
    return UniqueCountsResult(values, many)


def unique_inverse(x, /):
    values, _, _, inverse = _unique(x, "unique_inverse", False, False, True)
    return UniqueInverseResult(values, inverse)


def unique_values(x, /):
    return _unique(x, "unique_values", False, False, False)[0]
