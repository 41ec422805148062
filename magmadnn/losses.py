"""Losses: ``loss(outputs, targets) -> scalar Tensor`` (mean over the batch by default).

* ``SoftmaxCrossEntropy`` ("cross_entropy"): from logits, numerically stable (log-sum-exp), targets as int class
  indices (N,) or one-hot / soft (N, C); token logits (N, T, C) with int targets (N, T); ``label_smoothing`` and
  ``ignore_index`` as PyTorch's ``cross_entropy``.
* ``BinaryCrossEntropy`` ("binary_cross_entropy"): sigmoid cross entropy from logits, stable, mean over elements.
* ``MSE`` ("mse"): mean of squared differences.

``validate(targets, output_shape)`` checks a whole NumPy target array once (before training) and raises a clear
ValueError/TypeError; ``prepare(targets, xp, dtype)`` turns a NumPy batch into the backend array the loss takes.
"""

from __future__ import annotations

import numpy as np

from . import functional as F
from ._checks import integer, real, shape_str
from ._configurable import Configurable
from ._registry import resolve

__all__ = ["Loss", "EpochLoss", "SoftmaxCrossEntropy", "MSE", "BinaryCrossEntropy", "get"]


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


class Loss(Configurable):
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

    def counted(self, targets) -> int | None:
        """The number of targets a batch's value is averaged over when it is not its sample count (``ignore_index``);
        None: the batch counts by its samples."""
        return None

    def tracker(self) -> EpochLoss:
        """A running epoch figure of this loss from its batch values."""
        return EpochLoss(self.reduction)


class SoftmaxCrossEntropy(Loss):
    """Softmax cross entropy of logits (N, C), or of token logits (N, T, C) with integer targets (N, T), exactly as
    PyTorch's ``cross_entropy``: ``label_smoothing`` e trains against ``(1 - e) onehot + e / C``; targets equal to
    ``ignore_index`` (padding) count for nothing and "mean" is over the counted targets."""

    name = "cross_entropy"

    def __init__(self, reduction: str = "mean", label_smoothing: float = 0.0, ignore_index: int | None = None):
        super().__init__(reduction)
        self.label_smoothing = real(label_smoothing, "label_smoothing", "SoftmaxCrossEntropy", 0.0, 1.0)
        self.ignore_index = None if ignore_index is None else integer(ignore_index, "ignore_index",
                                                                      "SoftmaxCrossEntropy")

    def _plain(self) -> bool:
        return not self.label_smoothing and self.ignore_index is None

    def __call__(self, logits, targets):
        if self._plain() and len(logits.shape) == 2:
            return F.softmax_cross_entropy(logits, targets, reduction=self.reduction)
        return F.cross_entropy(logits, targets, self.reduction, self.label_smoothing, self.ignore_index)

    def checked(self, logits, targets):
        if self._plain() and len(logits.shape) == 2:
            return F.softmax_cross_entropy(logits, targets, reduction=self.reduction, check_labels=False)
        return F.cross_entropy(logits, targets, self.reduction, self.label_smoothing, self.ignore_index,
                               check_labels=False, nan_if_empty=False)

    def counted(self, targets) -> int | None:
        """With ``ignore_index``: how many of the host ``targets`` count (a batch's weight in the epoch figure, which
        is the loss over every counted target of every batch); None (count samples) otherwise."""
        targets = np.asarray(targets)
        if self.ignore_index is None or not np.issubdtype(targets.dtype, np.integer):
            return None
        return int(np.count_nonzero(targets != self.ignore_index))

    def to_config(self) -> dict:
        config = super().to_config()
        config["config"].update(label_smoothing=self.label_smoothing, ignore_index=self.ignore_index)
        return config

    def validate(self, targets, output_shape):
        targets = np.asarray(targets)
        if len(output_shape) == 2:  # token logits (T, C)
            self._validate_tokens(targets, output_shape)
            return
        if len(output_shape) != 1:
            raise ValueError(f"cross_entropy needs model outputs (N, classes) or (N, T, classes); the model outputs "
                             f"per-sample shape {shape_str(output_shape)}: add Flatten()/Dense(classes) at the end")
        classes = output_shape[0]
        if targets.ndim == 1 and self.ignore_index is not None and np.issubdtype(targets.dtype, np.integer):
            self._validate_tokens(targets, output_shape)
        elif targets.ndim == 1:
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
            if self.ignore_index is not None:
                raise ValueError("cross_entropy: ignore_index needs integer targets (N,), got probabilities of shape "
                                 f"{targets.shape}")
            if targets.size and targets.min() < 0:
                bad = tuple(int(i) for i in np.argwhere(targets < 0)[0])
                raise ValueError(f"cross_entropy: one-hot / soft targets must be probabilities >= 0; found "
                                 f"{targets[bad]} at index {bad}")
        else:
            raise ValueError(f"cross_entropy: targets must be int labels (N,) or one-hot (N, {classes}); got shape "
                             f"{targets.shape}")

    def _validate_tokens(self, targets, output_shape):
        """Integer targets of shape (N,) + output_shape[:-1], in [0, classes) or equal to ignore_index."""
        classes = output_shape[-1]
        expected = output_shape[:-1]
        if targets.ndim == len(output_shape) + 1 and tuple(targets.shape[1:]) == tuple(output_shape):
            if self.ignore_index is not None:
                raise ValueError("cross_entropy: ignore_index needs integer targets, got probabilities of shape "
                                 f"{targets.shape}")
            if not np.issubdtype(targets.dtype, np.number) or np.iscomplexobj(targets):
                raise TypeError(f"cross_entropy: soft token targets must be real numbers, got dtype {targets.dtype}")
            if targets.size and targets.min() < 0:
                raise ValueError(f"cross_entropy: soft token targets must be probabilities >= 0; found "
                                 f"{targets.min()}")
            return
        if tuple(targets.shape[1:]) != tuple(expected):
            raise ValueError(f"cross_entropy: the model outputs per-sample logits {shape_str(output_shape)}, so "
                             f"integer targets must be (N, {', '.join(map(str, expected))}) or probabilities "
                             f"(N, {', '.join(map(str, output_shape))}); got shape {targets.shape}")
        if not np.issubdtype(targets.dtype, np.integer):
            raise TypeError(f"cross_entropy: targets of shape {targets.shape} must be integer class indices, got "
                            f"dtype {targets.dtype}")
        counted = targets if self.ignore_index is None else targets[targets != self.ignore_index]
        if counted.size and (counted.min() < 0 or counted.max() >= classes):
            bad = counted[(counted < 0) | (counted >= classes)][0]
            extra = "" if self.ignore_index is None else f" (or ignore_index={self.ignore_index})"
            raise ValueError(f"cross_entropy: labels must be in [0, {classes}){extra} for a model with {classes} "
                             f"outputs; found label {bad}")

    def prepare(self, targets, xp, dtype):
        targets = np.asarray(targets)
        if np.issubdtype(targets.dtype, np.integer):  # class indices (N,) / (N, T), or integer one-hot (the loss
            return xp.asarray(targets.astype(np.int64, copy=False))  # converts those to the logits' dtype)
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


