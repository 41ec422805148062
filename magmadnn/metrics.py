"""Streaming metrics computed with backend ops: accuracy ("accuracy" resolved as Keras resolves it: binary for one
output unit, else the argmax against integer or one-hot labels), top-k accuracy, Keras' binary / categorical /
sparse accuracies, mae, mse, rmse, Precision, Recall, AUC, and callables ``fn(y_true, y_pred)``.

``hits(outputs, labels, xp)`` is the number of correctly classified samples of one batch as a 0-d backend array in
the outputs' dtype (``outputs``: backend array (N, C) of scores or logits; ``labels``: NumPy int (N,) or one-hot/soft
(N, C); ``Accuracy`` also takes token outputs (N, T, C) with labels (N, T) or (N, T, C)). Nothing is copied to the
host: labels go to the backend, the comparisons run there, and ``Model.fit`` adds the hit counts into its on-device
tally, read once per progress update.

For use on their own, ``update(outputs, labels, xp)`` accumulates on the backend and ``result()`` reads the running
fraction (one host read).
"""

from __future__ import annotations

import numpy as np

from . import _checks
from ._argmax_hits import argmax_hits
from ._configurable import Configurable
from ._metric_targets import class_indices, flat_targets, like_outputs, threshold

__all__ = ["Metric", "Accuracy", "TopK", "BinaryAccuracy", "CategoricalAccuracy", "SparseCategoricalAccuracy",
           "TopKCategoricalAccuracy", "SparseTopKCategoricalAccuracy", "MeanAbsoluteError", "MeanSquaredError",
           "RootMeanSquaredError", "Precision", "Recall", "AUC", "MetricFunction", "get"]


def _relu(xp, a):
    return xp.activation_forward(a, "relu")


def _at_most_one(xp, a):
    """``min(a, 1)`` for ``a >= 0``, from the op set's relu."""
    return xp.add(xp.negative(_relu(xp, xp.add(xp.negative(a), 1.0))), 1.0)


class Metric(Configurable):
    """Base class: a fraction of samples counted as hits, accumulated on the backend."""

    name = "metric"
    _volatile = frozenset({"count", "_hits", "_xp"})  # what update() accumulates
    size = 1  #: running sums this metric keeps (its hits are a vector of this length when > 1)

    def __init__(self):
        self.reset()

    def result_of(self, total, count: int) -> float:
        """The figure from the running sum(s) ``total`` over ``count`` samples (a fraction by default)."""
        return float(total) / count

    def reset(self) -> None:
        self._hits, self._xp, self.count = None, None, 0

    def hits(self, outputs, labels, xp):
        """Hits of one batch: a 0-d backend array (outputs' dtype)."""
        self._check(outputs)
        return self.hits_of(outputs, xp.asarray(self.stage(labels, outputs.shape, outputs.dtype)), xp)

    def counted(self, labels, shape) -> int | None:
        """The number of targets a batch's hits (outputs of ``shape``) are counted over when it is not its sample
        count; None: samples."""
        return None

    def stage(self, labels, shape, dtype) -> np.ndarray:
        """The host array of ``labels`` that :meth:`hits_of` takes on the backend (outputs of ``shape``, ``dtype``)."""
        raise NotImplementedError

    def hits_of(self, outputs, staged, xp):
        """:meth:`hits` from the labels staged on the backend (a replayed graph feeds them from its static buffer)."""
        raise NotImplementedError

    def update(self, outputs, labels, xp) -> None:
        outputs = xp.asarray(outputs)
        batch = self.hits(outputs, labels, xp)
        self._hits = batch if self._hits is None else xp.add(self._hits, batch)
        self._xp = xp
        counted = self.counted(labels, tuple(outputs.shape))
        self.count += int(outputs.shape[0]) if counted is None else counted

    def result(self) -> float:
        if not self.count and self._xp is not None and getattr(self, "ignore_index", None) is not None:
            raise ValueError(f"{type(self).__name__}: every target seen equals ignore_index={self.ignore_index}: no "
                             "target counts, so the figure is undefined")
        if not self.count:
            return float("nan")
        total = np.asarray(self._xp.to_numpy(self._hits), dtype=np.float64)
        return self.result_of(total if self.size > 1 else float(total), self.count)

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {}}

    def _check(self, outputs) -> None:
        if len(outputs.shape) != 2:
            raise ValueError(f"{self.name} needs model outputs of shape (N, classes), got {tuple(outputs.shape)}")


