"""The dense (fully connected) product ``x @ w + b`` on the last axis."""

from __future__ import annotations

import math

from .._checks import Plans
from ..autograd import Function, Tensor
from ._base import _as_tensor, _need_ndim, _same_dtype, signature
from .operators import reshape

__all__ = ["dense"]


class DenseFunction(Function):
    def forward(self, x, w, b=None):
        self.x, self.w, self.has_bias = x, w, b is not None
        y = self.xp.matmul(x, w)
        return y if b is None else self.xp.bias_add(y, b)

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        gx = xp.matmul(g, self.w, transpose_b=True) if need[0] else None
        gw = xp.matmul(self.x, g, transpose_a=True) if need[1] else None
        if not self.has_bias:
            return gx, gw
        return gx, gw, (xp.bias_grad(g) if need[2] else None)


def dense(x, w, b=None) -> Tensor:
    """x (..., in) @ w (in, out) + b (out,) through the backend's matmul and bias_add, on the last axis of x of any
    rank >= 2 (the leading axes are taken as rows of one matrix product)."""
    key = signature(x, w, b)
    lead = _DENSE_PLANS.get(key) if key is not None else None
    if lead is None:  # every check; the plan: the leading axes to fold into rows (() for a 2-D x)
        x, w = _as_tensor(x), _as_tensor(w)
        b = None if b is None else _as_tensor(b)
        lead = _DENSE_PLANS.keep(key, _plan_dense(x, w, b))
    if lead:
        return reshape(dense(reshape(x, (math.prod(lead), x.shape[-1])), w, b), (*lead, w.shape[1]))
    return DenseFunction.apply(x, w) if b is None else DenseFunction.apply(x, w, b)


_DENSE_PLANS = Plans()


def _plan_dense(x, w, b) -> tuple:
    if x.ndim < 2:
        raise ValueError(f"dense: x must be at least 2-D (N, ..., in_features), got shape {x.shape}")
    _need_ndim(w, 2, "dense", "w", "(in_features, out_features)")
    if x.shape[-1] != w.shape[0]:
        raise ValueError(
            f"dense: x has shape {x.shape} but w has shape {w.shape}; expected x of shape (N, ..., {w.shape[0]})"
        )
    if b is not None and b.shape != (w.shape[1],):
        raise ValueError(f"dense: b has shape {b.shape}, expected ({w.shape[1]},) for w of shape {w.shape}")
    _same_dtype("dense", x=x, w=w, b=b)
    return x.shape[:-1] if x.ndim > 2 else ()
