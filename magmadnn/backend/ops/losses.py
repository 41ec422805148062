"""Losses a backend fuses: softmax cross-entropy."""

from __future__ import annotations

from ._spec import op, optional


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


@optional
def probability_crossentropy(p, packed, binary, smoothing, eps, scale):
    """Keras' cross entropy of probabilities ``p`` (N, D) reduced: ``scale * sum_i w_i loss_i`` (0-d), the targets
    and the weights ``w`` packed as ``KerasLoss.prepare`` packs them (N, D + 1). ``binary``: ``loss_i`` is the mean
    over j of ``-(t log c + (1 - t) log(1 - c))``, ``c = clip(p, eps, 1 - eps)``, ``t`` smoothed to
    ``t (1 - smoothing) + smoothing / 2``; else ``-sum_j t log clip(p / sum_j p, eps, 1 - eps)``, ``t`` smoothed to
    ``t (1 - smoothing) + smoothing / D``. A backend that fuses the chain (the device: one launch) adds it."""


@optional
def probability_crossentropy_backward(p, packed, dloss, binary, smoothing, eps, scale):
    """dp of ``probability_crossentropy`` for its 0-d upstream gradient ``dloss`` (None: 1); no gradient where the
    clip binds."""