class Accuracy(Metric):
    """Fraction of samples whose highest score (first one on ties) is the true class.

    Token outputs (N, T, C) with targets (N, T) (or one-hot (N, T, C)): the fraction of tokens. ``ignore_index``
    (pass the loss's, e.g. ``Accuracy(ignore_index=-100)``): targets equal to it are not counted, for (N,) targets
    too. The epoch figure is the token accuracy over the whole set: hits over every counted token of every batch
    divided by their count (with ``ignore_index`` a batch is tallied by its counted tokens, so a batch with none
    adds nothing; a set with none is a ValueError naming ``ignore_index``)."""

    name = "accuracy"

    def __init__(self, ignore_index: int | None = None, name: str | None = None):
        self.ignore_index = None if ignore_index is None else _checks.integer(ignore_index, "ignore_index",
                                                                              "Accuracy")
        if name is not None:
            self.name = _name(name, type(self).__name__)
        super().__init__()

    def _binary(self, shape) -> bool:
        """Keras' resolution of "accuracy": binary accuracy (threshold 0.5) for one output unit."""
        return len(shape) >= 2 and int(shape[-1]) == 1 and self.ignore_index is None

    def to_config(self) -> dict:
        config = super().to_config()
        if self.ignore_index is not None:
            config["config"]["ignore_index"] = self.ignore_index
        if self.name != type(self).name:
            config["config"]["name"] = self.name
        return config

    def _check(self, outputs) -> None:
        if len(outputs.shape) not in (2, 3):
            raise ValueError(f"accuracy needs model outputs (N, classes) or token outputs (N, T, classes), got "
                             f"{tuple(outputs.shape)}")

    def stage(self, labels, shape, dtype):
        """The true class of every row (sample or token), as floats (class numbers are exact in float32 up to
        2**24); with ``ignore_index``, stacked over each row's weight: 1 for a counted row, 0 for an ignored one
        (-1 as its class, which never equals an argmax), so the hits are the counted rows' (see :meth:`counted`)."""
        if self._binary(shape):
            return like_outputs(labels, shape, dtype, self.name)
        truth = class_indices(labels, shape).reshape(-1)  # host labels: counting them reads nothing back
        if self.ignore_index is None:
            return truth.astype(dtype)
        kept = truth != self.ignore_index
        return np.stack([np.where(kept, truth, -1), kept]).astype(dtype)

    def counted(self, labels, shape) -> int | None:
        """With ``ignore_index``: the number of counted targets in the host ``labels`` (the batch's weight) for
        outputs of ``shape``; None (count samples) otherwise."""
        if self.ignore_index is None:
            return None
        return int(np.count_nonzero(class_indices(labels, shape) != self.ignore_index))

    def hits_of(self, outputs, staged, xp):
        self._check(outputs)
        if self._binary(outputs.shape):
            return _binary_hits(outputs, staged, xp, 0.5)
        return argmax_hits(outputs, staged, xp)


