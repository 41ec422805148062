"""Device losses: the fused softmax cross-entropy kernels (per row; the gradient of their mean in one launch) and
Keras' cross entropy of probabilities (clip, log, weighted mean: one launch; its gradient: one more)."""

from __future__ import annotations

import numpy as np

from . import kernels as _dk
from ._common import (
    _int64_labels,
)

_INT64 = np.dtype(np.int64)  # labels of this dtype object pass as they are, without _int64_labels' frame


def softmax_cross_entropy(logits, labels):
    """``(loss (N,), probs (N, C))``: one fused kernel, stable for any logits."""
    return _dk.softmax_cross_entropy(logits, _int64_labels(labels), reduction="none", grad=False, probs=True)


def softmax_cross_entropy_backward(probs, labels, dloss):
    return _dk.softmax_cross_entropy_backward(probs, _int64_labels(labels), dloss)


def softmax_cross_entropy_mean(logits, labels):
    """``(loss 0-d, probs)``: the mean of the per-row loss, in one launch for small problems."""
    return _dk.softmax_cross_entropy_mean(logits, labels if labels.dtype is _INT64 else _int64_labels(labels))


def softmax_cross_entropy_mean_backward(probs, labels, dloss):
    """dlogits of the mean over rows of ``softmax_cross_entropy``'s loss, ``dloss`` 0-d: one launch."""
    return _dk.softmax_cross_entropy_backward(probs, labels if labels.dtype is _INT64 else _int64_labels(labels),
                                              dloss, mean=True)


def probability_crossentropy(p, packed, binary, smoothing, eps, scale):
    return _dk.keras_prob_xent(p, packed, binary, smoothing, eps, scale)


def probability_crossentropy_backward(p, packed, dloss, binary, smoothing, eps, scale):
    return _dk.keras_prob_xent_backward(p, packed, dloss, binary, smoothing, eps, scale)
