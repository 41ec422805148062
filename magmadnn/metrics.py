"""Streaming classification metrics: accuracy and top-k accuracy.

A metric accumulates over batches with ``update(outputs, labels, xp)`` (``outputs``: backend array (N, C) of scores
or logits; ``labels``: NumPy int (N,) or one-hot/soft (N, C)), and reports with ``result()``. Accuracy reduces on the
backend (argmax) and moves only N integers to the host; top-k moves the (N, C) scores, which is small.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Metric", "Accuracy", "TopK", "get"]


def _class_indices(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim == 2:
        return labels.argmax(axis=1)
    if labels.ndim == 1:
        return labels.astype(np.int64, copy=False)
    raise ValueError(f"labels must be class indices (N,) or one-hot (N, C), got shape {labels.shape}")


class Metric:
    """Base class: a running mean of per-sample scores."""

    name = "metric"

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.total = 0.0
        self.count = 0

    def result(self) -> float:
        return self.total / self.count if self.count else float("nan")

    def update(self, outputs, labels, xp) -> None:
        raise NotImplementedError

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {"k": self.k} if isinstance(self, TopK) else {}}


class Accuracy(Metric):
    name = "accuracy"

    def update(self, outputs, labels, xp) -> None:
        if len(outputs.shape) != 2:
            raise ValueError(f"accuracy needs model outputs of shape (N, classes), got {tuple(outputs.shape)}")
        predicted = np.asarray(xp.to_numpy(xp.argmax(outputs, 1)))
        truth = _class_indices(labels)
        self.total += float(np.count_nonzero(predicted == truth))
        self.count += truth.shape[0]


class TopK(Metric):
    """Fraction of samples whose true class is among the ``k`` highest scores: a sample counts when fewer than ``k``
    classes score strictly higher than its true class (ties with the true class count in its favour)."""

    def __init__(self, k: int = 5):
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"TopK needs an int k >= 1, got {k!r}")
        self.k = k
        self.name = f"top{k}_accuracy"
        super().__init__()

    def update(self, outputs, labels, xp) -> None:
        scores = np.asarray(xp.to_numpy(outputs))
        if scores.ndim != 2:
            raise ValueError(f"{self.name} needs model outputs of shape (N, classes), got {scores.shape}")
        truth = _class_indices(labels)
        true_score = scores[np.arange(scores.shape[0]), truth]
        higher = np.count_nonzero(scores > true_score[:, None], axis=1)
        self.total += float(np.count_nonzero(higher < self.k))
        self.count += truth.shape[0]


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