class TopK(Metric):
    """Fraction of samples whose true class is among the ``k`` highest scores: a sample counts when fewer than ``k``
    classes score strictly higher than its true class (ties with the true class count in its favour).

    On the backend: "strictly higher" is ``relu(d) / (relu(d) + tiny)`` of the score difference ``d`` (exactly 0 or
    1 unless ``0 < d`` is below about 1e-30 for float32), scores must be finite."""

    def __init__(self, k: int = 5, name: str | None = None):
        self.k = _checks.integer(k, "k", "TopK", minimum=1)
        self.name = f"top{k}_accuracy" if name is None else _name(name, type(self).__name__)
        super().__init__()

    def stage(self, labels, shape, dtype):
        n, c = (int(s) for s in shape)
        onehot = np.zeros((n, c), dtype=dtype)
        onehot[np.arange(n), class_indices(labels, (n, c))] = 1
        return onehot

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {"k": self.k, "name": self.name}}

    def hits_of(self, outputs, onehot, xp):
        self._check(outputs)
        true_score = xp.sum(xp.multiply(outputs, onehot), 1, True)
        above = _relu(xp, xp.subtract(outputs, true_score))
        higher = xp.sum(xp.divide(above, xp.add(above, float(np.finfo(outputs.dtype).tiny))), 1)
        return xp.sum(_at_most_one(xp, _relu(xp, xp.add(xp.negative(higher), float(self.k)))))


# ------------------------------------------------------------------------------------ Keras' metrics
def _name(name, cls: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls}: name must be a non-empty string, got {name!r}")
    return name


def _tiny(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).tiny)


def _above(xp, d, dtype):
    """1 where ``d > 0``, else 0 (exactly, unless ``0 < d`` is below about 1e-30 for float32)."""
    r = _relu(xp, d)
    return xp.divide(r, xp.add(r, _tiny(dtype)))


def _abs(xp, a):
    return xp.add(_relu(xp, a), _relu(xp, xp.negative(a)))


def _binary_hits(outputs, t, xp, threshold: float):
    """Sum over samples of the fraction of a sample's outputs whose ``output > threshold`` equals its target."""
    predicted = _above(xp, xp.subtract(outputs, float(threshold)), outputs.dtype)
    match = xp.subtract(1.0, _above(xp, _abs(xp, xp.subtract(predicted, t)), outputs.dtype))
    per_sample = max(int(np.prod(outputs.shape[1:])), 1)
    total = xp.sum(match)
    return total if per_sample == 1 else xp.multiply(total, 1.0 / per_sample)


class _LikeOutputs(Metric):
    """A metric of targets shaped like the outputs (any rank with a batch axis), staged as they are."""

    def _check(self, outputs) -> None:
        if len(outputs.shape) < 2:
            raise ValueError(f"{self.name} needs outputs with a batch axis, got {tuple(outputs.shape)}")

    def stage(self, labels, shape, dtype):
        return like_outputs(labels, shape, dtype, self.name)


class BinaryAccuracy(_LikeOutputs):
    """Keras' ``BinaryAccuracy``: how often ``output > threshold`` equals the (0/1) target, averaged per sample."""

    name = "binary_accuracy"

    def __init__(self, name: str | None = None, threshold: float = 0.5):
        self.threshold = _checks.real(threshold, "threshold", "BinaryAccuracy")
        if name is not None:
            self.name = _name(name, "BinaryAccuracy")
        super().__init__()

    def hits_of(self, outputs, staged, xp):
        return _binary_hits(outputs, staged, xp, self.threshold)

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {"name": self.name, "threshold": self.threshold}}


class CategoricalAccuracy(Accuracy):
    """Keras' ``CategoricalAccuracy``: argmax of the outputs against the argmax of one-hot targets."""

    name = "categorical_accuracy"

    def _binary(self, shape) -> bool:
        return False


class SparseCategoricalAccuracy(CategoricalAccuracy):
    """Keras' ``SparseCategoricalAccuracy``: argmax of the outputs against integer class labels."""

    name = "sparse_categorical_accuracy"


class TopKCategoricalAccuracy(TopK):
    """Keras' ``TopKCategoricalAccuracy(k=5)``: the true class (one-hot targets) is among the ``k`` highest
    scores (ties count in its favour, as Keras' ``in_top_k``)."""

    def __init__(self, k: int = 5, name: str = "top_k_categorical_accuracy"):
        super().__init__(k, name)


class SparseTopKCategoricalAccuracy(TopK):
    """Keras' ``SparseTopKCategoricalAccuracy(k=5)``, for integer labels."""

    def __init__(self, k: int = 5, name: str = "sparse_top_k_categorical_accuracy"):
        super().__init__(k, name)


