"""Per-sample weights inside the losses (``fit(sample_weight=, class_weight=)``): they ride on the host targets
(:mod:`magmadnn.models.weighting`) and a loss packs each batch's targets, flattened per sample, with each sample's
weight after them into one array (N, D + 1): one upload per batch, one staged buffer in a replayed graph.
:class:`WeightedCrossEntropy` gives magmadnn's own ``SoftmaxCrossEntropy`` (on logits) that path, reduced as Keras
reduces its ``from_logits=True`` cross entropy ("mean": the weighted sum over the number of per-sample values)."""

from __future__ import annotations

import math

import numpy as np

from . import functional as F
from .autograd import Tensor

__all__ = ["weights_of", "pack", "WeightedCrossEntropy"]


def weights_of(targets):
    """The per-sample weights carried by ``targets`` (see :mod:`magmadnn.models.weighting`), else None."""
    return getattr(targets, "sample_weight", None)


def pack(flat: np.ndarray, weights, dtype) -> np.ndarray:
    """``flat`` targets (N, D) with each sample's weight (1 without weights) as a last column: (N, D + 1)."""
    packed = np.empty((flat.shape[0], flat.shape[1] + 1), dtype=dtype)
    packed[:, :-1] = flat
    packed[:, -1] = 1.0 if weights is None else weights
    return packed


class WeightedCrossEntropy:
    """The weighted path of a softmax cross entropy on logits with ``label_smoothing``, ``reduction`` ("mean" or
    "sum") and ``_bound`` (the per-sample output shape its ``validate`` saw)."""

    @staticmethod
    def _packed(logits, targets) -> bool:
        shape = tuple(targets.shape)
        return len(shape) == 2 and shape[1] == math.prod(logits.shape[1:]) + 1

    def _weighted(self, logits, packed):
        xp = logits.xp
        arr = packed if not isinstance(packed, np.ndarray) else xp.asarray(packed)
        n, d = int(arr.shape[0]), int(arr.shape[1]) - 1
        t, w = xp.split(arr, [d, 1], 1)
        values = F.categorical_crossentropy(xp.reshape(t, logits.shape), logits, True, self.label_smoothing)
        shape = (n,) + (1,) * (values.ndim - 1)
        total = F.sum(F.multiply(values, Tensor(xp.reshape(w, shape), backend=xp)))
        return total if self.reduction == "sum" else F.scale(total, 1.0 / max(values.size, 1))

    def _pack(self, targets, weights, dtype) -> np.ndarray:
        n = targets.shape[0]
        rows = np.eye(self._bound[-1], dtype=dtype)[targets] if np.issubdtype(targets.dtype, np.integer) and \
            targets.shape[1:] != self._bound else targets.astype(dtype, copy=False)
        return pack(rows.reshape(n, -1), weights, dtype)

    _bound: tuple | None = None  # the per-sample output shape of the last validate()
