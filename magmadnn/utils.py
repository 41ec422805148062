"""Keras' ``keras.utils`` helpers a user reaches for with their data: ``to_categorical``."""

from __future__ import annotations

import numpy as np

__all__ = ["to_categorical"]


def to_categorical(x, num_classes: int | None = None) -> np.ndarray:
    """One-hot rows of class indices, as Keras 3's ``keras.utils.to_categorical``: ``x`` of shape ``S`` (a trailing
    unit axis dropped, Keras' rule) gives float64 ``S + (num_classes,)``; ``num_classes`` None means ``max(x) + 1``.
    An index outside ``[0, num_classes)`` is a ValueError (Keras wraps a negative one around)."""
    x = np.asarray(x)
    if x.dtype.kind not in "iub" and not (x.dtype.kind == "f" and np.all(np.mod(x, 1) == 0)):
        raise TypeError(f"to_categorical: x must hold integer class indices, got dtype {x.dtype}")
    x = x.astype(np.int64)
    shape = x.shape[:-1] if x.ndim > 1 and x.shape[-1] == 1 else x.shape
    flat = x.reshape(-1)
    if num_classes is None:
        num_classes = int(flat.max()) + 1 if flat.size else 0
    elif isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < 1:
        raise ValueError(f"to_categorical: num_classes must be a positive integer, got {num_classes!r}")
    bad = (flat < 0) | (flat >= num_classes)
    if bad.any():
        raise ValueError(f"to_categorical: class index {int(flat[bad][0])} is outside [0, {num_classes}) "
                         f"(num_classes={num_classes})")
    out = np.zeros((flat.size, int(num_classes)), np.float64)
    out[np.arange(flat.size), flat] = 1.0
    return out.reshape((*shape, int(num_classes)))
