"""Losses. Keras' names (``categorical_crossentropy``, ``sparse_categorical_crossentropy``, ``binary_crossentropy``,
``mse``, ``mae``, ``huber``, ``log_cosh``, ``kl_divergence``, their classes and callables ``fn(y_true, y_pred)``) have
Keras 3's semantics (:class:`KerasLoss`: probabilities unless ``from_logits=True``, ``reduction``, sample weights).
magmadnn's own PyTorch-style losses, ``loss(outputs, targets) -> scalar Tensor`` (mean over the batch by default):

* ``SoftmaxCrossEntropy`` ("cross_entropy"): from logits, numerically stable (log-sum-exp), targets as int class
  indices (N,) or one-hot / soft (N, C); token logits (N, T, C) with int targets (N, T); ``label_smoothing`` and
  ``ignore_index`` as PyTorch's ``cross_entropy``.
* ``BinaryCrossEntropy`` ("binary_cross_entropy"): sigmoid cross entropy from logits, stable, mean over elements.
* ``MSE`` ("mse"): mean of squared differences.

``validate(targets, output_shape)`` checks a whole NumPy target array once (before training) and raises a clear
ValueError/TypeError; ``prepare(targets, xp, dtype)`` turns a NumPy batch into the backend array the loss takes.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import functional as F
from ._checks import integer, real, shape_str
from ._configurable import Configurable
from ._fused_losses import probability_crossentropy
from ._loss_plans import PlannedCrossEntropy
from ._loss_weights import WeightedCrossEntropy, pack, weights_of
from ._registry import resolve
from .autograd import Tensor

__all__ = ["Loss", "EpochLoss", "SoftmaxCrossEntropy", "MSE", "BinaryCrossEntropy", "KerasLoss",
           "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "BinaryCrossentropy", "MeanSquaredError",
           "MeanAbsoluteError", "Huber", "LogCosh", "KLDivergence", "LossFunction", "get"]


class EpochLoss:
    """The loss over all samples seen so far, from batch losses: the sample mean for reduction "mean", the total
    for "sum" (so the figure does not depend on the batch size)."""

    def __init__(self, reduction: str = "mean"):
        self.is_sum, self.total, self.samples = reduction == "sum", 0.0, 0

    def update(self, value: float, batch_size: int) -> None:
        self.total += value if self.is_sum else value * batch_size
        self.samples += batch_size

    def result(self) -> float:
        return float("nan") if not self.samples else self.total if self.is_sum else self.total / self.samples


class Loss(Configurable):
    name = "loss"

    def __init__(self, reduction: str = "mean"):
        if reduction not in ("mean", "sum"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean' or 'sum', got {reduction!r}")
        self.reduction = reduction

    def __call__(self, outputs, targets):
        raise NotImplementedError

    def checked(self, outputs, targets):
        """The loss of targets ``validate`` accepted already (checked once per call): no per-batch value checks."""
        return self(outputs, targets)

    def validate(self, targets: np.ndarray, output_shape: tuple) -> None:
        """Check NumPy ``targets`` (N, ...) against the model's per-sample ``output_shape``."""

    def prepare(self, targets: np.ndarray, xp, dtype):
        return xp.asarray(targets, dtype)

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": {"reduction": self.reduction}}

    def counted(self, targets) -> int | None:
        """The targets a batch's value is averaged over if not its samples (``ignore_index``); None: its samples."""
        return None

    @property
    def sums_dataset(self) -> bool:
        """The epoch figure is the total over the samples (reduction "sum") rather than a mean of batch losses."""
        return self.reduction == "sum"

    def tracker(self) -> EpochLoss:
        """A running epoch figure of this loss from its batch values."""
        return EpochLoss(self.reduction)


