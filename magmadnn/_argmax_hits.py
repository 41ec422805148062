"""The argmax hit count of one batch, as accuracy (and Keras' categorical / sparse categorical accuracy) counts it:
rows whose first highest score (``argmax``; a NaN counts as the highest) equals the row's true class.

On the host backend the count is taken in NumPy directly (``fit`` counts every step, and the backend op chain costs
about a hundred microseconds there); elsewhere it runs as backend ops, without leaving the backend. Both give the
same value in the outputs' dtype: the host path only runs where the op chain's float count is exact.
"""

from __future__ import annotations

import numpy as np

__all__ = ["argmax_hits"]

_EXACT_ROWS = 2 ** 24  # a float32 (or wider) sum of 0/1 hits is exact below it


def argmax_hits(outputs, staged, xp):
    """Hits of ``outputs`` (N, C) or (N, T, C) against ``staged``: the true classes (rows,) in the outputs' dtype,
    or (2, rows) stacking them over each row's 0/1 weight (an ignored row: class -1, weight 0). A 0-d value in the
    outputs' dtype, scaled by N / rows when the rows are tokens and unweighted (accuracy of tokens per sample)."""
    if xp.name == "host":
        found = _host_hits(outputs, staged)
        if found is not None:
            return found
    shape, rows = tuple(int(s) for s in outputs.shape), int(staged.shape[-1])
    scores = outputs if len(shape) == 2 else xp.reshape(outputs, (rows, shape[-1]))
    weight = None
    if len(staged.shape) == 2:
        staged, weight = (xp.reshape(part, (rows,)) for part in xp.split(staged, [1, 1], 0))
    miss = xp.subtract(xp.asarray(xp.argmax(scores, 1), outputs.dtype), staged)  # 0 on a hit, else |.| >= 1
    hit = _relu(xp, xp.add(xp.negative(xp.multiply(miss, miss)), 1.0))  # 1 on a hit, 0 on a miss
    if weight is not None:
        return xp.sum(xp.multiply(hit, weight))
    found = xp.sum(hit)
    return found if rows == shape[0] else xp.multiply(found, shape[0] / rows)


def _host_hits(outputs, staged):
    """The op chain's value from NumPy arrays (the same dtype and value), or None where it may not be exact."""
    if type(outputs) is not np.ndarray or type(staged) is not np.ndarray:
        return None
    dtype, rows = outputs.dtype, staged.shape[-1]
    if dtype.kind != "f" or dtype.itemsize < 4 or staged.dtype != dtype or rows >= _EXACT_ROWS:
        return None
    # distinct whole numbers in one float dtype differ by at least 1, so the chain's hit is exactly "equal"
    predicted = (outputs if outputs.ndim == 2 else outputs.reshape(rows, outputs.shape[-1])).argmax(1)  # (no dispatch)
    predicted = predicted.astype(dtype)
    if staged.ndim == 2:
        return dtype.type(np.count_nonzero((predicted == staged[0]) & (staged[1] != 0)))  # weights are 0 or 1
    found = dtype.type(np.count_nonzero(predicted == staged))
    return found if rows == outputs.shape[0] else np.multiply(found, outputs.shape[0] / rows)


def _relu(xp, a):
    return xp.activation_forward(a, "relu")
