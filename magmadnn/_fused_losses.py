"""Keras' cross entropies of probabilities (``BinaryCrossentropy`` / ``CategoricalCrossentropy`` /
``SparseCategoricalCrossentropy`` with ``from_logits=False``) as one Function of two fused ops on a backend that has
them (the device's optional ``probability_crossentropy`` and its backward: one kernel launch each), instead of the
chain of element-wise ops (clip, logs, products, the mean over the last axis, the weights, the reduction) a backend
without them runs. The loss's packed targets (targets, then each sample's weight) are read as they are staged."""

from __future__ import annotations

from .autograd import Function
from .functional.losses import EPSILON

__all__ = ["probability_crossentropy"]

#: The reductions folded into the fused op's scale (``mean_with_sample_weight`` and None keep the chain).
FUSED_REDUCTIONS = ("sum_over_batch_size", "mean", "sum")


class _ProbabilityCrossentropy(Function):
    """The backend's ``probability_crossentropy`` and its backward (``loss.backward()``'s implicit gradient 1 folded
    into the op)."""

    def forward(self, p, packed, binary, smoothing, scale):
        self.p, self.packed, self.args = p, packed, (binary, smoothing, EPSILON, scale)
        return self.xp.probability_crossentropy(p, packed, *self.args)

    def backward(self, g):
        return (self.xp.probability_crossentropy_backward(self.p, self.packed, g, *self.args),)

    def backward_of_one(self):
        return (self.xp.probability_crossentropy_backward(self.p, self.packed, None, *self.args),)


def probability_crossentropy(loss, outputs, packed, xp):
    """``loss`` (a Keras loss) of the 2-D ``outputs`` against its ``packed`` targets as one fused Function, or None
    where the chain of ops runs: a loss of another kind, logits, another reduction, more than two axes, or a
    backend without the fused ops (the host)."""
    binary = getattr(loss, "_binary", None)
    if binary is None or loss.from_logits or outputs.ndim != 2 or loss.reduction not in FUSED_REDUCTIONS or \
            getattr(xp, "probability_crossentropy", None) is None:
        return None
    scale = 1.0 if loss.reduction == "sum" else 1.0 / max(int(outputs.shape[0]), 1)
    return _ProbabilityCrossentropy.apply(outputs, packed=packed, binary=binary,
                                          smoothing=float(loss.label_smoothing), scale=scale)