class SoftmaxCrossEntropy(PlannedCrossEntropy, WeightedCrossEntropy, Loss):
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
        if self._packed(logits, targets):
            return self._weighted(logits, targets)
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
        self._bound = tuple(output_shape)
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
        weights = weights_of(targets)
        targets = np.asarray(targets)
        if weights is not None:
            return xp.asarray(self._pack(targets, weights, dtype), dtype)
        if targets.dtype.kind in "ium":  # (np.integer's kinds, no call) class indices (N,) / (N, T), or integer
            return xp.asarray(targets.astype(np.int64, copy=False))  # one-hot (the loss converts it to the logits')
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


# ----------------------------------------------------------------------------------------------- Keras' losses
REDUCTIONS = ("sum_over_batch_size", "sum", "mean", "mean_with_sample_weight", "none", None)


def keras_target_shape(targets_shape, output_shape, who: str) -> tuple:
    """Keras' rank rule: per-sample targets that differ from the outputs by a trailing unit axis ((N,) against
    (N, 1), (N, 1) against (N,)) take the outputs' shape; otherwise they must have it."""
    t, o = tuple(targets_shape), tuple(output_shape)
    if t == o or (t == o + (1,)) or (o and o[-1] == 1 and t == o[:-1]):
        return o
    raise ValueError(f"{who}: targets have per-sample shape {shape_str(t)} but the model outputs {shape_str(o)}")


