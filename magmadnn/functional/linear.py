"""The dense (fully connected) product ``x @ w + b`` on the last axis."""

from __future__ import annotations

import math

from .._checks import Plans
from ..autograd import Function, Tensor
from ..backend import geometry
from ._base import _as_tensor, _need_ndim, _same_dtype, signature

__all__ = ["dense"]


class DenseFunction(Function):
    """``x @ w (+ b)`` (then the fused ``activation``); ``rows``: x of rank > 2, its leading axes taken as ``rows``
    rows of one matrix product (views of x and of the gradients, one node on the tape)."""

    def forward(self, x, w, b=None, activation=None, alpha=0.0, rows=None):
        xp = self.xp
        self.lead = None
        if rows is not None:
            self.lead = x.shape[:-1]
            x = xp.reshape(x, (rows, x.shape[-1]))
        self.x, self.w, self.has_bias, self.activation, self.alpha = x, w, b is not None, activation, alpha
        y = xp.matmul(x, w)
        if activation is not None:  # the epilogue: bias and activation in one op (one launch on the device)
            self.y, self.z = xp.bias_activation(y, b, activation, alpha)
            y = self.y
        elif b is not None:
            y = xp.bias_add(y, b)
        return y if rows is None else xp.reshape(y, (*self.lead, y.shape[1]))

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        lead = self.lead
        if lead is not None:
            g = xp.reshape(g, (self.x.shape[0], g.shape[-1]))
        gb = None
        if self.activation is not None:  # the activation's gradient and the bias gradient in one op
            g, gb = xp.bias_activation_backward(g, self.z, self.y, self.activation, self.alpha, bias=need[2])
        gx = xp.matmul(g, self.w, transpose_b=True) if need[0] else None
        if gx is not None and lead is not None:
            gx = xp.reshape(gx, (*lead, gx.shape[1]))
        gw = None
        if need[1]:  # SGD's momentum folded into this GEMM in a host training step (see magmadnn._momentum_fold)
            sink = getattr(self.inputs[1], "_grad_sink", None)
            gw = sink.fold(self.x, g) if sink is not None else None
            if gw is None:
                gw = xp.matmul(self.x, g, transpose_a=True)
        if not self.has_bias:
            return gx, gw
        return gx, gw, (gb if self.activation is not None else xp.bias_grad(g) if need[2] else None)


def dense(x, w, b=None, activation=None, alpha=0.0) -> Tensor:
    """x (..., in) @ w (in, out) + b (out,) through the backend's matmul and bias_add, on the last axis of x of any
    rank >= 2 (the leading axes are taken as rows of one matrix product). ``activation`` (a kind of
    ``geometry.ACTIVATIONS``, slope/scale ``alpha``; needs ``b``): ``activation(dense(x, w, b))`` with the bias and
    the activation as one op, ``bias_activation``."""
    key = signature(x, w, b, activation)
    params = _DENSE_PLANS.get(key) if key is not None else None
    if params is None:  # every check; the plan: DenseFunction's arguments (the rows of a rank > 2 x)
        x, w = _as_tensor(x), _as_tensor(w)
        b = None if b is None else _as_tensor(b)
        params = _DENSE_PLANS.keep(key, dense_arguments(x, w, b, activation))
    if activation is not None:
        params = {**params, "alpha": float(alpha)}
    return DenseFunction.apply(x, w, **params) if b is None else DenseFunction.apply(x, w, b, **params)


def dense_arguments(x, w, b=None, activation=None) -> dict:
    """The keyword arguments of ``DenseFunction.apply(x, w(, b), **arguments)`` that ``dense(x, w, b, activation)``
    runs for operands of these shapes and dtypes (``alpha`` given apart), after every check."""
    if activation is not None:
        geometry.check_activation(activation, "dense")
        if b is None:
            raise ValueError("dense: a fused activation needs the bias b; apply the activation after dense(x, w)")
    x, w = _as_tensor(x), _as_tensor(w)
    lead = _plan_dense(x, w, None if b is None else _as_tensor(b))
    params = {} if activation is None else {"activation": activation}
    if lead:
        params["rows"] = math.prod(lead)
    return params


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