class _ErrorMetric(_LikeOutputs):
    """The mean over samples of a per-sample mean of elementwise errors (Keras' ``MeanMetricWrapper``)."""

    def __init__(self, name: str | None = None):
        if name is not None:
            self.name = _name(name, type(self).__name__)
        super().__init__()

    def error(self, xp, d):
        raise NotImplementedError

    def hits_of(self, outputs, staged, xp):
        total = xp.sum(self.error(xp, xp.subtract(outputs, staged)))
        per_sample = max(int(np.prod(outputs.shape[1:])), 1)
        return total if per_sample == 1 else xp.multiply(total, 1.0 / per_sample)

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {"name": self.name}}


class MeanAbsoluteError(_ErrorMetric):
    """Keras' ``MeanAbsoluteError`` metric ("mae")."""

    name = "mean_absolute_error"

    def error(self, xp, d):
        return _abs(xp, d)


class MeanSquaredError(_ErrorMetric):
    """Keras' ``MeanSquaredError`` metric ("mse")."""

    name = "mean_squared_error"

    def error(self, xp, d):
        return xp.multiply(d, d)


class RootMeanSquaredError(MeanSquaredError):
    """Keras' ``RootMeanSquaredError``: the square root of the mean squared error over everything seen."""

    name = "root_mean_squared_error"

    def result_of(self, total, count):
        return float(np.sqrt(float(total) / count))


class _Confusion(Metric):
    """Metrics from confusion counts of ``output > threshold`` against 0/1 targets over every element (Keras'
    ``multi_label=False``), accumulated on the backend."""

    def _check(self, outputs) -> None:
        if len(outputs.shape) < 1:
            raise ValueError(f"{self.name} needs outputs with a batch axis")

    def _positive(self, xp, outputs):
        return outputs


class Precision(_Confusion):
    """Keras' ``Precision(thresholds=0.5)``: true positives / predicted positives (0 when none is)."""

    name = "precision"
    size = 2

    def __init__(self, thresholds=None, top_k=None, class_id=None, name: str | None = None):
        if top_k is not None or class_id is not None:
            raise ValueError(f"{type(self).__name__}: top_k and class_id are not supported; pass thresholds only")
        self.threshold = 0.5 if thresholds is None else threshold(thresholds, type(self).__name__)
        if name is not None:
            self.name = _name(name, type(self).__name__)
        super().__init__()

    def stage(self, labels, shape, dtype):
        return flat_targets(labels, shape, dtype, self.name)

    def _counts(self, outputs, t, xp):
        predicted = _above(xp, xp.subtract(xp.reshape(outputs, (-1,)), self.threshold), outputs.dtype)
        true_positives = xp.sum(xp.multiply(predicted, t), 0, True)
        return predicted, true_positives

    def hits_of(self, outputs, t, xp):
        predicted, tp = self._counts(outputs, t, xp)
        return xp.concatenate([tp, xp.sum(predicted, 0, True)], 0)  # (TP, predicted positives)

    def result_of(self, total, count):
        return float(total[0] / total[1]) if total[1] else 0.0

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {"thresholds": self.threshold, "name": self.name}}


class Recall(Precision):
    """Keras' ``Recall(thresholds=0.5)``: true positives / actual positives (0 when none is)."""

    name = "recall"

    def hits_of(self, outputs, t, xp):
        _, tp = self._counts(outputs, t, xp)
        return xp.concatenate([tp, xp.sum(t, 0, True)], 0)  # (TP, actual positives)


