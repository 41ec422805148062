"""The standard's ``tril`` and ``triu``: the triangle's mask is made on the host (as ``eye``'s values are) and copied
to the device once per call; floats then run the select kernel (``mask ? x : 0``, NaNs outside the triangle dropped),
integers and bool a bitwise and with an all-ones-or-zero mask.  Strided and stacked ``x`` are read in place."""

from __future__ import annotations

import operator

import numpy as np

from .. import array as _array
from .. import kernels as _kernels
from . import _elementwise


def _triangle(x, k, lower: bool, what: str):
    x = _elementwise._require(x, what)
    if x.ndim < 2:
        raise ValueError(f"{what} needs a matrix or a stack of matrices, got shape {x.shape}")
    if isinstance(k, bool):
        raise TypeError(f"{what}: k must be an integer, got {k!r}")
    k = operator.index(k)
    m, n = x.shape[-2:]
    keep = np.tri(m, n, k, dtype=bool) if lower else ~np.tri(m, n, k - 1, dtype=bool)
    if x.dtype.kind == "f":
        mask = _array.asarray(keep.astype(x.dtype), device=x.device)
        zero = _array.zeros((), x.dtype, device=x.device)
        return _kernels.where(mask, x, zero)
    ones = np.array(True if x.dtype.kind == "b" else -1).astype(x.dtype)  # every bit set
    mask = _array.asarray(np.where(keep, ones, np.zeros((), x.dtype)), device=x.device)
    return _elementwise.FUNCTIONS["bitwise_and"](x, mask)


def tril(x, /, *, k: int = 0):
    """``x`` with the elements above diagonal ``k`` of each matrix set to zero (a new array)."""
    return _triangle(x, k, True, "tril")


def triu(x, /, *, k: int = 0):
    """``x`` with the elements below diagonal ``k`` of each matrix set to zero (a new array)."""
    return _triangle(x, k, False, "triu")
