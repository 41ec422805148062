"""Reading the device with its fault record: what a device check found (an embedding id outside the table, a key
mask value other than 0 and 1; see ``functional._base.check_values``) rides on a read the host makes anyway.

:func:`read` is the host read of fit's progress tally, of a checked step's loss, of predict's last batch and of
``Tensor.numpy()``: on a backend with a fault record (``fault_record``, an optional op) the record is appended to the
array on the device and both come back in one copy; a recorded fault raises its ``ValueError`` (the message the host
backend gives for the same value) before the values are used. No new synchronization, and none at all before any check
ran.
"""

from __future__ import annotations

import numpy as np

__all__ = ["read"]


def read(xp, array) -> np.ndarray:
    """``xp.to_numpy(array)``, raising first the ``ValueError`` of a value a device check recorded since the last
    read (the record is cleared then)."""
    record_of = getattr(xp, "fault_record", None)
    record = None if record_of is None else record_of(array)
    if record is None:
        return xp.to_numpy(array)
    n = int(np.prod(array.shape, dtype=np.int64))
    both = xp.concatenate([xp.asarray(xp.reshape(array, (n,)), np.float64), xp.asarray(record, np.float64)], 0)
    host = xp.to_numpy(both)  # float64 holds every float dtype's values and the record's entries exactly
    error = xp.fault_error(record, host[n:])
    if error is not None:
        raise error
    return host[:n].astype(array.dtype).reshape(tuple(array.shape))