class AUC(_Confusion):
    """Keras' ``AUC``: the area under the ROC curve (or the precision-recall curve, ``curve="PR"`` with
    ``summation_method`` "minoring"/"majoring") from confusion counts at ``num_thresholds`` thresholds (0 - 1e-7,
    ``i / (num_thresholds - 1)``, 1 + 1e-7), a Riemann sum ("interpolation": trapezoids)."""

    name = "auc"

    def __init__(self, num_thresholds: int = 200, curve: str = "ROC", summation_method: str = "interpolation",
                 name: str | None = None, dtype=None, thresholds=None, multi_label: bool = False, num_labels=None,
                 label_weights=None, from_logits: bool = False):
        if multi_label or num_labels is not None or label_weights is not None:
            raise ValueError("AUC: multi_label / num_labels / label_weights are not supported (one curve over "
                             "every output)")
        self.curve = str(curve).upper()
        self.summation_method = str(summation_method).lower()
        if self.curve not in ("ROC", "PR") or self.summation_method not in ("interpolation", "minoring",
                                                                              "majoring"):
            raise ValueError(f"AUC: curve must be 'ROC' or 'PR' and summation_method 'interpolation', 'minoring' "
                             f"or 'majoring', got {curve!r}, {summation_method!r}")
        if self.curve == "PR" and self.summation_method == "interpolation":
            raise ValueError("AUC: curve='PR' with summation_method='interpolation' (Davis & Goadrich's "
                             "interpolation) is not supported; use 'minoring' or 'majoring', or curve='ROC'")
        if thresholds is not None:
            if isinstance(thresholds, (str, bytes)) or not hasattr(thresholds, "__iter__"):
                raise TypeError(f"AUC: thresholds must be a list of numbers, got {thresholds!r}")
            inner = sorted(_checks.real(t, "thresholds", "AUC") for t in thresholds)
        else:
            n = _checks.integer(num_thresholds, "num_thresholds", "AUC", minimum=2)
            inner = [(i + 1) / (n - 1) for i in range(n - 2)]
        self.thresholds = np.array([0.0 - 1e-7, *inner, 1.0 + 1e-7])
        if not isinstance(from_logits, (bool, np.bool_)):
            raise TypeError(f"AUC: from_logits must be True or False, got {from_logits!r}")
        self.from_logits = bool(from_logits)
        self.size = 2 * len(self.thresholds) + 2
        if name is not None:
            self.name = _name(name, "AUC")
        super().__init__()

    def stage(self, labels, shape, dtype):
        return np.concatenate([flat_targets(labels, shape, dtype, self.name), self.thresholds.astype(dtype)])

    def hits_of(self, outputs, staged, xp):
        m, k = int(np.prod(outputs.shape)), len(self.thresholds)
        t, thresholds = xp.split(staged, [m, k], 0)
        scores = outputs if not self.from_logits else xp.activation_forward(outputs, "sigmoid")
        above = _above(xp, xp.subtract(xp.reshape(scores, (m, 1)), xp.reshape(thresholds, (1, k))), outputs.dtype)
        row = xp.reshape(t, (1, m))
        tp = xp.reshape(xp.matmul(row, above), (k,))
        fp = xp.reshape(xp.matmul(xp.subtract(1.0, row), above), (k,))
        positives = xp.sum(t, 0, True)
        negatives = xp.subtract(float(m), positives)
        return xp.concatenate([tp, fp, positives, negatives], 0)

    def result_of(self, total, count):
        k = len(self.thresholds)
        tp, fp, positives, negatives = total[:k], total[k:2 * k], total[2 * k], total[2 * k + 1]
        fn, tn = positives - tp, negatives - fp

        def ratio(a, b):
            return np.divide(a, b, out=np.zeros_like(a), where=b != 0)

        recall = ratio(tp, tp + fn)
        if self.curve == "ROC":
            x, y = ratio(fp, fp + tn), recall
        else:
            x, y = recall, ratio(tp, tp + fp)
        if self.summation_method == "interpolation":
            heights = (y[:-1] + y[1:]) / 2
        elif self.summation_method == "minoring":
            heights = np.minimum(y[:-1], y[1:])
        else:
            heights = np.maximum(y[:-1], y[1:])
        return float(np.sum((x[:-1] - x[1:]) * heights))

    def to_config(self) -> dict:
        return {"class_name": "AUC", "config": {"thresholds": [float(t) for t in self.thresholds[1:-1]],
                                                "curve": self.curve, "summation_method": self.summation_method,
                                                "name": self.name, "from_logits": self.from_logits}}


