"""Host dynamic loss scaling: the finite flag, the undo of a skipped update and Keras' scale rule."""

from __future__ import annotations

import numpy as np


def finite_flag(arrays):
    """0-d 1 when every element of ``arrays`` is finite, else 0 (the arrays' dtype)."""
    _need_arrays("finite_flag", arrays)
    ok = all(bool(np.isfinite(a).all()) for a in arrays)
    return np.asarray(1 if ok else 0, dtype=arrays[0].dtype)


def revert_update(a, saved, keep) -> None:
    """In place: ``a = saved`` unless ``keep`` is 1."""
    _same_update("revert_update", a, saved, keep)
    if not keep:
        np.copyto(a, saved)


def loss_scale_update(scale, counter, finite, growth_steps) -> None:
    """In place: Keras' rule (ops.loss_scale_update), read plainly."""
    _same_update("loss_scale_update", scale, counter, finite)
    if finite:
        counter[...] = counter + 1
        if counter == growth_steps:
            counter[...] = 0
            scale[...] = scale * 2
    else:
        counter[...] = 0
        scale[...] = scale * 0.5


def _need_arrays(who: str, arrays) -> None:
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise ValueError(f"{who}: expected a non-empty list of arrays, got {arrays!r}")
    if len({a.dtype for a in arrays}) > 1:
        raise TypeError(f"{who}: the arrays have dtypes {sorted({str(a.dtype) for a in arrays})}; expected one")


def _same_update(who: str, a, *others) -> None:
    """The first operand's dtype for all, and 0-d flags/scales where the op reads them as scalars."""
    for o in others:
        if o.dtype != a.dtype:
            raise TypeError(f"{who}: operands have dtypes {a.dtype} and {o.dtype}; expected one dtype")
    if who == "revert_update":
        if a.shape != others[0].shape or others[1].shape != ():
            raise ValueError(f"{who}: a {a.shape} and saved {others[0].shape} must match and keep be 0-d, got "
                             f"keep {others[1].shape}")
    elif any(o.shape != () for o in (a, *others)):
        raise ValueError(f"{who}: scale, counter and finite must be 0-d arrays")
