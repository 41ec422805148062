"""Losses: softmax cross entropy (class indices, one-hot or probabilities, smoothing, ignored labels), binary
cross entropy from logits, mean squared error (PyTorch's semantics); and Keras' per-sample losses
(``categorical_crossentropy`` of probabilities or logits, ``binary_crossentropy``, ``mean_squared_error``,
``mean_absolute_error``, ``huber``, ``log_cosh``, ``kl_divergence``) as Keras 3 computes them."""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from ..autograd import Function, Tensor
from ._base import _as_tensor, _need_ndim, _same_dtype, constant
from .activations import log_softmax
from .elementwise import abs as _abs
from .elementwise import clip as _clip
from .elementwise import log as _log
from .operators import add, matmul, mean, multiply, negative, reshape, subtract, sum

__all__ = ["softmax_cross_entropy", "mse", "cross_entropy", "binary_cross_entropy_with_logits",
           "categorical_crossentropy", "binary_crossentropy", "mean_squared_error", "mean_absolute_error", "huber",
           "log_cosh", "kl_divergence"]


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


class SoftmaxCrossEntropyMeanFunction(Function):
    """The mean over the rows of :class:`SoftmaxCrossEntropyFunction`'s loss as one function of two fused ops
    (``softmax_cross_entropy_mean`` and its backward: one launch each on the device for small problems) rather than
    the per-row loss, its mean, the mean's broadcast, a division and the per-row backward."""

    def forward(self, logits, labels):
        self.labels = labels
        loss, self.probs = self.xp.softmax_cross_entropy_mean(logits, labels)
        return loss

    def backward(self, g):
        return (self.xp.softmax_cross_entropy_mean_backward(self.probs, self.labels, g),)

    def backward_of_one(self):  # loss.backward(): the upstream gradient 1 folded into the op (no seed array)
        return (self.xp.softmax_cross_entropy_mean_backward(self.probs, self.labels, None),)


def _mean_of_rows(logits, labels, reduction: str, fn: str) -> Tensor:
    """The fused softmax cross-entropy of 2-D ``logits`` reduced as ``reduction`` ("mean": one function)."""
    if reduction == "mean":
        return SoftmaxCrossEntropyMeanFunction.apply(logits, labels=labels)
    return _reduce(SoftmaxCrossEntropyFunction.apply(logits, labels=labels), reduction, fn)


def planned_softmax_cross_entropy(reduction: str):
    """What :func:`softmax_cross_entropy` runs once its checks passed for 2-D logits and int64 class indices (N,)
    already on the logits' backend, as ``run(logits, labels=labels)`` (a loss's plan, :mod:`magmadnn.losses`)."""
    if reduction == "mean":
        return SoftmaxCrossEntropyMeanFunction.apply
    return functools.partial(_mean_of_rows, reduction=reduction, fn="softmax_cross_entropy")


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
    return _mean_of_rows(logits, lab, reduction, fn)


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
        if reduction != "none":  # the mean (or sum) of every row's loss, whatever the logits' rank
            return _mean_of_rows(flat, target, reduction, fn)
        per_row = SoftmaxCrossEntropyFunction.apply(flat, labels=target)
        return per_row if logits.ndim == 2 else reshape(per_row, shape[:-1])
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
    if weights is None and not smoothing and reduction != "none":
        return _mean_of_rows(flat, labels_flat, reduction, fn)
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


# ----------------------------------------------------------------------------------- Keras' per-sample losses
#: Keras' fuzz factor: probabilities are clipped to [EPSILON, 1 - EPSILON] before their logarithm.
EPSILON = 1e-7


def _constant(y_true, y_pred: Tensor, fn: str):
    """``y_true`` as a backend array of ``y_pred``'s dtype and shape (a constant: no gradient flows to it)."""
    xp = y_pred.xp
    data = y_true.data if isinstance(y_true, Tensor) else y_true
    if not hasattr(data, "dtype") or not hasattr(data, "shape"):
        data = np.asarray(data)
    if np.dtype(data.dtype).kind not in "iufb":
        raise TypeError(f"{fn}: y_true must be real numbers, got dtype {data.dtype}")
    if tuple(data.shape) != y_pred.shape:
        raise ValueError(f"{fn}: y_true has shape {tuple(data.shape)} but y_pred has shape {y_pred.shape}; they "
                         "must match")
    return xp.asarray(data, dtype=y_pred.dtype)


def _pred(y_pred, fn: str) -> Tensor:
    y_pred = _as_tensor(y_pred)
    _same_dtype(fn, y_pred=y_pred)
    if y_pred.ndim < 1:
        raise ValueError(f"{fn}: y_pred must have at least one axis, got a scalar")
    return y_pred


