"""Host losses: the fused softmax cross-entropy and its gradient."""

from __future__ import annotations

import numpy as np

from .. import _host_jit


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
    """``(mean of the per-row loss, probs)``; integer labels through ``_host_jit``'s one-pass kernel when it is
    there (labels out of range then take the NumPy path, which raises or wraps as NumPy indexing does)."""
    if _one_pass(logits, labels):
        probs = np.empty(logits.shape, logits.dtype)
        loss = np.empty(logits.shape[0], logits.dtype)
        ok, total = _host_jit.kernels.softmax_xent_rows(logits, labels, probs, loss)
        if ok:
            return np.asarray(total / logits.shape[0], dtype=logits.dtype), probs
    loss, probs = softmax_cross_entropy(logits, labels)
    return np.asarray(loss.mean(), dtype=loss.dtype), probs


def softmax_cross_entropy_mean_backward(probs, labels, dloss):
    """dlogits of the mean over rows of ``softmax_cross_entropy``'s loss, ``dloss`` 0-d."""
    rows, real = probs.shape[0], probs.dtype.type
    if _one_pass(probs, labels):  # (a scalar share: the same rounded division as the 0-d arrays' below)
        d = np.empty(probs.shape, probs.dtype)
        _host_jit.kernels.softmax_xent_mean_backward(probs, labels, real(1 if dloss is None else dloss) / real(rows), d)
        return d
    share = np.asarray(1 if dloss is None else dloss, dtype=probs.dtype) / real(max(rows, 1))
    return softmax_cross_entropy_backward(probs, labels, np.full(rows, share, dtype=probs.dtype))


def _one_pass(rows, labels) -> bool:
    """Whether the JIT kernels take these: numba there, 2-D float32/float64 rows (at least one row and column)
    and 1-D integer labels, one per row."""
    return (_host_jit.kernels is not None and type(rows) is np.ndarray and type(labels) is np.ndarray
            and rows.ndim == 2 and rows.dtype in _FLOATS and labels.ndim == 1 and labels.dtype.kind in "iu"
            and labels.shape[0] == rows.shape[0] and rows.shape[0] > 0 and rows.shape[1] > 0)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
