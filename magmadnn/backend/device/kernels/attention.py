"""Launchers of attention.cu: masked (and causal) softmax of attention scores and its backward."""

from __future__ import annotations

import math
from ctypes import c_double, c_int, c_longlong

from pymagma import array as _array
from pymagma.kernels import programs
from pymagma.kernels.common import _float_dtype, _ptr, _run, _same
from pymagma.kernels.elementwise import contiguous


def _attention_scores(x, what: str) -> str:
    dtype = _float_dtype(x, what)
    if x.ndim != 4:
        raise ValueError(f"{what} needs 4-D (batch, heads, tq, tk) scores, got shape {x.shape}")
    return dtype


def masked_softmax(x, mask=None, scale: float = 1.0, causal: bool = False):
    """Softmax over the last axis of ``scale * x`` for attention scores ``x`` (batch, heads, tq, tk), in one kernel:
    ``causal`` masks key j > query i, ``mask`` (batch, tk) of x's dtype masks the keys where it is 0. A row with no
    key left is all zeros."""
    dtype = _attention_scores(x, "masked_softmax")
    b, h, tq, tk = (int(d) for d in x.shape)
    if mask is not None:
        _same([x, mask], "masked_softmax")
        if tuple(mask.shape) != (b, tk):
            raise ValueError(f"masked_softmax: mask must have shape {(b, tk)} for scores {x.shape}, got {mask.shape}")
        mask = contiguous(mask)
    x = contiguous(x)
    y = _array.empty(x.shape, x.dtype, device=x.device)
    rows = b * h * tq
    _run("attention", programs.expression("masked_softmax", dtype), x, rows,
         [_ptr(x), _ptr(mask), _ptr(y), c_longlong(rows), c_longlong(tq), c_longlong(tk), c_longlong(h * tq),
          c_double(scale), c_int(int(bool(causal)))], grid=min(rows, 65535))
    return y


def masked_softmax_backward(dy, y, scale: float = 1.0):
    """dx of :func:`masked_softmax` from its output ``y``: ``scale * y * (dy - sum(dy * y))`` along the last axis."""
    dtype = _attention_scores(y, "masked_softmax_backward")
    _same([y, dy], "masked_softmax_backward")
    if tuple(dy.shape) != tuple(y.shape):
        raise ValueError(f"masked_softmax_backward: dy has shape {dy.shape}, expected y's {y.shape}")
    dy, y = contiguous(dy), contiguous(y)
    dx = _array.empty(y.shape, y.dtype, device=y.device)
    rows, tk = math.prod(y.shape[:-1]), int(y.shape[-1])
    _run("attention", programs.expression("masked_softmax_backward", dtype), y, rows,
         [_ptr(dy), _ptr(y), _ptr(dx), c_longlong(rows), c_longlong(tk), c_double(scale)], grid=min(rows, 65535))
    return dx
