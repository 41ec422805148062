"""LayerNorm, RMSNorm and GroupNorm: normalisation over each sample (no batch statistics, the same in training and
inference). Weights as Keras names them, math as PyTorch computes it (biased variance, ``eps`` inside the root).
BatchNormalization: Keras' batch norm, beside the PyTorch-style ``BatchNorm`` of :mod:`.core`."""

from __future__ import annotations

from .. import _checks
from .. import functional as F
from .base import Layer, register
from .core import BatchNorm

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "BatchNormalization", "LayerNormalization", "GroupNormalization"]


def _epsilon(epsilon, kwargs: dict) -> float:
    """Keras' ``epsilon=`` or magmadnn's alias ``eps=`` (taken out of ``kwargs``)."""
    return kwargs.pop("eps") if "eps" in kwargs else epsilon


@register
class BatchNormalization(BatchNorm):
    """Keras 3's ``BatchNormalization``: ``momentum=0.99``, ``epsilon=1e-3`` (``eps=`` accepted too), moving variance
    from the biased batch variance, ``moving = momentum * moving + (1 - momentum) * batch``. Images are NCHW here, so
    the normalised axis is 1 (the channels; Keras' default -1 is the channels of its NHWC); ``axis=-1`` is accepted
    for per-sample inputs of one axis (features), where it is the same axis. ``BatchNorm`` keeps PyTorch's
    defaults (momentum 0.9 in this convention, eps 1e-5, unbiased running variance)."""

    unbiased_running_var = False

    def __init__(self, axis: int = 1, momentum: float = 0.99, epsilon: float = 1e-3, **kwargs):
        super().__init__(momentum=momentum, eps=_epsilon(epsilon, kwargs), **kwargs)
        self.axis = _checks.integer(axis, "axis", f"BatchNormalization {self.name!r}")
        if self.axis not in (1, -1):
            raise ValueError(f"BatchNormalization {self.name!r}: axis={self.axis} is not supported; the channels of "
                             "NCHW images (or the features of (N, F) input) are axis 1")

    @property
    def epsilon(self) -> float:
        return self.eps

    def check_input_shape(self, input_shape):
        super().check_input_shape(input_shape)
        if self.axis == -1 and len(input_shape) != 1:
            raise ValueError(f"BatchNormalization {self.name!r}: axis=-1 of NCHW input is its width; the channels "
                             "are axis=1 (the default): images here are NCHW, not Keras' NHWC")

    def get_config(self):
        config = super().get_config()
        del config["eps"]
        return {"axis": self.axis, "epsilon": self.eps, **config}


class _LastAxisNorm(Layer):
    """A normalisation over one axis of each sample (``axis`` counts the batch axis, as in Keras; -1 the last)."""

    _computes_in_float32 = True  # statistics in float32 under a mixed policy (Keras)

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

    _computes_in_float32 = True  # statistics in float32 under a mixed policy (Keras)

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


@register
class LayerNormalization(LayerNorm):
    """Keras 3's ``LayerNormalization(axis=-1, epsilon=1e-3)`` (``eps=`` accepted too); ``LayerNorm`` keeps
    PyTorch's eps 1e-5."""

    def __init__(self, axis: int = -1, epsilon: float = 1e-3, **kwargs):
        super().__init__(axis=axis, eps=_epsilon(epsilon, kwargs), **kwargs)

    @property
    def epsilon(self) -> float:
        return self.eps

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = config.pop("eps")
        return config


@register
class GroupNormalization(GroupNorm):
    """Keras 3's ``GroupNormalization(groups=32, epsilon=1e-3)`` (``eps=`` accepted too) over the channels, axis 1
    here (NCHW; Keras' default axis -1 is the channels of its NHWC); ``GroupNorm`` keeps PyTorch's eps 1e-5."""

    def __init__(self, groups: int = 32, axis: int = 1, epsilon: float = 1e-3, **kwargs):
        super().__init__(groups, eps=_epsilon(epsilon, kwargs), **kwargs)
        self.axis = _checks.integer(axis, "axis", f"GroupNormalization {self.name!r}")
        if self.axis != 1:
            raise ValueError(f"GroupNormalization {self.name!r}: axis={self.axis} is not supported; the channels "
                             "are axis 1 here (NCHW, not Keras' NHWC)")

    @property
    def epsilon(self) -> float:
        return self.eps

    def get_config(self):
        config = super().get_config()
        del config["eps"]
        return {"axis": self.axis, "epsilon": self.eps, **config}
