"""Host activations and softmax: each kind of ``geometry.ACTIVATIONS`` and its gradient, softmax and
log-softmax along any axis.

GELU (exact) uses the error function of ``_erf``; gelu_tanh the tanh approximation
``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""

from __future__ import annotations

import math

import numpy as np

from .. import _erf, _host_jit, geometry
from . import _rows
from ._common import _fused_rows

_GELU_C = math.sqrt(2.0 / math.pi)


def _sigmoid(x):
    y = np.multiply(x, 0.5)  # sigmoid(x) = (1 + tanh(x/2)) / 2: stable for any x, one transcendental
    np.tanh(y, out=y)
    y += 1
    y *= 0.5
    return y


def activation_forward(x, kind, alpha=0.0):
    """y = act(x) for a kind of ``geometry.ACTIVATIONS`` (gelu exact, gelu_tanh the tanh approximation)."""
    geometry.check_activation(kind, "activation_forward")
    one = x.dtype.type
    if kind == "relu":
        return np.maximum(x, 0)
    if kind == "sigmoid":
        return _sigmoid(x)
    if kind == "tanh":
        return np.tanh(x)
    if kind == "leaky_relu":
        return np.where(x > 0, x, x * alpha)
    if kind == "elu":
        return np.where(x > 0, x, np.expm1(np.minimum(x, 0)) * alpha)
    if kind == "gelu":  # x Phi(x) = x (1 + erf(x / sqrt 2)) / 2
        return _erf.gelu(x)
    if kind == "silu":
        y = _sigmoid(x)
        y *= x
        return y
    if kind == "softplus":  # max(x, 0) + log1p(exp(-|x|)): no overflow
        y = np.exp(-np.abs(x))
        np.log1p(y, out=y)
        y += np.maximum(x, 0)
        return y
    if kind == "softsign":
        return x / (np.abs(x) + one(1))
    if kind == "selu":
        return np.where(x > 0, x * one(geometry.SELU_SCALE),
                        np.expm1(np.minimum(x, 0)) * one(geometry.SELU_SCALE * geometry.SELU_ALPHA))
    if kind == "hard_sigmoid":  # relu6(x + 3) / 6
        y = np.add(x, one(3))
        np.clip(y, 0, 6, out=y)
        y /= one(6)
        return y
    if kind == "exponential":
        return np.exp(x)
    y = np.multiply(x, x)  # gelu_tanh: 0.5 x (1 + tanh(c x (1 + k x^2))), in place on one temporary
    y *= one(0.044715)
    y += 1
    y *= x
    y *= one(_GELU_C)
    np.tanh(y, out=y)
    y += 1
    y *= x
    y *= one(0.5)
    return y


#: Kinds whose gradient reads the forward output y (recomputed when y is None).
_BACKWARD_READS_Y = ("sigmoid", "tanh", "elu", "selu", "exponential")


def activation_backward(dy, x, y, kind, alpha=0.0):
    """dx for ``activation_forward``; ``y`` is the forward output (recomputed when None)."""
    geometry.check_activation(kind, "activation_backward")
    if y is None and kind in _BACKWARD_READS_Y:
        y = activation_forward(x, kind, alpha)
    one = dy.dtype.type
    if kind == "relu":
        ref = y if y is not None else x
        if _fused_rows(dy, ref):
            dx = np.empty(dy.shape, dy.dtype)  # (dy C-contiguous: empty_like's layout)
            _host_jit.kernels.relu_backward(dy.reshape(-1), ref.reshape(-1), dx.reshape(-1))
            return dx
        return np.multiply(dy, ref > 0)
    if kind == "sigmoid":
        return dy * (y * (1 - y))
    if kind == "tanh":
        return dy * (1 - y * y)
    if kind == "leaky_relu":
        return np.where(x > 0, dy, dy * alpha)
    if kind == "elu":
        return np.where(x > 0, dy, dy * (y + alpha))
    if kind == "gelu":  # Phi(x) + x phi(x)
        return _erf.gelu_grad(dy, x)
    if kind == "silu":  # s (1 + x (1 - s))
        s = _sigmoid(x)
        d = np.subtract(1, s)
        d *= x
        d += 1
        d *= s
        d *= dy
        return d
    if kind == "softplus":
        return dy * _sigmoid(x)
    if kind == "softsign":
        d = np.abs(x) + one(1)
        np.square(d, out=d)
        return dy / d
    if kind == "selu":
        return np.where(x > 0, dy * one(geometry.SELU_SCALE),
                        dy * (y + one(geometry.SELU_SCALE * geometry.SELU_ALPHA)))
    if kind == "hard_sigmoid":
        return np.where((x > -3) & (x < 3), dy / one(6), one(0))
    if kind == "exponential":
        return dy * y
    return _gelu_backward(dy, x)


def _gelu_backward(dy, x):
    """dy * GELU_tanh'(x) = dy (1 + t + x (1 - t^2) c (1 + 3k x^2)) / 2 with t = tanh(c x (1 + k x^2)), in place on
    three temporaries (the textbook expression's dozen temporaries cost 15x more on large arrays)."""
    one = x.dtype.type
    x2 = x * x
    du = x2 * one(3 * 0.044715 * _GELU_C)
    du += one(_GELU_C)
    t = x2 * one(0.044715)
    t += 1
    t *= x
    t *= one(_GELU_C)
    np.tanh(t, out=t)
    d = np.multiply(t, t, out=x2)
    np.subtract(1, d, out=d)
    d *= x
    d *= du
    d += t
    d += 1
    d *= dy
    d *= one(0.5)
    return d


# -------------------------------------------------------------------------------------------------------- softmax


def softmax(x, axis=-1):
    if axis % x.ndim == x.ndim - 1 and x.ndim:  # the last axis: faster row reductions (see _rows)
        e = x - _rows.last_max(x)
        np.exp(e, out=e)
        e /= _rows.last_sum(e)
        return e
    e = x - np.max(x, axis=axis, keepdims=True)
    np.exp(e, out=e)
    e /= np.sum(e, axis=axis, keepdims=True)
    return e


def log_softmax(x, axis=-1):
    s = x - np.max(x, axis=axis, keepdims=True)
    s -= np.log(np.sum(np.exp(s), axis=axis, keepdims=True))
    return s


def softmax_backward(dy, y, axis=-1):
    """dx for y = softmax(x)."""
    return y * (dy - np.sum(dy * y, axis=axis, keepdims=True))


def log_softmax_backward(dy, y, axis=-1):
    """dx for y = log_softmax(x)."""
    return dy - np.exp(y) * np.sum(dy, axis=axis, keepdims=True)
