"""Losses a backend fuses: softmax cross-entropy."""

from __future__ import annotations

from ._spec import op


@op
def softmax_cross_entropy(logits, labels):
    """Per-sample cross entropy of softmax(logits (N, C)) with int labels (N,) or one-hot/soft labels (N, C):
    ``(loss (N,), probs (N, C))``."""


@op
def softmax_cross_entropy_backward(probs, labels, dloss):
    """dlogits of ``softmax_cross_entropy`` for ``dloss`` (N,)."""