def _smoothing(value, fn: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{fn}: label_smoothing must be a number in [0, 1], got {value!r}")
    return float(value)


class _SoftTargetsCrossEntropyFunction(Function):
    """``-sum(t * log_softmax(x))`` over the last axis of any rank (the fused op on rows)."""

    def forward(self, logits, targets):
        shape = logits.shape
        rows = (-1, shape[-1])
        self.shape, self.targets = shape, self.xp.reshape(targets, rows)
        loss, self.probs = self.xp.softmax_cross_entropy(self.xp.reshape(logits, rows), self.targets)
        return self.xp.reshape(loss, shape[:-1])

    def backward(self, g):
        xp = self.xp
        grad = xp.softmax_cross_entropy_backward(self.probs, self.targets, xp.reshape(g, (-1,)))
        return (xp.reshape(grad, self.shape),)


class _ProbabilityCrossEntropyFunction(Function):
    """``-sum(t * log(clip(p / sum(p), EPSILON, 1 - EPSILON)))`` over the last axis, Keras' formula, as one
    Function: its backward is written out (a few backend ops) instead of a tape of a dozen small ones. The gradient
    passes where ``EPSILON < p / sum(p) < 1 - EPSILON`` (a clipped value has none)."""

    def forward(self, p, t):
        xp = self.xp
        self.total = xp.sum(p, -1, True)
        self.q = xp.divide(p, self.total)
        clipped = xp.clip(self.q, EPSILON, 1.0 - EPSILON)
        self.ratio = xp.divide(t, clipped)  # -dloss/dclipped
        return xp.negative(xp.sum(xp.multiply(t, xp.log(clipped)), -1))

    def backward(self, g):
        xp, q = self.xp, self.q
        dq = xp.multiply(self.ratio, xp.reshape(g, (*g.shape, 1)))  # -dloss/dq before the clip's mask
        dq = xp.activation_backward(dq, xp.subtract(q, EPSILON), None, "relu")
        dq = xp.activation_backward(dq, xp.subtract(1.0 - EPSILON, q), None, "relu")
        centred = xp.subtract(dq, xp.sum(xp.multiply(dq, q), -1, True))  # through q = p / sum(p)
        return (xp.negative(xp.divide(centred, self.total)),)


class _BinaryProbabilityCrossEntropyFunction(Function):
    """Elementwise ``-(t log c + (1 - t) log(1 - c))``, ``c = clip(p, EPSILON, 1 - EPSILON)`` (Keras' formula), as
    one Function; the gradient ``(c - t) / (c (1 - c))`` passes where ``EPSILON < p < 1 - EPSILON``."""

    def forward(self, p, t):
        xp = self.xp
        c = xp.clip(p, EPSILON, 1.0 - EPSILON)
        not_c, not_t = xp.subtract(1.0, c), xp.subtract(1.0, t)
        self.p, self.c, self.not_c, self.t = p, c, not_c, t
        return xp.negative(xp.add(xp.multiply(t, xp.log(c)), xp.multiply(not_t, xp.log(not_c))))

    def backward(self, g):
        xp, p = self.xp, self.p
        grad = xp.divide(xp.multiply(g, xp.subtract(self.c, self.t)), xp.multiply(self.c, self.not_c))
        grad = xp.activation_backward(grad, xp.subtract(p, EPSILON), None, "relu")
        return (xp.activation_backward(grad, xp.subtract(1.0 - EPSILON, p), None, "relu"),)


class _SigmoidCrossEntropyFunction(Function):
    """Elementwise ``-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))``, stable: a two-class log-softmax of
    (0, x); gradient ``sigmoid(x) - t``. Scalars stay kernel arguments (nothing is uploaded)."""

    def forward(self, x, t):
        xp, shape = self.xp, x.shape
        column = xp.reshape(x, (-1, 1))
        pair = xp.log_softmax(xp.concatenate([xp.multiply(column, 0.0), column], 1), 1)
        log_not, log_yes = xp.split(pair, [1, 1], 1)
        tc = xp.reshape(t, (-1, 1))
        loss = xp.negative(xp.add(xp.multiply(xp.subtract(1.0, tc), log_not), xp.multiply(tc, log_yes)))
        self.x, self.t = x, t
        return xp.reshape(loss, shape)

    def backward(self, g):
        xp = self.xp
        return (xp.multiply(g, xp.subtract(xp.activation_forward(self.x, "sigmoid"), self.t)),)


class _HuberFunction(Function):
    """Elementwise Huber of errors ``e``: ``0.5 e^2`` where ``|e| <= delta``, else ``delta (|e| - 0.5 delta)``."""

    def forward(self, e, delta):
        xp = self.xp
        a = xp.add(xp.activation_forward(e, "relu"), xp.activation_forward(xp.negative(e), "relu"))
        q = xp.clip(a, 0.0, delta)
        self.e, self.delta = e, delta
        return xp.add(xp.multiply(xp.multiply(q, q), 0.5), xp.multiply(xp.subtract(a, q), delta))

    def backward(self, g):
        return (self.xp.multiply(g, self.xp.clip(self.e, -self.delta, self.delta)),)


class _LogCoshFunction(Function):
    """Elementwise ``log(cosh(e))`` as ``logsumexp(e, -e) - log 2`` (stable); gradient ``tanh(e)``."""

    def forward(self, e):
        xp, shape = self.xp, e.shape
        column = xp.reshape(e, (-1, 1))
        first, _ = xp.split(xp.log_softmax(xp.concatenate([column, xp.negative(column)], 1), 1), [1, 1], 1)
        self.e = e
        return xp.reshape(xp.subtract(xp.subtract(column, first), math.log(2.0)), shape)

    def backward(self, g):
        return (self.xp.multiply(g, self.xp.activation_forward(self.e, "tanh")),)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0) -> Tensor:
    """Keras' ``categorical_crossentropy``: per-sample losses (``y_pred``'s shape without its last, class axis) of
    probabilities ``y_pred`` against one-hot / soft ``y_true`` of the same shape. Probabilities are divided by their
    sum, clipped to ``[EPSILON, 1 - EPSILON]`` and their log taken; ``from_logits=True`` goes through the fused
    log-softmax. ``label_smoothing`` e trains against ``(1 - e) y_true + e / classes``."""
    fn = "categorical_crossentropy"
    y_pred = _pred(y_pred, fn)
    t = _constant(y_true, y_pred, fn)
    xp, smoothing = y_pred.xp, _smoothing(label_smoothing, fn)
    if smoothing:
        t = xp.add(xp.multiply(t, 1.0 - smoothing), smoothing / y_pred.shape[-1])
    if from_logits:
        return _SoftTargetsCrossEntropyFunction.apply(y_pred, targets=t)
    return _ProbabilityCrossEntropyFunction.apply(y_pred, t=t)


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0) -> Tensor:
    """Keras' ``binary_crossentropy``: the elementwise binary cross entropy of probabilities ``y_pred`` (clipped to
    ``[EPSILON, 1 - EPSILON]``; ``from_logits=True``: the stable sigmoid form) against ``y_true`` of the same shape,
    averaged over the last axis. ``label_smoothing`` e trains against ``(1 - e) y_true + e / 2``."""
    fn = "binary_crossentropy"
    y_pred = _pred(y_pred, fn)
    t = _constant(y_true, y_pred, fn)
    xp, smoothing = y_pred.xp, _smoothing(label_smoothing, fn)
    if smoothing:
        t = xp.add(xp.multiply(t, 1.0 - smoothing), 0.5 * smoothing)
    if from_logits:
        return mean(_SigmoidCrossEntropyFunction.apply(y_pred, t=t), -1)
    return mean(_BinaryProbabilityCrossEntropyFunction.apply(y_pred, t=t), -1)


