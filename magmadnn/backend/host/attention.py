"""Host attention: the masked (causal, key-mask) scaled softmax and its gradient."""

from __future__ import annotations

import numpy as np

from .. import _host_jit
from . import _rows
from ._common import _fused_rows

_CAUSAL_BIAS: dict = {}


def _causal_bias(tq: int, tk: int, dtype) -> np.ndarray:
    """(tq, tk): 0 where key j <= query i, -inf elsewhere (added to the scores; made once per shape and dtype)."""
    key = (tq, tk, dtype)
    bias = _CAUSAL_BIAS.get(key)
    if bias is None:
        bias = _CAUSAL_BIAS[key] = np.where(np.tri(tq, tk, dtype=bool), 0.0, -np.inf).astype(dtype)
    return bias


def masked_softmax(x, mask=None, scale=1.0, causal=False):
    """Softmax over the last axis of ``scale * x`` (B, H, Tq, Tk) with causal and key masks (added as 0 / -inf);
    rows with no key left are 0."""
    s = np.multiply(x, x.dtype.type(scale))
    if causal:
        s += _causal_bias(x.shape[2], x.shape[3], x.dtype)
    if mask is not None:
        s += np.where(mask != 0, 0.0, -np.inf).astype(x.dtype)[:, None, None, :]
    top = _rows.last_max(s)
    if causal or mask is not None:
        top[~np.isfinite(top)] = 0  # a row with no key left: exp(-inf) = 0 everywhere
    s -= top
    np.exp(s, out=s)
    total = _rows.last_sum(s)
    if causal or mask is not None:
        return np.divide(s, total, out=s, where=total > 0)
    s /= total
    return s


def masked_softmax_backward(dy, y, scale=1.0):
    """dx of ``masked_softmax``: ``scale * y * (dy - sum(dy * y))`` along the last axis."""
    if _fused_rows(y, dy):
        dx = np.empty_like(y)
        rows = (-1, y.shape[-1])
        _host_jit.kernels.masked_softmax_backward(dy.reshape(rows), y.reshape(rows), y.dtype.type(scale),
                                                  dx.reshape(rows))
        return dx
    dx = dy - np.sum(dy * y, axis=-1, keepdims=True)
    dx *= y
    dx *= y.dtype.type(scale)
    return dx


def _split(a, heads):
    b, t, width = a.shape
    return a.reshape(b, t, heads, width // heads).transpose(0, 2, 1, 3)


def _merge(a):
    b, h, t, d = a.shape
    return np.ascontiguousarray(a.transpose(0, 2, 1, 3)).reshape(b, t, h * d)


def attention_heads(q, k, v, heads, mask=None, scale=1.0, causal=False):
    """``(o, p)``: the heads split, scores, ``masked_softmax``, the heads merged."""
    qh, kh, vh = (_split(a, heads) for a in (q, k, v))
    p = masked_softmax(np.matmul(qh, kh.transpose(0, 1, 3, 2)), mask, scale, causal)
    return _merge(np.matmul(p, vh)), p


def attention_heads_backward(dout, q, k, v, p, heads, scale=1.0):
    """``(dq, dk, dv)`` of :func:`attention_heads`."""
    qh, kh, vh, doh = (_split(a, heads) for a in (q, k, v, dout))
    ds = masked_softmax_backward(np.matmul(doh, vh.transpose(0, 1, 3, 2)), p, scale)
    return _merge(np.matmul(ds, kh)), _merge(np.matmul(ds.transpose(0, 1, 3, 2), qh)), _merge(
        np.matmul(p.transpose(0, 1, 3, 2), doh))