class KerasLoss(Loss):
    """A loss under a Keras name, with Keras 3's semantics: ``loss(y_true, y_pred, sample_weight=None)`` (Keras'
    argument order), per-sample losses reduced by ``reduction``: "sum_over_batch_size" (default) and "mean" divide
    the (weighted) sum by the number of per-sample values, "sum" is their sum, "mean_with_sample_weight" divides by
    the sum of the weights, None / "none" returns them. In ``fit`` the epoch's "loss" is the mean of the batch
    losses weighted by batch size, as Keras reports it, whatever the reduction.

    Subclasses define ``per_sample(t, y_pred)`` (``t`` a backend array shaped like ``y_pred``)."""

    name = "loss"

    def __init__(self, reduction="sum_over_batch_size", name=None, dtype=None):
        if reduction not in REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
        if dtype not in (None, "float32", "float64", np.float32, np.float64):
            raise ValueError(f"{type(self).__name__}: dtype must be None, 'float32' or 'float64', got {dtype!r}")
        self.reduction = reduction
        if name is not None:
            if not isinstance(name, str):
                raise TypeError(f"{type(self).__name__}: name must be a string, got {name!r}")
            self.name = name

    @property
    def sums_dataset(self) -> bool:
        return False

    def per_sample(self, t, y_pred):
        raise NotImplementedError

    def _args(self) -> dict:
        return {}

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__,
                "config": {"reduction": self.reduction, "name": self.name, **self._args()}}

    # -- a user's call, Keras' way
    def __call__(self, y_true, y_pred, sample_weight=None):
        y_pred = F._base._as_tensor(y_pred)
        if y_pred.ndim == 0:
            raise ValueError(f"{self.name}: y_pred must have a batch axis, got a scalar")
        xp = y_pred.xp
        data = y_true.data if isinstance(y_true, Tensor) else y_true
        host = data if isinstance(data, np.ndarray) else np.asarray(
            xp.to_numpy(data) if hasattr(data, "shape") and not isinstance(data, (list, tuple)) else data)
        self.validate(host, y_pred.shape[1:])
        w = None
        if sample_weight is not None:
            weights = np.asarray(sample_weight, dtype=np.float64)
            if weights.shape != (y_pred.shape[0],):
                raise ValueError(f"{self.name}: sample_weight must have shape ({y_pred.shape[0]},), got "
                                 f"{weights.shape}")
            w = xp.asarray(weights.astype(y_pred.dtype))
        t = xp.asarray(self.targets_array(host, y_pred.shape[1:], y_pred.dtype))
        return self._reduce(self.per_sample(t, y_pred), w, xp)

    # -- the model's path
    def validate(self, targets, output_shape) -> None:
        """Check NumPy ``targets`` (N, ...) against the per-sample ``output_shape`` (kept for :meth:`prepare`)."""
        targets = np.asarray(targets)
        if not (np.issubdtype(targets.dtype, np.number) or targets.dtype == np.bool_) or np.iscomplexobj(targets):
            raise TypeError(f"{self.name}: targets must be real numbers, got dtype {targets.dtype}")
        self._check_shape(targets, tuple(output_shape))
        self._bound = tuple(output_shape)

    def _check_shape(self, targets, output_shape) -> None:
        keras_target_shape(targets.shape[1:], output_shape, self.name)

    def targets_array(self, targets, output_shape, dtype) -> np.ndarray:
        """Host targets reshaped to (N, *output_shape), as ``dtype``."""
        targets = np.asarray(targets)
        return targets.reshape((targets.shape[0], *output_shape)).astype(dtype, copy=False)

    def prepare(self, targets, xp, dtype):
        """One host array (N, D + 1): the targets flattened per sample, then each sample's weight (1 without
        weights): one upload per batch, one staged buffer in a replayed graph."""
        host = np.asarray(targets)
        return xp.asarray(pack(self._rows(host, dtype).reshape(host.shape[0], -1), weights_of(targets), dtype), dtype)

    _bound: tuple | None = None  # the per-sample output shape of the last validate()

    def _rows(self, host, dtype) -> np.ndarray:
        """The targets of one batch as they are packed (a trailing unit axis changes nothing once flattened)."""
        return host.astype(dtype, copy=False)

    def checked(self, outputs, packed):
        xp = outputs.xp
        arr = packed if not isinstance(packed, np.ndarray) else xp.asarray(packed)
        if (fused := probability_crossentropy(self, outputs, arr, xp)) is not None:  # the device: one launch
            return fused
        n, d = int(arr.shape[0]), int(arr.shape[1]) - 1
        t, w = xp.split(arr, [d, 1], 1)
        t = xp.reshape(t, outputs.shape)
        values = self.per_sample(t, outputs)
        return self._reduce(values, xp.reshape(w, (n,)), xp)

    def _reduce(self, values, w, xp):
        if w is not None:
            shape = (values.shape[0],) + (1,) * (values.ndim - 1) if values.ndim else ()
            if values.ndim == 0:
                values = F.multiply(values, Tensor(xp.mean(w), backend=xp))
            else:
                values = F.multiply(values, Tensor(xp.reshape(w, shape), backend=xp))
        if self.reduction in (None, "none") or values.ndim == 0:
            return values
        total = F.sum(values)
        if self.reduction == "sum":
            return total
        if self.reduction == "mean_with_sample_weight" and w is not None:
            size = values.size // values.shape[0] if values.shape[0] else 1
            return F.divide(total, Tensor(xp.multiply(xp.sum(w), float(size)), backend=xp))
        return F.scale(total, 1.0 / max(values.size, 1))


class MeanSquaredError(KerasLoss):
    """Keras' ``MeanSquaredError`` ("mse", "mean_squared_error")."""

    name = "mean_squared_error"

    def per_sample(self, t, y_pred):
        return F.mean_squared_error(t, y_pred)


class MeanAbsoluteError(KerasLoss):
    """Keras' ``MeanAbsoluteError`` ("mae", "mean_absolute_error")."""

    name = "mean_absolute_error"

    def per_sample(self, t, y_pred):
        return F.mean_absolute_error(t, y_pred)


class Huber(KerasLoss):
    """Keras' ``Huber(delta=1.0)`` ("huber")."""

    name = "huber_loss"

    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name=None, dtype=None):
        super().__init__(reduction, name, dtype)
        self.delta = real(delta, "delta", "Huber", 0.0, None)
        if not self.delta > 0:
            raise ValueError(f"Huber: delta must be > 0, got {delta!r}")

    def _args(self):
        return {"delta": self.delta}

    def per_sample(self, t, y_pred):
        return F.huber(t, y_pred, self.delta)


