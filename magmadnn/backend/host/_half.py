"""Half-precision operands on the host.

float16 / bfloat16 (ml_dtypes) arrays: an op reads its half operands as float32, computes in float32 and rounds each
float result once to the half type -- the device's float32-accumulate-then-round semantics (cuBLAS GemmEx, cuDNN's
float compute type), and what NumPy alone could not do at any useful speed (ml_dtypes' bfloat16 matmul runs
elementwise in Python-level loops). :func:`take_half_operands` wraps the ops of the host package once, at import.

ml_dtypes is never imported here (it costs about half a second): a bfloat16 array exists only once its owner has
imported it, so bfloat16 is recognised by name on first sight.  The common path (a float32 or float64 operand)
stays one set lookup, as it was: a dtype found among the full ones is passed through at once.
"""

from __future__ import annotations

import functools

import numpy as np

from ..ops import OPS

#: the half dtypes seen so far: float16 (NumPy's own), and bfloat16 (ml_dtypes) once an operand held it
_HALF = {np.dtype(np.float16)}
#: the dtypes known not to be half ones (every other dtype an operand held joins on first sight)
_FULL = {np.dtype(c) for c in "fdFDbhilqBHILQ?"}
#: ops that take half arrays as they are: creation, transfer, layout, random numbers, and the in-place updates of
#: float32 weights and statistics
_AS_STORED = frozenset({"asarray", "to_numpy", "zeros", "ones", "full", "zeros_like", "copy", "reshape", "transpose",
                        "rng", "uniform", "normal", "sgd_update", "adam_update", "rmsprop_update", "adagrad_update",
                        "sgd_update_many", "adam_update_many", "rmsprop_update_many", "adagrad_update_many",
                        "running_stat_update", "astype"})


def _is_half(dtype) -> bool:
    """Whether ``dtype`` (in neither ``_FULL`` nor ``_HALF``: a dtype not seen before) is a half type; it joins one of
    the two sets."""
    if getattr(dtype, "name", None) == "bfloat16" or dtype == np.float16:  # first sight of ml_dtypes' bfloat16
        _HALF.add(dtype)
        return True
    _FULL.add(dtype)
    return False


def _half_of(values):
    for a in values:
        if type(a) is np.ndarray:
            if a.dtype not in _FULL and (a.dtype in _HALF or _is_half(a.dtype)):
                return a.dtype
        elif (type(a) in (list, tuple) and a and type(a[0]) is np.ndarray and a[0].dtype not in _FULL
              and (a[0].dtype in _HALF or _is_half(a[0].dtype))):
            return a[0].dtype
    return None


def _up(a):
    if type(a) is np.ndarray:
        return a.astype(np.float32) if a.dtype not in _FULL and (a.dtype in _HALF or _is_half(a.dtype)) else a
    if type(a) in (list, tuple):
        return type(a)(_up(b) for b in a)
    return a


def _down(a, half):
    if type(a) is np.ndarray:
        return a.astype(half) if a.dtype == np.float32 else a
    if type(a) in (list, tuple):
        return type(a)(_down(b, half) for b in a)
    return a


def _half_operands(op):
    @functools.wraps(op)
    def call(*args, **kwargs):
        first = args[0] if args else None
        if type(first) is np.ndarray:  # the op set's operands share a dtype: the first one tells
            if first.dtype in _FULL:
                return op(*args, **kwargs)
            half = first.dtype
            if half not in _HALF and not _is_half(half):
                return op(*args, **kwargs)
        else:
            half = _half_of(args) or (_half_of(kwargs.values()) if kwargs else None)
            if half is None:
                return op(*args, **kwargs)
        return _down(op(*[_up(a) for a in args], **{k: _up(v) for k, v in kwargs.items()}), half)

    return call


def take_half_operands(space: dict) -> None:
    """Wrap every op of the namespace ``space`` (the host package's) but those of ``_AS_STORED`` so that it takes
    half operands: the one place the host adds a frame to an op."""
    for op in OPS:
        if op not in _AS_STORED and callable(space.get(op)):
            space[op] = _half_operands(space[op])