def mean_squared_error(y_true, y_pred) -> Tensor:
    """Keras' ``mean_squared_error``: ``mean((y_pred - y_true)^2)`` over the last axis."""
    y_pred = _pred(y_pred, "mean_squared_error")
    diff = subtract(y_pred, Tensor(_constant(y_true, y_pred, "mean_squared_error"), backend=y_pred.xp))
    return mean(multiply(diff, diff), -1)


def mean_absolute_error(y_true, y_pred) -> Tensor:
    """Keras' ``mean_absolute_error``: ``mean(|y_pred - y_true|)`` over the last axis."""
    y_pred = _pred(y_pred, "mean_absolute_error")
    diff = subtract(y_pred, Tensor(_constant(y_true, y_pred, "mean_absolute_error"), backend=y_pred.xp))
    return mean(_abs(diff), -1)


def huber(y_true, y_pred, delta=1.0) -> Tensor:
    """Keras' ``huber``: the mean over the last axis of ``0.5 e^2`` (``|e| <= delta``) or
    ``delta |e| - 0.5 delta^2``, ``e = y_pred - y_true``."""
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not delta > 0:
        raise ValueError(f"huber: delta must be a number > 0, got {delta!r}")
    y_pred = _pred(y_pred, "huber")
    diff = subtract(y_pred, Tensor(_constant(y_true, y_pred, "huber"), backend=y_pred.xp))
    return mean(_HuberFunction.apply(diff, delta=float(delta)), -1)


def log_cosh(y_true, y_pred) -> Tensor:
    """Keras' ``log_cosh``: ``mean(log(cosh(y_pred - y_true)))`` over the last axis, stable for large errors."""
    y_pred = _pred(y_pred, "log_cosh")
    diff = subtract(y_pred, Tensor(_constant(y_true, y_pred, "log_cosh"), backend=y_pred.xp))
    return mean(_LogCoshFunction.apply(diff), -1)


def kl_divergence(y_true, y_pred) -> Tensor:
    """Keras' ``kl_divergence``: ``sum(t log(t / p))`` over the last axis with ``t``, ``p`` clipped to
    ``[EPSILON, 1]``."""
    y_pred = _pred(y_pred, "kl_divergence")
    xp = y_pred.xp
    t = xp.clip(_constant(y_true, y_pred, "kl_divergence"), EPSILON, 1.0)
    log_ratio = subtract(Tensor(xp.log(t), backend=xp), _log(_clip(y_pred, EPSILON, 1.0)))
    return sum(multiply(log_ratio, Tensor(t, backend=xp)), -1)