class LogCosh(KerasLoss):
    """Keras' ``LogCosh`` ("log_cosh", "logcosh")."""

    name = "log_cosh"

    def per_sample(self, t, y_pred):
        return F.log_cosh(t, y_pred)


class KLDivergence(KerasLoss):
    """Keras' ``KLDivergence`` ("kl_divergence", "kld")."""

    name = "kl_divergence"

    def per_sample(self, t, y_pred):
        return F.kl_divergence(t, y_pred)


def _flag(value, what: str, cls: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{cls}: {what} must be True or False, got {value!r}")
    return bool(value)


def _axis(axis, cls: str) -> int:
    if axis != -1:
        raise ValueError(f"{cls}: only axis=-1 (classes last, as the model outputs them) is supported, got "
                         f"axis={axis!r}")
    return -1


class CategoricalCrossentropy(KerasLoss):
    """Keras' ``CategoricalCrossentropy`` ("categorical_crossentropy"): one-hot / soft targets shaped like the
    outputs; the outputs are probabilities (a softmax layer) unless ``from_logits=True``."""

    name, _binary = "categorical_crossentropy", False  # _binary: a cross entropy of probabilities (_fused_losses)

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="sum_over_batch_size",
                 name=None, dtype=None):
        super().__init__(reduction, name, dtype)
        self.from_logits = _flag(from_logits, "from_logits", type(self).__name__)
        self.label_smoothing = real(label_smoothing, "label_smoothing", type(self).__name__, 0.0, 1.0)
        self.axis = _axis(axis, type(self).__name__)

    def _args(self):
        return {"from_logits": self.from_logits, "label_smoothing": self.label_smoothing, "axis": self.axis}

    def _check_shape(self, targets, output_shape):
        if tuple(targets.shape[1:]) != tuple(output_shape) and np.issubdtype(targets.dtype, np.integer):
            raise ValueError(f"{self.name}: targets of per-sample shape {shape_str(targets.shape[1:])} look like "
                             f"integer class labels, but this loss takes one-hot targets shaped like the outputs "
                             f"{shape_str(output_shape)}; use loss='sparse_categorical_crossentropy' for labels")
        super()._check_shape(targets, output_shape)

    def per_sample(self, t, y_pred):
        return F.categorical_crossentropy(t, y_pred, self.from_logits, self.label_smoothing)


class SparseCategoricalCrossentropy(CategoricalCrossentropy):
    """Keras' ``SparseCategoricalCrossentropy`` ("sparse_categorical_crossentropy"): integer class labels shaped
    like the outputs without their class axis (a trailing unit axis is accepted); probabilities unless
    ``from_logits=True``. The labels become one-hot rows on the host as each batch is prepared."""

    name = "sparse_categorical_crossentropy"

    def __init__(self, from_logits=False, ignore_class=None, reduction="sum_over_batch_size", axis=-1, name=None,
                 dtype=None):
        if ignore_class is not None:
            raise ValueError("SparseCategoricalCrossentropy: ignore_class is not supported; use "
                             "losses.SoftmaxCrossEntropy(ignore_index=...) on logits (PyTorch's ignore_index)")
        super().__init__(from_logits, 0.0, axis, reduction, name, dtype)

    def _args(self):
        return {"from_logits": self.from_logits, "axis": self.axis}

    def _check_shape(self, targets, output_shape):
        out = tuple(output_shape)
        if not out:
            raise ValueError(f"{self.name}: the model's outputs need a class axis, got per-sample shape ()")
        shape = tuple(targets.shape[1:])
        if shape not in (out[:-1], out[:-1] + (1,)):
            raise ValueError(f"{self.name}: the model outputs {shape_str(out)}, so integer labels must have "
                             f"per-sample shape {shape_str(out[:-1])}; got {shape_str(shape)} (one-hot targets: "
                             "loss='categorical_crossentropy')")
        if not np.issubdtype(targets.dtype, np.number) or np.iscomplexobj(targets):
            raise TypeError(f"{self.name}: labels must be integer class indices, got dtype {targets.dtype}")
        if targets.size:
            if not np.issubdtype(targets.dtype, np.integer) and not np.array_equal(targets, np.round(targets)):
                raise TypeError(f"{self.name}: labels must be integer class indices, got non-integer values")
            if targets.min() < 0 or targets.max() >= out[-1]:
                bad = targets[(targets < 0) | (targets >= out[-1])].reshape(-1)[0]
                raise ValueError(f"{self.name}: labels must be in [0, {out[-1]}) for a model with {out[-1]} "
                                 f"outputs; found label {bad}")

    def targets_array(self, targets, output_shape, dtype):
        labels = np.asarray(targets).reshape((np.asarray(targets).shape[0], *output_shape[:-1])).astype(np.int64)
        return np.eye(output_shape[-1], dtype=dtype)[labels]

    def _rows(self, host, dtype):
        if self._bound is None:
            raise RuntimeError(f"{self.name}: prepare() before validate(): the model checks its targets first")
        return self.targets_array(host, self._bound, dtype)


