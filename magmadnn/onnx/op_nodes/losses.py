"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over (N, C, d1, ...) scores and integer targets,
with class weights, ignore_index and the none / sum / mean reductions (mean divides by the summed weights of the
targets kept, as ONNX does); differentiable in the scores and the weights."""

from __future__ import annotations

import numpy as np

from ._registry import Form, op
from ._runtime import F, T, Tensor, tensor


def _nll(x, target, weight, ignore, reduction):
    target = tensor(target, x) if not isinstance(target, Tensor) else target
    ns = target.data.__array_namespace__()
    t = target.data
    keep = ns.ones(t.shape, dtype=bool) if ignore is None else ns.not_equal(t, ns.asarray(ignore, dtype=t.dtype))
    safe = ns.where(keep, t, ns.zeros_like(t))
    classes = x.shape[1]
    rows = ns.reshape(ns.arange(classes, dtype=t.dtype), (1, classes) + (1,) * (t.ndim - 1))
    onehot = ns.astype(ns.equal(ns.expand_dims(safe, axis=1), rows), np.dtype(x.dtype))
    picked = F.sum(F.multiply(x, Tensor._of(onehot, x.xp)), axis=1)
    kept = Tensor._of(ns.astype(keep, np.dtype(x.dtype)), x.xp)
    w = kept if weight is None else F.multiply(T.take(tensor(weight, x), Tensor._of(safe, x.xp), axis=0), kept)
    loss = F.negative(F.multiply(picked, w))
    if reduction == "none":
        return loss
    total = F.sum(loss)
    return total if reduction == "sum" else F.divide(total, F.sum(w))


def _settings(view):
    view.only("ignore_index", "reduction")
    reduction = view.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise view.error(f"reduction={reduction!r} is not supported (none, sum or mean)")
    return view.attr("ignore_index"), reduction


@op("NegativeLogLikelihoodLoss")
def nll_loss(view):
    ignore, reduction = _settings(view)

    def run(x, target, weight=None):
        return _nll(x, target, weight, ignore, reduction)

    return Form(run, keeps_batch=reduction == "none")


@op("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(view):
    ignore, reduction = _settings(view)
    both = len(view.node.output) > 1

    def run(x, target, weight=None):
        log_prob = F.log_softmax(x, axis=1)
        loss = _nll(log_prob, target, weight, ignore, reduction)
        return (loss, log_prob) if both else loss

    return Form(run, keeps_batch=[reduction == "none", True] if both else reduction == "none")
