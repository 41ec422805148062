"""The checks and conversions every function of the package shares: operands as Tensors, dtypes, ranks, axes."""

from __future__ import annotations

import numbers

import numpy as np

from .._checks import kinds
from ..autograd import Tensor


def constant(xp, value, dtype=None):
    """``xp.asarray(value, dtype)`` for a value that is the same at every step (a scalar operand, a fixed matrix of
    a loss): on a backend that keeps constants (the device's optional op ``constant``) it is made once and reused,
    so a step captured as a CUDA graph uploads nothing (``compile(graph=True)``). Never write into the result."""
    make = getattr(xp, "constant", None)
    return xp.asarray(value, dtype) if make is None else make(value, dtype)


def check_values(xp, data, message: str, low=None, high=None) -> None:
    """The values an op needs: every element of ``data`` in ``[low, high)``, or 0 or 1 when ``low`` is None
    (booleans pass); the first one that is not (in C order) is ``ValueError(message.format(bad=value))``. NumPy
    data is checked at once; backend data by the backend's check kernel (optional ops ``check_range`` and
    ``check_binary``), raised at the next host read (:mod:`magmadnn.backend.faults`) with the same message. A
    backend without them leaves device data unchecked (its op must stay safe: the gather writes NaN rows)."""
    if isinstance(data, np.ndarray):
        if data.dtype.kind == "b" or not data.size:
            return
        bad = ~((data >= low) & (data < high)) if low is not None else (data != 0) & (data != 1)
        if bad.any():
            raise ValueError(message.format(bad=data[bad].flat[0].item()))
        return
    if low is None:
        check = getattr(xp, "check_binary", None)
        if check is not None:
            check(data, message)
    else:
        check = getattr(xp, "check_range", None)
        if check is not None:
            check(data, low, high, message)


def _as_tensor(x, like: Tensor | None = None) -> Tensor:
    """Tensors pass through; scalars take ``like``'s dtype (a backend constant); arrays become constant Tensors."""
    if isinstance(x, Tensor):
        return x
    backend = like.xp if like is not None else None
    if like is not None and isinstance(x, numbers.Number) and np.dtype(like.dtype).kind == "f":
        return Tensor(constant(like.xp, x, like.dtype), backend=backend)
    return Tensor(x, backend=backend)


def signature(*values):
    """The key of a call's plan (:class:`magmadnn._checks.Plans`): a Tensor by its data's shape and dtype (a Tensor
    subclass too: what an op reads of it), None by itself, any other value with its type (nested tuples by their
    items' types); None when a value is unhashable (or a host array: the call is checked in full)."""
    key = []
    for v in values:
        if isinstance(v, Tensor):
            data = v.data
            key.append((data.shape, data.dtype))
        elif v is None or v.__class__ is str:
            key.append(v)
        else:
            key.append((v, kinds(v) if v.__class__ is tuple else v.__class__))
    key = tuple(key)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _pair_of(a, b):
    """Both operands as Tensors; a Python scalar takes the dtype of the other operand."""
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    return _as_tensor(a, like), _as_tensor(b, like)


def _need_ndim(x: Tensor, ndim: int, fn: str, what: str, layout: str) -> None:
    if len(x.data.shape) != ndim:
        raise ValueError(f"{fn}: {what} must be {ndim}-D {layout}, got shape {x.shape}")


#: The floating dtypes: a call whose inputs all hold the same one of them passes ``_same_dtype`` at once.  bfloat16
#: (ml_dtypes, a half compute dtype of the mixed policies) joins on first sight, in the slow path: ml_dtypes is not
#: imported here (it costs about half a second), and a bfloat16 tensor exists only once its owner has imported it.
_FLOATING = {np.dtype(c) for c in np.typecodes["Float"]}


def _floating(dtype: np.dtype) -> bool:
    if dtype in _FLOATING:
        return True
    if dtype.name == "bfloat16":
        _FLOATING.add(dtype)
        return True
    return False


def _same_dtype(fn: str, **tensors: Tensor) -> None:
    first = None
    for t in tensors.values():
        if t is None:
            continue
        if first is None:
            first = t.data.dtype  # (a Tensor's dtype without its property's frame)
            if first not in _FLOATING:
                break
        elif t.data.dtype is not first:
            break
    else:
        return
    dtypes = {name: t.dtype for name, t in tensors.items() if t is not None}
    if len(set(dtypes.values())) > 1:
        seen = ", ".join(f"{n}={d}" for n, d in dtypes.items())
        raise TypeError(f"{fn}: all inputs must have the same floating dtype, got {seen}")
    for name, d in dtypes.items():
        if not _floating(np.dtype(d)):
            raise TypeError(f"{fn}: {name} must be a floating array (float32 or float64), got {d}")


def _check_axis(fn: str, x: Tensor, axis) -> None:
    if axis is None:
        return
    for a in (axis,) if isinstance(axis, numbers.Integral) else axis:
        if not -x.ndim <= int(a) < x.ndim:
            raise ValueError(f"{fn}: axis {a} is out of range for a tensor of shape {x.shape}")
