"""Attention: scores ``q k^T``, the masked softmax over the keys, scaled dot-product attention."""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Function, Tensor
from ._base import _as_tensor, _need_ndim, _pair_of, _same_dtype, check_values
from .operators import matmul
from .regularization import dropout

__all__ = ["matmul_nt", "masked_softmax", "scaled_dot_product_attention", "attention_heads",
           "check_key_mask_values"]


class MatMulNTFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.matmul(a, b, transpose_b=True)

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        return (xp.matmul(g, self.b) if need[0] else None,
                xp.matmul(g, self.a, transpose_a=True) if need[1] else None)


def matmul_nt(a, b) -> Tensor:
    """a (..., m, k) @ b (..., n, k) transposed, for stacks of the same leading shape (no copy of b)."""
    a, b = _pair_of(a, b)
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"matmul_nt: expected a (..., m, k) and b (..., n, k) with the same leading axes, got shapes "
                         f"{a.shape} and {b.shape}")
    _same_dtype("matmul_nt", a=a, b=b)
    return MatMulNTFunction.apply(a, b)


class MaskedSoftmaxFunction(Function):
    def forward(self, x, mask=None, scale=1.0, causal=False):
        self.scale = scale
        self.y = self.xp.masked_softmax(x, mask, scale, causal)
        return self.y

    def backward(self, g):
        return (self.xp.masked_softmax_backward(g, self.y, self.scale),)


def _key_mask(key_mask, like: Tensor, fn: str):
    """The key mask as a backend array of ``like``'s dtype, checked against scores ``like`` (B, H, Tq, Tk)."""
    if key_mask is None:
        return None
    data = key_mask.data if isinstance(key_mask, Tensor) else key_mask
    if not hasattr(data, "shape"):
        data = np.asarray(data)
    want = (like.shape[0], like.shape[-1])
    if tuple(data.shape) != want:
        raise ValueError(f"{fn}: key_mask must have shape (batch, key_time) = {want}, got {tuple(data.shape)}")
    check_key_mask_values(data, fn, like.xp)
    if np.dtype(data.dtype) != np.dtype(like.dtype):
        data = like.xp.asarray(data, dtype=like.dtype)  # a backend array is cast where it lives (no host copy)
    return data


def check_key_mask_values(mask, who: str, xp=None) -> None:
    """A key mask holds booleans or the numbers 1 (attend) and 0 (padding): anything else (0.5, NaN, PyTorch's
    additive 0/-inf masks, which would read inverted) is a ValueError naming ``who``; at once for a host mask, at
    the next host read for an array of backend ``xp`` (a check kernel, see ``_base.check_values``)."""
    if xp is None or isinstance(mask, np.ndarray):
        mask, xp = np.asarray(mask), None
    kind = np.dtype(mask.dtype).kind
    if kind == "b":
        return
    if kind not in "iuf":
        raise TypeError(f"{who}: a key mask must be bool or numeric (1: attend, 0: padding), got dtype {mask.dtype}")
    check_values(xp, mask, f"{who}: a key mask holds 1 (attend) or 0 (padding) or booleans, got {{bad!r}}; for "
                 "PyTorch's key_padding_mask pass its negation, an additive mask (0/-inf) is not a mask")


def masked_softmax(x, key_mask=None, scale=1.0, causal=False) -> Tensor:
    """Attention probabilities from scores x (B, H, Tq, Tk): softmax of ``scale * x`` over the keys, key j masked
    when ``causal`` and j > i, or where ``key_mask`` (B, Tk) is 0; a row with no key left is zeros."""
    fn = "masked_softmax"
    x = _as_tensor(x)
    _need_ndim(x, 4, fn, "x", "(batch, heads, query_time, key_time)")
    if x.shape[2] == 0 or x.shape[3] == 0:
        raise ValueError(f"{fn}: x needs at least one query and one key (batch, heads, query_time, key_time), got "
                         f"shape {x.shape}")
    _same_dtype(fn, x=x)
    return MaskedSoftmaxFunction.apply(x, mask=_key_mask(key_mask, x, fn), scale=float(scale), causal=bool(causal))


