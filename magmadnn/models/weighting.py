"""Per-sample weights of ``fit`` / ``evaluate`` / ``train_on_batch`` (``sample_weight=``, ``class_weight=``), with
Keras 3's semantics.

The weights ride on the targets: :class:`WeightedTargets` is the target array with a ``sample_weight`` vector that
indexing along the sample axis slices with it, so batching, shuffling and ``validation_split`` carry each sample's
weight without a second array to thread through. The loss (:class:`magmadnn.losses.KerasLoss`) packs the batch's
weights beside its targets into the one array it uploads (one staged buffer in a replayed graph): no new transfer
per step. Metrics are not weighted (Keras weights only ``weighted_metrics``).
"""

from __future__ import annotations

import numbers

import numpy as np

from .outputs import OutputTargets, per_output

__all__ = ["WeightedTargets", "attach", "class_weights"]


class WeightedTargets(np.ndarray):
    """Targets with per-sample weights (``sample_weight``, shape (N,)) that follow indexing along axis 0."""

    sample_weight: np.ndarray | None = None

    def __array_finalize__(self, obj):
        if obj is not None:
            self.sample_weight = getattr(obj, "sample_weight", None)

    def __getitem__(self, index):
        result = super().__getitem__(index)
        if isinstance(result, WeightedTargets) and self.sample_weight is not None and result.ndim:
            first = index[0] if isinstance(index, tuple) and index else index
            result.sample_weight = self.sample_weight[first]
        return result


def class_weights(y: np.ndarray, class_weight, who: str) -> np.ndarray:
    """Keras' ``class_weight``: each sample's weight from its class (the argmax of one-hot targets, else the rounded
    label); classes missing from the dict weigh 1."""
    if not isinstance(class_weight, dict):
        raise TypeError(f"{who}: class_weight must be a dict {{class index: weight}}, got "
                        f"{type(class_weight).__name__}")
    for key, value in class_weight.items():
        if isinstance(key, bool) or not isinstance(key, numbers.Integral):
            raise TypeError(f"{who}: class_weight keys must be int class indices, got {key!r}")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{who}: class_weight[{key}] must be a number, got {value!r}")
        if not np.isfinite(value):
            raise ValueError(f"{who}: class_weight[{key}] must be a finite number, got {value!r}")
    labels = np.asarray(y)
    if labels.ndim > 1:
        labels = labels.argmax(axis=-1) if labels.shape[-1] != 1 else labels.squeeze(-1)
    if labels.ndim != 1:
        raise ValueError(f"{who}: class_weight needs one class per sample (int labels (N,) or one-hot (N, C)), got "
                         f"targets of shape {np.asarray(y).shape}")
    labels = np.round(labels).astype(np.int64)
    table = {int(k): float(v) for k, v in class_weight.items()}
    return np.array([table.get(int(c), 1.0) for c in labels], dtype=np.float64)


def _check_range(weights: np.ndarray, dtype, what: str, who: str) -> None:
    """A weight the model's dtype cannot hold (1e39 in float32) would make the loss inf and fit stop with a
    non-finite loss: named here instead."""
    largest = float(np.finfo(np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.float32).max)
    big = np.abs(weights) > largest
    if big.any():
        where = int(np.argwhere(big)[0, 0])
        raise ValueError(f"{who}: {what} of sample {where} is {weights[where]:g}, which overflows the model's "
                         f"{np.dtype(dtype).name} (largest {largest:g}); scale the weights down (a common factor "
                         "changes only the loss's scale)")


def attach(model, y: np.ndarray, sample_weight=None, class_weight=None, who: str = "fit"):
    """``y`` with its per-sample weights attached (``y`` itself when there are none)."""
    if sample_weight is None and class_weight is None:
        return y
    if isinstance(y, OutputTargets):  # several outputs: a weight array per output
        return _attach_per_output(model, y, sample_weight, class_weight, who)
    if sample_weight is not None and class_weight is not None:
        raise ValueError(f"{who}: pass sample_weight or class_weight, not both (as Keras): multiply the class "
                         "weights into sample_weight")
    from ..losses import KerasLoss, SoftmaxCrossEntropy

    loss = getattr(model.loss, "inner", model.loss)
    if not isinstance(loss, (KerasLoss, SoftmaxCrossEntropy)):
        raise ValueError(f"{who}: sample_weight/class_weight need a loss under a Keras name or 'cross_entropy', got "
                         f"{type(model.loss).__name__} ({model.loss.name!r}); e.g. for binary targets use "
                         "loss=losses.BinaryCrossentropy(from_logits=True)")
    if getattr(loss, "ignore_index", None) is not None:
        raise ValueError(f"{who}: sample_weight/class_weight with ignore_index={loss.ignore_index} are not "
                         "supported (which targets count and how much would mix two rules); give the ignored "
                         "samples a weight of 0 instead, without ignore_index")
    n = y.shape[0]
    if class_weight is not None:
        weights = class_weights(y, class_weight, who)
        what = "class_weight"
    else:
        weights = np.asarray(sample_weight)
        if weights.dtype.kind not in "iufb":
            raise TypeError(f"{who}: sample_weight must be numbers, got dtype {weights.dtype}")
        if weights.ndim == 2 and weights.shape[1] == 1:
            weights = weights[:, 0]
        if weights.shape != (n,):
            raise ValueError(f"{who}: sample_weight must have one weight per sample, shape ({n},), got "
                             f"{weights.shape}")
        weights = weights.astype(np.float64)
        if not np.isfinite(weights).all():
            where = int(np.argwhere(~np.isfinite(weights))[0, 0])
            raise ValueError(f"{who}: sample_weight holds NaN or infinite values (sample {where}: {weights[where]})")
        what = "sample_weight"
    _check_range(weights, model.dtype, what, who)
    out = np.asarray(y).view(WeightedTargets)
    out.sample_weight = weights
    return out


def _attach_per_output(model, y: OutputTargets, sample_weight, class_weight, who: str) -> OutputTargets:
    """Per-output ``sample_weight`` (one array for all, a list or a dict by output name) attached to each output's
    targets; ``class_weight`` is refused (Keras refuses it for several outputs too)."""
    if class_weight is not None:
        raise ValueError(f"{who}: class_weight is not supported for a model of several outputs (Keras neither); "
                         "pass sample_weight per output instead")
    if isinstance(sample_weight, (dict, list, tuple)) and not (
            isinstance(sample_weight, (list, tuple)) and sample_weight and np.isscalar(sample_weight[0])):
        weights = per_output(model, sample_weight, "sample_weight", who)
    else:
        weights = [sample_weight] * len(y.arrays)
    arrays = []
    for loss, target, w in zip(model.loss.losses, y.arrays, weights):
        arrays.append(target if target is None or w is None
                      else attach(_LossOf(loss, model.dtype), target, w, None, who))
    return OutputTargets(arrays, y.shape[0])


class _LossOf:
    """What ``attach`` reads of a model (its loss and dtype), for one output."""

    def __init__(self, loss, dtype):
        self.loss, self.dtype = loss, dtype
