"""Streaming classification metrics: accuracy and top-k accuracy, computed with backend ops.

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
from ._configurable import Configurable

__all__ = ["Metric", "Accuracy", "TopK", "get"]


def _class_indices(labels, output_shape) -> np.ndarray:
    """Host class indices shaped like the outputs without their class axis: int labels of that shape as they are,
    or the argmax of one-hot / soft labels shaped like the outputs."""
    labels, shape = np.asarray(labels), tuple(output_shape)
    if labels.shape == shape:
        return labels.argmax(axis=-1)
    if labels.shape == shape[:-1]:
        return labels.astype(np.int64, copy=False)
    expected = "(N,) or one-hot (N, C)" if len(shape) == 2 else "(N, T) or one-hot (N, T, C)"
    raise ValueError(f"labels must be class indices {expected} for outputs {shape}, got shape {labels.shape}")


def _relu(xp, a):
    return xp.activation_forward(a, "relu")


def _at_most_one(xp, a):
    """``min(a, 1)`` for ``a >= 0``, from the op set's relu."""
    return xp.add(xp.negative(_relu(xp, xp.add(xp.negative(a), 1.0))), 1.0)


class Metric(Configurable):
    """Base class: a fraction of samples counted as hits, accumulated on the backend."""

    name = "metric"
    _volatile = frozenset({"count", "_hits", "_xp"})  # what update() accumulates

    def __init__(self):
        self.reset()

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
        return float(np.asarray(self._xp.to_numpy(self._hits))) / self.count

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {"k": self.k} if isinstance(self, TopK) else {}}

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

    def __init__(self, ignore_index: int | None = None):
        self.ignore_index = None if ignore_index is None else _checks.integer(ignore_index, "ignore_index",
                                                                              "Accuracy")
        super().__init__()

    def to_config(self) -> dict:
        config = super().to_config()
        if self.ignore_index is not None:
            config["config"]["ignore_index"] = self.ignore_index
        return config

    def _check(self, outputs) -> None:
        if len(outputs.shape) not in (2, 3):
            raise ValueError(f"accuracy needs model outputs (N, classes) or token outputs (N, T, classes), got "
                             f"{tuple(outputs.shape)}")

    def stage(self, labels, shape, dtype):
        """The true class of every row (sample or token), as floats (class numbers are exact in float32 up to
        2**24); with ``ignore_index``, stacked over each row's weight: 1 for a counted row, 0 for an ignored one
        (-1 as its class, which never equals an argmax), so the hits are the counted rows' (see :meth:`counted`)."""
        truth = _class_indices(labels, shape).reshape(-1)  # host labels: counting them reads nothing back
        if self.ignore_index is None:
            return truth.astype(dtype)
        kept = truth != self.ignore_index
        return np.stack([np.where(kept, truth, -1), kept]).astype(dtype)

    def counted(self, labels, shape) -> int | None:
        """With ``ignore_index``: the number of counted targets in the host ``labels`` (the batch's weight) for
        outputs of ``shape``; None (count samples) otherwise."""
        if self.ignore_index is None:
            return None
        return int(np.count_nonzero(_class_indices(labels, shape) != self.ignore_index))

    def hits_of(self, outputs, staged, xp):
        self._check(outputs)
        shape, rows = tuple(int(s) for s in outputs.shape), int(staged.shape[-1])
        scores = outputs if len(shape) == 2 else xp.reshape(outputs, (rows, shape[-1]))
        weight = None
        if len(staged.shape) == 2:
            staged, weight = (xp.reshape(part, (rows,)) for part in xp.split(staged, [1, 1], 0))
        miss = xp.subtract(xp.asarray(xp.argmax(scores, 1), outputs.dtype), staged)  # 0 on a hit, else |.| >= 1
        hit = _relu(xp, xp.add(xp.negative(xp.multiply(miss, miss)), 1.0))  # 1 on a hit, 0 on a miss
        if weight is not None:
            return xp.sum(xp.multiply(hit, weight))
        found = xp.sum(hit)
        return found if rows == shape[0] else xp.multiply(found, shape[0] / rows)


class TopK(Metric):
    """Fraction of samples whose true class is among the ``k`` highest scores: a sample counts when fewer than ``k``
    classes score strictly higher than its true class (ties with the true class count in its favour).

    On the backend: "strictly higher" is ``relu(d) / (relu(d) + tiny)`` of the score difference ``d`` (exactly 0 or
    1 unless ``0 < d`` is below about 1e-30 for float32), scores must be finite."""

    def __init__(self, k: int = 5):
        self.k = _checks.integer(k, "k", "TopK", minimum=1)
        self.name = f"top{k}_accuracy"
        super().__init__()

    def stage(self, labels, shape, dtype):
        n, c = (int(s) for s in shape)
        onehot = np.zeros((n, c), dtype=dtype)
        onehot[np.arange(n), _class_indices(labels, (n, c))] = 1
        return onehot

    def hits_of(self, outputs, onehot, xp):
        self._check(outputs)
        true_score = xp.sum(xp.multiply(outputs, onehot), 1, True)
        above = _relu(xp, xp.subtract(outputs, true_score))
        higher = xp.sum(xp.divide(above, xp.add(above, float(np.finfo(outputs.dtype).tiny))), 1)
        return xp.sum(_at_most_one(xp, _relu(xp, xp.add(xp.negative(higher), float(self.k)))))


def get(identifier) -> Metric:
    """A fresh Metric from "accuracy"/"acc", "top5"/"top_k_accuracy" style names, or an instance."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, dict) and identifier.get("class_name") in ("Accuracy", "TopK"):
        cls = Accuracy if identifier["class_name"] == "Accuracy" else TopK
        return cls(**identifier.get("config", {}))
    if isinstance(identifier, str):
        name = identifier.lower()
        if name in ("accuracy", "acc"):
            return Accuracy()
        for prefix in ("top_k_accuracy", "top"):
            rest = name[len(prefix):].strip("_").replace("_accuracy", "")
            if name.startswith(prefix) and (rest.isdigit() or prefix == "top_k_accuracy"):
                return TopK(int(rest) if rest.isdigit() else 5)
    raise ValueError(f"unknown metric {identifier!r}; expected 'accuracy', 'top5' (any k) or a Metric instance")