def scaled_dot_product_attention(q, k, v, key_mask=None, causal=False, scale=None, dropout_rate=0.0,
                                 training=False, rng=None) -> Tensor:
    """softmax(q k^T * scale, masked) v for q (B, H, Tq, dk), k (B, H, Tk, dk), v (B, H, Tk, dv) -> (B, H, Tq, dv);
    ``scale`` defaults to 1/sqrt(dk); dropout on the probabilities while training (as PyTorch's function)."""
    fn = "scaled_dot_product_attention"
    q, k, v = _as_tensor(q), _as_tensor(k), _as_tensor(v)
    for what, t in (("q", q), ("k", k), ("v", v)):
        _need_ndim(t, 4, fn, what, "(batch, heads, time, features)")
    if k.shape[:2] != q.shape[:2] or v.shape[:3] != k.shape[:3] or k.shape[3] != q.shape[3]:
        raise ValueError(f"{fn}: expected q (B, H, Tq, dk), k (B, H, Tk, dk) and v (B, H, Tk, dv), got shapes "
                         f"{q.shape}, {k.shape} and {v.shape}")
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)
    p = masked_softmax(matmul_nt(q, k), key_mask, scale, causal)
    p = dropout(p, dropout_rate, training, rng)
    return matmul(p, v)


class AttentionHeadsFunction(Function):
    def forward(self, q, k, v, heads=1, mask=None, scale=1.0, causal=False):
        self.q, self.k, self.v, self.heads, self.scale = q, k, v, heads, scale
        o, self.p = self.xp.attention_heads(q, k, v, heads, mask, scale, causal)
        return o

    def backward(self, g):
        return self.xp.attention_heads_backward(g, self.q, self.k, self.v, self.p, self.heads, self.scale)


def attention_heads(q, k, v, heads: int, key_mask=None, causal=False, scale=None) -> Tensor:
    """:func:`scaled_dot_product_attention` of ``heads`` heads interleaved on the last axis, as projections give
    them: q (B, Tq, H*dk), k (B, Tk, H*dk), v (B, Tk, H*dv) -> (B, Tq, H*dv), head h on columns [h*d, (h+1)*d); the
    same as splitting the heads (reshape, transpose), attending and merging them back, without the copies (one op,
    ``attention_heads``; no dropout). ``scale`` defaults to 1/sqrt(dk)."""
    fn = "attention_heads"
    q, k, v = _as_tensor(q), _as_tensor(k), _as_tensor(v)
    for what, t in (("q", q), ("k", k), ("v", v)):
        _need_ndim(t, 3, fn, what, "(batch, time, heads * features)")
    heads = int(heads)
    if (heads < 1 or q.shape[0] != k.shape[0] or k.shape[:2] != v.shape[:2] or q.shape[2] != k.shape[2]
            or q.shape[2] % heads or v.shape[2] % heads or 0 in (q.shape[1], k.shape[1])):
        raise ValueError(f"{fn}: expected q (B, Tq, H*dk), k (B, Tk, H*dk) and v (B, Tk, H*dv) for {heads} heads "
                         f"(at least one query and one key), got shapes {q.shape}, {k.shape} and {v.shape}")
    _same_dtype(fn, q=q, k=k, v=v)
    scale = 1.0 / math.sqrt(q.shape[2] // heads) if scale is None else float(scale)
    mask = None if key_mask is None else _key_mask(key_mask, _MaskShape(q, k), fn)
    return AttentionHeadsFunction.apply(q, k, v, heads=heads, mask=mask, scale=scale, causal=bool(causal))


class _MaskShape:
    """What :func:`_key_mask` reads of scores (B, H, Tq, Tk): the batch and key time, dtype and backend."""

    def __init__(self, q, k):
        self.shape, self.dtype, self.xp = (q.shape[0], 1, q.shape[1], k.shape[1]), q.dtype, q.xp
