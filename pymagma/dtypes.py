"""The dtypes a DeviceArray can hold, with bfloat16 from the optional ``ml_dtypes`` package (NumPy has none).

``ml_dtypes`` is imported on first use of bfloat16 only: importing it costs about half a second.
"""

from __future__ import annotations

import functools

import numpy as np

SUPPORTED = tuple(np.dtype(d) for d in (
    "float32", "float64", "complex64", "complex128", "int32", "int64", "float16", "int8", "uint8", "bool",
    "int16", "uint16", "uint32", "uint64"))
BFLOAT16_HINT = "bfloat16 needs the ml_dtypes package (NumPy has no bfloat16): pip install ml_dtypes"


def bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16 as a NumPy dtype; TypeError naming what to install when ml_dtypes is absent."""
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(BFLOAT16_HINT) from None
    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dtype) -> bool:
    return getattr(dtype, "name", None) == "bfloat16" or (isinstance(dtype, str) and dtype == "bfloat16")


def answered_once(fn=None, *, keep=None):
    """Decorator for a function of one dtype-like argument: each argument's answer is computed once and then read
    from a dict (no NumPy dtype work per call on the hot path); errors, unhashable arguments and answers ``keep``
    refuses are never cached."""
    if fn is None:
        return functools.partial(answered_once, keep=keep)
    answers: dict = {}

    @functools.wraps(fn)
    def call(dtype):
        try:
            return answers[dtype]
        except (KeyError, TypeError):  # not seen yet, or unhashable
            pass
        result = fn(dtype)
        if keep is None or keep(result):
            try:
                answers[dtype] = result
            except TypeError:
                pass
        return result

    return call


@answered_once(keep=lambda dt: not is_bfloat16(dt))  # bfloat16 asks for ml_dtypes each time (it may go missing)
def check(dtype) -> np.dtype:
    """``dtype`` as a NumPy dtype a DeviceArray supports, else TypeError listing the supported ones."""
    if is_bfloat16(dtype):
        return bfloat16()
    dt = np.dtype(dtype)  # also ml_dtypes.bfloat16 (the scalar type) once ml_dtypes is imported
    if dt not in SUPPORTED and not is_bfloat16(dt):
        raise TypeError(f"unsupported dtype {dt}; expected one of {', '.join(str(d) for d in SUPPORTED)} "
                        "or bfloat16 (with ml_dtypes)")
    return dt