class BinaryCrossEntropy(Loss):
    """Binary cross entropy of sigmoid(logits) against targets in [0, 1] shaped like the model output, mean over every
    element (PyTorch's ``binary_cross_entropy_with_logits``), in the stable form. Only ``from_logits=True``: end the
    model with the logits (no sigmoid layer); ``from_logits=False`` is refused with that advice."""

    name = "binary_cross_entropy"

    def __init__(self, from_logits: bool = True, reduction: str = "mean"):
        super().__init__(reduction)
        if not isinstance(from_logits, (bool, np.bool_)) or not from_logits:
            raise ValueError("BinaryCrossEntropy: only from_logits=True is supported (the stable form); drop the "
                             f"final sigmoid and train on the logits, got from_logits={from_logits!r}")
        self.from_logits = True

    def __call__(self, logits, targets):
        return F.binary_cross_entropy_with_logits(logits, targets, reduction=self.reduction)

    def to_config(self) -> dict:
        config = super().to_config()
        config["config"]["from_logits"] = self.from_logits
        return config

    def validate(self, targets, output_shape):
        targets = np.asarray(targets)
        if not (np.issubdtype(targets.dtype, np.number) or targets.dtype == np.bool_) or np.iscomplexobj(targets):
            raise TypeError(f"binary_cross_entropy: targets must be real numbers in [0, 1], got dtype {targets.dtype}")
        if tuple(targets.shape[1:]) != tuple(output_shape):
            raise ValueError(f"binary_cross_entropy: targets have per-sample shape {shape_str(targets.shape[1:])} but "
                             f"the model outputs {shape_str(output_shape)}")
        if targets.size and (targets.min() < 0 or targets.max() > 1):
            raise ValueError(f"binary_cross_entropy: targets must be in [0, 1], got values in [{targets.min()}, "
                             f"{targets.max()}]")


_BY_NAME = {"cross_entropy": SoftmaxCrossEntropy, "softmax_cross_entropy": SoftmaxCrossEntropy,
            "categorical_crossentropy": SoftmaxCrossEntropy, "sparse_categorical_crossentropy": SoftmaxCrossEntropy,
            "mse": MSE, "mean_squared_error": MSE,
            "binary_cross_entropy": BinaryCrossEntropy, "binary_crossentropy": BinaryCrossEntropy}


def get(identifier) -> Loss:
    """A Loss from a name ("cross_entropy", "mse"), an instance, or a ``{"class_name", "config"}`` dict."""
    return resolve(identifier, Loss, _BY_NAME, "loss")
