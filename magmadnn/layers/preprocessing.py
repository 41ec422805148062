"""Preprocessing layers (Keras'): ``Rescaling`` (``x * scale + offset``) and ``Normalization`` (standardise with a
mean and variance given or learnt from data by ``adapt``)."""

from __future__ import annotations

import numbers

import numpy as np

from .. import _checks
from .. import functional as F
from ..autograd import Tensor
from .base import Layer, register

__all__ = ["Rescaling", "Normalization"]

EPSILON = 1e-7  # Keras' backend.epsilon()


def _real(value, name: str, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a real number (a per-channel array is not available here: use "
                        f"Normalization(mean=, variance=) or a Lambda), got {value!r}")
    return _checks.real(value, name, owner)


@register
class Rescaling(Layer):
    """``x * scale + offset`` (Keras': ``Rescaling(1 / 255)`` maps pixels to [0, 1])."""

    supports_masking = True

    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        owner = f"Rescaling {self.name!r}"
        self.scale, self.offset = _real(scale, "scale", owner), _real(offset, "offset", owner)

    def call(self, x, training=False):
        return F.scale(x, self.scale, self.offset)

    def get_config(self):
        return {"scale": self.scale, "offset": self.offset, **super().get_config()}


@register
class Normalization(Layer):
    """``(x - mean) / max(sqrt(variance), 1e-7)`` (``invert=True``: ``mean + x * max(sqrt(variance), 1e-7)``) with
    one mean and variance per index of the ``axis`` kept (Keras': counted with the batch axis, default -1, the
    features; None: one mean and variance for everything). Images here are NCHW: the channels are ``axis=1``.

    ``mean=`` and ``variance=`` give them; otherwise ``adapt(data)`` computes them from a NumPy array (or a batch
    iterable of them) and keeps them as the non-trainable weights ``mean``, ``variance`` and ``count`` (which Keras
    keeps at 0), as Keras."""

    supports_masking = True

    def __init__(self, axis=-1, mean=None, variance=None, invert: bool = False, **kwargs):
        super().__init__(**kwargs)
        owner = f"Normalization {self.name!r}"
        axes = () if axis is None else ((axis,) if isinstance(axis, numbers.Integral) else tuple(axis))
        self.axis = tuple(_checks.integer(a, "axis", owner) for a in axes)
        if any(a == 0 for a in self.axis):
            raise ValueError(f"{owner}: axis 0 is the batch axis, which cannot be kept; expected 1..rank or -1")
        if (mean is None) != (variance is None):
            raise ValueError(f"{owner}: give both mean and variance, or neither (then call adapt(data))")
        self.input_mean = None if mean is None else np.asarray(mean, np.float64)
        self.input_variance = None if variance is None else np.asarray(variance, np.float64)
        if mean is not None and self.input_mean.shape != self.input_variance.shape:
            raise ValueError(f"{owner}: mean and variance must have one shape, got {self.input_mean.shape} and "
                             f"{self.input_variance.shape}")
        if not isinstance(invert, bool):
            raise TypeError(f"{owner}: invert must be True or False, got {invert!r}")
        self.invert = invert
        self.adapted = mean is not None

    def _keep(self, input_shape) -> tuple[int, ...]:
        """The kept axes as per-sample axes (0-based, batch excluded)."""
        ndim = len(input_shape) + 1
        keep = []
        for a in self.axis:
            if not (-ndim <= a < ndim) or a % ndim == 0:
                raise self.shape_error(f"an input with axis {a} (its rank counts the batch)", input_shape)
            keep.append(a % ndim - 1)
        return tuple(sorted(keep))

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)
        keep = self._keep(input_shape)
        kept = int(np.prod([input_shape[d] for d in keep]))
        if self.input_mean is not None and self.input_mean.size not in (1, kept):
            raise self.shape_error(f"features matching the mean of shape {self.input_mean.shape}", input_shape)

    def create_weights(self, input_shape):
        keep = self._keep(input_shape)
        self._kept = tuple(input_shape[d] for d in keep)
        self._broadcast = (1, *(input_shape[d] if d in keep else 1 for d in range(len(input_shape))))
        if self.input_mean is None:
            self.add_weight("mean", self._kept, "zeros", trainable=False)
            self.add_weight("variance", self._kept, "ones", trainable=False)
            self.add_state("count", self.xp.zeros((), np.int64))  # Keras keeps it (always 0) for old files

    def adapt(self, data, batch_size=None, steps=None) -> None:
        """The mean and variance of ``data`` (a NumPy array of batches (N, ...), or an iterable of such batches /
        ``(x, y)`` pairs) over every axis but the kept ones, as Keras' ``adapt``."""
        if self.input_mean is not None:
            raise ValueError(f"Normalization {self.name!r}: mean and variance were given; adapt() would replace "
                             "them (Keras refuses too)")
        data = data.numpy() if isinstance(data, Tensor) else data
        if isinstance(data, (np.ndarray, list, tuple)):
            arrays = [np.asarray(data, np.float64)]
        else:  # a batch iterable
            arrays = [np.asarray(b[0] if isinstance(b, tuple) else b, np.float64) for b in data]
        if not arrays or any(a.ndim < 1 or not a.shape[0] for a in arrays):
            raise ValueError(f"Normalization {self.name!r}: adapt needs a non-empty array of batches (N, ...)")
        x = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
        if not np.isfinite(x).all():
            raise ValueError(f"Normalization {self.name!r}: adapt data must be finite")
        if not self.built:
            self._ensure_built(tuple(x.shape[1:]), "the data")
        elif tuple(x.shape[1:]) != tuple(self.input_shape):
            raise self.shape_error(f"adapt data of per-sample shape {self.input_shape}", tuple(x.shape[1:]))
        keep = {d + 1 for d in self._keep(self.input_shape)}
        reduce = tuple(d for d in range(x.ndim) if d not in keep)
        self.set_weights([x.mean(axis=reduce).reshape(self._kept), x.var(axis=reduce).reshape(self._kept),
                          np.zeros((), np.int64)])
        self.adapted = True

    def _statistics(self):
        xp, dtype = self.xp, self.dtype
        if self.input_mean is not None:
            mean = np.broadcast_to(self.input_mean, self._kept)
            variance = np.broadcast_to(self.input_variance, self._kept)
            return (xp.asarray(np.array(mean, dtype).reshape(self._broadcast)),
                    xp.asarray(np.array(variance, dtype).reshape(self._broadcast)))
        return (xp.reshape(self._params["mean"].data, self._broadcast),
                xp.reshape(self._params["variance"].data, self._broadcast))

    def call(self, x, training=False):
        xp = self.xp
        if self.input_mean is None:
            mean, variance = self._statistics()
        else:  # made once per backend and dtype: a replayed step uploads nothing
            if getattr(self, "_given", (None,))[0] != (xp, self.dtype):
                self._given = ((xp, self.dtype), self._statistics())
            mean, variance = self._given[1]
        spread = Tensor._of(xp.clip(xp.sqrt(variance), EPSILON, np.finfo(np.float32).max), xp)
        mean = Tensor._of(mean, xp)
        if self.invert:
            return mean + x * spread
        return (x - mean) / spread

    def get_config(self):
        config = {"axis": self.axis[0] if len(self.axis) == 1 else (list(self.axis) or None), "invert": self.invert}
        if self.input_mean is not None:
            config.update(mean=self.input_mean.tolist(), variance=self.input_variance.tolist())
        return {**config, **super().get_config()}
