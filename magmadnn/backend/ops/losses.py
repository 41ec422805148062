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


@op
def softmax_cross_entropy_mean(logits, labels):
    """``(loss, probs)``: the mean over the N rows of ``softmax_cross_entropy``'s per-row loss as a 0-d array (the
    device computes it with the softmax in one launch for small problems) and the softmax."""


@op
def softmax_cross_entropy_mean_backward(probs, labels, dloss):
    """dlogits of the mean over the N rows of ``softmax_cross_entropy``'s loss for a 0-d ``dloss``:
    ``softmax_cross_entropy_backward`` with every row's dloss ``dloss / N`` (rounded to the dtype once); ``dloss``
    None: 1 (``loss.backward()``'s implicit gradient, no array made for it)."""