class MetricFunction(Metric):
    """A callable ``fn(y_true, y_pred)`` as a metric (Keras' ``MeanMetricWrapper``): ``fn`` gets Tensors (targets
    shaped like the outputs, as floats) and returns per-sample values (or per-element ones, averaged per sample);
    the figure is their mean over samples. Computed with backend ops, like every metric."""

    def __init__(self, fn, name: str | None = None):
        if not callable(fn):
            raise TypeError(f"MetricFunction: fn must be callable, got {fn!r}")
        self.fn = fn
        self.name = _name(name or getattr(fn, "__name__", "metric"), "MetricFunction")
        super().__init__()

    def _check(self, outputs) -> None:
        pass

    def stage(self, labels, shape, dtype):
        return like_outputs(labels, shape, dtype, self.name)

    def hits_of(self, outputs, staged, xp):
        from .autograd import Tensor, no_grad

        with no_grad():
            value = self.fn(Tensor(staged, backend=xp), Tensor(outputs, backend=xp))
        if not isinstance(value, Tensor):
            raise TypeError(f"metric function {self.name!r} returned {type(value).__name__}; it must return a "
                            "Tensor computed with magmadnn.functional / Tensor operators")
        data, n = value.data, int(outputs.shape[0])
        total = xp.sum(data)
        per_sample = data.size / n if data.ndim else 1.0 / n
        return total if per_sample == 1 else xp.multiply(total, 1.0 / per_sample)

    def to_config(self) -> dict:
        return {"class_name": "MetricFunction", "config": {"name": self.name}}


_BY_NAME = {
    "binary_accuracy": BinaryAccuracy, "categorical_accuracy": CategoricalAccuracy,
    "sparse_categorical_accuracy": SparseCategoricalAccuracy,
    "top_k_categorical_accuracy": TopKCategoricalAccuracy,
    "sparse_top_k_categorical_accuracy": SparseTopKCategoricalAccuracy,
    "mae": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError,
    "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError,
    "rmse": RootMeanSquaredError, "root_mean_squared_error": RootMeanSquaredError,
    "precision": Precision, "recall": Recall, "auc": AUC,
}
_CLASSES = {cls.__name__: cls for cls in (Accuracy, TopK, *_BY_NAME.values())}


def get(identifier) -> Metric:
    """A fresh Metric from a name (Keras' names: "accuracy"/"acc" resolved as Keras resolves it, "binary_accuracy",
    "categorical_accuracy", "top_k_categorical_accuracy", "mae", "mse", "rmse", "precision", "recall", "auc", ...;
    magmadnn's "top5" style), an instance, a config dict, or a callable ``fn(y_true, y_pred)``."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, dict) and identifier.get("class_name") == "MetricFunction":
        raise ValueError(f"metric {identifier.get('config', {}).get('name')!r} was a Python function, which is "
                         "never stored in a file: compile the loaded model with it again")
    if isinstance(identifier, dict) and identifier.get("class_name") in _CLASSES:
        return _CLASSES[identifier["class_name"]](**identifier.get("config", {}))
    if isinstance(identifier, str):
        name = identifier.lower()
        if name in ("accuracy", "acc"):
            return Accuracy(name=identifier)
        if name in _BY_NAME:
            cls = _BY_NAME[name]
            return cls(name=identifier)
        for prefix in ("top_k_accuracy", "top"):
            rest = name[len(prefix):].strip("_").replace("_accuracy", "")
            if name.startswith(prefix) and (rest.isdigit() or prefix == "top_k_accuracy"):
                return TopK(int(rest) if rest.isdigit() else 5)
    if callable(identifier) and not isinstance(identifier, type):
        return MetricFunction(identifier)
    raise ValueError(f"unknown metric {identifier!r}; expected one of 'accuracy', {sorted(_BY_NAME)}, 'top5' (any "
                     "k), a Metric instance or a function fn(y_true, y_pred)")
