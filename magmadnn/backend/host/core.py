"""Host creation and transfer: new NumPy arrays, and the one op that reads data back (``to_numpy``)."""

from __future__ import annotations

import numpy as np


def asarray(x, dtype=None) -> np.ndarray:
    """``x`` as a NumPy array; Python floats and lists of floats become float32, NumPy arrays keep their dtype."""
    if dtype is not None:
        return np.asarray(x, dtype=dtype)
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    a = np.asarray(x)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    return a


def to_numpy(a) -> np.ndarray:
    return np.asarray(a)


def zeros(shape, dtype=np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def ones(shape, dtype=np.float32) -> np.ndarray:
    return np.ones(shape, dtype=dtype)


def full(shape, value, dtype=np.float32) -> np.ndarray:
    return np.full(shape, value, dtype=dtype)


def zeros_like(a) -> np.ndarray:
    return np.zeros_like(a)


def copy(a) -> np.ndarray:
    return np.array(a, copy=True)
