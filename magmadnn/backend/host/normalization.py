"""Host normalization: batch norm (and its running-statistics rule) and layer / RMS norm by rows."""

from __future__ import annotations

import numpy as np

from .. import _host_jit
from ._common import _channel_shape, _fused_rows


def _bn_axes(x):
    if x.ndim == 4:
        return (0, 2, 3)
    if x.ndim == 2:
        return (0,)
    raise ValueError(f"batch_norm: expected a 2-D (N, F) or 4-D (N, C, H, W) input, got shape {x.shape}")


def batch_norm_train(x, gamma, beta, running_mean, running_var, momentum, eps, unbiased=True):
    """Normalise with batch statistics; update running stats in place (running var: the unbiased variance, or the
    biased one when not ``unbiased``)."""
    axes = _bn_axes(x)
    shape = _channel_shape(x.ndim, x.shape[1])
    mu = x.mean(axis=axes)
    xc = x - mu.reshape(shape)
    var = np.mean(np.square(xc), axis=axes)
    inv_std = 1.0 / np.sqrt(var + eps)
    xhat = xc * inv_std.reshape(shape).astype(x.dtype, copy=False)
    y = xhat * gamma.reshape(shape) + beta.reshape(shape)
    m = x.size // x.shape[1]
    batch_var = var * (m / (m - 1)) if unbiased and m > 1 else var
    running_mean *= momentum
    running_mean += (1 - momentum) * mu
    running_var *= momentum
    running_var += (1 - momentum) * batch_var
    return y, (xhat, inv_std)


def batch_norm_infer(x, gamma, beta, running_mean, running_var, eps):
    shape = _channel_shape(x.ndim, x.shape[1])
    _bn_axes(x)
    scale = gamma / np.sqrt(running_var + eps)
    shift = beta - running_mean * scale
    return x * scale.reshape(shape).astype(x.dtype, copy=False) + shift.reshape(shape).astype(x.dtype, copy=False)


def batch_norm_backward(dy, x, gamma, ctx):
    """(dx, dgamma, dbeta) of ``batch_norm_train``."""
    xhat, inv_std = ctx
    axes = _bn_axes(x)
    shape = _channel_shape(x.ndim, x.shape[1])
    m = x.size // x.shape[1]
    dbeta = dy.sum(axis=axes)
    dgamma = (dy * xhat).sum(axis=axes)
    dx = dy * m
    dx -= dbeta.reshape(shape)
    dx -= xhat * dgamma.reshape(shape)
    dx *= (gamma * inv_std / m).reshape(shape).astype(dy.dtype, copy=False)
    return dx, dgamma, dbeta


def running_stat_update(running, batch, momentum):
    """In place: running -= (1 - momentum) (running - batch)."""
    running -= (running - batch) * (1.0 - momentum)


def layer_norm_forward(x, gamma, beta, eps, rms=False):
    """Rows over the last axis: y = (x - mean) * rstd * gamma + beta (``rms``: mean 0, var = mean(x^2))."""
    if gamma is not None and beta is not None and _fused_rows(x, small=(gamma, beta)):
        rows = (-1, x.shape[-1])
        y, mu, rstd = np.empty_like(x), np.empty(x.shape[:-1] + (1,), x.dtype), np.empty(x.shape[:-1] + (1,), x.dtype)
        _host_jit.kernels.layer_norm_forward(x.reshape(rows), gamma, beta, float(eps), bool(rms), y.reshape(rows),
                                             mu.reshape(-1), rstd.reshape(-1))
        return y, (mu, rstd)
    mu = np.zeros(x.shape[:-1] + (1,), x.dtype) if rms else x.mean(axis=-1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + x.dtype.type(eps))
    y = xc * rstd
    if gamma is not None:
        y *= gamma
    if beta is not None:
        y += beta
    return y, (mu, rstd)


def layer_norm_backward(dy, x, gamma, ctx, rms=False):
    """(dx, dgamma, dbeta) of ``layer_norm_forward``; dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma."""
    mu, rstd = ctx
    if gamma is not None and _fused_rows(x, dy, small=(gamma, mu, rstd)):
        cols = x.shape[-1]
        dx, sums = np.empty_like(x), np.zeros((2, cols), np.float64)
        _host_jit.kernels.layer_norm_backward(dy.reshape(-1, cols), x.reshape(-1, cols), gamma, mu.reshape(-1),
                                              rstd.reshape(-1), bool(rms), dx.reshape(-1, cols), sums[0], sums[1])
        return dx, sums[0].astype(x.dtype), sums[1].astype(x.dtype)
    xhat = (x - mu) * rstd
    g = dy * gamma if gamma is not None else dy
    dx = g - xhat * np.mean(g * xhat, axis=-1, keepdims=True)
    if not rms:
        dx -= np.mean(g, axis=-1, keepdims=True)
    dx *= rstd
    if gamma is None:
        return dx, None, None
    cols = x.shape[-1]
    return dx, (dy * xhat).reshape(-1, cols).sum(axis=0), dy.reshape(-1, cols).sum(axis=0)
