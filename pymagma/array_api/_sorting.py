"""The standard's ``sort`` and ``argsort``: a stable merge sort of each row along ``axis`` on the device, NaNs last
(also when descending); equal elements keep their order in both directions."""

from __future__ import annotations

import operator

from ..kernels import array_api as _api_kernels
from ..kernels import array_api_reduce as _rk
from ._statistics import _kinds


def _sort(x, axis, descending: bool, stable: bool, values: bool, what: str):
    x = _kinds(x, "biuf", what)
    if x.ndim == 0:
        raise ValueError(f"{what}: a 0-d array has no axis to sort along")
    (axis,) = _rk.axes(operator.index(axis), x.ndim, what)
    if x.size == 0:
        return _api_kernels.cast(x, x.dtype if values else _rk.INDEX)
    return _rk.sort(x, axis, bool(descending), values, not values)[0 if values else 1]


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """``x`` sorted along ``axis`` (always stable)."""
    return _sort(x, axis, descending, stable, True, "sort")


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """The int64 indices that sort ``x`` along ``axis`` (always stable)."""
    return _sort(x, axis, descending, stable, False, "argsort")
