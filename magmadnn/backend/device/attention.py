"""Device attention: the masked, scaled softmax kernel; attention over interleaved heads in one kernel."""

from __future__ import annotations

from . import kernels as _dk
from ._common import (
    _same_dtype,
)


def masked_softmax(x, mask=None, scale=1.0, causal=False):
    """Scale, causal and key masks and softmax of attention scores in one kernel."""
    if mask is not None and mask.dtype is not x.dtype:
        _same_dtype("masked_softmax", x, mask)
    return _dk.masked_softmax(x, mask, float(scale), bool(causal))


def masked_softmax_backward(dy, y, scale=1.0):
    _same_dtype("masked_softmax_backward", dy, y)
    return _dk.masked_softmax_backward(dy, y, float(scale))


# The ops attention_heads(q, k, v, heads, mask=None, scale=1.0, causal=False) -> (o, p) and
# attention_heads_backward(dout, q, k, v, p, heads, scale=1.0) -> (dq, dk, dv) are the launchers themselves
# (attention on the projections' layout, heads interleaved: one launch forward, two backward, no head split or
# merged by a copy): each checks a signature's operands (dtypes, shapes, heads) once, then launches.
attention_heads = _dk.attention_heads
attention_heads_backward = _dk.attention_heads_backward
