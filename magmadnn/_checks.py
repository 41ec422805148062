"""Argument checks of the public API: each error names the argument, the value given and what is expected.

Integers accept anything ``operator.index`` accepts (Python and NumPy integers) but never ``bool`` or floats (a float
size is an error, not a truncation); real numbers accept Python/NumPy reals but never strings or ``bool``.
Shapes in messages are written by :func:`shape_str`.
"""

from __future__ import annotations

import math
import numbers
import operator
import weakref

import numpy as np

__all__ = ["integer", "real", "finite_array", "found_finite", "remember_finite", "shape_str", "verbosity",
           "batch_size_or_default"]


def integer(value, name: str, who: str, minimum: int | None = None) -> int:
    """``value`` as a Python int (>= ``minimum`` when given); TypeError for a non-integer, ValueError below it."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{who}: {name} must be an integer, got {value!r}")
    try:
        result = operator.index(value)
    except TypeError:
        raise TypeError(f"{who}: {name} must be an integer, got {value!r} ({type(value).__name__})") from None
    if minimum is not None and result < minimum:
        raise ValueError(f"{who}: {name} must be an integer >= {minimum}, got {result}")
    return result


def verbosity(value, who: str) -> int:
    """Keras' ``verbose``: "auto" (1), 0 (silent), 1 (progress bar), 2 (one line per epoch); ``bool`` as 0/1."""
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"{who}: verbose must be 'auto', 0, 1 or 2, got {value!r}")
        return 1
    return integer(int(value) if isinstance(value, (bool, np.bool_)) else value, "verbose", who, minimum=0)


def batch_size_or_default(value, who: str) -> int:
    """Keras' ``batch_size``: None means 32."""
    return 32 if value is None else integer(value, "batch_size", who, minimum=1)


def real(value, name: str, who: str, low: float | None = None, high: float | None = None,
         open_high: bool = False, open_low: bool = False) -> float:
    """``value`` as a finite float in the given bounds; TypeError for a non-number, ValueError outside."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{who}: {name} must be a real number, got {value!r} ({type(value).__name__})")
    result = float(value)
    below = low is not None and (result < low or (open_low and result == low))
    above = high is not None and (result > high or (open_high and result == high))
    if not math.isfinite(result) or below or above:
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        bounds = f"{'(' if open_low else '['}{lo}, {hi}{')' if open_high else ']'}"
        raise ValueError(f"{who}: {name} must be a finite number in {bounds}, got {value!r}")
    return result


def finite_array(array: np.ndarray, what: str, who: str, rows=None) -> None:
    """ValueError naming the first non-finite entry of a float host array (integer arrays pass at once).

    One pass, no temporary: NaN and infinities propagate into a sum over the array. A C-contiguous float32/float64
    array is summed as its sum of squares (one BLAS dot of the array with itself: about twice as fast as NumPy's sum,
    which adds pairwise), other floats by ``np.sum`` (2-byte floats in float64). Every term of the dot is >= 0, so no
    inf - inf can hide an infinity; a sum that overflows to inf (entries over about 1e19) is no error itself: the
    exact element-wise test below decides. ``rows``: ``array`` is a batch of these rows of the data (an index array,
    or the first row's index), named in the message."""
    if array.dtype.kind not in "fc" or array.size == 0:
        return
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow or inf - inf is no warning: checked below
        if array.dtype in _DOT_DTYPES and array.flags.c_contiguous:
            flat = array.reshape(-1)
            total = np.dot(flat, flat)
        else:
            wide = array.dtype.itemsize >= 4  # float32/64 and complex: summed in their own type
            total = np.sum(array) if wide else np.sum(array, dtype=np.float64)
    if np.isfinite(total):
        return
    finite = np.isfinite(array)
    if not finite.all():
        where = tuple(int(i) for i in np.argwhere(~finite)[0])
        bad = int(array.size - finite.sum())
        if rows is not None:  # a batch: its first bad entry's index in the data
            row = int(rows[where[0]]) if isinstance(rows, np.ndarray) else int(rows) + where[0]
            value, where = array[where], (row, *where[1:])
            raise ValueError(f"{who}: {what} hold non-finite values (a batch: {bad} of its {array.size} entries; the "
                             f"first is {value} at index {where}); clean the data before training")
        raise ValueError(f"{who}: {what} hold non-finite values ({bad} of {array.size}; the first is {array[where]} at "
                         f"index {where}); clean the data before training")


#: id -> (a weak reference, data address, shape, strides, dtype) of the arrays :func:`remember_finite` kept
_FINITE: dict = {}


def _layout(array) -> tuple:
    return array.__array_interface__["data"][0], array.shape, array.strides, array.dtype


def remember_finite(array) -> None:
    """Keep that ``array`` (a NumPy array :func:`finite_array` passed) held finite values, for
    :func:`found_finite`. At most 64 arrays are remembered."""
    if type(array) is not np.ndarray or array.dtype.kind not in "fc":
        return
    if len(_FINITE) >= 64:
        _FINITE.clear()
    _FINITE[id(array)] = (weakref.ref(array), *_layout(array))


def found_finite(array) -> bool:
    """Whether this very array object (the same data, shape, strides and dtype) was found finite before. Its values
    may have been changed in place since: a caller that skips :func:`finite_array` for it checks each batch it
    makes of it instead (``fit``'s array batches)."""
    entry = _FINITE.get(id(array))
    return entry is not None and entry[0]() is array and entry[1:] == _layout(array)


_DOT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def shape_str(shape) -> str:
    """A shape as error messages write it: ``(3,)``, ``(1, 28, 28)``."""
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def kinds(values: tuple) -> tuple:
    """The types in ``values``, nested tuples as tuples of their types: what a key must hold beside the values so
    that 2.0 never finds the answer worked out for 2 (they hash and compare equal)."""
    found = tuple(map(type, values))
    if tuple in found:
        found = tuple([kinds(v) if k is tuple else k for v, k in zip(values, found)])
    return found


class Plans(dict):
    """The plans of one kind of call: what the call decided from its inputs' signature (their shapes and dtypes,
    and plain options with their types, see :func:`kinds`) after every check, kept by that signature so that a
    later call with the same one looks its plan up (``plans.get(key)``) instead of checking and deciding again. A
    miss (or no key: an unhashable option) runs every check and works the plan out; ``plans.keep(key, plan)``
    keeps it (errors are never kept, so bad input is refused with the same message every time). At most ``limit``
    plans are kept."""

    def __init__(self, limit: int = 1024):
        super().__init__()
        self.limit = limit

    def keep(self, key, plan):
        if key is not None:
            if len(self) >= self.limit:
                self.clear()
            self[key] = plan
        return plan