class BinaryCrossentropy(KerasLoss):
    """Keras' ``BinaryCrossentropy`` ("binary_crossentropy"): targets in [0, 1] shaped like the outputs ((N,)
    against (N, 1) outputs too); the outputs are probabilities (a sigmoid layer) unless ``from_logits=True``."""

    name, _binary = "binary_crossentropy", True

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="sum_over_batch_size",
                 name=None, dtype=None):
        super().__init__(reduction, name, dtype)
        self.from_logits = _flag(from_logits, "from_logits", "BinaryCrossentropy")
        self.label_smoothing = real(label_smoothing, "label_smoothing", "BinaryCrossentropy", 0.0, 1.0)
        self.axis = _axis(axis, "BinaryCrossentropy")

    def _args(self):
        return {"from_logits": self.from_logits, "label_smoothing": self.label_smoothing, "axis": self.axis}

    def _check_shape(self, targets, output_shape):
        super()._check_shape(targets, output_shape)
        if targets.size and (targets.min() < 0 or targets.max() > 1):
            raise ValueError(f"{self.name}: targets must be in [0, 1], got values in [{targets.min()}, "
                             f"{targets.max()}]")

    def per_sample(self, t, y_pred):
        return F.binary_crossentropy(t, y_pred, self.from_logits, self.label_smoothing)


class LossFunction(KerasLoss):
    """A plain callable ``fn(y_true, y_pred)`` as a loss (Keras' ``LossFunctionWrapper``): ``y_true`` a constant
    Tensor shaped like ``y_pred`` (Keras' rank rule), ``y_pred`` the outputs; ``fn`` returns per-sample losses (or
    a scalar) computed with magmadnn's differentiable functions (``magmadnn.functional``, Tensor operators)."""

    def __init__(self, fn, reduction="sum_over_batch_size", name=None, dtype=None):
        if not callable(fn):
            raise TypeError(f"LossFunction: fn must be callable, got {fn!r}")
        super().__init__(reduction, name or getattr(fn, "__name__", "loss"), dtype)
        self.fn = fn

    def to_config(self) -> dict:
        return {"class_name": "LossFunction", "config": {"name": self.name}}  # the function itself is not stored

    def per_sample(self, t, y_pred):
        value = self.fn(Tensor(t, backend=y_pred.xp), y_pred)
        if not isinstance(value, Tensor):
            raise TypeError(f"loss function {self.name!r} returned {type(value).__name__}; it must return a Tensor "
                            "computed from y_pred with magmadnn.functional / Tensor operators (differentiable)")
        return value


