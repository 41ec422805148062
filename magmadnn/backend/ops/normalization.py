"""Normalization: batch norm with its running statistics, and layer / RMS norm by rows."""

from __future__ import annotations

from ._spec import op


@op
def batch_norm_train(x, gamma, beta, running_mean, running_var, momentum, eps, unbiased=True):
    """Normalise x (N, F) or (N, C, H, W) with batch statistics -> ``(y, ctx)``; updates the running stats in place
    (``unbiased``: the running variance takes the unbiased batch variance, else the biased one)."""


@op
def batch_norm_infer(x, gamma, beta, running_mean, running_var, eps):
    """Normalise with the running statistics."""


@op
def batch_norm_backward(dy, x, gamma, ctx):
    """``(dx, dgamma, dbeta)`` of ``batch_norm_train``."""


@op
def running_stat_update(running, batch, momentum):
    """In place: the batch-norm rule ``running = momentum running + (1 - momentum) batch``, computed as
    ``running -= (1 - momentum) (running - batch)``."""


@op
def layer_norm_forward(x, gamma, beta, eps, rms=False):
    """Each row of ``x`` normalised over its last axis -> ``(y, ctx)``: ``y = (x - mean) / sqrt(var + eps) * gamma +
    beta`` with the biased variance of the row; ``rms``: ``y = x / sqrt(mean(x^2) + eps) * gamma + beta`` (no
    centring). ``gamma`` and ``beta`` (F,) of the last axis may each be None (no scale, no shift). Other axes are
    normalised by moving them last; GroupNorm normalises (N * groups, rest) rows."""


@op
def layer_norm_backward(dy, x, gamma, ctx, rms=False):
    """``(dx, dgamma, dbeta)`` of ``layer_norm_forward``: dgamma = column sums of dy * xhat, dbeta = column sums of
    dy, each summed over the rows in order (deterministic); both None when ``gamma`` is None."""
