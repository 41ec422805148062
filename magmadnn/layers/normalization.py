"""LayerNorm, RMSNorm and GroupNorm: normalisation over each sample (no batch statistics, the same in training and
inference). Weights as Keras names them, math as PyTorch computes it (biased variance, ``eps`` inside the root)."""

from __future__ import annotations

from .. import _checks
from .. import functional as F
from .base import Layer, register

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm"]


class _LastAxisNorm(Layer):
    """A normalisation over one axis of each sample (``axis`` counts the batch axis, as in Keras; -1 the last)."""

    def __init__(self, axis: int = -1, eps: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        self.axis = _checks.integer(axis, "axis", owner)
        self.eps = _checks.real(eps, "eps", owner, 0.0, open_low=True)

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)
        rank = len(input_shape) + 1
        if not (-rank <= self.axis < rank) or self.axis % rank == 0:
            raise self.shape_error(f"axis={self.axis} to be a non-batch axis of its (N, ...) input, i.e. in "
                                   f"[1, {rank - 1}] or [-{rank - 1}, -1]", input_shape)
        if self._size(input_shape) < 1:
            raise self.shape_error(f"a normalised axis (axis={self.axis}) of size >= 1", input_shape)

    def _normalised_axis(self, ndim: int) -> int:
        return self.axis % ndim

    def _size(self, input_shape) -> int:
        return input_shape[self._normalised_axis(len(input_shape) + 1) - 1]

    def call(self, x, training=False):
        axis = self._normalised_axis(x.ndim)
        if axis == x.ndim - 1:
            return self.normalise_last(x)
        order = [d for d in range(x.ndim) if d != axis] + [axis]
        back = [order.index(d) for d in range(x.ndim)]
        return F.transpose(self.normalise_last(F.transpose(x, order)), back)

    def normalise_last(self, x):
        raise NotImplementedError

    def get_config(self):
        return {"axis": self.axis, "eps": self.eps, **super().get_config()}


@register
class LayerNorm(_LastAxisNorm):
    """Layer normalisation over ``axis`` of each sample: ``(x - mean) / sqrt(var + eps) * gamma + beta``; weights
    ``gamma`` (ones) and ``beta`` (zeros) of the normalised axis's size."""

    supports_masking = True  # per position: a mask passes through, as in Keras

    def create_weights(self, input_shape):
        size = self._size(input_shape)
        self.add_weight("gamma", (size,), "ones")
        self.add_weight("beta", (size,), "zeros")

    def normalise_last(self, x):
        return F.layer_norm(x, self._params["gamma"], self._params["beta"], self.eps)


@register
class RMSNorm(_LastAxisNorm):
    """Root-mean-square normalisation over ``axis``: ``x / sqrt(mean(x^2) + eps) * gamma``; weight ``gamma``
    (ones)."""

    def __init__(self, eps: float = 1e-6, axis: int = -1, **kwargs):
        super().__init__(axis=axis, eps=eps, **kwargs)

    def create_weights(self, input_shape):
        self.add_weight("gamma", (self._size(input_shape),), "ones")

    def normalise_last(self, x):
        return F.rms_norm(x, self._params["gamma"], self.eps)


@register
class GroupNorm(Layer):
    """Group normalisation of (C, H, W) (or (C, ...), or (C,) as PyTorch) samples: the C channels in ``groups``
    consecutive groups, each normalised over its channels and positions, then ``* gamma + beta`` per channel
    (weights of shape (C,))."""

    def __init__(self, groups: int, eps: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        owner = f"GroupNorm {self.name!r}"
        self.groups = _checks.integer(groups, "groups", owner, minimum=1)
        self.eps = _checks.real(eps, "eps", owner, 0.0, open_low=True)

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list) or len(input_shape) < 1 or min(input_shape) < 1:
            raise self.shape_error("a per-sample input (C,) or (C, H, W, ...) (channels first) with sizes >= 1",
                                   input_shape)
        if input_shape[0] % self.groups:
            raise self.shape_error(f"a channel count divisible by groups={self.groups}", input_shape)

    def create_weights(self, input_shape):
        self.add_weight("gamma", (input_shape[0],), "ones")
        self.add_weight("beta", (input_shape[0],), "zeros")

    def call(self, x, training=False):
        return F.group_norm(x, self.groups, self._params["gamma"], self._params["beta"], self.eps)

    def get_config(self):
        return {"groups": self.groups, "eps": self.eps, **super().get_config()}