_BY_NAME = {"cross_entropy": SoftmaxCrossEntropy, "softmax_cross_entropy": SoftmaxCrossEntropy,
            "binary_cross_entropy": BinaryCrossEntropy,
            "categorical_crossentropy": CategoricalCrossentropy,
            "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
            "binary_crossentropy": BinaryCrossentropy,
            "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError,
            "mae": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError,
            "huber": Huber, "huber_loss": Huber, "log_cosh": LogCosh, "logcosh": LogCosh,
            "kl_divergence": KLDivergence, "kld": KLDivergence}
_CLASSES = {cls.__name__: cls for cls in (*_BY_NAME.values(), MSE)}


def get(identifier) -> Loss:
    """A Loss from a name ("cross_entropy", "categorical_crossentropy", "mse", ...), an instance, a
    ``{"class_name", "config"}`` dict, or a callable ``fn(y_true, y_pred)``."""
    if isinstance(identifier, dict) and identifier.get("class_name") == "LossFunction":
        raise ValueError(f"loss {identifier.get('config', {}).get('name')!r} was a Python function, which is never "
                         "stored in a file: compile the loaded model with it again")
    if isinstance(identifier, dict) and identifier.get("class_name") in _CLASSES:
        return _CLASSES[identifier["class_name"]](**identifier.get("config", {}))
    if callable(identifier) and not isinstance(identifier, (Loss, type)):
        return LossFunction(identifier)
    if isinstance(identifier, str) and identifier in _CLASSES and issubclass(_CLASSES[identifier], KerasLoss):
        return _CLASSES[identifier]()  # a Keras class name, as keras.losses.get takes it
    if isinstance(identifier, str) and issubclass(_BY_NAME.get(identifier.lower(), Loss), KerasLoss):
        return _BY_NAME[identifier.lower()](name=identifier.lower())  # named as given, as Keras does
    return resolve(identifier, Loss, _BY_NAME, "loss")


def _output_activation(model):
    """The activation of the model's last layer ("linear", "softmax", "sigmoid", ...), or None when unknown."""
    layers = [layer for layer in getattr(model, "layers", []) if type(layer).__name__ not in ("Input", "InputLayer")]
    if not layers:
        return None
    last = layers[-1]
    kind = getattr(last, "activation", None) if type(last).__name__ != "Activation" else getattr(last, "kind", None)
    if type(last).__name__ == "Dense" and kind is None:
        return "linear"
    return kind if isinstance(kind, str) else None


def check_compiled(loss: Loss, model) -> None:
    """What ``compile`` checks of its loss: a reduction that gives one number, and (a warning) probabilities where
    the model ends in logits or logits where it ends in a softmax / sigmoid."""
    if isinstance(loss, KerasLoss) and loss.reduction in (None, "none"):
        raise ValueError(f"compile: loss {loss.name!r} has reduction={loss.reduction!r}, which gives one loss per "
                         "sample; training needs one number: use 'sum_over_batch_size' (Keras' default) or 'sum'")
    kind = _output_activation(model)
    from_logits = getattr(loss, "from_logits", None)
    if kind is None or from_logits is None:
        return
    probability = kind in ("softmax", "sigmoid")
    if from_logits and probability:
        warnings.warn(f"compile: loss {loss.name!r} takes logits (from_logits=True) but the model's last layer "
                      f"applies {kind!r}, so its outputs are probabilities; drop the {kind} or use "
                      f"from_logits=False", UserWarning, stacklevel=3)
    elif not from_logits and kind == "linear":
        warnings.warn(f"compile: loss {loss.name!r} takes probabilities (from_logits=False) but the model's last "
                      "layer is linear, so its outputs look like logits; end the model with a "
                      f"{'sigmoid' if isinstance(loss, BinaryCrossentropy) else 'softmax'} activation or pass "
                      f"from_logits=True", UserWarning, stacklevel=3)
