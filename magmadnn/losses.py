"""Losses: ``loss(outputs, targets) -> scalar Tensor`` (mean over the batch by default).

* ``SoftmaxCrossEntropy`` ("cross_entropy"): from logits, numerically stable (log-sum-exp), targets as int class
  indices (N,) or one-hot / soft (N, C).
* ``MSE`` ("mse"): mean of squared differences.

``validate(targets, output_shape)`` checks a whole NumPy target array once (before training) and raises a clear
ValueError/TypeError; ``prepare(targets, xp, dtype)`` turns a NumPy batch into the backend array the loss takes.
"""

from __future__ import annotations

import numpy as np

from . import functional as F
from ._checks import shape_str
from ._registry import resolve

__all__ = ["Loss", "EpochLoss", "SoftmaxCrossEntropy", "MSE", "get"]


class EpochLoss:
    """The loss over all samples seen so far, from batch losses: the sample mean for reduction "mean", the total
    for "sum" (so the figure does not depend on the batch size)."""

    def __init__(self, reduction: str = "mean"):
        self.is_sum, self.total, self.samples = reduction == "sum", 0.0, 0

    def update(self, value: float, batch_size: int) -> None:
        self.total += value if self.is_sum else value * batch_size
        self.samples += batch_size

    def result(self) -> float:
        if not self.samples:
            return float("nan")
        return self.total if self.is_sum else self.total / self.samples


class Loss:
    name = "loss"

    def __init__(self, reduction: str = "mean"):
        if reduction not in ("mean", "sum"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean' or 'sum', got {reduction!r}")
        self.reduction = reduction

    def __call__(self, outputs, targets):
        raise NotImplementedError

    def checked(self, outputs, targets):
        """The loss of targets that ``validate`` accepted already (the model validates once per call): a loss may
        skip its per-batch value checks here."""
        return self(outputs, targets)

    def validate(self, targets: np.ndarray, output_shape: tuple) -> None:
        """Check NumPy ``targets`` (N, ...) against the model's per-sample ``output_shape``."""

    def prepare(self, targets: np.ndarray, xp, dtype):
        return xp.asarray(targets, dtype)

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {"reduction": self.reduction}}

    def tracker(self) -> EpochLoss:
        """A running epoch figure of this loss from its batch values."""
        return EpochLoss(self.reduction)


class SoftmaxCrossEntropy(Loss):
    name = "cross_entropy"

    def __call__(self, logits, targets):
        return F.softmax_cross_entropy(logits, targets, reduction=self.reduction)

    def checked(self, logits, targets):
        return F.softmax_cross_entropy(logits, targets, reduction=self.reduction, check_labels=False)

    def validate(self, targets, output_shape):
        targets = np.asarray(targets)
        if len(output_shape) != 1:
            raise ValueError(f"cross_entropy needs model outputs (N, classes); the model outputs per-sample shape "
                             f"{shape_str(output_shape)}: add Flatten()/Dense(classes) at the end")
        classes = output_shape[0]
        if targets.ndim == 1:
            if not np.issubdtype(targets.dtype, np.integer):
                raise TypeError(f"cross_entropy: 1-D targets must be integer class indices, got dtype "
                                f"{targets.dtype}; pass int labels (N,) or one-hot (N, {classes})")
            if targets.size and (targets.min() < 0 or targets.max() >= classes):
                bad = targets[(targets < 0) | (targets >= classes)][0]
                raise ValueError(f"cross_entropy: labels must be in [0, {classes}) for a model with {classes} "
                                 f"outputs; found label {bad}")
        elif targets.ndim == 2:
            if targets.shape[1] != classes:
                raise ValueError(f"cross_entropy: one-hot targets have {targets.shape[1]} columns but the model has "
                                 f"{classes} outputs")
            if not np.issubdtype(targets.dtype, np.number) or np.iscomplexobj(targets):
                raise TypeError(f"cross_entropy: one-hot targets must be real numbers, got dtype {targets.dtype}")
            if targets.size and targets.min() < 0:
                bad = tuple(int(i) for i in np.argwhere(targets < 0)[0])
                raise ValueError(f"cross_entropy: one-hot / soft targets must be probabilities >= 0; found "
                                 f"{targets[bad]} at index {bad}")
        else:
            raise ValueError(f"cross_entropy: targets must be int labels (N,) or one-hot (N, {classes}); got shape "
                             f"{targets.shape}")

    def prepare(self, targets, xp, dtype):
        targets = np.asarray(targets)
        if targets.ndim == 1:
            return xp.asarray(targets.astype(np.int64, copy=False))
        return xp.asarray(targets, dtype)


class MSE(Loss):
    name = "mse"

    def __call__(self, outputs, targets):
        return F.mse(outputs, targets, reduction=self.reduction)

    def validate(self, targets, output_shape):
        targets = np.asarray(targets)
        if not np.issubdtype(targets.dtype, np.number) or np.iscomplexobj(targets):
            raise TypeError(f"mse: targets must be real numbers, got dtype {targets.dtype}")
        if tuple(targets.shape[1:]) != tuple(output_shape):
            raise ValueError(f"mse: targets have per-sample shape {shape_str(targets.shape[1:])} but the model "
                             f"outputs {shape_str(output_shape)}")


_BY_NAME = {"cross_entropy": SoftmaxCrossEntropy, "softmax_cross_entropy": SoftmaxCrossEntropy,
            "categorical_crossentropy": SoftmaxCrossEntropy, "sparse_categorical_crossentropy": SoftmaxCrossEntropy,
            "mse": MSE, "mean_squared_error": MSE}


def get(identifier) -> Loss:
    """A Loss from a name ("cross_entropy", "mse"), an instance, or a ``{"class_name", "config"}`` dict."""
    return resolve(identifier, Loss, _BY_NAME, "loss")
