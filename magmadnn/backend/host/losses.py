"""Host losses: the fused softmax cross-entropy and its gradient."""

from __future__ import annotations

import numpy as np


def softmax_cross_entropy(logits, labels):
    """Per-sample cross entropy of softmax(logits) with int labels (N,) or one-hot/soft labels (N, C).

    Returns ``(loss (N,), probs (N, C))``; stable for any logits (shift by the row max, one exp).
    """
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    probs = np.exp(shifted)
    total = probs.sum(axis=1)
    probs /= total[:, None]
    log_total = np.log(total)
    if labels.ndim == 1:
        loss = log_total - shifted[np.arange(logits.shape[0]), labels]
    else:
        labels = labels.astype(logits.dtype, copy=False)
        loss = log_total * labels.sum(axis=1) - np.einsum("nc,nc->n", labels, shifted)
    return loss.astype(logits.dtype, copy=False), probs


def softmax_cross_entropy_backward(probs, labels, dloss):
    """dlogits for ``softmax_cross_entropy`` given dloss of shape (N,)."""
    if labels.ndim == 1:
        d = probs.copy()
        d[np.arange(probs.shape[0]), labels] -= 1
    else:
        labels = labels.astype(probs.dtype, copy=False)
        d = probs * labels.sum(axis=1, keepdims=True)
        d -= labels
    d *= np.asarray(dloss, dtype=probs.dtype).reshape(-1, 1)
    return d


def softmax_cross_entropy_mean(logits, labels):
    """``(mean of the per-row loss, probs)``."""
    loss, probs = softmax_cross_entropy(logits, labels)
    return np.asarray(loss.mean(), dtype=loss.dtype), probs


def softmax_cross_entropy_mean_backward(probs, labels, dloss):
    """dlogits of the mean over rows of ``softmax_cross_entropy``'s loss, ``dloss`` 0-d."""
    rows = probs.shape[0]
    share = np.asarray(1 if dloss is None else dloss, dtype=probs.dtype) / probs.dtype.type(max(rows, 1))
    return softmax_cross_entropy_backward(probs, labels, np.full(rows, share, dtype=probs.dtype))
