"""How the metrics stage host targets (shared by :mod:`magmadnn.metrics`' classes): class indices from labels or
one-hot rows, targets shaped like the outputs (Keras' rank rule), the 0/1 targets of the confusion metrics (cast to
bool as Keras casts them) and Precision/Recall's one threshold, checked as Keras checks it."""

from __future__ import annotations

import numpy as np

from . import _checks

__all__ = ["class_indices", "like_outputs", "flat_targets", "threshold"]


def class_indices(labels, output_shape) -> np.ndarray:
    """Host class indices shaped like the outputs without their class axis: int labels of that shape as they are,
    or the argmax of one-hot / soft labels shaped like the outputs."""
    labels, shape = np.asarray(labels), tuple(output_shape)
    if labels.shape == shape:
        return labels.argmax(axis=-1)
    if labels.shape == shape[:-1]:
        return labels.astype(np.int64, copy=False)
    if labels.shape == (*shape[:-1], 1):  # Keras' class indices as a column, which its sparse metrics squeeze
        return labels.reshape(shape[:-1]).astype(np.int64, copy=False)
    expected = "(N,) or one-hot (N, C)" if len(shape) == 2 else "(N, T) or one-hot (N, T, C)"
    raise ValueError(f"labels must be class indices {expected} for outputs {shape}, got shape {labels.shape}")


def like_outputs(labels, shape, dtype, who: str) -> np.ndarray:
    """Host targets as ``dtype`` shaped like the outputs ``shape`` (Keras' rank rule: a trailing unit axis may
    differ)."""
    labels = np.asarray(labels)
    out = tuple(int(s) for s in shape)
    t = tuple(labels.shape)
    if t != out and t != out + (1,) and not (out[-1] == 1 and t == out[:-1]):
        raise ValueError(f"{who}: targets of shape {t} do not match the outputs {out}")
    return labels.reshape(out).astype(dtype, copy=False)


def flat_targets(labels, shape, dtype, who):
    """Targets as 0/1 floats over every element: Keras' confusion metrics cast targets to bool (any non-zero value,
    -1 and 2 included, is a positive; NaN too), so a precision or recall stays in [0, 1]."""
    labels = np.asarray(labels)
    if labels.dtype.kind not in "biuf":
        raise TypeError(f"{who}: targets must be numbers or booleans, got dtype {labels.dtype}")
    return like_outputs(labels != 0, shape, dtype, who).reshape(-1)


def threshold(thresholds, who: str) -> float:
    """Keras' ``thresholds`` of Precision/Recall: one number in [0, 1] (or a one-element list)."""
    if isinstance(thresholds, (list, tuple)):
        if len(thresholds) != 1:
            raise ValueError(f"{who}: thresholds must be one number in [0, 1] (a list of several, which Keras "
                             f"answers with one result per threshold, is not supported), got {thresholds!r}")
        thresholds = thresholds[0]
    value = _checks.real(thresholds, "thresholds", who)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{who}: threshold values must be in [0, 1] (as Keras), got thresholds={thresholds!r}")
    return value
