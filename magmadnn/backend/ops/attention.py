"""Attention: the masked, scaled softmax of attention scores."""

from __future__ import annotations

from ._spec import op


@op
def masked_softmax(x, mask=None, scale=1.0, causal=False):
    """Attention probabilities from scores x (B, H, Tq, Tk): softmax over the last axis of ``scale * x`` where key j
    is kept when ``causal`` is False or j <= i (query i; PyTorch's ``is_causal``) and ``mask`` (B, Tk, x's dtype;
    None: every key) is nonzero at j. A row with no key kept is all zeros."""


@op
def masked_softmax_backward(dy, y, scale=1.0):
    """dx of ``masked_softmax`` from its output ``y``: ``scale * y * (dy - sum(dy * y, axis=-1))``."""


@op
def attention_heads(q, k, v, heads, mask=None, scale=1.0, causal=False):
    """``(o, p)``: attention with ``heads`` heads interleaved on the last axis (the projections' layout, no head
    split off): q (B, Tq, H*dk), k (B, Tk, H*dk), v (B, Tk, H*dv); head h takes columns [h*d, (h+1)*d). ``p`` (B, H,
    Tq, Tk) = ``masked_softmax(q_h k_h^T, mask, scale, causal)``, ``o`` (B, Tq, H*dv) = ``p_h v_h`` side by side."""


@op
def attention_heads_backward(dout, q, k, v, p, heads, scale=1.0):
    """``(dq, dk, dv)`` of ``attention_heads`` from its probabilities ``p``."""
