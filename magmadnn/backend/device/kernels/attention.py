"""Launchers of attention.cu: masked (and causal) softmax of attention scores and its backward; attention over
heads interleaved on the last axis (the projections' layout) in one launch, its backward in two."""

from __future__ import annotations

import ctypes
import math
from ctypes import c_double, c_int, c_longlong

from pymagma import _native
from pymagma import array as _array
from pymagma._checks import Plans
from pymagma.kernels import programs
from pymagma.kernels.common import NULL, THREADS, _float_dtype, _ptr, _run, _same
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


# ------------------------------------------------------------------------------ attention over interleaved heads
class AttentionShape(ctypes.Structure):
    """Mirror of attention.cu's ``AttentionShape``."""

    _fields_ = [("batch", c_longlong), ("heads", c_longlong), ("tq", c_longlong), ("tk", c_longlong),
                ("dk", c_longlong), ("dv", c_longlong)]


def _heads_shape(q, k, v, heads: int, what: str) -> AttentionShape:
    dtype = _float_dtype(q, what)
    _same([q, k, v], what)
    heads = int(heads)
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3 or heads < 1:
        raise ValueError(f"{what}: expected q (B, Tq, H*dk), k (B, Tk, H*dk), v (B, Tk, H*dv) and heads >= 1, got "
                         f"shapes {q.shape}, {k.shape}, {v.shape} and heads {heads}")
    (b, tq, qw), (bk, tk, kw), (bv, tv, vw) = q.shape, k.shape, v.shape
    if not (b == bk == bv and tk == tv and qw == kw and qw % heads == 0 and vw % heads == 0) or 0 in (tq, tk):
        raise ValueError(f"{what}: q {q.shape}, k {k.shape} and v {v.shape} must share the batch, k and v the time "
                         f"(at least one query and one key), q and k the width, each width a multiple of {heads} "
                         "heads")
    return dtype, AttentionShape(b, heads, tq, tk, qw // heads, vw // heads)


#: {(kernel, operands' signature, scalars): what its checks decided}: a call with a signature seen before skips its
#: checks (they hold for every call with it); errors are never kept
_CHECKED = Plans()


def attention_heads(q, k, v, heads: int, mask=None, scale: float = 1.0, causal: bool = False):
    """``(o, p)``: scaled dot-product attention with ``heads`` heads interleaved on the last axis, in one launch:
    ``o`` (B, Tq, H*dv) = the heads' ``masked_softmax(q_h k_h^T, mask, scale, causal) v_h`` side by side (as
    :func:`masked_softmax` between two matrix products computes it), ``p`` (B, H, Tq, Tk) the probabilities."""
    key = ("attention_heads", q.__class__, q.shape, q.dtype, q.device, k.__class__, k.shape, k.dtype, k.device,
           v.__class__, v.shape, v.dtype, v.device,
           None if mask is None else (mask.__class__, mask.shape, mask.dtype, mask.device), heads.__class__, heads)
    decided = _CHECKED.get(key)
    if decided is None:  # every check, once per signature
        what = "attention_heads"
        dtype, d = _heads_shape(q, k, v, heads, what)
        if mask is not None:
            _same([q, mask], what)
            if tuple(mask.shape) != (d.batch, d.tk):
                raise ValueError(f"{what}: mask must have shape {(d.batch, d.tk)}, got {mask.shape}")
        decided = _CHECKED.keep(key, (programs.expression("attention_heads_forward", dtype),
                              (d.batch, d.heads, d.tq, d.tk, d.dk, d.dv),
                              (d.batch, d.tq, d.heads * d.dv), (d.batch, d.heads, d.tq, d.tk),
                              d.batch * d.heads * d.tq))
    expression, dims, o_shape, p_shape, rows = decided
    if mask is not None and not mask.is_c_contiguous:
        mask = contiguous(mask)
    if not q.is_c_contiguous:
        q = contiguous(q)
    if not k.is_c_contiguous:
        k = contiguous(k)
    if not v.is_c_contiguous:
        v = contiguous(v)
    o = _array._empty(o_shape, q.dtype, q.device)
    p = _array._empty(p_shape, q.dtype, q.device)
    if rows:  # (common._run, inline: one frame from the autograd node to the launch; no launch for no batch)
        libraries, device = _native.current, q.device
        libraries.launcher.launch(
            "attention", expression, device, (libraries.default_queues.get(device) or q.queue).stream,
            min(rows, 65535), THREADS, [q.ptr, k.ptr, v.ptr, NULL if mask is None else mask.ptr, o.ptr, p.ptr,
                                        AttentionShape(*dims), c_double(scale), c_int(int(bool(causal)))])
    return o, p


def attention_heads_backward(dout, q, k, v, p, heads: int, scale: float = 1.0):
    """``(dq, dk, dv)`` of :func:`attention_heads` from its probabilities ``p``, in two launches (per query row:
    the scores' gradient into a workspace and dq; per key: dk and dv), every sum in a fixed order."""
    key = ("attention_heads_backward", dout.__class__, dout.shape, dout.dtype, dout.device, q.__class__, q.shape,
           q.dtype, q.device, k.__class__, k.shape, k.dtype, k.device, v.__class__, v.shape, v.dtype, v.device,
           p.__class__, p.shape, p.dtype, p.device, heads.__class__, heads)
    decided = _CHECKED.get(key)
    if decided is None:  # every check, once per signature
        what = "attention_heads_backward"
        dtype, d = _heads_shape(q, k, v, heads, what)
        _same([q, dout, p], what)
        if tuple(dout.shape) != (d.batch, d.tq, d.heads * d.dv) or \
                tuple(p.shape) != (d.batch, d.heads, d.tq, d.tk):
            raise ValueError(f"{what}: dout {dout.shape} and p {p.shape} must be attention_heads' o and p")
        decided = _CHECKED.keep(key, (programs.expression("attention_heads_backward_rows", dtype),
                              programs.expression("attention_heads_backward_keys", dtype),
                              (d.batch, d.heads, d.tq, d.tk, d.dk, d.dv),
                              d.batch * d.heads * d.tq, d.batch * d.heads * d.tk))
    rows_expression, keys_expression, dims, rows, keys = decided
    if not dout.is_c_contiguous:
        dout = contiguous(dout)
    if not q.is_c_contiguous:
        q = contiguous(q)
    if not k.is_c_contiguous:
        k = contiguous(k)
    if not v.is_c_contiguous:
        v = contiguous(v)
    if not p.is_c_contiguous:
        p = contiguous(p)
    dtype, device = q.dtype, q.device
    ds = _array._empty(p.shape, dtype, device)
    dq, dk, dv = _array._empty(q.shape, dtype, device), _array._empty(k.shape, dtype, device), \
        _array._empty(v.shape, dtype, device)
    if rows:  # (common._run, inline: one frame from the autograd node to the launches; rows, keys 0 for no batch)
        libraries = _native.current
        stream = (libraries.default_queues.get(device) or q.queue).stream
        libraries.launcher.launch("attention", rows_expression, device, stream, min(rows, 65535), THREADS,
                                  [dout.ptr, k.ptr, v.ptr, p.ptr, ds.ptr, dq.ptr, AttentionShape(*dims),
                                   c_double(scale)])
        libraries.launcher.launch("attention", keys_expression, device, stream, min(keys, 65535), THREADS,
                                  [dout.ptr, q.ptr, p.ptr, ds.ptr, dk.ptr, dv.ptr, AttentionShape(*dims)])
    return dq, dk, dv
