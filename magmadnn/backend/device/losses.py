"""Device losses: the fused softmax cross-entropy kernels (per row; the gradient of their mean in one launch) and
Keras' cross entropy of probabilities (clip, log, weighted mean: one launch; its gradient: one more)."""

from __future__ import annotations

from . import kernels as _dk
from ._common import (
    _int64_labels,
)
from .kernels import loss as _loss


def softmax_cross_entropy(logits, labels):
    """``(loss (N,), probs (N, C))``: one fused kernel, stable for any logits."""
    return _dk.softmax_cross_entropy(logits, _int64_labels(labels), reduction="none", grad=False, probs=True)


def softmax_cross_entropy_backward(probs, labels, dloss):
    return _dk.softmax_cross_entropy_backward(probs, _int64_labels(labels), dloss)


#: ``(loss 0-d, probs)``: the mean of the per-row loss, in one launch for small problems (no wrapper).
softmax_cross_entropy_mean = _loss.softmax_cross_entropy_mean_op
#: dlogits of the mean over rows of ``softmax_cross_entropy``'s loss, ``dloss`` 0-d: one launch (no wrapper).
softmax_cross_entropy_mean_backward = _loss.softmax_cross_entropy_mean_backward


def probability_crossentropy(p, packed, binary, smoothing, eps, scale):
    return _dk.keras_prob_xent(p, packed, binary, smoothing, eps, scale)


def probability_crossentropy_backward(p, packed, dloss, binary, smoothing, eps, scale):
    return _dk.keras_prob_xent_backward(p, packed, dloss, binary, smoothing, eps, scale)
