"""Losses: softmax cross entropy (class indices, one-hot or probabilities, smoothing, ignored labels), binary
cross entropy from logits, mean squared error."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..autograd import Function, Tensor
from ._base import _as_tensor, _need_ndim, _same_dtype, constant
from .activations import log_softmax
from .operators import add, matmul, mean, multiply, negative, reshape, subtract, sum

__all__ = ["softmax_cross_entropy", "mse", "cross_entropy", "binary_cross_entropy_with_logits"]


def _reduce(loss: Tensor, reduction: str, fn: str) -> Tensor:
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


class SoftmaxCrossEntropyFunction(Function):
    def forward(self, logits, labels):
        self.labels = labels
        loss, self.probs = self.xp.softmax_cross_entropy(logits, labels)
        return loss

    def backward(self, g):
        return (self.xp.softmax_cross_entropy_backward(self.probs, self.labels, g),)


def _labels_array(labels, logits: Tensor, fn: str, check_values: bool = True):
    """The labels as a backend array after checking shape and dtype; ``check_values`` also checks the class range
    (a host read of device labels: callers that validated the whole target array once, as ``Model.fit`` does, pass
    False so that no batch is read back)."""
    xp = logits.xp
    data = labels.data if isinstance(labels, Tensor) else labels
    if not hasattr(data, "dtype") or not hasattr(data, "shape"):
        data = np.asarray(data)
    n, c = logits.shape
    shape, dtype = tuple(data.shape), np.dtype(data.dtype)
    kind = dtype.kind
    if len(shape) == 1:
        if kind not in "iu":
            raise TypeError(f"{fn}: labels of shape {shape} must be integer class indices, got dtype {dtype}")
        if shape[0] != n:
            raise ValueError(f"{fn}: labels have shape {shape}, expected ({n},) for logits of shape {logits.shape}")
        arr = None
        if check_values:
            arr = data if isinstance(data, np.ndarray) else np.asarray(xp.to_numpy(data))
        if arr is not None and n and (arr.min() < 0 or arr.max() >= c):
            raise ValueError(
                f"{fn}: labels must be in [0, {c}) for logits of shape {logits.shape}, "
                f"got values in [{arr.min()}, {arr.max()}]"
            )
        return xp.asarray(data)
    if len(shape) == 2:
        if shape != (n, c):
            raise ValueError(f"{fn}: one-hot labels have shape {shape}, expected {(n, c)} like the logits")
        if kind not in "iufb":
            raise TypeError(f"{fn}: one-hot labels must be numeric, got dtype {dtype}")
        return xp.asarray(data, dtype=logits.dtype)
    raise ValueError(
        f"{fn}: labels must be (N,) int or (N, C) one-hot, got shape {shape} for logits of shape {logits.shape}"
    )


def softmax_cross_entropy(logits, labels, reduction="mean", check_labels: bool = True) -> Tensor:
    """Cross entropy of softmax(logits) (N, C) with int labels (N,) or one-hot/soft labels (N, C); stable.

    ``check_labels=False`` skips the class-range check of int labels (it reads device labels back to the host); only
    for labels validated already, as ``Model.fit``/``evaluate`` do once per call."""
    fn = "softmax_cross_entropy"
    logits = _as_tensor(logits)
    _need_ndim(logits, 2, fn, "logits", "(N, C)")
    _same_dtype(fn, logits=logits)
    lab = _labels_array(labels, logits, fn, check_values=check_labels)
    return _reduce(SoftmaxCrossEntropyFunction.apply(logits, labels=lab), reduction, fn)


def mse(pred, target, reduction="mean") -> Tensor:
    """Mean squared error; ``target`` is a constant array or Tensor of the same shape as ``pred``."""
    pred = _as_tensor(pred)
    target = _as_tensor(target, pred)
    if pred.shape != target.shape:
        raise ValueError(f"mse: pred has shape {pred.shape} but target has shape {target.shape}; they must match")
    diff = subtract(pred, target)
    return _reduce(multiply(diff, diff), reduction, "mse")


def _host_labels(xp, data) -> np.ndarray:
    """Labels as a host array: NumPy ones as they are (what Model passes); backend ones read back (one copy)."""
    return data if isinstance(data, np.ndarray) else np.asarray(xp.to_numpy(data))


def cross_entropy(logits, labels, reduction="mean", label_smoothing=0.0, ignore_index=None,
                  check_labels: bool = True, nan_if_empty: bool = True) -> Tensor:
    """PyTorch's ``cross_entropy`` for logits (N, C) or (N, T, C) (classes last, as Keras) and integer labels (N,) /
    (N, T) or probabilities shaped like the logits. ``label_smoothing`` e mixes the target with the uniform
    distribution, ``(1 - e) target + e / C``; labels equal to ``ignore_index`` count for nothing and "mean" divides
    by the labels counted (NaN when none is). Labels may be NumPy or backend arrays: the mask of counted labels is
    computed on the backend, so nothing is read back unless ``check_labels`` (the class range of a user's call).
    ``nan_if_empty=False`` (Model's batches): "mean" of a batch with no counted label is 0, not NaN (the epoch figure
    is the sum over the counted labels of every batch divided by their count)."""
    fn = "cross_entropy"
    logits = _as_tensor(logits)
    if logits.ndim not in (2, 3):
        raise ValueError(f"{fn}: logits must be (N, C) or (N, T, C), got shape {logits.shape}")
    _same_dtype(fn, logits=logits)
    smoothing = label_smoothing
    if isinstance(smoothing, bool) or not isinstance(smoothing, numbers.Real) or not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"{fn}: label_smoothing must be a number in [0, 1], got {label_smoothing!r}")
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral)):
        raise TypeError(f"{fn}: ignore_index must be an int or None, got {ignore_index!r}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    xp, classes = logits.xp, logits.shape[-1]
    data = labels.data if isinstance(labels, Tensor) else labels
    if not hasattr(data, "dtype"):
        data = np.asarray(data)
    shape = tuple(data.shape)
    flat = reshape(logits, (-1, classes)) if logits.ndim == 3 else logits
    if shape == logits.shape:  # probabilities
        if ignore_index is not None:
            raise ValueError(f"{fn}: ignore_index needs integer labels, got probabilities of shape {shape}")
        if np.dtype(data.dtype).kind not in "iufb":
            raise TypeError(f"{fn}: probability labels must be numeric, got dtype {data.dtype}")
        target = xp.reshape(xp.asarray(data, dtype=logits.dtype), flat.shape)
        if smoothing:
            target = xp.add(xp.multiply(target, 1.0 - smoothing), smoothing / classes)
        per_row = SoftmaxCrossEntropyFunction.apply(flat, labels=target)
        return _reduce(per_row if logits.ndim == 2 else reshape(per_row, shape[:-1]), reduction, fn)
    if shape != logits.shape[:-1]:
        raise ValueError(f"{fn}: labels have shape {shape}; expected {logits.shape[:-1]} (class indices) or "
                         f"{logits.shape} (probabilities) for logits of shape {logits.shape}")
    if np.dtype(data.dtype).kind not in "iu":
        raise TypeError(f"{fn}: labels of shape {shape} must be integer class indices, got dtype {data.dtype}")
    if check_labels:  # a user's call; Model validates its targets once per call and passes check_labels=False
        host = _host_labels(xp, data)
        counted = host if ignore_index is None else host[host != ignore_index]
        if counted.size and (counted.min() < 0 or counted.max() >= classes):
            extra = "" if ignore_index is None else f" (or ignore_index={ignore_index})"
            raise ValueError(f"{fn}: labels must be in [0, {classes}){extra} for logits of shape {logits.shape}, got "
                             f"values in [{counted.min()}, {counted.max()}]")
    labels_flat = xp.reshape(xp.asarray(data), (-1,))
    weights = None
    if ignore_index is not None:  # on the backend, from the labels alone: nothing is read back
        weights, labels_flat = _counted(xp, labels_flat, ignore_index, logits.dtype)
    per_row = SoftmaxCrossEntropyFunction.apply(flat, labels=labels_flat)
    if smoothing:  # (1 - e) nll + e mean_c(-log p_c): PyTorch's label smoothing, through the fused op and log_softmax
        uniform = negative(mean(log_softmax(flat, axis=-1), axis=-1))
        per_row = add(multiply(per_row, 1.0 - smoothing), multiply(uniform, float(smoothing)))
    if weights is None:
        return _reduce(per_row if logits.ndim == 2 else reshape(per_row, shape), reduction, fn)
    nan_if_none = None
    if reduction == "mean":  # as PyTorch: NaN when no label counts, yet zero gradients (0 / 0 only in the value)
        count = xp.sum(weights, 0, True)  # (1,): activations need an axis on the device
        weights = xp.divide(weights, xp.add(count, xp.activation_forward(xp.subtract(1.0, count), "relu")))
        if nan_if_empty:
            nan_if_none = Tensor(xp.reshape(xp.divide(xp.subtract(count, count), count), ()), backend=xp)
    weighted = multiply(per_row, Tensor(weights, backend=xp))
    if reduction == "none":
        return reshape(weighted, shape)
    return sum(weighted) if nan_if_none is None else add(sum(weighted), nan_if_none)


def _counted(xp, labels, ignore_index: int, dtype):
    """``(mask, safe labels)`` of int labels on the backend: mask (dtype) 1 where a label is not ``ignore_index``
    (min((label - ignore)^2, 1), exact for integers), safe labels with 0 in the ignored places (int64)."""
    as_float = xp.asarray(labels, dtype=dtype)
    d = xp.subtract(as_float, float(ignore_index))
    mask = xp.subtract(1.0, xp.activation_forward(xp.subtract(1.0, xp.multiply(d, d)), "relu"))
    return mask, xp.asarray(xp.multiply(as_float, mask), dtype=np.int64)


def binary_cross_entropy_with_logits(logits, targets, reduction="mean") -> Tensor:
    """Binary cross entropy of sigmoid(logits) against ``targets`` in [0, 1] of the same shape, stable for any logits:
    each element is a two-class softmax cross entropy of the logits (0, x) against (1 - t, t), the fused op."""
    fn = "binary_cross_entropy_with_logits"
    logits = _as_tensor(logits)
    _same_dtype(fn, logits=logits)
    data = targets.data if isinstance(targets, Tensor) else targets
    if not hasattr(data, "dtype"):
        data = np.asarray(data)
    if tuple(data.shape) != logits.shape:
        raise ValueError(f"{fn}: targets have shape {tuple(data.shape)}, expected the logits' shape {logits.shape}")
    if np.dtype(data.dtype).kind not in "iufb":
        raise TypeError(f"{fn}: targets must be numbers in [0, 1], got dtype {data.dtype}")
    xp, m = logits.xp, math.prod(logits.shape)
    lift = constant(xp, [[0.0, 1.0]], logits.dtype)  # x -> (0, x)
    pair = matmul(reshape(logits, (m, 1)), Tensor(lift, backend=xp))
    t = xp.reshape(xp.asarray(data, dtype=logits.dtype), (m, 1))
    both = xp.add(xp.matmul(t, constant(xp, [[-1.0, 1.0]], logits.dtype)),
                  constant(xp, [1.0, 0.0], logits.dtype))  # t -> (1 - t, t)
    per_element = SoftmaxCrossEntropyFunction.apply(pair, labels=both)
    return _reduce(reshape(per_element, logits.shape) if reduction == "none" else per_element, reduction, fn)
